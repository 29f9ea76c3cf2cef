//! [`MemorySpace`]: the page-source side (segments in and out) over [`Core`].

use core::alloc::Layout;
use core::cell::UnsafeCell;
use core::fmt;
use core::ptr::NonNull;

use bento_align::Alignment;
use bento_pages::{CommitCache, Metered, PageError, PageSource, RawAlloc};

use crate::cache::Cache;
use crate::chunk::{
    CHUNK_ALIGN, FENCE, HEADER, Kind, MAX_SEGMENT, MIN_CHUNK, Segment, chunk_size_for, raw,
};
use crate::config::{SpaceConfig, SpaceError};
use crate::engine::{Core, Fault, Freed, PageOps, dedicated_chunk_offset};
use crate::{AllocError, Misuse, MisuseHook, SpaceStats, panic_on_misuse};

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

/// Under `Retention::Eager` the commit cache keeps at most this share of the space's
/// reserved bytes (as a shift: 1/32) and [`EAGER_MOST`], so that a small heap does not
/// keep megabytes of freed pages resident; under a decay this is the least it may
/// keep whatever the peak.
const COMMIT_SHARE_SHIFT: u32 = 5;
/// ... but always room for this many bytes.
const COMMIT_FLOOR: usize = 256 << 10;
/// The most `Retention::Eager` keeps.
const EAGER_MOST: usize = 4 << 20;

/// Sizes the commit cache's limit (see [`COMMIT_SHARE_SHIFT`]); called whenever a
/// segment comes or goes. A space of at most two segments may keep half a segment,
/// so that one which empties and fills again each frame (and gives its segment back
/// each time) finds its pages kept and makes no system call; what it then holds with
/// nothing live stays below one segment.
fn fit_commit_cache<P: PageSource>(pages: &Source<P>, reserved: usize, granularity: usize) {
    let floor = crate::config::cache_floor(reserved, granularity, COMMIT_FLOOR);
    pages.set_limit((reserved >> COMMIT_SHARE_SHIFT).min(EAGER_MOST).max(floor));
}

