//! The allocator logic that does not depend on the page source: carving chunks out of
//! the index, freeing and merging them, resizing in place, and the figures.

use core::ptr::{self, NonNull};

use crate::cache::{self, Cache};
use crate::chunk::{
    CHUNK_ALIGN, FENCE, FLAG_MASK, HEADER, IN_USE_OVERHEAD, Kind, MIN_CHUNK, PAYLOAD, Segment,
    chunk_size_for, kind_flag, raw,
};
use crate::index::Index;
use crate::{Misuse, MisuseHook, SpaceStats};

use crate::chunk::flags::{BASE, CACHED, DEDICATED, IN_USE, PREV_IN_USE};
/// The flags that name a chunk's segment kind.
const KIND_MASK: usize = DEDICATED | BASE;

/// The space's figures, kept on the hot path.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Counters {
    pub(crate) reserved: usize,
    pub(crate) max_reserved: usize,
    pub(crate) committed: usize,
    pub(crate) max_committed: usize,
    pub(crate) live_bytes: usize,
    pub(crate) live_blocks: usize,
    pub(crate) segments: usize,
    /// Bytes of live segments outside their chunks: each one's header (up to its first
    /// chunk) and end fence. With the other figures it gives the free bytes, so the
    /// index keeps no count of its own on the hot path.
    pub(crate) overhead: usize,
}

impl Counters {
    /// Bytes in free chunks: what is reserved less the segments' overhead and the
    /// in-use chunks (each block's bytes and its head).
    pub(crate) const fn free_bytes(&self) -> usize {
        // Wrapping, so that `validate` reports counters that disagree rather than
        // overflowing.
        self.reserved
            .wrapping_sub(self.overhead)
            .wrapping_sub(self.live_bytes)
            .wrapping_sub(self.live_blocks.wrapping_mul(IN_USE_OVERHEAD))
    }
}

/// What a free leaves to the page-source side to do.
pub(crate) enum Freed {
    /// Nothing: the chunk went back to the index.
    Kept,
    /// The segment is empty and out of the space's list: decommit and release it.
    /// Its committed pages are its runs outside the free chunk's interior (see
    /// [`Core::committed_runs`]) and the addresses in [`Core::pending`], which the
    /// free left committed rather than decommit them through the cache only to give
    /// them back at once.
    Release(NonNull<Segment>),
}

/// The page calls the core makes inside ordinary segments: the space implements it
/// over its page source.
pub(crate) trait PageOps {
    /// Gives back segment `seg`, which a free just unlinked from `core` (see
    /// [`Freed::Release`]).
    ///
    /// # Safety
    ///
    /// `seg` is the segment of the `Freed::Release` that `core` returned last, not yet
    /// given back.
    unsafe fn release(&self, core: &Core, seg: NonNull<Segment>);

    /// Commits `[ptr, ptr + len)`; false (nothing committed) when the source refuses.
    ///
    /// # Safety
    ///
    /// The range is page-aligned, inside a live ordinary segment, and decommitted.
    unsafe fn commit(&self, ptr: NonNull<u8>, len: usize) -> bool;

    /// Decommits `[ptr, ptr + len)`.
    ///
    /// # Safety
    ///
    /// The range is page-aligned, inside a live ordinary segment, committed, and
    /// holds nothing that is read before it is committed again.
    unsafe fn decommit(&self, ptr: NonNull<u8>, len: usize);
}

/// The page-source-independent state of a memory space.
pub(crate) struct Core {
    pub(crate) index: Index,
    pub(crate) cache: Cache,
    // Invariant: null or the first of a doubly linked list (`next`/`prev`) of the
    // headers of every live segment of this space, each at its segment's base.
    pub(crate) segments: *mut Segment,
    // Invariant: null or the base segment's header (also in `segments`).
    pub(crate) base: *mut Segment,
    /// The base segment's address and size (`(0, 0)` without one): what
    /// `segment_at` tests before masking.
    pub(crate) base_range: (usize, usize),
    pub(crate) counters: Counters,
    /// `segment_granularity - 1`: masks a chunk address of an ordinary segment down to
    /// its header.
    pub(crate) granularity_mask: usize,
    /// The largest chunk an ordinary segment holds.
    pub(crate) max_chunk: usize,
    pub(crate) threshold: usize,
    /// `page_size - 1` of the configuration: the unit ordinary segments commit in.
    pub(crate) page_mask: usize,
    /// `page_size + MIN_CHUNK`: free chunks smaller than this have no interior.
    span_min: usize,
    /// The source's page: a dedicated block that would leave this much or more of its
    /// segment unused does not shrink in place (it moves, and its segment goes back).
    pub(crate) source_page: usize,
    pub(crate) hook: MisuseHook,
    /// The addresses `[lo, hi)` of the segment last handed back by `Freed::Release`
    /// that are still committed inside its free chunk's interior (`lo >= hi`: none).
    pub(crate) pending: (usize, usize),
    /// When non-zero: the segment last handed back by `Freed::Release` has only its
    /// first `head_run` bytes (the run holding its header) still committed; the
    /// emptying walk gave the rest back as it went.
    pub(crate) head_run: usize,
    // Invariant: null, or the designated chunk: a free chunk of `dv_size` bytes (its
    // head and footer written) in a live segment of this space, in no index list.
    // Every other free chunk is listed. It is a fresh segment's free space (dlmalloc's
    // top): a request that no listed chunk fits is cut from its front, so a run of
    // them costs no list operation, and a block freed next to it merges into it.
    pub(crate) dv: *mut u8,
    pub(crate) dv_size: usize,
}

impl Core {
    pub(crate) const fn new(
        granularity: usize,
        threshold: usize,
        page: usize,
        source_page: usize,
        block_cache: usize,
        hook: MisuseHook,
    ) -> Self {
        Self {
            index: Index::new(),
            cache: Cache::new(block_cache),
            segments: ptr::null_mut(),
            base: ptr::null_mut(),
            base_range: (0, 0),
            counters: Counters {
                reserved: 0,
                max_reserved: 0,
                committed: 0,
                max_committed: 0,
                live_bytes: 0,
                live_blocks: 0,
                segments: 0,
                overhead: 0,
            },
            granularity_mask: granularity - 1,
            max_chunk: granularity - HEADER - FENCE,
            threshold,
            page_mask: page - 1,
            span_min: page + MIN_CHUNK,
            source_page,
            hook,
            pending: (0, 0),
            head_run: 0,
            dv: ptr::null_mut(),
            dv_size: 0,
        }
    }

    /// The pages strictly inside the free chunk at address `c` of `size` bytes, as
    /// addresses `[lo, hi)`: past its head and links, before the page that holds its
    /// footer. Empty (`lo >= hi`) when no whole page fits.
    ///
    /// In an ordinary segment these pages, and only these, are decommitted: a page
    /// is committed exactly when it lies in no free chunk's interior.
    #[inline]
    pub(crate) const fn interior(&self, c: usize, size: usize) -> (usize, usize) {
        let m = self.page_mask;
        ((c + MIN_CHUNK + m) & !m, (c + size) & !m)
    }

