//! The common allocator beside the general allocators a program would otherwise use
//! (glibc's, mimalloc, jemalloc), each driven directly through the same adaptor.
//! `cargo bench -p bento-benches --bench common`.
//!
//! - `mixed`: 10k live blocks of 16–4095 B (log-uniform); each step frees a random
//!   one and allocates a replacement. Random numbers carry on between iterations.
//! - `small`: the same with 1–256 B (uniform), where the 20 small classes serve.
//! - `threads`: each of 1 or 2 threads keeps 1000 blocks of 1–512 B live and
//!   replaces them; every 16th block goes to the other thread, which frees it
//!   (cross-thread frees). Throughput is operations per second of all threads.
//!
//! `cargo xtask bench-global` runs a Rust program's mix with each allocator as
//! `#[global_allocator]`.

use std::hint::black_box;

use bento_benches::Rng;
use bento_benches::heap::{
    GlobalHeap, Heap, fill_with, mixed_drain, mixed_size, replace_with, small_size,
};
use bento_benches::threads::{THREAD_STEPS, threaded};
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
    let mut rng = Rng::new(0x9E37_79B9_7F4A_7C15);
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
