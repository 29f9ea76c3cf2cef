//! The per-thread front end: blocks cached per thread, counted in the stats,
//! flushed by `trim`, at thread exit and when the allocator is dropped, and moving
//! between threads.

use core::alloc::Layout;
use std::sync::mpsc;

use bento_common::{CommonAllocator, Routing};
use bento_pages::{HeapPages, Metered};
use bento_testkit::cases;

use crate::{heap, shape};

fn with_front(pages: &Metered<HeapPages>) -> CommonAllocator<&Metered<HeapPages>> {
    CommonAllocator::with_config(shape().with_thread_cache(true).with_pages(pages))
}

#[test]
fn cached_blocks_are_counted_and_trim_flushes_them() {
    let pages = Metered::new(heap());
    let common = with_front(&pages);
    let sizes = [16usize, 100, 256, 300, 1000, 4096];
    let blocks: Vec<_> = sizes
        .iter()
        .flat_map(|&s| (0..50).map(move |_| Layout::from_size_align(s, 8).unwrap()))
        .map(|l| (common.alloc(l).unwrap(), l))
        .collect();
    assert_eq!(common.stats().live_blocks, 300);
    for (p, l) in blocks {
        // SAFETY: live with `l`.
        unsafe { common.dealloc(p, l) };
    }
    let s = common.stats();
    assert_eq!(s.live_blocks, 0, "{}", common.report());
    assert!(s.cached_blocks > 0);
    assert_eq!(common.validate().unwrap().live_blocks, 0);
    // A block of a medium bin holds the bin's size whatever its layout said.
    let l = Layout::from_size_align(289, 8).unwrap();
    let p = common.alloc(l).unwrap();
    // SAFETY: live.
    assert!(unsafe { common.usable_size(p) } >= 320);
    // SAFETY: live with `l`.
    unsafe { common.dealloc(p, l) };
    common.trim();
    let s = common.stats();
    assert_eq!(
        (s.cached_blocks, s.reserved, s.committed),
        (0, 0, 0),
        "{}",
        common.report()
    );
}

#[test]
fn blocks_move_between_threads_and_exits_flush() {
    let common = std::sync::Arc::new(CommonAllocator::with_config(
        shape().with_thread_cache(true).with_pages(heap()),
    ));
    let n = cases(20_000, 100);
    let (tx, rx) = mpsc::channel::<Sent>();
    let producer = {
        let common = std::sync::Arc::clone(&common);
        std::thread::spawn(move || {
            for i in 0..n {
                let l = Layout::from_size_align(1 + i % 3000, 8).unwrap();
                let p = common.alloc(l).unwrap();
                // SAFETY: fresh, `l.size()` bytes.
                unsafe { p.as_ptr().write_bytes(i as u8, l.size()) };
                tx.send(Sent(p, l, i as u8)).unwrap();
            }
        })
    };
    let consumer = {
        let common = std::sync::Arc::clone(&common);
        std::thread::spawn(move || {
            for Sent(p, l, byte) in rx {
                // SAFETY: a live block of `l` filled with `byte`, handed over.
                unsafe {
                    assert!(
                        core::slice::from_raw_parts(p.as_ptr(), l.size())
                            .iter()
                            .all(|&b| b == byte)
                    );
                    common.dealloc(p, l);
                }
            }
        })
    };
    // `join` returns once each thread has exited, its cache flushed.
    producer.join().unwrap();
    consumer.join().unwrap();
    let s = common.validate().unwrap();
    assert_eq!(s.live_blocks, 0, "{}", common.report());
    common.trim();
    assert_eq!(
        common.stats().reserved,
        0,
        "no cache holds a block: {}",
        common.report()
    );
}

