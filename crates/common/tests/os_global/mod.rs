//! The `#[global_allocator]` of the test binaries that run over the OS's pages, which
//! Miri does not have (they build an empty `main` there): `global_transfer` is the
//! Miri run, over the system allocator's.

#![cfg(not(miri))]

use bento_common::CommonAllocator;

/// The common allocator over the OS's pages, as this binary's global allocator.
#[global_allocator]
pub(crate) static GLOBAL: CommonAllocator = CommonAllocator::new();

/// Starts the allocator now, so that a baseline taken next has every region in it
/// (some targets' runtimes allocate nothing before `main`).
pub(crate) fn start() {
    GLOBAL.init().expect("the allocator starts");
}
