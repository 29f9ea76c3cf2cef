#![doc = include_str!("../README.md")]
#![cfg_attr(docsrs, feature(doc_cfg), doc(auto_cfg(hide(bento_loom))))]
#![no_std]

#[cfg(any(test, feature = "std"))]
extern crate std;

mod abort;
mod bins;
mod cache;
mod common;
mod config;
mod front;
mod fronts;
mod inner;
mod layer;
mod list;
mod map;
mod region;
mod run;
mod stats;
mod sync;
mod tls;

pub use bento_pages::{AllocError, Misuse, MisuseHook, PageSource, RawAlloc, panic_on_misuse};

pub use crate::abort::abort_on_misuse;
pub use crate::common::CommonAllocator;
#[cfg(all(feature = "std", not(bento_loom)))]
pub use crate::common::purge::Purger;
pub use crate::config::{
    CommonConfig, CommonError, MAX_CLASSES, MAX_CONTENTION_REGIONS, MAX_SMALL, Routing,
    SMALL_ALIGN, SizeClasses,
};
pub use crate::stats::{CommonLeaks, CommonReport, CommonStats, Corruption, RegionStats};
