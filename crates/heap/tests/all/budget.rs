//! The budget: exact at the edge, the callback's retry, failures counted, resizes
//! charged, and the inner allocator's refusals.

use core::alloc::Layout;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};

use allocator_api2::alloc::{Allocator, Global};
use allocator_api2::vec::Vec;
use bento_heap::{Heap, HeapBuilder, Retry};

fn bytes(n: usize) -> Layout {
    Layout::from_size_align(n, 1).unwrap()
}

#[test]
fn allocating_up_to_the_byte_succeeds_and_one_more_fails() {
    let heap = HeapBuilder::new("budget-edge")
        .register(false)
        .budget(1000)
        .build(Global);
    let a = heap.alloc(bytes(600)).unwrap();
    let b = heap.alloc(bytes(400)).unwrap();
    assert_eq!(heap.stats().live_bytes, 1000);
    assert!(heap.alloc(bytes(1)).is_err());
    let s = heap.stats();
    assert_eq!((s.failures, s.live_bytes, s.live_blocks), (1, 1000, 2));
    // SAFETY: live blocks with their layouts.
    unsafe { heap.free(b, bytes(400)) };
    let c = heap.alloc(bytes(400)).unwrap();
    assert_eq!(heap.stats().peak_bytes, 1000);
    // SAFETY: as above.
    unsafe {
        heap.free(a, bytes(600));
        heap.free(c, bytes(400));
    }
    let s = heap.check().unwrap();
    assert_eq!(
        (s.live_bytes, s.total_allocs, s.total_frees, s.failures),
        (0, 3, 3, 1)
    );
}

/// A block pointer the callback may free.
struct Cached(core::ptr::NonNull<u8>);
// SAFETY: the pointer is only handed back to the heap it came from.
unsafe impl Send for Cached {}

/// The heap of the retry test and the block its callback flushes.
static HEAP: OnceLock<&'static Heap<Global>> = OnceLock::new();
static CACHED: Mutex<Option<Cached>> = Mutex::new(None);
static CALLS: AtomicUsize = AtomicUsize::new(0);

#[test]
fn the_callback_frees_memory_and_the_one_retry_succeeds() {
    let heap: &'static Heap<Global> = Box::leak(Box::new(
        HeapBuilder::new("budget-retry")
            .register(false)
            .budget(256)
            .on_budget_exceeded(|stats, layout| {
                CALLS.fetch_add(1, Ordering::Relaxed);
                assert!(stats.live_bytes + layout.size() > 256);
                match CACHED.lock().unwrap().take() {
                    Some(Cached(p)) => {
                        // SAFETY: the cached block is live, 200 bytes, of this heap.
                        unsafe { HEAP.get().unwrap().free(p, bytes(200)) };
                        Retry::Again
                    }
                    None => Retry::Fail,
                }
            })
            .build(Global),
    ));
    HEAP.set(heap).ok().unwrap();
    let cache = heap.alloc(bytes(200)).unwrap();
    *CACHED.lock().unwrap() = Some(Cached(cache));
    // Over the budget: the callback flushes the cache and the retry succeeds.
    let a = heap.alloc(bytes(100)).unwrap();
    let s = heap.stats();
    assert_eq!((CALLS.load(Ordering::Relaxed), s.failures), (1, 0));
    assert_eq!((s.live_bytes, s.live_blocks), (100, 1));
    // Nothing left to flush: the callback says fail, and the request fails.
    assert!(heap.alloc(bytes(200)).is_err());
    let s = heap.stats();
    assert_eq!((CALLS.load(Ordering::Relaxed), s.failures), (2, 1));
    // SAFETY: live, with its layout.
    unsafe { heap.free(a, bytes(100)) };
    assert_eq!(heap.check().unwrap().live_bytes, 0);
}

#[test]
fn resizes_are_charged_and_a_grow_past_the_budget_fails_unchanged() {
    let heap = HeapBuilder::new("budget-resize")
        .register(false)
        .budget(1024)
        .build(Global);
    let mut v: Vec<u8, _> = Vec::with_capacity_in(512, &heap);
    v.extend(core::iter::repeat_n(7, 512));
    assert_eq!(heap.stats().live_bytes, 512);
    assert!(v.try_reserve_exact(1024).is_err());
    assert_eq!(heap.stats().live_bytes, 512);
    assert!(v.iter().all(|&b| b == 7));
    v.reserve_exact(512);
    assert_eq!(heap.stats().live_bytes, 1024);
    v.truncate(100);
    v.shrink_to_fit();
    assert_eq!(heap.stats().live_bytes, 100);
    drop(v);
    let s = heap.check().unwrap();
    assert_eq!((s.live_bytes, s.peak_bytes, s.failures), (0, 1024, 1));
}

/// An allocator that refuses everything.
struct Refuses;

// SAFETY: it hands out no block.
unsafe impl Allocator for Refuses {
    fn allocate(
        &self,
        _: Layout,
    ) -> Result<core::ptr::NonNull<[u8]>, allocator_api2::alloc::AllocError> {
        Err(allocator_api2::alloc::AllocError)
    }

    unsafe fn deallocate(&self, _: core::ptr::NonNull<u8>, _: Layout) {
        unreachable!("no block was handed out")
    }
}

#[test]
fn a_refusal_of_the_inner_allocator_counts_a_failure_and_charges_nothing() {
    let heap = HeapBuilder::new("budget-refused")
        .register(false)
        .budget(100)
        .build(Refuses);
    assert!(heap.alloc(bytes(10)).is_err());
    let s = heap.stats();
    assert_eq!((s.failures, s.live_bytes, s.total_allocs), (1, 0, 0));
    // Sizes whose guarded layout overflows are refused too.
    let guarded = HeapBuilder::new("budget-overflow")
        .register(false)
        .guards(bento_heap::Canaries::<16>)
        .build(Global);
    assert!(
        guarded
            .alloc(Layout::from_size_align(isize::MAX as usize - 8, 8).unwrap())
            .is_err()
    );
    assert_eq!(guarded.stats().live_bytes, 0);
}
