//! `GrowingPool`: a pool in a reservation of address space, committing pages as its
//! high-water mark rises and decommitting the free top on `shrink`.

use core::alloc::Layout;
use core::cell::Cell;
use core::fmt;
use core::ptr::NonNull;

use bento_align::align_up;
use bento_pages::PageSource;
#[cfg(all(feature = "os", any(unix, windows)))]
use bento_pages::SystemPages;

use bento_pages::MisuseHook;
use bento_pages::{AllocError, RawAlloc, impl_allocator};

use crate::pool::free_list::{FreeList, PoolCorruption, PoolReport, free_list_accessors};
use crate::pool::geometry::{Geometry, PoolError, no_chunk_fits};
use crate::pool::leaks::LeakList;

/// The least a [`GrowingPool`] commits at a time (or the rest of its reservation).
pub const GROWING_POOL_COMMIT_STEP: usize = 64 << 10;

/// A pool of equal chunks that reserves address space for `max` chunks up front and
/// commits pages only as its high-water mark rises; [`shrink`](Self::shrink) gives
/// back the whole pages above the highest chunk in use.
///
/// ```text
///   base             highest live chunk   fresh     committed             reserved
///    | live | free | live | live |  free   |  ....  |  not committed  ...   |
///                                  └─ shrink() decommits the pages from here ─┘
/// ```
///
/// Allocation is [`Pool`](crate::Pool)'s (the last freed chunk first, then the chunk at
/// the high-water mark); passing the committed part commits at least
/// [`GROWING_POOL_COMMIT_STEP`] bytes. A refused commit is `None` (or `AllocError`) and
/// changes nothing. The debug checks are `Pool`'s.
///
/// ```
/// use bento_pages::HeapPages;
/// use bento_primitives::GrowingPool;
/// use core::alloc::Layout;
///
/// let pool = GrowingPool::with_source(HeapPages::new(), Layout::new::<[u8; 64]>(), 100_000)
///     .unwrap();
/// assert_eq!(pool.committed(), 0);
/// let chunks: Vec<_> = (0..2000).map(|_| pool.alloc().unwrap()).collect();
/// assert!(pool.committed() >= 2000 * 64 && pool.committed() < pool.reserved());
/// for c in chunks {
///     // SAFETY: a live chunk of `pool`, freed once.
///     unsafe { pool.free(c) };
/// }
/// assert!(pool.shrink() > 0);
/// assert_eq!(pool.committed(), 0);
/// ```
pub struct GrowingPool<P: PageSource> {
    list: FreeList,
    // Invariant: a non-zero multiple of the page size; `[base, base + reserved)` is the
    // reservation, holding `capacity * stride` bytes of chunks.
    reserved: usize,
    // Invariant: a multiple of the page size, `usable * stride <= committed <= reserved`;
    // `[base, base + committed)` is committed and nothing above it.
    committed: Cell<usize>,
    source: P,
}

#[cfg(all(feature = "os", any(unix, windows)))]
impl GrowingPool<SystemPages> {
    /// A pool of up to `max` chunks for `chunk` in the operating system's address space.
    ///
    /// # Errors
    ///
    /// As [`with_source`](Self::with_source).
    ///
    /// ```
    /// use bento_primitives::GrowingPool;
    /// use core::alloc::Layout;
    ///
    /// let pool = GrowingPool::new(Layout::new::<u64>(), 1 << 20).unwrap();
    /// assert_eq!(pool.capacity(), 1 << 20);
    /// ```
    pub fn new(chunk: Layout, max: usize) -> Result<Self, PoolError> {
        Self::with_source(SystemPages::new(), chunk, max)
    }
}

