use bento_align::Alignment;
use bento_pages::{
    CommitCache, Decay, FaultyPages, HeapPages, Metered, PageError, PageSource, Phase, Retention,
};

use crate::common::{disjoint, round_trip};
use core::cell::Cell;
use core::ptr::NonNull;

const PAGE: usize = 4096;

/// A cache of `slots` pages that keeps them under `Retention::Eager`: until evicted
/// or trimmed.
fn cache(slots: usize) -> CommitCache<Metered<HeapPages>> {
    let c = CommitCache::with_capacity(Metered::new(HeapPages::new()), slots * PAGE).unwrap();
    c.set_retention(Retention::Eager);
    c
}

/// A cache of `slots` pages under a decay of `frames` frames.
fn decaying(slots: usize, frames: u32) -> CommitCache<Metered<HeapPages>> {
    let c = CommitCache::with_capacity(Metered::new(HeapPages::new()), slots * PAGE).unwrap();
    c.set_retention(Retention::Decay(Decay::frames(frames)));
    c
}

/// A [`cache`] of `slots` pages, and a reservation of `n` pages from it, all
/// committed.
fn committed(slots: usize, n: usize) -> (CommitCache<Metered<HeapPages>>, NonNull<u8>) {
    let pages = cache(slots);
    let base = pages.reserve(n * PAGE, Alignment::MIN).unwrap();
    // SAFETY: the whole of the live reservation, never committed.
    unsafe { pages.commit(base, n * PAGE).unwrap() };
    (pages, base)
}

#[test]
fn round_trips() {
    let pages = cache(16);
    round_trip(&pages);
    disjoint(&pages);
    assert!(
        !pages.decommitted_reads_zero(),
        "parked pages keep their contents"
    );
    // Everything was decommitted and released: once trimmed (which releases the
    // spare reservations), only the slot table is left.
    pages.trim();
    assert_eq!(pages.stats().parked, 0);
    assert_eq!(pages.stats().spares, 0);
    let os = pages.inner().stats();
    assert_eq!(os.committed, PAGE, "only the slot table stays committed");
}

#[test]
fn parked_pages_are_recommitted_without_a_call() {
    let (pages, base) = committed(16, 8);
    // SAFETY: ranges of the live reservation; all decommitted before release.
    unsafe {
        base.add(PAGE).write(7);
        let calls = pages.inner().stats();
        pages.decommit(base, 8 * PAGE);
        pages.commit(base, 8 * PAGE).unwrap();
        let after = pages.inner().stats();
        assert_eq!(
            (after.commits, after.decommits),
            (calls.commits, calls.decommits),
            "no OS call"
        );
        let s = pages.stats();
        assert_eq!((s.parks, s.hits, s.evictions, s.parked), (8, 8, 0, 0));
        // A parked page keeps its contents (so the cache says decommitted memory does
        // not read as zero).
        assert_eq!(base.add(PAGE).read(), 7);
        pages.decommit(base, 8 * PAGE);
        pages.release(base, 8 * PAGE);
    }
    pages.trim();
    assert_eq!(
        pages.inner().stats().reserved,
        PAGE,
        "only the slot table is reserved"
    );
}

#[test]
fn a_partial_hit_commits_the_missing_runs_only() {
    let pages = cache(64);
    let base = pages.reserve(16 * PAGE, Alignment::MIN).unwrap();
    // SAFETY: ranges of the live reservation; all decommitted before release.
    unsafe {
        pages.commit(base.add(4 * PAGE), 2 * PAGE).unwrap();
        pages.commit(base.add(10 * PAGE), PAGE).unwrap();
        pages.decommit(base.add(4 * PAGE), 2 * PAGE);
        pages.decommit(base.add(10 * PAGE), PAGE);
        let before = pages.inner().stats().commits;
        // Pages 0-3 miss, 4-5 hit, 6-9 miss, 10 hits, 11-15 miss: three runs.
        pages.commit(base, 16 * PAGE).unwrap();
        assert_eq!(pages.inner().stats().commits - before, 3);
        let s = pages.stats();
        // Misses include the three pages first committed above.
        assert_eq!((s.hits, s.misses), (3, 3 + 13));
        pages.decommit(base, 16 * PAGE);
        pages.release(base, 16 * PAGE);
    }
}

