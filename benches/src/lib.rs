//! Shared workloads for bento's benchmarks, so that the criterion benches and the
//! callgrind driver (`src/bin/insns.rs`) measure the same loops.

pub mod global;
pub mod heap;
pub mod report;
pub mod threads;

use core::mem::MaybeUninit;

use bento_pages::PageSource;
use bento_primitives::{Arena, Bump, DoubleStack, Stack};

/// A 16-byte value, the size the issue's stats are quoted for.
pub type Pair = [u64; 2];

/// `n` 16-byte allocations in a `Bump`; returns a value that depends on every one.
#[inline(never)]
pub fn bento_bump_16(bump: &Bump<'_>, n: usize) -> u64 {
    let mut acc = 0u64;
    for i in 0..n {
        let v = bump.alloc([i as u64, 1]).expect("the buffer holds the run");
        acc = acc.wrapping_add(v[0]);
    }
    acc
}

/// The same loop in `bumpalo::Bump`.
#[inline(never)]
pub fn bumpalo_16(bump: &bumpalo::Bump, n: usize) -> u64 {
    let mut acc = 0u64;
    for i in 0..n {
        let v = bump.alloc([i as u64, 1]);
        acc = acc.wrapping_add(v[0]);
    }
    acc
}

/// The same loop in `Box` (the system allocator), freeing each at once.
#[inline(never)]
pub fn system_16(n: usize) -> u64 {
    let mut acc = 0u64;
    for i in 0..n {
        let v = Box::new([i as u64, 1]);
        acc = acc.wrapping_add(std::hint::black_box(v)[0]);
    }
    acc
}

/// `n` 16-byte allocations in a `Stack`, written through the pointer, then a rollback
/// to the marker taken before them.
#[inline(never)]
pub fn bento_stack_16(stack: &mut Stack<'_>, n: usize) -> u64 {
    let layout = core::alloc::Layout::new::<Pair>();
    let start = stack.marker();
    let mut acc = 0u64;
    for i in 0..n {
        let p = stack
            .alloc_layout(layout)
            .expect("the buffer holds the run");
        // SAFETY: a fresh block for a `Pair`.
        unsafe { p.cast::<Pair>().write([i as u64, 1]) };
        acc = acc.wrapping_add(p.addr().get() as u64);
    }
    stack.rollback(start).expect("the marker is valid");
    acc
}

/// The same loop at one end of a `DoubleStack` (`upper` picks which), then a rollback
/// of that end to the marker taken before it.
#[inline(never)]
pub fn bento_double_16(stack: &mut DoubleStack<'_>, upper: bool, n: usize) -> u64 {
    let layout = core::alloc::Layout::new::<Pair>();
    let end = if upper { stack.upper() } else { stack.lower() };
    let start = end.marker();
    let mut acc = 0u64;
    for i in 0..n {
        let p = end.alloc_layout(layout).expect("the buffer holds the run");
        // SAFETY: a fresh block for a `Pair`.
        unsafe { p.cast::<Pair>().write([i as u64, 1]) };
        acc = acc.wrapping_add(p.addr().get() as u64);
    }
    stack.rollback(start).expect("the marker is valid");
    acc
}

/// The same loop in a `Bump` through `alloc_layout`, then a reset.
#[inline(never)]
pub fn bento_bump_layout_16(bump: &mut Bump<'_>, n: usize) -> u64 {
    let layout = core::alloc::Layout::new::<Pair>();
    let mut acc = 0u64;
    for i in 0..n {
        let p = bump.alloc_layout(layout).expect("the buffer holds the run");
        // SAFETY: a fresh block for a `Pair`.
        unsafe { p.cast::<Pair>().write([i as u64, 1]) };
        acc = acc.wrapping_add(p.addr().get() as u64);
    }
    bump.reset();
    acc
}

/// `n` 16-byte allocations in an `Arena` (`alloc`, like `bento_bump_16`), then a reset.
#[inline(never)]
pub fn bento_arena_16<P: PageSource>(arena: &mut Arena<P>, n: usize) -> u64 {
    let mut acc = 0u64;
    for i in 0..n {
        let v = arena
            .alloc([i as u64, 1])
            .expect("the reservation holds the run");
        acc = acc.wrapping_add(v[0]);
    }
    arena.reset();
    acc
}