/// An allocator handed to another thread by address.
struct Shared(*mut CommonAllocator<&'static Metered<HeapPages>>);
// SAFETY: the allocator is `Sync`; the test says when it may be used.
unsafe impl Send for Shared {}

/// A block on its way to another thread.
struct Sent(core::ptr::NonNull<u8>, Layout, u8);
// SAFETY: the allocator is `Sync`; the block belongs to whoever holds the `Sent`.
unsafe impl Send for Sent {}

#[test]
#[cfg_attr(
    miri,
    ignore = "leaks the allocator's block by design, which Miri reports"
)]
fn dropping_while_another_thread_holds_a_cache_leaks_safely() {
    let pages = Box::leak(Box::new(Metered::new(heap())));
    let common = with_front(pages);
    let (go, wait) = mpsc::channel::<()>();
    let (attached, is_attached) = mpsc::channel::<()>();
    let raw = Box::into_raw(Box::new(common));
    // The worker holds the allocator by a raw pointer, and a reference only while it
    // uses it, so that none is alive when the allocator goes.
    let shared = Shared(raw);
    let worker = std::thread::spawn(move || {
        let shared = shared;
        {
            // SAFETY: the allocator lives until the worker says it is attached.
            let common = unsafe { &*shared.0 };
            let l = Layout::new::<[u8; 64]>();
            let p = common.alloc(l).unwrap();
            // SAFETY: live with `l`: into this thread's cache.
            unsafe { common.dealloc(p, l) };
        }
        attached.send(()).unwrap();
        wait.recv().unwrap();
        // The thread exits now and flushes its cache.
    });
    is_attached.recv().unwrap();
    // SAFETY: from `into_raw`; the worker holds no reference now. Dropping the
    // allocator while the worker's cache holds one of its blocks is the case under
    // test.
    let owned = unsafe { Box::from_raw(raw) };
    drop(owned);
    assert!(
        pages.stats().reserved > 0,
        "the block is kept for the worker's flush"
    );
    go.send(()).unwrap();
    worker.join().unwrap();
}

#[test]
fn contention_routing_has_no_front_end() {
    let common = CommonAllocator::with_config(
        shape()
            .with_thread_cache(true)
            .with_routing(Routing::Contention { regions: 2 })
            .with_pages(heap()),
    );
    let l = Layout::new::<[u8; 64]>();
    let p = common.alloc(l).unwrap();
    // SAFETY: live with `l`.
    unsafe { common.dealloc(p, l) };
    assert_eq!(
        common.stats().cached_blocks,
        common
            .stats()
            .regions()
            .iter()
            .map(|r| r.cached_blocks)
            .sum::<usize>()
    );
}

#[test]
fn figures_read_while_threads_churn_stay_within_what_was_live() {
    const HELD_BY_MAIN: usize = 100;
    const EACH: usize = 20;
    // Fewer under Miri, where each read of the stats walks every region slowly.
    const WORKERS: usize = cases(8, 2);
    let pages = Metered::new(heap());
    let common = with_front(&pages);
    let layout = Layout::from_size_align(32, 8).unwrap();
    let mine: Vec<_> = (0..HELD_BY_MAIN)
        .map(|_| common.alloc(layout).unwrap())
        .collect();
    let class_live = |c: &CommonAllocator<&Metered<HeapPages>>| {
        let s = c.stats();
        s.regions()
            .iter()
            .find(|r| r.block == 32)
            .unwrap()
            .live_blocks
    };
    let stop = std::sync::atomic::AtomicBool::new(false);
    let rounds = cases(3000, 8);
    std::thread::scope(|s| {
        let (common, stop) = (&common, &stop);
        let workers: Vec<_> = (0..WORKERS)
            .map(|w| {
                s.spawn(move || {
                    for round in 0..rounds {
                        let held: Vec<_> =
                            (0..EACH).map(|_| common.alloc(layout).unwrap()).collect();
                        for p in held {
                            // SAFETY: live, with its layout.
                            unsafe { common.dealloc(p, layout) };
                        }
                        // Now and then the whole cache goes back to the region, and the
                        // next round refills it: blocks moving under the region's lock.
                        if (round + w) % 7 == 0 {
                            common.trim();
                        }
                    }
                })
            })
            .collect();
        let reader = s.spawn(move || {
            let (mut least, mut most, mut reads) = (usize::MAX, 0, 0);
            while !stop.load(std::sync::atomic::Ordering::Relaxed) || reads == 0 {
                let live = class_live(common);
                least = least.min(live);
                most = most.max(live);
                reads += 1;
            }
            (least, most, reads)
        });
        for w in workers {
            w.join().unwrap();
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        let (least, most, reads) = reader.join().unwrap();
        assert!(
            least >= HELD_BY_MAIN && most <= HELD_BY_MAIN + WORKERS * EACH,
            "{reads} reads of the live blocks ranged {least}..={most}, outside \
             {HELD_BY_MAIN}..={}",
            HELD_BY_MAIN + WORKERS * EACH
        );
    });
    assert_eq!(class_live(&common), HELD_BY_MAIN);
    for p in mine {
        // SAFETY: live, with its layout.
        unsafe { common.dealloc(p, layout) };
    }
    common.validate().unwrap();
}
