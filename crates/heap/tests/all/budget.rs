//! The budget: exact at the edge, the callback's retry, failures counted, resizes
//! charged, and the inner allocator's refusals.

use core::alloc::Layout;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};

use allocator_api2::alloc::{Allocator, Global};
use allocator_api2::vec::Vec;
use bento_heap::{Heap, Retry};

use crate::{bytes, unregistered};

#[test]
fn allocating_up_to_the_byte_succeeds_and_one_more_fails() {
    let heap = unregistered("budget-edge").budget(1000).build(Global);
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
    let s = heap.validate().unwrap();
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
        unregistered("budget-retry")
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
    assert_eq!(heap.validate().unwrap().live_bytes, 0);
}

#[test]
fn resizes_are_charged_and_a_grow_past_the_budget_fails_unchanged() {
    let heap = unregistered("budget-resize").budget(1024).build(Global);
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
    let s = heap.validate().unwrap();
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
    let heap = unregistered("budget-refused").budget(100).build(Refuses);
    assert!(heap.alloc(bytes(10)).is_err());
    let s = heap.stats();
    assert_eq!((s.failures, s.live_bytes, s.total_allocs), (1, 0, 0));
    // Sizes whose guarded layout overflows are refused too.
    let guarded = unregistered("budget-overflow")
        .guards(bento_heap::Canaries::<16>)
        .build(Global);
    assert!(
        guarded
            .alloc(Layout::from_size_align(isize::MAX as usize - 8, 8).unwrap())
            .is_err()
    );
    assert_eq!(guarded.stats().live_bytes, 0);
}

/// A heap whose budget callback allocates from the heap itself: the test's `static`.
static REENTERED: OnceLock<Heap<Global>> = OnceLock::new();
static REENTERED_CALLS: AtomicUsize = AtomicUsize::new(0);

#[test]
fn a_callback_that_allocates_over_the_budget_again_is_not_called_again() {
    let heap = REENTERED.get_or_init(|| {
        unregistered("budget-reentered")
            .budget(1000)
            .on_budget_exceeded(|_, layout| {
                REENTERED_CALLS.fetch_add(1, Ordering::Relaxed);
                // Over the budget again, from inside the callback: refused at once.
                let heap = REENTERED.get().unwrap();
                assert!(heap.alloc(layout).is_err());
                Retry::Again
            })
            .build(Global)
    });
    let a = heap.alloc(bytes(900)).unwrap();
    assert!(heap.alloc(bytes(200)).is_err());
    assert_eq!(REENTERED_CALLS.load(Ordering::Relaxed), 1);
    // The request and the callback's own: two refusals (no retry: the callback's
    // `Again` found the budget as full as before).
    assert_eq!(heap.stats().failures, 2);
    // A later request over the budget calls it again: the guard was only for the
    // callback's own requests.
    assert!(heap.alloc(bytes(200)).is_err());
    assert_eq!(REENTERED_CALLS.load(Ordering::Relaxed), 2);
    // SAFETY: live, with its layout.
    unsafe { heap.free(a, bytes(900)) };
}

static PING: OnceLock<Heap<Global>> = OnceLock::new();
static PONG: OnceLock<Heap<Global>> = OnceLock::new();
static PING_PONG_CALLS: AtomicUsize = AtomicUsize::new(0);

/// A callback that allocates `layout` from `other`, over its budget too.
fn ask(other: &'static OnceLock<Heap<Global>>, layout: Layout) -> Retry {
    PING_PONG_CALLS.fetch_add(1, Ordering::Relaxed);
    assert!(other.get().unwrap().alloc(layout).is_err());
    Retry::Fail
}

#[test]
fn two_heaps_whose_callbacks_allocate_from_each_other_end() {
    let build = |name, other: &'static OnceLock<Heap<Global>>| {
        unregistered(name)
            .budget(100)
            .on_budget_exceeded(move |_, layout| ask(other, layout))
            .build(Global)
    };
    let ping = PING.get_or_init(|| build("budget-ping", &PONG));
    PONG.get_or_init(|| build("budget-pong", &PING));
    assert!(ping.alloc(bytes(200)).is_err());
    // ping's callback, pong's (from inside it), and no more.
    assert_eq!(PING_PONG_CALLS.load(Ordering::Relaxed), 2);
}

