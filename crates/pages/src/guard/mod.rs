//! Sampled guard pages: [`GuardPool`], a fixed pool of slots, each a block's own
//! pages between two inaccessible ones, for the allocations a sampler picks (one in
//! [`GuardConfig::every`]). A block is placed against the end of its slot, so an
//! overrun faults at its first byte past the block (every other one against its
//! start, so an underrun faults at the byte before); its free makes the pages
//! inaccessible and keeps the slot in quarantine, so a use after free faults too. The
//! fault handler then prints one report naming the kind, the block and the sites of
//! its allocation and free, and aborts. `config.rs` holds the pool's shape and
//! figures, `pool.rs` the slots and the quarantine, `slot.rs` a slot's record,
//! `trace.rs` a site, `report.rs` the report and `fault.rs` the signal handler.

mod config;
#[cfg(all(feature = "os", unix, not(bento_loom)))]
mod fault;
#[cfg(all(feature = "os", unix, not(bento_loom)))]
mod pool;
#[cfg(all(feature = "os", unix, not(bento_loom)))]
mod report;
#[cfg(all(feature = "os", unix, not(bento_loom)))]
mod slot;
mod trace;

pub use self::config::{
    GuardConfig, GuardCorruption, GuardFault, GuardStats, Label, MAX_SLOTS, SLOT_PAGES,
};
#[cfg(all(feature = "os", unix, not(bento_loom)))]
pub use self::pool::GuardPool;
pub use self::trace::Trace;

#[cfg(all(test, not(miri), feature = "os", unix))]
mod tests;