    /// Whether a free chunk of `size` bytes can have a page in its interior.
    #[inline]
    const fn may_span_page(&self, size: usize) -> bool {
        size >= self.span_min
    }

    /// Commits the addresses `[lo, hi)` of ordinary segment `seg` and counts them.
    ///
    /// # Safety
    ///
    /// As for [`PageOps::commit`], with `lo < hi` addresses in `seg`.
    #[cold]
    #[inline(never)]
    unsafe fn commit_range(
        &mut self,
        pages: &impl PageOps,
        seg: *mut Segment,
        lo: usize,
        hi: usize,
    ) -> bool {
        debug_assert!(
            lo < hi && (lo | hi) & self.page_mask == 0,
            "commit [{lo:#x}, {hi:#x})"
        );
        let len = hi - lo;
        // SAFETY: `[lo, hi)` lies in `seg` (the caller's contract), so the offset
        // keeps the pointer inside the segment's provenance.
        let ptr = unsafe {
            NonNull::new_unchecked(seg)
                .cast::<u8>()
                .add(lo - seg.addr())
        };
        // SAFETY: the caller's contract.
        if !unsafe { pages.commit(ptr, len) } {
            return false;
        }
        // SAFETY: `seg` is a live segment header.
        unsafe { (*seg).committed += len };
        let c = &mut self.counters;
        c.committed += len;
        c.max_committed = c.max_committed.max(c.committed);
        true
    }

    /// Decommits the addresses `[lo, hi)` of ordinary segment `seg` and counts them.
    ///
    /// # Safety
    ///
    /// As for [`PageOps::decommit`], with `lo < hi` addresses in `seg`.
    #[cold]
    #[inline(never)]
    unsafe fn decommit_range(
        &mut self,
        pages: &impl PageOps,
        seg: *mut Segment,
        lo: usize,
        hi: usize,
    ) {
        debug_assert!(
            lo < hi && (lo | hi) & self.page_mask == 0,
            "decommit [{lo:#x}, {hi:#x})"
        );
        let len = hi - lo;
        // SAFETY: as in `commit_range`.
        unsafe {
            let ptr = NonNull::new_unchecked(seg)
                .cast::<u8>()
                .add(lo - seg.addr());
            pages.decommit(ptr, len);
            (*seg).committed -= len;
        }
        self.counters.committed -= len;
    }

    /// Whether a request of `size` bytes needing a chunk of `need` bytes goes to a
    /// dedicated segment.
    #[inline]
    pub(crate) fn wants_dedicated(&self, size: usize, need: usize) -> bool {
        size >= self.threshold || need > self.max_chunk
    }

    /// A listed free chunk of at least `need` bytes, with its size.
    #[inline]
    pub(crate) fn find(&self, need: usize) -> Option<(NonNull<u8>, usize)> {
        // SAFETY: the index's invariants hold between calls.
        unsafe { self.index.find(need) }
    }

    /// Hands out a block of chunk size `csize` from the free chunk `c` of `found`
    /// bytes, which is in the index: at `c + lead` when `lead` is given (an aligned
    /// request), anywhere otherwise. Commits the pages the block and the new chunk
    /// tags need, marks the block in use and counts it. Returns the payload, or
    /// `None` when the page source refuses a commit: then nothing has changed and `c`
    /// is still listed.
    ///
    /// Anywhere means the chunk's front, when a rest of at least a minimum chunk is
    /// left: the rest takes the chunk's place in its list (another list only when its
    /// size moved it there), so a large free chunk handing out blocks one after
    /// another costs no bitmap operation. Otherwise the chunk leaves the index and
    /// the leading `lead` bytes (0, or at least a minimum chunk) and the rest (when
    /// it is big enough) go back as free chunks.
    ///
    /// # Safety
    ///
    /// The caller must ensure `c` is a listed free chunk of `found >= lead + csize`
    /// bytes in a live segment, and `csize` a chunk size.
    #[inline]
    pub(crate) unsafe fn carve(
        &mut self,
        pages: &impl PageOps,
        c: NonNull<u8>,
        found: usize,
        lead: Option<usize>,
        csize: usize,
    ) -> Option<NonNull<u8>> {
        let Some(lead) = lead else {
            if found - csize >= MIN_CHUNK {
                // SAFETY: the caller's contract, with a rest of at least a minimum
                // chunk.
                return unsafe { self.carve_front(pages, c, found, csize) };
            }
            // SAFETY: the caller's contract.
            return unsafe { self.carve(pages, c, found, Some(0), csize) };
        };
        debug_assert!(
            found >= lead + csize && csize >= MIN_CHUNK && (lead == 0 || lead >= MIN_CHUNK),
            "carving {csize} at {lead} from {found}"
        );
        // SAFETY: the caller's contract; on a refused commit `carve_out` changes
        // nothing, so the chunk goes back to its list as it was.
        unsafe {
            self.index.remove(c, found);
            let p = self.carve_out(pages, c, found, lead, csize);
            if p.is_none() {
                self.index.insert(c, found);
            }
            p
        }
    }

    /// Makes free chunk `c` of `size` bytes (a fresh segment's) the designated chunk;
    /// the one before it, if any, goes to the index.
    ///
    /// # Safety
    ///
    /// The caller must ensure `c` is a free chunk of `size` bytes (head and footer
    /// written) in a live segment of this space, in no list, and not the designated
    /// chunk.
    #[inline]
    pub(crate) unsafe fn designate(&mut self, c: NonNull<u8>, size: usize) {
        if let Some(old) = NonNull::new(self.dv) {
            // SAFETY: the designated chunk is a free chunk in no list (the invariant
            // of `dv`).
            unsafe { self.index.insert(old, self.dv_size) };
        }
        self.dv = c.as_ptr();
        self.dv_size = size;
    }

    /// Gives the designated chunk, if any, to the index, so that a search sees it.
    pub(crate) fn release_dv(&mut self) {
        if let Some(dv) = NonNull::new(self.dv) {
            // SAFETY: the designated chunk is a free chunk in no list.
            unsafe { self.index.insert(dv, self.dv_size) };
            self.dv = ptr::null_mut();
        }
    }

    /// Takes free chunk `c` of `size` bytes out of the index, or out of the
    /// designated place when it is the designated chunk.
    ///
    /// # Safety
    ///
    /// The caller must ensure `c` is a listed free chunk of `size` bytes or the
    /// designated chunk.
    #[inline]
    unsafe fn unlist(&mut self, c: NonNull<u8>, size: usize) {
        if c.as_ptr() == self.dv {
            self.dv = ptr::null_mut();
        } else {
            // SAFETY: the caller's contract: not the designated chunk, so listed.
            unsafe { self.index.remove(c, size) };
        }
    }

