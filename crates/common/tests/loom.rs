//! Loom models of the common allocator's atomic protocols: two threads racing the
//! first allocation (exactly one start, both blocks valid); a thread's cache flushed
//! while another thread frees a block the first allocated; and contention routing
//! handing out and freeing blocks from two threads, across threads.
//!
//! Run with `cargo xtask loom` (`RUSTFLAGS="--cfg bento_loom"`, feature `loom`).
#![cfg(bento_loom)]

use core::alloc::Layout;
use core::ptr::NonNull;
use std::sync::Arc;

use bento_align::Alignment;
use bento_common::{CommonAllocator, CommonConfig, LargeConfig, Routing, SizeClasses};
use bento_pages::{HeapPages, Metered};
use bento_testkit::loom::in_threads;

type Pages = Arc<Metered<HeapPages>>;

/// An allocator of two small classes and a small large region over `pages`.
fn common(pages: Pages, routing: Routing, front: bool) -> &'static CommonAllocator<Pages> {
    let shape = CommonConfig::DEFAULT
        .with_pages(())
        .with_classes(SizeClasses::new(&[16, 32]))
        .with_large(
            LargeConfig::DEFAULT
                .with_page_size(4096)
                .with_segment_granularity(256 << 10)
                .with_segment_threshold(64 << 10),
        )
        .with_routing(routing)
        .with_thread_cache(front)
        .with_commit_cache(0);
    let config = shape
        .with_misuse_hook(bento_common::panic_on_misuse)
        .with_pages(pages);
    // Loom threads need `'static`; each model leaks one allocator.
    Box::leak(Box::new(CommonAllocator::with_config(config)))
}

/// Drops an allocator `common` made, once every model thread has joined.
fn destroy(common: &'static CommonAllocator<Pages>) {
    // SAFETY: leaked by `common`, and no thread uses it any more.
    drop(unsafe { Box::from_raw(core::ptr::from_ref(common).cast_mut()) });
}

fn heap() -> Pages {
    Arc::new(Metered::new(HeapPages::with_page_size(
        Alignment::new(4096).unwrap(),
    )))
}

/// Runs `f` under loom with room for the many atomic operations a start and a
/// cache refill take (the metered source counts every page call).
fn model(f: impl Fn() + Sync + Send + 'static) {
    let mut builder = loom::model::Builder::new();
    builder.max_branches = 100_000;
    builder.check(f);
}

/// Writes `byte` over a fresh block of `size` bytes.
fn fill(p: NonNull<u8>, size: usize, byte: u8) -> NonNull<u8> {
    // SAFETY: a fresh block of `size` bytes, this thread's.
    unsafe { p.as_ptr().write_bytes(byte, size) };
    p
}

/// Checks that a block still holds `byte` and frees it.
fn check_and_free(common: &CommonAllocator<Pages>, p: NonNull<u8>, layout: Layout, byte: u8) {
    // SAFETY: a live block of `layout`, filled with `byte` by its owner, whose
    // thread has joined (or handed it over through the join).
    unsafe {
        assert!(
            core::slice::from_raw_parts(p.as_ptr(), layout.size())
                .iter()
                .all(|&b| b == byte)
        );
        common.dealloc(p, layout);
    }
}

#[test]
fn racing_first_allocations_start_once() {
    model(|| {
        let pages = heap();
        let common = common(Arc::clone(&pages), Routing::BySize, false);
        // A small and a large block, each thread's first call.
        let blocks = in_threads(2, move |i| {
            let layout = Layout::from_size_align(if i == 1 { 16 } else { 1000 }, 8).unwrap();
            let p = common.alloc(layout).unwrap();
            (fill(p, layout.size(), i as u8), layout)
        });
        assert_ne!(blocks[0].0, blocks[1].0);
        // The stats on a thread with room on its stack for them (the model's main
        // thread has 32 KiB).
        let spans = in_threads(1, move |_| {
            let s = common.stats();
            // Two small classes, the large region and the 32 medium bins.
            assert_eq!(s.regions().len(), 35);
            s.regions().iter().map(|r| r.segments).sum::<usize>()
        });
        assert_eq!(spans, [2]);
        for (i, (p, layout)) in blocks.into_iter().enumerate() {
            check_and_free(common, p, layout, i as u8 + 1);
        }
        let live = in_threads(1, move |_| common.validate().unwrap().live_blocks);
        assert_eq!(live, [0]);
        // Dropping gives back the one block the start made: a second start would
        // have left its own behind.
        destroy(common);
        assert_eq!((pages.stats().reserved, pages.stats().committed), (0, 0));
    });
}

