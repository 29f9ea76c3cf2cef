//! Heaps (bento-heap) over the memory space and the common allocator, beside the same
//! allocator used directly, in one run: what a heap and each of its policies cost.
//! `cargo bench -p bento-benches --bench heap`.
//!
//! - `heap/space-mixed`: 10k live blocks of 16–4095 B (log-uniform) on a memory
//!   space; each step frees a random one and allocates a replacement. Peers: the
//!   space alone, a heap without policies, with a budget, with 16-byte canaries,
//!   with a tracking table, with the debug fill.
//! - `heap/common-small`: the same with 1–256 B on the common allocator (through
//!   `Allocator`), alone and under a heap with each policy.
//! - `heap/threads`: the common allocator's `threads` workload (1 and 2 threads, a
//!   block in 16 freed by the other thread), alone and under one heap with a budget
//!   shared by the threads.

use std::hint::black_box;

use bento_benches::Rng;
use bento_benches::heap::{
    Api, Heap, fill_with, mixed_drain, mixed_size, replace_with, small_size,
};
use bento_benches::threads::{RawGlobal, THREAD_STEPS, threaded};
use bento_common::CommonAllocator;
use bento_heap::{Canaries, FillPattern, HeapBuilder, Track};
use bento_pages::SystemPages;
use bento_space::{MemorySpace, SpaceConfig};
use criterion::{
    BenchmarkGroup, BenchmarkId, Criterion, Throughput, criterion_group, criterion_main,
    measurement::WallTime,
};

const LIVE: usize = 10_000;
const STEPS: usize = 10_000;

fn replace_on<H: Heap>(
    g: &mut BenchmarkGroup<'_, WallTime>,
    name: &str,
    mut heap: H,
    size: fn(u64) -> usize,
) {
    let mut rng = Rng::new(0x9E37_79B9_7F4A_7C15);
    let mut live = fill_with(&mut heap, &mut rng, LIVE, size);
    g.bench_function(name, |b| {
        b.iter(|| replace_with(&mut heap, &mut live, &mut rng, black_box(STEPS), size))
    });
    mixed_drain(&mut heap, live);
}

fn space() -> MemorySpace<SystemPages> {
    MemorySpace::new(SystemPages::new(), SpaceConfig::DEFAULT).expect("a space")
}

/// Every heap policy over a fresh space each, beside the space alone.
fn over_space(c: &mut Criterion) {
    let mut g = c.benchmark_group("heap/space-mixed");
    g.throughput(Throughput::Elements(2 * STEPS as u64));
    let size = mixed_size as fn(u64) -> usize;
    let s = space();
    replace_on(&mut g, "space", Api(&s), size);
    let s = space();
    let h = HeapBuilder::new("bench-plain").build(&s);
    replace_on(&mut g, "heap", Api(&h), size);
    let s = space();
    let h = HeapBuilder::new("bench-budget").budget(1 << 30).build(&s);
    replace_on(&mut g, "heap_budget", Api(&h), size);
    let s = space();
    let h = HeapBuilder::new("bench-guards")
        .guards(Canaries::<16>)
        .build(&s);
    replace_on(&mut g, "heap_canaries16", Api(&h), size);
    let s = space();
    let h = HeapBuilder::new("bench-tracked")
        .tracking(Track::Sites)
        .build(&s);
    replace_on(&mut g, "heap_tracked", Api(&h), size);
    let s = space();
    let h = HeapBuilder::new("bench-fill")
        .fill(FillPattern::DEBUG)
        .build(&s);
    replace_on(&mut g, "heap_fill", Api(&h), size);
    g.finish();
}

/// The common allocator through `Allocator`, alone and under heaps. Each case has an
/// allocator of its own, dropped before the next starts: a thread's cache serves one
/// common allocator at a time, and a later one would take its locked path.
fn over_common(c: &mut Criterion) {
    let mut g = c.benchmark_group("heap/common-small");
    g.throughput(Throughput::Elements(2 * STEPS as u64));
    let size = small_size as fn(u64) -> usize;
    {
        let common = CommonAllocator::new();
        replace_on(&mut g, "common", Api(&common), size);
    }
    {
        let common = CommonAllocator::new();
        let h = HeapBuilder::new("bench-common").build(&common);
        replace_on(&mut g, "heap", Api(&h), size);
    }
    {
        let common = CommonAllocator::new();
        let h = HeapBuilder::new("bench-common-budget")
            .budget(1 << 30)
            .build(&common);
        replace_on(&mut g, "heap_budget", Api(&h), size);
    }
    {
        let common = CommonAllocator::new();
        let h = HeapBuilder::new("bench-common-guards")
            .guards(Canaries::<16>)
            .build(&common);
        replace_on(&mut g, "heap_canaries16", Api(&h), size);
    }
    {
        let common = CommonAllocator::new();
        let h = HeapBuilder::new("bench-common-tracked")
            .tracking(Track::Sites)
            .build(&common);
        replace_on(&mut g, "heap_tracked", Api(&h), size);
    }
    {
        let common = CommonAllocator::new();
        let h = HeapBuilder::new("bench-common-fill")
            .fill(FillPattern::DEBUG)
            .build(&common);
        replace_on(&mut g, "heap_fill", Api(&h), size);
    }
    g.finish();
}

/// Two threads through one heap with a budget, beside the common allocator alone.
fn threads(c: &mut Criterion) {
    let mut g = c.benchmark_group("heap/threads");
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
    on(&mut g, "common", CommonAllocator::new());
    let common: &'static CommonAllocator = Box::leak(Box::new(CommonAllocator::new()));
    let heap = HeapBuilder::new("bench-threads")
        .budget(1 << 30)
        .build(common);
    on(&mut g, "heap_over_common", RawGlobal(heap));
    g.finish();
}

criterion_group!(benches, over_space, over_common, threads);
criterion_main!(benches);