    /// Hands out a block of chunk size `csize` from the front of the designated
    /// chunk, if it holds one (the whole chunk when less than a minimum chunk would
    /// be left). Returns the payload, or `None` when it does not fit or the page
    /// source refuses a commit (then nothing has changed).
    #[inline]
    pub(crate) fn dv_take(&mut self, pages: &impl PageOps, csize: usize) -> Option<NonNull<u8>> {
        let c = NonNull::new(self.dv)?;
        let found = self.dv_size;
        if csize > found {
            return None;
        }
        let rest = found - csize;
        // SAFETY: the designated chunk is a free chunk of `found` bytes in a live
        // segment (the invariant of `dv`): its head and the next chunk's are
        // readable.
        let head = unsafe { raw::head(c) };
        let kind = head & KIND_MASK;
        // SAFETY: as above, with `kind` its head's kind bits.
        let seg = unsafe { self.segment_of(c, kind) };
        let at = c.addr().get();
        let m = self.page_mask;
        // Pages need committing only when the block moves the chunk's front past a
        // page boundary (the first page of its interior): when the last bytes of
        // the old and the new front's links lie on different pages.
        let crosses = (at + MIN_CHUNK - 1) ^ (at + csize + MIN_CHUNK - 1) > m;
        if kind == 0 && crosses && self.may_span_page(found) {
            let (lo, hi) = self.interior(at, found);
            let to = if rest >= MIN_CHUNK {
                hi.min(self.interior(at + csize, rest).0)
            } else {
                hi
            };
            // SAFETY: `[lo, to)` lies in the chunk's interior, in `seg`, decommitted.
            if lo < to && !unsafe { self.commit_range(pages, seg, lo, to) } {
                return None;
            }
        }
        // SAFETY: every word written lies in the chunk or is the next chunk's head,
        // in the segment, on committed pages (outside the rest's new interior).
        unsafe {
            let size = if rest >= MIN_CHUNK {
                let r = c.add(csize);
                raw::set_head(r, rest | PREV_IN_USE | kind);
                raw::set_prev_foot(r.add(rest), rest);
                self.dv = r.as_ptr();
                self.dv_size = rest;
                csize
            } else {
                let next = c.add(found);
                raw::set_head(next, raw::head(next) | PREV_IN_USE);
                self.dv = ptr::null_mut();
                found
            };
            raw::set_head(c, size | IN_USE | (head & PREV_IN_USE) | kind);
            (*seg).live += 1;
            self.counters.live_bytes += size - IN_USE_OVERHEAD;
            self.counters.live_blocks += 1;
        }
        Some(raw::payload(c))
    }

    /// [`carve`](Self::carve) without a lead and with a rest of at least a minimum
    /// chunk: the block takes the first `csize` bytes of `c`, and the rest takes
    /// `c`'s place in the index.
    ///
    /// # Safety
    ///
    /// The caller must ensure `c` is a listed free chunk of `found >= csize +
    /// MIN_CHUNK` bytes in a live segment, and `csize` a chunk size.
    #[inline]
    unsafe fn carve_front(
        &mut self,
        pages: &impl PageOps,
        c: NonNull<u8>,
        found: usize,
        csize: usize,
    ) -> Option<NonNull<u8>> {
        let rest = found - csize;
        // SAFETY: `c` is a free chunk of `found` bytes in a live segment (the caller's
        // contract): its head is readable.
        let head = unsafe { raw::head(c) };
        let kind = head & KIND_MASK;
        // SAFETY: as above, with `kind` its head's kind bits.
        let seg = unsafe { self.segment_of(c, kind) };
        if kind == 0 && self.may_span_page(found) {
            let at = c.addr().get();
            let (lo, hi) = self.interior(at, found);
            // The rest keeps its interior's high end; the pages from the old
            // interior's start to the new one's get committed.
            let to = hi.min(self.interior(at + csize, rest).0);
            // SAFETY: `[lo, to)` lies in `c`'s interior, in `seg`, decommitted.
            if lo < to && !unsafe { self.commit_range(pages, seg, lo, to) } {
                return None;
            }
        }
        // SAFETY: every word written lies in `c`, in the segment, on committed pages:
        // the block's head, and the rest's head and footer, lie outside the rest's
        // new interior. The rest's head (at `r + 8 >= c + 40`) does not overlap `c`'s
        // links (`c + 16 .. c + 32`), which `replace` reads.
        unsafe {
            let r = c.add(csize);
            raw::set_head(r, rest | PREV_IN_USE | kind);
            raw::set_prev_foot(r.add(rest), rest);
            self.index.replace(c, found, r, rest);
            raw::set_head(c, csize | IN_USE | (head & PREV_IN_USE) | kind);
            (*seg).live += 1;
            self.counters.live_bytes += csize - IN_USE_OVERHEAD;
            self.counters.live_blocks += 1;
            Some(raw::payload(c))
        }
    }

    /// Hands out a block of chunk size `csize` at `c + lead` from the free chunk `c`
    /// of `found` bytes, out of the index: commits the pages the block and the new
    /// chunk tags need, splits off the leading `lead` bytes (0, or at least a minimum
    /// chunk) and the rest (when it is big enough) as listed free chunks, marks the
    /// block in use and counts it. Returns the payload, or `None` when the page
    /// source refuses a commit: then nothing has changed.
    ///
    /// # Safety
    ///
    /// The caller must ensure `c` is a free chunk of `found >= lead + csize` bytes
    /// with its head written, in no list, in a live segment, and `csize` a chunk
    /// size.
    unsafe fn carve_out(
        &mut self,
        pages: &impl PageOps,
        c: NonNull<u8>,
        found: usize,
        lead: usize,
        csize: usize,
    ) -> Option<NonNull<u8>> {
        let rest = found - lead - csize;
        // SAFETY: `c` is a free chunk of `found` bytes in a live segment (the caller's
        // contract): its head is readable.
        let head = unsafe { raw::head(c) };
        let kind = head & KIND_MASK;
        // SAFETY: as above, with `kind` its head's kind bits.
        let seg = unsafe { self.segment_of(c, kind) };
        if kind == 0 && self.may_span_page(found) {
            let at = c.addr().get();
            let (lo, hi) = self.interior(at, found);
            // Keep decommitted what stays inside the new free chunks' interiors: the
            // leading chunk's (up to the page holding its end) and the rest's.
            let from = lo.max((at + lead) & !self.page_mask);
            let to = if rest >= MIN_CHUNK {
                hi.min(self.interior(at + lead + csize, rest).0)
            } else {
                hi
            };
            // SAFETY: `[from, to)` lies in `c`'s interior, in `seg`, decommitted.
            if from < to && !unsafe { self.commit_range(pages, seg, from, to) } {
                return None;
            }
        }
        // SAFETY: `lead < found`, so the block starts inside `c`.
        let block = unsafe { c.add(lead) };
        let prev_bit = if lead == 0 {
            head & PREV_IN_USE
        } else {
            // SAFETY: the leading chunk `[c, block)` is at least a minimum chunk; its
            // head and footer (the block's `prev_foot`) lie outside its interior, on
            // committed pages; it is in no list until inserted here.
            unsafe {
                raw::set_head(c, lead | (head & (PREV_IN_USE | KIND_MASK)));
                raw::set_prev_foot(block, lead);
                self.index.insert(c, lead);
            }
            0
        };
        let size = if rest >= MIN_CHUNK {
            // SAFETY: the rest `[block + csize, c + found)` is at least a minimum chunk
            // inside `c`; its head and footer lie outside its interior, on committed
            // pages (the commit above covered everything else); it is in no list until
            // inserted here.
            unsafe {
                let r = block.add(csize);
                raw::set_head(r, rest | PREV_IN_USE | kind);
                raw::set_prev_foot(r.add(rest), rest);
                self.index.insert(r, rest);
            }
            csize
        } else {
            // SAFETY: the chunk after `c` is a chunk of the same segment or its end
            // fence (the fence follows the last chunk), its head committed.
            unsafe {
                let next = c.add(found);
                raw::set_head(next, raw::head(next) | PREV_IN_USE);
            }
            csize + rest
        };
        // SAFETY: the block's head lies before its payload, on a committed page (the
        // commit above covered the old interior the block overlaps); `seg` is live.
        unsafe {
            raw::set_head(block, size | IN_USE | prev_bit | kind);
            (*seg).live += 1;
        }
        self.counters.live_bytes += size - IN_USE_OVERHEAD;
        self.counters.live_blocks += 1;
        Some(raw::payload(block))
    }

