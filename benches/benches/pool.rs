//! Pools beside their peers, 64-byte chunks: alloc/free pairs LIFO in batches of 100,
//! and random replacement with 10k chunks live. `bento_shared_pool_cache` is the shared
//! pool through one thread's `SharedPoolCache` (default batch). `cargo bench -p bento-benches --bench pool`.

use std::hint::black_box;

use bento_benches::{
    BATCH, BareFreeList, CHUNK, Chunks, Entry64, Global, buffer, lifo_batches, random_order,
    random_replace,
};
use bento_primitives::{Pool, SharedPool};
use core::alloc::Layout;
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};

const LIVE: usize = 10_000;
const STEPS: usize = 10_000;

fn lifo(c: &mut Criterion) {
    let mut g = c.benchmark_group("pool/lifo_batch_100");
    g.throughput(Throughput::Elements(BATCH as u64));
    let mut buf = buffer(CHUNK * BATCH + 4096);
    let mut list = BareFreeList::new(&mut buf);
    g.bench_function("bare_free_list", |b| {
        b.iter(|| lifo_batches(&mut list, black_box(1)))
    });
    let mut buf = buffer(CHUNK * BATCH + 4096);
    let pool = Pool::new(&mut buf, Layout::new::<[u8; CHUNK]>()).unwrap();
    g.bench_function("bento_pool", |b| {
        b.iter(|| lifo_batches(&mut &pool, black_box(1)))
    });
    let mut buf = buffer((CHUNK + 4) * BATCH + 4096);
    let shared = SharedPool::new(&mut buf, Layout::new::<[u8; CHUNK]>()).unwrap();
    g.bench_function("bento_shared_pool", |b| {
        b.iter(|| lifo_batches(&mut &shared, black_box(1)))
    });
    {
        // A pool of its own, fresh, as in `insns pool-cache`: with the shared pool above,
        // the cache would start from the 100 chunks that bench left on the list and
        // settle at holding exactly the batch of 100, never moving a batch again. From a
        // fresh pool of 160 chunks it takes and gives back a batch every round (the
        // harder case).
        let mut buf = buffer((CHUNK + 4) * BATCH + 4096);
        let shared = SharedPool::new(&mut buf, Layout::new::<[u8; CHUNK]>()).unwrap();
        let cache = shared.cache();
        g.bench_function("bento_shared_pool_cache", |b| {
            b.iter(|| lifo_batches(&mut &cache, black_box(1)))
        });
    }
    let mut slab = slab::Slab::<Entry64>::with_capacity(BATCH);
    g.bench_function("slab", |b| b.iter(|| lifo_batches(&mut slab, black_box(1))));
    g.bench_function("system_box", |b| {
        b.iter(|| lifo_batches(&mut Global(std::alloc::System), black_box(1)))
    });
    g.bench_function("mimalloc", |b| {
        b.iter(|| lifo_batches(&mut Global(mimalloc::MiMalloc), black_box(1)))
    });
    g.finish();
}

/// Fills `live` from `chunks`, runs the replacement loop in the benchmark, then gives
/// everything back.
fn replace_on<C: Chunks>(
    g: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
    name: &str,
    mut chunks: C,
    order: &[u32],
) {
    let mut live: Vec<C::Handle> = (0..LIVE).map(|i| chunks.take(i as u64)).collect();
    g.bench_with_input(BenchmarkId::from_parameter(name), order, |b, order| {
        b.iter(|| random_replace(&mut chunks, &mut live, black_box(order)))
    });
    for h in live {
        // SAFETY: every handle in `live` is in use, given back once.
        unsafe { chunks.give(h) };
    }
}

fn random(c: &mut Criterion) {
    let mut g = c.benchmark_group("pool/random_10k_live");
    g.throughput(Throughput::Elements(STEPS as u64));
    let order = random_order(STEPS, LIVE);
    let mut buf = buffer(CHUNK * (LIVE + 1) + 4096);
    replace_on(
        &mut g,
        "bare_free_list",
        BareFreeList::new(&mut buf),
        &order,
    );
    let mut buf = buffer(CHUNK * (LIVE + 1) + 4096);
    let pool = Pool::new(&mut buf, Layout::new::<[u8; CHUNK]>()).unwrap();
    replace_on(&mut g, "bento_pool", &pool, &order);
    let mut buf = buffer((CHUNK + 4) * (LIVE + 1) + 4096);
    let shared = SharedPool::new(&mut buf, Layout::new::<[u8; CHUNK]>()).unwrap();
    replace_on(&mut g, "bento_shared_pool", &shared, &order);
    replace_on(&mut g, "bento_shared_pool_cache", &shared.cache(), &order);
    replace_on(
        &mut g,
        "slab",
        slab::Slab::<Entry64>::with_capacity(LIVE + 1),
        &order,
    );
    replace_on(&mut g, "system_box", Global(std::alloc::System), &order);
    replace_on(&mut g, "mimalloc", Global(mimalloc::MiMalloc), &order);
    g.finish();
}

criterion_group!(benches, lifo, random);
criterion_main!(benches);
