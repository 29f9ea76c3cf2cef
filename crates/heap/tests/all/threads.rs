//! Threads: a heap over a `Sync` allocator is `Sync`, and its stats stay exact when
//! two threads allocate and free through it, blocks crossing between them.

use core::alloc::Layout;
use std::sync::mpsc;

use allocator_api2::alloc::Global;
use allocator_api2::vec::Vec;
use bento_heap::{Heap, Track, Tracked};
use bento_space::SpinSpace;
use bento_testkit::cases;

use crate::unregistered;

fn is_sync<T: Sync>(_: &T) {}

#[test]
fn figures_stay_exact_with_two_threads_and_blocks_crossing_between_them() {
    let space = SpinSpace::new(crate::space());
    let heap: Heap<&SpinSpace<_>, _, Tracked> =
        unregistered("threads").tracking(Track::Sites).build(&space);
    is_sync(&heap);
    let n = cases(20_000, 60);
    let (tx, rx) = mpsc::channel::<Vec<u8, &Heap<&SpinSpace<_>, _, Tracked>>>();
    std::thread::scope(|s| {
        s.spawn(|| {
            for i in 0..n {
                let mut v = Vec::with_capacity_in(1 + i % 200, &heap);
                v.push(i as u8);
                if i % 2 == 0 {
                    tx.send(v).unwrap();
                }
            }
            drop(tx);
        });
        s.spawn(|| {
            let mut kept = 0;
            for v in rx {
                kept += v.len();
                if kept % 7 == 0 {
                    drop(Vec::<u8, _>::with_capacity_in(64, &heap));
                }
            }
        });
    });
    let s = heap.validate().unwrap();
    assert_eq!((s.live_bytes, s.live_blocks), (0, 0), "{s:?}");
    assert!(s.total_allocs >= n);
    assert_eq!(s.total_allocs, s.total_frees);
}

#[test]
fn a_heap_over_global_is_shared_by_threads() {
    let heap = unregistered("threads-global").budget(1 << 20).build(Global);
    is_sync(&heap);
    let layout = Layout::new::<[u64; 4]>();
    std::thread::scope(|s| {
        for _ in 0..2 {
            s.spawn(|| {
                for _ in 0..cases(10_000, 40) {
                    let p = heap.alloc(layout).unwrap();
                    // SAFETY: live, with its layout.
                    unsafe { heap.free(p, layout) };
                }
            });
        }
    });
    let s = heap.stats();
    assert_eq!((s.live_bytes, s.total_allocs), (0, 2 * cases(10_000, 40)));
    assert!(s.peak_bytes >= 32 && s.peak_bytes <= 64);
}