/// `n` sizes from 8 to 256 bytes, a fixed pseudo-random sequence (the mixed and frame
/// workloads).
pub fn mixed_sizes(n: usize) -> Vec<usize> {
    let mut rng = Rng::new(0x2545_F491_4F6C_DD1D);
    (0..n)
        .map(|_| 8 + (rng.next_u64() % 249) as usize)
        .collect()
}

/// The workloads' random numbers: bento's one seeded generator (xorshift64) from a
/// fixed seed, so every peer runs the same operations and every run the same workload.
///
/// ```
/// let mut a = bento_benches::Rng::new(1);
/// let mut b = bento_benches::Rng::new(1);
/// assert_eq!(a.next_u64(), b.next_u64());
/// assert_ne!(a.next_u64(), 1);
/// ```
pub use bento_trace::Rng;

/// One frame in a `Bump`: an 8-aligned `alloc_layout` per size, then a reset.
#[inline(never)]
pub fn frame_bump(bump: &mut Bump<'_>, sizes: &[usize]) {
    for &s in sizes {
        let layout = core::alloc::Layout::from_size_align(s, 8).expect("a valid layout");
        std::hint::black_box(
            bump.alloc_layout(layout)
                .expect("the buffer holds the frame"),
        );
    }
    bump.reset();
}

/// The same frame in an `Arena`.
#[inline(never)]
pub fn frame_arena<P: PageSource>(arena: &mut Arena<P>, sizes: &[usize]) {
    for &s in sizes {
        let layout = core::alloc::Layout::from_size_align(s, 8).expect("a valid layout");
        std::hint::black_box(
            arena
                .alloc_layout(layout)
                .expect("the reservation holds the frame"),
        );
    }
    arena.reset();
}

/// The same frame in a `bumpalo::Bump`.
#[inline(never)]
pub fn frame_bumpalo(bump: &mut bumpalo::Bump, sizes: &[usize]) {
    for &s in sizes {
        let layout = core::alloc::Layout::from_size_align(s, 8).expect("a valid layout");
        std::hint::black_box(bump.alloc_layout(layout));
    }
    bump.reset();
}

/// A heap buffer of `bytes` bytes for a `Bump`.
pub fn buffer(bytes: usize) -> Vec<MaybeUninit<u8>> {
    vec![MaybeUninit::uninit(); bytes]
}

// ---------------------------------------------------------------------------------------
// Pools: 64-byte chunks.

/// The chunk size the pool stats are quoted for.
pub const CHUNK: usize = 64;

/// Chunks in one LIFO batch.
pub const BATCH: usize = 100;

/// Something that hands out and takes back 64-byte chunks, so that one workload drives
/// every pool and its peers.
pub trait Chunks {
    /// What identifies a chunk (a pointer, or a slab key).
    type Handle: Copy;

    /// Takes a chunk and writes `tag` into its first word.
    fn take(&mut self, tag: u64) -> Self::Handle;

    /// Gives a chunk back.
    ///
    /// # Safety
    ///
    /// The caller must ensure `h` came from `take` on `self` and is given back once.
    unsafe fn give(&mut self, h: Self::Handle);

    /// Tells the optimiser that the allocator's state may have changed, as it may in
    /// a program between a free and the next allocation: the state is stored, and
    /// loaded again by the next call. The handle itself (a reference, for the bento
    /// pools) stays where it is.
    #[inline]
    fn settle(&mut self) {
        core::hint::black_box(self);
    }
}

/// The reference: a bare intrusive free list, threaded through every chunk when it is
/// made (the seed's init loop), with no bounds, counters or checks.
#[derive(Debug)]
pub struct BareFreeList {
    head: Option<core::ptr::NonNull<u8>>,
}