/// The most one lane may allocate between two reads of the others under `budget`.
fn slack(budget: usize) -> usize {
    (budget >> 8).min(64 << 10)
}

#[test]
fn a_thread_with_a_stale_view_cannot_pass_the_budget_by_more_than_its_slack() {
    const BUDGET: usize = 1 << 20;
    let heap = unregistered("budget-stale-view")
        .budget(BUDGET)
        .build(Global);
    let barrier = std::sync::Barrier::new(2);
    std::thread::scope(|s| {
        let heap = &heap;
        let barrier = &barrier;
        // The first thread allocates once, so that its view of the others is empty.
        let first = s.spawn(move || {
            let small = heap.alloc(bytes(16)).unwrap();
            barrier.wait(); // the second fills the budget meanwhile
            barrier.wait();
            let big = heap.alloc(bytes(BUDGET - 16));
            let live = heap.stats().live_bytes;
            if let Ok(p) = big {
                // SAFETY: live, with its layout.
                unsafe { heap.free(p, bytes(BUDGET - 16)) };
            }
            // SAFETY: as above.
            unsafe { heap.free(small, bytes(16)) };
            (big.is_ok(), live)
        });
        barrier.wait();
        // The second fills the budget to the byte: the peak is the budget.
        let fill = heap.alloc(bytes(BUDGET - 16)).unwrap();
        assert!(heap.alloc(bytes(1)).is_err());
        barrier.wait();
        let (granted, live) = first.join().unwrap();
        assert!(
            !granted,
            "a MiB granted over a full budget ({live} bytes live)"
        );
        assert!(live <= BUDGET + slack(BUDGET), "{live} bytes live");
        // SAFETY: as above.
        unsafe { heap.free(fill, bytes(BUDGET - 16)) };
    });
    let s = heap.validate().unwrap();
    assert_eq!(s.live_bytes, 0);
    assert!(s.peak_bytes <= BUDGET);
}

#[test]
fn eight_threads_under_a_parent_stay_within_its_budget_and_its_peak() {
    threads_under_a_parent(8);
}

/// More threads than the 15 slots: the later ones share the shared lane's credit.
#[test]
fn twenty_four_threads_under_a_parent_stay_within_its_budget_and_its_peak() {
    threads_under_a_parent(24);
}

/// `threads` threads, each with a child heap of one parent with a budget, allocate
/// and free at random; what they hold at once stays within the budget and the slack
/// per thread, and the parent's peak within as much of it.
fn threads_under_a_parent(threads: usize) {
    const BUDGET: usize = 256 << 10;
    let parent = unregistered("budget-parent").budget(BUDGET).build(Global);
    // What the threads hold, counted after a grant and before a free: never above
    // what the heap holds.
    let held = AtomicUsize::new(0);
    let most_held = AtomicUsize::new(0);
    let most_seen = AtomicUsize::new(0);
    let refused = AtomicUsize::new(0);
    let rounds = bento_testkit::cases(20_000, 40);
    std::thread::scope(|s| {
        for t in 0..threads {
            let (parent, held, most_held, most_seen, refused) =
                (&parent, &held, &most_held, &most_seen, &refused);
            s.spawn(move || {
                let child = unregistered("budget-child").parent(parent).build(Global);
                let draws = bento_testkit::seeded_bytes(t, rounds * 4);
                let mut mine: std::vec::Vec<(core::ptr::NonNull<u8>, usize)> = std::vec::Vec::new();
                for d in draws.chunks_exact(4) {
                    if mine.len() < 64 && d[0] % 3 != 0 {
                        let size = 16 + usize::from(u16::from_le_bytes([d[1], d[2]])) % 8192;
                        if let Ok(p) = child.alloc(bytes(size)) {
                            let now = held.fetch_add(size, Ordering::Relaxed) + size;
                            most_held.fetch_max(now, Ordering::Relaxed);
                            mine.push((p, size));
                        } else {
                            refused.fetch_add(1, Ordering::Relaxed);
                        }
                    } else if let Some((p, size)) = mine.pop() {
                        held.fetch_sub(size, Ordering::Relaxed);
                        // SAFETY: live, with its layout.
                        unsafe { child.free(p, bytes(size)) };
                    }
                    if d[3] % 64 == 0 {
                        most_seen.fetch_max(parent.stats().live_bytes, Ordering::Relaxed);
                    }
                }
                for (p, size) in mine {
                    held.fetch_sub(size, Ordering::Relaxed);
                    // SAFETY: as above.
                    unsafe { child.free(p, bytes(size)) };
                }
            });
        }
    });
    let most = most_held.load(Ordering::Relaxed);
    let limit = BUDGET + threads * slack(BUDGET);
    assert!(
        most <= limit,
        "{most} bytes held at once under a budget of {BUDGET}"
    );
    let s = parent.validate().unwrap();
    assert_eq!(s.live_bytes, 0);
    assert!(refused.into_inner() > 0, "the workload reached the budget");
    assert!(
        s.peak_bytes >= most_seen.load(Ordering::Relaxed),
        "peak {} below a live stat seen, {}",
        s.peak_bytes,
        most_seen.load(Ordering::Relaxed)
    );
    assert!(
        s.peak_bytes + threads * slack(BUDGET) >= most,
        "peak {} far below what was held, {most}",
        s.peak_bytes
    );
}

