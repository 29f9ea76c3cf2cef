#![doc = include_str!("../README.md")]
#![no_std]

#[cfg(any(test, feature = "std"))]
extern crate std;

mod alloc_api;
mod arena;
mod bump;
mod chunks;
mod double;
mod double_arena;
mod frame;
mod growing_pool;
mod lifo;
mod pool;
#[cfg(target_has_atomic = "64")]
mod pool_cache;
// The head packs an index and a tag into 64 bits.
#[cfg(target_has_atomic = "64")]
mod shared_pool;
mod stack;
#[cfg(target_has_atomic = "64")]
mod sync;
mod typed_pool;

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

pub use crate::alloc_api::AllocError;
pub use crate::arena::{Arena, ArenaConfig, ArenaScope};
pub use crate::bump::{AllocFailed, Bump, with_stack_bump};
pub use crate::chunks::{LeakIter, LeakList, MisuseHook, PoolError, PoolMisuse, panic_on_misuse};
pub use crate::double::{DoubleStack, EndMut, StackEnd};
pub use crate::double_arena::DoubleArena;
pub use crate::frame::{Frame, FrameArena, FrameBusy};
pub use crate::growing_pool::{GROWING_POOL_COMMIT_STEP, GrowingPool};
pub use crate::lifo::{LifoCheck, Marker, MarkerError, StackReport};
pub use crate::pool::{Pool, PoolCorruption, PoolReport};
#[cfg(target_has_atomic = "64")]
pub use crate::pool_cache::{
    SHARED_POOL_CACHE_BATCH, SHARED_POOL_CACHE_MAX_BATCH, SharedPoolCache,
};
#[cfg(target_has_atomic = "64")]
pub use crate::shared_pool::{SHARED_POOL_MAX_CHUNKS, SharedPool};
pub use crate::stack::Stack;
pub use crate::typed_pool::{PoolBox, TypedPool};