#[test]
fn pages_a_capacity_apart_are_both_kept() {
    let (pages, base) = committed(4, 8);
    // SAFETY: ranges of the live reservation; all decommitted before release.
    unsafe {
        pages.decommit(base, PAGE);
        pages.decommit(base.add(4 * PAGE), PAGE);
        let s = pages.stats();
        assert_eq!((s.evictions, s.parked), (0, 2 * PAGE), "no collision");
        let calls = pages.inner().stats().commits;
        pages.commit(base, PAGE).unwrap();
        pages.commit(base.add(4 * PAGE), PAGE).unwrap();
        assert_eq!(pages.stats().hits, 2);
        assert_eq!(pages.inner().stats().commits, calls, "both were kept");
        pages.decommit(base, 8 * PAGE);
        pages.release(base, 8 * PAGE);
    }
    pages.trim();
    assert_eq!(pages.inner().stats().committed, PAGE, "only the table");
}

#[test]
fn ranges_longer_than_the_cache_decommit_their_head_directly() {
    let (pages, base) = committed(4, 16);
    // SAFETY: ranges of the live reservation; all decommitted before release.
    unsafe {
        pages.decommit(base, 16 * PAGE);
        let s = pages.stats();
        assert_eq!((s.parks, s.parked), (4, 4 * PAGE));
        assert_eq!(pages.inner().stats().committed, PAGE + 4 * PAGE);
        pages.release(base, 16 * PAGE);
    }
}

#[test]
fn trim_gives_everything_back() {
    let (pages, base) = committed(32, 32);
    // SAFETY: ranges of the live reservation; all decommitted before release.
    unsafe {
        pages.decommit(base, 20 * PAGE);
        assert_eq!(pages.trim(), 20 * PAGE);
        assert_eq!(pages.trim(), 0);
        assert_eq!(pages.inner().stats().committed, PAGE + 12 * PAGE);
        pages.decommit(base.add(20 * PAGE), 12 * PAGE);
        pages.release(base, 32 * PAGE);
    }
    // The released reservation is a spare with its 12 parked pages, until a trim.
    assert_eq!((pages.stats().spares, pages.stats().parked), (1, 12 * PAGE));
    assert_eq!(pages.trim(), 12 * PAGE);
    assert_eq!(pages.stats().parked, 0);
    assert_eq!(pages.inner().stats().reserved, PAGE);
}

#[test]
fn a_failed_commit_leaves_the_range_decommitted() {
    let pages =
        CommitCache::with_capacity(Metered::new(FaultyPages::new(HeapPages::new())), 64 * PAGE)
            .unwrap();
    pages.set_retention(Retention::Eager);
    let faulty = pages.inner().inner();
    let base = pages.reserve(8 * PAGE, Alignment::MIN).unwrap();
    // SAFETY: ranges of the live reservation; all decommitted before release.
    unsafe {
        pages.commit(base.add(2 * PAGE), 2 * PAGE).unwrap();
        pages.decommit(base.add(2 * PAGE), 2 * PAGE);
        // Pages 0-1 miss (one run, committed), 2-3 hit, 4-7 miss (the run that fails).
        faulty.fail_commit(1);
        assert!(matches!(
            pages.commit(base, 8 * PAGE),
            Err(PageError::CommitRefused { .. })
        ));
        // Nothing of the range is committed for the consumer: pages 0-3 went back to
        // the cache, still committed in the source but parked.
        assert_eq!(pages.stats().parked, 4 * PAGE);
        assert_eq!(pages.inner().stats().committed, PAGE + 4 * PAGE);
        // And a retry succeeds.
        pages.commit(base, 8 * PAGE).unwrap();
        pages.decommit(base, 8 * PAGE);
        pages.release(base, 8 * PAGE);
    }
    pages.trim();
    assert_eq!(pages.inner().stats().committed, PAGE);
}

#[test]
fn a_released_reservation_is_kept_whole_for_the_next_reserve_of_its_size() {
    let pages = cache(64);
    let a = pages.reserve(16 * PAGE, Alignment::MIN).unwrap();
    // SAFETY: ranges of the live reservation; all decommitted before release.
    unsafe {
        pages.commit(a, 2 * PAGE).unwrap();
        a.write(9);
        pages.decommit(a, 2 * PAGE);
        pages.release(a, 16 * PAGE);
    }
    let s = pages.stats();
    assert_eq!(
        (s.spares, s.spare_bytes, s.parked),
        (1, 16 * PAGE, 2 * PAGE)
    );
    let os = pages.inner().stats();
    // The same size comes back with no call to the source, its parked pages still
    // parked (so committing them costs no call either).
    let b = pages.reserve(16 * PAGE, Alignment::MIN).unwrap();
    assert_eq!(b, a);
    // SAFETY: the first pages of the live reservation.
    unsafe { pages.commit(b, 2 * PAGE).unwrap() };
    let after = pages.inner().stats();
    assert_eq!(
        (after.reserves, after.commits),
        (os.reserves, os.commits),
        "no call to the source"
    );
    let s = pages.stats();
    assert_eq!((s.spares, s.reuses, s.hits, s.parked), (0, 1, 2, 0));
    // Another size goes to the source.
    // SAFETY: decommitted before release.
    unsafe {
        pages.decommit(b, 2 * PAGE);
        pages.release(b, 16 * PAGE);
    }
    let c = pages.reserve(8 * PAGE, Alignment::MIN).unwrap();
    assert_ne!(c, b);
    assert_eq!(pages.stats().spares, 1);
    // SAFETY: the live reservation, never committed.
    unsafe { pages.release(c, 8 * PAGE) };
    assert_eq!(pages.stats().spares, 2);
    // trim releases the spares (after their parked pages).
    assert_eq!(pages.trim(), 2 * PAGE);
    let os = pages.inner().stats();
    assert_eq!(
        (os.reserved, os.committed),
        (PAGE, PAGE),
        "only the table is left"
    );
    assert_eq!((pages.stats().spares, pages.stats().spare_bytes), (0, 0));
}