#[test]
fn a_configure_races_the_first_allocation() {
    model(|| {
        let common = common(heap(), Routing::BySize, false);
        // Thread 0 adds a third class before the start, thread 1 allocates (and
        // starts): the change is either all in, or refused and not run.
        let results = in_threads(2, move |i| {
            if i == 0 {
                let changed = common.configure(|c| c.classes = SizeClasses::new(&[16, 32, 48]));
                (changed, None)
            } else {
                let layout = Layout::from_size_align(16, 8).unwrap();
                (false, Some(fill(common.alloc(layout).unwrap(), 16, 2)))
            }
        });
        let changed = results[0].0;
        let regions = in_threads(1, move |_| common.stats().regions().len());
        // The classes, the large region and the 32 medium bins.
        assert_eq!(regions, [if changed { 36 } else { 35 }]);
        let p = results[1].1.unwrap();
        check_and_free(common, p, Layout::from_size_align(16, 8).unwrap(), 2);
        destroy(common);
    });
}

/// Blocks handed to another model thread, whose use of them follows the join of
/// the threads that made them.
struct Blocks(Vec<NonNull<u8>>);

// SAFETY: the blocks are plain memory of a `Sync` allocator, used by one thread at
// a time (handed over through a join and a spawn).
unsafe impl Send for Blocks {}
// SAFETY: as above; the closure holding them is shared only to be run once.
unsafe impl Sync for Blocks {}

/// A pointer handed from one model thread to another.
struct Handoff(loom::sync::atomic::AtomicPtr<u8>);

#[test]
fn a_cache_flush_races_a_cross_thread_free() {
    use loom::sync::atomic::Ordering;
    model(|| {
        // Each thread trims before it ends, flushing its cache: loom drops
        // thread-locals outside the model, where no flush could run.
        let common = common(heap(), Routing::BySize, true);
        let handoff: &'static Handoff = Box::leak(Box::new(Handoff(
            loom::sync::atomic::AtomicPtr::new(core::ptr::null_mut()),
        )));
        let layout = Layout::new::<[u8; 16]>();
        in_threads(2, move |i| {
            if i == 1 {
                // Allocates two blocks (a refill of its cache), hands one over, frees
                // the other into its cache and flushes the cache to the region.
                let a = fill(common.alloc(layout).unwrap(), 16, 1);
                let b = fill(common.alloc(layout).unwrap(), 16, 1);
                handoff.0.store(a.as_ptr(), Ordering::Release);
                check_and_free(common, b, layout, 1);
                common.trim();
            } else {
                // Frees the other thread's block into its own cache, then flushes.
                let a = loop {
                    if let Some(a) = NonNull::new(handoff.0.load(Ordering::Acquire)) {
                        break a;
                    }
                    loom::thread::yield_now();
                };
                check_and_free(common, a, layout, 1);
                common.trim();
            }
        });
        let s = in_threads(1, move |_| {
            let s = common.validate().unwrap();
            (s.live_blocks, s.cached_blocks)
        });
        assert_eq!(s, [(0, 0)]);
        destroy(common);
    });
}

#[test]
fn contention_routing_from_two_threads() {
    model(|| {
        let common = common(heap(), Routing::Contention { regions: 2 }, false);
        // Started on a thread with room on its stack (the model's main thread has
        // 32 KiB).
        in_threads(1, move |_| common.init().unwrap());
        let layout = Layout::new::<[u8; 48]>();
        // Each thread allocates a block (trying the regions in turn when one is
        // locked); the main thread frees both after the join (cross-thread frees).
        let kept = in_threads(2, move |i| fill(common.alloc(layout).unwrap(), 48, i as u8));
        assert_ne!(kept[0], kept[1]);
        // One more thread (loom runs five at most) reads the stats, on a stack
        // larger than the main thread's, and frees both blocks across threads.
        let kept = Blocks(kept);
        let live = in_threads(1, move |_| {
            let before = common.stats().live_blocks;
            for (i, p) in kept.0.iter().enumerate() {
                check_and_free(common, *p, layout, i as u8 + 1);
            }
            (before, common.validate().unwrap().live_blocks)
        });
        assert_eq!(live, [(2, 0)]);
        destroy(common);
    });
}
