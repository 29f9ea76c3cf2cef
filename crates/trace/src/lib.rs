#![doc = include_str!("../README.md")]
#![cfg_attr(docsrs, feature(doc_cfg), doc(auto_cfg(hide(bento_loom))))]

mod format;
mod reader;
mod replay;
mod rng;
#[cfg(feature = "heap")]
mod sink;
mod soak;
mod target;
pub mod workload;
mod writer;

pub use crate::format::{Event, MAGIC, MAX_PHASE, Record, VERSION};
pub use crate::reader::{TraceError, TraceReader};
pub use crate::replay::{Moment, ReplayError, ReplayOptions, ReplayReport, replay};
pub use crate::rng::Rng;
#[cfg(feature = "heap")]
pub use crate::sink::TraceSink;
pub use crate::soak::{SoakHour, SoakRun, least_memory, soak, soak_trace};
pub use crate::target::{ApiTarget, Footprint, GlobalTarget, ReplayTarget, Wrapper};
pub use crate::writer::TraceWriter;