#[test]
fn spares_are_bounded_in_number_and_size() {
    let pages = cache(16);
    let bases: Vec<_> = (0..6)
        .map(|_| pages.reserve(4 * PAGE, Alignment::MIN).unwrap())
        .collect();
    let large = pages.reserve(32 * PAGE, Alignment::MIN).unwrap();
    // SAFETY: live reservations, never committed, released once.
    unsafe {
        for &b in &bases {
            pages.release(b, 4 * PAGE);
        }
        pages.release(large, 32 * PAGE);
    }
    let s = pages.stats();
    assert_eq!(
        (s.spares, s.spare_bytes),
        (4, 16 * PAGE),
        "four spares at most"
    );
    // Two small ones and the one larger than the cache went back to the source.
    assert_eq!(pages.inner().stats().reserved, PAGE + 16 * PAGE);
    drop(pages);
}

#[test]
fn dropping_the_cache_releases_its_spares() {
    let metered = Metered::new(HeapPages::new());
    {
        let pages = CommitCache::with_capacity(&metered, 16 * PAGE).unwrap();
        let base = pages.reserve(4 * PAGE, Alignment::MIN).unwrap();
        // SAFETY: the live reservation, committed then decommitted, released once.
        unsafe {
            pages.commit(base, PAGE).unwrap();
            pages.decommit(base, PAGE);
            pages.release(base, 4 * PAGE);
        }
        assert_eq!(pages.stats().spares, 1);
    }
    let s = metered.stats();
    assert_eq!((s.reserved, s.committed), (0, 0));
}

#[test]
fn a_zero_capacity_cache_passes_through() {
    let pages = CommitCache::with_capacity(Metered::new(HeapPages::new()), 0).unwrap();
    round_trip(&pages);
    let os = pages.inner().stats();
    // Each of the four rounds: commit, recommit; decommit the middle, decommit all.
    assert_eq!((os.commits, os.decommits), (8, 8));
    assert_eq!(pages.stats(), Default::default());
}

#[test]
fn drop_returns_everything() {
    let source = Metered::new(HeapPages::new());
    {
        let pages = CommitCache::with_capacity(&source, 8 * PAGE).unwrap();
        let base = pages.reserve(4 * PAGE, Alignment::MIN).unwrap();
        // SAFETY: the live reservation, decommitted (parked) before release.
        unsafe {
            pages.commit(base, 4 * PAGE).unwrap();
            pages.decommit(base, 4 * PAGE);
        }
        // Leave a parked page of a live reservation behind, then drop the cache.
        let other = pages.reserve(PAGE, Alignment::MIN).unwrap();
        // SAFETY: as above.
        unsafe {
            pages.commit(other, PAGE).unwrap();
            pages.decommit(other, PAGE);
            pages.release(base, 4 * PAGE);
            pages.release(other, PAGE);
        }
    }
    let s = source.stats();
    assert_eq!((s.reserved, s.committed), (0, 0));
}

