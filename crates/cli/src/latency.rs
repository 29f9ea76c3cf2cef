//! Per-operation latency: a replay target wrapped in [`Timed`] has each allocation,
//! resize and free timed on its own into a [`Histogram`] of log-linear buckets (at
//! most 1/16 apart), read back as percentiles in nanoseconds.
//!
//! The clock is the CPU's time-stamp counter on x86-64 (a few nanoseconds a read),
//! converted to nanoseconds by the wall clock over the replay, and `Instant`
//! elsewhere. The cost of reading it twice, measured before the replay, is taken off
//! each operation. A timed replay runs in a process of its own, after the untimed one
//! that gives the table's time, memory and fault stats.

use std::time::Instant;

use bento_trace::{ReplayTarget, Wrapper};
use serde::{Deserialize, Serialize};

use crate::setup::Kept;
use crate::setup::Report;

/// Buckets below this many ticks are one tick wide.
const LINEAR: u64 = 16;
/// Buckets per power of two above [`LINEAR`].
const SUB: u64 = 16;
/// Buckets in all: enough for any `u64`.
const BUCKETS: usize = (LINEAR + 60 * SUB) as usize;

/// Counts of durations, in clock ticks.
#[derive(Clone, Debug)]
pub(crate) struct Histogram {
    counts: Vec<u64>,
    total: u64,
    max: u64,
}

impl Default for Histogram {
    fn default() -> Self {
        Self {
            counts: vec![0; BUCKETS],
            total: 0,
            max: 0,
        }
    }
}

impl Histogram {
    /// The bucket of `v` ticks.
    fn bucket(v: u64) -> usize {
        if v < LINEAR {
            return v as usize;
        }
        // v = 1m.mmm… × 2^e: the four bits after the leading one pick the bucket.
        let e = u64::from(63 - v.leading_zeros());
        let m = (v >> (e - 4)) & (SUB - 1);
        (LINEAR + (e - 4) * SUB + m) as usize
    }

    /// The largest value bucket `i` holds.
    fn upper(i: usize) -> u64 {
        let i = i as u64;
        if i < LINEAR {
            return i;
        }
        let (e, m) = ((i - LINEAR) / SUB + 4, (i - LINEAR) % SUB);
        let next = u128::from(SUB + m + 1) << (e - 4);
        u64::try_from(next - 1).unwrap_or(u64::MAX)
    }

    pub(crate) fn add(&mut self, ticks: u64) {
        self.counts[Self::bucket(ticks)] += 1;
        self.total += 1;
        self.max = self.max.max(ticks);
    }

    /// The value at or below which a fraction `p` of the durations lie: the upper
    /// end of the bucket that holds that rank, at most the largest duration.
    pub(crate) fn percentile(&self, p: f64) -> u64 {
        if self.total == 0 {
            return 0;
        }
        let rank = ((p * self.total as f64).ceil() as u64).clamp(1, self.total);
        let mut seen = 0;
        for (i, &n) in self.counts.iter().enumerate() {
            seen += n;
            if seen >= rank {
                return Self::upper(i).min(self.max);
            }
        }
        self.max
    }

    /// The percentiles a table shows, `ns_per_tick` converting ticks.
    pub(crate) fn summary(&self, ns_per_tick: f64) -> Latency {
        let ns = |ticks: u64| (ticks as f64 * ns_per_tick).round() as u64;
        Latency {
            ops: self.total,
            p50: ns(self.percentile(0.50)),
            p99: ns(self.percentile(0.99)),
            p999: ns(self.percentile(0.999)),
            p9999: ns(self.percentile(0.9999)),
            max: ns(self.max),
        }
    }
}

/// One allocator's latency per operation, in nanoseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Latency {
    /// Operations timed: allocations, resizes and frees.
    pub(crate) ops: u64,
    pub(crate) p50: u64,
    pub(crate) p99: u64,
    pub(crate) p999: u64,
    pub(crate) p9999: u64,
    pub(crate) max: u64,
}

/// The clock: ticks of the time-stamp counter on x86-64, nanoseconds since a fixed
/// instant elsewhere.
#[cfg(target_arch = "x86_64")]
fn ticks() -> u64 {
    // SAFETY: `rdtsc` reads the time-stamp counter; every x86-64 CPU has it and it
    // touches no memory.
    #[allow(unused_unsafe)]
    unsafe {
        core::arch::x86_64::_rdtsc()
    }
}

