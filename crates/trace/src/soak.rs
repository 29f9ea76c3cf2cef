//! Soaking an allocator in a long session: its stats hour by hour, and the least
//! fixed memory in which the session plays with no refused request.

use std::alloc::Layout;
use std::io::Read;
use std::ptr::NonNull;

use crate::reader::{TraceError, TraceReader};
use crate::replay::{ReplayError, ReplayOptions, replay};
use crate::target::{Footprint, ReplayTarget};
use crate::workload::{self, Checkpoint, LongConfig, LongSession};

/// One hour of a soak.
///
/// ```
/// let h = bento_trace::SoakHour::default();
/// assert_eq!((h.refused, h.frame_os_calls), (0, 0));
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SoakHour {
    /// The hour, from 0.
    pub hour: usize,
    /// The most bytes live at once in the hour, as asked.
    pub peak_live: usize,
    /// The most the allocator held at a checkpoint of the hour (after each load, at
    /// each frame's busiest moment), by its own stats (0 when it keeps none).
    pub peak_committed: usize,
    /// Allocations and resizes the allocator refused in the hour.
    pub refused: usize,
    /// Calls to the operating system the allocator made inside gameplay frames
    /// (from a level's "loaded" to its "unloading"), when it counts them.
    pub frame_os_calls: u64,
    /// The largest free block the allocator held as a level of the hour had loaded,
    /// the least of the hour's ([`ReplayTarget::largest_free`]; `None` when it does
    /// not tell, or the hour had no "loaded" phase).
    pub largest_free: Option<usize>,
}

impl SoakHour {
    /// `peak_committed` over `peak_live` (0 with no live bytes).
    ///
    /// ```
    /// let h = bento_trace::SoakHour { peak_live: 100, peak_committed: 125, ..Default::default() };
    /// assert_eq!(h.ratio(), 1.25);
    /// ```
    pub fn ratio(&self) -> f64 {
        if self.peak_live == 0 {
            0.0
        } else {
            self.peak_committed as f64 / self.peak_live as f64
        }
    }
}

/// A soak: one run of a long session on one allocator, hour by hour.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SoakRun {
    /// Each hour's stats, in order.
    pub hours: Vec<SoakHour>,
}

impl SoakRun {
    /// Requests refused over the session.
    ///
    /// ```
    /// assert_eq!(bento_trace::SoakRun::default().refused(), 0);
    /// ```
    pub fn refused(&self) -> usize {
        self.hours.iter().map(|h| h.refused).sum()
    }

    /// The most bytes live at once over the session.
    pub fn peak_live(&self) -> usize {
        self.hours.iter().map(|h| h.peak_live).max().unwrap_or(0)
    }

    /// The most the allocator held at a checkpoint over the session.
    pub fn peak_committed(&self) -> usize {
        self.hours
            .iter()
            .map(|h| h.peak_committed)
            .max()
            .unwrap_or(0)
    }

    /// OS calls inside gameplay frames from hour `from` on.
    pub fn frame_os_calls_from(&self, from: usize) -> u64 {
        self.hours.iter().skip(from).map(|h| h.frame_os_calls).sum()
    }
}

/// A target with the soak's counters around it: what it refuses, what it holds at
/// each phase and frame end, and its OS calls between a level's "loaded" and its
/// "unloading", each put in the hour of the level being played.
struct Counted<'a, T: ?Sized> {
    inner: &'a mut T,
    /// The session whose level numbers give the hour (`None`: a trace's loop, one
    /// hour whatever its phases say).
    config: Option<LongConfig>,
    hours: Vec<SoakHour>,
    hour: usize,
    /// The OS calls when the level's frames began, while in them.
    in_frames: Option<u64>,
}

impl<T: ReplayTarget + ?Sized> Counted<'_, T> {
    fn this_hour(&mut self) -> Option<&mut SoakHour> {
        self.hours.get_mut(self.hour)
    }

    fn os_calls(&self) -> u64 {
        self.inner.footprint().map_or(0, |f| f.os_calls)
    }

    /// Takes what the allocator holds now into the hour's peak.
    fn sample(&mut self) {
        let held = self.inner.footprint().map_or(0, |f| f.committed);
        if let Some(h) = self.this_hour() {
            h.peak_committed = h.peak_committed.max(held);
        }
    }

    fn refused(&mut self) {
        if let Some(h) = self.this_hour() {
            h.refused += 1;
        }
    }
}

