//! Loom models of `SharedPool`'s lock-free free list: concurrent pops and pushes lose
//! and duplicate nothing, the ABA interleaving fails its swap, and a chunk's contents
//! pass from one owner to the next without a data race. The same for the batches a
//! `SharedPoolCache` takes (a walk down the list, then one swap) and gives back.
//!
//! Run with `cargo xtask loom` (`RUSTFLAGS="--cfg bento_loom"`, feature `loom`).
#![cfg(bento_loom)]

use core::alloc::Layout;
use core::mem::MaybeUninit;
use core::num::NonZeroU32;
use core::ptr::NonNull;

use bento_primitives::SharedPool;
use bento_testkit::loom::in_threads;
use loom::cell::UnsafeCell;
use loom::sync::Arc;
use loom::thread;

const CHUNK: usize = 64;

/// A pool for a model (leaked: loom threads need `'static`) with `n` chunks in play:
/// every other chunk is taken for good, the `n` are handed out once and those in
/// `free_order` freed in that order, so the free list is `free_order` reversed (the
/// last freed on top). Returns the pool and the `n` chunks.
fn pool_with_list(
    n: usize,
    free_order: &[usize],
) -> (&'static SharedPool<'static>, Vec<NonNull<u8>>) {
    let bytes = n * (CHUNK + 64) + CHUNK;
    let buf: &'static mut [MaybeUninit<u8>] =
        Box::leak(vec![MaybeUninit::uninit(); bytes].into_boxed_slice());
    let pool = SharedPool::new(buf, Layout::new::<[u8; CHUNK]>()).unwrap();
    assert!(pool.capacity() >= n);
    let pool: &'static SharedPool<'static> = Box::leak(Box::new(pool));
    let chunks: Vec<_> = (0..n).map(|_| pool.alloc().unwrap()).collect();
    // No chunk above the high-water mark is left: the list is all there is.
    while pool.alloc().is_some() {}
    for &i in free_order {
        // SAFETY: each chunk is live and freed once.
        unsafe { pool.free(chunks[i]) };
    }
    (pool, chunks)
}

/// One payload cell per chunk: an owner writes its id and reads it back, so loom
/// reports a race if a chunk's handover lacks a happens-before edge.
struct Payloads {
    cells: Vec<UnsafeCell<usize>>,
    chunks: Vec<NonNull<u8>>,
}

// SAFETY: the pointers are only compared, never dereferenced, by the model.
unsafe impl Send for Payloads {}
// SAFETY: as above; the cells are loom's, which check their own accesses.
unsafe impl Sync for Payloads {}

impl Payloads {
    fn new(chunks: &[NonNull<u8>]) -> Arc<Self> {
        Arc::new(Self {
            cells: chunks.iter().map(|_| UnsafeCell::new(0)).collect(),
            chunks: chunks.to_vec(),
        })
    }

    /// Writes `owner` into the chunk's payload and checks it reads back.
    fn own(&self, chunk: NonNull<u8>, owner: usize) {
        let i = self
            .chunks
            .iter()
            .position(|&c| c == chunk)
            .expect("a chunk of the pool");
        // SAFETY: loom checks that no other thread accesses the cell concurrently.
        self.cells[i].with_mut(|p| unsafe { *p = owner });
        // SAFETY: as above.
        assert_eq!(self.cells[i].with(|p| unsafe { *p }), owner);
    }
}

/// Pointers handed between loom threads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Chunk(NonNull<u8>);

// SAFETY: a chunk pointer is owned by one thread at a time (the model's protocol).
unsafe impl Send for Chunk {}

/// Spawns a model thread running `body` with its own handle on `payloads`.
fn spawn_with<T: Send + 'static>(
    payloads: &Arc<Payloads>,
    body: impl FnOnce(&Payloads) -> T + Send + 'static,
) -> thread::JoinHandle<T> {
    let payloads = Arc::clone(payloads);
    thread::spawn(move || body(&*payloads))
}

/// Takes a chunk from the pool on the main thread, owning it as owner 2 if there is one.
fn alloc_as_main(pool: &SharedPool<'_>, payloads: &Payloads) -> Option<NonNull<u8>> {
    let got = pool.alloc();
    if let Some(c) = got {
        payloads.own(c, 2);
    }
    got
}

/// A thread's turn in the two-thread models: takes two chunks through `alloc`
/// (`expect` says why one must be there), owns them as `owner`, and gives them back
/// through `free`, the second first.
fn take_two_and_give_back(
    payloads: &Payloads,
    owner: usize,
    expect: &str,
    alloc: impl Fn() -> Option<NonNull<u8>>,
    free: impl Fn(NonNull<u8>),
) {
    let a = alloc().expect(expect);
    let b = alloc().expect(expect);
    assert_ne!(a, b);
    payloads.own(a, owner);
    payloads.own(b, owner);
    free(b);
    free(a);
}

