//! The memory space beside general allocators, on the patterns a game throws at a
//! heap. `cargo bench -p bento-benches --bench space`.
//!
//! - `mixed`: 10k live blocks of 16–4095 B (log-uniform); each step frees a random
//!   one and allocates a replacement of a random size. The random numbers come from
//!   a generator whose state carries on from iteration to iteration, so no two
//!   iterations run the same operations.
//! - `lifo_empty`: LIFO batches of 100 × 64 B on an otherwise empty heap (a memory
//!   space empties, and gives its segment back, every batch).
//! - `lifo_pinned`: the same with one block kept live, so the heap never empties.
//! - `frame_16`: 10k × 16 B, then every one freed in the order made.
//! - `free_all_10m`: 10M × 16 B, then every one freed in the order made.
//! - `churn_256k`: a 256 KiB block freed and made again between two live ones.
//!
//! Every peer runs through the same [`Heap`] adaptor. talc and rlsf manage one
//! arena taken up front (how they are used); the others get their memory from the OS.
//! The per-operation latency of a large churn, and peak RSS, are measured per
//! allocator in its own process by `cargo run --release -p bento-benches --bin churn`.

use std::hint::black_box;
use std::ptr::NonNull;

use bento_benches::Rng;
use bento_benches::heap::{
    Api, GlobalHeap, Heap, LIFO_BATCH, Rlsf, Talc, frame_free_all, lifo_batches, mixed_drain,
    mixed_fill, mixed_replace,
};
use bento_pages::SystemPages;
use bento_space::{MemorySpace, SpaceConfig};
use criterion::{
    BenchmarkGroup, Criterion, Throughput, criterion_group, criterion_main, measurement::WallTime,
};

const LIVE: usize = 10_000;
const STEPS: usize = 10_000;
const ROUNDS: usize = 10;
const FRAME: usize = 10_000;
const BIG_FRAME: usize = 10_000_000;
const PAIRS: usize = 1_000;
/// The arena rlsf and talc manage: far more than any workload here holds live.
const ARENA: usize = 512 << 20;

fn space() -> MemorySpace<SystemPages> {
    MemorySpace::new(SystemPages::new(), SpaceConfig::DEFAULT).expect("a space")
}

/// Runs `bench` once per peer, each on a heap of its own, in one group.
macro_rules! peers {
    ($g:expr, $bench:ident) => {{
        let s = space();
        $bench(&mut $g, "bento_space", Api(&s));
        $bench(&mut $g, "system_glibc", GlobalHeap(std::alloc::System));
        $bench(&mut $g, "mimalloc", GlobalHeap(mimalloc::MiMalloc));
        $bench(&mut $g, "jemalloc", GlobalHeap(tikv_jemallocator::Jemalloc));
        $bench(&mut $g, "talc", Talc::new(ARENA));
        $bench(&mut $g, "rlsf", Rlsf::new(ARENA));
        $bench(&mut $g, "dlmalloc", GlobalHeap(dlmalloc::GlobalDlmalloc));
    }};
}

fn mixed_on<H: Heap>(g: &mut BenchmarkGroup<'_, WallTime>, name: &str, mut heap: H) {
    let mut rng = Rng::new(0x9E37_79B9_7F4A_7C15);
    let mut live = mixed_fill(&mut heap, &mut rng, LIVE);
    g.bench_function(name, |b| {
        b.iter(|| mixed_replace(&mut heap, &mut live, &mut rng, black_box(STEPS)))
    });
    mixed_drain(&mut heap, live);
}

fn mixed(c: &mut Criterion) {
    let mut g = c.benchmark_group("space/mixed");
    // One step is a free and an allocation: two operations.
    g.throughput(Throughput::Elements(2 * STEPS as u64));
    peers!(g, mixed_on);
    g.finish();
}

fn lifo_empty_on<H: Heap>(g: &mut BenchmarkGroup<'_, WallTime>, name: &str, mut heap: H) {
    g.bench_function(name, |b| {
        b.iter(|| lifo_batches(&mut heap, black_box(ROUNDS)))
    });
}

