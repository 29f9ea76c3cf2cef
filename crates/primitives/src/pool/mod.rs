//! The pools: fixed-size chunks with an intrusive free list, over a caller's buffer
//! ([`Pool`](fixed_pool::Pool), [`TypedPool`](typed_pool::TypedPool)), over pages that
//! commit as it grows ([`GrowingPool`](growing_pool::GrowingPool)), or shared between
//! threads without a lock ([`SharedPool`](shared_pool::SharedPool) and a thread's
//! [`SharedPoolCache`](shared_cache::SharedPoolCache)).

pub(crate) mod fixed_pool;
pub(crate) mod free_list;
pub(crate) mod geometry;
pub(crate) mod growing_pool;
pub(crate) mod leaks;
// The head packs an index and a tag into 64 bits.
#[cfg(target_has_atomic = "64")]
pub(crate) mod shared_cache;
#[cfg(target_has_atomic = "64")]
pub(crate) mod shared_pool;
pub(crate) mod typed_pool;
