//! Loom models of a heap's figures: the first thread to use a heap owns a lane it
//! writes without read-modify-write, other threads share a lane of `fetch_add`s, and
//! every sum comes out exact whichever thread claims the lane first, with blocks
//! freed on another thread than the one that allocated them.

#![cfg(bento_loom)]

use core::alloc::Layout;
use std::rc::Rc;

use allocator_api2::alloc::Global;
use bento_heap::{Heap, HeapBuilder};
use bento_testkit::loom::in_threads;

fn layout(n: usize) -> Layout {
    Layout::from_size_align(n, 8).unwrap()
}

fn heap() -> Rc<Heap<Global>> {
    Rc::new(
        HeapBuilder::new("loom")
            .register(false)
            .budget(1 << 20)
            .build(Global),
    )
}

#[test]
fn two_threads_racing_for_the_lane_keep_every_sum_exact() {
    loom::model(|| {
        let heap = heap();
        let h = heap.clone();
        let sizes = in_threads(2, move |i| {
            let p = h.alloc(layout(16 * i)).unwrap();
            // SAFETY: live, with its layout.
            unsafe { h.free(p, layout(16 * i)) };
            let q = h.alloc(layout(8)).unwrap();
            (q.addr().get(), q)
        });
        let s = heap.stats();
        assert_eq!((s.live_bytes, s.live_blocks, s.total_allocs), (16, 2, 4));
        assert!(s.peak_bytes >= 16 + 8 && s.peak_bytes <= 32 + 16);
        for (_, q) in sizes {
            // SAFETY: live, with its layout.
            unsafe { heap.free(q, layout(8)) };
        }
        let s = heap.stats();
        assert_eq!((s.live_bytes, s.total_frees), (0, 4));
    });
}

#[test]
fn a_block_freed_on_the_other_thread_leaves_the_sums_exact() {
    loom::model(|| {
        let heap = heap();
        let first = heap.alloc(layout(24)).unwrap();
        let h = heap.clone();
        // The main thread owns the lane; the other frees its block and allocates.
        let got = in_threads(1, move |_| {
            // SAFETY: live, with its layout; the main thread gave it up.
            unsafe { h.free(first, layout(24)) };
            h.alloc(layout(40)).unwrap()
        });
        let s = heap.stats();
        assert_eq!((s.live_bytes, s.live_blocks), (40, 1));
        // SAFETY: live, with its layout.
        unsafe { heap.free(got[0], layout(40)) };
        assert_eq!(heap.stats().live_bytes, 0);
    });
}
