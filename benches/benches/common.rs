//! The common allocator beside the general allocators a program would otherwise use
//! (glibc's, mimalloc, jemalloc), each driven directly through the same adaptor.
//! `cargo bench -p bento-benches --bench common`.
//!
//! - `mixed`: 10k live blocks of 16–4095 B (log-uniform); each step frees a random
//!   one and allocates a replacement. Random numbers carry on between iterations.
//! - `small`: the same with 1–256 B (uniform), where the 20 small regions serve.
//! - `threads`: each of 1 or 2 threads keeps 1000 blocks of 1–512 B live and
//!   replaces them; every 16th block goes to the other thread, which frees it
//!   (cross-thread frees). Throughput is operations per second of all threads.
//!
//! `cargo xtask bench-global` runs a Rust program's mix with each allocator as
//! `#[global_allocator]`.

use std::hint::black_box;
use std::sync::{Barrier, Mutex};
use std::time::{Duration, Instant};

use bento_benches::XorShift;
use bento_benches::heap::{
    GlobalHeap, Heap, fill_with, mixed_drain, mixed_size, replace_with, small_size,
};
use bento_common::CommonAllocator;
use criterion::{
    BenchmarkGroup, BenchmarkId, Criterion, Throughput, criterion_group, criterion_main,
    measurement::WallTime,
};

const LIVE: usize = 10_000;
const STEPS: usize = 10_000;

/// Runs `bench` once per peer, each on a heap of its own, in one group.
macro_rules! peers {
    ($g:expr, $bench:ident $(, $arg:expr)*) => {{
        $bench(&mut $g, "bento_common", GlobalHeap(CommonAllocator::new()) $(, $arg)*);
        $bench(&mut $g, "system_glibc", GlobalHeap(std::alloc::System) $(, $arg)*);
        $bench(&mut $g, "mimalloc", GlobalHeap(mimalloc::MiMalloc) $(, $arg)*);
        $bench(&mut $g, "jemalloc", GlobalHeap(tikv_jemallocator::Jemalloc) $(, $arg)*);
    }};
}

fn replace_on<H: Heap>(
    g: &mut BenchmarkGroup<'_, WallTime>,
    name: &str,
    mut heap: H,
    size: fn(u64) -> usize,
) {
    let mut rng = XorShift(0x9E37_79B9_7F4A_7C15);
    let mut live = fill_with(&mut heap, &mut rng, LIVE, size);
    g.bench_function(name, |b| {
        b.iter(|| replace_with(&mut heap, &mut live, &mut rng, black_box(STEPS), size))
    });
    mixed_drain(&mut heap, live);
}

fn single(c: &mut Criterion) {
    for (group, size) in [
        ("common/mixed", mixed_size as fn(u64) -> usize),
        ("common/small", small_size),
    ] {
        let mut g = c.benchmark_group(group);
        g.throughput(Throughput::Elements(2 * STEPS as u64));
        peers!(g, replace_on, size);
        g.finish();
    }
}

/// Steps each thread runs per measured round.
const THREAD_STEPS: usize = 50_000;
const THREAD_LIVE: usize = 1000;
/// One block in this many goes to the other thread.
const HANDOFF: usize = 16;

/// A block on its way to another thread (the pointer is only freed there).
struct Sent(std::ptr::NonNull<u8>, usize);
// SAFETY: a block of a `Sync` allocator, owned by whoever holds the `Sent`.
unsafe impl Send for Sent {}

