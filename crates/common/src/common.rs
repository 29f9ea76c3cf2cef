//! [`CommonAllocator`]: the lazy start, routing, and the entry points.

use core::alloc::{GlobalAlloc, Layout};
use core::cell::UnsafeCell;
use core::fmt;
use core::mem::MaybeUninit;
use core::ptr::NonNull;

use bento_align::Alignment;
use bento_pages::{CommitCache, Metered, PageSource, RawAlloc};
use bento_space::MemorySpace;

use crate::config::{CommonConfig, CommonError, MAX_CLASSES, Routing, SMALL_ALIGN, SizeClasses};
use crate::layer::{Layer, RegionPages};
use crate::map::NOBODY;
use crate::region::{Class, ClassRuns, General, Region};
use crate::sync::{AtomicPtr, AtomicU8, Ordering, spin_loop};
use crate::thread::{MEDIUM_BINS, is_medium, medium_bin};
use crate::{AllocError, Misuse, MisuseHook};

/// The most regions an allocator has: 32 small classes, the large region and the 32
/// medium bins.
pub(crate) const MAX_REGIONS: usize = MAX_CLASSES + 1 + MEDIUM_BINS;

/// The start states.
const UNINIT: u8 = 0;
const STARTING: u8 = 1;
const READY: u8 = 2;
const FAILED: u8 = 3;

macro_rules! define_common {
    ($($default:tt)*) => {
        /// The common allocator: a region (a memory space behind its own lock) for each
        /// small size class and one for everything larger, for all the memory that
        /// does not want an allocator of its own.
        ///
        /// It starts on first use, without allocating: its tables and regions live in
        /// one block from its page source. `&CommonAllocator` is an allocator-api2
        /// `Allocator`, and a `static` one is a `#[global_allocator]`:
        ///
        /// ```
        /// use bento_common::CommonAllocator;
        ///
        /// #[global_allocator]
        /// static GLOBAL: CommonAllocator = CommonAllocator::new();
        ///
        /// let v: Vec<u32> = (0..1000).collect();
        /// assert_eq!(v.iter().sum::<u32>(), 499_500);
        /// assert!(GLOBAL.stats().live_blocks >= 1);
        /// ```
        ///
        /// Requests of up to 4 KiB aligned to at most 16 go to the region of their
        /// class (20 small classes to 256 bytes, then 8 medium bins an octave), which
        /// carves its blocks from runs of one size; the rest go to the large region, a
        /// memory space (see [`Routing`]). Any pointer's region is found in O(1)
        /// through the region map, so [`free`](Self::free) needs no size.
        pub struct CommonAllocator<P: PageSource $($default)*> {
            // Invariant: null until `state` is `READY`; then the allocator's block,
            // built by `start`, until drop.
            inner: AtomicPtr<Inner<P>>,
            state: AtomicU8,
            // Invariant: initialised while `state` is `UNINIT`; the thread that moves
            // `state` to `STARTING` takes it (the page source moves into the block).
            config: UnsafeCell<MaybeUninit<CommonConfig<P>>>,
            // Invariant: written by the starting thread before it stores `FAILED`, read
            // only after `FAILED` is seen.
            error: UnsafeCell<Option<CommonError>>,
        }
    };
}

#[cfg(all(feature = "os", any(unix, windows)))]
define_common!(= bento_pages::SystemPages);
#[cfg(not(all(feature = "os", any(unix, windows))))]
define_common!();

// SAFETY: the block is shared between threads by design: each region's state is
// reached under its lock, the layer's under its own, and the rest of the block is
// read-only after the start; the config moves to the one starting thread.
unsafe impl<P: PageSource + Send + Sync> Sync for CommonAllocator<P> {}
// SAFETY: as above; moving the allocator moves the block's ownership with it.
unsafe impl<P: PageSource + Send + Sync> Send for CommonAllocator<P> {}

/// The allocator's block: what exists once it has started.
///
/// Its regions, in the order of the figures (region id = index + 1): under
/// `Routing::BySize` the small classes, the large region, then the 32 medium bins;
/// under `Routing::Contention` the general regions alone.
pub(crate) struct Inner<P: PageSource> {
    pub(crate) layer: Layer<P>,
    classes: SizeClasses,
    routing: Routing,
    pub(crate) misuse: MisuseHook,
    /// The per-thread front end's bins and registry.
    pub(crate) fronts: crate::thread::Fronts,
    /// Requests of at least this size get a dedicated segment in a general region.
    dedicated: usize,
    /// Whether a free without a layout is probed (`probe_class`, `probe_general`):
    /// in release builds (debug builds check anyway), over a source whose reserved
    /// memory reads.
    probe_frees: bool,
    /// The block's own size.
    pub(crate) block_bytes: usize,
    /// What the commit cache's slot table took from the source.
    pub(crate) table_bytes: usize,
    /// The figures index of the first general region: the number of small classes.
    first_general: usize,
    // Invariant: `generals` points at `general_count` initialised general regions in
    // the block and `class_regions` at `class_count` class regions (the small
    // classes in order, then the medium bins), after `Inner` so that a reference to
    // `Inner` stays small.
    pub(crate) general_count: usize,
    generals: NonNull<General<P>>,
    pub(crate) class_count: usize,
    class_regions: NonNull<Class<P>>,
}

