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
    #[cfg(unix)]
    "bento-guard",
    "bento-prof",
];