#[cfg(not(target_arch = "x86_64"))]
fn ticks() -> u64 {
    use std::sync::OnceLock;
    static START: OnceLock<Instant> = OnceLock::new();
    let start = START.get_or_init(Instant::now);
    u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX)
}

/// A replay target whose allocations, resizes and frees are each timed.
pub(crate) struct Timed<'a, T> {
    inner: &'a mut T,
    histogram: Histogram,
    /// Ticks two back-to-back reads of the clock take: taken off each operation.
    overhead: u64,
    /// When the replay began, by both clocks.
    start: (Instant, u64),
}

impl<'a, T> Timed<'a, T> {
    pub(crate) fn new(inner: &'a mut T) -> Self {
        let overhead = (0..1000)
            .map(|_| {
                let t0 = ticks();
                let t1 = ticks();
                t1.wrapping_sub(t0)
            })
            .min()
            .unwrap_or(0);
        Self {
            inner,
            histogram: Histogram::default(),
            overhead,
            start: (Instant::now(), ticks()),
        }
    }

    /// The latencies so far, in nanoseconds.
    pub(crate) fn latency(&self) -> Latency {
        let nanos = self.start.0.elapsed().as_nanos() as f64;
        let elapsed = ticks().wrapping_sub(self.start.1).max(1) as f64;
        let ns_per_tick = if cfg!(target_arch = "x86_64") {
            nanos / elapsed
        } else {
            1.0
        };
        self.histogram.summary(ns_per_tick)
    }
}

impl<T: ReplayTarget> Wrapper for Timed<'_, T> {
    type Inner = T;

    fn inner(&mut self) -> &mut T {
        self.inner
    }

    fn inner_ref(&self) -> &T {
        self.inner
    }

    fn around<R>(&mut self, call: impl FnOnce(&mut T) -> R) -> R {
        let t0 = ticks();
        let r = call(self.inner);
        let t1 = ticks();
        self.histogram
            .add(t1.wrapping_sub(t0).saturating_sub(self.overhead));
        r
    }
}

impl<T: Report> Report for Timed<'_, T> {
    fn heap_report(&self) -> Option<String> {
        self.inner.heap_report()
    }

    fn kept(&self) -> Option<Kept> {
        self.inner.kept()
    }

    fn frame_end_calls(&self) -> u64 {
        self.inner.frame_end_calls()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_cover_every_value_in_order_within_a_sixteenth() {
        let mut last = 0;
        for v in (0..5000u64).chain([u64::MAX / 3, u64::MAX - 1, u64::MAX]) {
            let b = Histogram::bucket(v);
            assert!(b >= last, "{v}");
            last = b;
            let upper = Histogram::upper(b);
            assert!(upper >= v, "{v} above its bucket's end {upper}");
            assert!(
                (upper - v) as f64 <= v as f64 / 16.0 + 1.0,
                "{v}: bucket end {upper}"
            );
        }
        assert_eq!(Histogram::bucket(u64::MAX), BUCKETS - 1);
    }

    #[test]
    fn percentiles_read_the_ranks() {
        let mut h = Histogram::default();
        for v in 1..=1000u64 {
            h.add(v);
        }
        let s = h.summary(1.0);
        assert_eq!(s.ops, 1000);
        // Each within its bucket's sixteenth above the true rank.
        assert!((500..=532).contains(&s.p50), "{s:?}");
        assert!((990..=1000).contains(&s.p99), "{s:?}");
        assert_eq!(s.max, 1000);
        assert!(s.p9999 <= s.max && s.p999 <= s.p9999);
        assert_eq!(Histogram::default().summary(1.0), Latency::default());
        // One slow operation shows at the maximum and nowhere below p99.99.
        let mut h = Histogram::default();
        for _ in 0..100_000 {
            h.add(20);
        }
        h.add(1_000_000);
        let s = h.summary(0.5);
        assert_eq!((s.p50, s.p99, s.p999, s.max), (10, 10, 10, 500_000));
    }
}