/// The page calls of the core, through the cache.
impl<P: PageSource> PageOps for Option<&Source<P>> {
    unsafe fn release(&self, core: &Core, seg: NonNull<Segment>) {
        // SAFETY: the caller's contract: `core` unlinked `seg` and recorded its
        // pending range.
        unsafe { release_segment(core, *self, seg, core.pending, core.head_run) }
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

/// The exclusive access of one method call (see `MemorySpace::inner`).
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
                unsafe { inner.core.index.insert(c, size) };
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
            unsafe {
                let seg = inner.core.link_segment(start, usable, usable, Kind::Base);
                inner.core.base = seg.as_ptr();
                inner.core.base_range = (seg.addr().get(), usable);
                let (c, size) = inner.core.init_area(seg);
                inner.core.index.insert(c, size);
            }
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
                fit_commit_cache(&cache, 0, config.segment_granularity);
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

    /// The space's figures, from its counters (O(1)).
    ///
    /// ```
    /// use bento_pages::HeapPages;
    /// use bento_space::{MemorySpace, SpaceConfig};
    ///
    /// let space = MemorySpace::new(HeapPages::new(), SpaceConfig::DEFAULT.with_page_size(4096)).unwrap();
    /// assert_eq!(space.stats().live_blocks, 0);
    /// ```
    pub fn stats(&self) -> SpaceStats {
        let mut stats = self.enter().core.stats();
        if let Some(pages) = &self.pages {
            stats.source = pages.inner().stats();
            stats.cache = pages.stats();
        }
        stats.resident = stats.committed + stats.cache.parked;
        stats
    }

    /// Empties the block cache (its blocks are freed for good, merging with their
    /// neighbours) and then the commit cache: every page it keeps committed for reuse
    /// goes back to the source. Returns the bytes the commit cache gave back. The
    /// manual prompt for memory pressure; no live block changes.
    ///
    /// ```
    /// use core::alloc::Layout;
    /// use bento_pages::HeapPages;
    /// use bento_space::{MemorySpace, SpaceConfig};
    ///
    /// let space = MemorySpace::new(HeapPages::new(), SpaceConfig::DEFAULT.with_page_size(4096)).unwrap();
    /// let keep = space.alloc(Layout::new::<u64>()).unwrap();
    /// let big = space.alloc(Layout::new::<[u8; 20_000]>()).unwrap();
    /// // SAFETY: live blocks, each freed once.
    /// unsafe { space.free(big) };
    /// let parked = space.stats().cache.parked;
    /// assert!(parked >= 16 << 10); // the pages inside the freed block wait in the cache
    /// assert_eq!(space.trim(), parked);
    /// assert_eq!(space.stats().cache.parked, 0);
    /// // SAFETY: live.
    /// unsafe { space.free(keep) };
    /// ```
    pub fn trim(&self) -> usize {
        let mut inner = self.enter();
        let pages = inner.source();
        inner.core.drain(&pages);
        self.pages.as_ref().map_or(0, CommitCache::trim)
    }

    /// One frame passed: what the commit cache kept and nobody took back for the decay
    /// time goes back to the source (see [`Retention`](bento_pages::Retention));
    /// when the decay takes a step, the block cache is emptied too (its blocks freed
    /// for good, their pages kept and aged from then). Returns the bytes given back.
    /// Call it once a frame; a space nobody ticks decays by the OS clock on its slow
    /// paths instead (with the feature `os` of bento-pages).
    ///
    /// ```
    /// use core::alloc::Layout;
    /// use bento_pages::{Decay, HeapPages, Retention};
    /// use bento_space::{MemorySpace, SpaceConfig};
    ///
    /// let config = SpaceConfig::DEFAULT.with_retention(Retention::Decay(Decay::frames(2)));
    /// let space = MemorySpace::new(HeapPages::new(), config).unwrap();
    /// let keep = space.alloc(Layout::new::<u64>()).unwrap();
    /// let big = space.alloc(Layout::new::<[u8; 100_000]>()).unwrap();
    /// // SAFETY: live, freed once.
    /// unsafe { space.free(big) };
    /// let kept = space.stats().cache.parked;
    /// assert!(kept >= 64 << 10); // kept committed for the next allocation
    /// assert_eq!(space.tick() + space.tick(), kept); // two frames unused: given back
    /// // SAFETY: live.
    /// unsafe { space.free(keep) };
    /// ```
    pub fn tick(&self) -> usize {
        let Some(pages) = &self.pages else {
            return 0;
        };
        let steps = pages.steps();
        let freed = pages.tick();
        self.after_step(steps);
        freed
    }

    /// For a program that does not tick: reads the clock and, when the decay time is
    /// up, gives back what [`tick`](Self::tick) would (an idle hook; the space makes
    /// the same check on its own slow paths). Returns the bytes given back.
    ///
    /// ```
    /// use bento_pages::HeapPages;
    /// use bento_space::{MemorySpace, SpaceConfig};
    ///
    /// let space = MemorySpace::new(HeapPages::new(), SpaceConfig::DEFAULT).unwrap();
    /// assert_eq!(space.decay(), 0);
    /// ```
    pub fn decay(&self) -> usize {
        let Some(pages) = &self.pages else {
            return 0;
        };
        let steps = pages.steps();
        let freed = pages.decay();
        self.after_step(steps);
        freed
    }

    /// After a decay step (the cache's count moved from `steps`), the blocks cached for
    /// reuse decay with the pages: freed for good, their pages kept and aged from now.
    fn after_step(&self, steps: usize) {
        if let Some(pages) = &self.pages
            && pages.steps() != steps
        {
            let mut inner = self.enter();
            let source = inner.source();
            inner.core.drain(&source);
        }
    }

    /// Tells the commit cache the program's phase: what a level's unload frees is
    /// kept through the next load (see [`Phase`](bento_pages::Phase)).
    ///
    /// ```
    /// use bento_pages::{HeapPages, Phase};
    /// use bento_space::{MemorySpace, SpaceConfig};
    ///
    /// let space = MemorySpace::new(HeapPages::new(), SpaceConfig::DEFAULT).unwrap();
    /// space.phase(Phase::Unload);
    /// space.phase(Phase::Load);
    /// space.phase(Phase::Play);
    /// ```
    pub fn phase(&self, phase: bento_pages::Phase) {
        if let Some(pages) = &self.pages {
            pages.phase(phase);
        }
    }

    /// Sets the function told about misuse found by the debug checks (the default,
    /// [`panic_on_misuse`], panics). A hook that returns makes the bad call do nothing.
    /// The hook must not call back into this space.
    ///
    /// ```
    /// use bento_pages::HeapPages;
    /// use bento_space::{MemorySpace, Misuse, SpaceConfig};
    ///
    /// let mut space = MemorySpace::new(HeapPages::new(), SpaceConfig::DEFAULT.with_page_size(4096)).unwrap();
    /// space.set_misuse_hook(|m: &Misuse| eprintln!("{m}"));
    /// ```
    pub fn set_misuse_hook(&mut self, hook: MisuseHook) {
        self.state.get_mut().core.hook = hook;
    }

    /// The page source, when the space has one.
    ///
    /// ```
    /// use bento_pages::{HeapPages, PageSource};
    /// use bento_space::{MemorySpace, SpaceConfig};
    ///
    /// let space = MemorySpace::new(HeapPages::new(), SpaceConfig::DEFAULT.with_page_size(4096)).unwrap();
    /// assert_eq!(space.pages().unwrap().page_size(), 4096);
    /// ```
    pub fn pages(&self) -> Option<&P> {
        self.pages.as_ref().map(|p| p.inner().inner())
    }

    /// The configuration the space was made with.
    ///
    /// ```
    /// use bento_pages::HeapPages;
    /// use bento_space::{MemorySpace, SpaceConfig};
    ///
    /// let config = SpaceConfig::DEFAULT.with_page_size(4096);
    /// let space = MemorySpace::new(HeapPages::new(), config).unwrap();
    /// assert_eq!(space.config(), config);
    /// ```
    pub fn config(&self) -> SpaceConfig {
        self.enter().config
    }

    /// Releases every segment to the page source (the base segment stays the
    /// caller's) and returns the bytes given back. Blocks still live are lost.
    ///
    /// ```
    /// use core::alloc::Layout;
    /// use bento_pages::HeapPages;
    /// use bento_space::{MemorySpace, SpaceConfig};
    ///
    /// let space = MemorySpace::new(HeapPages::new(), SpaceConfig::DEFAULT.with_page_size(4096)).unwrap();
    /// space.alloc(Layout::new::<u64>()).unwrap();
    /// assert_eq!(space.destroy(), 1 << 20);
    /// ```
    pub fn destroy(mut self) -> usize {
        // `Drop` then finds only the base segment left, which it keeps.
        release_all(self.state.get_mut(), self.pages.as_ref())
    }

    /// What the source under the cache has committed, and what the space's figures
    /// say it should have: the space's committed bytes outside the base segment, the
    /// pages parked in the cache and the cache's table. `None` without a source.
    pub(crate) fn source_committed(&self, state: &State) -> Option<(usize, usize)> {
        let pages = self.pages.as_ref()?;
        let core = &state.core;
        // SAFETY: the base segment's header is live while the space is.
        let base = unsafe { core.base.as_ref() }.map_or(0, |b| b.committed);
        let expected = core.counters.committed - base + pages.stats().parked + state.table_bytes;
        Some((pages.inner().stats().committed, expected))
    }

    /// The commit cache between the space and its source, for `validate`.
    pub(crate) fn source_cache(&self) -> Option<&Source<P>> {
        self.pages.as_ref()
    }

    /// Exclusive access to the inner state, for the walkers and `validate`.
    pub(crate) fn entered(&self) -> Entered<'_, P> {
        self.enter()
    }
}

