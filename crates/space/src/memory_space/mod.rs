//! [`MemorySpace`]: the page-source side over [`Core`]: the API here, segments in and
//! out in [`segments`], stats, trimming and the frame tick in [`upkeep`].

mod segments;
mod upkeep;

use core::alloc::Layout;
use core::cell::UnsafeCell;
use core::fmt;
use core::ptr::NonNull;

use bento_pages::{CommitCache, Metered, PageSource, RawAlloc};

use crate::chunk::{CHUNK_ALIGN, FENCE, HEADER, MAX_SEGMENT, MIN_CHUNK};
use crate::config::{SpaceConfig, SpaceError};
use crate::engine::{Core, Fault};
use crate::{AllocError, Misuse, panic_on_misuse};

/// A dsmalloc-style general allocator over a [`PageSource`].
///
/// Memory comes from the source in **segments**: ordinary ones of
/// `segment_granularity` bytes, and a dedicated one for each request of at least
/// `segment_threshold` bytes. Segments are never merged with each other, and the free
/// that leaves a segment empty gives it back to the source in the same call, in O(1).
/// Inside a segment, blocks are boundary-tagged chunks (8 bytes of overhead each, 16-byte
/// aligned); free chunks merge with their neighbours at once and are found again in
/// O(1) through a two-level bitmap index. See the crate documentation for the layout.
///
/// A space is for one thread at a time: it is `Send` but not `Sync`, and `&MemorySpace`
/// is an allocator-api2 `Allocator`. [`LockedSpace`](crate::LockedSpace) shares one
/// between threads.
///
/// ```
/// use core::alloc::Layout;
/// use bento_pages::SystemPages;
/// use bento_space::{MemorySpace, SpaceConfig};
///
/// let space = MemorySpace::new(SystemPages::new(), SpaceConfig::DEFAULT).unwrap();
/// let p = space.alloc(Layout::from_size_align(100, 8).unwrap()).unwrap();
/// // SAFETY: `p` is a live block of 100 bytes from `space`.
/// unsafe {
///     p.as_ptr().write_bytes(7, 100);
///     assert!(space.usable_size(p) >= 100);
///     space.free(p);
/// }
/// assert_eq!(space.stats().segments, 0); // the empty segment went straight back
/// ```
pub struct MemorySpace<P: PageSource> {
    // Invariant: only reached through `enter` (or `&mut self`), so at most one `&mut` exists at a time
    // (checked in debug builds by `busy`; in release builds, guaranteed because the
    // space is not `Sync`, no method calls out to code that can re-enter it (the page
    // source must not, by its contract; the misuse hook must not, by its docs), and
    // no `&mut` outlives the method that made it).
    state: UnsafeCell<State>,
    pages: Option<Source<P>>,
    #[cfg(debug_assertions)]
    busy: core::cell::Cell<bool>,
}

/// The space's source as it calls it: the configured commit cache over the caller's
/// source, counted below the cache so that `stats()` shows the calls that got through.
pub(crate) type Source<P> = CommitCache<Metered<P>>;

/// What a space changes as it works (the source sits beside it, used through `&P`).
pub(crate) struct State {
    pub(crate) core: Core,
    config: SpaceConfig,
    /// The source's page size: what dedicated segments are rounded to.
    source_page: usize,
    /// What the source had committed before the space made its first segment: the
    /// commit cache's slot table.
    table_bytes: usize,
}

// SAFETY: the space owns its segments (raw pointers into memory only it reaches), so
// moving it to another thread moves that ownership; the source moves with it.
unsafe impl<P: PageSource + Send> Send for MemorySpace<P> {}

/// The exclusive access of one method call (see `MemorySpace::enter`).
pub(crate) struct Entered<'a, P: PageSource> {
    space: &'a MemorySpace<P>,
}

impl<P: PageSource> core::ops::Deref for Entered<'_, P> {
    type Target = State;

    #[inline]
    fn deref(&self) -> &State {
        // SAFETY: `Entered` exists once at a time per space (see `state`'s invariant).
        unsafe { &*self.space.state.get() }
    }
}