/// Four chunks on the list and two threads each running `turn(pool, payloads, owner)`,
/// which gives back all it takes: afterwards the list holds all four chunks, each once,
/// whatever the interleaving.
fn two_threads_on_four_chunks(turn: fn(&'static SharedPool<'static>, &Payloads, usize)) {
    loom::model(move || {
        let (pool, chunks) = pool_with_list(4, &[3, 2, 1, 0]);
        let payloads = Payloads::new(&chunks);
        in_threads(2, move |owner| turn(pool, &*payloads, owner));
        drain_exactly(pool, chunks);
    });
}

/// Drains the pool and checks it holds exactly `expect` chunks, each once.
fn drain_exactly(pool: &SharedPool<'_>, mut expect: Vec<NonNull<u8>>) {
    let mut got: Vec<_> = core::iter::from_fn(|| pool.alloc()).collect();
    got.sort();
    expect.sort();
    assert_eq!(got, expect, "the free list lost or duplicated a chunk");
}

/// Two threads each pop two chunks and push them back: afterwards the list holds all
/// four chunks, each once, whatever the interleaving.
#[test]
fn two_threads_pop_two_and_push_them_back() {
    two_threads_on_four_chunks(|pool, payloads, owner| {
        take_two_and_give_back(
            payloads,
            owner,
            "at most four chunks are out",
            || pool.alloc(),
            // SAFETY: chunks this thread took from `pool`, freed once.
            |c| unsafe { pool.free(c) },
        );
    });
}

/// The ABA trace: T1 reads head A (next B) and stalls; T2 pops A and B and pushes A
/// back; T1's swap must fail (the tag moved), so B, which T2 holds, is never handed
/// out again. Loom runs every interleaving, this one included.
#[test]
fn aba_swap_fails_and_b_is_never_handed_out_twice() {
    loom::model(|| {
        // The list is A -> B -> C (A on top).
        let (pool, chunks) = pool_with_list(3, &[2, 1, 0]);
        let payloads = Payloads::new(&chunks);
        let t1 = spawn_with(&payloads, move |payloads| {
            let x = pool.alloc().expect("three chunks, at most three out");
            payloads.own(x, 1);
            Chunk(x)
        });
        let t2 = spawn_with(&payloads, move |payloads| {
            let a = pool.alloc().expect("three chunks, at most three out");
            let b = pool.alloc().expect("three chunks, at most three out");
            payloads.own(a, 2);
            payloads.own(b, 2);
            // SAFETY: `a` is this thread's, freed once.
            unsafe { pool.free(a) };
            Chunk(b)
        });
        let Chunk(x) = t1.join().unwrap();
        let Chunk(b) = t2.join().unwrap();
        assert_ne!(x, b, "one chunk handed to two owners");
        // The list holds the third chunk (and the one T2 pushed back, unless T1 took
        // it): everything but `x` and `b`.
        let rest: Vec<_> = chunks
            .iter()
            .copied()
            .filter(|&c| c != x && c != b)
            .collect();
        drain_exactly(pool, rest);
    });
}

/// A free racing an allocation from an empty list: the allocating thread either takes
/// the freed chunk, its contents handed over without a race, or finds nothing and
/// leaves it on the list; never a torn state.
#[test]
fn an_alloc_racing_a_free_takes_the_chunk_whole_or_not_at_all() {
    loom::model(|| {
        // Two chunks in play, one kept out, one held by T1.
        let (pool, chunks) = pool_with_list(2, &[]);
        let payloads = Payloads::new(&chunks);
        let held = Chunk(chunks[1]);
        let t1 = spawn_with(&payloads, move |payloads| {
            // The block moves `held` whole (a pattern alone would capture its
            // `NonNull`, which is not `Send`).
            let Chunk(c) = { held };
            payloads.own(c, 1);
            // SAFETY: the chunk was handed to this thread, freed once.
            unsafe { pool.free(c) };
        });
        let got = alloc_as_main(pool, &payloads);
        t1.join().unwrap();
        match got {
            Some(c) => {
                assert_eq!(c, chunks[1]);
                drain_exactly(pool, vec![]);
            }
            None => drain_exactly(pool, vec![chunks[1]]),
        }
    });
}

/// A batch of `n` for a cache.
fn batch(n: u32) -> NonZeroU32 {
    NonZeroU32::new(n).unwrap()
}

