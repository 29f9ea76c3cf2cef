//! Freeing: the block cache, merging with free neighbours through the boundary tags,
//! decommitting the merged interior, and giving an empty segment back.

use core::ptr::{self, NonNull};

use crate::block_cache;
use crate::chunk::flags::{BASE, DEDICATED, IN_USE, PREV_IN_USE};
use crate::chunk::{FENCE, HEADER, IN_USE_OVERHEAD, Kind, Segment, raw};
use crate::engine::{Core, Freed, KIND_MASK, Left, PageOps};

impl Core {
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

    /// [`adopt`](Self::adopt) for a pointer known to be a block's payload.
    ///
    /// # Safety
    ///
    /// The caller must ensure `payload` is the payload of a chunk of a live segment
    /// of this space.
    #[inline]
    pub(crate) unsafe fn adopt_block(&self, payload: NonNull<u8>) -> NonNull<u8> {
        if cfg!(miri) {
            self.adopt(payload)
        } else {
            // SAFETY: the caller's contract.
            unsafe { raw::block_chunk(payload) }
        }
    }

    /// The header of the ordinary or base segment chunk `c` lies in, from its
    /// address alone.
    ///
    /// # Safety
    ///
    /// The caller must ensure `c` is a chunk of a live segment of this space that is
    /// not dedicated.
    #[inline]
    pub(super) unsafe fn segment_at(&self, c: NonNull<u8>) -> *mut Segment {
        if c.addr().get().wrapping_sub(self.base_range.0) < self.base_range.1 {
            self.base
        } else {
            c.as_ptr().map_addr(|a| a & !self.granularity_mask).cast()
        }
    }

    /// Puts the block of in-use chunk `c` (of segment `seg`, its head `head`) in the
    /// block cache when the cache has room and the segment keeps another block in
    /// use (or is the base segment, which is never released). True when it did.
    ///
    /// # Safety
    ///
    /// The caller must ensure `c` is an in-use chunk of segment `seg`, live, not
    /// dedicated, of this space, and not cached, `head` its head, and `own` a pointer
    /// to it that may write its payload.
    #[inline]
    pub(super) unsafe fn try_cache(
        &mut self,
        c: NonNull<u8>,
        own: NonNull<u8>,
        seg: *mut Segment,
        head: usize,
    ) -> bool {
        let Some(k) = block_cache::class_of(raw::size(head)) else {
            return false;
        };
        // SAFETY: `seg` is a live segment header and `c` an in-use chunk whose head's
        // size is of at least class `k`'s (the caller's contract).
        unsafe {
            let others = (*seg).live - (*seg).cached > 1 || seg == self.base;
            if !others || !self.cache.has_room(k) {
                return false;
            }
            self.cache.push(k, c, own, head);
            (*seg).cached += 1;
        }
        true
    }

    /// Frees the block of in-use chunk `c` into the block cache, when the cache has
    /// room and the block's segment keeps another block in use. True when it did;
    /// otherwise nothing changed and [`free_uncached`](Self::free_uncached) frees it.
    /// `c`'s payload words are written through `own` (see [`adopt`](Self::adopt)).
    ///
    /// # Safety
    ///
    /// The caller must ensure `c` is an in-use chunk of a live segment of this space,
    /// not cached, and `own` a pointer to the same chunk that may write its payload.
    #[inline]
    pub(crate) unsafe fn cache_free(&mut self, c: NonNull<u8>, own: NonNull<u8>) -> bool {
        // SAFETY: `c` is an in-use chunk of a live segment (the caller's contract).
        unsafe {
            let head = raw::head(c);
            let kind = head & KIND_MASK;
            kind & DEDICATED == 0 && self.try_cache(c, own, self.segment_of(c, kind), head)
        }
    }