#[cfg(not(bento_loom))]
macro_rules! constructor {
    ($(#[$meta:meta])* $vis:vis fn $name:ident($($arg:ident: $ty:ty),*) -> $ret:ty $body:block) => {
        $(#[$meta])* $vis const fn $name($($arg: $ty),*) -> $ret $body
    };
}

#[cfg(bento_loom)]
macro_rules! constructor {
    ($(#[$meta:meta])* $vis:vis fn $name:ident($($arg:ident: $ty:ty),*) -> $ret:ty $body:block) => {
        $(#[$meta])* $vis fn $name($($arg: $ty),*) -> $ret $body
    };
}

#[cfg(all(feature = "os", any(unix, windows)))]
impl CommonAllocator {
    constructor! {
        /// An allocator of [`CommonConfig::DEFAULT`] shape over the OS's pages. It
        /// reserves nothing until the first allocation (`const`, so that it can be a
        /// `static`; not `const` under loom).
        ///
        /// ```
        /// use bento_common::CommonAllocator;
        ///
        /// static COMMON: CommonAllocator = CommonAllocator::new();
        /// let b = allocator_api2::boxed::Box::new_in(7u64, &COMMON);
        /// assert_eq!(*b, 7);
        /// ```
        #[must_use]
        pub fn new() -> Self {
            Self::with_config(CommonConfig::DEFAULT)
        }
    }
}

#[cfg(all(feature = "os", any(unix, windows)))]
impl Default for CommonAllocator {
    fn default() -> Self {
        Self::new()
    }
}

impl<P: PageSource> CommonAllocator<P> {
    constructor! {
        /// An allocator of `config`'s shape; nothing is checked or reserved until the
        /// first allocation (or [`init`](Self::init)).
        ///
        /// ```
        /// use bento_common::{CommonAllocator, CommonConfig, Routing};
        ///
        /// static COMMON: CommonAllocator =
        ///     CommonAllocator::with_config(CommonConfig::DEFAULT.with_routing(Routing::Contention { regions: 4 }));
        /// let v = allocator_api2::vec![in &COMMON; 1u8; 100];
        /// assert_eq!(v.len(), 100);
        /// ```
        #[must_use]
        pub fn with_config(config: CommonConfig<P>) -> Self {
            Self {
                inner: AtomicPtr::new(core::ptr::null_mut()),
                state: AtomicU8::new(UNINIT),
                config: UnsafeCell::new(MaybeUninit::new(config)),
                error: UnsafeCell::new(None),
            }
        }
    }

    /// Starts the allocator now if it has not started: checks the configuration,
    /// reserves its block and makes its regions. Allocations do this on first use;
    /// calling it first reports a bad configuration or a refusing source, after
    /// which every allocation fails.
    ///
    /// # Errors
    ///
    /// [`CommonError`] for a bad configuration or a page source that refuses the
    /// allocator's block.
    ///
    /// ```
    /// use bento_common::CommonAllocator;
    ///
    /// let common = CommonAllocator::new();
    /// assert_eq!(common.init(), Ok(()));
    /// // 20 small classes, the large region and 32 medium bins.
    /// assert_eq!(common.stats().regions().len(), 53);
    /// ```
    pub fn init(&self) -> Result<(), CommonError> {
        self.start().map(|_| ())
    }

    /// The block, starting the allocator first if need be.
    #[inline]
    fn inner(&self) -> Result<&Inner<P>, AllocError> {
        match NonNull::new(self.inner.load(Ordering::Acquire)) {
            // SAFETY: a non-null `inner` is the live block (the field's invariant),
            // shared until `&mut self` drops it.
            Some(inner) => Ok(unsafe { inner.as_ref() }),
            None => self.start().map_err(|_| AllocError),
        }
    }

    /// The block if the allocator has started (figures of an unstarted one are zero).
    fn started(&self) -> Option<&Inner<P>> {
        // SAFETY: as in `inner`.
        NonNull::new(self.inner.load(Ordering::Acquire)).map(|p| unsafe { p.as_ref() })
    }

    /// The atomic start: exactly one thread builds the block; the others wait for it.
    #[cold]
    fn start(&self) -> Result<&Inner<P>, CommonError> {
        loop {
            match self.state.compare_exchange(
                UNINIT,
                STARTING,
                Ordering::Acquire,
                Ordering::Acquire,
            ) {
                Ok(_) => {
                    // SAFETY: moving `state` to `STARTING` gives this thread the config
                    // (the field's invariant); it is taken once and never read again.
                    let config = unsafe { (*self.config.get()).assume_init_read() };
                    return match build(config) {
                        Ok(inner) => {
                            self.inner.store(inner.as_ptr(), Ordering::Release);
                            self.state.store(READY, Ordering::Release);
                            // SAFETY: just built, live until drop.
                            Ok(unsafe { inner.as_ref() })
                        }
                        Err(e) => {
                            // SAFETY: only the starting thread writes it, before `FAILED`.
                            unsafe { *self.error.get() = Some(e) };
                            self.state.store(FAILED, Ordering::Release);
                            Err(e)
                        }
                    };
                }
                Err(READY) => {
                    let inner = self.inner.load(Ordering::Acquire);
                    // SAFETY: `READY` is stored after `inner` (Release/Acquire).
                    return Ok(unsafe { &*inner });
                }
                Err(FAILED) => {
                    // SAFETY: written before `FAILED` was stored; never written again.
                    return Err(unsafe { *self.error.get() }.expect("set before FAILED"));
                }
                Err(_) => spin_loop(),
            }
        }
    }

    /// Allocates a block for `layout` (a zero size gets a dangling pointer).
    ///
    /// # Errors
    ///
    /// [`AllocError`] when the page source has no more memory, or the allocator
    /// could not start.
    ///
    /// ```
    /// use core::alloc::Layout;
    /// use bento_common::CommonAllocator;
    ///
    /// let common = CommonAllocator::new();
    /// let p = common.alloc(Layout::new::<[u8; 24]>()).unwrap();
    /// // SAFETY: live, allocated with this layout.
    /// unsafe { common.dealloc(p, Layout::new::<[u8; 24]>()) };
    /// ```
    #[inline]
    pub fn alloc(&self, layout: Layout) -> Result<NonNull<u8>, AllocError> {
        if let Some(inner) = self.started()
            && let Some(p) = inner.fast_alloc(layout)
        {
            return Ok(p);
        }
        self.alloc_slow(layout)
    }

    /// The hot path of [`alloc`](Self::alloc) alone: a block from the calling
    /// thread's cache, with no lock, no system call (so `errno` is untouched) and no
    /// call out of line; `None` when the cache cannot serve `layout` now (the front
    /// end off, an empty bin, a size above 4 KiB or an alignment above 16), which
    /// [`alloc`](Self::alloc) then does. For a C `malloc` wrapper's fast path.
    ///
    /// ```
    /// use core::alloc::Layout;
    /// use bento_common::CommonAllocator;
    ///
    /// let common = CommonAllocator::new();
    /// let layout = Layout::new::<[u8; 32]>();
    /// let p = common.alloc(layout).unwrap();
    /// // SAFETY: live, freed once: into this thread's bin.
    /// unsafe { common.free(p) };
    /// let q = common.alloc_cached(layout).expect("the block of the bin");
    /// assert_eq!(p, q);
    /// // SAFETY: live, freed once.
    /// unsafe { common.free(q) };
    /// ```
    #[inline]
    pub fn alloc_cached(&self, layout: Layout) -> Option<NonNull<u8>> {
        self.started()?.fast_alloc(layout)
    }

    /// The hot path of [`free`](Self::free) alone: true when the block went into the
    /// calling thread's cache (checked as `free` checks it there; no lock, no system
    /// call, `errno` untouched); false leaves it live, for [`free`](Self::free).
    ///
    /// # Safety
    ///
    /// As for [`free`](Self::free).
    ///
    /// ```
    /// use core::alloc::Layout;
    /// use bento_common::CommonAllocator;
    ///
    /// let common = CommonAllocator::new();
    /// let p = common.alloc(Layout::new::<u64>()).unwrap();
    /// // SAFETY: live; freed by one of the two calls.
    /// unsafe {
    ///     if !common.free_cached(p) {
    ///         common.free(p);
    ///     }
    /// }
    /// ```
    #[inline]
    pub unsafe fn free_cached(&self, ptr: NonNull<u8>) -> bool {
        // SAFETY: the caller's contract.
        self.started()
            .is_some_and(|inner| unsafe { inner.fast_free_unsized(ptr) })
    }

    /// Every allocation the thread's bin does not serve at once.
    #[inline(never)]
    fn alloc_slow(&self, layout: Layout) -> Result<NonNull<u8>, AllocError> {
        if layout.size() == 0 {
            return Ok(bento_pages::dangling(layout));
        }
        self.inner()?.alloc(layout)
    }

    /// Allocates a zeroed block; the memset is skipped for a dedicated segment fresh
    /// from a source whose new pages read as zero.
    ///
    /// # Errors
    ///
    /// As for [`alloc`](Self::alloc).
    ///
    /// ```
    /// use core::alloc::Layout;
    /// use bento_common::CommonAllocator;
    ///
    /// let common = CommonAllocator::new();
    /// let layout = Layout::new::<[u64; 64]>();
    /// let p = common.alloc_zeroed(layout).unwrap();
    /// // SAFETY: 512 zeroed bytes, then freed with their layout.
    /// unsafe {
    ///     assert!(core::slice::from_raw_parts(p.as_ptr(), 512).iter().all(|&b| b == 0));
    ///     common.dealloc(p, layout);
    /// }
    /// ```
    pub fn alloc_zeroed(&self, layout: Layout) -> Result<NonNull<u8>, AllocError> {
        if layout.size() == 0 {
            return Ok(bento_pages::dangling(layout));
        }
        let (p, zero) = self.inner()?.alloc_zeroed(layout)?;
        if !zero {
            // SAFETY: a fresh block of `layout.size()` bytes.
            unsafe { p.write_bytes(0, layout.size()) };
        }
        Ok(p)
    }

    /// Frees a block given its layout: the size says its region.
    ///
    /// In debug builds a pointer the region map does not give to that region is
    /// reported to the misuse hook (abort by default), and nothing is freed.
    ///
    /// # Safety
    ///
    /// `ptr` is a live block of this allocator, allocated (or last resized) with
    /// `layout`, not used afterwards.
    #[inline]
    pub unsafe fn dealloc(&self, ptr: NonNull<u8>, layout: Layout) {
        // A live block exists only once the allocator has started.
        if let Some(inner) = self.started()
            // SAFETY: the caller's contract (a size of 0 has no bin).
            && unsafe { inner.fast_free(ptr, layout) }
        {
            return;
        }
        // SAFETY: the caller's contract.
        unsafe { self.dealloc_slow(ptr, layout) }
    }

    /// Every free the thread's bin does not take at once.
    ///
    /// # Safety
    ///
    /// As for [`dealloc`](Self::dealloc).
    #[inline(never)]
    unsafe fn dealloc_slow(&self, ptr: NonNull<u8>, layout: Layout) {
        if layout.size() == 0 {
            return;
        }
        if let Some(inner) = self.started() {
            // SAFETY: the caller's contract.
            unsafe { inner.dealloc(ptr, layout) }
        } else {
            report_foreign(crate::abort_on_misuse, ptr);
        }
    }

    /// Frees a block without its size: the region map says its region (the C
    /// `free`). A pointer no region owns is reported to the misuse hook.
    ///
    /// Release builds over a source whose reserved memory reads (the OS's, the
    /// heap-backed one) also probe the pointer in O(1) under its region's lock (see
    /// `MemorySpace::probe`): a block freed twice or a pointer inside a block is
    /// reported and nothing is freed. Not probed: a small block that the per-thread
    /// front end takes (it is lock-free). Debug builds walk the segment instead.
    ///
    /// # Safety
    ///
    /// `ptr` is a live block of this allocator, not used afterwards.
    ///
    /// ```
    /// use core::alloc::Layout;
    /// use bento_common::CommonAllocator;
    ///
    /// let common = CommonAllocator::new();
    /// let p = common.alloc(Layout::new::<[u8; 3000]>()).unwrap();
    /// // SAFETY: live.
    /// unsafe { common.free(p) };
    /// assert_eq!(common.stats().live_blocks, 0);
    /// ```
    #[inline]
    pub unsafe fn free(&self, ptr: NonNull<u8>) {
        if let Some(inner) = self.started()
            // SAFETY: the caller's contract (a block no bin takes is `NO_BIN`'s).
            && unsafe { inner.fast_free_unsized(ptr) }
        {
            return;
        }
        // SAFETY: the caller's contract.
        unsafe { self.free_slow(ptr) }
    }

    /// Every free without a layout that the thread's bin does not take at once.
    ///
    /// # Safety
    ///
    /// As for [`free`](Self::free).
    #[inline(never)]
    unsafe fn free_slow(&self, ptr: NonNull<u8>) {
        match self.started() {
            // SAFETY: the caller's contract.
            Some(inner) => unsafe { inner.free(ptr) },
            None => report_foreign(crate::abort_on_misuse, ptr),
        }
    }

    /// The page source, once the allocator has started (it moves into the
    /// allocator's block then).
    ///
    /// ```
    /// use bento_common::CommonAllocator;
    /// use bento_pages::PageSource;
    ///
    /// let common = CommonAllocator::new();
    /// assert!(common.pages().is_none());
    /// common.init().unwrap();
    /// assert!(common.pages().unwrap().page_size() >= 4096);
    /// ```
    pub fn pages(&self) -> Option<&P> {
        self.started().map(|inner| inner.layer.source().inner())
    }

    /// Whether `ptr` lies in memory one of the regions holds (the region map).
    ///
    /// ```
    /// use core::alloc::Layout;
    /// use bento_common::CommonAllocator;
    ///
    /// let common = CommonAllocator::new();
    /// let p = common.alloc(Layout::new::<u32>()).unwrap();
    /// assert!(common.owns(p));
    /// let x = 5;
    /// assert!(!common.owns(core::ptr::NonNull::from(&x).cast()));
    /// // SAFETY: live.
    /// unsafe { common.free(p) };
    /// ```
    pub fn owns(&self, ptr: NonNull<u8>) -> bool {
        self.started()
            .is_some_and(|inner| inner.layer.map.owner(ptr.addr().get()) != NOBODY)
    }

    /// The bytes a live block can hold: its class's size in a class region, its
    /// usable size in a general one.
    ///
    /// # Safety
    ///
    /// `ptr` is a live block of this allocator.
    ///
    /// ```
    /// use core::alloc::Layout;
    /// use bento_common::CommonAllocator;
    ///
    /// let common = CommonAllocator::new();
    /// let p = common.alloc(Layout::new::<[u8; 70]>()).unwrap();
    /// // SAFETY: live.
    /// unsafe {
    ///     assert_eq!(common.usable_size(p), 80);
    ///     common.free(p);
    /// }
    /// ```
    pub unsafe fn usable_size(&self, ptr: NonNull<u8>) -> usize {
        match self.started() {
            // SAFETY: the caller's contract.
            Some(inner) => unsafe { inner.usable_size(ptr) },
            None => 0,
        }
    }

    /// Resizes a block to `new` (size and alignment): where it is when it stays in
    /// its region and the space can (the same small class, or a general region's
    /// in-place resize), else by moving it. On `Err` the block is unchanged.
    ///
    /// # Errors
    ///
    /// [`AllocError`] when the block must move and no memory is to be had.
    ///
    /// # Safety
    ///
    /// `ptr` is a live block of this allocator allocated (or last resized) with
    /// `old`; both sizes are non-zero. The old pointer is not used after `Ok`.
    ///
    /// ```
    /// use core::alloc::Layout;
    /// use bento_common::CommonAllocator;
    ///
    /// let common = CommonAllocator::new();
    /// let old = Layout::new::<[u8; 20]>();
    /// let p = common.alloc(old).unwrap();
    /// let new = Layout::new::<[u8; 24]>();
    /// // SAFETY: live with `old`; replaced by the result.
    /// let q = unsafe { common.resize(p, old, new) }.unwrap();
    /// assert_eq!(p, q); // the same 24-byte class
    /// // SAFETY: live with `new`.
    /// unsafe { common.dealloc(q, new) };
    /// ```
    pub unsafe fn resize(
        &self,
        ptr: NonNull<u8>,
        old: Layout,
        new: Layout,
    ) -> Result<NonNull<u8>, AllocError> {
        let inner = self.inner()?;
        // SAFETY: the caller's contract.
        unsafe { inner.resize(ptr, old, new) }
    }

    /// Resizes a block without its old layout (C's `realloc`): where it is when the
    /// new layout stays in its class region or its general region's space can grow it
    /// there, else by moving it (the bytes it holds, up to `new.size()`, copied). The
    /// pointer is checked as [`usable_size`](Self::usable_size) checks it; on `Err`
    /// the block is unchanged.
    ///
    /// # Errors
    ///
    /// [`AllocError`] when the block must move and no memory is to be had, or when
    /// the pointer is not a live block (reported to the misuse hook first).
    ///
    /// # Safety
    ///
    /// `ptr` is a live block of this allocator; `new` has a non-zero size. The old
    /// pointer is not used after `Ok`.
    ///
    /// ```
    /// use core::alloc::Layout;
    /// use bento_common::CommonAllocator;
    ///
    /// let common = CommonAllocator::new();
    /// let p = common.alloc(Layout::from_size_align(100, 64).unwrap()).unwrap();
    /// // SAFETY: live; replaced by the result.
    /// let q = unsafe { common.realloc(p, Layout::from_size_align(5000, 16).unwrap()) }.unwrap();
    /// // SAFETY: live.
    /// unsafe {
    ///     assert!(common.usable_size(q) >= 5000);
    ///     common.free(q);
    /// }
    /// ```
    pub unsafe fn realloc(&self, ptr: NonNull<u8>, new: Layout) -> Result<NonNull<u8>, AllocError> {
        let Some(inner) = self.started() else {
            report_foreign(crate::abort_on_misuse, ptr);
            return Err(AllocError);
        };
        // SAFETY: the caller's contract.
        unsafe { inner.realloc_unsized(ptr, new) }
    }

    /// Takes every lock of the allocator and keeps it, in a fixed order: each region
    /// in turn, the registry of threads' caches, the region map's, then the commit
    /// cache's (the order every path that holds two of them takes them in). For a `pthread_atfork` prepare handler:
    /// with every lock held by the forking thread, the child inherits none held by a
    /// thread it does not have. [`unlock_all`](Self::unlock_all) gives them back. An
    /// allocator that has not started starts first (so that none can start while
    /// the locks are held); one that cannot start takes none.
    ///
    /// The per-thread front end takes no lock; a program that forks with the front
    /// end on may lose the blocks other threads' caches hold, in the child (never
    /// corrupting it).
    ///
    /// ```
    /// use core::alloc::Layout;
    /// use bento_common::CommonAllocator;
    ///
    /// let common = CommonAllocator::new();
    /// let p = common.alloc(Layout::new::<u64>()).unwrap();
    /// common.lock_all();
    /// // ... fork here ...
    /// // SAFETY: taken just above by this thread.
    /// unsafe { common.unlock_all() };
    /// // SAFETY: live.
    /// unsafe { common.free(p) };
    /// ```
    pub fn lock_all(&self) {
        if let Ok(inner) = self.inner() {
            inner.lock_regions();
            inner.fronts.raw_lock().lock();
            inner.layer.raw_lock().lock();
            inner.layer.cache.hold_lock();
        }
    }

    /// Gives back the locks [`lock_all`](Self::lock_all) took, in the reverse order.
    ///
    /// # Safety
    ///
    /// The caller must hold every lock through `lock_all`: this thread, or, in a
    /// child process forked while they were held, the child's only thread.
    pub unsafe fn unlock_all(&self) {
        if let Some(inner) = self.started() {
            // SAFETY: the caller's contract: each lock is held, by `lock_all`.
            unsafe {
                inner.layer.cache.release_lock();
                inner.layer.raw_lock().unlock();
                inner.fronts.raw_lock().unlock();
                inner.unlock_regions();
            }
        }
    }

    /// Gives back what the allocator keeps for reuse: the calling thread's cache,
    /// every class region's empty runs, the large region's cached blocks and the
    /// commit cache's parked pages and spare segments. Returns the bytes of blocks and pages given back.
    ///
    /// ```
    /// use core::alloc::Layout;
    /// use bento_common::CommonAllocator;
    ///
    /// let common = CommonAllocator::new();
    /// let layout = Layout::new::<[u8; 32]>();
    /// let p = common.alloc(layout).unwrap();
    /// // SAFETY: live.
    /// unsafe { common.dealloc(p, layout) };
    /// common.trim();
    /// assert_eq!(common.stats().reserved, 0);
    /// ```
    pub fn trim(&self) -> usize {
        self.started().map_or(0, Inner::trim)
    }

    /// One frame passed: freed pages and segments the commit cache kept and nobody
    /// took back for the decay time go back to the source (see
    /// [`Retention`](bento_pages::Retention)); under a decay in milliseconds only, the
    /// clock is read. When the decay takes a step, the freed blocks kept for reuse
    /// (the calling thread's cache, the regions' lists and their spaces' block
    /// caches) are freed for good too, so their pages decay in turn. Returns the bytes given back. Call it once a
    /// frame, from any thread; an allocator nobody ticks decays by the OS clock on its
    /// slow paths instead.
    ///
    /// ```
    /// use core::alloc::Layout;
    /// use bento_common::{CommonAllocator, CommonConfig};
    /// use bento_pages::{Decay, Retention};
    ///
    /// let config = CommonConfig::DEFAULT.with_retention(Retention::Decay(Decay::frames(2)));
    /// let common = CommonAllocator::with_config(config);
    /// let layout = Layout::from_size_align(1 << 20, 16).unwrap();
    /// let p = common.alloc(layout).unwrap();
    /// // SAFETY: live, freed once.
    /// unsafe { common.dealloc(p, layout) };
    /// assert!(common.kept() >= 1 << 20); // kept for the next megabyte
    /// common.tick();
    /// common.tick();
    /// assert_eq!(common.kept(), 0); // two frames unused: given back
    /// ```
    pub fn tick(&self) -> usize {
        self.started()
            .map_or(0, |inner| inner.decay_with(CommitCache::tick))
    }

    /// For a program that does not tick: reads the clock and, when the decay time is
    /// up, gives back what [`tick`](Self::tick) would (an idle hook; the allocator makes
    /// the same check on its slow paths). Returns the bytes given back.
    ///
    /// ```
    /// assert_eq!(bento_common::CommonAllocator::new().decay(), 0);
    /// ```
    pub fn decay(&self) -> usize {
        self.started()
            .map_or(0, |inner| inner.decay_with(CommitCache::decay))
    }

    /// Tells the commit cache the program's phase: what a level's unload frees is
    /// kept through the next load (see [`Phase`](bento_pages::Phase)).
    ///
    /// ```
    /// use bento_common::CommonAllocator;
    /// use bento_pages::Phase;
    ///
    /// let common = CommonAllocator::new();
    /// common.phase(Phase::Unload);
    /// common.phase(Phase::Play);
    /// ```
    pub fn phase(&self, phase: bento_pages::Phase) {
        if let Some(inner) = self.started() {
            inner.layer.cache.phase(phase);
        }
    }

    /// Bytes of freed memory kept committed for reuse now, read without a lock.
    ///
    /// ```
    /// assert_eq!(bento_common::CommonAllocator::new().kept(), 0);
    /// ```
    #[inline]
    pub fn kept(&self) -> usize {
        self.started().map_or(0, |inner| inner.layer.cache.kept())
    }

    /// Sets the commit cache's retention policy from now on, starting the allocator
    /// if it has not started (a refused start leaves every allocation failing, as
    /// it would at the first allocation).
    ///
    /// ```
    /// use bento_common::CommonAllocator;
    /// use bento_pages::Retention;
    ///
    /// let common = CommonAllocator::new();
    /// common.set_retention(Retention::Eager);
    /// assert!(common.stats().cache.limit <= 8 << 20);
    /// ```
    pub fn set_retention(&self, retention: bento_pages::Retention) {
        if let Ok(inner) = self.inner() {
            inner.layer.cache.set_retention(retention);
        }
    }

    /// The allocator's figures, per region and in total (all zero before it starts).
    ///
    /// Exact when no other thread allocates or frees meanwhile. While others do, each
    /// region is read at one moment, under its lock, with the blocks the threads'
    /// caches keep of it: a block moving between a region and a cache is never
    /// counted twice or missed, so a region's live figure is what the threads held of
    /// it while it was read (a thread's blocks counted as they were when its cache was
    /// read), give or take the blocks freed meanwhile on another thread than the one
    /// that allocated them. The totals add regions read one after another.
    pub fn stats(&self) -> crate::CommonStats {
        self.started()
            .map_or_else(crate::CommonStats::default, Inner::stats)
    }

    /// The figures as a table, one row per region: what a program prints on a debug
    /// key or at exit.
    ///
    /// ```
    /// use core::alloc::Layout;
    /// use bento_common::CommonAllocator;
    ///
    /// let common = CommonAllocator::new();
    /// let p = common.alloc(Layout::new::<[u8; 100]>()).unwrap();
    /// let table = common.report().to_string();
    /// assert!(table.contains("112"));
    /// // SAFETY: live.
    /// unsafe { common.free(p) };
    /// ```
    pub fn report(&self) -> crate::CommonReport {
        crate::CommonReport(self.stats())
    }

    /// The live blocks per region, when any is left: the leak report of a test or
    /// a tool at exit.
    ///
    /// ```
    /// use core::alloc::Layout;
    /// use bento_common::CommonAllocator;
    ///
    /// let common = CommonAllocator::new();
    /// let p = common.alloc(Layout::new::<[u8; 8]>()).unwrap();
    /// assert!(common.leaks().unwrap().to_string().contains("1 live block"));
    /// // SAFETY: live.
    /// unsafe { common.free(p) };
    /// assert!(common.leaks().is_none());
    /// ```
    pub fn leaks(&self) -> Option<crate::CommonLeaks> {
        let stats = self.stats();
        (stats.live_blocks > 0).then_some(crate::CommonLeaks(stats))
    }

    /// Checks every region: its space's structures (see
    /// [`MemorySpace::validate`]), its free list, and that the region map gives
    /// each live block to it; returns the figures recomputed by the walk.
    ///
    /// # Errors
    ///
    /// [`Corruption`](crate::Corruption) naming the region and what is wrong.
    ///
    /// ```
    /// use core::alloc::Layout;
    /// use bento_common::CommonAllocator;
    ///
    /// let common = CommonAllocator::new();
    /// let p = common.alloc(Layout::new::<[u8; 40]>()).unwrap();
    /// assert_eq!(common.validate().unwrap().live_blocks, 1);
    /// // SAFETY: live.
    /// unsafe { common.free(p) };
    /// ```
    pub fn validate(&self) -> Result<crate::CommonStats, crate::Corruption> {
        match self.started() {
            Some(inner) => inner.validate(),
            None => Ok(crate::CommonStats::default()),
        }
    }
}

impl<P: PageSource> Drop for CommonAllocator<P> {
    fn drop(&mut self) {
        match self.state.load(Ordering::Acquire) {
            UNINIT => {
                // SAFETY: untaken while `UNINIT` (the field's invariant).
                unsafe { self.config.get_mut().assume_init_drop() };
            }
            READY => {
                let inner =
                    NonNull::new(self.inner.load(Ordering::Acquire)).expect("READY has a block");
                // SAFETY: the block is live until torn down below.
                let live = unsafe { inner.as_ref() };
                live.detach_here();
                if live.fronts.attached() {
                    // Another thread's cache still holds blocks and will flush them
                    // into the block when that thread exits: leak it rather than free
                    // memory a thread will write to.
                    return;
                }
                // SAFETY: the block is ours alone (`&mut self`, and no cache refers to
                // it), and nothing uses it again.
                unsafe { tear_down(inner) };
            }
            _ => {}
        }
    }
}

impl<P: PageSource> fmt::Debug for CommonAllocator<P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = match self.state.load(Ordering::Acquire) {
            UNINIT => "not started",
            READY => "ready",
            FAILED => "failed",
            _ => "starting",
        };
        f.debug_struct("CommonAllocator")
            .field("state", &state)
            .finish_non_exhaustive()
    }
}

/// Reports `misuse` through `hook`, off the hot path.
#[cold]
#[inline(never)]
fn report(hook: MisuseHook, misuse: &Misuse<'_>) {
    hook(misuse);
}

/// Reports `ptr` as owned by no region.
#[cold]
fn report_foreign(hook: MisuseHook, ptr: NonNull<u8>) {
    hook(&Misuse::Foreign { ptr });
}

/// Builds the block for `config`.
fn build<P: PageSource>(config: CommonConfig<P>) -> Result<NonNull<Inner<P>>, CommonError> {
    config.check_shape()?;
    let large = config.large_space();
    let (small_segment, thread_cache) = (config.small_segment, config.thread_cache);
    let CommonConfig {
        pages,
        classes,
        routing,
        commit_cache,
        retention,
        commit_floor,
        misuse,
        ..
    } = config;
    let (general_count, class_count, first_general) = match routing {
        Routing::BySize => (1, classes.len() + MEDIUM_BINS, classes.len()),
        Routing::Contention { regions } => (regions, 0, 0),
    };
    let cache = CommitCache::with_capacity(Metered::new(pages), commit_cache)?;
    cache.set_retention(retention);
    let source = cache.inner();
    let table_bytes = source.stats().committed;
    // The block: `Inner`, the general regions, the class regions, then the region
    // map's top level.
    let generals_at = size_of::<Inner<P>>().next_multiple_of(align_of::<General<P>>());
    let classes_at = (generals_at + general_count * size_of::<General<P>>())
        .next_multiple_of(align_of::<Class<P>>());
    let map_at =
        (classes_at + class_count * size_of::<Class<P>>()).next_multiple_of(align_of::<usize>());
    let map_bytes = crate::map::TOP * size_of::<usize>();
    let bytes = (map_at + map_bytes).next_multiple_of(source.page_size());
    let block = source.reserve(bytes, Alignment::of::<Inner<P>>())?;
    // SAFETY: the whole of a fresh reservation.
    if let Err(e) = unsafe { source.commit(block, bytes) } {
        // SAFETY: nothing of it is committed.
        unsafe { source.release(block, bytes) };
        return Err(e.into());
    }
    if !source.decommitted_reads_zero() {
        // SAFETY: committed above, ours alone.
        unsafe { block.write_bytes(0, bytes) };
    }
    let probe_frees = !cfg!(debug_assertions) && source.commit_is_implicit();
    let this = block.cast::<Inner<P>>().as_ptr();
    // SAFETY: the top level lies in the block after the regions, aligned for
    // pointers, zeroed, and reached only through the map.
    let map = unsafe { crate::map::RegionMap::new(block.add(map_at).cast()) };
    let mut fronts =
        crate::thread::Fronts::new(thread_cache && routing == Routing::BySize, &classes);
    // SAFETY: `this` is aligned and valid for writes of an `Inner` (the block is at
    // least that large). Each field is written once before the block is read.
    unsafe {
        Layer::init(
            &raw mut (*this).layer,
            cache,
            map,
            (4 * small_segment).max(commit_floor),
        );
        (&raw mut (*this).classes).write(classes);
        (&raw mut (*this).routing).write(routing);
        (&raw mut (*this).misuse).write(misuse);
        (&raw mut (*this).dedicated).write(large.segment_threshold);
        (&raw mut (*this).probe_frees).write(probe_frees);
        (&raw mut (*this).block_bytes).write(bytes);
        (&raw mut (*this).table_bytes).write(table_bytes);
        (&raw mut (*this).first_general).write(first_general);
        (&raw mut (*this).general_count).write(0);
        (&raw mut (*this).generals).write(block.add(generals_at).cast());
        (&raw mut (*this).class_count).write(0);
        (&raw mut (*this).class_regions).write(block.add(classes_at).cast());
    }
    // SAFETY: the layer is initialised and lives as long as the block.
    let layer = unsafe { NonNull::new_unchecked(&raw mut (*this).layer) };
    let id = |slot: usize| u8::try_from(slot + 1).expect("at most 65 regions");
    for c in 0..class_count {
        let (block_size, bin) = if c < first_general {
            (classes.size(c), c)
        } else {
            let m = c - first_general;
            (crate::thread::medium_size(m), MAX_CLASSES + m)
        };
        let slot = if c < first_general {
            c
        } else {
            c + general_count
        };
        fronts.route_id(id(slot), bin);
        // SAFETY: the layer outlives the region (torn down after it).
        let pages = unsafe { RegionPages::new(layer, id(slot)) };
        let runs = ClassRuns::new(pages, block_size, small_segment);
        // SAFETY: class region `c` is not made yet; `class_count` follows it.
        unsafe {
            (*this)
                .class_regions
                .add(c)
                .write(Region::new(runs, block_size, id(slot)));
            (*this).class_count = c + 1;
        }
    }
    for g in 0..general_count {
        let slot = first_general + g;
        // SAFETY: the layer outlives the region (torn down after it).
        let pages = unsafe { RegionPages::new(layer, id(slot)) };
        let mut space = match MemorySpace::new(pages, large) {
            Ok(space) => space,
            Err(e) => {
                // SAFETY: the block is whole, with the regions made so far.
                unsafe { tear_down(NonNull::new_unchecked(this)) };
                return Err(e.into());
            }
        };
        space.set_misuse_hook(misuse);
        // SAFETY: general region `g` is not made yet; `general_count` follows it.
        unsafe {
            (*this)
                .generals
                .add(g)
                .write(Region::new(space, 0, id(slot)));
            (*this).general_count = g + 1;
        }
    }
    // SAFETY: written last, before the block is shared.
    unsafe { (&raw mut (*this).fronts).write(fronts) };
    // SAFETY: `this` is the block, non-null.
    Ok(unsafe { NonNull::new_unchecked(this) })
}

/// Drops the regions, gives the map's leaves and the block back, and drops the page
/// layer (which gives its parked pages and spares back, then the source goes).
///
/// # Safety
///
/// `inner` is a block `build` made (whole, or with the regions its counts say),
/// used by nothing else from now on.
unsafe fn tear_down<P: PageSource>(inner: NonNull<Inner<P>>) {
    let this = inner.as_ptr();
    // SAFETY: the caller's contract: the block and its counted regions are live and
    // ours alone. The regions go first (they release their runs and segments
    // through the layer), then the map, then the layer is moved out of the block
    // before the block goes back.
    unsafe {
        for c in 0..(*this).class_count {
            (*this).class_regions.add(c).drop_in_place();
        }
        for g in 0..(*this).general_count {
            (*this).generals.add(g).drop_in_place();
        }
        let layer = &raw mut (*this).layer;
        let leaves = (*layer).leaves.load(crate::sync::Ordering::Relaxed);
        (*layer).map.tear_down((*layer).source(), leaves);
        let bytes = (*this).block_bytes;
        let cache = (&raw const (*layer).cache).read();
        cache.inner().decommit(inner.cast(), bytes);
        cache.inner().release(inner.cast(), bytes);
        drop(cache);
    }
}

/// A region the region map names.
pub(crate) enum Owner<'a, P: PageSource> {
    /// Class region `c` (its index among the class regions).
    Class(usize, &'a Class<P>),
    /// A general region.
    General(&'a General<P>),
}

impl<P: PageSource> Inner<P> {
    /// Class region `c`: the small classes in order, then the medium bins.
    #[inline]
    pub(crate) fn class(&self, c: usize) -> &Class<P> {
        debug_assert!(c < self.class_count);
        // SAFETY: the first `class_count` class regions are initialised (the field's
        // invariant), and every index the routing produces is below it.
        unsafe { self.class_regions.add(c).as_ref() }
    }

    /// General region `g`.
    #[inline]
    pub(crate) fn general(&self, g: usize) -> &General<P> {
        debug_assert!(g < self.general_count);
        // SAFETY: as for `class`.
        unsafe { self.generals.add(g).as_ref() }
    }

    /// The large region (under `BySize`).
    #[inline]
    fn large(&self) -> &General<P> {
        self.general(0)
    }

    /// Every region in the order of the figures (and of the ids, less one): the
    /// small classes, the general regions, then the medium bins.
    pub(crate) fn slots(&self) -> impl Iterator<Item = Owner<'_, P>> {
        (0..self.class_count + self.general_count).map(|slot| self.slot(slot))
    }

    /// The region of figures index `slot`.
    fn slot(&self, slot: usize) -> Owner<'_, P> {
        let first = self.first_general;
        if slot < first {
            Owner::Class(slot, self.class(slot))
        } else if slot < first + self.general_count {
            Owner::General(self.general(slot - first))
        } else {
            let c = slot - self.general_count;
            Owner::Class(c, self.class(c))
        }
    }

    /// The class regions.
    pub(crate) fn class_regions(&self) -> impl Iterator<Item = &Class<P>> {
        (0..self.class_count).map(|c| self.class(c))
    }

    /// The general regions.
    pub(crate) fn generals(&self) -> impl Iterator<Item = &General<P>> {
        (0..self.general_count).map(|g| self.general(g))
    }

    /// The region the region map gives `ptr` to.
    #[inline]
    pub(crate) fn owner(&self, ptr: NonNull<u8>) -> Option<Owner<'_, P>> {
        let id = self.layer.map.owner(ptr.addr().get()) as usize;
        (id != NOBODY as usize && id <= self.class_count + self.general_count)
            .then(|| self.slot(id - 1))
    }

    /// The front end's bin of class region `c`.
    #[inline]
    pub(crate) fn bin_of_class(&self, c: usize) -> usize {
        if c < self.first_general {
            c
        } else {
            MAX_CLASSES + (c - self.first_general)
        }
    }

    /// The class region of the front end's bin `bin`.
    #[inline]
    pub(crate) fn class_of_bin(&self, bin: usize) -> usize {
        if bin < MAX_CLASSES {
            bin
        } else {
            self.first_general + (bin - MAX_CLASSES)
        }
    }

    /// The class region serving a request of `size` bytes (routed, under `BySize`,
    /// aligned to at most `SMALL_ALIGN`): its small class, else its medium bin.
    #[inline]
    fn class_for(&self, size: usize) -> Option<usize> {
        if self.class_count == 0 {
            None
        } else if let Some(class) = self.classes.class_of(size) {
            Some(class)
        } else if is_medium(size) {
            Some(self.first_general + medium_bin(size))
        } else {
            None
        }
    }

    /// The class region `layout` goes to under `BySize`, or `None` for the large
    /// region.
    #[inline]
    fn route(&self, layout: Layout) -> Option<usize> {
        if layout.align() <= SMALL_ALIGN {
            self.class_for(routed_size(layout))
        } else {
            None
        }
    }

    #[inline]
    fn alloc(&self, layout: Layout) -> Result<NonNull<u8>, AllocError> {
        match self.routing {
            Routing::BySize => match self.route(layout) {
                Some(c) => {
                    if self.fronts.enabled
                        && let Some(result) = self.cached_alloc(self.bin_of_class(c))
                    {
                        return result;
                    }
                    self.class(c).lock().take().ok_or(AllocError)
                }
                None => self.large().lock().alloc(layout),
            },
            Routing::Contention { .. } => self.alloc_contended(layout, false).map(|(p, _)| p),
        }
    }

    /// Tries each region in turn from one picked by the thread's stack, and waits
    /// only after a full cycle of failed tries.
    fn alloc_contended(
        &self,
        layout: Layout,
        zeroed: bool,
    ) -> Result<(NonNull<u8>, bool), AllocError> {
        let n = self.general_count;
        let first = thread_hint() % n;
        for k in 0..n {
            if let Some(held) = self.general((first + k) % n).try_lock() {
                return alloc_in(&held, layout, zeroed, self.dedicated);
            }
        }
        alloc_in(&self.general(first).lock(), layout, zeroed, self.dedicated)
    }

    fn alloc_zeroed(&self, layout: Layout) -> Result<(NonNull<u8>, bool), AllocError> {
        match self.routing {
            Routing::BySize => {
                if self.route(layout).is_some() || layout.size() < self.dedicated {
                    return self.alloc(layout).map(|p| (p, false));
                }
                alloc_in(&self.large().lock(), layout, true, self.dedicated)
            }
            Routing::Contention { .. } => self.alloc_contended(layout, true),
        }
    }

    /// # Safety
    ///
    /// As for [`CommonAllocator::dealloc`], with a non-zero size.
    #[inline]
    unsafe fn dealloc(&self, ptr: NonNull<u8>, layout: Layout) {
        let Routing::BySize = self.routing else {
            let Some(Owner::General(region)) = self.owner(ptr) else {
                return report_foreign(self.misuse, ptr);
            };
            // SAFETY: the caller's contract; the map gives the block to `region`.
            return unsafe { region.lock().dealloc(ptr, layout) };
        };
        let Some(c) = self.route(layout) else {
            let large = self.large();
            if cfg!(debug_assertions) && !self.check_owner(ptr, layout, large.id) {
                return;
            }
            // SAFETY: the caller's contract.
            return unsafe { large.lock().dealloc(ptr, layout) };
        };
        let class = self.class(c);
        if cfg!(debug_assertions) && !self.check_owner(ptr, layout, class.id) {
            return;
        }
        // SAFETY: the caller's contract; the size routes it to this class.
        if self.fronts.enabled && unsafe { self.cached_free(self.bin_of_class(c), ptr) } {
            return;
        }
        // SAFETY: as above.
        unsafe { self.free_in_class(class, ptr) }
    }

    /// Frees `ptr` into class region `class` under its lock, probed first in debug
    /// builds and (with `probe_frees`) in release builds; a misuse found is reported
    /// and nothing is freed.
    ///
    /// # Safety
    ///
    /// `ptr` is a live block of `class`, not used afterwards.
    unsafe fn free_in_class(&self, class: &Class<P>, ptr: NonNull<u8>) {
        let mut held = class.lock();
        if (cfg!(debug_assertions) || self.probe_frees)
            && let Err(misuse) = self.probe_class(&held, class, ptr)
        {
            drop(held);
            return report(self.misuse, &misuse);
        }
        // SAFETY: the caller's contract (probed where the build does).
        unsafe { held.give(ptr) }
    }

    /// Whether the region map gives `ptr` to the region of id `id` (debug builds);
    /// reports the misuse otherwise.
    #[cold]
    pub(crate) fn check_owner(&self, ptr: NonNull<u8>, layout: Layout, id: u8) -> bool {
        let owner = self.layer.map.owner(ptr.addr().get());
        if owner == id {
            return true;
        }
        match self.owner(ptr) {
            Some(owner) => {
                let block_size = match owner {
                    Owner::Class(_, class) => class.block,
                    Owner::General(_) => 0,
                };
                (self.misuse)(&Misuse::WrongLayout {
                    ptr,
                    layout,
                    block_size,
                    block_align: SMALL_ALIGN,
                });
            }
            None => report_foreign(self.misuse, ptr),
        }
        false
    }

    /// # Safety
    ///
    /// As for [`CommonAllocator::free`].
    unsafe fn free(&self, ptr: NonNull<u8>) {
        match self.owner(ptr) {
            None => report_foreign(self.misuse, ptr),
            Some(Owner::Class(c, class)) => {
                let bin = self.bin_of_class(c);
                if self.fronts.enabled {
                    let check = self.probe_frees || cfg!(debug_assertions);
                    // SAFETY: the map gives `ptr` to this class region; a block of
                    // it holds at least 16 bytes, readable (`probe_frees`) or ours.
                    if !check || unsafe { self.fronts.plausible(bin, ptr) } {
                        // SAFETY: the caller's contract (checked as the hot path
                        // does); the block goes to its class region's bin marked.
                        unsafe {
                            ptr.cast::<usize>().add(1).write(crate::run::FREED);
                            if self.cached_free(bin, ptr) {
                                return;
                            }
                        }
                    } else if self.held_here(bin, ptr) {
                        return report(self.misuse, &Misuse::DoubleFree { ptr });
                    }
                }
                // SAFETY: as above; probed under the lock.
                unsafe { self.free_in_class(class, ptr) }
            }
            Some(Owner::General(region)) => {
                let held = region.lock();
                if self.probe_frees
                    && let Err(misuse) = self.probe_general(&held, region, ptr)
                {
                    drop(held);
                    return report(self.misuse, &misuse);
                }
                // SAFETY: as above (the space checks in debug builds).
                unsafe { held.free(ptr) }
            }
        }
    }

    /// The checks of `ptr`, freed (or sized) without a layout in class region
    /// `class`, whose lock `held` is: the map still gives `ptr` to it (a free racing
    /// this one may have released its span meanwhile), then its runs' probe.
    fn probe_class(
        &self,
        held: &ClassRuns<P>,
        class: &Class<P>,
        ptr: NonNull<u8>,
    ) -> Result<(), Misuse<'static>> {
        if self.layer.map.owner(ptr.addr().get()) != class.id {
            return Err(Misuse::Foreign { ptr });
        }
        // SAFETY: the map gives `ptr`'s granule to this region, whose lock is held.
        unsafe { held.probe(ptr) }
    }

    /// The release build's checks of `ptr`, freed (or sized) without a layout in
    /// general region `region`, whose lock `held` is: the map still gives `ptr` to
    /// it, then the space's O(1) probe, reading only memory the map gives the
    /// region. The caller reports the misuse found once it has let go of the lock (a
    /// hook may allocate).
    #[inline(always)]
    fn probe_general(
        &self,
        held: &MemorySpace<RegionPages<P>>,
        region: &General<P>,
        ptr: NonNull<u8>,
    ) -> Result<(), Misuse<'static>> {
        let map = &self.layer.map;
        let near = ptr.addr().get();
        // Under the lock no segment of the region comes or goes: an owner read now
        // holds until the probe ends.
        if map.owner(near) != region.id {
            return Err(Misuse::Foreign { ptr });
        }
        // SAFETY: the map gives every address `readable` admits to this region (the
        // granule of `ptr` was checked just above), whose reservations are memory the
        // source reserved (`probe_frees`: reserved memory reads), and reads none
        // outside them.
        unsafe {
            held.probe(ptr, |a| {
                map.same_granule(a, near) || map.owner(a) == region.id
            })
        }
        .map(|_| ())
    }

    /// The bytes a live block can hold; 0 (reported) for a pointer that is not one,
    /// where the build probes.
    ///
    /// # Safety
    ///
    /// As for [`CommonAllocator::usable_size`].
    unsafe fn usable_size(&self, ptr: NonNull<u8>) -> usize {
        match self.owner(ptr) {
            None => {
                report_foreign(self.misuse, ptr);
                0
            }
            Some(Owner::Class(c, class)) => {
                if self.probe_frees || cfg!(debug_assertions) {
                    // SAFETY: a block of a class region holds at least 16 bytes,
                    // readable (`probe_frees`) or the caller's.
                    let marked = unsafe { ptr.cast::<usize>().add(1).read() } == crate::run::FREED;
                    if marked && self.held_here(self.bin_of_class(c), ptr) {
                        report(self.misuse, &Misuse::DoubleFree { ptr });
                        return 0;
                    }
                    let held = class.lock();
                    if let Err(misuse) = self.probe_class(&held, class, ptr) {
                        drop(held);
                        report(self.misuse, &misuse);
                        return 0;
                    }
                }
                class.block
            }
            Some(Owner::General(region)) => {
                let held = region.lock();
                if self.probe_frees
                    && let Err(misuse) = self.probe_general(&held, region, ptr)
                {
                    drop(held);
                    report(self.misuse, &misuse);
                    return 0;
                }
                // SAFETY: the caller's contract (probed in release builds, checked by
                // the space in debug builds); the region owns `ptr`.
                unsafe { held.usable_size(ptr) }
            }
        }
    }

    /// # Safety
    ///
    /// As for [`CommonAllocator::resize`].
    unsafe fn resize(
        &self,
        ptr: NonNull<u8>,
        old: Layout,
        new: Layout,
    ) -> Result<NonNull<u8>, AllocError> {
        // SAFETY: the caller's contract.
        if unsafe { self.resize_in_place(ptr, old, new) } {
            return Ok(ptr);
        }
        let fresh = self.alloc(new)?;
        // SAFETY: `ptr` holds `old.size()` bytes and `fresh` `new.size()`; a fresh
        // block overlaps no live one. Then the old block goes (the caller's contract).
        unsafe {
            core::ptr::copy_nonoverlapping(
                ptr.as_ptr(),
                fresh.as_ptr(),
                old.size().min(new.size()),
            );
            self.dealloc(ptr, old);
        }
        Ok(fresh)
    }

    /// # Safety
    ///
    /// As for [`CommonAllocator::realloc`].
    unsafe fn realloc_unsized(
        &self,
        ptr: NonNull<u8>,
        new: Layout,
    ) -> Result<NonNull<u8>, AllocError> {
        // SAFETY: the caller's contract; 0 is a misuse, reported.
        let usable = unsafe { self.usable_size(ptr) };
        if usable == 0 {
            return Err(AllocError);
        }
        let in_place = match self.owner(ptr) {
            Some(Owner::Class(c, _)) => {
                self.routing == Routing::BySize && self.route(new) == Some(c)
            }
            Some(Owner::General(region)) => {
                (self.routing != Routing::BySize || self.route(new).is_none())
                    && ptr.addr().get().is_multiple_of(new.align())
                    // SAFETY: live in this region (checked above).
                    && unsafe { region.lock().realloc_in_place(ptr, new.size()) }
            }
            None => false,
        };
        if in_place {
            return Ok(ptr);
        }
        let fresh = self.alloc(new)?;
        // SAFETY: `ptr` holds `usable` bytes and `fresh` `new.size()`; a fresh block
        // overlaps no live one. Then the old block goes (the caller's contract).
        unsafe {
            core::ptr::copy_nonoverlapping(ptr.as_ptr(), fresh.as_ptr(), usable.min(new.size()));
            if !self.fast_free_unsized(ptr) {
                self.free(ptr);
            }
        }
        Ok(fresh)
    }

    /// Resizes where the block is, when it stays in its region: the same class, or
    /// a general region's in-place resize. False changes nothing.
    ///
    /// # Safety
    ///
    /// As for [`CommonAllocator::resize`].
    unsafe fn resize_in_place(&self, ptr: NonNull<u8>, old: Layout, new: Layout) -> bool {
        let region = match self.routing {
            Routing::BySize => match (self.route(old), self.route(new)) {
                // The same class: the block already holds `new`, aligned to it.
                (Some(a), Some(b)) => return a == b,
                (None, None) => self.large(),
                _ => return false,
            },
            Routing::Contention { .. } => match self.owner(ptr) {
                Some(Owner::General(region)) => region,
                _ => return false,
            },
        };
        ptr.addr().get().is_multiple_of(new.align())
            // SAFETY: the caller's contract: live in this region.
            && unsafe { region.lock().realloc_in_place(ptr, new.size()) }
    }

    /// Runs `step` on the commit cache (a tick or a look at the clock) and, when it
    /// took a decay step, frees the blocks kept for reuse for good.
    fn decay_with(&self, step: fn(&CommitCache<Metered<P>>) -> usize) -> usize {
        let steps = self.layer.cache.steps();
        let mut freed = step(&self.layer.cache);
        if self.layer.cache.steps() != steps {
            // This thread's own cache first, so that its blocks reach the regions.
            self.detach_here();
            freed += self.trim_regions();
        }
        freed
    }

    /// Makes every class region's empty runs idle and trims every general region's
    /// space; returns the bytes given back. A region that never reserved memory holds
    /// none: its lock is not taken.
    fn trim_regions(&self) -> usize {
        let touched = |id| self.layer.touched(id);
        let classes: usize = self
            .class_regions()
            .filter(|c| touched(c.id))
            .map(|c| c.lock().trim())
            .sum();
        let generals = self.generals().filter(|g| touched(g.id));
        classes + generals.map(|g| g.lock().trim()).sum::<usize>()
    }

    fn trim(&self) -> usize {
        self.detach_here();
        self.trim_regions() + self.layer.cache.trim()
    }

    /// Takes every region's lock, in the order of `lock_all`.
    pub(crate) fn lock_regions(&self) {
        for class in self.class_regions() {
            class.raw_lock().lock();
        }
        for general in self.generals() {
            general.raw_lock().lock();
        }
    }

    /// Gives every region's lock back.
    ///
    /// # Safety
    ///
    /// This thread holds them (`lock_regions`), or is a child's only thread forked
    /// while they were held.
    pub(crate) unsafe fn unlock_regions(&self) {
        // SAFETY: the caller's contract.
        unsafe {
            for general in self.generals() {
                general.raw_lock().unlock();
            }
            for class in self.class_regions() {
                class.raw_lock().unlock();
            }
        }
    }
}

