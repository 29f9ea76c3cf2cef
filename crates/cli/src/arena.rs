//! The single-heap allocators that can be bounded — talc, rlsf and dlmalloc-rs — each
//! over one fixed arena, as [`ReplayTarget`]s for `bento soak`: the peers of bento's
//! allocators over fixed memory. Their footprint is the extent of the arena they
//! have handed out (the highest byte of a block they gave, from the arena's start).

use std::alloc::Layout;
use std::cell::Cell;
use std::ptr::NonNull;

use bento_trace::{Footprint, ReplayTarget};

/// The arena peers, in the order the soak's table lists them.
pub(crate) const PEERS: &[&str] = &["talc", "rlsf", "dlmalloc"];

/// A fixed arena of memory from the system allocator, which a peer owns for its life.
struct Arena {
    // Invariant: `len` bytes from the global allocator with `ARENA_ALIGN`, freed on
    // drop; the peer's blocks live in it and die with it.
    base: NonNull<u8>,
    len: usize,
    /// The highest address handed out, past the end of its block.
    extent: Cell<usize>,
}

/// The arena's alignment: a page.
const ARENA_ALIGN: usize = 4096;

impl Arena {
    fn new(len: usize) -> Result<Self, String> {
        let layout = Layout::from_size_align(len.max(ARENA_ALIGN), ARENA_ALIGN)
            .map_err(|_| format!("an arena of {len} bytes is too large"))?;
        // SAFETY: a non-zero size. The memory is left uninitialised (and untouched, so
        // the OS commits only what the peer writes).
        let base = NonNull::new(unsafe { std::alloc::alloc(layout) })
            .ok_or_else(|| format!("cannot take an arena of {len} bytes"))?;
        Ok(Self {
            base,
            len: layout.size(),
            extent: Cell::new(base.addr().get()),
        })
    }

    /// Notes a block handed out.
    fn saw(&self, block: NonNull<u8>, size: usize) {
        let end = block.addr().get() + size;
        if end > self.extent.get() {
            self.extent.set(end);
        }
    }

    fn footprint(&self) -> Footprint {
        let used = self.extent.get() - self.base.addr().get();
        Footprint {
            committed: used,
            peak_committed: used,
            reserved: self.len,
            os_calls: 0,
        }
    }
}

impl Drop for Arena {
    fn drop(&mut self) {
        let layout = Layout::from_size_align(self.len, ARENA_ALIGN).expect("made in `new`");
        // SAFETY: the arena's own block, allocated in `new` with this layout; the peer
        // that used it is dropped first (it is declared before the arena).
        unsafe { std::alloc::dealloc(self.base.as_ptr(), layout) };
    }
}

/// talc over a fixed arena.
pub(crate) struct Talc {
    talc: talc::Talc<talc::ErrOnOom>,
    arena: Arena,
}

impl Talc {
    pub(crate) fn new(bytes: usize) -> Result<Self, String> {
        let arena = Arena::new(bytes)?;
        let mut talc = talc::Talc::new(talc::ErrOnOom);
        // SAFETY: the arena is the peer's alone and outlives every block of it (it
        // drops after `talc`, with the target).
        unsafe { talc.claim(talc::Span::from_base_size(arena.base.as_ptr(), arena.len)) }
            .map_err(|()| format!("talc cannot claim an arena of {bytes} bytes"))?;
        Ok(Self { talc, arena })
    }
}

impl ReplayTarget for Talc {
    fn alloc(&mut self, layout: Layout, _tag: u32) -> Option<NonNull<u8>> {
        // SAFETY: a non-zero size (the trait's promise).
        let p = unsafe { self.talc.malloc(layout) }.ok()?;
        self.arena.saw(p, layout.size());
        Some(p)
    }

    unsafe fn realloc(
        &mut self,
        ptr: NonNull<u8>,
        old: Layout,
        new: usize,
        _tag: u32,
    ) -> Option<NonNull<u8>> {
        let p = if new >= old.size() {
            // SAFETY: the caller's contract: live with `old`; `new` not smaller.
            unsafe { self.talc.grow(ptr, old, new) }.ok()?
        } else {
            // SAFETY: as above; `new` smaller and not zero.
            unsafe { self.talc.shrink(ptr, old, new) };
            ptr
        };
        self.arena.saw(p, new);
        Some(p)
    }

