//! `core::alloc::Allocator` (the feature `nightly`): the standard library's own `Vec`
//! and `Box` in bento's allocators, through allocation, growth, shrinking and freeing.
//! `cargo xtask nightly` runs it on the nightly toolchain.
#![cfg(all(feature = "nightly", feature = "os"))]

use core::alloc::Layout;
use core::mem::MaybeUninit;

use bento_alloc::common::CommonAllocator;
use bento_alloc::heap::HeapBuilder;
use bento_alloc::pages::SystemPages;
use bento_alloc::primitives::{Bump, Pool};
use bento_alloc::space::{MemorySpace, SpaceConfig};

/// Pushes 10,000 numbers (the vector grows many times), shrinks it, boxes a value
/// beside it, and checks every number.
fn grow_shrink_box<A: core::alloc::Allocator + Copy>(alloc: A) {
    let mut v: Vec<u64, A> = Vec::new_in(alloc);
    for i in 0..10_000u64 {
        v.push(i * 3);
    }
    v.truncate(100);
    v.shrink_to_fit();
    let b = Box::new_in([7u8; 300], alloc);
    assert!(v.iter().enumerate().all(|(i, &x)| x == i as u64 * 3));
    assert!(b.iter().all(|&x| x == 7));
}

#[test]
fn memory_space_and_a_heap_over_it() {
    let space = MemorySpace::new(SystemPages::new(), SpaceConfig::DEFAULT).unwrap();
    grow_shrink_box(&space);
    assert_eq!(space.validate().unwrap().live_bytes, 0);

    let heap = HeapBuilder::new("nightly").budget(1 << 20).build(&space);
    grow_shrink_box(&heap);
    assert_eq!(heap.stats().live_bytes, 0);
    let mut over: Vec<u8, _> = Vec::new_in(&heap);
    assert!(
        over.try_reserve(2 << 20).is_err(),
        "the budget holds for std's Vec"
    );
}

#[test]
fn common_allocator() {
    let common = CommonAllocator::new();
    grow_shrink_box(&common);
    // The blocks this thread's front end keeps go back to the regions.
    common.trim();
    assert_eq!(common.validate().unwrap().live_bytes, 0);
}

#[test]
fn bump_and_pool() {
    let mut buf = vec![MaybeUninit::<u8>::uninit(); 1 << 20];
    let mut bump = Bump::new(&mut buf);
    grow_shrink_box(&bump);
    bump.validate().unwrap();
    bump.reset();
    assert_eq!(bump.used(), 0);

    // Room for 16 chunks whatever the buffer's alignment.
    let mut chunks = vec![MaybeUninit::<u8>::uninit(); 64 * 17];
    let pool = Pool::new(&mut chunks, Layout::new::<[u64; 8]>()).unwrap();
    let n = pool.capacity();
    assert!(n >= 16);
    let boxes: Vec<Box<[u64; 8], &Pool<'_>>> =
        (0..n as u64).map(|i| Box::new_in([i; 8], &pool)).collect();
    assert_eq!(pool.in_use(), n);
    let mut one_more: Vec<[u64; 8], _> = Vec::new_in(&pool);
    assert!(one_more.try_reserve_exact(1).is_err(), "the pool is full");
    assert!(boxes.iter().enumerate().all(|(i, b)| b[7] == i as u64));
    drop(boxes);
    assert_eq!(pool.in_use(), 0);
}
