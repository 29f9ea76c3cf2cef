//! General allocators side by side: one adaptor trait ([`Heap`], the shape of
//! allocator-api2's `Allocator`), implemented for bento's memory space (through its
//! `Allocator` impl), any `GlobalAlloc` (the system allocator, mimalloc, jemalloc,
//! dlmalloc) and the arena allocators rlsf and talc; and the workloads of the issue.

use core::alloc::{GlobalAlloc, Layout};
use core::cell::RefCell;
use core::ptr::NonNull;

/// Allocate and free, as every peer is driven.
pub trait Heap {
    /// A block for `layout` (non-zero size); panics when the heap is out of memory.
    fn allocate(&mut self, layout: Layout) -> NonNull<u8>;

    /// Frees a block.
    ///
    /// # Safety
    ///
    /// `ptr` is a live block of this heap allocated with `layout`.
    unsafe fn deallocate(&mut self, ptr: NonNull<u8>, layout: Layout);
}

/// Any allocator-api2 0.2 `Allocator` (here `&MemorySpace` and `&LockedSpace`).
#[derive(Debug)]
pub struct Api<A>(pub A);

impl<A: allocator_api2::alloc::Allocator> Heap for Api<A> {
    #[inline(always)]
    fn allocate(&mut self, layout: Layout) -> NonNull<u8> {
        self.0.allocate(layout).expect("the heap has room").cast()
    }

    #[inline(always)]
    unsafe fn deallocate(&mut self, ptr: NonNull<u8>, layout: Layout) {
        // SAFETY: the caller's contract.
        unsafe { self.0.deallocate(ptr, layout) }
    }
}

/// Any `GlobalAlloc`, used directly (not installed as the global allocator).
#[derive(Debug)]
pub struct GlobalHeap<A>(pub A);

impl<A: GlobalAlloc> Heap for GlobalHeap<A> {
    #[inline]
    fn allocate(&mut self, layout: Layout) -> NonNull<u8> {
        // SAFETY: callers never ask for zero bytes.
        NonNull::new(unsafe { self.0.alloc(layout) }).expect("the heap has room")
    }

    #[inline]
    unsafe fn deallocate(&mut self, ptr: NonNull<u8>, layout: Layout) {
        // SAFETY: the caller's contract.
        unsafe { self.0.dealloc(ptr.as_ptr(), layout) }
    }
}

/// rlsf's TLSF over one pool taken from the system allocator.
pub struct Rlsf {
    tlsf: rlsf::Tlsf<'static, u32, u32, 28, 16>,
}

impl Rlsf {
    /// A TLSF heap over a leaked pool of `bytes`.
    pub fn new(bytes: usize) -> Self {
        let pool: &'static mut [core::mem::MaybeUninit<u8>] =
            Box::leak(vec![core::mem::MaybeUninit::uninit(); bytes].into_boxed_slice());
        let mut tlsf = rlsf::Tlsf::new();
        tlsf.insert_free_block(pool);
        Self { tlsf }
    }
}

impl core::fmt::Debug for Rlsf {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("Rlsf")
    }
}

impl Heap for Rlsf {
    #[inline]
    fn allocate(&mut self, layout: Layout) -> NonNull<u8> {
        self.tlsf.allocate(layout).expect("the pool has room")
    }

    #[inline]
    unsafe fn deallocate(&mut self, ptr: NonNull<u8>, layout: Layout) {
        // SAFETY: the caller's contract.
        unsafe { self.tlsf.deallocate(ptr, layout.align()) }
    }
}

/// talc over one arena taken from the system allocator.
pub struct Talc {
    talc: RefCell<talc::Talc<talc::ErrOnOom>>,
}

impl Talc {
    /// A talc heap over a leaked arena of `bytes`.
    pub fn new(bytes: usize) -> Self {
        let arena: &'static mut [u8] = Box::leak(vec![0u8; bytes].into_boxed_slice());
        let mut talc = talc::Talc::new(talc::ErrOnOom);
        // SAFETY: the arena is leaked, so it lives as long as the heap, and only talc
        // uses it.
        unsafe {
            talc.claim(talc::Span::from(arena))
                .expect("talc claims the arena")
        };
        Self {
            talc: RefCell::new(talc),
        }
    }
}

impl core::fmt::Debug for Talc {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("Talc")
    }
}

impl Heap for Talc {
    #[inline]
    fn allocate(&mut self, layout: Layout) -> NonNull<u8> {
        // SAFETY: a non-zero size.
        unsafe { self.talc.get_mut().malloc(layout) }.expect("the arena has room")
    }

    #[inline]
    unsafe fn deallocate(&mut self, ptr: NonNull<u8>, layout: Layout) {
        // SAFETY: the caller's contract.
        unsafe { self.talc.get_mut().free(ptr, layout) }
    }
}

/// A log-uniform size from 16 to 4095 bytes: an octave `16 << e` (`e` in 0..8, each
/// equally likely) and a uniform offset inside it. Integer-only, so the harness costs
/// the same few instructions for every peer.
#[inline]
pub fn mixed_size(r: u64) -> usize {
    let e = (r & 7) as u32;
    let base = 16usize << e;
    base + ((r >> 8) as usize & (base - 1))
}

/// A number in `0..n` from `r` (multiply-shift: no division in the loop).
#[inline]
pub fn below(r: u64, n: usize) -> usize {
    ((u128::from(r) * n as u128) >> 64) as usize
}

fn mixed_layout(size: usize) -> Layout {
    Layout::from_size_align(size, 8).expect("small sizes")
}