    unsafe fn free(&mut self, ptr: NonNull<u8>, layout: Layout, _tag: u32) {
        // SAFETY: the caller's contract.
        unsafe { self.talc.free(ptr, layout) }
    }

    fn footprint(&self) -> Option<Footprint> {
        Some(self.arena.footprint())
    }
}

/// rlsf's TLSF over a fixed arena.
pub(crate) struct Rlsf {
    tlsf: rlsf::Tlsf<'static, u32, u32, 28, 16>,
    arena: Arena,
}

impl Rlsf {
    pub(crate) fn new(bytes: usize) -> Result<Self, String> {
        let arena = Arena::new(bytes)?;
        let mut tlsf = rlsf::Tlsf::new();
        let block = NonNull::slice_from_raw_parts(arena.base.cast::<u8>(), arena.len);
        // SAFETY: the arena is the pool's alone and outlives it (it drops after
        // `tlsf`, with the target); its blocks are never used after the drop.
        unsafe { tlsf.insert_free_block_ptr(block) }
            .ok_or_else(|| format!("rlsf cannot take an arena of {bytes} bytes"))?;
        Ok(Self { tlsf, arena })
    }
}

impl ReplayTarget for Rlsf {
    fn alloc(&mut self, layout: Layout, _tag: u32) -> Option<NonNull<u8>> {
        let p = self.tlsf.allocate(layout)?;
        self.arena.saw(p, layout.size());
        Some(p)
    }

    unsafe fn realloc(
        &mut self,
        ptr: NonNull<u8>,
        old: Layout,
        new: usize,
        _tag: u32,
    ) -> Option<NonNull<u8>> {
        let layout = Layout::from_size_align(new, old.align()).ok()?;
        // SAFETY: the caller's contract: live, made with `old.align()`.
        let p = unsafe { self.tlsf.reallocate(ptr, layout) }?;
        self.arena.saw(p, new);
        Some(p)
    }

    unsafe fn free(&mut self, ptr: NonNull<u8>, layout: Layout, _tag: u32) {
        // SAFETY: the caller's contract.
        unsafe { self.tlsf.deallocate(ptr, layout.align()) }
    }

    fn footprint(&self) -> Option<Footprint> {
        Some(self.arena.footprint())
    }
}

/// dlmalloc's system memory: the arena, handed out from its start as `sbrk` would,
/// never given back.
struct ArenaSystem {
    // Invariant: the arena's bounds; `next` in `start..=end`.
    next: Cell<usize>,
    end: usize,
    base: NonNull<u8>,
}

// SAFETY: dlmalloc's `Allocator` asks for `Send`; the target that owns it is used on
// one thread at a time, and the arena moves with it.
unsafe impl Send for ArenaSystem {}

// SAFETY: `alloc` hands out disjoint pieces of the arena (a bump pointer within its
// bounds) that stay valid for the arena's life; nothing is ever freed or remapped.
unsafe impl dlmalloc::Allocator for ArenaSystem {
    fn alloc(&self, size: usize) -> (*mut u8, usize, u32) {
        let start = self.next.get();
        match start.checked_add(size) {
            Some(end) if end <= self.end => {
                self.next.set(end);
                let p = self.base.as_ptr().with_addr(start);
                (p, size, 0)
            }
            _ => (core::ptr::null_mut(), 0, 0),
        }
    }

    fn remap(&self, _: *mut u8, _: usize, _: usize, _: bool) -> *mut u8 {
        core::ptr::null_mut()
    }

    fn free_part(&self, _: *mut u8, _: usize, _: usize) -> bool {
        false
    }

    fn free(&self, _: *mut u8, _: usize) -> bool {
        false
    }

    fn can_release_part(&self, _: u32) -> bool {
        false
    }

    fn allocates_zeros(&self) -> bool {
        false
    }

    fn page_size(&self) -> usize {
        ARENA_ALIGN
    }
}

/// dlmalloc-rs over a fixed arena.
pub(crate) struct Dlmalloc {
    dl: dlmalloc::Dlmalloc<ArenaSystem>,
    arena: Arena,
}

