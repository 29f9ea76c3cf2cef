//! The set-up flag: whether the once-per-process set-up is done, and the request to
//! start the purger it carries to the next allocation.

use core::sync::atomic::{AtomicU8, Ordering};

/// The once-per-process set-up, done by the first call: the fork handlers, and what
/// the environment asks for (the retention, statistics at exit, a trace). Once set
/// up, the flag also carries a request to start the purger to the next allocation
/// (`START_PURGER`), so that the allocation's fast path reads one flag for both.
pub(crate) static SETUP: AtomicU8 = AtomicU8::new(NOT_SET);
/// Not set up: the next call does it.
pub(crate) const NOT_SET: u8 = 0;
/// A thread is setting the process up.
pub(crate) const SETTING: u8 = 1;
/// Set up.
pub(crate) const SET: u8 = 2;
/// Set up, and the next allocation starts the purger (see `retain`).
pub(crate) const START_PURGER: u8 = 3;

/// Whether the set-up is done (the retention is known).
pub(crate) fn set_up() -> bool {
    matches!(SETUP.load(Ordering::Acquire), SET | START_PURGER)
}

/// Asks the next allocation to start the purger.
pub(crate) fn request_purger() {
    let _ = SETUP.compare_exchange(SET, START_PURGER, Ordering::AcqRel, Ordering::Relaxed);
}