    /// Where in the free chunk `c` a block whose payload `p` has `p + offset` aligned
    /// to `align` starts: 0 or at least a minimum chunk in.
    pub(crate) fn aligned_lead(c: NonNull<u8>, align: usize, offset: usize) -> usize {
        let p0 = raw::payload(c).addr().get();
        let mut p = (p0 + offset).next_multiple_of(align) - offset;
        if p != p0 && p - p0 < MIN_CHUNK {
            p += align;
        }
        debug_assert!((p - p0).is_multiple_of(CHUNK_ALIGN));
        p - p0
    }

    /// The header of the segment chunk `c` lies in, from the kind bits of its head.
    ///
    /// # Safety
    ///
    /// The caller must ensure `c` is a chunk (in use, or free with its head written)
    /// of a live segment of this space and `kind` its head's kind bits.
    #[inline]
    pub(crate) unsafe fn segment_of(&self, c: NonNull<u8>, kind: usize) -> *mut Segment {
        if kind == 0 {
            c.as_ptr().map_addr(|a| a & !self.granularity_mask).cast()
        } else if kind & BASE != 0 {
            self.base
        } else {
            // SAFETY: a dedicated chunk's `prev_foot` holds its offset from its
            // segment's base (written by the caller of `install_dedicated`).
            unsafe { c.sub(raw::prev_foot(c)).cast::<Segment>().as_ptr() }
        }
    }

    /// The chunk of the block whose payload a caller gave as `payload`, as a pointer
    /// the space may keep and use for tags and headers.
    ///
    /// The address is always `payload - 16`. In a build the pointer is derived from
    /// `payload`. Under Miri it is derived from the space's own pointer to the
    /// segment that holds it (found by walking the segment list), because a
    /// caller's pointer carries the caller's borrow: Tree Borrows forbids reading a
    /// tag or a segment header through it once the space has written those words
    /// through its own pointers (which it does whenever a neighbour is allocated or
    /// freed). Only the block's payload is written through the caller's pointer,
    /// which the caller may still guard while it frees the block (a `Box` dropped in
    /// the function it was passed to).
    #[inline]
    pub(crate) fn adopt(&self, payload: NonNull<u8>) -> NonNull<u8> {
        let c = raw::chunk_of(payload);
        #[cfg(miri)]
        {
            let addr = c.addr().get();
            let mut seg = self.segments;
            while let Some(s) = NonNull::new(seg) {
                // SAFETY: every header on the list is a live segment's.
                let (size, next) = unsafe { ((*seg).size, (*seg).next) };
                if addr.wrapping_sub(s.addr().get()) < size {
                    return s.cast::<u8>().with_addr(c.addr());
                }
                seg = next;
            }
        }
        c
    }

    /// Hands out a cached chunk for a request of chunk size `csize`, if its class
    /// holds one. Returns the payload. Touches the chunk's head and link words, the
    /// next cached chunk's back link and the segment's header, not the neighbours.
    #[inline]
    pub(crate) fn cache_take(&mut self, csize: usize) -> Option<NonNull<u8>> {
        if self.cache.bytes == 0 {
            return None;
        }
        let k = cache::class_at_least(csize)?;
        let c = self.cache.pop(k)?;
        // SAFETY: a chunk just out of the cache is an in-use chunk of a live ordinary
        // or base segment, which counts it in `cached`.
        unsafe { (*self.segment_at(c)).cached -= 1 };
        Some(raw::payload(c))
    }

    /// The header of the ordinary or base segment chunk `c` lies in, from its
    /// address alone.
    ///
    /// # Safety
    ///
    /// The caller must ensure `c` is a chunk of a live segment of this space that is
    /// not dedicated.
    #[inline]
    unsafe fn segment_at(&self, c: NonNull<u8>) -> *mut Segment {
        if c.addr().get().wrapping_sub(self.base_range.0) < self.base_range.1 {
            self.base
        } else {
            c.as_ptr().map_addr(|a| a & !self.granularity_mask).cast()
        }
    }

    /// Puts the block of in-use chunk `c` (of segment `seg`, its head `head`) in the
    /// front cache when the cache has room and the segment keeps another block in
    /// use (or is the base segment, which is never released). True when it did.
    ///
    /// # Safety
    ///
    /// The caller must ensure `c` is an in-use chunk of segment `seg`, live, not
    /// dedicated, of this space, and not cached, `head` its head, and `own` a pointer
    /// to it that may write its payload.
    #[inline]
    unsafe fn try_cache(
        &mut self,
        c: NonNull<u8>,
        own: NonNull<u8>,
        seg: *mut Segment,
        head: usize,
    ) -> bool {
        let Some(k) = cache::class_of(raw::size(head)) else {
            return false;
        };
        // SAFETY: `seg` is a live segment header and `c` an in-use chunk whose head's
        // size is of at least class `k`'s (the caller's contract).
        unsafe {
            let others = (*seg).live - (*seg).cached > 1 || seg == self.base;
            if !others || !self.cache.has_room(k, self.counters.live_bytes) {
                return false;
            }
            self.cache.push(k, c, own, head);
            (*seg).cached += 1;
        }
        true
    }