/// The size a request aligned to at most `SMALL_ALIGN` is routed by: its size rounded
/// up to its alignment, so that a request aligned to 16 reaches a class whose blocks
/// are (see `SizeClasses`), never one of 24 bytes whose blocks are aligned to 8.
#[inline(always)]
pub(crate) fn routed_size(layout: Layout) -> usize {
    let mask = layout.align() - 1;
    // A layout's size rounded up to its alignment does not overflow.
    (layout.size() + mask) & !mask
}

/// Allocates `layout` in a general region's space; with `zeroed`, says whether the
/// block is known to read as zero (a dedicated segment fresh from a source whose
/// new pages are zero).
fn alloc_in<P: PageSource>(
    space: &MemorySpace<RegionPages<P>>,
    layout: Layout,
    zeroed: bool,
    dedicated: usize,
) -> Result<(NonNull<u8>, bool), AllocError> {
    if !zeroed || layout.size() < dedicated {
        return space.alloc(layout).map(|p| (p, false));
    }
    let pages = space.pages().expect("a region's space has a source");
    pages.take_fresh();
    let p = space.alloc(layout)?;
    Ok((p, pages.take_fresh()))
}

/// A number that differs between threads without asking the OS: the address of the
/// caller's stack frame, hashed (thread stacks lie megabytes apart).
#[cfg(not(bento_loom))]
#[inline]
fn thread_hint() -> usize {
    let probe = 0u8;
    let addr = core::hint::black_box(&raw const probe).addr();
    ((addr >> 16).wrapping_mul(0x9e37_79b9)) >> 8
}

