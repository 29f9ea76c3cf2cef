//! The one place atomics come from: `core`'s normally, loom's under `cfg(bento_loom)`,
//! so that `cargo xtask loom` model-checks the same code.

#[cfg(bento_loom)]
pub(crate) use loom::sync::atomic::{AtomicPtr, AtomicU8, AtomicU32, AtomicUsize, Ordering};

#[cfg(not(bento_loom))]
pub(crate) use core::sync::atomic::{AtomicPtr, AtomicU8, AtomicU32, AtomicUsize, Ordering};

/// One step of a wait for another thread: a CPU hint normally, a yield to loom's
/// scheduler under loom (which must see the other thread make progress).
#[inline]
pub(crate) fn spin_loop() {
    #[cfg(bento_loom)]
    loom::thread::yield_now();
    #[cfg(not(bento_loom))]
    core::hint::spin_loop();
}