impl<P: PageSource> GrowingPool<P> {
    /// A pool of up to `max` chunks for `chunk` (rounded as [`Pool::new`] rounds) in a
    /// reservation from `source`; nothing is committed yet.
    ///
    /// [`Pool::new`]: crate::Pool::new
    ///
    /// # Errors
    ///
    /// [`PoolError::NoChunkFits`] for `max == 0`, [`PoolError::ChunkTooLarge`] when
    /// `max` chunks overflow the address space, [`PoolError::Pages`] when the source
    /// refuses the reservation.
    ///
    /// ```
    /// use bento_pages::HeapPages;
    /// use bento_primitives::{GrowingPool, PoolError};
    /// use core::alloc::Layout;
    ///
    /// let err = GrowingPool::with_source(HeapPages::new(), Layout::new::<u8>(), 0);
    /// assert!(matches!(err, Err(PoolError::NoChunkFits { .. })));
    /// ```
    pub fn with_source(source: P, chunk: Layout, max: usize) -> Result<Self, PoolError> {
        let (stride, align) = Geometry::stride(chunk, size_of::<usize>(), align_of::<usize>())?;
        if max == 0 {
            return Err(no_chunk_fits(0, stride, align));
        }
        let page = source.page_alignment();
        let too_large = PoolError::ChunkTooLarge {
            size: chunk.size(),
            align: chunk.align(),
        };
        let bytes = max.checked_mul(stride).ok_or(too_large)?;
        let reserved = align_up(bytes, page)
            .filter(|&r| r <= isize::MAX as usize)
            .ok_or(too_large)?;
        let base = source.reserve(reserved, align.max_with(page))?;
        Ok(Self {
            list: FreeList::new(Geometry::new(base, stride, align, max), 0),
            reserved,
            committed: Cell::new(0),
            source,
        })
    }

    /// Takes a chunk, committing more pages when the high-water mark reaches the
    /// committed part; `None` when all `max` chunks are in use or the source refuses
    /// to commit.
    ///
    /// ```
    /// use bento_pages::HeapPages;
    /// use bento_primitives::GrowingPool;
    /// use core::alloc::Layout;
    ///
    /// let pool = GrowingPool::with_source(HeapPages::new(), Layout::new::<u64>(), 2).unwrap();
    /// let (a, b) = (pool.alloc().unwrap(), pool.alloc().unwrap());
    /// assert_eq!(pool.alloc(), None);
    /// # unsafe { pool.free(a); pool.free(b) };
    /// ```
    #[inline]
    #[must_use]
    pub fn alloc(&self) -> Option<NonNull<u8>> {
        self.list.alloc().or_else(|| self.grow())
    }

    /// Commits at least the next chunk and takes it.
    #[cold]
    #[inline(never)]
    fn grow(&self) -> Option<NonNull<u8>> {
        let geo = &self.list.geo;
        let usable = self.list.usable();
        if usable == geo.capacity {
            return None;
        }
        let page = self.source.page_alignment();
        let committed = self.committed.get();
        let need = align_up((usable + 1) * geo.stride, page)
            .expect("inside the reservation")
            .min(self.reserved);
        let want = need.max(
            committed
                .saturating_add(GROWING_POOL_COMMIT_STEP)
                .min(self.reserved),
        );
        let target = if self.commit(committed, want) {
            want
        } else if need < want && self.commit(committed, need) {
            need
        } else {
            return None;
        };
        self.committed.set(target);
        self.list
            .set_usable((target / geo.stride).min(geo.capacity));
        self.list.take_fresh()
    }

    /// Commits `[from, to)` of the reservation (page boundaries, above the committed
    /// part); false when the source refuses.
    fn commit(&self, from: usize, to: usize) -> bool {
        debug_assert!(from == self.committed.get() && from < to && to <= self.reserved);
        // SAFETY: `from` and `to` are page boundaries inside the reservation (the base is
        // page-aligned; `to` is a page multiple, or the reservation's end, itself one),
        // `from < to`, and the range is not committed.
        unsafe { self.source.commit(self.list.geo.base.add(from), to - from) }.is_ok()
    }