#[test]
fn a_cache_at_its_limit_decommits_in_the_source() {
    let pages = cache(16);
    let base = pages.reserve(8 * PAGE, Alignment::MIN).unwrap();
    pages.set_limit(3 * PAGE);
    assert_eq!(pages.stats().limit, 3 * PAGE);
    // SAFETY: ranges of the live reservation; everything is decommitted before the
    // release.
    unsafe {
        pages.commit(base, 8 * PAGE).unwrap();
        let before = pages.inner().stats();
        pages.decommit(base, 8 * PAGE);
        let after = pages.inner().stats();
        // Three pages parked, the other five given back in one call.
        assert_eq!(pages.stats().parked, 3 * PAGE);
        assert_eq!(after.committed, before.committed - 5 * PAGE);
        assert_eq!(after.decommits, before.decommits + 1);
        // A lower limit gives back what is parked beyond it; a higher one parks more.
        pages.set_limit(PAGE);
        assert_eq!(pages.stats().parked, PAGE);
        pages.set_limit(1 << 30);
        assert_eq!(pages.stats().limit, 16 * PAGE, "at most the capacity");
        pages.trim();
        pages.release(base, 8 * PAGE);
    }
    assert_eq!(pages.inner().stats().committed, PAGE, "only the slot table");
}

/// Over a source of fixed size, the spares can hold what a reserve needs: the cache
/// gives them back and asks again, so keeping them never makes a reserve fail.
#[test]
fn a_reserve_the_spares_stand_in_the_way_of_gets_them_back() {
    crate::fixed::with_fixed(64, 0, |fixed| {
        // One page of the 64 goes to the cache's slot table.
        let pages = CommitCache::with_capacity(fixed, 32 * PAGE).unwrap();
        let a = pages.reserve(32 * PAGE, Alignment::MIN).unwrap();
        // SAFETY: the live reservation, committed then decommitted, released once.
        unsafe {
            pages.commit(a, PAGE).unwrap();
            pages.decommit(a, PAGE);
            pages.release(a, 32 * PAGE);
        }
        assert_eq!(pages.stats().spares, 1);
        // 48 pages fit the buffer only without the spare.
        let b = pages.reserve(48 * PAGE, Alignment::MIN).unwrap();
        let s = pages.stats();
        assert_eq!((s.spares, s.parked), (0, 0));
        // SAFETY: the live reservation, never committed.
        unsafe { pages.release(b, 48 * PAGE) };
        pages.trim();
    });
}

/// Commits `n` pages at `base`, writes a mark on each, and decommits them: they are
/// kept.
///
/// # Safety
///
/// `[base, base + n pages)` lies in a live reservation of `pages`, decommitted.
unsafe fn use_and_free<P: PageSource>(pages: &P, base: NonNull<u8>, n: usize) {
    // SAFETY: the caller's contract.
    unsafe {
        pages.commit(base, n * PAGE).unwrap();
        for k in 0..n {
            base.add(k * PAGE).write(k as u8);
        }
        pages.decommit(base, n * PAGE);
    }
}

/// A cache of 64 pages under `retention`, and a reservation of 16 pages from it.
fn reserved(retention: Retention) -> (CommitCache<Metered<HeapPages>>, NonNull<u8>) {
    let pages = CommitCache::with_capacity(Metered::new(HeapPages::new()), 64 * PAGE).unwrap();
    pages.set_retention(retention);
    let base = pages.reserve(16 * PAGE, Alignment::MIN).unwrap();
    (pages, base)
}

/// [`reserved`], with the first `kept` pages of the reservation used and freed: kept.
fn keeping(retention: Retention, kept: usize) -> (CommitCache<Metered<HeapPages>>, NonNull<u8>) {
    assert!(kept <= 16, "more pages than the reservation");
    let (pages, base) = reserved(retention);
    // SAFETY: the first `kept` pages of the live reservation, never committed.
    unsafe { use_and_free(&pages, base, kept) };
    (pages, base)
}

#[test]
fn kept_pages_go_back_after_the_decay_time_unused() {
    let (pages, base) = keeping(Retention::Decay(Decay::frames(4)), 8);
    // SAFETY: ranges of the live reservation; all decommitted before release.
    unsafe {
        assert_eq!(pages.stats().parked, 8 * PAGE, "kept");
        let calls = pages.inner().stats().decommits;
        // A decay of 4 frames steps every 2: nothing was kept since, so the pages,
        // unused for half the decay time, go back at the first step (frame 2).
        assert_eq!(pages.tick(), 0, "frame 1: still kept");
        assert_eq!(pages.stats().parked, 8 * PAGE);
        assert_eq!(pages.tick(), 8 * PAGE, "frame 2: given back");
        let s = pages.stats();
        assert_eq!((s.parked, s.purged, s.decays), (0, 8 * PAGE, 1));
        assert_eq!(
            pages.inner().stats().decommits,
            calls + 8,
            "one call a page: HeapPages decommits never span"
        );
        pages.validate().unwrap();
        pages.release(base, 16 * PAGE);
    }
}

