//! Workloads: seeded, deterministic streams of allocations, resizes and frees that
//! stand for what a program asks of its allocator, to write as traces ([`record`]) or
//! to run straight against an allocator ([`play`]).
//!
//! [`Session`] is a game session: the long-running workload that shows whether an
//! allocator's footprint creeps over hours of play. A session is a number of
//! **levels**. Each level loads its resident data (thousands of blocks of 32 B–64 KiB
//! and a few level assets of 256 KiB–2 MiB), then runs **frames**: each frame makes a
//! burst of temporaries (16 B–4 KiB) that die at its end, may start **streaming** an
//! asset (64 KiB–4 MiB) that lives for tens of frames, now and then grows one of a few
//! long-lived **growers** (a log, an entity array) by `realloc`, and, when the
//! session has them, spawns **particles** (64 B) that live for tens of frames.
//! Unloading the level frees its resident data, assets and particles in random order.
//! A few **globals** live for the whole session. Every size is log-uniform in its
//! range. The game has a few **kinds** of level, played in turn (as a player goes
//! round a game's maps): each kind has its own taste in sizes, and a level's choices
//! come from its kind's seed, so a kind plays the same each time it comes round.
//! Streams end with their level, and the growers are cleared when the round starts
//! again (a new chapter), so every round of kinds asks for exactly the same memory and
//! any change of footprint from round to round is the allocator's.
//!
//! [`OpenWorld`] is a second session, unlike the first in its sizes and lifetimes: an
//! open world streams **cells** of many small resident blocks (16 B–2 KiB), loading
//! each with short-lived load-time temporaries (64 B–64 KiB) between them, and keeps
//! the last few cells; its frames make small blocks (8–520 B) that live for two
//! frames; a few **growers** double from 4 KiB to 1 MiB by `realloc` and start again.
//!
//! [`LongSession`] is a hundred hours of play, for the question a game in fixed
//! memory asks: does a level that fits after a fresh boot still fit after hours of
//! play? Besides levels (each of its own size, one in five 1.5 times the median, and
//! its own mix of sizes), frames and streamed assets (in a cache of fixed bytes that
//! evicts its oldest and lives across levels), it has state that outlives levels:
//! **lasting** blocks (UI text, script objects) made between a level's own blocks as
//! it loads and never freed, an **AI and path cache** whose entries are made during
//! loads and frames and whose size grows over the session, and **saves**, the last
//! few kept.
//!
//! [`Mixed`] (log-uniform sizes freed in random order around a live set) and
//! [`LifoBatches`] (batches freed in reverse) are the classic synthetic workloads.
//!
//! Each yields [`Step`]s: blocks named by small ids, tagged with what they are for
//! ([`tags`]), [`Checkpoint`]s (after a level or cell loads, and at each frame's
//! busiest moment), frame ends, and, in a [`Session`], the moments a level begins to
//! load and to unload ([`LevelPhase`]).

use std::alloc::Layout;

use crate::replay::{self, Live};
pub use crate::rng::Rng;
use crate::rng::log_uniform;
use crate::target::ReplayTarget;

/// `Iterator` for a workload that makes its steps a stretch at a time (a level's load,
/// a frame, a batch): `next` yields the front of its queue (the field named) of steps
/// made and not yet yielded, calling its `refill` (which makes the next stretch, or
/// returns false, making none, once the workload is over) until the queue holds one.
macro_rules! refilled_iterator {
    ($workload:ty, $($queue:ident).+) => {
        impl Iterator for $workload {
            type Item = Step;

            fn next(&mut self) -> Option<Step> {
                loop {
                    if let Some(step) = self.$($queue).+.pop_front() {
                        return Some(step);
                    }
                    if !self.refill() {
                        return None;
                    }
                }
            }
        }
    };
}

mod long;
mod session;
mod step;
mod synthetic;
pub mod tags;
mod world;

pub use self::long::{LongConfig, LongSession};
pub use self::session::{Session, SessionConfig};
pub use self::step::{Checkpoint, LevelPhase, PARTICLE_SIZE, Step, Workload};
pub use self::synthetic::{LifoBatches, LifoConfig, Mixed, MixedConfig};
pub use self::world::{OpenWorld, WorldConfig};