impl<P: PageSource> core::ops::DerefMut for Entered<'_, P> {
    #[inline]
    fn deref_mut(&mut self) -> &mut State {
        // SAFETY: as for `deref`; `&mut self` makes this the only live reference.
        unsafe { &mut *self.space.state.get() }
    }
}

impl<P: PageSource> Drop for Entered<'_, P> {
    #[inline]
    fn drop(&mut self) {
        #[cfg(debug_assertions)]
        self.space.busy.set(false);
    }
}

impl<P: PageSource> MemorySpace<P> {
    /// A space over `pages`, shaped by `config`; reserves `config.initial_capacity`
    /// (rounded up to whole segments) at once.
    ///
    /// # Errors
    ///
    /// [`SpaceError`] when `config` is invalid for the source (see
    /// [`SpaceConfig::check`]) or the source refuses the initial capacity.
    ///
    /// ```
    /// use bento_pages::HeapPages;
    /// use bento_space::{MemorySpace, SpaceConfig};
    ///
    /// let config = SpaceConfig::DEFAULT.with_page_size(4096).with_initial_capacity(1);
    /// let space = MemorySpace::new(HeapPages::new(), config).unwrap();
    /// assert_eq!(space.stats().reserved, 1 << 20);
    /// ```
    pub fn new(pages: P, config: SpaceConfig) -> Result<Self, SpaceError> {
        let source_page = pages.page_size();
        let config = config.for_source(source_page);
        config.check(source_page)?;
        let space = Self::from_parts(config, source_page, Some(pages))?;
        let segments = config.initial_capacity.div_ceil(config.segment_granularity);
        {
            let mut inner = space.enter();
            for _ in 0..segments {
                let (c, size) = inner.add_segment()?;
                // SAFETY: a fresh segment's one free chunk, in no list.
                unsafe { inner.core.list(c, size) };
            }
        }
        Ok(space)
    }

    /// A space whose first segment is the caller's memory `[base, base + len)`, never
    /// released; it grows through `pages` when given, and never grows without.
    ///
    /// # Safety
    ///
    /// The caller must ensure that `[base, base + len)` is valid for reads and writes
    /// for the life of the space and is reached by nothing else while the space lives.
    ///
    /// # Errors
    ///
    /// [`SpaceError::BaseSize`] when the memory cannot hold a segment (after aligning
    /// its start to 16 it must hold at least 128 bytes, and at most 2^38), and what
    /// [`new`](Self::new) returns for a bad `config`.
    ///
    /// ```
    /// use core::alloc::Layout;
    /// use core::ptr::NonNull;
    /// use bento_pages::HeapPages;
    /// use bento_space::{MemorySpace, SpaceConfig};
    ///
    /// let mut buf = vec![0u8; 4096];
    /// let base = NonNull::new(buf.as_mut_ptr()).unwrap();
    /// // SAFETY: `buf` outlives the space and is used only through it.
    /// let space = unsafe {
    ///     MemorySpace::<HeapPages>::with_base(base, buf.len(), None, SpaceConfig::DEFAULT)
    /// }
    /// .unwrap();
    /// let p = space.alloc(Layout::new::<[u8; 1000]>()).unwrap();
    /// assert!(space.alloc(Layout::new::<[u8; 4000]>()).is_err()); // no source: no growth
    /// // SAFETY: `p` is live.
    /// unsafe { space.free(p) };
    /// assert_eq!(space.stats().segments, 1); // the base segment stays
    /// drop(space);
    /// ```
    pub unsafe fn with_base(
        base: NonNull<u8>,
        len: usize,
        pages: Option<P>,
        config: SpaceConfig,
    ) -> Result<Self, SpaceError> {
        let source_page = pages.as_ref().map_or(config.page_size, P::page_size);
        let config = config.for_source(source_page);
        config.check(source_page)?;
        let pad = base.as_ptr().align_offset(CHUNK_ALIGN);
        let usable = len.saturating_sub(pad) & !(CHUNK_ALIGN - 1);
        if pad == usize::MAX || !(HEADER + MIN_CHUNK + FENCE..=MAX_SEGMENT).contains(&usable) {
            return Err(SpaceError::BaseSize { len: usable });
        }
        let space = Self::from_parts(config, source_page, pages)?;
        {
            let mut inner = space.enter();
            // SAFETY: `pad` keeps inside `[base, base + len)` (`usable > 0`).
            let start = unsafe { base.add(pad) };
            // SAFETY: the caller lends the memory; `start` is 16-aligned and `usable`
            // bytes (a multiple of 16, large enough) follow it.
            unsafe { inner.core.adopt_base(start, usable) };
        }
        Ok(space)
    }