/// Under loom every thread starts at the first region (a model must be
/// deterministic, and loom's stacks move between runs): the tries then meet.
#[cfg(bento_loom)]
fn thread_hint() -> usize {
    0
}

// SAFETY: every method keeps `Allocator`'s promises through the allocator's own:
// `alloc` returns a fresh block of the layout's size and alignment; `resize_in_place`
// says true only when the block stays in its region and holds `new_size` where it is.
unsafe impl<P: PageSource> RawAlloc for CommonAllocator<P> {
    #[inline]
    fn alloc_raw(&self, layout: Layout) -> Result<NonNull<u8>, AllocError> {
        self.alloc(layout)
    }

    #[inline]
    unsafe fn dealloc_raw(&self, ptr: NonNull<u8>, layout: Layout) {
        // SAFETY: the caller's contract.
        unsafe { self.dealloc(ptr, layout) }
    }

    unsafe fn resize_in_place(&self, ptr: NonNull<u8>, old: Layout, new_size: usize) -> bool {
        let (Ok(inner), Ok(new)) = (self.inner(), Layout::from_size_align(new_size, old.align()))
        else {
            return false;
        };
        // SAFETY: the caller's contract.
        unsafe { inner.resize_in_place(ptr, old, new) }
    }

    unsafe fn resize_raw(
        &self,
        ptr: NonNull<u8>,
        old: Layout,
        new: Layout,
    ) -> Result<NonNull<u8>, AllocError> {
        // SAFETY: the caller's contract.
        unsafe { self.resize(ptr, old, new) }
    }
}