/// Drives `heap` with a seeded mix of allocations (1 B to 12 KiB, so that a lane's
/// credit runs out and starts afresh many times) and frees, holding at most `blocks`
/// blocks; checks after each step that the live bytes and the peak are exact (one
/// thread at a time uses the heap, which starts empty with the peak `peak`) and that
/// the budget, if any, refuses exactly what passes it. Returns the peak after.
fn grow_and_shrink<A: Allocator>(heap: &Heap<A>, seed: u64, blocks: usize, peak: usize) -> usize {
    let budget = heap.stats().budget.unwrap_or(usize::MAX);
    let mut rng = bento_testkit::Rng::new(seed | 1);
    let mut next = move || rng.next_u64();
    let (mut held, mut live, mut most) = (std::vec::Vec::new(), 0usize, peak);
    for step in 0..bento_testkit::cases(4000, 300) {
        let r = next();
        if held.len() < blocks && (r % 3 != 0 || held.is_empty()) {
            let n = 1 + (r >> 8) as usize % (12 << 10);
            let got = heap.alloc(bytes(n));
            assert_eq!(
                got.is_ok(),
                live + n <= budget,
                "{n} bytes with {live} live"
            );
            if let Ok(p) = got {
                held.push((p, n));
                live += n;
                most = most.max(live);
            }
        } else {
            let (p, n) = held.swap_remove((r >> 8) as usize % held.len());
            // SAFETY: live, with its layout.
            unsafe { heap.free(p, bytes(n)) };
            live -= n;
        }
        if step % 7 == 0 {
            let s = heap.stats();
            assert_eq!((s.live_bytes, s.peak_bytes), (live, most), "step {step}");
        }
    }
    for (p, n) in held {
        // SAFETY: as above.
        unsafe { heap.free(p, bytes(n)) };
    }
    most
}

#[test]
fn the_peak_is_exact_for_one_thread_at_a_time() {
    let heap = unregistered("peak-exact").build(Global);
    let most = grow_and_shrink(&heap, 7, 20, 0);
    // A second thread takes a lane of its own and goes higher; its stats are
    // checked from its side and, after it exits, from here.
    let most =
        std::thread::scope(|s| s.spawn(|| grow_and_shrink(&heap, 11, 40, most)).join()).unwrap();
    let s = heap.validate().unwrap();
    assert_eq!((s.live_bytes, s.peak_bytes), (0, most));
    // Under a budget the refusals come exactly at the edge.
    let budget = 150 << 10;
    let heap = unregistered("peak-exact-budget")
        .budget(budget)
        .build(Global);
    let most = grow_and_shrink(&heap, 13, 40, 0);
    assert!(most <= budget);
    assert_eq!(heap.validate().unwrap().peak_bytes, most);
}
