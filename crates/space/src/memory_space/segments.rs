//! Segments in and out of a space: reserving and carving fresh segments, dedicated
//! segments, and giving empty ones back through the commit cache.

use core::ptr::NonNull;

use bento_align::Alignment;
use bento_pages::{PageError, PageSource};

use crate::AllocError;
use crate::chunk::{
    CHUNK_ALIGN, FENCE, Kind, MAX_SEGMENT, MIN_CHUNK, Segment, chunk_size_for, raw,
};
use crate::engine::{Core, Freed, Left, PageOps, dedicated_chunk_offset};
use crate::index::list_at_least;
use crate::memory_space::{Entered, MemorySpace, Source, State};

use crate::config::commit_cache_limit;

/// Sets the commit cache's limit for a space of `reserved` bytes (see
/// [`commit_cache_limit`]); called whenever a segment comes or goes.
fn fit_commit_cache<P: PageSource>(pages: &Source<P>, reserved: usize, granularity: usize) {
    pages.set_limit(commit_cache_limit(reserved, granularity));
}

/// The page calls of the core, through the cache.
impl<P: PageSource> PageOps for Option<&Source<P>> {
    unsafe fn release(&self, core: &Core, seg: NonNull<Segment>, left: Left) {
        // SAFETY: the caller's contract: `core` unlinked `seg`, of which `left` is
        // still committed.
        unsafe { release_segment(core, *self, seg, left) }
    }

    #[inline]
    unsafe fn commit(&self, ptr: NonNull<u8>, len: usize) -> bool {
        // Ordinary segments exist only with a source.
        // SAFETY: the caller's contract is `commit`'s.
        self.is_some_and(|p| unsafe { p.commit(ptr, len) }.is_ok())
    }

    #[inline]
    unsafe fn decommit(&self, ptr: NonNull<u8>, len: usize) {
        if let Some(p) = self {
            // SAFETY: the caller's contract is `decommit`'s.
            unsafe { p.decommit(ptr, len) }
        }
    }
}