    /// An empty space over `pages` (put behind the configured commit cache) whose
    /// page is `source_page` bytes; `config` is checked already.
    fn from_parts(
        config: SpaceConfig,
        source_page: usize,
        pages: Option<P>,
    ) -> Result<Self, SpaceError> {
        let pages = match pages {
            Some(p) => {
                let cache = CommitCache::with_capacity(Metered::new(p), config.commit_cache)?;
                cache.set_retention(config.retention);
                cache.set_limit(crate::config::commit_cache_limit(
                    0,
                    config.segment_granularity,
                ));
                Some(cache)
            }
            None => None,
        };
        let core = Core::new(
            config.segment_granularity,
            config.segment_threshold,
            config.page_size,
            source_page,
            config.block_cache,
            panic_on_misuse,
        );
        Ok(Self {
            state: UnsafeCell::new(State {
                core,
                config,
                source_page,
                table_bytes: pages.as_ref().map_or(0, |p| p.inner().stats().committed),
            }),
            pages,
            #[cfg(debug_assertions)]
            busy: core::cell::Cell::new(false),
        })
    }

    /// Exclusive access for one call; in debug builds, a re-entrant call panics.
    #[inline]
    fn enter(&self) -> Entered<'_, P> {
        #[cfg(debug_assertions)]
        assert!(
            !self.busy.replace(true),
            "MemorySpace re-entered: a page source or misuse hook called back into the space it serves"
        );
        Entered { space: self }
    }

    /// Allocates a block for `layout`: any power-of-two alignment (beyond 16, by
    /// splitting off a leading free chunk, or through a dedicated segment). A
    /// zero-size layout gets a dangling, aligned pointer and costs nothing.
    ///
    /// # Errors
    ///
    /// [`AllocError`] when the source refuses memory or the size is beyond what a
    /// segment can hold; nothing changes.
    ///
    /// ```
    /// use core::alloc::Layout;
    /// use bento_pages::HeapPages;
    /// use bento_space::{MemorySpace, SpaceConfig};
    ///
    /// let space = MemorySpace::new(HeapPages::new(), SpaceConfig::DEFAULT.with_page_size(4096)).unwrap();
    /// let p = space.alloc(Layout::from_size_align(256, 4096).unwrap()).unwrap();
    /// assert_eq!(p.addr().get() % 4096, 0);
    /// // SAFETY: live.
    /// unsafe { space.free(p) };
    /// ```
    #[inline]
    pub fn alloc(&self, layout: Layout) -> Result<NonNull<u8>, AllocError> {
        if layout.size() == 0 {
            return Ok(bento_pages::dangling(layout));
        }
        self.enter().alloc(layout.size(), layout.align(), 0)
    }

    /// Allocates a block of `layout.size()` bytes whose address plus `offset` is
    /// aligned to `layout.align()`: room for a header in front of an aligned body.
    ///
    /// # Errors
    ///
    /// As [`alloc`](Self::alloc), and [`AllocError`] when `offset` is not a multiple of
    /// `min(align, 16)` (every block starts on 16 bytes, so no other offset can be met).
    ///
    /// ```
    /// use core::alloc::Layout;
    /// use bento_pages::HeapPages;
    /// use bento_space::{MemorySpace, SpaceConfig};
    ///
    /// let space = MemorySpace::new(HeapPages::new(), SpaceConfig::DEFAULT.with_page_size(4096)).unwrap();
    /// let p = space.alloc_at_offset(Layout::from_size_align(160, 64).unwrap(), 32).unwrap();
    /// assert_eq!((p.addr().get() + 32) % 64, 0);
    /// // SAFETY: live.
    /// unsafe { space.free(p) };
    /// ```
    pub fn alloc_at_offset(
        &self,
        layout: Layout,
        offset: usize,
    ) -> Result<NonNull<u8>, AllocError> {
        if !offset.is_multiple_of(layout.align().min(CHUNK_ALIGN)) {
            return Err(AllocError);
        }
        if layout.size() == 0 {
            // The first non-zero address `a` with `a + offset` aligned.
            let align = layout.align();
            let addr = (offset / align)
                .checked_add(1)
                .and_then(|k| k.checked_mul(align))
                .ok_or(AllocError)?
                - offset;
            return Ok(NonNull::without_provenance(
                core::num::NonZeroUsize::new(addr).ok_or(AllocError)?,
            ));
        }
        let offset = if layout.align() <= CHUNK_ALIGN {
            0
        } else {
            offset % layout.align()
        };
        self.enter().alloc(layout.size(), layout.align(), offset)
    }

    /// Frees a block. Its size comes from its boundary tag. When this leaves its
    /// segment empty, the segment goes back to the page source before this returns.
    ///
    /// In debug builds a pointer that is not a live block of this space (from another
    /// allocator, freed twice, or pointing inside a block) is reported to the misuse
    /// hook (which panics by default) and the call does nothing. In release builds
    /// such a call is undefined behaviour; [`validate`](Self::validate) finds most of
    /// the damage afterwards.
    ///
    /// # Safety
    ///
    /// The caller must ensure `ptr` is a live block of this space from a non-zero-size
    /// allocation (the pointer of a zero-size allocation is never freed), not used
    /// afterwards.
    #[inline]
    pub unsafe fn free(&self, ptr: NonNull<u8>) {
        let mut inner = self.enter();
        if cfg!(debug_assertions)
            && let Err(misuse) = inner.core.check_block(ptr)
        {
            inner.core.report(&misuse);
            return;
        }
        // SAFETY: the caller's contract (checked in debug builds above).
        unsafe { inner.free(ptr) }
    }

    /// Frees a block given the layout it was allocated (or last resized) with: as
    /// [`free`](Self::free) (the block's tag, not the layout, says its size and
    /// segment, so a block resized in place with any entry point frees the same
    /// way). A zero-size layout frees nothing (its pointer is dangling). The
    /// `Allocator` implementations free this way.
    ///
    /// In debug builds a layout the block cannot have (larger than
    /// [`usable_size`](Self::usable_size), or of an alignment its address does not
    /// meet) is reported as [`Misuse::WrongLayout`](crate::Misuse::WrongLayout) and
    /// the block stays live.
    ///
    /// # Safety
    ///
    /// As for [`free`](Self::free), and `layout` must be the one the block was
    /// allocated with, or resized to last (with a size of at most what it was given).
    ///
    /// ```
    /// use core::alloc::Layout;
    /// use bento_pages::HeapPages;
    /// use bento_space::{MemorySpace, SpaceConfig};
    ///
    /// let space = MemorySpace::new(HeapPages::new(), SpaceConfig::DEFAULT.with_page_size(4096)).unwrap();
    /// let layout = Layout::new::<[u64; 6]>();
    /// let p = space.alloc(layout).unwrap();
    /// // SAFETY: `p` is live, allocated with `layout`.
    /// unsafe { space.dealloc(p, layout) };
    /// assert_eq!(space.stats().live_blocks, 0);
    /// ```
    #[inline]
    pub unsafe fn dealloc(&self, ptr: NonNull<u8>, layout: Layout) {
        if layout.size() == 0 {
            return;
        }
        let mut inner = self.enter();
        if cfg!(debug_assertions) {
            let checked = inner.core.check_block(ptr).and_then(|()| {
                // SAFETY: `check_block` found `ptr` a live block of this space.
                let usable = unsafe { Core::usable(inner.core.adopt(ptr)) };
                if layout.size() > usable || !ptr.addr().get().is_multiple_of(layout.align()) {
                    Err(Misuse::WrongLayout {
                        ptr,
                        layout,
                        block_size: usable,
                        block_align: 1 << ptr.addr().get().trailing_zeros(),
                    })
                } else {
                    Ok(())
                }
            });
            if let Err(misuse) = checked {
                inner.core.report(&misuse);
                return;
            }
        }
        // SAFETY: the caller's contract (checked in debug builds above).
        unsafe { inner.free(ptr) }
    }

    /// Resizes a block to `new_size` bytes: in place when it can (shrinking always
    /// can, except a block with a dedicated segment shrinking by a page or more;
    /// growing can when the next chunk is free and large enough), else by allocating
    /// a new block (aligned to 16), copying and freeing the old one, which gives a
    /// dedicated segment back. A new size of 0 shrinks the block to the minimum.
    ///
    /// # Errors
    ///
    /// [`AllocError`] when the block must move and no memory is to be had; the block
    /// is then unchanged.
    ///
    /// # Safety
    ///
    /// As for [`free`](Self::free). The old pointer must not be used after `Ok`.
    ///
    /// ```
    /// use core::alloc::Layout;
    /// use bento_pages::HeapPages;
    /// use bento_space::{MemorySpace, SpaceConfig};
    ///
    /// let space = MemorySpace::new(HeapPages::new(), SpaceConfig::DEFAULT.with_page_size(4096)).unwrap();
    /// let p = space.alloc(Layout::new::<[u8; 40]>()).unwrap();
    /// // SAFETY: `p` is live; it is replaced by what `realloc` returns.
    /// unsafe {
    ///     p.as_ptr().write(42);
    ///     let q = space.realloc(p, 4000).unwrap();
    ///     assert_eq!(q.as_ptr().read(), 42);
    ///     space.free(q);
    /// }
    /// ```
    pub unsafe fn realloc(
        &self,
        ptr: NonNull<u8>,
        new_size: usize,
    ) -> Result<NonNull<u8>, AllocError> {
        let mut inner = self.enter();
        if cfg!(debug_assertions)
            && let Err(misuse) = inner.core.check_block(ptr)
        {
            inner.core.report(&misuse);
            return Err(AllocError);
        }
        // SAFETY: the caller's contract.
        unsafe {
            if inner.resize_in_place(ptr, new_size) {
                return Ok(ptr);
            }
            let new = inner.alloc(new_size, CHUNK_ALIGN, 0)?;
            let keep = Core::usable(inner.core.adopt(ptr)).min(new_size);
            core::ptr::copy_nonoverlapping(ptr.as_ptr(), new.as_ptr(), keep);
            inner.free(ptr);
            Ok(new)
        }
    }

    /// Resizes a block to hold `new_size` bytes without moving it; false (and nothing
    /// changes) when it cannot. Shrinking splits off a free tail; growing absorbs a
    /// free successor.
    ///
    /// # Safety
    ///
    /// As for [`free`](Self::free), except that the block stays live.
    ///
    /// ```
    /// use core::alloc::Layout;
    /// use bento_pages::HeapPages;
    /// use bento_space::{MemorySpace, SpaceConfig};
    ///
    /// let space = MemorySpace::new(HeapPages::new(), SpaceConfig::DEFAULT.with_page_size(4096)).unwrap();
    /// let p = space.alloc(Layout::new::<[u8; 64]>()).unwrap();
    /// // SAFETY: `p` is live; it is the last block, so a free chunk follows it.
    /// unsafe {
    ///     assert!(space.realloc_in_place(p, 1000));
    ///     assert!(space.usable_size(p) >= 1000);
    ///     space.free(p);
    /// }
    /// ```
    pub unsafe fn realloc_in_place(&self, ptr: NonNull<u8>, new_size: usize) -> bool {
        let mut inner = self.enter();
        if cfg!(debug_assertions)
            && let Err(misuse) = inner.core.check_block(ptr)
        {
            inner.core.report(&misuse);
            return false;
        }
        // SAFETY: the caller's contract.
        unsafe { inner.resize_in_place(ptr, new_size) }
    }

    /// Grows a block to hold at least `new_size` bytes without moving it, absorbing
    /// the free chunk after it (and committing the pages that needs). True when the
    /// block now holds `new_size` bytes (also when it already did); false, and
    /// nothing changes, when the next chunk is in use or too small, or the page
    /// source refuses the commit. Never shrinks.
    ///
    /// # Safety
    ///
    /// As for [`free`](Self::free), except that the block stays live.
    ///
    /// ```
    /// use core::alloc::Layout;
    /// use bento_pages::HeapPages;
    /// use bento_space::{MemorySpace, SpaceConfig};
    ///
    /// let space = MemorySpace::new(HeapPages::new(), SpaceConfig::DEFAULT.with_page_size(4096)).unwrap();
    /// let p = space.alloc(Layout::new::<[u8; 64]>()).unwrap();
    /// // SAFETY: `p` is live; a free chunk follows it.
    /// unsafe {
    ///     assert!(space.try_grow_in_place(p, 100_000));
    ///     assert!(space.try_grow_in_place(p, 10)); // holds 10 already: nothing to do
    ///     assert!(space.usable_size(p) >= 100_000);
    ///     space.free(p);
    /// }
    /// ```
    pub unsafe fn try_grow_in_place(&self, ptr: NonNull<u8>, new_size: usize) -> bool {
        let mut inner = self.enter();
        if cfg!(debug_assertions)
            && let Err(misuse) = inner.core.check_block(ptr)
        {
            inner.core.report(&misuse);
            return false;
        }
        // SAFETY: the caller's contract.
        unsafe {
            if Core::usable(inner.core.adopt(ptr)) >= new_size {
                return true;
            }
            inner.resize_in_place(ptr, new_size)
        }
    }

    /// The bytes the block at `ptr` can hold: at least what was asked for.
    ///
    /// # Safety
    ///
    /// As for [`free`](Self::free), except that the block stays live.
    ///
    /// ```
    /// use core::alloc::Layout;
    /// use bento_pages::HeapPages;
    /// use bento_space::{MemorySpace, SpaceConfig};
    ///
    /// let space = MemorySpace::new(HeapPages::new(), SpaceConfig::DEFAULT.with_page_size(4096)).unwrap();
    /// let p = space.alloc(Layout::new::<[u8; 20]>()).unwrap();
    /// // SAFETY: live.
    /// unsafe {
    ///     assert_eq!(space.usable_size(p), 24); // a 32-byte chunk less its 8-byte tag
    ///     space.free(p);
    /// }
    /// ```
    pub unsafe fn usable_size(&self, ptr: NonNull<u8>) -> usize {
        let inner = self.enter();
        if cfg!(debug_assertions)
            && let Err(misuse) = inner.core.check_block(ptr)
        {
            inner.core.report(&misuse);
            return 0;
        }
        // SAFETY: the caller's contract.
        unsafe { Core::usable(inner.core.adopt(ptr)) }
    }

    /// Checks, in O(1) and in every build, that `ptr` may be a block in use of this
    /// space, as a free without a layout (C's `free`) needs: it is 16-aligned; the
    /// tag in front of it says in use, and not in the block cache; the next chunk's
    /// tag says its predecessor is in use; a free chunk before it has the size its
    /// footer says; a dedicated segment's header names the chunk back, and a base
    /// segment's chunk lies inside it. Returns the block's usable size.
    ///
    /// It catches a second free of a block the space has taken back (its tag says
    /// free or cached, or its segment is gone) and nearly every pointer inside a
    /// block, without walking anything; it is no proof: a pointer into a block whose
    /// bytes happen to spell a valid tag, or a block freed twice after its memory was
    /// handed out again, can pass. [`validate`](Self::validate) is the proof, and in
    /// debug builds [`free`](Self::free) walks the segment instead.
    ///
    /// # Errors
    ///
    /// The [`Misuse`] found: [`Misuse::DoubleFree`] when the tag says free or
    /// cached, [`Misuse::Interior`] otherwise.
    ///
    /// # Safety
    ///
    /// Every address `a` for which `readable(a)` holds lies in memory reserved from
    /// this space's source that may be read (as for a source whose
    /// [`commit_is_implicit`](PageSource::commit_is_implicit)), and `readable` holds
    /// for no address outside this space's live segments. The words read are
    /// `ptr - 16` and the next chunk's tag, and where the tag asks for them, the
    /// chunk before it and a dedicated segment's header, each asked of `readable`
    /// first.
    ///
    /// ```
    /// use core::alloc::Layout;
    /// use bento_pages::HeapPages;
    /// use bento_space::{Misuse, MemorySpace, SpaceConfig};
    ///
    /// let mut space = MemorySpace::new(HeapPages::new(), SpaceConfig::DEFAULT.with_page_size(4096)).unwrap();
    /// let p = space.alloc(Layout::new::<[u8; 100]>()).unwrap();
    /// let q = space.alloc(Layout::new::<[u8; 100]>()).unwrap();
    /// // Heap-backed pages are all readable: an address is the space's when it lies in
    /// // one of its segments.
    /// let segments: Vec<(usize, usize)> = space
    ///     .chunks()
    ///     .map(|c| (c.segment.addr().get(), c.segment_size))
    ///     .collect();
    /// let mine = |a: usize| segments.iter().any(|&(base, len)| (base..base + len).contains(&a));
    /// // SAFETY: `mine` holds for the space's own segments only, all readable.
    /// unsafe {
    ///     assert_eq!(space.probe(p, &mine).ok(), Some(104));
    ///     assert!(matches!(space.probe(p.add(16), &mine), Err(Misuse::Interior { .. })));
    ///     space.free(p);
    ///     space.free(q);
    /// }
    /// ```
    #[inline(always)]
    pub unsafe fn probe(
        &self,
        ptr: NonNull<u8>,
        readable: impl Fn(usize) -> bool,
    ) -> Result<usize, Misuse<'static>> {
        // SAFETY: the caller's contract.
        unsafe { self.enter().core.probe(ptr, readable) }.map_err(|fault| match fault {
            Fault::DoubleFree => Misuse::DoubleFree { ptr },
            Fault::Interior => Misuse::Interior { ptr, block: None },
        })
    }

    /// Exclusive access to the inner state, for the walkers and `validate`.
    pub(crate) fn entered(&self) -> Entered<'_, P> {
        self.enter()
    }
}

