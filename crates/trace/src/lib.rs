#![doc = include_str!("../README.md")]

mod format;
mod reader;
mod writer;

pub use crate::format::{Event, MAGIC, MAX_PHASE, Record, VERSION};
pub use crate::reader::{TraceError, TraceReader};
pub use crate::writer::TraceWriter;