/// While other pages keep being kept, a page goes back at the second step after it
/// was kept: unused for between half the decay time and all of it.
#[test]
fn among_busy_pages_an_unused_one_goes_within_the_decay_time() {
    // A cap far above the peak, so that nothing goes back for room.
    let (pages, base) = reserved(Retention::Decay(Decay::frames(4).with_peak_percent(1000)));
    // SAFETY: ranges of the live reservation; all decommitted before release.
    unsafe {
        pages.tick();
        use_and_free(&pages, base, 4);
        let mut frames = 0;
        while pages.stats().parked >= 4 * PAGE {
            frames += 1;
            assert!(frames <= 4, "kept past the decay time");
            // Another page is kept every frame.
            use_and_free(&pages, base.add(8 * PAGE), 1);
            pages.tick();
        }
        assert!(
            frames > 2,
            "given back before half the decay time: {frames}"
        );
        pages.trim();
        pages.release(base, 16 * PAGE);
    }
}

#[test]
fn a_page_reused_before_it_decays_stays() {
    let (pages, base) = keeping(Retention::Decay(Decay::frames(4)), 4);
    // SAFETY: ranges of the live reservation; all decommitted before release.
    unsafe {
        for _ in 0..40 {
            // Each frame takes the pages back and frees them again: never unused for
            // a whole decay time, never given back.
            pages.tick();
            pages.commit(base, 4 * PAGE).unwrap();
            pages.decommit(base, 4 * PAGE);
        }
        let s = pages.stats();
        assert_eq!((s.hits, s.purged, s.parked), (40 * 4, 0, 4 * PAGE));
        assert_eq!(
            pages.inner().stats().commits,
            2,
            "the table and the first use"
        );
        pages.validate().unwrap();
        pages.trim();
        pages.release(base, 16 * PAGE);
    }
}

#[test]
fn load_and_unload_hold_the_decay_and_play_starts_it_again() {
    let (pages, base) = reserved(Retention::Decay(Decay::frames(200)));
    // SAFETY: ranges of the live reservation; all decommitted before release.
    unsafe {
        pages.phase(Phase::Unload);
        use_and_free(&pages, base, 8);
        pages.phase(Phase::Load);
        for _ in 0..150 {
            pages.tick();
        }
        assert_eq!(pages.stats().parked, 8 * PAGE, "held through the load");
        pages.phase(Phase::Play);
        for _ in 0..99 {
            pages.tick();
        }
        assert_eq!(
            pages.stats().parked,
            8 * PAGE,
            "the held frames did not count"
        );
        pages.tick();
        assert_eq!(pages.stats().parked, 0, "decayed in play");
        pages.validate().unwrap();
        pages.release(base, 16 * PAGE);
    }
}

/// Levels shorter than the decay time: the clock stops through each load and
/// unload but runs on across the levels' play, so what no level takes back goes:
/// the cycle after the one that needed it.
#[test]
fn the_decay_clock_runs_across_levels_shorter_than_it() {
    let (pages, base) = keeping(Retention::Decay(Decay::frames(8)), 4);
    // SAFETY: ranges of the live reservation; all decommitted before release.
    unsafe {
        let mut levels = 0;
        while pages.stats().parked > 0 {
            levels += 1;
            assert!(levels <= 4, "never decayed");
            pages.phase(Phase::Play);
            pages.tick();
            pages.tick();
            pages.tick();
            pages.phase(Phase::Unload);
            for _ in 0..6 {
                pages.tick(); // held (less than a decay time): these do not count
            }
            pages.phase(Phase::Load);
        }
        // Steps every 4 frames of play. The first load keeps what the cycle before
        // it needed (the 4 pages) through the second level; the second load finds a
        // cycle that needed none, so they go at the first step of the third level.
        assert_eq!(levels, 3);
        pages.release(base, 16 * PAGE);
    }
}

/// What a level needs stays between levels shorter than the decay time while levels
/// keep loading: a load's buffers, freed when play begins, are there for the next
/// load. Once loads stop, they go a decay time after the last one.
#[test]
fn what_a_level_needs_stays_for_the_next_one() {
    let (pages, base) = reserved(Retention::Decay(Decay::frames(8)));
    // SAFETY: ranges of the live reservation; all decommitted before release.
    unsafe {
        for level in 0..6 {
            pages.phase(Phase::Load);
            pages.commit(base, 4 * PAGE).unwrap();
            pages.phase(Phase::Play);
            pages.decommit(base, 4 * PAGE);
            // Each level plays 6 frames, the buffers unused: long enough for two
            // decay steps (one every 4 frames), which give back what they find kept.
            for _ in 0..6 {
                pages.tick();
            }
            // The first level's play gives them back: no cycle before it needed
            // them. From the second on, the last cycle's need keeps them.
            let want = if level == 0 { 0 } else { 4 * PAGE };
            assert_eq!(pages.stats().parked, want, "level {level}");
            pages.phase(Phase::Unload);
        }
        // Committed afresh by the first two levels only; the others took them back.
        assert_eq!(pages.stats().misses, 8);
        // No more loads: a decay time later nothing is kept.
        pages.phase(Phase::Play);
        for _ in 0..12 {
            pages.tick();
        }
        assert_eq!(pages.stats().parked, 0);
        pages.release(base, 16 * PAGE);
    }
}