bento_pages::impl_allocator!(impl['a, P: PageSource] for &'a CommonAllocator<P>);

// SAFETY: `alloc` returns a fresh block of the layout (never unwinding: misuse goes to
// the hook, which aborts by default), `dealloc` frees one given its layout, and
// `realloc` keeps the first `min(old, new)` bytes; a zero size never reaches a region.
unsafe impl<P: PageSource + Send + Sync> GlobalAlloc for CommonAllocator<P> {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        CommonAllocator::alloc(self, layout).map_or(core::ptr::null_mut(), NonNull::as_ptr)
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if let Some(ptr) = NonNull::new(ptr) {
            // SAFETY: `GlobalAlloc::dealloc`'s contract is ours.
            unsafe { CommonAllocator::dealloc(self, ptr, layout) }
        }
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        CommonAllocator::alloc_zeroed(self, layout).map_or(core::ptr::null_mut(), NonNull::as_ptr)
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let (Some(ptr), Ok(new)) = (
            NonNull::new(ptr),
            Layout::from_size_align(new_size, layout.align()),
        ) else {
            return core::ptr::null_mut();
        };
        // SAFETY: `GlobalAlloc::realloc`'s contract: live with `layout`, sizes
        // non-zero.
        unsafe { self.resize(ptr, layout, new) }.map_or(core::ptr::null_mut(), NonNull::as_ptr)
    }
}
