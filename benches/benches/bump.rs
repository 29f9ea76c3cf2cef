//! `Bump` beside `bumpalo` and the system allocator, in one run, per workload.
//!
//! `cargo bench -p bento-benches --bench bump` (or `cargo xtask bench`); the ratios are
//! in docs/benchmarks.md.

use std::hint::black_box;
use std::time::Duration;

use allocator_api2::vec::Vec as ApiVec;
use bento_benches::{
    bento_arena_16, bento_bump_16, bento_bump_layout_16, bento_double_16, bento_stack_16, buffer,
    bumpalo_16, frame_arena, frame_bump, frame_bumpalo, mixed_sizes, system_16,
};
use bento_primitives::{Arena, Bump, DoubleStack, Stack};
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};

/// Allocations per iteration of the 16-byte and mixed workloads.
const N: usize = 1000;
/// Allocations in one frame of the frame workload.
const FRAME: usize = 10_000;

fn sixteen_bytes(c: &mut Criterion) {
    let mut g = c.benchmark_group("bump/16B_then_reset");
    g.throughput(Throughput::Elements(N as u64));
    let mut buf = buffer(16 * N + 64);
    let mut bump = Bump::new(&mut buf);
    g.bench_function("bento", |b| {
        b.iter(|| {
            let s = bento_bump_16(&bump, N);
            bump.reset();
            s
        })
    });
    let mut bumpalo = bumpalo::Bump::with_capacity(16 * N + 64);
    g.bench_function("bumpalo", |b| {
        b.iter(|| {
            let s = bumpalo_16(&bumpalo, N);
            bumpalo.reset();
            s
        })
    });
    g.bench_function("system", |b| b.iter(|| system_16(N)));
    // The arena: the same fast path, with the committed end as its limit.
    let mut arena = Arena::new(16 * N + 4096).unwrap();
    g.bench_function("arena", |b| b.iter(|| bento_arena_16(&mut arena, N)));
    g.finish();
}

fn mixed(c: &mut Criterion) {
    let sizes = mixed_sizes(N);
    let total: usize = sizes.iter().map(|s| s + 8).sum();
    let mut g = c.benchmark_group("bump/mixed_8_256");
    g.throughput(Throughput::Elements(N as u64));
    let mut buf = buffer(total + 64);
    let mut bump = Bump::new(&mut buf);
    g.bench_function("bento", |b| {
        b.iter(|| {
            for &s in &sizes {
                let layout = std::alloc::Layout::from_size_align(s, 8).unwrap();
                black_box(bump.alloc_layout(layout).unwrap());
            }
            bump.reset();
        })
    });
    let mut bumpalo = bumpalo::Bump::with_capacity(total + 64);
    g.bench_function("bumpalo", |b| {
        b.iter(|| {
            for &s in &sizes {
                let layout = std::alloc::Layout::from_size_align(s, 8).unwrap();
                black_box(bumpalo.alloc_layout(layout));
            }
            bumpalo.reset();
        })
    });
    g.bench_function("system", |b| {
        b.iter(|| {
            let blocks: Vec<Vec<u8>> = sizes.iter().map(|&s| Vec::with_capacity(s)).collect();
            black_box(blocks)
        })
    });
    g.finish();
}

fn vec_push(c: &mut Criterion) {
    const PUSHES: usize = 10_000;
    let mut g = c.benchmark_group("bump/vec_push_10k");
    g.throughput(Throughput::Elements(PUSHES as u64));
    // Room for every doubling of the vector (the old buffers stay until reset).
    let mut buf = buffer(8 * 4 * PUSHES);
    let mut bump = Bump::new(&mut buf);
    g.bench_function("bento", |b| {
        b.iter(|| {
            {
                let mut v = ApiVec::new_in(&bump);
                for i in 0..PUSHES as u32 {
                    v.push(i);
                }
                black_box(&v);
            }
            bump.reset();
        })
    });
    let mut bumpalo = bumpalo::Bump::with_capacity(8 * 4 * PUSHES);
    g.bench_function("bumpalo", |b| {
        b.iter(|| {
            {
                let mut v = ApiVec::new_in(&bumpalo);
                for i in 0..PUSHES as u32 {
                    v.push(i);
                }
                black_box(&v);
            }
            bumpalo.reset();
        })
    });
    g.bench_function("system", |b| {
        b.iter(|| {
            let mut v = Vec::new();
            for i in 0..PUSHES as u32 {
                v.push(i);
            }
            black_box(v)
        })
    });
    g.finish();
}

fn frame(c: &mut Criterion) {
    let sizes = mixed_sizes(FRAME);
    let total: usize = sizes.iter().map(|s| s + 8).sum();
    let mut g = c.benchmark_group("bump/frame_10k_reset");
    g.throughput(Throughput::Elements(FRAME as u64));
    let mut buf = buffer(total + 64);
    let mut bump = Bump::new(&mut buf);
    g.bench_with_input(BenchmarkId::new("bento", FRAME), &sizes, |b, sizes| {
        b.iter(|| frame_bump(&mut bump, sizes))
    });
    let mut arena = Arena::new(total + 4096).unwrap();
    g.bench_with_input(BenchmarkId::new("arena", FRAME), &sizes, |b, sizes| {
        b.iter(|| frame_arena(&mut arena, sizes))
    });
    let mut bumpalo = bumpalo::Bump::with_capacity(total + 64);
    g.bench_with_input(BenchmarkId::new("bumpalo", FRAME), &sizes, |b, sizes| {
        b.iter(|| frame_bumpalo(&mut bumpalo, sizes))
    });
    g.finish();
}

/// Stack and DoubleStack beside Bump on the same loop: 1000 × 16-byte `alloc_layout`
/// and a write each, then a rollback to a marker (Stack, DoubleStack's lower end) or a
/// reset (Bump).
fn stack_vs_bump(c: &mut Criterion) {
    let mut g = c.benchmark_group("stack/16B_then_rollback");
    g.throughput(Throughput::Elements(N as u64));
    let mut buf = buffer(32 * N + 64);
    let mut bump = Bump::new(&mut buf);
    g.bench_function("bump", |b| b.iter(|| bento_bump_layout_16(&mut bump, N)));
    let mut buf = buffer(32 * N + 64);
    let mut stack = Stack::new(&mut buf);
    g.bench_function("stack", |b| b.iter(|| bento_stack_16(&mut stack, N)));
    let mut buf = buffer(32 * N + 64);
    let mut double = DoubleStack::new(&mut buf);
    g.bench_function("double_lower", |b| {
        b.iter(|| bento_double_16(&mut double, false, N))
    });
    g.bench_function("double_upper", |b| {
        b.iter(|| bento_double_16(&mut double, true, N))
    });
    g.finish();
}

fn config() -> Criterion {
    // Short runs: the CI machine has two cores and the ratios settle quickly.
    Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
        .sample_size(30)
}

criterion_group! {
    name = benches;
    config = config();
    targets = sixteen_bytes, mixed, vec_push, frame, stack_vs_bump
}
criterion_main!(benches);