impl<'a, P: PageSource> Entered<'a, P> {
    /// The space's source (through its cache), for the core's page calls.
    #[inline]
    fn source(&self) -> Option<&'a Source<P>> {
        let space: &'a MemorySpace<P> = self.space;
        space.pages.as_ref()
    }

    /// The allocation path: `size > 0`, `align` a power of two, `offset < align` a
    /// multiple of 16 when `align > 16` (0 otherwise).
    #[inline]
    fn alloc(
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
            if let Some(p) = self.core.cache_take(csize) {
                return Ok(p);
            }
            return self.carve(csize, csize, None);
        }
        self.alloc_aligned(size, csize, align, offset)
    }

    #[cold]
    fn alloc_aligned(
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
        self.carve(need, csize, Some((align, offset)))
    }

    /// Takes a free chunk of at least `need` bytes (from the index, the designated
    /// chunk, or a new segment) and hands out a block of `csize` bytes in it:
    /// anywhere, or, for `aligned = Some((align, offset))`, where its payload plus
    /// `offset` is aligned to `align`.
    #[inline]
    fn carve(
        &mut self,
        need: usize,
        csize: usize,
        aligned: Option<(usize, usize)>,
    ) -> Result<NonNull<u8>, AllocError> {
        let pages = self.source();
        let lead = |c| aligned.map(|(align, offset)| Core::aligned_lead(c, align, offset));
        if let Some((c, found)) = self.core.find(need) {
            // SAFETY: a listed free chunk of at least `need >= lead + csize` bytes.
            return unsafe { self.core.carve(&pages, c, found, lead(c), csize) }.ok_or(AllocError);
        }
        if !self.core.dv.is_null() {
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
    fn carve_fresh(
        &mut self,
        need: usize,
        csize: usize,
        aligned: Option<(usize, usize)>,
    ) -> Result<NonNull<u8>, AllocError> {
        let pages = self.source();
        let peaks = (
            self.core.counters.max_reserved,
            self.core.counters.max_committed,
        );
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
                    self.core.dv = core::ptr::null_mut();
                }
                Some((align, offset)) => {
                    self.core.index.insert(c, found);
                    let lead = Core::aligned_lead(c, align, offset);
                    if let Some(p) = self.core.carve(&pages, c, found, Some(lead), csize) {
                        return Ok(p);
                    }
                    self.core.index.remove(c, found);
                }
            }
        }
        // SAFETY: the segment was just made and holds no block; the refused commit
        // left its one chunk as it was, now in no list: unlink the segment and give it
        // back.
        unsafe {
            let seg = self.core.segment_of(c, 0);
            if let Freed::Release(seg) = self.core.unlink_segment(seg, (0, 0)) {
                release_segment(&self.core, pages, seg, (0, 0), 0);
            }
        }
        // A failed allocation changes no figure, peaks included.
        (
            self.core.counters.max_reserved,
            self.core.counters.max_committed,
        ) = peaks;
        Err(AllocError)
    }

    /// Frees the block at `payload`, releasing its segment if that empties it.
    ///
    /// # Safety
    ///
    /// `payload` is a live block of this space.
    #[inline]
    unsafe fn free(&mut self, payload: NonNull<u8>) {
        let pages = self.source();
        let c = self.core.adopt(payload);
        // SAFETY: the caller's contract; `c` and the caller's own view of the chunk.
        let freed = unsafe { self.core.free_block(&pages, c, raw::chunk_of(payload)) };
        if let Freed::Release(seg) = freed {
            // SAFETY: `free_block` unlinked the empty segment for us to release.
            unsafe { pages.release(&self.core, seg) };
        }
    }

    /// Resizes the block at `payload` in place (see `Core::resize_in_place`).
    ///
    /// # Safety
    ///
    /// `payload` is a live block of this space.
    unsafe fn resize_in_place(&mut self, payload: NonNull<u8>, new_size: usize) -> bool {
        let pages = self.source();
        let c = self.core.adopt(payload);
        // SAFETY: the caller's contract.
        unsafe { self.core.resize_in_place(&pages, c, new_size) }
    }

    /// Reserves an ordinary segment, commits its header page and the page of its end
    /// fence, and returns its one free chunk (in no list) with its size.
    #[cold]
    #[inline(never)]
    fn add_segment(&mut self) -> Result<(NonNull<u8>, usize), PageError> {
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
            self.core.counters.reserved,
            self.config.segment_granularity,
        );
        Ok(area)
    }

    /// A segment of its own for a request of `size` bytes whose payload plus
    /// `offset` is aligned to `align`.
    #[cold]
    #[inline(never)]
    fn alloc_dedicated(
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
            self.core.counters.reserved,
            self.config.segment_granularity,
        );
        Ok(payload)
    }
}

