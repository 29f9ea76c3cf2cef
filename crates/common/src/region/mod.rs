//! Regions: what one lock guards. A general region is a memory space (the large
//! region, or a region of `Routing::Contention`); a class region is the runs of one
//! block size (a small class, or a medium bin of 257 B to 4 KiB).

pub(crate) mod list;
pub(crate) mod run;

use core::cell::UnsafeCell;
use core::ptr::NonNull;

use bento_pages::lock::RawSpinLock;
use bento_pages::{Misuse, PageSource};
use bento_space::MemorySpace;

use crate::layer::RegionPages;
use crate::layer::map::RegionId;
use crate::region::run::Runs;
use crate::sync::{AtomicUsize, Ordering};

/// One region: `T` behind a lock. Aligned to two cache lines so that threads working
/// in different regions never share a line.
#[repr(align(128))]
pub(crate) struct Region<T> {
    lock: RawSpinLock,
    /// The block size of a class region; 0 for a general one.
    pub(crate) block: usize,
    /// The region's id in the map.
    pub(crate) id: RegionId,
    // Invariant: reached only by the thread holding `lock` (through `Held`).
    state: UnsafeCell<T>,
    /// Lock acquisitions that had to wait (written under the lock).
    contended: AtomicUsize,
}

/// A general region: a memory space.
pub(crate) type General<P> = Region<MemorySpace<RegionPages<P>>>;
/// A class region: runs of one block size.
pub(crate) type Class<P> = Region<ClassRuns<P>>;

// SAFETY: the state is reached only under the lock, one thread at a time; it moves
// between threads (`Send`) when `T` may.
unsafe impl<T: Send> Sync for Region<T> {}
// SAFETY: as above.
unsafe impl<T: Send> Send for Region<T> {}

/// The lock held on a region: its state, for one operation.
pub(crate) struct Held<'a, T> {
    region: &'a Region<T>,
}

impl<T> core::ops::Deref for Held<'_, T> {
    type Target = T;

    #[inline]
    fn deref(&self) -> &T {
        // SAFETY: this thread holds the lock (the state's invariant).
        unsafe { &*self.region.state.get() }
    }
}

impl<T> core::ops::DerefMut for Held<'_, T> {
    #[inline]
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: as for `deref`; `&mut self` makes this the only reference.
        unsafe { &mut *self.region.state.get() }
    }
}

impl<T> Drop for Held<'_, T> {
    #[inline]
    fn drop(&mut self) {
        // SAFETY: a `Held` exists only while its thread holds the lock.
        unsafe { self.region.lock.unlock() }
    }
}

impl<T> Region<T> {
    /// A region of `state`, serving blocks of `block` bytes (0: any request).
    pub(crate) fn new(state: T, block: usize, id: RegionId) -> Self {
        Self {
            lock: RawSpinLock::new(),
            block,
            id,
            state: UnsafeCell::new(state),
            contended: AtomicUsize::new(0),
        }
    }

    /// Takes the lock, counting a wait.
    #[inline]
    pub(crate) fn lock(&self) -> Held<'_, T> {
        if !self.lock.try_lock() {
            self.lock.lock();
            let n = self.contended.load(Ordering::Relaxed);
            self.contended.store(n + 1, Ordering::Relaxed);
        }
        Held { region: self }
    }

    /// The lock itself, for the fork guard (`CommonAllocator::lock_all`).
    pub(crate) fn raw_lock(&self) -> &RawSpinLock {
        &self.lock
    }

    /// Takes the lock if it is free.
    #[inline]
    pub(crate) fn try_lock(&self) -> Option<Held<'_, T>> {
        self.lock.try_lock().then(|| Held { region: self })
    }

    /// Lock acquisitions that had to wait.
    pub(crate) fn contended(&self) -> usize {
        self.contended.load(Ordering::Relaxed)
    }
}

/// A class region's state: its runs and the page source they come from.
pub(crate) struct ClassRuns<P: PageSource> {
    pub(crate) runs: Runs,
    pub(crate) pages: RegionPages<P>,
}

impl<P: PageSource> ClassRuns<P> {
    /// No runs yet, for blocks of `block` bytes in spans of `span` bytes from
    /// `pages`.
    pub(crate) fn new(pages: RegionPages<P>, block: usize, span: usize) -> Self {
        Self {
            runs: Runs::new(block, span),
            pages,
        }
    }

    /// A block; `None` when no run can be had.
    #[inline]
    pub(crate) fn take(&mut self) -> Option<NonNull<u8>> {
        self.runs.take(&self.pages)
    }

    /// Up to `want` blocks as a chain linked through their first words: its first
    /// block and length (0: no run could be had).
    #[inline]
    pub(crate) fn take_chain(&mut self, want: usize) -> (*mut u8, usize) {
        self.runs.take_chain(&self.pages, want)
    }

    /// Gives a block back to its run.
    ///
    /// # Safety
    ///
    /// `ptr` is a block this region handed out, given back once.
    #[inline]
    pub(crate) unsafe fn give(&mut self, ptr: NonNull<u8>) {
        // SAFETY: the caller's contract.
        unsafe { self.runs.give(ptr, &self.pages) }
    }

    /// Gives a chain of `n` blocks back to their runs.
    ///
    /// # Safety
    ///
    /// `head` starts a chain of at least `n` blocks this region handed out, linked
    /// through their first words, given back once.
    #[inline]
    pub(crate) unsafe fn give_chain(&mut self, head: *mut u8, n: usize) {
        // SAFETY: the caller's contract.
        unsafe { self.runs.give_chain(head, n, &self.pages) }
    }

    /// Readies an empty run ahead when the region is in use and has none; returns
    /// the bytes committed.
    pub(crate) fn spare(&mut self) -> usize {
        self.runs.spare(&self.pages)
    }

    /// Makes the empty runs idle; returns their bytes.
    pub(crate) fn trim(&mut self) -> usize {
        self.runs.trim(&self.pages)
    }

    /// Whether `ptr`, which the region map gives to this region, may be freed in
    /// it: a block out of one of its runs. The misuse found otherwise.
    ///
    /// # Safety
    ///
    /// The map gives `ptr`'s granule to this region, whose lock is held.
    #[inline]
    pub(crate) unsafe fn probe(&self, ptr: NonNull<u8>) -> Result<(), Misuse<'static>> {
        // SAFETY: the caller's contract.
        unsafe { self.runs.probe(ptr) }
    }
}

impl<P: PageSource> Drop for ClassRuns<P> {
    fn drop(&mut self) {
        // SAFETY: the region goes with the allocator: no block is used again.
        unsafe { self.runs.release_all(&self.pages) };
    }
}
