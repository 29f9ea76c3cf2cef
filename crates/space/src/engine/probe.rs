//! Checking a pointer a caller frees: a block in use starting there, or the misuse
//! it is (a second free, an interior pointer).

use core::ptr::NonNull;

use crate::Misuse;
use crate::chunk::flags::{BASE, CACHED, DEDICATED, IN_USE, PREV_IN_USE};
use crate::chunk::{
    CHUNK_ALIGN, FENCE, HEADER, IN_USE_OVERHEAD, Kind, MIN_CHUNK, PAYLOAD, Segment, raw,
};
use crate::engine::{Core, Fault, KIND_MASK, at};

impl Core {
    /// The debug checks of a pointer given to `free`, `realloc` or `usable_size`:
    /// `Ok` when `payload` is an in-use block of this space, else what is wrong. Walks
    /// the segment list to the segment holding the pointer, then that segment's chunks
    /// up to it (debug builds only: O(segments + chunks before it)). It reads only
    /// chunk heads reached by the walk, which lie outside every free chunk's interior,
    /// so it never touches a decommitted page, whatever the pointer.
    pub(crate) fn check_block(&self, payload: NonNull<u8>) -> Result<(), Misuse<'static>> {
        let c = raw::chunk_of(payload);
        let addr = c.addr().get();
        let mut seg = self.segments;
        while let Some(sp) = NonNull::new(seg) {
            // SAFETY: every header on the list is a live segment's (the list invariant).
            let s = unsafe { sp.as_ref() };
            let base = sp.addr().get();
            if addr >= base + s.first && addr < base + s.size - FENCE {
                // SAFETY: a live segment of this space, its tags intact (the space's
                // invariants between calls).
                return unsafe { Self::check_chunk(sp, addr, payload) };
            }
            seg = s.next;
        }
        Err(Misuse::Foreign { ptr: payload })
    }

    /// Walks segment `seg`'s chunks to the chunk address `addr`: in use there is `Ok`,
    /// free or cached there a double free, and no chunk starting there an interior
    /// pointer.
    ///
    /// # Safety
    ///
    /// `seg` is a live segment of this space with intact tags.
    pub(super) unsafe fn check_chunk(
        seg: NonNull<Segment>,
        addr: usize,
        payload: NonNull<u8>,
    ) -> Result<(), Misuse<'static>> {
        let ptr = payload;
        // SAFETY: the caller's contract: the header, and each chunk head the walk
        // reaches (committed: heads lie outside free interiors), are readable; the walk
        // stops at the end fence.
        unsafe {
            let (first, size) = ((*seg.as_ptr()).first, (*seg.as_ptr()).size);
            let dedicated = (*seg.as_ptr()).kind == Kind::Dedicated as usize;
            let fence = seg.addr().get() + size - FENCE;
            let mut c = seg.cast::<u8>().add(first);
            let mut passed_free = false;
            while c.addr().get() < addr {
                let head = raw::head(c);
                let step = raw::size(head);
                if step < MIN_CHUNK || c.addr().get() + step > fence {
                    // A broken tag: not this pointer's fault, but not a block either.
                    return Err(Misuse::Interior { ptr, block: None });
                }
                passed_free = head & IN_USE == 0;
                c = c.add(step);
            }
            if c.addr().get() != addr {
                // Inside a free chunk: a block freed before and merged with its
                // neighbour (a double free); inside a block in use: an interior pointer.
                return Err(if passed_free {
                    Misuse::DoubleFree { ptr }
                } else {
                    Misuse::Interior { ptr, block: None }
                });
            }
            let head = raw::head(c);
            if head & IN_USE == 0 || (head & CACHED != 0 && !dedicated) {
                return Err(Misuse::DoubleFree { ptr });
            }
            Ok(())
        }
    }

    /// The O(1) checks of a pointer given to a free without its layout; see
    /// [`MemorySpace::probe`](crate::MemorySpace::probe). Returns the block's usable
    /// size, or what is wrong (a small value, so that the caller's fast path keeps
    /// it in registers and builds the report only on the cold path).
    ///
    /// # Safety
    ///
    /// Every address `a` for which `readable(a)` holds lies in memory reserved by this
    /// space's source that may be read (decommitted pages reading as anything).
    #[inline(always)]
    pub(crate) unsafe fn probe(
        &self,
        payload: NonNull<u8>,
        readable: impl Fn(usize) -> bool,
    ) -> Result<usize, Fault> {
        let c_addr = payload.addr().get().wrapping_sub(PAYLOAD);
        // A chunk's first 16 bytes lie in one page: one test covers `prev_foot` and
        // the head.
        if !c_addr.is_multiple_of(CHUNK_ALIGN) || c_addr == 0 || !readable(c_addr) {
            return Err(Fault::Interior);
        }
        let c = self.adopt(payload);
        // SAFETY: `readable(c)`: the caller's contract.
        let head = unsafe { raw::head(c) };
        let size = raw::size(head);
        let next = c_addr.wrapping_add(size);
        // The usual block: in use, of an ordinary segment, followed by a readable tag.
        if head & (IN_USE | KIND_MASK) != IN_USE
            || size < MIN_CHUNK
            || next < c_addr
            || !readable(next)
        {
            // SAFETY: as above.
            return unsafe { self.probe_unusual(c, head, &readable) };
        }
        // SAFETY: `readable(next)`.
        unsafe { Self::probe_neighbours(c, head, &readable) }?;
        Ok(size - IN_USE_OVERHEAD)
    }

    /// The rest of [`probe`](Self::probe) for a tag of in-use chunk `c` whose next
    /// chunk's tag is readable: that tag says its predecessor is in use, and a free
    /// chunk before `c` has the size `c`'s footer says.
    ///
    /// # Safety
    ///
    /// As for `probe`; `readable(c)` and `readable(c + size)` hold.
    #[inline(always)]
    pub(super) unsafe fn probe_neighbours(
        c: NonNull<u8>,
        head: usize,
        readable: &impl Fn(usize) -> bool,
    ) -> Result<(), Fault> {
        let interior = Fault::Interior;
        let c_addr = c.addr().get();
        // SAFETY: `readable(c + size)`: the caller's contract.
        let next_head = unsafe { raw::head(at(c, c_addr + raw::size(head))) };
        if next_head & PREV_IN_USE == 0 {
            return Err(interior);
        }
        if head & PREV_IN_USE == 0 {
            // SAFETY: `readable(c)`.
            let prev_size = unsafe { raw::prev_foot(c) };
            let prev = c_addr.wrapping_sub(prev_size);
            if prev_size < MIN_CHUNK
                || !prev_size.is_multiple_of(CHUNK_ALIGN)
                || prev > c_addr
                || !readable(prev)
            {
                return Err(interior);
            }
            // SAFETY: `readable(prev)`.
            let prev_head = unsafe { raw::head(at(c, prev)) };
            if prev_head & IN_USE != 0 || raw::size(prev_head) != prev_size {
                return Err(interior);
            }
        }
        Ok(())
    }

    /// [`probe`](Self::probe) for a tag that is not an ordinary block's in use: a free
    /// chunk's (a second free), a cached chunk's (a second free), a dedicated
    /// segment's chunk (checked against its segment's header), a base segment's, or
    /// no tag at all (a pointer inside a block).
    ///
    /// # Safety
    ///
    /// As for `probe`; `readable(c)` holds.
    #[cold]
    #[inline(never)]
    pub(super) unsafe fn probe_unusual(
        &self,
        c: NonNull<u8>,
        head: usize,
        readable: &impl Fn(usize) -> bool,
    ) -> Result<usize, Fault> {
        let interior = Fault::Interior;
        let c_addr = c.addr().get();
        let size = raw::size(head);
        if size < MIN_CHUNK {
            return Err(interior);
        }
        if head & IN_USE == 0 {
            // A chunk's tag, but a free one's (or the stale tag of a chunk merged
            // into the one before it, which free clears the same way).
            return Err(Fault::DoubleFree);
        }
        let end = c_addr.checked_add(size).ok_or(interior)?;
        if head & DEDICATED != 0 {
            // The only chunk of a dedicated segment, whose `prev_foot` is its offset
            // from the segment's base; or a chunk of the block cache, whose
            // `prev_foot` is anything (a second free).
            // SAFETY: `readable(c)`.
            let offset = unsafe { raw::prev_foot(c) };
            let base = c_addr.wrapping_sub(offset);
            // A dedicated segment's base is aligned to the source's page at least.
            let dedicated = base < c_addr
                && base & (self.source_page - 1) == 0
                && readable(base)
                // SAFETY: `readable(base)`: the header is read as plain words.
                && unsafe {
                    let seg = at(c, base).cast::<Segment>().as_ptr();
                    (*seg).kind == Kind::Dedicated as usize
                        && (*seg).first == offset
                        && (*seg)
                            .size
                            .checked_sub(FENCE)
                            .and_then(|len| base.checked_add(len))
                            .is_some_and(|fence| end <= fence)
                };
            return if dedicated {
                Ok(size - IN_USE_OVERHEAD)
            } else {
                Err(Fault::DoubleFree)
            };
        }
        let (base, len) = self.base_range;
        if head & BASE != 0 && (c_addr < base + HEADER || end > base + len - FENCE) {
            return Err(interior);
        }
        if !readable(end) {
            return Err(interior);
        }
        // SAFETY: `readable(c)` and `readable(end)`.
        unsafe { Self::probe_neighbours(c, head, readable) }?;
        Ok(size - IN_USE_OVERHEAD)
    }
}