/// Under a decay, large reservations are rounded up to a size class (two an octave),
/// so that one released serves the next of its class.
#[test]
fn large_reservations_are_rounded_to_classes_that_serve_each_other() {
    let pages = decaying(256, 100);
    let reserved = pages.inner().stats().reserved;
    let a = pages.reserve(300 << 10, Alignment::MIN).unwrap();
    assert_eq!(
        pages.inner().stats().reserved - reserved,
        384 << 10,
        "1.5 x 256 KiB"
    );
    // SAFETY: the live reservation, never committed, released once with its size.
    unsafe { pages.release(a, 300 << 10) };
    assert_eq!(pages.stats().spare_bytes, 384 << 10, "kept whole");
    let b = pages.reserve(380 << 10, Alignment::MIN).unwrap();
    assert_eq!(a, b, "the class serves the next one");
    // SAFETY: as above.
    unsafe { pages.release(b, 380 << 10) };
    pages.validate().unwrap();
    pages.trim();
    assert_eq!(pages.inner().stats().reserved, reserved);
    // Eager: exact sizes.
    let eager = cache(256);
    let reserved = eager.inner().stats().reserved;
    let a = eager.reserve(300 << 10, Alignment::MIN).unwrap();
    assert_eq!(eager.inner().stats().reserved - reserved, 300 << 10);
    // SAFETY: as above.
    unsafe { eager.release(a, 300 << 10) };
}

/// A hold lasts one decay time at most: a program that unloads and never plays again
/// still gets its memory back.
#[test]
fn a_hold_never_says_play_and_still_decays() {
    let (pages, base) = reserved(Retention::Decay(Decay::frames(4)));
    // SAFETY: ranges of the live reservation; all decommitted before release.
    unsafe {
        pages.tick();
        pages.phase(Phase::Unload);
        use_and_free(&pages, base, 4);
        for _ in 0..3 {
            pages.tick();
        }
        assert_eq!(pages.stats().parked, 4 * PAGE, "held");
        for _ in 0..8 {
            pages.tick();
        }
        assert_eq!(pages.stats().parked, 0, "the hold ran out");
        pages.release(base, 16 * PAGE);
    }
}

#[test]
fn spares_decay_like_pages() {
    let pages = decaying(64, 2);
    let base = pages.reserve(8 * PAGE, Alignment::MIN).unwrap();
    // SAFETY: the live reservation, its pages decommitted before the release.
    unsafe {
        use_and_free(&pages, base, 8);
        pages.release(base, 8 * PAGE);
    }
    assert_eq!(pages.stats().spares, 1);
    let reserved = pages.inner().stats().reserved;
    pages.tick();
    pages.tick();
    let s = pages.stats();
    assert_eq!(
        (s.spares, s.parked),
        (0, 0),
        "the spare and its pages went back"
    );
    assert_eq!(pages.inner().stats().reserved, reserved - 8 * PAGE);
    assert_eq!(pages.inner().stats().committed, PAGE, "only the table");
    pages.validate().unwrap();
}

#[test]
fn committed_and_kept_stay_within_the_peak() {
    let pages = decaying(256, 1000);
    // The table: 512 slots and their occupancy bits, a page and a bit more.
    let table = pages.inner().stats().committed;
    assert_eq!(table, 2 * PAGE);
    let a = pages.reserve(64 * PAGE, Alignment::MIN).unwrap();
    let b = pages.reserve(64 * PAGE, Alignment::MIN).unwrap();
    // SAFETY: ranges of live reservations; all decommitted before release.
    unsafe {
        // A peak of 64 pages, all freed: kept.
        use_and_free(&pages, a, 64);
        assert_eq!(pages.stats().parked, 64 * PAGE);
        // 24 pages elsewhere: what is committed through the cache stays within the
        // peak, so kept pages go back (a batch of 16 more than needed).
        pages.commit(b, 24 * PAGE).unwrap();
        let s = pages.stats();
        assert!(s.parked + s.committed <= s.peak, "{s:?}");
        assert_eq!(
            s.parked,
            (64 - 24 - 16) * PAGE,
            "no more than a batch beyond: {s:?}"
        );
        assert_eq!(s.peak, 64 * PAGE);
        let os = pages.inner().stats();
        assert_eq!(os.committed - table, s.parked + s.committed, "nothing lost");
        pages.validate().unwrap();
        pages.decommit(b, 24 * PAGE);
        pages.trim();
        pages.release(a, 64 * PAGE);
        pages.release(b, 64 * PAGE);
    }
    pages.trim();
    assert_eq!(pages.inner().stats().committed, table);
}

