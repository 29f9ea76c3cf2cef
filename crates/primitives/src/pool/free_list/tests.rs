use std::prelude::rust_2024::*;

use core::alloc::Layout;
use core::mem::MaybeUninit;

use super::*;
use crate::Pool;

#[repr(C, align(64))]
struct Buf([MaybeUninit<u8>; 1024]);

fn buf() -> Buf {
    Buf([MaybeUninit::uninit(); 1024])
}

/// A pool of 32-byte chunks in `b` whose misuse reports go nowhere (the tests break
/// its list on purpose).
fn quiet_pool(b: &mut Buf) -> Pool<'_> {
    fn ignore(_: &Misuse<'_>) {}
    let mut pool = Pool::new(&mut b.0, Layout::new::<[u8; 32]>()).unwrap();
    pool.set_misuse_hook(ignore);
    pool
}

#[test]
fn lowering_the_high_water_mark_drops_the_free_top_run() {
    let mut b = buf();
    let pool = Pool::new(&mut b.0, Layout::new::<[u8; 32]>()).unwrap();
    let chunks: Vec<_> = (0..10).map(|_| pool.alloc().unwrap()).collect();
    // Free 9, 7, 8, 3 (a run 7..=9 at the top, and 3 below a live chunk).
    for i in [9, 3, 7, 8] {
        // SAFETY: each is a live chunk of `pool`, freed once.
        unsafe { pool.free(chunks[i]) };
    }
    assert_eq!(pool.list.lower_high_water(), 7);
    assert_eq!(pool.list.touched(), 7);
    let report = pool.validate().unwrap();
    assert_eq!((report.in_use, report.free_listed), (6, 1));
    // The next chunks: 3 (the only listed one), then 7 again from the high-water mark.
    assert_eq!(pool.alloc(), Some(chunks[3]));
    assert_eq!(pool.alloc(), Some(chunks[7]));
    for i in [0, 1, 2, 3, 4, 5, 6, 7] {
        // SAFETY: live chunks of `pool`, freed once.
        unsafe { pool.free(chunks[i]) };
    }
    // Everything free: the mark goes back to 0 and the list is empty.
    assert_eq!(pool.list.lower_high_water(), 0);
    assert_eq!(pool.validate().unwrap().untouched, pool.capacity());
}

#[test]
fn lowering_keeps_the_mark_when_the_top_chunk_is_live() {
    let mut b = buf();
    let pool = Pool::new(&mut b.0, Layout::new::<[u8; 32]>()).unwrap();
    let chunks: Vec<_> = (0..4).map(|_| pool.alloc().unwrap()).collect();
    // SAFETY: live chunks of `pool`, freed once.
    unsafe {
        pool.free(chunks[2]);
        pool.free(chunks[0]);
    }
    assert_eq!(pool.list.lower_high_water(), 4);
    assert_eq!(pool.validate().unwrap().free_listed, 2);
    // Sorted: the lowest free chunk goes out first.
    assert_eq!(pool.alloc(), Some(chunks[0]));
    // SAFETY: live chunks of `pool`, freed once.
    unsafe {
        pool.free(chunks[0]);
        pool.free(chunks[1]);
        pool.free(chunks[3]);
    }
}

#[test]
fn validate_finds_a_cycle_and_a_foreign_link() {
    let mut b = buf();
    let pool = quiet_pool(&mut b);
    let a = pool.alloc().unwrap();
    let c = pool.alloc().unwrap();
    // SAFETY: `a` is live; then its link is pointed at itself, as a release-build
    // double free would leave it.
    unsafe {
        pool.free(a);
        a.cast::<Link>().write(Some(a));
    }
    // The list can hold the one free chunk the count implies, or without a count
    // (release builds) the two chunks handed out.
    let expected = if cfg!(any(debug_assertions, feature = "counters")) {
        1
    } else {
        2
    };
    assert_eq!(pool.validate(), Err(PoolCorruption::Cycle { expected }));
    let outside = NonNull::from(&0u64).cast::<u8>();
    // SAFETY: `a` is free; its link is pointed outside the pool.
    unsafe { a.cast::<Link>().write(Some(outside)) };
    assert!(matches!(
        pool.validate(),
        Err(PoolCorruption::NotAChunk { position: 1, .. })
    ));
    // SAFETY: repair, then free `c`.
    unsafe {
        a.cast::<Link>().write(None);
        pool.free(c);
    }
    assert_eq!(pool.validate().unwrap().free_listed, 2);
}

#[test]
fn without_a_count_the_walk_gives_the_figures_and_finds_the_cycle() {
    let mut b = buf();
    let pool = quiet_pool(&mut b);
    let chunks: Vec<_> = (0..6).map(|_| pool.alloc().unwrap()).collect();
    // SAFETY: live chunks of `pool`, freed once.
    unsafe {
        pool.free(chunks[4]);
        pool.free(chunks[1]);
    }
    // Where the pool counts, the walk agrees with the count.
    if cfg!(any(debug_assertions, feature = "counters")) {
        assert_eq!(pool.list.in_use.get(), Some(4));
    }
    assert_eq!(pool.list.walked_in_use(), 4);
    let counted = pool.validate().unwrap();
    assert_eq!(pool.list.validate_against(None), Ok(counted));
    assert_eq!((counted.in_use, counted.free_listed), (4, 2));
    // A release-build double free of `chunks[1]` (the head) points its link at itself.
    // SAFETY: `chunks[1]` is free; its link is ours to overwrite.
    unsafe { chunks[1].cast::<Link>().write(Some(chunks[1])) };
    // With no count the walk stops after every chunk ever handed out (6).
    assert_eq!(
        pool.list.validate_against(None),
        Err(PoolCorruption::Cycle { expected: 6 })
    );
    assert_eq!(pool.list.walked_in_use(), 0);
    // SAFETY: repair the link to `chunks[4]`, then free the rest.
    unsafe {
        chunks[1].cast::<Link>().write(Some(chunks[4]));
        for i in [0, 2, 3, 5] {
            pool.free(chunks[i]);
        }
    }
    assert_eq!(pool.list.walked_in_use(), 0);
    assert_eq!(pool.list.validate_against(None).unwrap().free_listed, 6);
}
