//! `LimitedPages`, fixed memory over a large address space: reserving always works, a
//! commit past the limit is refused and leaves nothing behind, threads never claim
//! past it together, and a commit cache above it gives its kept pages up before a
//! commit fails.

use core::ptr::NonNull;

use bento_align::Alignment;
use bento_pages::{
    CommitCache, Decay, HeapPages, LimitedPages, Metered, PageError, PageSource, Retention,
};

use crate::common::{disjoint, round_trip};

const PAGE: usize = 4096;

#[test]
fn round_trips_under_a_roomy_limit() {
    let pages = LimitedPages::new(HeapPages::new(), 1 << 30);
    round_trip(&pages);
    disjoint(&pages);
    let s = pages.stats();
    assert_eq!((s.committed, s.refused), (0, 0));
    assert!(s.peak > 0);
}

#[test]
fn a_commit_past_the_limit_is_refused_and_leaves_nothing_committed() {
    let pages = LimitedPages::new(Metered::new(HeapPages::new()), 3 * PAGE);
    // Far more address space than the limit: reserving is not what fixed memory bounds.
    let base = pages.reserve(64 * PAGE, Alignment::MIN).unwrap();
    // SAFETY: ranges of the live reservation; all decommitted before release.
    unsafe {
        pages.commit(base, 2 * PAGE).unwrap();
        let err = pages.commit(base.add(2 * PAGE), 2 * PAGE).unwrap_err();
        assert_eq!(
            err,
            PageError::OverLimit {
                size: 2 * PAGE,
                limit: 3 * PAGE
            }
        );
        assert!(err.to_string().contains("over the limit"), "{err}");
        // The source behind was not asked.
        assert_eq!(pages.inner().stats().committed, 2 * PAGE);
        pages.commit(base.add(2 * PAGE), PAGE).unwrap();
        let s = pages.stats();
        assert_eq!(
            (s.committed, s.peak, s.refused, s.refused_bytes),
            (3 * PAGE, 3 * PAGE, 1, 2 * PAGE)
        );
        // A lower limit refuses more but takes nothing away.
        pages.set_limit(PAGE);
        assert!(pages.commit(base.add(8 * PAGE), PAGE).is_err());
        pages.decommit(base, 3 * PAGE);
        pages.commit(base.add(8 * PAGE), PAGE).unwrap();
        pages.decommit(base.add(8 * PAGE), PAGE);
        pages.release(base, 64 * PAGE);
    }
    assert_eq!(pages.inner().stats().committed, 0);
    pages.reset_peak();
    assert_eq!(
        pages.stats(),
        bento_pages::LimitStats {
            limit: PAGE,
            ..Default::default()
        }
    );
}

/// Threads commit and decommit their own pages through one limit: the peak never
/// passes it, some commits are refused, and the stats end at zero.
#[test]
fn threads_never_claim_past_the_limit_together() {
    let threads = 4;
    let rounds = if cfg!(miri) { 20 } else { 2000 };
    let pages = LimitedPages::new(HeapPages::new(), 5 * PAGE);
    let base = pages.reserve(threads * 2 * PAGE, Alignment::MIN).unwrap();
    std::thread::scope(|scope| {
        for t in 0..threads {
            let pages = &pages;
            // SAFETY: pages `2t..2t + 2` of the live reservation.
            let mine = Page(unsafe { base.add(t * 2 * PAGE) });
            scope.spawn(move || {
                let mine = mine.get();
                for _ in 0..rounds {
                    // SAFETY: this thread's two pages of the live reservation, each
                    // decommitted after its commit.
                    unsafe {
                        if pages.commit(mine, 2 * PAGE).is_ok() {
                            mine.write(t as u8);
                            assert_eq!(mine.read(), t as u8);
                            pages.decommit(mine, 2 * PAGE);
                        }
                    }
                }
            });
        }
    });
    let s = pages.stats();
    assert_eq!(s.committed, 0);
    assert!(s.peak <= 5 * PAGE, "{s:?}");
    // SAFETY: the live reservation, nothing committed.
    unsafe { pages.release(base, threads * 2 * PAGE) };
}

/// A thread's own pages of a shared reservation.
struct Page(NonNull<u8>);

// SAFETY: each thread's pages are its own; the pointer only crosses to that thread.
unsafe impl Send for Page {}

impl Page {
    /// The pointer (a method, so that a closure takes the whole `Page`).
    fn get(self) -> NonNull<u8> {
        self.0
    }
}

type Cache = CommitCache<LimitedPages<Metered<HeapPages>>>;

/// A cache of 32 pages over a limit of `limit` pages beyond the cache's table.
fn fixed(limit: usize, retention: Retention) -> (Cache, usize) {
    // The table is committed through the source first: measure it, then set the limit.
    let cache = CommitCache::with_capacity(
        LimitedPages::new(Metered::new(HeapPages::new()), usize::MAX),
        32 * PAGE,
    )
    .unwrap();
    let table = cache.inner().stats().committed;
    cache.inner().set_limit(table + limit * PAGE);
    cache.set_retention(retention);
    (cache, table)
}