impl<T: ReplayTarget + ?Sized> ReplayTarget for Counted<'_, T> {
    fn alloc(&mut self, layout: Layout, tag: u32) -> Option<NonNull<u8>> {
        let p = self.inner.alloc(layout, tag);
        if p.is_none() {
            self.refused();
        }
        p
    }

    unsafe fn realloc(
        &mut self,
        ptr: NonNull<u8>,
        old: Layout,
        new: usize,
        tag: u32,
    ) -> Option<NonNull<u8>> {
        // SAFETY: the caller's contract, passed on.
        let p = unsafe { self.inner.realloc(ptr, old, new, tag) };
        if p.is_none() {
            self.refused();
        }
        p
    }

    unsafe fn free(&mut self, ptr: NonNull<u8>, layout: Layout, tag: u32) {
        // SAFETY: the caller's contract, passed on.
        unsafe { self.inner.free(ptr, layout, tag) }
    }

    fn frame(&mut self) -> Result<(), String> {
        let done = self.inner.frame();
        self.sample();
        done
    }

    fn phase(&mut self, name: &str) {
        if let Some(config) = self.config
            && let Some(level) = name
                .strip_prefix("level ")
                .and_then(|rest| rest.split(' ').next())
                .and_then(|n| n.parse::<usize>().ok())
        {
            self.hour = config.hour_of(level);
        }
        if name.ends_with(" unloading")
            && let Some(start) = self.in_frames.take()
        {
            let calls = self.os_calls().saturating_sub(start);
            if let Some(h) = self.this_hour() {
                h.frame_os_calls += calls;
            }
        }
        self.inner.phase(name);
        self.sample();
        if name.ends_with(" loaded") {
            if let Some(free) = self.inner.largest_free()
                && let Some(h) = self.this_hour()
            {
                h.largest_free = Some(h.largest_free.map_or(free, |l| l.min(free)));
            }
            self.in_frames = Some(self.os_calls());
        }
    }

    fn footprint(&self) -> Option<Footprint> {
        self.inner.footprint()
    }

    fn largest_free(&self) -> Option<usize> {
        self.inner.largest_free()
    }
}

/// Plays the long session `config` on `target`, checking every block's contents
/// (see [`workload::play`]), and returns its stats hour by hour.
///
/// # Panics
///
/// As [`workload::play`]: when the target hands out overlapping memory.
///
/// ```
/// use allocator_api2::alloc::Global;
/// use bento_trace::{ApiTarget, soak};
/// use bento_trace::workload::LongConfig;
///
/// let config = LongConfig { hours: 2, frames_per_level: 3, ..LongConfig::HUNDRED_HOURS };
/// let run = soak(&mut ApiTarget(&Global), config);
/// assert_eq!(run.hours.len(), 2);
/// assert_eq!(run.refused(), 0);
/// assert!(run.peak_live() > 1 << 20);
/// ```
pub fn soak<T: ReplayTarget + ?Sized>(target: &mut T, config: LongConfig) -> SoakRun {
    let hours = (0..config.hours)
        .map(|hour| SoakHour {
            hour,
            ..SoakHour::default()
        })
        .collect();
    let mut counted = Counted {
        inner: target,
        config: Some(config),
        hours,
        hour: 0,
        in_frames: None,
    };
    let mut live_peaks = vec![0usize; config.hours];
    workload::play(
        &mut counted,
        LongSession::new(config),
        |c: Checkpoint, live| {
            if let Some(peak) = live_peaks.get_mut(config.hour_of(c.level)) {
                *peak = (*peak).max(live);
            }
        },
    );
    let mut hours = counted.hours;
    for (h, peak) in hours.iter_mut().zip(live_peaks) {
        h.peak_live = peak;
    }
    SoakRun { hours }
}