/// The name of the phase after level `level` has loaded.
fn loaded(level: usize) -> String {
    format!("level {level} loaded")
}

/// What a workload asked for, counted by [`record`] as it wrote the trace: what a
/// replay of the trace must find.
///
/// ```
/// use bento_trace::TraceWriter;
/// use bento_trace::workload::{record, LifoBatches, LifoConfig};
///
/// let mut w = TraceWriter::new(Vec::new()).unwrap();
/// let counts = record(LifoBatches::new(LifoConfig { batches: 3, ..LifoConfig::DEFAULT }), &mut w).unwrap();
/// assert_eq!((counts.frames, counts.live_at_end), (3, 0));
/// assert!(counts.peak_blocks <= 256);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Recorded {
    /// Records written.
    pub records: u64,
    /// Allocations.
    pub allocs: u64,
    /// Frees.
    pub frees: u64,
    /// Resizes.
    pub reallocs: u64,
    /// Frame ends.
    pub frames: u64,
    /// Phases: three a level of a [`Session`] ("level N loading", "level N loaded",
    /// "level N unloading"), one after each cell of an [`OpenWorld`] loads.
    pub phases: u64,
    /// The most bytes live at once, as asked.
    pub peak_live: u64,
    /// The most blocks live at once.
    pub peak_blocks: u64,
    /// Bytes still live at the end (0 for every workload here).
    pub live_at_end: u64,
}

/// Writes `workload` to `writer` as a trace: allocations, resizes and frees with the
/// workload's ids and tags, a frame record at each [`Step::FrameEnd`], a phase
/// "level N loaded" at each checkpoint after a load (the checkpoints inside frames
/// are moments, not events, and are not written), and a phase named by
/// [`LevelPhase::name`] at each [`Step::Phase`].
///
/// # Errors
///
/// The writer's.
///
/// ```
/// use bento_trace::workload::{record, Session, SessionConfig};
/// use bento_trace::{TraceReader, TraceWriter};
///
/// let config = SessionConfig { levels: 2, frames_per_level: 5, ..SessionConfig::DEMO };
/// let mut w = TraceWriter::new(Vec::new()).unwrap();
/// let counts = record(Session::new(config), &mut w).unwrap();
/// assert_eq!((counts.phases, counts.frames), (6, 10));
/// assert_eq!(counts.allocs, counts.frees);
/// let bytes = w.finish().unwrap();
/// assert_eq!(TraceReader::new(&bytes[..]).unwrap().count() as u64, counts.records);
/// ```
pub fn record<W: std::io::Write>(
    workload: impl Workload,
    writer: &mut crate::writer::TraceWriter<W>,
) -> std::io::Result<Recorded> {
    let mut sizes: Vec<Option<u64>> = vec![None; workload.ids()];
    let mut r = Recorded::default();
    let (mut live, mut blocks) = (0u64, 0u64);
    for step in workload {
        match step {
            Step::Alloc {
                id,
                size,
                align,
                tag,
            } => {
                writer.alloc(id as u64, size as u64, align as u64, tag)?;
                sizes[id] = Some(size as u64);
                r.allocs += 1;
                live += size as u64;
                blocks += 1;
            }
            Step::Realloc { id, size } => {
                writer.realloc(id as u64, size as u64)?;
                let old = sizes[id].replace(size as u64).unwrap_or(0);
                r.reallocs += 1;
                live = live - old + size as u64;
            }
            Step::Free { id } => {
                writer.free(id as u64)?;
                live -= sizes[id].take().unwrap_or(0);
                r.frees += 1;
                blocks -= 1;
            }
            Step::Checkpoint(Checkpoint { level, frame: None }) => {
                writer.phase(&loaded(level))?;
                r.phases += 1;
            }
            Step::Checkpoint(_) => continue,
            Step::Phase(phase) => {
                writer.phase(&phase.name())?;
                r.phases += 1;
            }
            Step::FrameEnd => {
                writer.frame()?;
                r.frames += 1;
            }
        }
        r.records += 1;
        r.peak_live = r.peak_live.max(live);
        r.peak_blocks = r.peak_blocks.max(blocks);
    }
    r.live_at_end = live;
    Ok(r)
}

