//! Allocation: the index search, carving a block out of a free chunk (committing the
//! pages it now covers), the designated chunk, the block cache, and new segments'
//! areas and dedicated chunks.

use core::ptr::{self, NonNull};

use crate::block_cache;
use crate::chunk::flags::{DEDICATED, IN_USE, PREV_IN_USE};
use crate::chunk::{
    CHUNK_ALIGN, FENCE, HEADER, IN_USE_OVERHEAD, Kind, MIN_CHUNK, PAYLOAD, Segment, kind_flag, raw,
};
use crate::engine::{Core, KIND_MASK, PageOps};

impl Core {
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

    /// [`find`](Self::find) with `list_at_least(need)` given as `list`.
    #[inline]
    pub(crate) fn find_from(
        &self,
        need: usize,
        list: (usize, usize),
    ) -> Option<(NonNull<u8>, usize)> {
        debug_assert_eq!(list, crate::index::list_at_least(need));
        // SAFETY: the index's invariants hold between calls; `list` is `need`'s.
        unsafe { self.index.find_from(need, list) }
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
    #[inline(always)]
    pub(crate) unsafe fn carve(
        &mut self,
        pages: &impl PageOps,
        c: NonNull<u8>,
        found: usize,
        lead: Option<usize>,
        csize: usize,
    ) -> Option<NonNull<u8>> {
        let lead = match lead {
            Some(lead) => lead,
            None if found - csize >= MIN_CHUNK => {
                // SAFETY: the caller's contract, with a rest of at least a minimum
                // chunk.
                return unsafe { self.carve_front(pages, c, found, csize) };
            }
            None => 0,
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
    pub(crate) unsafe fn unlist(&mut self, c: NonNull<u8>, size: usize) {
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
        // SAFETY: `c` is a chunk of a live segment.
        Some(unsafe { raw::payload(c) })
    }

    /// [`dv_take`](Self::dv_take)'s common case, inline: the designated chunk of an
    /// ordinary segment holds `csize` bytes and a minimum chunk more, and the block
    /// ends before the page its interior starts on (nothing to commit). Returns the
    /// payload, or `None` (nothing changed) for `dv_take` to decide.
    #[inline(always)]
    pub(crate) fn dv_cut(&mut self, csize: usize) -> Option<NonNull<u8>> {
        let c = NonNull::new(self.dv)?;
        let found = self.dv_size;
        let at = c.addr().get();
        if csize + MIN_CHUNK > found
            || (at + MIN_CHUNK - 1) ^ (at + csize + MIN_CHUNK - 1) > self.page_mask
        {
            return None;
        }
        // SAFETY: the designated chunk is a free chunk of `found` bytes in a live
        // segment (the invariant of `dv`); its head is readable.
        let head = unsafe { raw::head(c) };
        if head & KIND_MASK != 0 {
            return None;
        }
        let rest = found - csize;
        // SAFETY: the block and the rest's head lie before the page the chunk's
        // interior starts on (the test above), so on committed memory; the rest's
        // footer is the designated chunk's, in the segment. An ordinary segment's
        // header is found by masking.
        unsafe {
            let r = c.add(csize);
            raw::set_head(r, rest | PREV_IN_USE);
            raw::set_prev_foot(r.add(rest), rest);
            self.dv = r.as_ptr();
            self.dv_size = rest;
            raw::set_head(c, csize | IN_USE | (head & PREV_IN_USE));
            (*self.segment_of(c, 0)).live += 1;
            self.counters.live_bytes += csize - IN_USE_OVERHEAD;
            self.counters.live_blocks += 1;
            Some(raw::payload(c))
        }
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
    pub(super) unsafe fn carve_front(
        &mut self,
        pages: &impl PageOps,
        c: NonNull<u8>,
        found: usize,
        csize: usize,
    ) -> Option<NonNull<u8>> {
        let rest = found - csize;
        // SAFETY: `c` is a free chunk of `found` bytes in a live segment (the caller's
        // contract).
        let (head, kind, seg) = unsafe { self.head_and_segment(c) };
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

    /// Commits and at once decommits the first `bytes` (in whole pages) of the
    /// interior of each ordinary segment's last chunk, when it is free: the fresh
    /// free space of a segment (the designated chunk, or one listed when another
    /// took its place), whose pages were never committed. Through a commit cache they
    /// stay committed, kept, and the blocks cut there find them with no call to the
    /// source (pages the cache keeps already pass through it without one). Returns
    /// the bytes passed through: 0 with no such chunk, or when the source refuses.
    pub(crate) fn warm(&mut self, pages: &impl PageOps, bytes: usize) -> usize {
        let mut warmed = 0;
        let mut seg = self.segments;
        while let Some(s) = NonNull::new(seg) {
            // SAFETY: a live segment of the list: its header is readable, and so is
            // its end fence; the chunk before a fence whose `PREV_IN_USE` is clear is
            // free, its size in the fence's `prev_foot`.
            let (c, size) = unsafe {
                seg = (*s.as_ptr()).next;
                let Segment { size, kind, .. } = *s.as_ptr();
                if kind != Kind::Normal as usize {
                    continue;
                }
                let fence = s.cast::<u8>().add(size - FENCE);
                if raw::head(fence) & PREV_IN_USE != 0 {
                    continue;
                }
                let last = raw::prev_foot(fence);
                (fence.sub(last), last)
            };
            if !self.may_span_page(size) {
                continue;
            }
            let (lo, hi) = self.interior(c.addr().get(), size);
            let want = lo.saturating_add(bytes).saturating_add(self.page_mask) & !self.page_mask;
            let to = hi.min(want);
            if lo >= to {
                continue;
            }
            let len = to - lo;
            // SAFETY: `lo` lies in the chunk's interior, inside segment `s`: the
            // pointer keeps the segment's provenance.
            let ptr = unsafe { c.add(lo - c.addr().get()) };
            // SAFETY: a free chunk's interior in an ordinary segment: page-aligned and
            // decommitted (the invariant of `interior`); committed, it holds nothing
            // that is read before a carve commits it again, so it goes back at once,
            // and the space's stats never see it.
            unsafe {
                if !pages.commit(ptr, len) {
                    break;
                }
                pages.decommit(ptr, len);
            }
            warmed += len;
        }
        warmed
    }

    /// Chunk `c`'s head, its segment-kind bits and its segment's header.
    ///
    /// # Safety
    ///
    /// The caller must ensure `c` is a chunk of a live segment of this space.
    #[inline(always)]
    unsafe fn head_and_segment(&self, c: NonNull<u8>) -> (usize, usize, *mut Segment) {
        // SAFETY: the caller's contract: `c`'s head is readable.
        let head = unsafe { raw::head(c) };
        let kind = head & KIND_MASK;
        // SAFETY: as above, with `kind` its head's kind bits.
        (head, kind, unsafe { self.segment_of(c, kind) })
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
    pub(super) unsafe fn carve_out(
        &mut self,
        pages: &impl PageOps,
        c: NonNull<u8>,
        found: usize,
        lead: usize,
        csize: usize,
    ) -> Option<NonNull<u8>> {
        let rest = found - lead - csize;
        // SAFETY: `c` is a free chunk of `found` bytes in a live segment (the caller's
        // contract).
        let (head, kind, seg) = unsafe { self.head_and_segment(c) };
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
        // SAFETY: `block` is a chunk of a live segment.
        Some(unsafe { raw::payload(block) })
    }

    /// Where in the free chunk `c` a block whose payload `p` has `p + offset` aligned
    /// to `align` starts: 0 or at least a minimum chunk in.
    pub(crate) fn aligned_lead(c: NonNull<u8>, align: usize, offset: usize) -> usize {
        let p0 = c.addr().get() + PAYLOAD;
        let mut p = (p0 + offset).next_multiple_of(align) - offset;
        if p != p0 && p - p0 < MIN_CHUNK {
            p += align;
        }
        debug_assert!((p - p0).is_multiple_of(CHUNK_ALIGN));
        p - p0
    }

    /// Sets the block cache's room for the bytes in use now: once at the end of
    /// every call that may have changed them (all but the cache's own paths).
    #[inline]
    pub(crate) fn refit_cache(&mut self) {
        self.cache.refit(self.counters.live_bytes);
    }

    /// Whether the block cache holds any chunk.
    pub(crate) fn caches_any(&self) -> bool {
        self.cache.bytes != 0
    }

    /// Hands out a cached chunk for a request of chunk size `csize`, if its class
    /// holds one. Returns the payload. Touches the chunk's head and link words, the
    /// next cached chunk's back link and the segment's header, not the neighbours.
    /// `list` is `list_at_least(csize)`, the index's list whose chunks all hold
    /// `csize` bytes: the class, when the cache has one for it.
    #[inline]
    pub(crate) fn cache_take(&mut self, (fl, sl): (usize, usize)) -> Option<NonNull<u8>> {
        if self.cache.bytes == 0 {
            return None;
        }
        let k = block_cache::class_at(fl, sl)?;
        let c = self.cache.pop(k)?;
        // SAFETY: a chunk just out of the cache is an in-use chunk of a live ordinary
        // or base segment, which counts it in `cached`.
        unsafe {
            (*self.segment_at(c)).cached -= 1;
            Some(raw::payload(c))
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
}
