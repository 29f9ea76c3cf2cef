//! Shared workloads for bento's benchmarks, so that the criterion benches and the
//! callgrind driver (`src/bin/insns.rs`) measure the same loops.

use core::mem::MaybeUninit;

use bento_pages::PageSource;
use bento_primitives::{Arena, Bump, Stack};

/// A 16-byte value, the size the figures are quoted for.
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

/// A heap buffer of `bytes` bytes for a `Bump`.
pub fn buffer(bytes: usize) -> Vec<MaybeUninit<u8>> {
    vec![MaybeUninit::uninit(); bytes]
}
