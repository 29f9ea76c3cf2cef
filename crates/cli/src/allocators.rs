//! The allocators this build knows, in one list that the command's tests read too (as
//! the rows `demo` prints).

/// The allocators `demo` runs and `replay` knows, in the order their tables list
/// them.
pub(crate) const ALLOCATORS: &[&str] = &[
    "system",
    #[cfg(feature = "mimalloc")]
    "mimalloc",
    #[cfg(all(feature = "jemalloc", unix))]
    "jemalloc",
    "space",
    "common",
    "bento",
    #[cfg(target_os = "linux")]
    "bento-huge",
];

/// The allocators `replay` runs when none are named: all but the bento set-ups,
/// whose routing and budgets fit bento's own workloads.
pub(crate) const REPLAY_DEFAULT: &[&str] = &[
    "system",
    #[cfg(feature = "mimalloc")]
    "mimalloc",
    #[cfg(all(feature = "jemalloc", unix))]
    "jemalloc",
    "space",
    "common",
];
