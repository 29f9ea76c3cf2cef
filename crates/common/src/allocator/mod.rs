//! [`CommonAllocator`]: the lazy start and the entry points; its upkeep (stats,
//! trim, tick, the fork locks) in [`upkeep`], the idle purger's thread in `purge`
//! (with `std`), and `GlobalAlloc` and the allocator traits in [`global`]. Routing
//! is the block's work (`inner/`).

mod global;
#[cfg(all(feature = "std", not(bento_loom)))]
pub(crate) mod purge;
mod upkeep;

use core::alloc::Layout;
use core::cell::UnsafeCell;
use core::fmt;
use core::mem::MaybeUninit;
use core::ptr::NonNull;

use bento_pages::{AllocError, PageSource};

use crate::config::{CommonConfig, CommonError};
use crate::inner::build::{build, tear_down};
use crate::inner::{Inner, report_foreign};
use crate::layer::map::NOBODY;
use crate::sync::{AtomicPtr, AtomicU8, Ordering};
use bento_pages::lock::spin_loop;

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
        /// memory space (see [`Routing`](crate::Routing)). Any pointer's region is found in O(1)
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

    /// Changes the configuration before the allocator starts: `change` runs on it and
    /// the start uses the result. For what is known only at run time, such as an
    /// environment variable, in an allocator that is a `static`. Returns false, and
    /// runs nothing, once the allocator has started or is starting (another thread's
    /// first allocation); a start that comes meanwhile waits for the change.
    ///
    /// ```
    /// use bento_common::CommonAllocator;
    ///
    /// static COMMON: CommonAllocator = CommonAllocator::new();
    /// // Huge pages where the system offers them (Linux), else the usual pages.
    /// if let Ok(pages) = bento_pages::SystemPages::new().with_huge_pages() {
    ///     assert!(COMMON.configure(|config| config.pages = pages));
    /// }
    /// let b = allocator_api2::boxed::Box::new_in(7u64, &COMMON);
    /// assert!(!COMMON.configure(|_| unreachable!("started")));
    /// # drop(b);
    /// ```
    pub fn configure(&self, change: impl FnOnce(&mut CommonConfig<P>)) -> bool {
        if self
            .state
            .compare_exchange(UNINIT, STARTING, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            return false;
        }
        /// Stores `UNINIT` when dropped, after `change` (or its unwinding).
        struct Reopen<'a>(&'a AtomicU8);
        impl Drop for Reopen<'_> {
            fn drop(&mut self) {
                self.0.store(UNINIT, Ordering::Release);
            }
        }
        let _reopen = Reopen(&self.state);
        // SAFETY: moving `state` from `UNINIT` to `STARTING` gives this thread the
        // config (the field's invariant), initialised while `UNINIT`; it is changed in
        // place (a `change` that panics leaves a valid config: it holds `&mut`) and
        // `UNINIT` is stored after (Release), so the thread that starts next takes
        // the changed config.
        change(unsafe { (*self.config.get()).assume_init_mut() });
        true
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
    fn block(&self) -> Result<&Inner<P>, AllocError> {
        match NonNull::new(self.inner.load(Ordering::Acquire)) {
            // SAFETY: a non-null `inner` is the live block (the field's invariant),
            // shared until `&mut self` drops it.
            Some(inner) => Ok(unsafe { inner.as_ref() }),
            None => self.start().map_err(|_| AllocError),
        }
    }

    /// The block if the allocator has started (stats of an unstarted one are zero).
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
        let inner = self.block()?;
        if !inner.sampling {
            return again(inner, || inner.alloc(layout));
        }
        let profiled = inner.profile_due(layout.size());
        let p = match inner.sampled(layout) {
            Some(p) => p,
            None => again(inner, || inner.alloc(layout))?,
        };
        if profiled {
            inner.profile_record(p, layout.size());
        }
        Ok(p)
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
        let inner = self.block()?;
        if inner.sampling && inner.profile_due(layout.size()) {
            let p = self.alloc_zeroed_in(inner, layout)?;
            inner.profile_record(p, layout.size());
            return Ok(p);
        }
        self.alloc_zeroed_in(inner, layout)
    }

    /// [`alloc_zeroed`](Self::alloc_zeroed) in the started allocator.
    fn alloc_zeroed_in(&self, inner: &Inner<P>, layout: Layout) -> Result<NonNull<u8>, AllocError> {
        // A guarded block's pages are fresh: they read as zero.
        if inner.sampling
            && let Some(p) = inner.sampled(layout)
        {
            return Ok(p);
        }
        let (p, zero) = again(inner, || inner.alloc_zeroed(layout))?;
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
        // SAFETY: the caller's contract.
        unsafe { self.free_uncached(ptr) }
    }

    /// The slow half of [`free`](Self::free), for a caller that has tried
    /// [`free_cached`](Self::free_cached) already: the region map names the block's
    /// region, and the block goes there (through the thread's bin when it is full
    /// and flushed half, or under the region's lock) without the hot path run again.
    /// It frees exactly as [`free`](Self::free) does.
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
    /// let p = common.alloc(Layout::new::<[u8; 100]>()).unwrap();
    /// // SAFETY: live; freed by one of the two calls.
    /// unsafe {
    ///     if !common.free_cached(p) {
    ///         common.free_uncached(p);
    ///     }
    /// }
    /// assert_eq!(common.stats().live_blocks, 0);
    /// ```
    pub unsafe fn free_uncached(&self, ptr: NonNull<u8>) {
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
        let inner = self.block()?;
        // SAFETY: the caller's contract, for each try (a refused one leaves the block
        // as it was).
        let p = again(inner, || unsafe { inner.resize(ptr, old, new) })?;
        inner.profile_resized(ptr, p, new.size());
        Ok(p)
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
        // SAFETY: the caller's contract, for each try (a refused one leaves the block
        // as it was).
        let p = again(inner, || unsafe { inner.realloc_unsized(ptr, new) })?;
        inner.profile_resized(ptr, p, new.size());
        Ok(p)
    }
}

/// Runs `f`; when it is refused, gives back what the allocator keeps for reuse (see
/// `Inner::make_room`) and, if anything went, runs it once more. In fixed memory
/// (a `LimitedPages` source) blocks and runs kept for reuse so never make a request
/// fail.
#[inline]
fn again<P: PageSource, T>(
    inner: &Inner<P>,
    mut f: impl FnMut() -> Result<T, AllocError>,
) -> Result<T, AllocError> {
    match f() {
        Err(AllocError) if inner.make_room() => f(),
        done => done,
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
                if live.front.registry().attached() {
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