    /// Gives a chunk back.
    ///
    /// # Safety
    ///
    /// As [`Pool::free`](crate::Pool::free): `chunk` came from this pool and is not free;
    /// debug builds check it.
    ///
    /// ```
    /// use bento_pages::HeapPages;
    /// use bento_primitives::GrowingPool;
    /// use core::alloc::Layout;
    ///
    /// let pool = GrowingPool::with_source(HeapPages::new(), Layout::new::<u64>(), 8).unwrap();
    /// let a = pool.alloc().unwrap();
    /// // SAFETY: a live chunk of `pool`, freed once.
    /// unsafe { pool.free(a) };
    /// assert_eq!(pool.in_use(), 0);
    /// ```
    #[inline]
    pub unsafe fn free(&self, chunk: NonNull<u8>) {
        // SAFETY: the caller's contract is the list's.
        unsafe { self.list.free(chunk) }
    }

    /// Decommits the whole pages above the highest chunk in use and returns the bytes
    /// given back. Sorts the free list by address on the way (so the lowest chunks go
    /// out first afterwards) and lowers the high-water mark to just above the highest
    /// chunk in use. O(f log f) for `f` free chunks.
    ///
    /// ```
    /// use bento_pages::HeapPages;
    /// use bento_primitives::GrowingPool;
    /// use core::alloc::Layout;
    ///
    /// let pages = HeapPages::new();
    /// let pool = GrowingPool::with_source(pages, Layout::new::<[u8; 64]>(), 4096).unwrap();
    /// let chunks: Vec<_> = (0..1024).map(|_| pool.alloc().unwrap()).collect();
    /// for c in &chunks[100..] {
    ///     // SAFETY: live chunks of `pool`, freed once.
    ///     unsafe { pool.free(*c) };
    /// }
    /// pool.shrink();
    /// // 100 chunks of 64 bytes live in the first two pages.
    /// assert_eq!(pool.committed(), 2 * 4096);
    /// # for c in &chunks[..100] { unsafe { pool.free(*c) } }
    /// ```
    pub fn shrink(&self) -> usize {
        let geo = &self.list.geo;
        let keep = self.list.lower_high_water();
        let keep_bytes = align_up(keep * geo.stride, self.source.page_alignment())
            .expect("inside the reservation")
            .min(self.reserved);
        let committed = self.committed.get();
        if keep_bytes >= committed {
            return 0;
        }
        self.list
            .set_usable((keep_bytes / geo.stride).min(geo.capacity));
        // SAFETY: `[keep_bytes, committed)` is page-aligned, committed, inside the
        // reservation, and holds no chunk below the lowered high-water mark (chunks
        // from `keep` up are off the free list and above `fresh`, and the limit is
        // now below the range), so nothing reads it until it is committed again.
        unsafe {
            self.source
                .decommit(geo.base.add(keep_bytes), committed - keep_bytes);
        }
        self.committed.set(keep_bytes);
        committed - keep_bytes
    }

    /// Bytes committed now.
    ///
    /// ```
    /// use bento_pages::HeapPages;
    /// use bento_primitives::GrowingPool;
    /// use core::alloc::Layout;
    ///
    /// let pool = GrowingPool::with_source(HeapPages::new(), Layout::new::<u64>(), 10).unwrap();
    /// let a = pool.alloc().unwrap();
    /// assert!(pool.committed() >= 8);
    /// # unsafe { pool.free(a) };
    /// ```
    #[must_use]
    pub fn committed(&self) -> usize {
        self.committed.get()
    }

    /// Bytes of address space reserved: `max` chunks, rounded up to pages.
    ///
    /// ```
    /// use bento_pages::{HeapPages, PageSource};
    /// use bento_primitives::GrowingPool;
    /// use core::alloc::Layout;
    ///
    /// let pages = HeapPages::new();
    /// let page = pages.page_size();
    /// let pool = GrowingPool::with_source(pages, Layout::new::<u64>(), 10).unwrap();
    /// assert_eq!(pool.reserved(), page);
    /// ```
    #[must_use]
    pub fn reserved(&self) -> usize {
        self.reserved
    }