    /// Frees the block of in-use chunk `c`: into the front cache when it has room and
    /// the block's segment keeps another block in use; otherwise through
    /// [`free_chunk`](Self::free_chunk), or, when `c` is the segment's last block in
    /// use but for cached ones, through [`free_emptying`](Self::free_emptying), so
    /// that the segment empties, and goes back, in this call. `c`'s payload words
    /// are written through `own` (see [`adopt`](Self::adopt)).
    ///
    /// # Safety
    ///
    /// The caller must ensure `c` is an in-use chunk of a live segment of this space,
    /// not cached, and `own` a pointer to the same chunk that may write its payload.
    #[inline]
    pub(crate) unsafe fn free_block(
        &mut self,
        pages: &impl PageOps,
        c: NonNull<u8>,
        own: NonNull<u8>,
    ) -> Freed {
        // SAFETY: `c` is an in-use chunk of a live segment (the caller's contract).
        unsafe {
            let head = raw::head(c);
            let kind = head & KIND_MASK;
            if kind & DEDICATED == 0 {
                let seg = self.segment_of(c, kind);
                if self.try_cache(c, own, seg, head) {
                    return Freed::Kept;
                }
                if (*seg).cached != 0 && (*seg).live - (*seg).cached == 1 && seg != self.base {
                    return self.free_emptying(pages, seg, c);
                }
            }
            self.free_chunk(pages, c, own)
        }
    }

    /// Frees `c`, the last block in use of ordinary segment `seg` but for cached ones:
    /// walks the segment's chunks, takes every cached one out of the cache and every
    /// free one out of the index, uncounts them and `c`, decommits the segment's
    /// committed runs behind the walk but the first (which holds the header, still
    /// read: see `head_run`), and unlinks the segment for the caller to release.
    /// Nothing merges and no tag changes.
    ///
    /// # Safety
    ///
    /// The caller must ensure `seg` is a live ordinary segment of this space whose
    /// in-use chunks are `c` (not cached) and `seg.cached` cached ones.
    #[cold]
    #[inline(never)]
    unsafe fn free_emptying(
        &mut self,
        pages: &impl PageOps,
        seg: *mut Segment,
        c: NonNull<u8>,
    ) -> Freed {
        // When every cached chunk is this segment's (a heap of one segment, or a
        // frame freed whole), the cache empties at once instead of chunk by chunk.
        // SAFETY: `seg` is a live segment header.
        let all_cached_here = self.cache.chunk_count() == unsafe { (*seg).cached };
        if all_cached_here {
            self.cache.clear();
        }
        let base = seg.addr();
        // The committed run the walk is in starts at `from`; `head_run` is where the
        // first one ends (0 until it does).
        let mut from = 0;
        let mut head_run = 0;
        // SAFETY: the caller's contract; the walk reads each chunk's head (outside
        // every free interior, and ahead of every run decommitted, so committed) and
        // stops at the end fence; every in-use chunk but `c` is cached, every free one
        // listed or designated. A run is decommitted only once the walk has passed it
        // and taken its chunks out of every list, so nothing reads it again.
        unsafe {
            let mut at = NonNull::new_unchecked(seg).cast::<u8>().add((*seg).first);
            loop {
                let head = raw::head(at);
                let size = raw::size(head);
                if size == 0 {
                    break;
                }
                if head & IN_USE == 0 {
                    self.unlist(at, size);
                    let (lo, hi) = self.interior(at.addr().get(), size);
                    if lo < hi {
                        if head_run == 0 {
                            head_run = lo - base;
                        } else if from < lo - base {
                            self.decommit_range(pages, seg, base + from, lo);
                        }
                        from = hi - base;
                    }
                } else {
                    if at == c {
                        // Its head says free from now (see `free_chunk`).
                        raw::set_head(at, head & !IN_USE);
                    } else if !all_cached_here {
                        let k = cache::class_of(size).expect("a cached chunk has a class");
                        self.cache.unlink(k, at);
                    }
                    self.counters.live_bytes -= size - IN_USE_OVERHEAD;
                    self.counters.live_blocks -= 1;
                }
                at = at.add(size);
            }
            let size = (*seg).size;
            if head_run == 0 {
                head_run = size;
            } else if from < size {
                self.decommit_range(pages, seg, base + from, base + size);
            }
            debug_assert_eq!(
                (*seg).committed,
                head_run,
                "segment {seg:p}: committed figure"
            );
            (*seg).live = 0;
            (*seg).cached = 0;
            let freed = self.unlink_segment(seg, (0, 0));
            self.head_run = head_run;
            freed
        }
    }

    /// Takes every chunk out of the cache and frees it for good (merging it with its
    /// neighbours). No segment empties: each keeps a block in use that is not cached
    /// (the invariant of `Segment::cached`), or is the base segment.
    #[cold]
    #[inline(never)]
    pub(crate) fn drain(&mut self, pages: &impl PageOps) {
        for k in 0..cache::CLASSES {
            while let Some(c) = self.cache.pop(k) {
                // SAFETY: a chunk out of the cache is an in-use chunk like any other,
                // of a live ordinary or base segment that counts it in `cached`.
                unsafe {
                    (*self.segment_at(c)).cached -= 1;
                    let freed = self.free_chunk(pages, c, c);
                    debug_assert!(
                        matches!(freed, Freed::Kept),
                        "draining the cache emptied a segment"
                    );
                    // Never so by `Segment::cached`'s invariant; should a segment
                    // empty all the same, it still goes back.
                    if let Freed::Release(seg) = freed {
                        pages.release(self, seg);
                    }
                }
            }
        }
    }

