//! Sampled allocation profiles: [`Profiler`], a fixed table of the live blocks a
//! byte sampler picked (one every [`ProfileConfig::every`] bytes on average, an
//! exponential draw, so a block of `s` bytes is picked with probability
//! `1 - e^(-s/every)` and counted with the inverse as its weight), each with its
//! site, heap, tag and the game's frame and phase at its allocation; dumped as a
//! pprof heap profile (`pprof.rs`) of what is live, or of what was allocated since a
//! mark and is still live. `config.rs` holds its shape and figures, `profiler.rs` the
//! profiler, its lock and filter, `table.rs` its table.

mod config;
#[cfg(all(feature = "std", any(unix, windows), not(bento_loom)))]
mod pprof;
#[cfg(all(feature = "std", any(unix, windows), not(bento_loom)))]
mod profiler;
#[cfg(all(feature = "std", any(unix, windows), not(bento_loom)))]
mod table;

pub use self::config::{MAX_SAMPLES, ProfileConfig, ProfileStats};
#[cfg(all(feature = "std", any(unix, windows), not(bento_loom)))]
pub use self::profiler::Profiler;

#[cfg(all(test, not(miri), feature = "std", any(unix, windows), not(bento_loom)))]
mod tests;
