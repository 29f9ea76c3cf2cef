//! The one place atomics come from: `core`'s normally, loom's under `cfg(bento_loom)`,
//! so that `cargo xtask loom` model-checks the same code.

#[cfg(bento_loom)]
pub(crate) use loom::sync::atomic::{AtomicPtr, AtomicU8, AtomicU32, AtomicUsize, Ordering};

#[cfg(not(bento_loom))]
pub(crate) use core::sync::atomic::{AtomicPtr, AtomicU8, AtomicU32, AtomicUsize, Ordering};