    /// Frees the in-use chunk `c`: merges it with free neighbours, decommits the
    /// pages that are now wholly inside free space, and lists the result; or, when
    /// that empties the segment, unlinks the segment for the caller to release.
    ///
    /// The merged chunk takes the list place of the free neighbour it grows (the one
    /// before it, or the one after it when that is the only one), so a block freed
    /// next to a large free chunk costs no list operation unless the size crosses
    /// into another list.
    ///
    /// `c`'s payload words are written through `own` (see [`adopt`](Self::adopt)).
    ///
    /// # Safety
    ///
    /// The caller must ensure `c` is an in-use chunk of a live segment of this space,
    /// and `own` a pointer to it that may write its payload.
    #[inline]
    pub(crate) unsafe fn free_chunk(
        &mut self,
        pages: &impl PageOps,
        c: NonNull<u8>,
        own: NonNull<u8>,
    ) -> Freed {
        // SAFETY: `c` is an in-use chunk (the caller's contract): its head is readable.
        let head = unsafe { raw::head(c) };
        debug_assert!(
            head & IN_USE != 0,
            "freeing chunk {c:p}, which is not in use"
        );
        let size = raw::size(head);
        let kind = head & KIND_MASK;
        self.counters.live_bytes -= size - IN_USE_OVERHEAD;
        self.counters.live_blocks -= 1;
        // SAFETY: as above, with `kind` its head's kind bits.
        let seg = unsafe { self.segment_of(c, kind) };
        // SAFETY: `seg` is the live segment holding `c`.
        let live = unsafe {
            (*seg).live -= 1;
            (*seg).live
        };
        if kind & DEDICATED != 0 {
            // SAFETY: the segment's one chunk was `c`: it is empty.
            return unsafe { self.unlink_segment(seg, (0, 0)) };
        }
        if live == 0 && kind & BASE == 0 {
            // SAFETY: `c` was the last chunk in use of the ordinary segment `seg`.
            return unsafe { self.free_last(seg, c, own, head) };
        }
        // SAFETY: the chunk after `c` is a chunk of the same segment or its end fence
        // (the fence follows the last chunk), its head committed.
        let (next, next_head) = unsafe {
            let next = c.add(size);
            (next, raw::head(next))
        };
        let next_free = next_head & IN_USE == 0;
        let next_size = raw::size(next_head);
        // The merged chunk's interior pages below `from` (the previous chunk's
        // interior) and from `to` on (the next chunk's) are decommitted already.
        let (start, total, from) = if head & PREV_IN_USE == 0 {
            // SAFETY: PREV_IN_USE clear means a free chunk before `c` in its segment
            // (the first chunk always has the bit), whose size is `c`'s `prev_foot`
            // (its footer) and whose head lies outside its interior.
            let (prev, prev_size) = unsafe {
                let prev_size = raw::prev_foot(c);
                (c.sub(prev_size), prev_size)
            };
            let mut total = prev_size + size;
            let mut next_was_dv = false;
            if next_free {
                next_was_dv = next.as_ptr() == self.dv;
                // SAFETY: a free chunk is listed or designated.
                unsafe { self.unlist(next, next_size) };
                total += next_size;
            }
            // SAFETY: `prev`'s head, committed; `prev` is listed with `prev_size`
            // bytes unless designated, and now holds `total`. `c`'s own head, now
            // inside the merged chunk, says free: a second free of `c` is told apart.
            unsafe {
                raw::set_head(c, head & !IN_USE);
                raw::set_head(prev, total | PREV_IN_USE | kind);
                if prev.as_ptr() == self.dv {
                    self.dv_size = total;
                } else if next_was_dv {
                    // The merged chunk takes the designated place.
                    self.index.remove(prev, prev_size);
                    self.dv = prev.as_ptr();
                    self.dv_size = total;
                } else {
                    self.index.resize(prev, prev_size, total);
                }
            }
            (prev, total, c.addr().get() & !self.page_mask)
        } else if next_free {
            let total = size + next_size;
            // SAFETY: `c`'s head is its own; `next` is listed with `next_size` bytes
            // unless designated, and `c` (in no list) takes its place.
            unsafe {
                raw::set_head(c, total | PREV_IN_USE | kind);
                if next.as_ptr() == self.dv {
                    self.dv = c.as_ptr();
                    self.dv_size = total;
                } else {
                    self.index.replace_own(next, next_size, c, own, total);
                }
            }
            (c, total, 0)
        } else {
            // SAFETY: `c` is now a free chunk of `size` bytes, in no list.
            unsafe {
                raw::set_head(c, size | PREV_IN_USE | kind);
                self.index.insert_own(c, own, size);
            }
            (c, size, 0)
        };
        // SAFETY: `next`'s head (when it stays a chunk of its own) and the merged
        // chunk's footer (the `prev_foot` of the chunk after it) lie outside every
        // free interior, committed; the footer is `c`'s last payload word (so
        // written through `own`) unless `next` merged.
        unsafe {
            if next_free {
                raw::set_prev_foot(start.add(total), total);
            } else {
                raw::set_head(next, next_head & !PREV_IN_USE);
                raw::set_prev_foot(own.add(size), total);
            }
        }
        if kind == 0 && self.may_span_page(total) {
            let to = if next_free {
                self.interior(next.addr().get(), next_size).0
            } else {
                usize::MAX
            };
            let (lo, hi) = self.interior(start.addr().get(), total);
            let (lo, hi) = (lo.max(from), hi.min(to));
            if lo < hi {
                // SAFETY: `[lo, hi)` is the merged chunk's interior less what was
                // decommitted already: committed pages of `seg` that hold nothing.
                unsafe { self.decommit_range(pages, seg, lo, hi) };
            }
        }
        Freed::Kept
    }

    /// Frees `c`, the last chunk in use of ordinary segment `seg` (already
    /// uncounted): takes its free neighbours (the rest of the segment) out of the
    /// index and unlinks the segment for the caller to release.
    ///
    /// # Safety
    ///
    /// The caller must ensure `c` (of head `head`) was the last in-use chunk of the
    /// live ordinary segment `seg`, with `seg.live` and the counters already lowered,
    /// and `own` a pointer to it that may write its payload.
    #[cold]
    unsafe fn free_last(
        &mut self,
        seg: *mut Segment,
        c: NonNull<u8>,
        own: NonNull<u8>,
        head: usize,
    ) -> Freed {
        let size = raw::size(head);
        // SAFETY: as in `free_chunk`: the neighbours are chunks of the segment, and
        // free (nothing else is in use), so listed.
        unsafe {
            let mut start = c;
            let mut total = size;
            let mut from = 0;
            let mut to = usize::MAX;
            if head & PREV_IN_USE == 0 {
                let prev_size = raw::prev_foot(c);
                start = c.sub(prev_size);
                self.unlist(start, prev_size);
                total += prev_size;
                from = c.addr().get() & !self.page_mask;
                // `c`'s own head, now inside the merged chunk, says free (see
                // `free_chunk`): a second free of it is told apart.
                raw::set_head(c, head & !IN_USE);
            }
            let next = c.add(size);
            let next_head = raw::head(next);
            let next_free = next_head & IN_USE == 0;
            if next_free {
                let next_size = raw::size(next_head);
                self.unlist(next, next_size);
                total += next_size;
                to = self.interior(next.addr().get(), next_size).0;
            }
            raw::set_head(start, total | PREV_IN_USE);
            if next_free {
                raw::set_prev_foot(start.add(total), total);
            } else {
                // The footer is `c`'s last payload word.
                raw::set_prev_foot(own.add(size), total);
            }
            debug_assert_eq!(
                (start.as_ptr(), total),
                (seg.cast::<u8>().add(HEADER), (*seg).size - HEADER - FENCE),
                "segment {seg:p} is empty but its chunks did not merge into one"
            );
            let (lo, hi) = if self.may_span_page(total) {
                let (lo, hi) = self.interior(start.addr().get(), total);
                (lo.max(from), hi.min(to))
            } else {
                (0, 0)
            };
            self.unlink_segment(seg, (lo, hi))
        }
    }