impl BareFreeList {
    /// Threads every 64-byte chunk of `buf` (8-aligned) onto the list.
    pub fn new(buf: &mut [MaybeUninit<u8>]) -> Self {
        let mut head = None;
        for chunk in buf.chunks_exact_mut(CHUNK).rev() {
            let p = core::ptr::NonNull::from(chunk).cast::<u8>();
            // SAFETY: a 64-byte chunk of the buffer, 8-aligned (the buffer is).
            unsafe { p.cast::<Option<core::ptr::NonNull<u8>>>().write(head) };
            head = Some(p);
        }
        Self { head }
    }
}

impl Chunks for BareFreeList {
    type Handle = core::ptr::NonNull<u8>;

    #[inline]
    fn take(&mut self, tag: u64) -> Self::Handle {
        let p = self.head.expect("the run fits the list");
        // SAFETY: a free chunk: its first word is the link; then it is ours.
        unsafe {
            self.head = p.cast::<Option<core::ptr::NonNull<u8>>>().read();
            p.cast::<u64>().write(tag);
        }
        p
    }

    #[inline]
    unsafe fn give(&mut self, p: Self::Handle) {
        // SAFETY: the caller gives back a chunk of ours, once.
        unsafe { p.cast::<Option<core::ptr::NonNull<u8>>>().write(self.head) };
        self.head = Some(p);
    }
}

/// `Chunks` for a bento pool behind `&`, whose `alloc` and `free` have the same shape.
macro_rules! pool_chunks {
    ($pool:ty) => {
        impl Chunks for &$pool {
            type Handle = core::ptr::NonNull<u8>;

            #[inline]
            fn take(&mut self, tag: u64) -> Self::Handle {
                let p = self.alloc().expect("the run fits the pool");
                // SAFETY: a fresh 64-byte chunk.
                unsafe { p.cast::<u64>().write(tag) };
                p
            }

            #[inline]
            unsafe fn give(&mut self, p: Self::Handle) {
                // SAFETY: the caller's contract.
                unsafe { self.free(p) }
            }

            #[inline]
            fn settle(&mut self) {
                // The pool, not the reference to it.
                core::hint::black_box(*self);
            }
        }
    };
}

