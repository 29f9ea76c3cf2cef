#![doc = include_str!("../README.md")]
#![cfg_attr(docsrs, feature(doc_cfg), doc(auto_cfg(hide(bento_loom))))]
#![no_std]

extern crate alloc;
#[cfg(any(test, feature = "std"))]
extern crate std;

mod named;
mod policy;
mod profiled;
mod report;
mod sampled;
mod sink;
mod slot;
mod stats;

/// The slot protocol of the stats' lanes, for the loom models.
#[cfg(bento_loom)]
#[doc(hidden)]
pub mod __loom {
    use loom::sync::atomic::AtomicUsize;

    /// Slots threads can own.
    pub const OWNED: usize = crate::slot::OWNED;

    /// Takes a slot of `bits`.
    pub fn take(bits: &AtomicUsize) -> usize {
        crate::slot::take(bits)
    }

    /// Gives slot `i` back to `bits`.
    pub fn give(bits: &AtomicUsize, i: usize) {
        crate::slot::give(bits, i);
    }

    /// Makes this model thread the owner of slot `i < OWNED`: it writes lane `i` of
    /// every heap with plain stores (one thread a slot).
    pub fn own(i: usize) {
        crate::slot::own(i);
    }

    /// The highest live total `heap`'s lanes granted, as `stats` reads it.
    pub fn lanes_peak<A, G: crate::Guards, T: crate::Tracking>(
        heap: &crate::Heap<A, G, T>,
    ) -> usize {
        heap.account.lanes_peak()
    }
}
mod sync;
mod track;

pub use bento_pages::{AllocError, GuardSide, Misuse, MisuseHook, panic_on_misuse};

pub use crate::named::Heap;
pub use crate::named::builder::HeapBuilder;
pub use crate::named::validate::HeapCorruption;
pub use crate::policy::{Canaries, FillPattern, Guards, NoGuards, OnLeak, Retry, Tag};
pub use crate::report::{Report, ReportRow, report};
pub use crate::sampled::guard_stats;
pub use crate::sink::{EventKind, EventSink, HeapEvent};
pub use crate::stats::HeapStats;
pub use crate::track::{Leak, NoTracking, TagStats, Track, Tracked, Tracking};