    /// Takes `seg` out of the segment list and its bytes out of the figures.
    ///
    /// # Safety
    ///
    /// The caller must ensure `seg` is a live, non-base segment of this space, empty
    /// (no chunk of it in use or in the index), and release it before anything else
    /// touches the space.
    #[cold]
    pub(crate) unsafe fn unlink_segment(
        &mut self,
        seg: *mut Segment,
        pending: (usize, usize),
    ) -> Freed {
        // SAFETY: `seg` and its list neighbours are live segment headers (the list's
        // invariant).
        unsafe {
            let (next, prev) = ((*seg).next, (*seg).prev);
            if let Some(next) = next.as_mut() {
                next.prev = prev;
            }
            match prev.as_mut() {
                Some(prev) => prev.next = next,
                None => self.segments = next,
            }
            self.counters.reserved -= (*seg).size;
            self.counters.overhead -= (*seg).first + FENCE;
            self.counters.committed -= (*seg).committed;
            self.counters.segments -= 1;
            self.cache
                .fit(self.counters.reserved, self.granularity_mask + 1);
            self.head_run = 0;
            self.pending = pending;
            Freed::Release(NonNull::new_unchecked(seg))
        }
    }

    /// Writes a segment header at `base` for `size` reserved bytes of which
    /// `committed` are committed, and links it into the list.
    ///
    /// # Safety
    ///
    /// The caller must ensure `base` is the 16-aligned start of `size` writable bytes
    /// that belong to this space from now on, with `size >= HEADER + MIN_CHUNK +
    /// FENCE`, committed but for the interior of the chunk area (see
    /// [`fresh_interior`](Self::fresh_interior)) when `committed < size`.
    pub(crate) unsafe fn link_segment(
        &mut self,
        base: NonNull<u8>,
        size: usize,
        committed: usize,
        kind: Kind,
    ) -> NonNull<Segment> {
        let seg = base.cast::<Segment>();
        // SAFETY: the caller's contract: the header fits and is ours to write; the old
        // list head is a live segment header.
        unsafe {
            seg.write(Segment {
                next: self.segments,
                prev: ptr::null_mut(),
                size,
                committed,
                live: 0,
                cached: 0,
                kind: kind as usize,
                first: HEADER,
            });
            if let Some(old) = self.segments.as_mut() {
                old.prev = seg.as_ptr();
            }
        }
        self.segments = seg.as_ptr();
        let c = &mut self.counters;
        c.reserved += size;
        c.max_reserved = c.max_reserved.max(c.reserved);
        c.committed += committed;
        c.max_committed = c.max_committed.max(c.committed);
        c.segments += 1;
        self.cache.fit(c.reserved, self.granularity_mask + 1);
        c.overhead += HEADER + FENCE;
        seg
    }

    /// The interior of the one free chunk of a fresh ordinary segment at `base` of
    /// `size` bytes, as offsets: what need not be committed when it is reserved.
    pub(crate) const fn fresh_interior(&self, base: usize, size: usize) -> (usize, usize) {
        let (lo, hi) = self.interior(base + HEADER, size - HEADER - FENCE);
        if lo < hi {
            (lo - base, hi - base)
        } else {
            (0, 0)
        }
    }

    /// Makes the chunk area of a freshly linked segment one free chunk followed by the
    /// end fence, and returns that chunk (in no list) with its size.
    ///
    /// # Safety
    ///
    /// The caller must ensure `seg` was just linked by `link_segment` with a size of
    /// at least `HEADER + MIN_CHUNK + FENCE`, a multiple of 16.
    pub(crate) unsafe fn init_area(&mut self, seg: NonNull<Segment>) -> (NonNull<u8>, usize) {
        // SAFETY: the segment's bytes are committed and ours (the caller's contract).
        unsafe {
            let kind = match (*seg.as_ptr()).kind {
                k if k == Kind::Base as usize => kind_flag(Kind::Base),
                _ => kind_flag(Kind::Normal),
            };
            let size = (*seg.as_ptr()).size;
            let c = seg.cast::<u8>().add(HEADER);
            let area = size - HEADER - FENCE;
            raw::set_head(c, area | PREV_IN_USE | kind);
            let fence = c.add(area);
            raw::set_prev_foot(fence, area);
            raw::set_head(fence, IN_USE | kind);
            (c, area)
        }
    }

    /// Writes the one chunk of a freshly linked dedicated segment: it starts
    /// `chunk_offset` bytes into the segment and runs to the end fence. Returns the
    /// payload.
    ///
    /// # Safety
    ///
    /// The caller must ensure `seg` was just linked by `link_segment` with
    /// `Kind::Dedicated`, and that `chunk_offset >= HEADER` is a multiple of 16 with
    /// `chunk_offset + MIN_CHUNK + FENCE <= size`.
    pub(crate) unsafe fn install_dedicated(
        &mut self,
        seg: NonNull<Segment>,
        chunk_offset: usize,
    ) -> NonNull<u8> {
        // SAFETY: the segment's bytes are committed and ours (the caller's contract).
        unsafe {
            let size = (*seg.as_ptr()).size;
            let c = seg.cast::<u8>().add(chunk_offset);
            let csize = size - chunk_offset - FENCE;
            raw::set_prev_foot(c, chunk_offset);
            raw::set_head(c, csize | IN_USE | PREV_IN_USE | DEDICATED);
            raw::set_head(c.add(csize), IN_USE | PREV_IN_USE);
            (*seg.as_ptr()).live = 1;
            (*seg.as_ptr()).first = chunk_offset;
            self.counters.overhead += chunk_offset - HEADER;
            self.counters.live_bytes += csize - IN_USE_OVERHEAD;
            self.counters.live_blocks += 1;
            raw::payload(c)
        }
    }