pool_chunks!(bento_primitives::Pool<'_>);
pool_chunks!(bento_primitives::SharedPool<'_>);
pool_chunks!(bento_primitives::SharedPoolCache<'_, '_>);

/// A slab entry of 64 bytes whose first word is written, the rest left as is.
#[derive(Clone, Copy, Debug)]
#[repr(C, align(8))]
pub struct Entry64 {
    /// The word the workloads write.
    pub first: u64,
    rest: MaybeUninit<[u8; CHUNK - 8]>,
}

impl Chunks for slab::Slab<Entry64> {
    type Handle = usize;

    #[inline]
    fn take(&mut self, tag: u64) -> usize {
        self.insert(Entry64 {
            first: tag,
            rest: MaybeUninit::uninit(),
        })
    }

    #[inline]
    unsafe fn give(&mut self, key: usize) {
        self.remove(key);
    }
}

/// A `GlobalAlloc` handing out 64-byte, 8-aligned blocks (the system allocator, as
/// `Box` uses it, or mimalloc).
#[derive(Debug)]
pub struct Global<A>(pub A);

const CHUNK_LAYOUT: core::alloc::Layout = match core::alloc::Layout::from_size_align(CHUNK, 8) {
    Ok(l) => l,
    Err(_) => unreachable!(),
};

impl<A: std::alloc::GlobalAlloc> Chunks for Global<A> {
    type Handle = core::ptr::NonNull<u8>;

    #[inline]
    fn take(&mut self, tag: u64) -> Self::Handle {
        // SAFETY: a non-zero-size layout.
        let p = core::ptr::NonNull::new(unsafe { self.0.alloc(CHUNK_LAYOUT) })
            .expect("the allocator has memory");
        // SAFETY: a fresh 64-byte block.
        unsafe { p.cast::<u64>().write(tag) };
        p
    }

    #[inline]
    unsafe fn give(&mut self, p: Self::Handle) {
        // SAFETY: the caller gives back a block of ours, with its layout.
        unsafe { self.0.dealloc(p.as_ptr(), CHUNK_LAYOUT) }
    }
}

/// `rounds` batches: take [`BATCH`] chunks, then give them back newest first.
#[inline]
pub fn lifo_batches<C: Chunks>(chunks: &mut C, rounds: usize) -> u64 {
    let mut held: [Option<C::Handle>; BATCH] = [None; BATCH];
    let mut acc = 0u64;
    for round in 0..rounds {
        for (i, slot) in held.iter_mut().enumerate() {
            *slot = Some(chunks.take((round * BATCH + i) as u64));
        }
        for slot in held.iter().rev() {
            acc = acc.wrapping_add(1);
            // SAFETY: each handle was just taken, given back once.
            unsafe { chunks.give(slot.expect("filled above")) };
        }
    }
    acc
}

/// `steps` replacements in a set of live chunks: give back `live[order[k]]` and take a
/// new chunk in its place (random order, as many live as `live` holds).
#[inline]
pub fn random_replace<C: Chunks>(chunks: &mut C, live: &mut [C::Handle], order: &[u32]) -> u64 {
    let mut acc = 0u64;
    for (k, &i) in order.iter().enumerate() {
        let slot = &mut live[i as usize];
        // SAFETY: every handle in `live` is a chunk in use, replaced as it is freed.
        unsafe { chunks.give(*slot) };
        // The free and the next allocation stay two events, as in a program with work
        // between them: without this barrier the optimiser fuses the bare list's push
        // and pop of the same chunk away, and that peer does no list work at all.
        chunks.settle();
        *slot = chunks.take(k as u64);
        acc = acc.wrapping_add(1);
    }
    acc
}

/// A fixed pseudo-random sequence of `n` indices below `live`.
pub fn random_order(n: usize, live: usize) -> Vec<u32> {
    let mut rng = Rng::new(0x9E37_79B9_7F4A_7C15);
    (0..n)
        .map(|_| (rng.next_u64() % live as u64) as u32)
        .collect()
}

/// The LIFO workload on each peer, as separate functions so that callgrind can count
/// one at a time (`--toggle-collect='*lifo_pool*'`).
#[inline(never)]
pub fn lifo_bare(list: &mut BareFreeList, rounds: usize) -> u64 {
    lifo_batches(list, rounds)
}

/// The random workload on the bare list and on `Pool`, as separate functions so that
/// callgrind can count one at a time (`--toggle-collect='*random_pool*'`).
#[inline(never)]
pub fn random_bare(
    list: &mut BareFreeList,
    live: &mut [core::ptr::NonNull<u8>],
    order: &[u32],
) -> u64 {
    random_replace(list, live, order)
}

/// See [`random_bare`].
#[inline(never)]
pub fn random_pool(
    pool: &bento_primitives::Pool<'_>,
    live: &mut [core::ptr::NonNull<u8>],
    order: &[u32],
) -> u64 {
    random_replace(&mut &*pool, live, order)
}

/// See [`lifo_bare`].
#[inline(never)]
pub fn lifo_pool(pool: &bento_primitives::Pool<'_>, rounds: usize) -> u64 {
    lifo_batches(&mut &*pool, rounds)
}

/// See [`lifo_bare`].
#[inline(never)]
pub fn lifo_shared_pool(pool: &bento_primitives::SharedPool<'_>, rounds: usize) -> u64 {
    lifo_batches(&mut &*pool, rounds)
}

/// See [`lifo_bare`]: through one thread's cache of the shared pool.
#[inline(never)]
pub fn lifo_shared_cache(cache: &bento_primitives::SharedPoolCache<'_, '_>, rounds: usize) -> u64 {
    lifo_batches(&mut &*cache, rounds)
}

/// See [`lifo_bare`].
#[inline(never)]
pub fn lifo_slab(slab: &mut slab::Slab<Entry64>, rounds: usize) -> u64 {
    lifo_batches(slab, rounds)
}

/// See [`lifo_bare`].
#[inline(never)]
pub fn lifo_system(rounds: usize) -> u64 {
    lifo_batches(&mut Global(std::alloc::System), rounds)
}

/// See [`lifo_bare`].
#[inline(never)]
pub fn lifo_mimalloc(rounds: usize) -> u64 {
    lifo_batches(&mut Global(mimalloc::MiMalloc), rounds)
}
