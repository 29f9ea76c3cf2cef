//! [`LockedSpace`]: one memory space shared between threads behind a lock.

use core::alloc::Layout;
use core::fmt;
use core::ptr::NonNull;

use bento_pages::lock::RawSpinLock;
use bento_pages::{PageSource, RawAlloc};
use lock_api::{Mutex, MutexGuard, RawMutex};

use crate::{AllocError, Allocations, FreeBlocks, MemorySpace, MisuseHook};

/// A [`MemorySpace`] behind a lock: `Sync`, and `&LockedSpace` is an allocator-api2
/// `Allocator` that takes the lock for each call. [`lock`](Self::lock) gives the whole
/// space for a batch of calls, walking or validating.
///
/// `R` is any [`lock_api::RawMutex`]; [`SpinSpace`] uses bento's spin-then-yield lock,
/// which never allocates (so it can serve a global allocator).
///
/// ```
/// use bento_pages::SystemPages;
/// use bento_space::{MemorySpace, SpaceConfig, SpinSpace};
/// use allocator_api2::vec::Vec;
///
/// let space = SpinSpace::new(MemorySpace::new(SystemPages::new(), SpaceConfig::DEFAULT).unwrap());
/// std::thread::scope(|s| {
///     for t in 0..4 {
///         let space = &space;
///         s.spawn(move || {
///             let mut v = Vec::new_in(space);
///             v.extend(0..1000u32 * t);
///             assert_eq!(v.len(), 1000 * t as usize);
///         });
///     }
/// });
/// assert_eq!(space.lock().stats().live_blocks, 0);
/// ```
pub struct LockedSpace<P: PageSource, R: RawMutex> {
    space: Mutex<R, MemorySpace<P>>,
}

/// A [`LockedSpace`] with a lock that never allocates.
pub type SpinSpace<P> = LockedSpace<P, RawSpinLock>;

impl<P: PageSource, R: RawMutex> LockedSpace<P, R> {
    /// Shares `space`.
    ///
    /// ```
    /// use bento_pages::HeapPages;
    /// use bento_space::{MemorySpace, SpaceConfig, SpinSpace};
    ///
    /// let space = MemorySpace::new(HeapPages::new(), SpaceConfig::DEFAULT.with_page_size(4096)).unwrap();
    /// let shared = SpinSpace::new(space);
    /// assert_eq!(shared.lock().stats().segments, 0);
    /// ```
    pub fn new(space: MemorySpace<P>) -> Self {
        Self {
            space: Mutex::new(space),
        }
    }

    /// Waits for the lock and returns the space.
    ///
    /// ```
    /// use core::alloc::Layout;
    /// use bento_pages::HeapPages;
    /// use bento_space::{MemorySpace, SpaceConfig, SpinSpace};
    ///
    /// let shared = SpinSpace::new(MemorySpace::new(HeapPages::new(), SpaceConfig::DEFAULT.with_page_size(4096)).unwrap());
    /// let mut space = shared.lock();
    /// let p = space.alloc(Layout::new::<u64>()).unwrap();
    /// assert_eq!(space.allocations().count(), 1);
    /// // SAFETY: live.
    /// unsafe { space.free(p) };
    /// ```
    pub fn lock(&self) -> SpaceGuard<'_, P, R> {
        SpaceGuard(self.space.lock())
    }

    /// The space if the lock is free now, else `None`.
    ///
    /// ```
    /// use bento_pages::HeapPages;
    /// use bento_space::{MemorySpace, SpaceConfig, SpinSpace};
    ///
    /// let shared = SpinSpace::new(MemorySpace::new(HeapPages::new(), SpaceConfig::DEFAULT.with_page_size(4096)).unwrap());
    /// let held = shared.lock();
    /// assert!(shared.try_lock().is_none());
    /// drop(held);
    /// assert!(shared.try_lock().is_some());
    /// ```
    pub fn try_lock(&self) -> Option<SpaceGuard<'_, P, R>> {
        self.space.try_lock().map(SpaceGuard)
    }

    /// The space, unshared.
    ///
    /// ```
    /// use bento_pages::HeapPages;
    /// use bento_space::{MemorySpace, SpaceConfig, SpinSpace};
    ///
    /// let shared = SpinSpace::new(MemorySpace::new(HeapPages::new(), SpaceConfig::DEFAULT.with_page_size(4096)).unwrap());
    /// assert_eq!(shared.into_inner().destroy(), 0);
    /// ```
    pub fn into_inner(self) -> MemorySpace<P> {
        self.space.into_inner()
    }
}

/// The locked space. It gives `&MemorySpace` and the few `&mut` methods, never the
/// space itself: blocks handed out through `&LockedSpace` may be live, so the space
/// must not be replaced or moved out while it is shared.
pub struct SpaceGuard<'a, P: PageSource, R: RawMutex>(MutexGuard<'a, R, MemorySpace<P>>);

impl<P: PageSource, R: RawMutex> core::ops::Deref for SpaceGuard<'_, P, R> {
    type Target = MemorySpace<P>;

    fn deref(&self) -> &MemorySpace<P> {
        &self.0
    }
}

impl<P: PageSource, R: RawMutex> SpaceGuard<'_, P, R> {
    /// [`MemorySpace::allocations`] under the lock.
    pub fn allocations(&mut self) -> Allocations<'_> {
        self.0.allocations()
    }

    /// [`MemorySpace::free_blocks`] under the lock.
    pub fn free_blocks(&mut self) -> FreeBlocks<'_> {
        self.0.free_blocks()
    }

    /// [`MemorySpace::set_misuse_hook`] under the lock.
    pub fn set_misuse_hook(&mut self, hook: MisuseHook) {
        self.0.set_misuse_hook(hook);
    }
}

impl<P: PageSource, R: RawMutex> fmt::Debug for SpaceGuard<'_, P, R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SpaceGuard")
            .field("stats", &self.0.stats())
            .finish()
    }
}

impl<P: PageSource, R: RawMutex> fmt::Debug for LockedSpace<P, R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.space.try_lock() {
            Some(space) => f
                .debug_struct("LockedSpace")
                .field("stats", &space.stats())
                .finish(),
            None => f.write_str("LockedSpace { <locked> }"),
        }
    }
}

// SAFETY: each method takes the lock around one call of the space's own method,
// which keeps `RawAlloc`'s promises.
unsafe impl<P: PageSource, R: RawMutex> RawAlloc for LockedSpace<P, R> {
    #[inline]
    fn alloc_raw(&self, layout: Layout) -> Result<NonNull<u8>, AllocError> {
        self.space.lock().alloc(layout)
    }

    #[inline]
    unsafe fn dealloc_raw(&self, ptr: NonNull<u8>, layout: Layout) {
        // SAFETY: the caller's contract.
        unsafe { self.space.lock().dealloc(ptr, layout) }
    }

    unsafe fn resize_in_place(&self, ptr: NonNull<u8>, _old: Layout, new_size: usize) -> bool {
        // SAFETY: the caller's contract.
        unsafe { self.space.lock().realloc_in_place(ptr, new_size) }
    }

    /// As a [`MemorySpace`](crate::MemorySpace)'s.
    #[inline]
    fn keeps_unshrunk_blocks(&self) -> bool {
        false
    }
}

bento_pages::impl_allocator!(impl['a, P: PageSource, R: RawMutex] for &'a LockedSpace<P, R>);