impl Dlmalloc {
    pub(crate) fn new(bytes: usize) -> Result<Self, String> {
        let arena = Arena::new(bytes)?;
        let system = ArenaSystem {
            next: Cell::new(arena.base.addr().get()),
            end: arena.base.addr().get() + arena.len,
            base: arena.base,
        };
        Ok(Self {
            dl: dlmalloc::Dlmalloc::new_with_allocator(system),
            arena,
        })
    }
}

impl ReplayTarget for Dlmalloc {
    fn alloc(&mut self, layout: Layout, _tag: u32) -> Option<NonNull<u8>> {
        // SAFETY: a non-zero size and a power-of-two alignment.
        let p = NonNull::new(unsafe { self.dl.malloc(layout.size(), layout.align()) })?;
        self.arena.saw(p, layout.size());
        Some(p)
    }

    unsafe fn realloc(
        &mut self,
        ptr: NonNull<u8>,
        old: Layout,
        new: usize,
        _tag: u32,
    ) -> Option<NonNull<u8>> {
        // SAFETY: the caller's contract: live with `old`; `new` not zero.
        let p =
            NonNull::new(unsafe { self.dl.realloc(ptr.as_ptr(), old.size(), old.align(), new) })?;
        self.arena.saw(p, new);
        Some(p)
    }

    unsafe fn free(&mut self, ptr: NonNull<u8>, layout: Layout, _tag: u32) {
        // SAFETY: the caller's contract.
        unsafe { self.dl.free(ptr.as_ptr(), layout.size(), layout.align()) }
    }

    fn footprint(&self) -> Option<Footprint> {
        Some(self.arena.footprint())
    }
}

/// The peer `name` over an arena of `bytes`.
pub(crate) fn peer(name: &str, bytes: usize) -> Result<Box<dyn ReplayTarget>, String> {
    Ok(match name {
        "talc" => Box::new(Talc::new(bytes)?),
        "rlsf" => Box::new(Rlsf::new(bytes)?),
        "dlmalloc" => Box::new(Dlmalloc::new(bytes)?),
        other => return Err(format!("`{other}` is not an arena peer")),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each peer hands out disjoint, writable blocks within its arena, refuses past
    /// it, and takes its blocks back.
    #[test]
    fn peers_serve_within_their_arena_and_refuse_past_it() {
        for name in PEERS {
            let mut p = peer(name, 1 << 20).unwrap();
            let layout = Layout::from_size_align(1000, 16).unwrap();
            let mut blocks = Vec::new();
            while let Some(b) = p.alloc(layout, 0) {
                // SAFETY: a fresh block of 1000 bytes.
                unsafe { b.write_bytes(blocks.len() as u8, 1000) };
                blocks.push(b);
                assert!(blocks.len() < 2000, "{name}: more than the arena holds");
            }
            assert!(
                blocks.len() > 500,
                "{name}: {} blocks in 1 MiB",
                blocks.len()
            );
            let mut starts: Vec<usize> = blocks.iter().map(|b| b.addr().get()).collect();
            starts.sort_unstable();
            assert!(
                starts.windows(2).all(|w| w[0] + 1000 <= w[1]),
                "{name}: blocks overlap"
            );
            let f = p.footprint().unwrap();
            assert!(f.committed <= 1 << 20, "{name}: {f:?}");
            for (i, b) in blocks.into_iter().enumerate() {
                // SAFETY: live with `layout`, written above.
                unsafe {
                    assert_eq!(b.add(999).read(), i as u8, "{name}");
                    p.free(b, layout, 0);
                }
            }
            // Room again after the frees, and a resize keeps the contents.
            let b = p.alloc(layout, 0).expect("room after the frees");
            // SAFETY: live with `layout`; grown, then freed with its new size.
            unsafe {
                b.write(7);
                let c = p.realloc(b, layout, 5000, 0).expect("room to grow");
                assert_eq!(c.read(), 7, "{name}");
                p.free(c, Layout::from_size_align(5000, 16).unwrap(), 0);
            }
        }
        assert!(peer("tcmalloc", 4096).is_err());
    }
}
