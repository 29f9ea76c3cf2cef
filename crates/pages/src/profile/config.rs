//! How a profiler samples ([`ProfileConfig`]) and its figures ([`ProfileStats`]).

/// The most live samples a profiler keeps.
pub const MAX_SAMPLES: u32 = 1 << 20;

/// How a [`Profiler`](crate::Profiler) samples.
///
/// ```
/// use bento_pages::ProfileConfig;
///
/// let config = ProfileConfig::DEFAULT.every(64 << 10);
/// assert_eq!(config.every, 64 << 10);
/// assert_eq!(ProfileConfig::parse("1048576"), Some(ProfileConfig::DEFAULT.every(1 << 20)));
/// assert_eq!(ProfileConfig::parse("0"), None);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProfileConfig {
    /// Bytes allocated between two samples, on average: 4 KiB to 1 GiB.
    pub every: usize,
    /// The most live samples kept (1 to [`MAX_SAMPLES`]); one more is dropped and
    /// counted.
    pub capacity: u32,
    /// Whether a sample keeps the stack's return addresses (a walk of the stack
    /// through the system's unwinder, some microseconds) beside the caller's source
    /// location.
    pub backtrace: bool,
}

impl ProfileConfig {
    /// A sample every 64 KiB on average, up to 65,536 live (4 GiB of blocks at that
    /// rate), without stacks: a sample keeps its caller's source location (a heap's
    /// `#[track_caller]` site), heap and tag, for a few hundred instructions; turn
    /// [`backtrace`](Self::backtrace) on for stacks (bento-malloc does).
    pub const DEFAULT: Self = Self {
        every: 64 << 10,
        capacity: 1 << 16,
        backtrace: false,
    };

    /// This config sampling every `every` bytes on average (clamped to 4 KiB to
    /// 1 GiB).
    #[must_use]
    pub const fn every(mut self, every: usize) -> Self {
        self.every = if every < 4096 {
            4096
        } else if every > 1 << 30 {
            1 << 30
        } else {
            every
        };
        self
    }

    /// This config keeping at most `capacity` live samples (clamped to 1 to
    /// [`MAX_SAMPLES`]).
    #[must_use]
    pub const fn capacity(mut self, capacity: u32) -> Self {
        self.capacity = if capacity == 0 {
            1
        } else if capacity > MAX_SAMPLES {
            MAX_SAMPLES
        } else {
            capacity
        };
        self
    }

    /// This config with or without stacks.
    #[must_use]
    pub const fn backtrace(mut self, on: bool) -> Self {
        self.backtrace = on;
        self
    }

    /// Reads `EVERY` (bytes, decimal, 4096 to 2^30); `None` for anything else.
    #[must_use]
    pub fn parse(value: &str) -> Option<Self> {
        let every: usize = value.trim().parse().ok()?;
        (4096..=1 << 30)
            .contains(&every)
            .then(|| Self::DEFAULT.every(every))
    }
}

impl Default for ProfileConfig {
    fn default() -> Self {
        Self::DEFAULT
    }
}

/// A profiler's figures.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ProfileStats {
    /// Samples of live blocks held.
    pub live_samples: u32,
    /// Samples taken so far.
    pub sampled: u64,
    /// Samples dropped: the table was full.
    pub dropped: u64,
    /// The live bytes the samples stand for (each weighted by its inverse
    /// probability): an estimate of the bytes live in the sampled allocators.
    pub estimated_live_bytes: u64,
    /// The marks set so far ([`Profiler::mark`](crate::Profiler::mark)).
    pub marks: u32,
}
