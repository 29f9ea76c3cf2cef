#![doc = include_str!("../README.md")]
#![cfg_attr(docsrs, feature(doc_cfg), doc(auto_cfg(hide(bento_loom))))]
#![no_std]

#[cfg(test)]
extern crate std;

mod block_cache;
mod chunk;
mod config;
mod engine;
mod index;
mod locked;
mod memory_space;
mod stats;
mod validate;
mod walk;

pub use bento_pages::{AllocError, Misuse, MisuseHook, panic_on_misuse};

pub use crate::config::{SpaceConfig, SpaceError};
pub use crate::locked::{LockedSpace, SpaceGuard, SpinSpace};
pub use crate::memory_space::MemorySpace;
pub use crate::stats::SpaceStats;
pub use crate::validate::{Rule, SpaceCorruption, ValidateReport};
pub use crate::walk::{Allocations, Block, ChunkInfo, ChunkState, Chunks, FreeBlocks, SegmentKind};
