#![doc = include_str!("../README.md")]
#![cfg_attr(docsrs, feature(doc_cfg), doc(auto_cfg(hide(bento_loom))))]
#![no_std]

#[cfg(any(test, feature = "std"))]
extern crate std;

// The modules as a stack, each over the ones below it: `allocator` (the public
// type) over `stats` (its stats) over `inner` (the block and one file per
// operation) over `front` (the thread caches), `region` (a region and its runs) and
// `layer` (the shared page layer and the region map), over `config`, `abort` and
// `sync`.
mod abort;
mod allocator;
mod config;
mod front;
mod inner;
mod layer;
mod region;
mod stats;
mod sync;

pub use bento_pages::{AllocError, Misuse, MisuseHook, PageSource, RawAlloc, panic_on_misuse};

pub use crate::abort::abort_on_misuse;
pub use crate::allocator::CommonAllocator;
#[cfg(all(feature = "std", not(bento_loom)))]
pub use crate::allocator::purge::Purger;
pub use crate::config::{
    CommonConfig, CommonError, LargeConfig, MAX_CLASSES, MAX_CONTENTION_REGIONS, MAX_SMALL,
    Routing, SMALL_ALIGN, SizeClasses,
};
pub use crate::stats::{CommonCorruption, CommonLeaks, CommonReport, CommonStats, RegionStats};