/// What [`play`] saw.
///
/// ```
/// use allocator_api2::alloc::Global;
/// use bento_trace::ApiTarget;
/// use bento_trace::workload::{play, Mixed, MixedConfig};
///
/// let w = Mixed::new(MixedConfig { ops: 500, live: 20, ..MixedConfig::DEFAULT });
/// let report = play(&mut ApiTarget(&Global), w, |_, _| {});
/// assert!(report.events >= 500 && report.failures == 0);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SessionReport {
    /// Steps run.
    pub events: usize,
    /// Most bytes (as asked) live at once.
    pub peak_live: usize,
    /// Allocations and reallocs that failed.
    pub failures: usize,
}

/// Runs `workload` against `target` without a trace in between, writing each
/// block's first and last bytes (and a byte in every 4 KiB between) and checking them
/// when the block is resized or freed; calls `at` with each checkpoint and the bytes
/// live then, [`ReplayTarget::frame`] at each frame end, and [`ReplayTarget::phase`]
/// with each phase a trace of the workload would hold (see [`record`]), before `at`
/// for the checkpoint after a load. Frees everything the workload leaves.
///
/// # Panics
///
/// When a block's ends were overwritten (the target handed out overlapping memory),
/// or when the target refuses a frame end.
///
/// ```
/// use allocator_api2::alloc::Global;
/// use bento_trace::workload::{play, Session, SessionConfig};
/// use bento_trace::ApiTarget;
///
/// let config = SessionConfig { levels: 2, frames_per_level: 5, ..SessionConfig::GAME };
/// let mut checkpoints = 0;
/// let report = play(&mut ApiTarget(&Global), Session::new(config), |_, _| checkpoints += 1);
/// assert_eq!(checkpoints, 2 * 6);
/// assert_eq!(report.failures, 0);
/// assert!(report.peak_live > 1 << 20);
/// ```
pub fn play<T: ReplayTarget + ?Sized>(
    target: &mut T,
    workload: impl Workload,
    mut at: impl FnMut(Checkpoint, usize),
) -> SessionReport {
    let mut table: Vec<Option<Live>> = vec![None; workload.ids()];
    let mut report = SessionReport::default();
    let mut live = 0usize;
    for step in workload {
        report.events += 1;
        match step {
            Step::Alloc {
                id,
                size,
                align,
                tag,
            } => {
                let Ok(layout) = Layout::from_size_align(size.max(1), align) else {
                    report.failures += 1;
                    continue;
                };
                // SAFETY: a fresh slot (the workload frees an id before reusing it).
                match unsafe { replay::alloc_marked(target, layout, tag, id) } {
                    Some(block) => {
                        table[id] = Some(block);
                        live += size;
                        report.peak_live = report.peak_live.max(live);
                    }
                    None => report.failures += 1,
                }
            }
            Step::Realloc { id, size } => {
                let Some(block) = table[id] else {
                    continue;
                };
                // SAFETY: `block` is live in `target`, marked with `id`.
                match unsafe { replay::realloc_marked(target, block, size.max(1), id) } {
                    Some(new) => {
                        table[id] = Some(new);
                        live = live - block.layout.size() + new.layout.size();
                        report.peak_live = report.peak_live.max(live);
                    }
                    None => report.failures += 1,
                }
            }
            Step::Free { id } => {
                if let Some(block) = table[id].take() {
                    // SAFETY: live in `target`, marked with `id`.
                    unsafe { replay::free_marked(target, block, id) };
                    live -= block.layout.size();
                }
            }
            Step::Checkpoint(c) => {
                if c.frame.is_none() {
                    target.phase(&loaded(c.level));
                }
                at(c, live);
            }
            Step::Phase(phase) => target.phase(&phase.name()),
            Step::FrameEnd => {
                if let Err(e) = target.frame() {
                    panic!("the target refused a frame end: {e}");
                }
            }
        }
    }
    for (id, slot) in table.iter_mut().enumerate() {
        if let Some(block) = slot.take() {
            // SAFETY: as for `Step::Free`.
            unsafe { replay::free_marked(target, block, id) };
        }
    }
    report
}
