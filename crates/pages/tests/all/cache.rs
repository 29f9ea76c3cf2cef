use bento_align::Alignment;
use bento_pages::{CommitCache, FaultyPages, HeapPages, Metered, PageError, PageSource};

use crate::common::{disjoint, round_trip};

const PAGE: usize = 4096;

fn cache(slots: usize) -> CommitCache<Metered<HeapPages>> {
    CommitCache::with_capacity(Metered::new(HeapPages::new()), slots * PAGE).unwrap()
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
    let pages = cache(16);
    let base = pages.reserve(8 * PAGE, Alignment::MIN).unwrap();
    // SAFETY: ranges of the live reservation; all decommitted before release.
    unsafe {
        pages.commit(base, 8 * PAGE).unwrap();
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
fn pages_mapping_to_the_same_slot_evict() {
    let pages = cache(4);
    let base = pages.reserve(8 * PAGE, Alignment::MIN).unwrap();
    // SAFETY: ranges of the live reservation; all decommitted before release.
    unsafe {
        pages.commit(base, 8 * PAGE).unwrap();
        // Page k and page k + 4 share a slot.
        pages.decommit(base, PAGE);
        let decommits = pages.inner().stats().decommits;
        pages.decommit(base.add(4 * PAGE), PAGE);
        assert_eq!(pages.stats().evictions, 1);
        assert_eq!(
            pages.inner().stats().decommits,
            decommits + 1,
            "the evicted page is truly decommitted"
        );
        // Page 0 was evicted: committing it again is a miss.
        pages.commit(base, PAGE).unwrap();
        assert_eq!(pages.stats().hits, 0);
        pages.decommit(base, PAGE);
        pages.decommit(base.add(PAGE), 3 * PAGE);
        pages.decommit(base.add(5 * PAGE), 3 * PAGE);
        pages.release(base, 8 * PAGE);
    }
    assert_eq!(pages.inner().stats().committed, PAGE, "only the slot table");
}

#[test]
fn ranges_longer_than_the_cache_decommit_their_head_directly() {
    let pages = cache(4);
    let base = pages.reserve(16 * PAGE, Alignment::MIN).unwrap();
    // SAFETY: ranges of the live reservation; all decommitted before release.
    unsafe {
        pages.commit(base, 16 * PAGE).unwrap();
        pages.decommit(base, 16 * PAGE);
        let s = pages.stats();
        assert_eq!((s.parks, s.parked), (4, 4 * PAGE));
        assert_eq!(pages.inner().stats().committed, PAGE + 4 * PAGE);
        pages.release(base, 16 * PAGE);
    }
}

#[test]
fn trim_gives_everything_back() {
    let pages = cache(32);
    let base = pages.reserve(32 * PAGE, Alignment::MIN).unwrap();
    // SAFETY: ranges of the live reservation; all decommitted before release.
    unsafe {
        pages.commit(base, 32 * PAGE).unwrap();
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
