//! The one place atomics come from: `core`'s normally, loom's under `cfg(bento_loom)`,
//! so that `cargo xtask loom` model-checks the same code.

#[cfg(bento_loom)]
pub(crate) use loom::sync::atomic::{AtomicBool, AtomicUsize, Ordering, fence};

#[cfg(not(bento_loom))]
pub(crate) use core::sync::atomic::{AtomicBool, AtomicUsize, Ordering, fence};

/// The current tag of a heap without `std` (no thread-locals there).
#[cfg(not(feature = "std"))]
pub(crate) use core::sync::atomic::AtomicPtr;

/// A lock that never allocates: bento-pages' spin lock normally, loom's mutex under
/// loom.
pub(crate) struct Lock<T>(
    #[cfg(not(bento_loom))] bento_pages::lock::SpinMutex<T>,
    #[cfg(bento_loom)] loom::sync::Mutex<T>,
);

impl<T> Lock<T> {
    #[cfg(not(bento_loom))]
    pub(crate) const fn new(value: T) -> Self {
        Self(bento_pages::lock::SpinMutex::new(value))
    }

    #[cfg(bento_loom)]
    pub(crate) fn new(value: T) -> Self {
        Self(loom::sync::Mutex::new(value))
    }

    /// Waits for the lock.
    pub(crate) fn lock(&self) -> impl core::ops::DerefMut<Target = T> + '_ {
        #[cfg(not(bento_loom))]
        {
            self.0.lock()
        }
        #[cfg(bento_loom)]
        {
            self.0.lock().unwrap()
        }
    }
}