fn lifo_pinned_on<H: Heap>(g: &mut BenchmarkGroup<'_, WallTime>, name: &str, mut heap: H) {
    let layout = core::alloc::Layout::new::<[u8; 64]>();
    let anchor = heap.allocate(layout);
    g.bench_function(name, |b| {
        b.iter(|| lifo_batches(&mut heap, black_box(ROUNDS)))
    });
    // SAFETY: the anchor is live and freed once.
    unsafe { heap.deallocate(anchor, layout) };
}

fn lifo(c: &mut Criterion) {
    let mut g = c.benchmark_group("space/lifo_empty");
    g.throughput(Throughput::Elements((ROUNDS * LIFO_BATCH) as u64));
    peers!(g, lifo_empty_on);
    g.finish();
    let mut g = c.benchmark_group("space/lifo_pinned");
    g.throughput(Throughput::Elements((ROUNDS * LIFO_BATCH) as u64));
    peers!(g, lifo_pinned_on);
    g.finish();
}

fn frame_on<H: Heap>(g: &mut BenchmarkGroup<'_, WallTime>, name: &str, mut heap: H) {
    let mut held = vec![NonNull::<u8>::dangling(); FRAME];
    g.bench_function(name, |b| {
        b.iter(|| frame_free_all(&mut heap, black_box(&mut held), 16))
    });
}

fn big_frame_on<H: Heap>(g: &mut BenchmarkGroup<'_, WallTime>, name: &str, mut heap: H) {
    let mut held = vec![NonNull::<u8>::dangling(); BIG_FRAME];
    g.bench_function(name, |b| {
        b.iter(|| frame_free_all(&mut heap, black_box(&mut held), 16))
    });
}

fn frames(c: &mut Criterion) {
    let mut g = c.benchmark_group("space/frame_16");
    g.throughput(Throughput::Elements(FRAME as u64));
    peers!(g, frame_on);
    g.finish();
    let mut g = c.benchmark_group("space/free_all_10m");
    g.throughput(Throughput::Elements(BIG_FRAME as u64));
    g.sample_size(10);
    peers!(g, big_frame_on);
    g.finish();
}

/// Freeing and reusing a 256 KiB block between two live ones: each free decommits the
/// pages inside it, each reuse commits them again. With the commit cache those calls
/// stay in the process; without it each is a system call.
fn churn(c: &mut Criterion) {
    let mut g = c.benchmark_group("space/churn_256k");
    g.throughput(Throughput::Elements(PAIRS as u64));
    fn churn_on<H: Heap>(g: &mut BenchmarkGroup<'_, WallTime>, name: &str, mut heap: H) {
        let small = core::alloc::Layout::new::<[u8; 64]>();
        let big = core::alloc::Layout::from_size_align(256 << 10, 8).unwrap();
        let a = heap.allocate(small);
        let mid = heap.allocate(big);
        let b = heap.allocate(small);
        // SAFETY: `mid` is live; freed here and made again in each iteration.
        unsafe { heap.deallocate(mid, big) };
        g.bench_function(name, |bench| {
            bench.iter(|| {
                for _ in 0..black_box(PAIRS) {
                    // Opaque, so that LLVM cannot drop a malloc/free pair.
                    let p = black_box(heap.allocate(big));
                    // SAFETY: a fresh block of 256 KiB, freed once.
                    unsafe {
                        p.as_ptr().add(128 << 10).write(1);
                        heap.deallocate(p, big);
                    }
                }
            })
        });
        // SAFETY: live, freed once.
        unsafe {
            heap.deallocate(a, small);
            heap.deallocate(b, small);
        }
    }
    let cached = space();
    churn_on(&mut g, "bento_space_cache_4m", Api(&cached));
    let bare = MemorySpace::new(
        SystemPages::new(),
        SpaceConfig::DEFAULT.with_commit_cache(0),
    )
    .expect("a space");
    churn_on(&mut g, "bento_space_no_cache", Api(&bare));
    churn_on(&mut g, "system_glibc", GlobalHeap(std::alloc::System));
    churn_on(&mut g, "mimalloc", GlobalHeap(mimalloc::MiMalloc));
    g.finish();
}

criterion_group!(benches, mixed, lifo, frames, churn);
criterion_main!(benches);