thread_local! {
    /// The clock of the tests that decay in milliseconds: each test thread reads its
    /// own.
    static NOW: Cell<u64> = const { Cell::new(0) };
}

/// The test thread's clock, in milliseconds.
fn now() -> u64 {
    NOW.get()
}

/// [`keeping`] four pages under a decay of `frames` frames or `millis` milliseconds
/// of [`now`], which starts at `start`.
fn clocked(frames: u32, millis: u32, start: u64) -> (CommitCache<Metered<HeapPages>>, NonNull<u8>) {
    NOW.set(start);
    let decay = Decay {
        millis,
        clock: Some(now),
        ..Decay::frames(frames)
    };
    keeping(Retention::Decay(decay), 4)
}

#[test]
fn a_decay_in_milliseconds_reads_the_clock() {
    let (pages, base) = clocked(0, 100, 1_000);
    NOW.set(1_049);
    assert_eq!(pages.tick(), 0, "49 ms: no step yet");
    NOW.set(1_050);
    assert_eq!(pages.tick(), 4 * PAGE, "50 ms unused: given back");
    // SAFETY: the live reservation, all of it decommitted.
    unsafe { pages.release(base, 16 * PAGE) };
}

/// `decay` reads the clock for a program that does not tick; once it ticks, frames
/// rule and `decay` does nothing.
#[test]
fn decay_looks_at_the_clock_until_the_program_ticks() {
    let (pages, base) = clocked(1000, 10, 0);
    NOW.set(4);
    assert_eq!(pages.decay(), 0, "4 ms: too soon");
    NOW.set(5);
    assert_eq!(pages.decay(), 4 * PAGE, "5 ms unused: given back");
    // SAFETY: ranges of the live reservation; all decommitted before release.
    unsafe {
        use_and_free(&pages, base, 4);
        pages.tick();
        NOW.set(1000);
        assert_eq!(pages.decay(), 0, "the program ticks: frames rule");
        assert_eq!(pages.stats().parked, 4 * PAGE);
        pages.trim();
        pages.release(base, 16 * PAGE);
    }
}

#[test]
fn eager_keeps_no_more_than_its_limit_and_never_decays() {
    let pages = cache(64);
    pages.set_limit(4 * PAGE);
    let base = pages.reserve(16 * PAGE, Alignment::MIN).unwrap();
    // SAFETY: ranges of the live reservation; all decommitted before release.
    unsafe {
        use_and_free(&pages, base, 16);
        for _ in 0..100 {
            pages.tick();
        }
        let s = pages.stats();
        assert_eq!((s.parked, s.purged), (4 * PAGE, 0));
        pages.validate().unwrap();
        pages.trim();
        pages.release(base, 16 * PAGE);
    }
}

