//! The memory space beside general allocators: the mixed workload (sizes 16–4096 B
//! log-uniform, 10k live blocks, each step frees one and allocates a replacement) and
//! 64-byte alloc/free pairs. `cargo bench -p bento-benches --bench space`.
//!
//! Every peer runs through the same [`Heap`] adaptor. rlsf and talc manage one arena
//! taken up front (how they are used); the others get their memory from the OS.

use std::hint::black_box;

use bento_benches::heap::{
    Api, GlobalHeap, Heap, Mixed, Rlsf, Talc, mixed_drain, mixed_fill, mixed_replace, pairs_64,
};
use bento_pages::SystemPages;
use bento_space::{MemorySpace, SpaceConfig};
use criterion::{
    BenchmarkGroup, Criterion, Throughput, criterion_group, criterion_main, measurement::WallTime,
};

const LIVE: usize = 10_000;
const STEPS: usize = 10_000;
const PAIRS: usize = 1_000;
/// The arena rlsf and talc manage: far more than 10k blocks of at most 4 KiB need.
const ARENA: usize = 256 << 20;

fn mixed_on<H: Heap>(g: &mut BenchmarkGroup<'_, WallTime>, name: &str, mut heap: H, plan: &Mixed) {
    let mut live = mixed_fill(&mut heap, plan);
    g.bench_function(name, |b| {
        b.iter(|| mixed_replace(&mut heap, &mut live, black_box(plan)))
    });
    mixed_drain(&mut heap, live);
}

/// 64-byte pairs with one other block live, so the heap is never empty.
fn pairs_on<H: Heap>(g: &mut BenchmarkGroup<'_, WallTime>, name: &str, mut heap: H) {
    let layout = core::alloc::Layout::new::<[u8; 64]>();
    let anchor = heap.allocate(layout);
    g.bench_function(name, |b| b.iter(|| pairs_64(&mut heap, black_box(PAIRS))));
    // SAFETY: the anchor is live and freed once.
    unsafe { heap.deallocate(anchor, layout) };
}

fn space() -> MemorySpace<SystemPages> {
    MemorySpace::new(SystemPages::new(), SpaceConfig::DEFAULT).expect("a space")
}

fn mixed(c: &mut Criterion) {
    let plan = Mixed::new(LIVE, STEPS);
    let mut g = c.benchmark_group("space/mixed_16_4096_10k_live");
    // One step is a free and an allocation: two operations.
    g.throughput(Throughput::Elements(2 * STEPS as u64));
    let s = space();
    mixed_on(&mut g, "bento_space", Api(&s), &plan);
    mixed_on(
        &mut g,
        "system_glibc",
        GlobalHeap(std::alloc::System),
        &plan,
    );
    mixed_on(
        &mut g,
        "dlmalloc",
        GlobalHeap(dlmalloc::GlobalDlmalloc),
        &plan,
    );
    mixed_on(&mut g, "rlsf", Rlsf::new(ARENA), &plan);
    mixed_on(&mut g, "talc", Talc::new(ARENA), &plan);
    mixed_on(&mut g, "mimalloc", GlobalHeap(mimalloc::MiMalloc), &plan);
    mixed_on(
        &mut g,
        "jemalloc",
        GlobalHeap(tikv_jemallocator::Jemalloc),
        &plan,
    );
    g.finish();
}

fn pairs(c: &mut Criterion) {
    let mut g = c.benchmark_group("space/pairs_64");
    g.throughput(Throughput::Elements(PAIRS as u64));
    let s = space();
    pairs_on(&mut g, "bento_space", Api(&s));
    pairs_on(&mut g, "system_glibc", GlobalHeap(std::alloc::System));
    pairs_on(&mut g, "dlmalloc", GlobalHeap(dlmalloc::GlobalDlmalloc));
    pairs_on(&mut g, "rlsf", Rlsf::new(ARENA));
    pairs_on(&mut g, "talc", Talc::new(ARENA));
    pairs_on(&mut g, "mimalloc", GlobalHeap(mimalloc::MiMalloc));
    pairs_on(&mut g, "jemalloc", GlobalHeap(tikv_jemallocator::Jemalloc));
    // The pathology of eager release: pairs on an empty space reserve and release a
    // segment each time (the commit cache absorbs the commits, not the reserve).
    let s = space();
    g.bench_function("bento_space_empty", |b| {
        b.iter(|| pairs_64(&mut Api(&s), black_box(PAIRS)))
    });
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

criterion_group!(benches, mixed, pairs, churn);
criterion_main!(benches);