/// The live set of the mixed workload: `live` blocks of [`mixed_size`] sizes, drawn
/// from `rng`.
pub fn mixed_fill<H: Heap>(
    heap: &mut H,
    rng: &mut crate::Rng,
    live: usize,
) -> Vec<(NonNull<u8>, usize)> {
    (0..live)
        .map(|_| {
            let s = mixed_size(rng.next_u64());
            (heap.allocate(mixed_layout(s)), s)
        })
        .collect()
}

/// `steps` replacements of a random live block by a block of a new random size (a
/// free and an allocation each), touching each new block's first byte. The numbers
/// come from `rng`, whose state goes on from call to call: every iteration of a
/// benchmark sees a fresh stream, never a replayed plan that caches and branch
/// predictors could learn. Returns a value that depends on every block.
#[inline(never)]
pub fn mixed_replace<H: Heap>(
    heap: &mut H,
    live: &mut [(NonNull<u8>, usize)],
    rng: &mut crate::Rng,
    steps: usize,
) -> u64 {
    let mut acc = 0u64;
    let n = live.len();
    for _ in 0..steps {
        let r = rng.next_u64();
        let slot = &mut live[below(r, n)];
        let size = mixed_size(r.rotate_left(32));
        // SAFETY: every slot holds a live block of its recorded size.
        unsafe { heap.deallocate(slot.0, mixed_layout(slot.1)) };
        let p = heap.allocate(mixed_layout(size));
        // SAFETY: a fresh block of at least 16 bytes.
        unsafe { p.as_ptr().write(size as u8) };
        acc = acc.wrapping_add(p.addr().get() as u64);
        *slot = (p, size);
    }
    acc
}

/// Frees every block of the live set.
pub fn mixed_drain<H: Heap>(heap: &mut H, live: Vec<(NonNull<u8>, usize)>) {
    for (p, s) in live {
        // SAFETY: live blocks of their recorded sizes, each freed once.
        unsafe { heap.deallocate(p, mixed_layout(s)) };
    }
}

/// Blocks in one LIFO batch.
pub const LIFO_BATCH: usize = 100;

/// `rounds` LIFO batches: [`LIFO_BATCH`] 64-byte allocations, each written, then their
/// frees newest first. On an otherwise empty memory space every batch empties it, so
/// its last free gives the segment back (the pattern of a subsystem that fills and
/// empties a heap each frame); with another block live it never empties. Returns a
/// value that depends on every block.
#[inline(never)]
pub fn lifo_batches<H: Heap>(heap: &mut H, rounds: usize) -> u64 {
    let layout = Layout::new::<[u8; 64]>();
    let mut held = [NonNull::<u8>::dangling(); LIFO_BATCH];
    let mut acc = 0u64;
    for round in 0..rounds {
        for (i, slot) in held.iter_mut().enumerate() {
            let p = heap.allocate(layout);
            // SAFETY: a fresh 64-byte block.
            unsafe { p.as_ptr().write((round + i) as u8) };
            acc = acc.wrapping_add(p.addr().get() as u64);
            *slot = p;
        }
        for &p in held.iter().rev() {
            // SAFETY: live blocks of this batch, each freed once.
            unsafe { heap.deallocate(p, layout) };
        }
    }
    acc
}

/// One frame: `n` allocations of `size` bytes, each written, then every one freed in
/// the order it was made (a frame's temporaries, or a level's data at unload).
/// `held` is the caller's array of at least `n` slots, so the harness allocates
/// nothing itself. Returns a value that depends on every block.
#[inline(never)]
pub fn frame_free_all<H: Heap>(heap: &mut H, held: &mut [NonNull<u8>], size: usize) -> u64 {
    let layout = Layout::from_size_align(size, 8).expect("a small size");
    let mut acc = 0u64;
    for (i, slot) in held.iter_mut().enumerate() {
        let p = heap.allocate(layout);
        // SAFETY: a fresh block of `size >= 1` bytes.
        unsafe { p.as_ptr().write(i as u8) };
        acc = acc.wrapping_add(p.addr().get() as u64);
        *slot = p;
    }
    for &p in held.iter() {
        // SAFETY: live blocks of this frame, each freed once.
        unsafe { heap.deallocate(p, layout) };
    }
    acc
}

/// A size from 1 to 256 bytes, uniform: the small objects every class of the common
/// allocator serves.
#[inline]
pub fn small_size(r: u64) -> usize {
    1 + (r as usize & 255)
}

/// A live set of `live` blocks of `size(r)` bytes, drawn from `rng`.
pub fn fill_with<H: Heap>(
    heap: &mut H,
    rng: &mut crate::Rng,
    live: usize,
    size: impl Fn(u64) -> usize,
) -> Vec<(NonNull<u8>, usize)> {
    (0..live)
        .map(|_| {
            let s = size(rng.next_u64());
            (heap.allocate(mixed_layout(s)), s)
        })
        .collect()
}

/// [`mixed_replace`] with sizes from `size`.
#[inline(never)]
pub fn replace_with<H: Heap, S: Fn(u64) -> usize>(
    heap: &mut H,
    live: &mut [(NonNull<u8>, usize)],
    rng: &mut crate::Rng,
    steps: usize,
    size: S,
) -> u64 {
    let mut acc = 0u64;
    let n = live.len();
    for _ in 0..steps {
        let r = rng.next_u64();
        let slot = &mut live[below(r, n)];
        let new = size(r.rotate_left(32));
        // SAFETY: every slot holds a live block of its recorded size.
        unsafe { heap.deallocate(slot.0, mixed_layout(slot.1)) };
        let p = heap.allocate(mixed_layout(new));
        // SAFETY: a fresh block of at least 1 byte.
        unsafe { p.as_ptr().write(new as u8) };
        acc = acc.wrapping_add(p.addr().get() as u64);
        *slot = (p, new);
    }
    acc
}