    /// Resizes in-use chunk `c` to hold `new_size` bytes without moving it: shrinks by
    /// splitting off a free tail (decommitting the pages it wholly covers), grows
    /// into a free successor (committing the pages it needs). False when it cannot,
    /// or when the page source refuses a commit (nothing changes). A dedicated block
    /// resizes in place only within its segment and by less than a source page.
    ///
    /// # Safety
    ///
    /// The caller must ensure `c` is an in-use chunk of a live segment of this space.
    pub(crate) unsafe fn resize_in_place(
        &mut self,
        pages: &impl PageOps,
        c: NonNull<u8>,
        new_size: usize,
    ) -> bool {
        let Some(want) = chunk_size_for(new_size) else {
            return false;
        };
        // SAFETY: `c` is an in-use chunk of a live segment (the caller's contract): its
        // head is readable.
        let head = unsafe { raw::head(c) };
        let size = raw::size(head);
        if head & DEDICATED != 0 {
            // A dedicated block keeps its segment while it fills it to within a page;
            // a real shrink must move, so that the segment goes back.
            return want <= size && size - want < self.source_page;
        }
        let kind = head & KIND_MASK;
        // SAFETY: the chunk after `c` is a chunk of the same segment or its end fence
        // (the fence follows the last chunk), its head committed.
        let (next, next_head) = unsafe {
            let next = c.add(size);
            (next, raw::head(next))
        };
        let next_free = next_head & IN_USE == 0;
        let room = if next_free {
            size + raw::size(next_head)
        } else {
            size
        };
        if want > room {
            return false;
        }
        if want <= size && room - want < MIN_CHUNK {
            return true;
        }
        // The chunk becomes `want` bytes (or all of `room`); the successor, if free,
        // is absorbed and what is left becomes a free tail.
        let rest = room - want;
        // SAFETY: as above, with `kind` its head's kind bits.
        let seg = unsafe { self.segment_of(c, kind) };
        // Decommitted now: the free successor's interior; after: the tail's.
        let none = (usize::MAX, usize::MAX);
        let (old, new) = if kind == 0 && self.may_span_page(room) {
            let at = c.addr().get();
            let old = if next_free {
                self.interior(at + size, room - size)
            } else {
                none
            };
            let new = if rest >= MIN_CHUNK {
                self.interior(at + want, rest)
            } else {
                none
            };
            (old, new)
        } else {
            (none, none)
        };
        let commit_to = old.1.min(new.0);
        // SAFETY: `[old.0, commit_to)` lies in the free successor's interior, in
        // `seg`, decommitted.
        if old.0 < commit_to && !unsafe { self.commit_range(pages, seg, old.0, commit_to) } {
            return false;
        }
        if next_free {
            // SAFETY: a free chunk is listed or designated.
            unsafe { self.unlist(next, room - size) };
        }
        let new_size = if rest >= MIN_CHUNK {
            // SAFETY: the tail `[c + want, c + room)` is at least a minimum chunk
            // inside `c` and its absorbed successor; its head and footer lie outside
            // its interior, on committed pages (the commit above covered the rest);
            // `[new.0, decommit_to)` is in its interior, committed, unused; it is in
            // no list until inserted here. The successor's head, when it stays, is
            // committed.
            unsafe {
                let t = c.add(want);
                raw::set_head(t, rest | PREV_IN_USE | kind);
                raw::set_prev_foot(t.add(rest), rest);
                if !next_free {
                    raw::set_head(next, next_head & !PREV_IN_USE);
                }
                let decommit_to = new.1.min(old.0);
                if new.0 < decommit_to {
                    self.decommit_range(pages, seg, new.0, decommit_to);
                }
                self.index.insert(t, rest);
            }
            want
        } else {
            // SAFETY: the chunk after the grown one is a chunk or the end fence of the
            // segment, its head committed.
            unsafe {
                let after = c.add(room);
                raw::set_head(after, raw::head(after) | PREV_IN_USE);
            }
            room
        };
        // SAFETY: `c`'s head, as read above.
        unsafe { raw::set_head(c, new_size | (head & FLAG_MASK)) };
        self.counters.live_bytes = self.counters.live_bytes + new_size - size;
        true
    }

    /// Calls `f` with each committed run of segment `seg` as offsets `[lo, hi)`: all
    /// of a dedicated or base segment; of an ordinary one, what lies outside every
    /// free chunk's interior. Walks the segment's chunks, never reading a run again
    /// once it has been given to `f` (which may decommit it).
    ///
    /// # Safety
    ///
    /// The caller must ensure `seg` is a live segment of this space (or one just
    /// unlinked by [`free_chunk`](Self::free_chunk)) with intact tags.
    pub(crate) unsafe fn committed_runs(
        &self,
        seg: NonNull<Segment>,
        mut f: impl FnMut(usize, usize),
    ) {
        // SAFETY: the caller's contract: the header and every chunk tag of the
        // segment are readable, and the walk stops at the end fence.
        unsafe {
            let Segment {
                size: seg_size,
                kind,
                first,
                ..
            } = *seg.as_ptr();
            if kind != Kind::Normal as usize {
                f(0, seg_size);
                return;
            }
            let base = seg.addr().get();
            let mut c = seg.cast::<u8>().add(first);
            let mut from = 0;
            loop {
                let head = raw::head(c);
                let size = raw::size(head);
                if size == 0 {
                    break;
                }
                if head & IN_USE == 0 {
                    let (lo, hi) = self.interior(c.addr().get(), size);
                    if lo < hi {
                        if from < lo - base {
                            f(from, lo - base);
                        }
                        from = hi - base;
                    }
                }
                c = c.add(size);
            }
            if from < seg_size {
                f(from, seg_size);
            }
        }
    }

    /// The payload bytes of in-use chunk `c`.
    ///
    /// # Safety
    ///
    /// The caller must ensure `c` is an in-use chunk of a live segment.
    #[inline]
    pub(crate) unsafe fn usable(c: NonNull<u8>) -> usize {
        // SAFETY: the caller's contract.
        raw::size(unsafe { raw::head(c) }) - IN_USE_OVERHEAD
    }

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
    unsafe fn check_chunk(
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
    unsafe fn probe_neighbours(
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
    unsafe fn probe_unusual(
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

    /// Reports `misuse` through the hook.
    #[cold]
    pub(crate) fn report(&self, misuse: &Misuse<'_>) {
        (self.hook)(misuse);
    }

    /// The cached chunks and their bytes (a walk of the cache, reading each tag).
    pub(crate) fn cached(&self) -> (usize, usize) {
        self.cache.chunks().fold((0, 0), |(n, bytes), (_, c)| {
            // SAFETY: a cached chunk is an in-use chunk of a live segment.
            (n + 1, bytes + raw::size(unsafe { raw::head(c) }))
        })
    }

    /// The figures, as counted (the counters hold cached chunks as in use; the
    /// figures call them free).
    pub(crate) fn stats(&self) -> SpaceStats {
        let c = &self.counters;
        let (cached_blocks, cached_bytes) = self.cached();
        SpaceStats {
            reserved: c.reserved,
            max_reserved: c.max_reserved,
            committed: c.committed,
            max_committed: c.max_committed,
            live_bytes: c.live_bytes - (cached_bytes - cached_blocks * IN_USE_OVERHEAD),
            live_blocks: c.live_blocks - cached_blocks,
            free_bytes: c.free_bytes() + cached_bytes,
            cached_bytes,
            cached_blocks,
            segments: c.segments,
            ..SpaceStats::default()
        }
    }
}

/// What [`Core::probe`] found wrong with a pointer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Fault {
    /// The tag says free or cached: a second free.
    DoubleFree,
    /// No block in use starts there.
    Interior,
}

/// `c` moved to address `addr` (with `c`'s provenance); `c` itself for 0.
fn at(c: NonNull<u8>, addr: usize) -> NonNull<u8> {
    c.with_addr(core::num::NonZeroUsize::new(addr).unwrap_or(c.addr()))
}

/// The offset of a dedicated chunk from its segment's base such that its payload `p`
/// has `p + offset` aligned to `align` (the base being aligned to `align`).
pub(crate) fn dedicated_chunk_offset(align: usize, offset: usize) -> Option<usize> {
    let payload = (HEADER + PAYLOAD)
        .checked_add(offset)?
        .checked_next_multiple_of(align)?
        - offset;
    Some(payload - PAYLOAD)
}