/// `threads` threads replacing blocks of 1–512 B and freeing each other's; returns
/// the time of `rounds` rounds.
fn threaded<A: std::alloc::GlobalAlloc + Sync>(alloc: &A, threads: usize, rounds: u64) -> Duration {
    let inboxes: Vec<Mutex<Vec<Sent>>> = (0..threads).map(|_| Mutex::new(Vec::new())).collect();
    let start = Barrier::new(threads + 1);
    let done = Barrier::new(threads + 1);
    let elapsed = std::thread::scope(|s| {
        for t in 0..threads {
            let (inboxes, start, done) = (&inboxes, &start, &done);
            s.spawn(move || {
                let mut heap = GlobalHeap(Shared(alloc));
                let mut rng = XorShift(0x9E37_79B9_7F4A_7C15 ^ (t as u64 + 1));
                let size = |r: u64| 1 + (r as usize & 511);
                let mut live = fill_with(&mut heap, &mut rng, THREAD_LIVE, size);
                let mut outbox = Vec::with_capacity(THREAD_STEPS / HANDOFF + 1);
                start.wait();
                for _ in 0..rounds {
                    for step in 0..THREAD_STEPS {
                        let r = rng.next();
                        let slot = &mut live[bento_benches::heap::below(r, THREAD_LIVE)];
                        if step % HANDOFF == 0 {
                            outbox.push(Sent(slot.0, slot.1));
                        } else {
                            // SAFETY: a live block of its recorded size.
                            unsafe { heap.deallocate(slot.0, layout(slot.1)) };
                        }
                        let n = size(r.rotate_left(32));
                        let p = heap.allocate(layout(n));
                        // SAFETY: a fresh block of at least 1 byte.
                        unsafe { p.as_ptr().write(n as u8) };
                        *slot = (p, n);
                        if outbox.len() == 64 {
                            let to = (t + 1) % threads;
                            inboxes[to].lock().unwrap().append(&mut outbox);
                            let mine = std::mem::take(&mut *inboxes[t].lock().unwrap());
                            for Sent(p, n) in mine {
                                // SAFETY: a live block another thread gave up.
                                unsafe { heap.deallocate(p, layout(n)) };
                            }
                        }
                    }
                }
                done.wait();
                for (p, n) in live
                    .drain(..)
                    .chain(outbox.drain(..).map(|Sent(p, n)| (p, n)))
                {
                    // SAFETY: live blocks of their sizes.
                    unsafe { heap.deallocate(p, layout(n)) };
                }
            });
        }
        start.wait();
        let t0 = Instant::now();
        done.wait();
        t0.elapsed()
    });
    // The inboxes' leftovers, once every thread has stopped sending.
    for inbox in &inboxes {
        for Sent(p, n) in inbox.lock().unwrap().drain(..) {
            // SAFETY: live blocks nobody else holds now.
            unsafe { alloc.dealloc(p.as_ptr(), layout(n)) };
        }
    }
    elapsed
}

fn layout(size: usize) -> std::alloc::Layout {
    std::alloc::Layout::from_size_align(size, 8).expect("a small size")
}

/// A shared reference to a `GlobalAlloc`, as a `GlobalAlloc`.
struct Shared<'a, A>(&'a A);

// SAFETY: forwards to `A`.
unsafe impl<A: std::alloc::GlobalAlloc> std::alloc::GlobalAlloc for Shared<'_, A> {
    unsafe fn alloc(&self, layout: std::alloc::Layout) -> *mut u8 {
        // SAFETY: the caller's contract.
        unsafe { self.0.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: std::alloc::Layout) {
        // SAFETY: the caller's contract.
        unsafe { self.0.dealloc(ptr, layout) }
    }
}

fn threads(c: &mut Criterion) {
    let mut g = c.benchmark_group("common/threads");
    g.sample_size(20);
    fn on<A: std::alloc::GlobalAlloc + Sync>(
        g: &mut BenchmarkGroup<'_, WallTime>,
        name: &str,
        alloc: A,
    ) {
        for n in [1, 2] {
            g.throughput(Throughput::Elements((2 * THREAD_STEPS * n) as u64));
            g.bench_with_input(BenchmarkId::new(name, n), &n, |b, &n| {
                b.iter_custom(|rounds| threaded(&alloc, n, rounds))
            });
        }
    }
    on(&mut g, "bento_common", CommonAllocator::new());
    on(&mut g, "system_glibc", std::alloc::System);
    on(&mut g, "mimalloc", mimalloc::MiMalloc);
    on(&mut g, "jemalloc", tikv_jemallocator::Jemalloc);
    g.finish();
}

criterion_group!(benches, single, threads);
criterion_main!(benches);