/// A random mix of every call over a source that refuses commits at random: after
/// each step the cache validates, every page the consumer holds keeps what it
/// wrote, and the source holds exactly the table, the consumer's pages and the kept
/// ones: a kept page is never lost, whether a commit taking it fails or not.
#[test]
fn random_calls_over_a_failing_source_lose_nothing() {
    // Under Miri (which interprets every step and validation) fewer.
    let (cases, len) = if cfg!(miri) { (2, 512) } else { (24, 4096) };
    for case in 0..cases {
        let bytes = bento_testkit::seeded_bytes(case, len);
        let pages =
            CommitCache::with_capacity(Metered::new(FaultyPages::new(HeapPages::new())), 32 * PAGE)
                .unwrap();
        if case % 3 == 0 {
            pages.set_retention(Retention::Eager);
            pages.set_limit(12 * PAGE);
        } else {
            pages.set_retention(Retention::Decay(Decay::frames(1 + case as u32 % 5)));
        }
        // Four reservations of 16 pages; `held[r][k]`: the consumer's page, and its mark.
        let mut bases: Vec<Option<NonNull<u8>>> = vec![None; 4];
        let mut held = [[None::<u8>; 16]; 4];
        for (step, w) in bytes.chunks_exact(4).enumerate() {
            let r = w[1] as usize % 4;
            let (k, n) = (w[2] as usize % 16, 1 + w[3] as usize % 4);
            let n = n.min(16 - k);
            // SAFETY: every range is inside reservation `r`; commits take decommitted
            // pages only, decommits committed ones, releases whole decommitted
            // reservations.
            unsafe {
                match (w[0] % 8, bases[r]) {
                    (_, None) => bases[r] = pages.reserve(16 * PAGE, Alignment::MIN).ok(),
                    (0 | 1, Some(base)) if held[r][k..k + n].iter().all(Option::is_none) => {
                        if w[3] & 0x80 != 0 {
                            pages.inner().inner().fail_commit(1);
                        }
                        if pages.commit(base.add(k * PAGE), n * PAGE).is_ok() {
                            for (j, h) in held[r].iter_mut().enumerate().skip(k).take(n) {
                                base.add(j * PAGE).write(step as u8);
                                *h = Some(step as u8);
                            }
                        }
                        pages.inner().inner().heal();
                    }
                    (2 | 3, Some(base)) if held[r][k..k + n].iter().all(Option::is_some) => {
                        for (j, h) in held[r].iter_mut().enumerate().skip(k).take(n) {
                            assert_eq!(Some(base.add(j * PAGE).read()), h.take());
                        }
                        pages.decommit(base.add(k * PAGE), n * PAGE);
                    }
                    (4, Some(base)) if held[r].iter().all(Option::is_none) => {
                        pages.release(base, 16 * PAGE);
                        bases[r] = None;
                    }
                    (5, _) => {
                        pages.tick();
                    }
                    (6, _) if w[3] < 16 => {
                        pages.trim();
                    }
                    (6, _) => pages.phase(match w[3] % 3 {
                        0 => Phase::Load,
                        1 => Phase::Play,
                        _ => Phase::Unload,
                    }),
                    _ => {}
                }
            }
            let s = pages
                .validate()
                .unwrap_or_else(|e| panic!("case {case} step {step}: {e}"));
            let mine = held.iter().flatten().filter(|h| h.is_some()).count() * PAGE;
            assert_eq!(s.committed, mine, "case {case} step {step}");
            assert_eq!(
                pages.inner().stats().committed,
                PAGE + mine + s.parked,
                "case {case} step {step}: the source holds the table, ours and the kept"
            );
        }
        for (r, base) in bases.iter().enumerate() {
            if let Some(base) = *base {
                for (k, h) in held[r].iter_mut().enumerate() {
                    if h.take().is_some() {
                        // SAFETY: a page the consumer holds, given back once.
                        unsafe { pages.decommit(base.add(k * PAGE), PAGE) };
                    }
                }
                // SAFETY: all of it decommitted now.
                unsafe { pages.release(base, 16 * PAGE) };
            }
        }
        pages.trim();
        assert_eq!(pages.inner().stats().committed, PAGE, "case {case}");
        assert_eq!(pages.inner().stats().reserved, PAGE, "case {case}");
    }
}

#[test]
fn a_spare_up_to_four_times_larger_serves_a_smaller_reserve_under_decay() {
    let pages = decaying(64, 100);
    let base = pages.reserve(8 * PAGE, Alignment::MIN).unwrap();
    // SAFETY: the live reservation, never committed, released once.
    unsafe { pages.release(base, 8 * PAGE) };
    let reserved = pages.inner().stats().reserved;
    // Seven pages: the eight-page spare serves.
    let again = pages.reserve(7 * PAGE, Alignment::MIN).unwrap();
    assert_eq!(again, base);
    assert_eq!(
        pages.inner().stats().reserved,
        reserved,
        "no call to the source"
    );
    // SAFETY: the consumer's reservation of seven pages, released once: the cache
    // takes back the whole eight.
    unsafe { pages.release(again, 7 * PAGE) };
    let s = pages.stats();
    assert_eq!((s.spares, s.spare_bytes, s.reuses), (1, 8 * PAGE, 1));
    // One page: too small for it (8 > 4 * 1).
    let other = pages.reserve(PAGE, Alignment::MIN).unwrap();
    assert_ne!(other, base);
    // SAFETY: as above.
    unsafe { pages.release(other, PAGE) };
    pages.validate().unwrap();
    pages.trim();
    assert_eq!(pages.inner().stats().reserved, PAGE, "only the table");

    // Eager: exact sizes only.
    let eager = cache(64);
    let base = eager.reserve(8 * PAGE, Alignment::MIN).unwrap();
    // SAFETY: as above.
    unsafe { eager.release(base, 8 * PAGE) };
    let other = eager.reserve(7 * PAGE, Alignment::MIN).unwrap();
    assert_ne!(other, base);
    // SAFETY: as above.
    unsafe { eager.release(other, 7 * PAGE) };
}