    /// Frees the block of in-use chunk `c`, which the block cache did not take:
    /// through [`free_chunk`](Self::free_chunk), or, when `c` is the segment's last
    /// block in use but for cached ones, through
    /// [`free_emptying`](Self::free_emptying), so that the segment empties, and goes
    /// back, in this call. `c`'s payload words are written through `own` (see
    /// [`adopt`](Self::adopt)).
    ///
    /// # Safety
    ///
    /// The caller must ensure `c` is an in-use chunk of a live segment of this space,
    /// not cached, and `own` a pointer to the same chunk that may write its payload.
    #[inline]
    pub(crate) unsafe fn free_uncached(
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
    /// read: see [`Left::HeadRun`]), and unlinks the segment for the caller to
    /// release.
    /// Nothing merges and no tag changes.
    ///
    /// # Safety
    ///
    /// The caller must ensure `seg` is a live ordinary segment of this space whose
    /// in-use chunks are `c` (not cached) and `seg.cached` cached ones.
    #[cold]
    #[inline(never)]
    pub(super) unsafe fn free_emptying(
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
                        let k = block_cache::class_of(size).expect("a cached chunk has a class");
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
                "segment {seg:p}: committed stat"
            );
            (*seg).live = 0;
            (*seg).cached = 0;
            self.unlink_segment(seg, Left::HeadRun(head_run))
        }
    }

    /// Takes every chunk out of the cache and frees it for good (merging it with its
    /// neighbours). No segment empties: each keeps a block in use that is not cached
    /// (the invariant of `Segment::cached`), or is the base segment.
    #[cold]
    #[inline(never)]
    pub(crate) fn drain(&mut self, pages: &impl PageOps) {
        for k in 0..block_cache::CLASSES {
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
                    if let Freed::Release(seg, left) = freed {
                        pages.release(self, seg, left);
                    }
                }
            }
        }
        self.refit_cache();
    }

    /// Frees the in-use chunk `c`: merges it with free neighbours, decommits the
    /// pages that are now wholly inside free space, and lists the result; or, when
    /// that empties the segment, unlinks the segment for the caller to release.
    ///
    /// In steps: the counts; a dedicated segment or the last chunk of an ordinary one
    /// goes whole; otherwise the chunk merges with the free one below it
    /// ([`merge_below`](Self::merge_below), which takes the one above too when free),
    /// or with the one above alone ([`merge_above`](Self::merge_above)), or is listed
    /// alone ([`list_alone`](Self::list_alone)); then the merged chunk's footer and
    /// its neighbour's head are written ([`close`](Self::close)), and its interior
    /// pages are decommitted ([`decommit_merged`](Self::decommit_merged)).
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
            return unsafe { self.unlink_segment(seg, Left::RUNS) };
        }
        if live == 0 && kind & BASE == 0 {
            // SAFETY: `c` was the last chunk in use of the ordinary segment `seg`.
            return unsafe { self.free_last(seg, c, own, head) };
        }
        // SAFETY: the chunk after `c` is a chunk of the same segment or its end fence
        // (the fence follows the last chunk), its head committed.
        let next = unsafe { Above::of(c, size) };
        // SAFETY: `c` is an in-use chunk of `head`, `next` the chunk after it, and
        // `own` may write its payload (the caller's contract).
        let merged = unsafe {
            if head & PREV_IN_USE == 0 {
                self.merge_below(c, head, &next)
            } else if next.free {
                self.merge_above(c, own, head, &next)
            } else {
                self.list_alone(c, own, head)
            }
        };
        // SAFETY: as above; `merged` is what the merge made of `c`.
        unsafe { self.close(&merged, own, size, &next) };
        if kind == 0 {
            // SAFETY: `merged` is a free chunk of the ordinary segment `seg`.
            unsafe { self.decommit_merged(pages, seg, &merged, &next) };
        }
        Freed::Kept
    }

    /// The merge below: `c` (of head `head`) joins the free chunk before it, and the
    /// free chunk after it (`next`) too when there is one. The chunk before keeps its
    /// list place, or takes the designated one when `next` held it.
    ///
    /// # Safety
    ///
    /// `c` is an in-use chunk whose `PREV_IN_USE` is clear, `next` the chunk after it.
    #[inline(always)]
    unsafe fn merge_below(&mut self, c: NonNull<u8>, head: usize, next: &Above) -> Merged {
        let kind = head & KIND_MASK;
        // SAFETY: PREV_IN_USE clear means a free chunk before `c` in its segment (the
        // first chunk always has the bit), whose size is `c`'s `prev_foot` (its
        // footer) and whose head lies outside its interior.
        let (prev, prev_size) = unsafe {
            let prev_size = raw::prev_foot(c);
            (c.sub(prev_size), prev_size)
        };
        let mut total = prev_size + raw::size(head);
        let mut next_was_dv = false;
        if next.free {
            next_was_dv = next.at.as_ptr() == self.dv;
            // SAFETY: a free chunk is listed or designated.
            unsafe { self.unlist(next.at, next.size) };
            total += next.size;
        }
        // SAFETY: `prev`'s head, committed; `prev` is listed with `prev_size` bytes
        // unless designated, and now holds `total`. `c`'s own head, now inside the
        // merged chunk, says free: a second free of `c` is told apart.
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
        Merged {
            start: prev,
            total,
            // The previous chunk's interior pages are decommitted already.
            from: c.addr().get() & !self.page_mask,
        }
    }

    /// The merge above alone: `c` (of head `head`, the chunk before it in use) joins
    /// the free chunk after it, `next`, and takes its list place.
    ///
    /// # Safety
    ///
    /// `c` is an in-use chunk whose `PREV_IN_USE` is set, `next` the free chunk after
    /// it, and `own` may write `c`'s payload.
    #[inline(always)]
    unsafe fn merge_above(
        &mut self,
        c: NonNull<u8>,
        own: NonNull<u8>,
        head: usize,
        next: &Above,
    ) -> Merged {
        let total = raw::size(head) + next.size;
        // SAFETY: `c`'s head is its own; `next` is listed with `next.size` bytes
        // unless designated, and `c` (in no list) takes its place.
        unsafe {
            raw::set_head(c, total | PREV_IN_USE | (head & KIND_MASK));
            if next.at.as_ptr() == self.dv {
                self.dv = c.as_ptr();
                self.dv_size = total;
            } else {
                self.index.replace_own(next.at, next.size, c, own, total);
            }
        }
        Merged {
            start: c,
            total,
            from: 0,
        }
    }

    /// No merge: `c` (of head `head`, both neighbours in use) is listed as it is.
    ///
    /// # Safety
    ///
    /// `c` is an in-use chunk whose neighbours are in use, and `own` may write its
    /// payload.
    #[inline(always)]
    unsafe fn list_alone(&mut self, c: NonNull<u8>, own: NonNull<u8>, head: usize) -> Merged {
        let size = raw::size(head);
        // SAFETY: `c` is now a free chunk of `size` bytes, in no list.
        unsafe {
            raw::set_head(c, size | PREV_IN_USE | (head & KIND_MASK));
            self.index.insert_own(c, own, size);
        }
        Merged {
            start: c,
            total: size,
            from: 0,
        }
    }

    /// Writes the merged chunk's footer (the `prev_foot` of the chunk after it) and,
    /// when `next` stays a chunk of its own, clears its `PREV_IN_USE`.
    ///
    /// # Safety
    ///
    /// `merged` is what a merge made of the chunk `c` of `size` bytes that `own`
    /// points at (and may write), `next` the chunk that followed `c`.
    #[inline(always)]
    unsafe fn close(&self, merged: &Merged, own: NonNull<u8>, size: usize, next: &Above) {
        // SAFETY: `next`'s head (when it stays a chunk of its own) and the merged
        // chunk's footer lie outside every free interior, committed; the footer is
        // `c`'s last payload word (so written through `own`) unless `next` merged.
        unsafe {
            if next.free {
                raw::set_prev_foot(merged.start.add(merged.total), merged.total);
            } else {
                raw::set_head(next.at, next.head & !PREV_IN_USE);
                raw::set_prev_foot(own.add(size), merged.total);
            }
        }
    }

    /// Decommits the merged chunk's interior pages that were committed: those
    /// between the interiors of the free neighbours it took in (decommitted
    /// already).
    ///
    /// # Safety
    ///
    /// `merged` is a free chunk of the live ordinary segment `seg`, just merged from
    /// a chunk whose next neighbour was `next`.
    #[inline(always)]
    unsafe fn decommit_merged(
        &mut self,
        pages: &impl PageOps,
        seg: *mut Segment,
        merged: &Merged,
        next: &Above,
    ) {
        if !self.may_span_page(merged.total) {
            return;
        }
        // The next chunk's interior pages are decommitted already.
        let to = if next.free {
            self.interior(next.at.addr().get(), next.size).0
        } else {
            usize::MAX
        };
        let (lo, hi) = self.interior(merged.start.addr().get(), merged.total);
        let (lo, hi) = (lo.max(merged.from), hi.min(to));
        if lo < hi {
            // SAFETY: `[lo, hi)` is the merged chunk's interior less what was
            // decommitted already: committed pages of `seg` that hold nothing.
            unsafe { self.decommit_range(pages, seg, lo, hi) };
        }
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
    pub(super) unsafe fn free_last(
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
            self.unlink_segment(seg, Left::Runs { pending: (lo, hi) })
        }
    }

    /// Takes `seg` out of the segment list and its bytes out of the stats, for the
    /// caller to release with `left` of it still committed.
    ///
    /// # Safety
    ///
    /// The caller must ensure `seg` is a live, non-base segment of this space, empty
    /// (no chunk of it in use or in the index), and release it before anything else
    /// touches the space.
    #[cold]
    pub(crate) unsafe fn unlink_segment(&mut self, seg: *mut Segment, left: Left) -> Freed {
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
            self.cache.refit(self.counters.live_bytes);
            Freed::Release(NonNull::new_unchecked(seg), left)
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
        self.cache.refit(c.live_bytes);
        c.overhead += HEADER + FENCE;
        seg
    }
}

/// The chunk after a chunk being freed: where it is, its head, and what it says.
struct Above {
    at: NonNull<u8>,
    head: usize,
    size: usize,
    free: bool,
}

impl Above {
    /// The chunk after chunk `c` of `size` bytes.
    ///
    /// # Safety
    ///
    /// `c` is a chunk of `size` bytes of a live segment: the chunk after it (or the
    /// end fence) has its head committed.
    #[inline(always)]
    unsafe fn of(c: NonNull<u8>, size: usize) -> Self {
        // SAFETY: the caller's contract.
        let (at, head) = unsafe {
            let at = c.add(size);
            (at, raw::head(at))
        };
        Self {
            at,
            head,
            size: raw::size(head),
            free: head & IN_USE == 0,
        }
    }
}

/// What a merge made of a freed chunk: the free chunk at `start` of `total` bytes;
/// its interior pages below `from` are decommitted already (0: none).
struct Merged {
    start: NonNull<u8>,
    total: usize,
    from: usize,
}