    free_list_accessors! {
        /// The most chunks the pool can hold (`max`).
        ///
        /// ```
        /// use bento_pages::HeapPages;
        /// use bento_primitives::GrowingPool;
        /// use core::alloc::Layout;
        ///
        /// let pool = GrowingPool::with_source(HeapPages::new(), Layout::new::<u64>(), 77)
        ///     .unwrap();
        /// assert_eq!(pool.capacity(), 77);
        /// ```
        fn capacity;

        /// How many chunks can still be handed out (if the source commits them).
        ///
        /// O(1) in debug builds and with the `counters` feature, which count every
        /// allocation and free; otherwise the pool keeps no count (it would cost each
        /// operation a read-modify-write) and this walks the free list, O(free chunks).
        ///
        /// ```
        /// use bento_pages::HeapPages;
        /// use bento_primitives::GrowingPool;
        /// use core::alloc::Layout;
        ///
        /// let pool = GrowingPool::with_source(HeapPages::new(), Layout::new::<u64>(), 10)
        ///     .unwrap();
        /// let a = pool.alloc().unwrap();
        /// assert_eq!(pool.available(), 9);
        /// # unsafe { pool.free(a) };
        /// ```
        fn available;

        /// How many chunks are in use.
        ///
        /// O(1) in debug builds and with the `counters` feature, which count every
        /// allocation and free; otherwise the pool keeps no count (it would cost each
        /// operation a read-modify-write) and this walks the free list, O(free chunks).
        ///
        /// ```
        /// use bento_pages::HeapPages;
        /// use bento_primitives::GrowingPool;
        /// use core::alloc::Layout;
        ///
        /// let pool = GrowingPool::with_source(HeapPages::new(), Layout::new::<u64>(), 10)
        ///     .unwrap();
        /// assert_eq!(pool.in_use(), 0);
        /// ```
        fn in_use;

        /// The size and alignment of every chunk (after rounding).
        ///
        /// ```
        /// use bento_pages::HeapPages;
        /// use bento_primitives::GrowingPool;
        /// use core::alloc::Layout;
        ///
        /// let pool = GrowingPool::with_source(HeapPages::new(), Layout::new::<[u8; 20]>(), 10)
        ///     .unwrap();
        /// assert_eq!(pool.chunk_layout().size(), 24);
        /// ```
        fn chunk_layout;
    }

    /// The page source.
    ///
    /// ```
    /// use bento_pages::{HeapPages, Metered};
    /// use bento_primitives::GrowingPool;
    /// use core::alloc::Layout;
    ///
    /// let pool = GrowingPool::with_source(Metered::new(HeapPages::new()), Layout::new::<u64>(), 10)
    ///     .unwrap();
    /// let a = pool.alloc().unwrap();
    /// assert_eq!(pool.source().stats().committed, pool.committed());
    /// # unsafe { pool.free(a) };
    /// ```
    #[must_use]
    pub fn source(&self) -> &P {
        &self.source
    }

    /// Sets what the debug checks call on misuse (see
    /// [`Pool::set_misuse_hook`](crate::Pool::set_misuse_hook)).
    ///
    /// ```
    /// use bento_pages::HeapPages;
    /// use bento_primitives::{GrowingPool, Misuse};
    /// use core::alloc::Layout;
    ///
    /// fn quiet(_: &Misuse<'_>) {}
    /// let mut pool = GrowingPool::with_source(HeapPages::new(), Layout::new::<u64>(), 10)
    ///     .unwrap();
    /// pool.set_misuse_hook(quiet);
    /// ```
    pub fn set_misuse_hook(&mut self, hook: MisuseHook) {
        self.list.hook = hook;
    }

