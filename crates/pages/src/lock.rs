//! A lock that never allocates: spin, then yield. It guards the few shared tables of
//! the page sources and, through [`lock_api`], anything that must not call the global
//! allocator while it waits (the common allocator, the C ABI).

use core::cell::UnsafeCell;
use core::fmt;

use crate::sync::{AtomicBool, Ordering, yield_now};

/// One step of a spin-wait: a CPU hint normally, a yield to loom's scheduler under
/// `cfg(bento_loom)` (which must see the other thread make progress). Every bento
/// crate's waits take their steps here.
///
/// ```
/// use bento_pages::lock::spin_loop;
/// use std::sync::atomic::{AtomicBool, Ordering};
///
/// let ready = AtomicBool::new(true);
/// while !ready.load(Ordering::Acquire) {
///     spin_loop();
/// }
/// ```
#[inline]
pub fn spin_loop() {
    #[cfg(bento_loom)]
    loom::thread::yield_now();
    #[cfg(not(bento_loom))]
    core::hint::spin_loop();
}

/// How many times a waiter spins before it starts yielding its time slice.
const SPINS_BEFORE_YIELD: u32 = 64;

/// A test-and-test-and-set spin lock that yields to the scheduler after a short spin.
///
/// It has a `const` constructor, never allocates, and implements
/// [`lock_api::RawMutex`], so [`SpinMutex`] is a full mutex.
///
/// ```
/// use bento_pages::lock::RawSpinLock;
///
/// let lock = RawSpinLock::new();
/// assert!(lock.try_lock());
/// assert!(!lock.try_lock());
/// // SAFETY: this thread holds the lock.
/// unsafe { lock.unlock() };
/// assert!(!lock.is_locked());
/// ```
pub struct RawSpinLock {
    // Invariant: true while a holder is between a successful `lock`/`try_lock` and
    // its `unlock`.
    locked: AtomicBool,
}

impl RawSpinLock {
    /// An unlocked lock.
    #[cfg(not(bento_loom))]
    #[must_use]
    pub const fn new() -> Self {
        Self {
            locked: AtomicBool::new(false),
        }
    }

    /// An unlocked lock (loom's atomics have no `const` constructor).
    #[cfg(bento_loom)]
    #[must_use]
    pub fn new() -> Self {
        Self {
            locked: AtomicBool::new(false),
        }
    }

    /// Takes the lock if it is free; never waits.
    #[inline]
    pub fn try_lock(&self) -> bool {
        self.locked
            .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
    }

    /// Takes the lock, spinning and then yielding while another thread holds it.
    #[inline]
    pub fn lock(&self) {
        if !self.try_lock() {
            self.lock_contended();
        }
    }

    #[cold]
    fn lock_contended(&self) {
        let mut spins = 0;
        loop {
            // Wait on a plain load so that waiters do not bounce the cache line.
            while self.locked.load(Ordering::Relaxed) {
                if spins < SPINS_BEFORE_YIELD {
                    spins += 1;
                    spin_loop();
                } else {
                    yield_now();
                }
            }
            if self.try_lock() {
                return;
            }
        }
    }

    /// Releases the lock.
    ///
    /// # Safety
    ///
    /// The caller must hold the lock (it took it with `lock` or a successful
    /// `try_lock` and has not released it since).
    #[inline]
    pub unsafe fn unlock(&self) {
        debug_assert!(
            self.locked.load(Ordering::Relaxed),
            "RawSpinLock::unlock on a lock nobody holds"
        );
        self.locked.store(false, Ordering::Release);
    }

    /// Whether some thread holds the lock (a snapshot, for assertions).
    #[inline]
    pub fn is_locked(&self) -> bool {
        self.locked.load(Ordering::Relaxed)
    }
}

impl Default for RawSpinLock {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Debug for RawSpinLock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RawSpinLock")
            .field("locked", &self.is_locked())
            .finish()
    }
}

// SAFETY: `lock` and `try_lock` acquire the flag with `Acquire` and `unlock` stores it
// with `Release`, so at most one holder exists at a time and each holder sees the
// writes of the previous one; `unlock` is only called by the holder (its contract).
#[cfg(not(bento_loom))]
unsafe impl lock_api::RawMutex for RawSpinLock {
    #[allow(clippy::declare_interior_mutable_const)] // lock_api's required initialiser
    const INIT: Self = Self::new();

    type GuardMarker = lock_api::GuardSend;

    fn lock(&self) {
        RawSpinLock::lock(self);
    }

    fn try_lock(&self) -> bool {
        RawSpinLock::try_lock(self)
    }

    unsafe fn unlock(&self) {
        // SAFETY: lock_api only calls `unlock` for the thread holding the lock.
        unsafe { RawSpinLock::unlock(self) }
    }

    fn is_locked(&self) -> bool {
        RawSpinLock::is_locked(self)
    }
}

/// A mutex over [`RawSpinLock`]: never allocates, `const`-constructible.
///
/// ```
/// use bento_pages::lock::SpinMutex;
///
/// static COUNTER: SpinMutex<u64> = SpinMutex::new(0);
/// *COUNTER.lock() += 1;
/// assert_eq!(*COUNTER.lock(), 1);
/// ```
#[cfg(not(bento_loom))]
pub type SpinMutex<T> = lock_api::Mutex<RawSpinLock, T>;

/// A value behind a [`RawSpinLock`], for the page sources' own tables. Unlike
/// [`SpinMutex`] it also builds under loom.
pub(crate) struct Locked<T> {
    lock: RawSpinLock,
    value: UnsafeCell<T>,
}

// SAFETY: the value is only reached through `with`, which holds the lock, so it is
// accessed by one thread at a time; moving it between threads needs `T: Send`.
unsafe impl<T: Send> Sync for Locked<T> {}

impl<T> Locked<T> {
    #[cfg(not(bento_loom))]
    pub(crate) const fn new(value: T) -> Self {
        Self {
            lock: RawSpinLock::new(),
            value: UnsafeCell::new(value),
        }
    }

    #[cfg(bento_loom)]
    pub(crate) fn new(value: T) -> Self {
        Self {
            lock: RawSpinLock::new(),
            value: UnsafeCell::new(value),
        }
    }

    /// Runs `f` on the value with the lock held.
    pub(crate) fn with<R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
        struct Unlock<'a>(&'a RawSpinLock);
        impl Drop for Unlock<'_> {
            fn drop(&mut self) {
                // SAFETY: created right after this thread took the lock.
                unsafe { self.0.unlock() }
            }
        }
        self.lock.lock();
        let _unlock = Unlock(&self.lock);
        // SAFETY: the lock is held until `_unlock` drops, so this is the only
        // reference to the value.
        f(unsafe { &mut *self.value.get() })
    }

    pub(crate) fn get_mut(&mut self) -> &mut T {
        self.value.get_mut()
    }

    /// The lock itself, for a caller that holds it across calls (a fork guard).
    pub(crate) fn raw(&self) -> &RawSpinLock {
        &self.lock
    }
}

impl<T> fmt::Debug for Locked<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Locked")
            .field("lock", &self.lock)
            .finish_non_exhaustive()
    }
}