/// What a released segment's header says of its kind: none.
const RETIRED: usize = usize::MAX;

/// Gives an unlinked, empty (or torn down) segment back to the source: decommits its
/// committed runs (and the `pending` addresses, see `Freed::Release`), or only its
/// first `head_run` bytes when the emptying walk gave back the rest (see
/// `Core::head_run`; 0 otherwise), then releases it through the cache. An ordinary segment's pages go through the cache, which
/// parks them and may keep the whole reservation as a spare for the next segment, so
/// that a space which empties and fills again makes no system call; a dedicated
/// segment's pages are decommitted directly in the source under the cache (parking a
/// large block's pages would push every other parked page out).
///
/// # Safety
///
/// `seg` was unlinked by `Core::free_chunk`, `Core::free_emptying` or
/// `Core::unlink_segment` (or is being torn down), has intact tags, and is not the
/// base segment, so it came from `pages`; `pending` and `head_run` are what the core
/// recorded for it.
#[cold]
unsafe fn release_segment<P: PageSource>(
    core: &Core,
    pages: Option<&Source<P>>,
    seg: NonNull<Segment>,
    pending: (usize, usize),
    head_run: usize,
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
        debug_assert_eq!(decommitted, committed, "segment {seg:p}: committed figure");
        pages.release(base, size);
    }
    fit_commit_cache(pages, core.counters.reserved, core.granularity_mask + 1);
}

