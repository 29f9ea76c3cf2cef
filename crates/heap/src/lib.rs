#![doc = include_str!("../README.md")]
#![no_std]

extern crate alloc;
#[cfg(any(test, feature = "std"))]
extern crate std;

mod figures;
mod heap;
mod policy;
mod report;
mod sink;
mod sync;
mod track;

pub use bento_pages::{AllocError, GuardSide, Misuse, MisuseHook, panic_on_misuse};

pub use crate::figures::HeapStats;
pub use crate::heap::{CheckError, Heap, HeapBuilder};
pub use crate::policy::{Canaries, FillPattern, Guards, NoGuards, OnLeak, Retry, Tag};
pub use crate::report::{Report, ReportRow, report};
pub use crate::sink::{Event, EventKind, EventSink};
pub use crate::track::{Leak, NoTracking, TagStats, Track, Tracked, Tracking};