impl<'a, P: PageSource> Entered<'a, P> {
    /// The space's source (through its cache), for the core's page calls.
    #[inline]
    pub(super) fn source(&self) -> Option<&'a Source<P>> {
        let space: &'a MemorySpace<P> = self.space;
        space.pages.as_ref()
    }

    /// The allocation path: `size > 0`, `align` a power of two, `offset < align` a
    /// multiple of 16 when `align > 16` (0 otherwise). A block the block cache holds,
    /// or one cut from the designated chunk's committed front, comes out here,
    /// inline; everything else goes through
    /// [`alloc_uncached`](Self::alloc_uncached), out of line, so that the cache's
    /// path saves no register it does not use.
    #[inline]
    pub(super) fn alloc(
        &mut self,
        size: usize,
        align: usize,
        offset: usize,
    ) -> Result<NonNull<u8>, AllocError> {
        if align <= CHUNK_ALIGN
            && let Some(csize) = chunk_size_for(size)
            && !self.core.wants_dedicated(size, csize)
        {
            let list = list_at_least(csize);
            if let Some(p) = self.core.cache_take(list) {
                return Ok(p);
            }
            if let Some(p) = self.core.dv_cut(csize) {
                return Ok(p);
            }
            return self.alloc_listed(csize, list);
        }
        self.alloc_uncached(size, align, offset)
    }

    /// [`alloc`](Self::alloc) of a chunk of `csize` bytes that goes anywhere, in an
    /// ordinary segment, past the block cache: as
    /// [`alloc_uncached`](Self::alloc_uncached), with `list`, `list_at_least(csize)`,
    /// as the fast path found it.
    #[inline(never)]
    fn alloc_listed(
        &mut self,
        csize: usize,
        list: (usize, usize),
    ) -> Result<NonNull<u8>, AllocError> {
        match self.carve(csize, csize, None, list) {
            Err(AllocError) if self.core.caches_any() => {
                let pages = self.source();
                self.core.drain(&pages);
                self.carve(csize, csize, None, list)
            }
            done => done,
        }
    }

    /// [`alloc`](Self::alloc) past the block cache. When the source refuses memory,
    /// the block cache's chunks are freed for good (their free pages go back through
    /// the commit cache, which gives them up to the source) and the request is made
    /// once more: in fixed memory, blocks kept for reuse never make an allocation
    /// fail.
    #[inline(never)]
    fn alloc_uncached(
        &mut self,
        size: usize,
        align: usize,
        offset: usize,
    ) -> Result<NonNull<u8>, AllocError> {
        match self.alloc_once(size, align, offset) {
            Err(AllocError) if self.core.caches_any() => self.alloc_drained(size, align, offset),
            done => done,
        }
    }

    /// [`alloc_uncached`](Self::alloc_uncached) again with the block cache drained.
    #[cold]
    #[inline(never)]
    fn alloc_drained(
        &mut self,
        size: usize,
        align: usize,
        offset: usize,
    ) -> Result<NonNull<u8>, AllocError> {
        let pages = self.source();
        self.core.drain(&pages);
        self.alloc_once(size, align, offset)
    }

    /// One try of [`alloc_uncached`](Self::alloc_uncached): from the index, the
    /// designated chunk, a new segment or a dedicated one (the block cache had no
    /// chunk of the request's class, or the request is not one it serves).
    #[inline(always)]
    fn alloc_once(
        &mut self,
        size: usize,
        align: usize,
        offset: usize,
    ) -> Result<NonNull<u8>, AllocError> {
        let csize = chunk_size_for(size).ok_or(AllocError)?;
        if align <= CHUNK_ALIGN {
            if self.core.wants_dedicated(size, csize) {
                return self.alloc_dedicated(size, align, 0);
            }
            return self.carve(csize, csize, None, list_at_least(csize));
        }
        self.alloc_aligned(size, csize, align, offset)
    }

    #[cold]
    pub(super) fn alloc_aligned(
        &mut self,
        size: usize,
        csize: usize,
        align: usize,
        offset: usize,
    ) -> Result<NonNull<u8>, AllocError> {
        let need = csize
            .checked_add(align)
            .and_then(|n| n.checked_add(MIN_CHUNK))
            .ok_or(AllocError)?;
        if self.core.wants_dedicated(size, need) {
            return self.alloc_dedicated(size, align, offset);
        }
        // `align > 16` and `offset` a multiple of 16 (the callers' contract), so the
        // lead is 0 or a chunk of at least the minimum, and fits: `need` leaves room
        // for a lead of up to `align + MIN_CHUNK - 16`.
        self.carve(need, csize, Some((align, offset)), list_at_least(need))
    }

    /// Takes a free chunk of at least `need` bytes (from the index, the designated
    /// chunk, or a new segment) and hands out a block of `csize` bytes in it:
    /// anywhere, or, for `aligned = Some((align, offset))`, where its payload plus
    /// `offset` is aligned to `align`. `list` is `list_at_least(need)`.
    #[inline(always)]
    pub(super) fn carve(
        &mut self,
        need: usize,
        csize: usize,
        aligned: Option<(usize, usize)>,
        list: (usize, usize),
    ) -> Result<NonNull<u8>, AllocError> {
        let pages = self.source();
        let lead = |c| aligned.map(|(align, offset)| Core::aligned_lead(c, align, offset));
        if let Some((c, found)) = self.core.find_from(need, list) {
            // SAFETY: a listed free chunk of at least `need >= lead + csize` bytes.
            return unsafe { self.core.carve(&pages, c, found, lead(c), csize) }.ok_or(AllocError);
        }
        if !self.core.designated().0.is_null() {
            // What no listed chunk fits comes from the designated chunk: cut from its
            // front when the block may go anywhere, else through the index.
            if aligned.is_none() {
                return self
                    .core
                    .dv_take(&pages, csize)
                    .map_or_else(|| self.carve_fresh(need, csize, aligned), Ok);
            }
            self.core.release_dv();
            if let Some((c, found)) = self.core.find(need) {
                // SAFETY: as above.
                return unsafe { self.core.carve(&pages, c, found, lead(c), csize) }
                    .ok_or(AllocError);
            }
        }
        self.carve_fresh(need, csize, aligned)
    }

    /// [`carve`](Self::carve) from a new segment, whose free chunk becomes the
    /// designated one for a block that may go anywhere; gives the segment back when
    /// the source refuses to commit what the block needs.
    #[cold]
    #[inline(never)]
    pub(super) fn carve_fresh(
        &mut self,
        need: usize,
        csize: usize,
        aligned: Option<(usize, usize)>,
    ) -> Result<NonNull<u8>, AllocError> {
        let pages = self.source();
        let peaks = self.core.peaks();
        let (c, found) = self.add_segment().map_err(|_| AllocError)?;
        debug_assert!(found >= need);
        // SAFETY: the new segment's one free chunk, in no list: designated, or listed
        // for an aligned block.
        unsafe {
            match aligned {
                None => {
                    self.core.designate(c, found);
                    if let Some(p) = self.core.dv_take(&pages, csize) {
                        return Ok(p);
                    }
                    self.core.unlist(c, found);
                }
                Some((align, offset)) => {
                    self.core.list(c, found);
                    let lead = Core::aligned_lead(c, align, offset);
                    if let Some(p) = self.core.carve(&pages, c, found, Some(lead), csize) {
                        return Ok(p);
                    }
                    self.core.unlist(c, found);
                }
            }
        }
        // SAFETY: the segment was just made and holds no block; the refused commit
        // left its one chunk as it was, now in no list: unlink the segment and give it
        // back.
        unsafe {
            let seg = self.core.segment_of(c, 0);
            if let Freed::Release(seg, left) = self.core.unlink_segment(seg, Left::RUNS) {
                release_segment(&self.core, pages, seg, left);
            }
        }
        // A failed allocation changes no stat, peaks included.
        self.core.restore_peaks(peaks);
        Err(AllocError)
    }

    /// Frees the block at `payload`, releasing its segment if that empties it. Into
    /// the block cache inline, when it takes the block; everything else out of line
    /// (see [`alloc`](Self::alloc)).
    ///
    /// # Safety
    ///
    /// `payload` is a live block of this space.
    #[inline]
    pub(super) unsafe fn free(&mut self, payload: NonNull<u8>) {
        // SAFETY: the caller's contract; `c` and the caller's own view of the chunk.
        unsafe {
            let c = self.core.adopt_block(payload);
            let own = raw::block_chunk(payload);
            if !self.core.cache_free(c, own) {
                self.free_uncached(c, own);
            }
        }
    }

    /// [`free`](Self::free) of a block the block cache did not take.
    ///
    /// # Safety
    ///
    /// `c` is an in-use chunk of this space, not cached, and `own` the caller's
    /// pointer to it (see `Core::adopt`).
    #[inline(never)]
    unsafe fn free_uncached(&mut self, c: NonNull<u8>, own: NonNull<u8>) {
        let pages = self.source();
        // SAFETY: the caller's contract.
        let freed = unsafe { self.core.free_uncached(&pages, c, own) };
        self.core.refit_cache();
        if let Freed::Release(seg, left) = freed {
            // SAFETY: `free_uncached` unlinked the empty segment for us to release.
            unsafe { pages.release(&self.core, seg, left) };
        }
    }

    /// Resizes the block at `payload` in place (see `Core::resize_in_place`).
    ///
    /// # Safety
    ///
    /// `payload` is a live block of this space.
    pub(super) unsafe fn resize_in_place(&mut self, payload: NonNull<u8>, new_size: usize) -> bool {
        let pages = self.source();
        let c = self.core.adopt(payload);
        // SAFETY: the caller's contract.
        let done = unsafe { self.core.resize_in_place(&pages, c, new_size) };
        self.core.refit_cache();
        done
    }

    /// Reserves an ordinary segment, commits its header page and the page of its end
    /// fence, and returns its one free chunk (in no list) with its size.
    #[cold]
    #[inline(never)]
    pub(super) fn add_segment(&mut self) -> Result<(NonNull<u8>, usize), PageError> {
        let size = self.config.segment_granularity;
        let align = Alignment::new(size).expect("the granularity is a power of two");
        let pages = self.source().ok_or(PageError::OutOfAddressSpace { size })?;
        let base = pages.reserve(size, align)?;
        let (lo, hi) = self.core.fresh_interior(base.addr().get(), size);
        // The runs outside the chunk's interior: `[0, lo)` and `[hi, size)`, or the
        // whole segment when the interior is empty (`lo == hi == 0`).
        let runs = [(0, lo), (hi, size)];
        for (i, &(from, to)) in runs.iter().enumerate() {
            if from == to {
                continue;
            }
            // SAFETY: page-aligned runs (the configured page is a multiple of the
            // source's) of the reservation just made, not yet committed.
            let result = unsafe { pages.commit(base.add(from), to - from) };
            if let Err(e) = result {
                // SAFETY: the runs committed before this one, then the reservation.
                unsafe {
                    for &(f, t) in &runs[..i] {
                        if f != t {
                            pages.decommit(base.add(f), t - f);
                        }
                    }
                    pages.release(base, size);
                }
                return Err(e);
            }
        }
        // SAFETY: `size` fresh bytes at a granularity-aligned base, which holds a
        // header, a chunk and the fence (`SpaceConfig::check`), committed but for the
        // chunk's interior.
        let area = unsafe {
            let seg = self
                .core
                .link_segment(base, size, size - (hi - lo), Kind::Normal);
            self.core.init_area(seg)
        };
        fit_commit_cache(
            pages,
            self.core.counters().reserved,
            self.config.segment_granularity,
        );
        Ok(area)
    }

    /// A segment of its own for a request of `size` bytes whose payload plus
    /// `offset` is aligned to `align`.
    #[cold]
    #[inline(never)]
    pub(super) fn alloc_dedicated(
        &mut self,
        size: usize,
        align: usize,
        offset: usize,
    ) -> Result<NonNull<u8>, AllocError> {
        let chunk_offset =
            dedicated_chunk_offset(align.max(CHUNK_ALIGN), offset).ok_or(AllocError)?;
        let csize = chunk_size_for(size).ok_or(AllocError)?;
        let total = chunk_offset
            .checked_add(csize)
            .and_then(|t| t.checked_add(FENCE))
            .and_then(|t| t.checked_next_multiple_of(self.source_page))
            .filter(|&t| t <= MAX_SEGMENT)
            .ok_or(AllocError)?;
        let align = Alignment::new(align).expect("Layout alignments are powers of two");
        let pages = self.source().ok_or(AllocError)?;
        let base = pages.reserve(total, align).map_err(|_| AllocError)?;
        // SAFETY: the whole of a fresh reservation of `total` bytes (a multiple of the
        // source's page); on failure nothing is committed, so it is released whole.
        unsafe {
            if pages.commit(base, total).is_err() {
                pages.release(base, total);
                return Err(AllocError);
            }
        }
        // SAFETY: `total` fresh committed bytes aligned to `align` (so the payload
        // `chunk_offset + 16` in meets `align` and `offset`), holding the header, the
        // chunk and the fence.
        let payload = unsafe {
            let seg = self.core.link_segment(base, total, total, Kind::Dedicated);
            self.core.install_dedicated(seg, chunk_offset)
        };
        fit_commit_cache(
            pages,
            self.core.counters().reserved,
            self.config.segment_granularity,
        );
        Ok(payload)
    }
}