/// Releases every segment but the base one; returns the bytes released. The space is
/// left with only its base segment (if any) and must not allocate again.
fn release_all<P: PageSource>(state: &mut State, pages: Option<&Source<P>>) -> usize {
    let core = &mut state.core;
    let mut released = 0;
    let mut seg = core.segments;
    while let Some(s) = NonNull::new(seg) {
        // SAFETY: a live segment header on the list.
        let (next, size) = unsafe { ((*s.as_ptr()).next, (*s.as_ptr()).size) };
        if s.as_ptr() != core.base {
            released += size;
            // SAFETY: a segment of this space that is not the base; the list is
            // rebuilt below, so it is not reached again.
            unsafe { release_segment(core, pages, s, (0, 0), 0) };
        }
        seg = next;
    }
    core.segments = core.base;
    core.dv = core::ptr::null_mut();
    // The cached chunks of the base segment stay tagged in use; nothing reads them
    // again once the space goes.
    core.cache = Cache::new(core.cache.limit);
    if let Some(base) = NonNull::new(core.base) {
        // SAFETY: the base segment stays; it is now alone on the list.
        unsafe {
            (*base.as_ptr()).next = core::ptr::null_mut();
            (*base.as_ptr()).prev = core::ptr::null_mut();
        }
    }
    released
}

impl<P: PageSource> Drop for MemorySpace<P> {
    fn drop(&mut self) {
        release_all(self.state.get_mut(), self.pages.as_ref());
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

    unsafe fn resize_raw(
        &self,
        ptr: NonNull<u8>,
        old: Layout,
        new: Layout,
    ) -> Result<NonNull<u8>, AllocError> {
        // SAFETY: the caller's contract.
        unsafe { move_unless_resized(self, ptr, old, new) }
    }
}

/// `RawAlloc::resize_raw` for a space: in place when the block meets `new`'s
/// alignment and can be resized there, else moved — a shrink too, since moving a
/// block out of a dedicated segment gives the segment back.
///
/// # Safety
///
/// `ptr` is a live block of `space` allocated (or last resized) with `old`; both
/// sizes are non-zero.
#[inline]
pub(crate) unsafe fn move_unless_resized<A: RawAlloc + ?Sized>(
    space: &A,
    ptr: NonNull<u8>,
    old: Layout,
    new: Layout,
) -> Result<NonNull<u8>, AllocError> {
    let aligned = ptr.addr().get() & (new.align() - 1) == 0;
    // SAFETY: the caller's contract.
    if aligned && unsafe { space.resize_in_place(ptr, old, new.size()) } {
        return Ok(ptr);
    }
    // SAFETY: the caller's contract.
    unsafe { space.relocate(ptr, old, new) }
}

bento_pages::impl_allocator!(impl['a, P: PageSource] for &'a MemorySpace<P>);
