#![doc = include_str!("../README.md")]
#![cfg_attr(docsrs, feature(doc_cfg), doc(auto_cfg(hide(bento_loom))))]
#![no_std]

#[cfg(any(test, feature = "std"))]
extern crate std;

mod linear;
mod pool;
#[cfg(target_has_atomic = "64")]
mod sync;

/// Whether this build of bento-primitives runs its debug checks (the misuse checks on
/// every pool free, the poison fills, the stacks' header checks): true where the crate
/// is compiled with debug assertions. Code that tests or reports misuse asks this, not
/// its own `cfg!(debug_assertions)`, which can differ (a release library under a debug
/// test, or a doctest).
///
/// ```
/// // A development build can say so on its debug overlay.
/// let checks = if bento_primitives::DEBUG_CHECKS { "on" } else { "off" };
/// assert!(checks == "on" || checks == "off");
/// ```
pub const DEBUG_CHECKS: bool = cfg!(debug_assertions);

pub use bento_pages::{AllocError, Leaks, Misuse, MisuseHook, panic_on_misuse};

pub use crate::linear::arena::{Arena, ArenaConfig, ArenaScope};
pub use crate::linear::bump::{AllocFailed, Bump, with_stack_bump};
pub use crate::linear::corruption::{BumpReport, LinearCorruption};
pub use crate::linear::double::{DoubleStack, EndMut, StackEnd};
pub use crate::linear::double_arena::DoubleArena;
pub use crate::linear::frame::{Frame, FrameArena, FrameBusy};
pub use crate::linear::lifo::LifoCheck;
pub use crate::linear::lifo::markers::{Marker, MarkerError};
pub use crate::linear::lifo::validate::StackReport;
pub use crate::linear::stack::Stack;
pub use crate::pool::fixed_pool::Pool;
pub use crate::pool::free_list::{PoolCorruption, PoolReport};
pub use crate::pool::geometry::PoolError;
pub use crate::pool::growing_pool::{GROWING_POOL_COMMIT_STEP, GrowingPool};
pub use crate::pool::leaks::{LeakIter, LeakList};
#[cfg(target_has_atomic = "64")]
pub use crate::pool::shared_cache::{
    PoolCacheReport, SHARED_POOL_CACHE_BATCH, SHARED_POOL_CACHE_MAX_BATCH, SharedPoolCache,
};
#[cfg(target_has_atomic = "64")]
pub use crate::pool::shared_pool::{SHARED_POOL_MAX_CHUNKS, SharedPool};
pub use crate::pool::typed_pool::{PoolBox, TypedPool};