/// Soaks `target` in a recorded trace played `loops` times in a row, each loop an
/// hour of the stats: `open` gives the trace from its start each time. What the
/// program never freed is freed at the end of each loop (as [`replay`] does), so a
/// loop begins with what the allocator kept from the ones before and nothing live.
/// The peak committed is sampled at the trace's frames and phases and every
/// `options.sample_every` records (4096 when 0); OS calls are counted inside frames
/// from a "level N loaded" phase to its "level N unloading", when the trace has them.
///
/// # Errors
///
/// The first loop's (or a later one's) [`ReplayError`]: an unreadable trace, one that
/// names blocks that are not live, or a frame the target refused.
///
/// ```
/// use allocator_api2::alloc::Global;
/// use bento_trace::workload::{record, Session, SessionConfig};
/// use bento_trace::{ApiTarget, ReplayOptions, TraceReader, TraceWriter, soak_trace};
///
/// let config = SessionConfig { levels: 2, frames_per_level: 5, ..SessionConfig::DEMO };
/// let mut w = TraceWriter::new(Vec::new()).unwrap();
/// let counts = record(Session::new(config), &mut w).unwrap();
/// let bytes = w.finish().unwrap();
/// let open = || TraceReader::new(&bytes[..]);
/// let run = soak_trace(&mut ApiTarget(&Global), open, 3, ReplayOptions::default()).unwrap();
/// assert_eq!(run.hours.len(), 3);
/// assert!(run.hours.iter().all(|h| h.peak_live as u64 == counts.peak_live));
/// assert_eq!(run.refused(), 0);
/// ```
pub fn soak_trace<R: Read, T: ReplayTarget + ?Sized>(
    target: &mut T,
    mut open: impl FnMut() -> Result<TraceReader<R>, TraceError>,
    loops: usize,
    options: ReplayOptions,
) -> Result<SoakRun, ReplayError> {
    let options = ReplayOptions {
        sample_every: if options.sample_every == 0 {
            4096
        } else {
            options.sample_every
        },
        ..options
    };
    let mut run = SoakRun::default();
    for hour in 0..loops {
        let mut counted = Counted {
            inner: &mut *target,
            config: None,
            hours: vec![SoakHour::default()],
            hour: 0,
            in_frames: None,
        };
        let mut peak = 0;
        let report = replay(&mut counted, open()?, options, |_, c| {
            peak = peak.max(c.inner.footprint().map_or(0, |f| f.committed));
        })?;
        let h = counted.hours[0];
        run.hours.push(SoakHour {
            hour,
            peak_live: usize::try_from(report.peak_live).unwrap_or(usize::MAX),
            peak_committed: h.peak_committed.max(peak),
            refused: usize::try_from(report.failures).unwrap_or(usize::MAX),
            frame_os_calls: h.frame_os_calls,
            largest_free: h.largest_free,
        });
    }
    Ok(run)
}

/// The least bytes of fixed memory, a multiple of `granule` within `range`, in which
/// `plays` says a session plays (with no refused request); `None` when even
/// `range.end` is not enough. `plays(limit)` builds an allocator over `limit` bytes
/// and runs the session on it ([`soak`], and [`SoakRun::refused`] of 0): a bisection
/// calls it about `log2(range / granule)` times, so it must give the same answer for
/// the same limit, and a limit that plays must not be below one that does not.
///
/// ```
/// use allocator_api2::alloc::Global;
/// use bento_trace::{ApiTarget, least_memory, soak};
/// use bento_trace::workload::LongConfig;
///
/// // The global allocator is not bounded: the least of the range is enough.
/// let config = LongConfig { hours: 1, frames_per_level: 2, ..LongConfig::HUNDRED_HOURS };
/// let plays = |_limit| soak(&mut ApiTarget(&Global), config).refused() == 0;
/// assert_eq!(least_memory(plays, (1 << 20)..(64 << 20), 1 << 20), Some(1 << 20));
/// // A budget that plays from 5 MiB up.
/// assert_eq!(least_memory(|l| l >= 5 << 20, 0..(64 << 20), 1 << 20), Some(5 << 20));
/// ```
pub fn least_memory(
    mut plays: impl FnMut(usize) -> bool,
    range: core::ops::Range<usize>,
    granule: usize,
) -> Option<usize> {
    let granule = granule.max(1);
    let (mut lo, mut hi) = (range.start / granule, range.end.div_ceil(granule));
    if !plays(hi.saturating_mul(granule)) {
        return None;
    }
    // Invariant: `hi * granule` plays; `lo * granule` is the least still in doubt.
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if plays(mid * granule) {
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    Some(hi * granule)
}
