//! Loom models of a heap's stats: each thread writes the lane of the slot it owns
//! (plain stores), slots are claimed from a global bitmap and given back when a
//! thread exits, and every sum comes out exact, with blocks freed on another thread
//! than the one that allocated them and slots passing from an exited thread to the
//! next. The model threads alone use the heap (loom tears the main thread's
//! thread-locals down after the model's statics).

#![cfg(bento_loom)]

use core::alloc::Layout;
use core::ptr::NonNull;
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
fn two_threads_keep_every_sum_exact() {
    loom::model(|| {
        let heap = heap();
        let h = heap.clone();
        let kept: Vec<NonNull<u8>> = in_threads(2, move |i| {
            let p = h.alloc(layout(16 * i)).unwrap();
            // SAFETY: live, with its layout.
            unsafe { h.free(p, layout(16 * i)) };
            h.alloc(layout(8)).unwrap()
        });
        let s = heap.stats();
        assert_eq!((s.live_bytes, s.live_blocks, s.total_allocs), (16, 2, 4));
        assert!(s.peak_bytes >= 16 + 8 && s.peak_bytes <= 32 + 16);
        let h = heap.clone();
        in_threads(1, move |_| {
            for &q in &kept {
                // SAFETY: live, with its layout; their threads gave them up.
                unsafe { h.free(q, layout(8)) };
            }
        });
        let s = heap.stats();
        assert_eq!((s.live_bytes, s.total_frees), (0, 4));
    });
}

#[test]
fn a_slot_passes_from_an_exited_thread_and_blocks_cross_threads() {
    loom::model(|| {
        let heap = heap();
        let h = heap.clone();
        let first = in_threads(1, move |_| h.alloc(layout(24)).unwrap())[0];
        // The first thread has exited and given its slot back: the next ones take
        // it, one of them freeing the block the first allocated.
        let h = heap.clone();
        let got = in_threads(2, move |i| {
            if i == 1 {
                // SAFETY: live, with its layout; its thread gave it up.
                unsafe { h.free(first, layout(24)) };
                None
            } else {
                Some(h.alloc(layout(40)).unwrap())
            }
        });
        let s = heap.stats();
        assert_eq!((s.live_bytes, s.live_blocks), (40, 1));
        let p = got.into_iter().flatten().next().unwrap();
        let h = heap.clone();
        in_threads(1, move |_| {
            // SAFETY: live, with its layout.
            unsafe { h.free(p, layout(40)) };
        });
        assert_eq!(heap.stats().live_bytes, 0);
    });
}

#[test]
fn a_slot_hands_its_plainly_written_lane_to_the_next_owner() {
    use loom::sync::Arc;
    use loom::sync::atomic::{AtomicUsize, Ordering};

    use bento_heap::__loom::{OWNED, give, take};

    loom::model(|| {
        // Every slot but one is taken: the two threads take turns owning the last.
        let bits = Arc::new(AtomicUsize::new(((1 << OWNED) - 1) & !1));
        let lane = Arc::new(AtomicUsize::new(0));
        let (b, l) = (bits.clone(), lane.clone());
        in_threads(2, move |_| {
            loop {
                match take(&b) {
                    0 => {
                        // The owner writes its lane with a plain load and store: it
                        // must see the last owner's write, or an increment is lost.
                        let v = l.load(Ordering::Relaxed);
                        l.store(v + 1, Ordering::Relaxed);
                        give(&b, 0);
                        return;
                    }
                    i => {
                        assert_eq!(i, OWNED, "only slot 0 is free");
                        loom::thread::yield_now();
                    }
                }
            }
        });
        assert_eq!(lane.load(Ordering::Relaxed), 2);
    });
}

#[test]
fn a_reader_never_adds_a_lanes_new_view_to_its_old_top() {
    use loom::sync::atomic::{AtomicBool, Ordering};

    use bento_heap::__loom::{lanes_peak, own};

    loom::model(|| {
        // A budget of 256 gives a slack of 1: the lanes refresh nearly every time.
        let heap = Rc::new(
            HeapBuilder::new("loom-peak")
                .register(false)
                .budget(256)
                .build(Global),
        );
        let freed = Rc::new(AtomicBool::new(false));
        let held = Rc::new(AtomicBool::new(false));
        let (h, f, k) = (heap.clone(), freed.clone(), held.clone());
        in_threads(3, move |i| {
            let wait = |flag: &AtomicBool| {
                while !flag.load(Ordering::Acquire) {
                    loom::thread::yield_now();
                }
            };
            match i {
                // Slot 0: 100 bytes (its top), freed before slot 1 allocates; then
                // 1 and 2 bytes while slot 1 holds 50, so that its refresh brings a
                // view of 50 into a period whose old top is 100.
                1 => {
                    own(0);
                    let p = h.alloc(layout(100)).unwrap();
                    // SAFETY: live, with its layout.
                    unsafe { h.free(p, layout(100)) };
                    f.store(true, Ordering::Release);
                    wait(&k);
                    let a = h.alloc(layout(1)).unwrap();
                    let b = h.alloc(layout(2)).unwrap();
                    // SAFETY: as above.
                    unsafe { h.free(a, layout(1)) };
                    // SAFETY: as above.
                    unsafe { h.free(b, layout(2)) };
                }
                2 => {
                    own(1);
                    wait(&f);
                    let p = h.alloc(layout(50)).unwrap();
                    k.store(true, Ordering::Release);
                    // SAFETY: as above.
                    unsafe { h.free(p, layout(50)) };
                }
                // Never more than 100 bytes are live at once; 150 would be slot 1's
                // view added to slot 0's top of the period before it.
                _ => assert!(lanes_peak(&h) <= 100, "peak {}", lanes_peak(&h)),
            }
        });
        let s = heap.stats();
        assert_eq!((s.live_bytes, s.peak_bytes), (0, 100));
    });
}