    /// Walks the free list (see [`Pool::validate`](crate::Pool::validate)) and checks
    /// that the chunks below the limit lie in the committed part, which is whole pages
    /// inside the reservation.
    ///
    /// # Errors
    ///
    /// [`PoolCorruption`] naming what is broken.
    ///
    /// ```
    /// use bento_pages::HeapPages;
    /// use bento_primitives::GrowingPool;
    /// use core::alloc::Layout;
    ///
    /// let pool = GrowingPool::with_source(HeapPages::new(), Layout::new::<u64>(), 10).unwrap();
    /// assert_eq!(pool.validate().unwrap().capacity, 10);
    /// ```
    pub fn validate(&self) -> Result<PoolReport, PoolCorruption> {
        let committed = self.committed.get();
        if !committed.is_multiple_of(self.source.page_size()) || committed > self.reserved {
            return Err(PoolCorruption::Bounds(
                "the committed part is not whole pages of the reservation",
            ));
        }
        if self.list.usable() * self.list.geo.stride > committed {
            return Err(PoolCorruption::Bounds(
                "usable chunks lie above the committed part",
            ));
        }
        self.list.validate()
    }

    /// The chunks in use, in address order (see
    /// [`Pool::live_chunks`](crate::Pool::live_chunks)).
    ///
    /// ```
    /// use bento_pages::HeapPages;
    /// use bento_primitives::GrowingPool;
    /// use core::alloc::Layout;
    ///
    /// let mut pool = GrowingPool::with_source(HeapPages::new(), Layout::new::<u64>(), 10)
    ///     .unwrap();
    /// let a = pool.alloc().unwrap();
    /// assert_eq!(pool.live_chunks().len(), 1);
    /// # unsafe { pool.free(a) };
    /// ```
    pub fn live_chunks(&mut self) -> LeakList<'_> {
        self.list.live_chunks()
    }
}

impl<P: PageSource> fmt::Debug for GrowingPool<P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GrowingPool")
            .field("list", &self.list)
            .field("committed", &self.committed.get())
            .field("reserved", &self.reserved)
            .finish_non_exhaustive()
    }
}

/// Debug builds report the chunks still in use; then the pages are decommitted and
/// the reservation released (by a guard, so that a report that panics leaks nothing).
impl<P: PageSource> Drop for GrowingPool<P> {
    fn drop(&mut self) {
        /// Gives the pool's memory back when dropped.
        struct GiveBack<'a, P: PageSource>(&'a GrowingPool<P>);

        impl<P: PageSource> Drop for GiveBack<'_, P> {
            fn drop(&mut self) {
                let pool = self.0;
                let committed = pool.committed.get();
                let base = pool.list.geo.base;
                // SAFETY: `[base, base + committed)` is the committed part, whole pages
                // of the reservation, and the reservation is ours; the pool is being
                // dropped, which ends every borrow, so nothing uses its memory any more.
                unsafe {
                    if committed > 0 {
                        pool.source.decommit(base, committed);
                    }
                    pool.source.release(base, pool.reserved);
                }
            }
        }

        let _give_back = GiveBack(self);
        // The leak list reads chunk memory: before the guard gives it back.
        self.list.report_leaks();
    }
}

// SAFETY: forwards to the list (whose chunks below the limit are committed memory),
// committing more first when it is empty.
unsafe impl<P: PageSource> RawAlloc for GrowingPool<P> {
    #[inline]
    fn alloc_raw(&self, layout: Layout) -> Result<NonNull<u8>, AllocError> {
        match self.list.alloc_raw(layout) {
            Err(_) if layout.size() != 0 && self.list.geo.fits(layout) => {
                self.grow().ok_or(AllocError)
            }
            done => done,
        }
    }

    #[inline]
    unsafe fn dealloc_raw(&self, ptr: NonNull<u8>, layout: Layout) {
        // SAFETY: the caller's contract.
        unsafe { self.list.dealloc_raw(ptr, layout) }
    }

    unsafe fn resize_in_place(&self, ptr: NonNull<u8>, old: Layout, new_size: usize) -> bool {
        // SAFETY: the caller's contract.
        unsafe { self.list.resize_in_place(ptr, old, new_size) }
    }
}

impl_allocator!(impl['a, P: PageSource] for &'a GrowingPool<P>);