/// Two threads, each with a cache of batch 2, take two chunks (one walk and swap
/// each), write them, free them into the cache and drop it (one swap back): the list
/// ends with all four chunks, each once.
#[test]
fn two_caches_take_batches_and_give_them_back() {
    two_threads_on_four_chunks(|pool, payloads, owner| {
        let cache = pool.cache_with_batch(batch(2));
        take_two_and_give_back(
            payloads,
            owner,
            "two chunks each, four in all",
            || cache.alloc(),
            // SAFETY: chunks this thread took from `cache`, freed once.
            |c| unsafe { cache.free(c) },
        );
    });
}

/// The ABA trace against a batch: T1's cache walks A -> B to take both; meanwhile T2
/// pops A and B and pushes A back. T1 must not take B (T2 holds it): its walk sees
/// the head move, or its swap fails.
#[test]
fn a_batch_walk_never_takes_a_chunk_popped_meanwhile() {
    loom::model(|| {
        // The list is A -> B -> C (A on top).
        let (pool, chunks) = pool_with_list(3, &[2, 1, 0]);
        let payloads = Payloads::new(&chunks);
        let t1 = spawn_with(&payloads, move |payloads| {
            let cache = pool.cache_with_batch(batch(2));
            let x = cache.alloc().expect("three chunks, at most three out");
            payloads.own(x, 1);
            // A second chunk, from the batch or a second walk: T1's until it frees
            // it (the payload check catches a chunk T2 holds at the same time).
            if let Some(y) = cache.alloc() {
                payloads.own(y, 1);
                // SAFETY: a chunk this thread took, freed once.
                unsafe { cache.free(y) };
            }
            Chunk(x)
        });
        let t2 = spawn_with(&payloads, move |payloads| {
            let a = pool.alloc().expect("three chunks, at most three out");
            let b = pool.alloc();
            payloads.own(a, 2);
            if let Some(b) = b {
                payloads.own(b, 2);
            }
            // SAFETY: `a` is this thread's, freed once.
            unsafe { pool.free(a) };
            b.map(Chunk)
        });
        let Chunk(x) = t1.join().unwrap();
        let b = t2.join().unwrap();
        assert_ne!(Some(Chunk(x)), b, "one chunk handed to two owners");
        // Everything but `x` and T2's `b` is back on the list.
        let rest: Vec<_> = chunks
            .iter()
            .copied()
            .filter(|&c| c != x && Some(Chunk(c)) != b)
            .collect();
        drain_exactly(pool, rest);
    });
}

/// A cache of batch 1 giving its older chunk back (one swap) when it holds two, and
/// the rest on drop, while another thread pops: the pop takes a chunk whole, its
/// contents handed over, or finds the list empty; nothing is lost.
#[test]
fn a_flush_racing_a_pop_loses_nothing() {
    loom::model(|| {
        // Two chunks, both held by T1 at the start.
        let (pool, chunks) = pool_with_list(2, &[]);
        let payloads = Payloads::new(&chunks);
        let held = (Chunk(chunks[0]), Chunk(chunks[1]));
        let t1 = spawn_with(&payloads, move |payloads| {
            // As above: `held` moves whole.
            let (Chunk(a), Chunk(b)) = { held };
            payloads.own(a, 1);
            payloads.own(b, 1);
            let cache = pool.cache_with_batch(batch(1));
            // SAFETY: chunks this thread holds, freed once. The second free makes
            // two held, twice the batch: `a` goes to the list.
            unsafe {
                cache.free(a);
                cache.free(b);
            }
            assert_eq!(cache.held(), 1);
        });
        let got = alloc_as_main(pool, &payloads);
        t1.join().unwrap();
        let rest: Vec<_> = chunks.iter().copied().filter(|&c| Some(c) != got).collect();
        drain_exactly(pool, rest);
    });
}

#[test]
fn a_two_chunk_flush_racing_a_pop_loses_nothing() {
    loom::model(|| {
        // Four chunks, all held by T1; its cache of batch 2 links two of them into a
        // chain (an interior link written before the push) when the fourth is freed.
        let (pool, chunks) = pool_with_list(4, &[]);
        let payloads = Payloads::new(&chunks);
        let held: Vec<Chunk> = chunks.iter().map(|&c| Chunk(c)).collect();
        let t1 = spawn_with(&payloads, move |payloads| {
            let cache = pool.cache_with_batch(batch(2));
            for Chunk(c) in held {
                payloads.own(c, 1);
                // SAFETY: chunks this thread holds, freed once.
                unsafe { cache.free(c) };
            }
            assert_eq!(cache.held(), 2);
            // Keep the two newest out of the main thread's reach until the end.
            core::mem::forget(cache);
        });
        let got = alloc_as_main(pool, &payloads);
        t1.join().unwrap();
        // The flushed chain: chunks 0 and 1 (the two freed first), less one popped.
        let rest: Vec<_> = chunks[..2]
            .iter()
            .copied()
            .filter(|&c| Some(c) != got)
            .collect();
        drain_exactly(pool, rest);
    });
}
