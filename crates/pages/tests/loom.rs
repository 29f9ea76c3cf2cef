//! Loom models of bento-pages' atomic protocols: the spin lock (mutual exclusion,
//! `try_lock`), the `Metered` stats (counter and high-water mark) and the
//! `LimitedPages` claim (never past the limit).
//!
//! Run with `cargo xtask loom` (`RUSTFLAGS="--cfg bento_loom"`, feature `loom`).
#![cfg(bento_loom)]

use bento_align::Alignment;
use bento_pages::lock::RawSpinLock;
use bento_pages::{
    CommitCache, Decay, HeapPages, LimitedPages, Metered, PageSource, Phase, Retention,
};
use bento_testkit::loom::in_threads;
use loom::cell::UnsafeCell;
use loom::sync::Arc;
use loom::thread;

/// Two threads increment a cell under the lock: loom reports any interleaving in which
/// both are inside at once (a data race on the `UnsafeCell`), and the total is exact.
#[test]
fn lock_excludes() {
    loom::model(|| {
        let shared = Arc::new((RawSpinLock::new(), UnsafeCell::new(0u32)));
        let each = Arc::clone(&shared);
        in_threads(2, move |_| {
            each.0.lock();
            // SAFETY: the lock is held.
            each.1.with_mut(|v| unsafe { *v += 1 });
            // SAFETY: this thread holds the lock.
            unsafe { each.0.unlock() };
        });
        shared.0.lock();
        // SAFETY: the lock is held and the other threads are done.
        assert_eq!(shared.1.with(|v| unsafe { *v }), 2);
        // SAFETY: this thread holds the lock.
        unsafe { shared.0.unlock() };
    });
}

/// `try_lock` never succeeds while another thread holds the lock: the cell is only
/// touched on success, and loom checks every interleaving for a race.
#[test]
fn try_lock_excludes() {
    loom::model(|| {
        let shared = Arc::new((RawSpinLock::new(), UnsafeCell::new(0u32)));
        let other = {
            let shared = Arc::clone(&shared);
            thread::spawn(move || {
                shared.0.lock();
                // SAFETY: the lock is held.
                shared.1.with_mut(|v| unsafe { *v += 1 });
                // SAFETY: this thread holds the lock.
                unsafe { shared.0.unlock() };
            })
        };
        let got = shared.0.try_lock();
        if got {
            // SAFETY: `try_lock` succeeded, so the lock is held.
            shared.1.with_mut(|v| unsafe { *v += 10 });
            // SAFETY: this thread holds the lock.
            unsafe { shared.0.unlock() };
        }
        other.join().unwrap();
        // SAFETY: both threads are done with the cell.
        let v = shared.1.with(|v| unsafe { *v });
        assert_eq!(v, if got { 11 } else { 1 });
    });
}

/// Two threads commit and decommit through one `Metered`: the final stats are exact
/// and the peak is never below any value `committed` took.
#[test]
fn metered_figures() {
    loom::model(|| {
        let pages = Arc::new(Metered::new(HeapPages::new()));
        let base = pages.reserve(2 * 4096, Alignment::MIN).unwrap();
        let each = Arc::clone(&pages);
        in_threads(2, move |i| {
            let page = base.map_addr(|a| a.saturating_add((i - 1) * 4096));
            // SAFETY: thread `i` commits and decommits page `i - 1` of the live
            // reservation, its own.
            unsafe {
                each.commit(page, 4096).unwrap();
                let seen = each.stats();
                assert!(seen.max_committed >= 4096);
                each.decommit(page, 4096);
            }
        });
        let s = pages.stats();
        assert_eq!((s.committed, s.commits, s.decommits), (0, 2, 2));
        assert!(s.max_committed == 4096 || s.max_committed == 8192);
        // SAFETY: the live reservation, with nothing committed.
        unsafe { pages.release(base, 2 * 4096) };
    });
}

/// A thread commits and gives back its pages through a decaying `CommitCache` (which
/// keeps them) while another ticks, trims and changes phase: every interleaving of
/// their locked sections leaves the table consistent (`validate`), the kept bytes
/// read without the lock match it, and the source holds exactly the table, the
/// consumer's pages and the kept ones.
#[test]
fn kept_pages_shared_between_threads() {
    loom::model(|| {
        let cache =
            Arc::new(CommitCache::with_capacity(Metered::new(HeapPages::new()), 8 * 4096).unwrap());
        cache.set_retention(Retention::Decay(Decay::frames(2)));
        let base = cache.reserve(2 * 4096, Alignment::MIN).unwrap();
        let table = cache.inner().stats().committed;
        let each = Arc::clone(&cache);
        in_threads(2, move |i| {
            if i == 1 {
                // SAFETY: pages of the live reservation, this thread's alone; each
                // commit takes decommitted pages, each decommit committed ones.
                unsafe {
                    each.commit(base, 2 * 4096).unwrap();
                    each.decommit(base, 2 * 4096);
                    each.commit(base, 4096).unwrap();
                    each.decommit(base, 4096);
                }
            } else {
                each.phase(Phase::Unload);
                each.tick();
                each.phase(Phase::Play);
                each.tick();
                each.trim();
            }
        });
        let s = cache.validate().unwrap();
        assert_eq!(cache.kept(), s.parked);
        assert_eq!(s.committed, 0);
        assert_eq!(cache.inner().stats().committed, table + s.parked);
        cache.trim();
        // SAFETY: the live reservation, all of it decommitted.
        unsafe { cache.release(base, 2 * 4096) };
        assert_eq!(cache.trim(), 0);
    });
}

/// Two threads commit a page each through a `LimitedPages` of one page, then one of
/// them decommits: in every interleaving exactly one commit goes through, the other
/// is refused and counted, and the peak never passes the limit.
#[test]
fn limited_claims_never_pass_the_limit() {
    loom::model(|| {
        let pages = Arc::new(LimitedPages::new(HeapPages::new(), 4096));
        let base = pages.reserve(2 * 4096, Alignment::MIN).unwrap();
        let each = Arc::clone(&pages);
        let got = in_threads(2, move |i| {
            let page = base.map_addr(|a| a.saturating_add((i - 1) * 4096));
            // SAFETY: thread `i` commits page `i - 1` of the live reservation, its own.
            unsafe { each.commit(page, 4096) }.is_ok().then_some(page)
        });
        let winners: Vec<_> = got.into_iter().flatten().collect();
        assert_eq!(winners.len(), 1, "one page fits the limit");
        let s = pages.stats();
        assert_eq!((s.committed, s.peak, s.refused), (4096, 4096, 1));
        // SAFETY: the page committed above; then the whole live reservation.
        unsafe {
            pages.decommit(winners[0], 4096);
            pages.release(base, 2 * 4096);
        }
        assert_eq!(pages.stats().committed, 0);
    });
}