/// What a released segment's header says of its kind: none.
const RETIRED: usize = usize::MAX;

/// Gives an unlinked, empty (or torn down) segment back to the source: decommits
/// what `left` says is still committed of it (its committed runs and a pending
/// range, or its head run alone: see [`Left`]), then releases it through the cache. An ordinary segment's pages go through the cache, which
/// parks them and may keep the whole reservation as a spare for the next segment, so
/// that a space which empties and fills again makes no system call; a dedicated
/// segment's pages are decommitted directly in the source under the cache (parking a
/// large block's pages would push every other parked page out).
///
/// # Safety
///
/// `seg` was unlinked by `Core::free_chunk`, `Core::free_emptying` or
/// `Core::unlink_segment` (or is being torn down), has intact tags, and is not the
/// base segment, so it came from `pages`; `left` is what the core returned with it.
#[cold]
unsafe fn release_segment<P: PageSource>(
    core: &Core,
    pages: Option<&Source<P>>,
    seg: NonNull<Segment>,
    left: Left,
) {
    let pages = pages.expect("a segment that is not the base came from the source");
    // SAFETY: the header is still readable: nothing released it yet.
    let (size, committed, kind) = unsafe {
        let s = seg.as_ptr();
        ((*s).size, (*s).committed, (*s).kind)
    };
    // Before its first page is decommitted (after which it may read as anything the
    // source leaves), the header stops naming a kind: a stale pointer into a segment
    // parked in a commit cache never passes for a dedicated block's
    // (`MemorySpace::probe`).
    // SAFETY: the header is readable and writable until its run is decommitted.
    let retire = || unsafe { (*seg.as_ptr()).kind = RETIRED };
    // A dedicated segment's pages bypass an eager cache: keeping a large block
    // would push every other kept page out. A decaying one keeps them.
    let through_cache = kind == Kind::Normal as usize || !pages.retention().is_eager();
    let decommit = |ptr: NonNull<u8>, len: usize| {
        // SAFETY: the callers below pass committed, unused runs of the segment, a
        // live reservation of `pages` (and so of the source under it: a page
        // committed through the cache is committed below it).
        unsafe {
            if through_cache {
                pages.decommit(ptr, len);
            } else {
                pages.inner().decommit(ptr, len);
            }
        }
    };
    let base = seg.cast::<u8>();
    let mut decommitted = 0;
    let (pending, head_run) = match left {
        Left::Runs { pending } => (pending, 0),
        Left::HeadRun(bytes) => ((0, 0), bytes),
    };
    if pending.0 < pending.1 {
        let at = pending.0 - base.addr().get();
        // SAFETY: committed pages of the segment inside its free chunk's interior,
        // which the walk below does not read.
        decommit(unsafe { base.add(at) }, pending.1 - pending.0);
        decommitted += pending.1 - pending.0;
    }
    // SAFETY: the caller's contract; each run is committed and nothing of the segment
    // is used again: the walk copies the header first and never reads a run again
    // once it has handed it to the closure. With `head_run`, the emptying walk gave
    // back everything else already.
    unsafe {
        if head_run != 0 {
            retire();
            decommit(base, head_run);
            decommitted += head_run;
        } else {
            // The walk reads the header before it hands out the first run.
            let mut first = true;
            core.committed_runs(seg, |lo, hi| {
                if first {
                    retire();
                    first = false;
                }
                decommit(base.add(lo), hi - lo);
                decommitted += hi - lo;
            });
        }
        debug_assert_eq!(decommitted, committed, "segment {seg:p}: committed stat");
        pages.release(base, size);
    }
    fit_commit_cache(pages, core.counters().reserved, core.granularity());
}

impl<P: PageSource> Drop for MemorySpace<P> {
    fn drop(&mut self) {
        release_all(self.state.get_mut(), self.pages.as_ref());
    }
}

/// Releases every segment but the base one; returns the bytes released. The space is
/// left with only its base segment (if any) and must not allocate again.
pub(super) fn release_all<P: PageSource>(state: &mut State, pages: Option<&Source<P>>) -> usize {
    let core = &mut state.core;
    let mut released = 0;
    let mut seg = core.first_segment();
    while let Some(s) = NonNull::new(seg) {
        // SAFETY: a live segment header on the list.
        let (next, size) = unsafe { ((*s.as_ptr()).next, (*s.as_ptr()).size) };
        if s.as_ptr() != core.base() {
            released += size;
            // SAFETY: a segment of this space that is not the base; the list is
            // rebuilt below, so it is not reached again.
            unsafe { release_segment(core, pages, s, Left::RUNS) };
        }
        seg = next;
    }
    // SAFETY: every other segment went back above; the caller does not allocate
    // again.
    unsafe { core.keep_only_base() };
    released
}
