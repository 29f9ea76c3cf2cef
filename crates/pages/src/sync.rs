//! The one place atomics come from: `core`'s normally, loom's under `cfg(bento_loom)`,
//! so that `cargo xtask loom` model-checks the same code.

#[cfg(bento_loom)]
pub(crate) use loom::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

#[cfg(not(bento_loom))]
pub(crate) use core::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

/// Gives the rest of the time slice away, when there is an OS to give it to.
#[inline]
pub(crate) fn yield_now() {
    #[cfg(bento_loom)]
    loom::thread::yield_now();
    #[cfg(all(not(bento_loom), feature = "std"))]
    std::thread::yield_now();
    #[cfg(all(not(bento_loom), not(feature = "std")))]
    core::hint::spin_loop();
}