#[test]
fn kept_pages_are_given_up_before_a_commit_fails() {
    for retention in [
        Retention::Eager,
        Retention::Decay(Decay::frames(600).with_peak_percent(1000)),
    ] {
        let (cache, table) = fixed(8, retention);
        let base = cache.reserve(32 * PAGE, Alignment::MIN).unwrap();
        // SAFETY: ranges of the live reservation; all decommitted before release.
        unsafe {
            cache.commit(base, 8 * PAGE).unwrap();
            cache.decommit(base, 8 * PAGE);
            assert_eq!(cache.stats().parked, 8 * PAGE, "{retention:?}: kept");
            // Another range of the whole limit: the kept pages make way.
            let other = base.add(16 * PAGE);
            cache.commit(other, 8 * PAGE).unwrap();
            other.add(7 * PAGE).write(9);
            let s = cache.stats();
            assert_eq!((s.parked, s.given_up, s.refused), (0, 8 * PAGE, 0), "{s:?}");
            assert_eq!(cache.inner().stats().refused, 1, "asked once, refused once");
            // Nothing kept and the limit reached: refused, counted, nothing lost.
            assert!(cache.commit(base, PAGE).is_err());
            let s = cache.validate().unwrap();
            assert_eq!((s.refused, s.committed), (1, 8 * PAGE));
            assert_eq!(other.add(7 * PAGE).read(), 9);
            cache.decommit(other, 8 * PAGE);
            cache.trim();
            cache.release(base, 32 * PAGE);
        }
        assert_eq!(cache.inner().stats().committed, table);
    }
}

/// A range whose own pages are partly kept: they are taken as hits, the rest of the
/// kept pages make way for the missing ones.
#[test]
fn a_range_keeps_its_own_kept_pages_while_others_make_way() {
    let (cache, _) = fixed(6, Retention::Eager);
    let base = cache.reserve(32 * PAGE, Alignment::MIN).unwrap();
    // SAFETY: ranges of the live reservation; all decommitted before release.
    unsafe {
        cache.commit(base, 6 * PAGE).unwrap();
        for k in 0..6 {
            base.add(k * PAGE).write(k as u8 + 1);
        }
        cache.decommit(base, 6 * PAGE);
        // Pages 2..8: 2..6 are kept (hits that keep their contents), 6..8 need room,
        // which pages 0 and 1 give up.
        cache.commit(base.add(2 * PAGE), 6 * PAGE).unwrap();
        for k in 2..6 {
            assert_eq!(base.add(k * PAGE).read(), k as u8 + 1, "page {k} kept");
        }
        let s = cache.stats();
        assert_eq!((s.given_up, s.hits, s.refused), (2 * PAGE, 4, 0), "{s:?}");
        cache.decommit(base.add(2 * PAGE), 6 * PAGE);
        cache.trim();
        cache.release(base, 32 * PAGE);
    }
}

/// Random commits and decommits of page runs through a cache over fixed memory: a
/// commit is refused only when what the consumer holds leaves no room for it (never
/// because of what the cache keeps), every page the consumer holds keeps what it
/// wrote, and the cache validates after every step.
#[test]
fn random_calls_in_fixed_memory_are_refused_only_when_the_consumer_fills_it() {
    let (cases, steps) = if cfg!(miri) { (2, 60) } else { (40, 2000) };
    let (mut given_up, mut refused) = (0, 0);
    for case in 0..cases {
        let bytes = bento_testkit::seeded_bytes(case, 2 * steps);
        let retention = if case % 2 == 0 {
            Retention::Eager
        } else {
            Retention::Decay(Decay::frames(1 + case as u32 % 7).with_peak_percent(400))
        };
        let limit = 4 + case % 12;
        let (cache, table) = fixed(limit, retention);
        let base = cache.reserve(32 * PAGE, Alignment::MIN).unwrap();
        // Which of the 32 pages the consumer holds committed, and what it wrote.
        let mut held = [None::<u8>; 32];
        for (step, pair) in bytes.chunks(2).enumerate() {
            let (first, len) = (pair[0] as usize % 32, 1 + pair[1] as usize % 4);
            let len = len.min(32 - first);
            let range = first..first + len;
            let at = |k: usize| -> NonNull<u8> {
                // SAFETY: page `k < 32` of the live reservation.
                unsafe { base.add(k * PAGE) }
            };
            if held[range.clone()].iter().all(Option::is_none) {
                let holding = held.iter().flatten().count();
                // SAFETY: pages of the live reservation that the consumer does not
                // hold committed.
                match unsafe { cache.commit(at(first), len * PAGE) } {
                    Ok(()) => {
                        for k in range {
                            let v = (step as u8) ^ (k as u8);
                            // SAFETY: committed just above.
                            unsafe { at(k).write(v) };
                            held[k] = Some(v);
                        }
                    }
                    Err(e) => assert!(
                        holding + len > limit,
                        "case {case} step {step}: {e} with {holding} pages held, {len} asked, \
                         a limit of {limit}: {:?}",
                        cache.stats()
                    ),
                }
            } else if held[range.clone()].iter().all(Option::is_some) {
                for k in range.clone() {
                    // SAFETY: held committed by the consumer.
                    assert_eq!(Some(unsafe { at(k).read() }), held[k], "page {k}");
                    held[k] = None;
                }
                // SAFETY: held committed by the consumer, now given back.
                unsafe { cache.decommit(at(first), len * PAGE) };
            } else if step % 16 == 0 {
                cache.tick();
            }
            let s = cache.validate().unwrap();
            assert_eq!(s.committed, held.iter().flatten().count() * PAGE);
            let source = cache.inner().stats();
            assert_eq!(source.committed, table + s.committed + s.parked);
            assert!(source.peak <= source.limit);
        }
        for (k, page) in held.iter().enumerate() {
            if page.is_some() {
                // SAFETY: held committed by the consumer.
                unsafe { cache.decommit(base.add(k * PAGE), PAGE) };
            }
        }
        let s = cache.stats();
        given_up += s.given_up;
        refused += s.refused;
        cache.trim();
        // SAFETY: the live reservation, all of it decommitted.
        unsafe { cache.release(base, 32 * PAGE) };
        assert_eq!(cache.inner().stats().committed, table);
    }
    assert!(
        given_up > 0 && refused > 0,
        "the programs reached the limit: {given_up} bytes given up, {refused} refused"
    );
}