impl<P: PageSource + fmt::Debug> fmt::Debug for MemorySpace<P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let inner = self.enter();
        f.debug_struct("MemorySpace")
            .field("config", &inner.config)
            .field("stats", &inner.core.stats())
            .field("pages", &self.pages)
            .finish()
    }
}

// SAFETY: the methods are `MemorySpace`'s own, which keep `RawAlloc`'s promises.
unsafe impl<P: PageSource> RawAlloc for MemorySpace<P> {
    #[inline]
    fn alloc_raw(&self, layout: Layout) -> Result<NonNull<u8>, AllocError> {
        self.alloc(layout)
    }

    #[inline]
    unsafe fn dealloc_raw(&self, ptr: NonNull<u8>, layout: Layout) {
        // SAFETY: the caller's contract.
        unsafe { self.dealloc(ptr, layout) }
    }

    unsafe fn resize_in_place(&self, ptr: NonNull<u8>, _old: Layout, new_size: usize) -> bool {
        // SAFETY: the caller's contract.
        unsafe { self.realloc_in_place(ptr, new_size) }
    }

    /// Moving a block out of a dedicated segment gives the segment back.
    #[inline]
    fn keeps_unshrunk_blocks(&self) -> bool {
        false
    }
}

bento_pages::impl_allocator!(impl['a, P: PageSource] for &'a MemorySpace<P>);
