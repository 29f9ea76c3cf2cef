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
    #[inline]
    fn allocate(&mut self, layout: Layout) -> NonNull<u8> {
        self.0.allocate(layout).expect("the heap has room").cast()
    }

    #[inline]
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

/// The mixed workload: `live` blocks of sizes log-uniform in 16..=4096 bytes, then
/// `steps` replacements of a random live block by a block of a new random size.
#[derive(Clone, Debug)]
pub struct Mixed {
    /// The sizes of the blocks made first.
    pub initial: Vec<u32>,
    /// Each step: which live block to free, and the size of its replacement.
    pub steps: Vec<(u32, u32)>,
}

impl Mixed {
    /// A plan from a fixed seed, so that every peer runs the same operations.
    pub fn new(live: usize, steps: usize) -> Self {
        let mut rng = crate::XorShift(0x9E37_79B9_7F4A_7C15);
        let mut next = move || rng.next();
        let size = |r: u64| {
            // 16 * 2^(8u) for u uniform in [0, 1): log-uniform from 16 to 4096.
            let u = (r >> 11) as f64 / (1u64 << 53) as f64;
            (16.0 * (8.0 * u).exp2()) as u32
        };
        let initial = (0..live).map(|_| size(next())).collect();
        let steps = (0..steps)
            .map(|_| ((next() % live as u64) as u32, size(next())))
            .collect();
        Self { initial, steps }
    }
}

fn mixed_layout(size: u32) -> Layout {
    Layout::from_size_align(size as usize, 8).expect("small sizes")
}

/// Makes the plan's initial blocks.
pub fn mixed_fill<H: Heap>(heap: &mut H, plan: &Mixed) -> Vec<(NonNull<u8>, u32)> {
    plan.initial
        .iter()
        .map(|&s| (heap.allocate(mixed_layout(s)), s))
        .collect()
}

/// Runs the plan's replacements (one free and one allocation each), touching each new
/// block's first byte. Returns a value that depends on every block.
#[inline(never)]
pub fn mixed_replace<H: Heap>(heap: &mut H, live: &mut [(NonNull<u8>, u32)], plan: &Mixed) -> u64 {
    let mut acc = 0u64;
    for &(i, size) in &plan.steps {
        let slot = &mut live[i as usize];
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

/// Frees every block `mixed_fill` made (and the replacements that took their places).
pub fn mixed_drain<H: Heap>(heap: &mut H, live: Vec<(NonNull<u8>, u32)>) {
    for (p, s) in live {
        // SAFETY: live blocks of their recorded sizes, each freed once.
        unsafe { heap.deallocate(p, mixed_layout(s)) };
    }
}

/// `n` pairs of a 64-byte allocation and its free, the block written in between.
/// Run it with another block live (see [`pairs_with_anchor`]) unless the point is an
/// empty heap: a memory space gives an emptied segment back at once.
#[inline(never)]
pub fn pairs_64<H: Heap>(heap: &mut H, n: usize) -> u64 {
    let layout = Layout::new::<[u8; 64]>();
    let mut acc = 0u64;
    for i in 0..n {
        let p = heap.allocate(layout);
        // SAFETY: a fresh 64-byte block, freed once.
        unsafe {
            p.as_ptr().write(i as u8);
            acc = acc.wrapping_add(p.addr().get() as u64);
            heap.deallocate(p, layout);
        }
    }
    acc
}

/// [`pairs_64`] with one 64-byte block kept live around the loop, as in any heap that
/// is in use: the first allocation of an empty heap (and, for a memory space, the free
/// that empties it) is not what the loop measures.
pub fn pairs_with_anchor<H: Heap>(heap: &mut H, n: usize) -> u64 {
    let layout = Layout::new::<[u8; 64]>();
    let anchor = heap.allocate(layout);
    let sum = pairs_64(heap, n);
    // SAFETY: the anchor is live and freed once.
    unsafe { heap.deallocate(anchor, layout) };
    sum
}
