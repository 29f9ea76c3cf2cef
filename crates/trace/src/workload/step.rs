//! The vocabulary of workloads: the [`Step`]s they yield, the [`Workload`] trait, and
//! the queue of steps and ids ([`Steps`]) the generators share.

use std::collections::VecDeque;

#[cfg(doc)]
use super::{Session, play, record, tags};
#[cfg(doc)]
use crate::target::ReplayTarget;

/// The size of a particle.
pub const PARTICLE_SIZE: usize = 64;

/// One step of a session. Blocks are named by small integer ids, reused once freed
/// (see [`Session::ids`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// Allocate block `id` of `size` bytes aligned to `align`.
    Alloc {
        /// The block's id.
        id: usize,
        /// Bytes.
        size: usize,
        /// A power of two.
        align: usize,
        /// What the block is for (see [`tags`]).
        tag: u32,
    },
    /// Resize block `id` to `size` bytes (keeping its contents and alignment).
    Realloc {
        /// The block's id.
        id: usize,
        /// The new size.
        size: usize,
    },
    /// Free block `id`.
    Free {
        /// The block's id.
        id: usize,
    },
    /// A moment worth measuring: a level has loaded, or a frame is at its busiest.
    Checkpoint(Checkpoint),
    /// A level begins to load or to unload.
    Phase(LevelPhase),
    /// A frame is over: the blocks of [`tags::FRAME`] it made are free, and those of
    /// the frame before it too.
    FrameEnd,
}

/// Where in the session a [`Step::Checkpoint`] falls.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Checkpoint {
    /// The level, from 0.
    pub level: usize,
    /// The frame in the level, or `None` right after the level loaded.
    pub frame: Option<usize>,
}

/// A level begins to load, or to unload: the phases of a [`Session`] besides the
/// checkpoint after each load ("level N loaded"). [`record`] writes each as a phase
/// record named by [`LevelPhase::name`]; [`play`] passes that name to
/// [`ReplayTarget::phase`].
///
/// ```
/// use bento_trace::workload::{LevelPhase, Session, SessionConfig, Step};
///
/// assert_eq!(LevelPhase::Unloading(3).name(), "level 3 unloading");
/// let config = SessionConfig { levels: 1, frames_per_level: 2, ..SessionConfig::GAME };
/// let phases: Vec<Step> = Session::new(config)
///     .filter(|s| matches!(s, Step::Phase(_)))
///     .collect();
/// assert_eq!(phases, [
///     Step::Phase(LevelPhase::Loading(0)),
///     Step::Phase(LevelPhase::Unloading(0)),
/// ]);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LevelPhase {
    /// Level `N` (from 0) begins to load: its data is allocated next.
    Loading(usize),
    /// Level `N` begins to unload: its data is freed next.
    Unloading(usize),
}

impl LevelPhase {
    /// The phase's name in a trace: "level N loading" or "level N unloading".
    pub fn name(self) -> String {
        match self {
            Self::Loading(level) => format!("level {level} loading"),
            Self::Unloading(level) => format!("level {level} unloading"),
        }
    }
}

/// A stream of [`Step`]s that names its blocks by ids below a bound, which [`play`]
/// and [`record`] size their tables with.
///
/// ```
/// use bento_trace::workload::{Mixed, MixedConfig, Step, Workload};
///
/// let w = Mixed::new(MixedConfig { ops: 100, live: 10, ..MixedConfig::DEFAULT });
/// let bound = w.ids();
/// for step in w {
///     if let Step::Alloc { id, .. } = step {
///         assert!(id < bound);
///     }
/// }
/// ```
pub trait Workload: Iterator<Item = Step> {
    /// An upper bound of the ids the workload uses.
    fn ids(&self) -> usize;
}

/// The steps a workload has made and not yet yielded, and the ids of its blocks: an id
/// freed is taken again (the last freed first) before a new one.
#[derive(Debug, Default)]
pub(super) struct Steps {
    pub(super) queue: VecDeque<Step>,
    free_ids: Vec<usize>,
    next_id: usize,
}

impl Steps {
    /// Allocates a block, with the id next in turn; returns the id.
    pub(super) fn alloc(&mut self, size: usize, align: usize, tag: u32) -> usize {
        let id = self.free_ids.pop().unwrap_or_else(|| {
            self.next_id += 1;
            self.next_id - 1
        });
        self.queue.push_back(Step::Alloc {
            id,
            size,
            align,
            tag,
        });
        id
    }

    /// Frees block `id`.
    pub(super) fn free(&mut self, id: usize) {
        self.queue.push_back(Step::Free { id });
        self.free_ids.push(id);
    }
}

/// Removes the entries of `list` (each an id and the clock at which its time is up)
/// whose time is up at `clock`, and returns their ids, in the order a scan from the
/// front meets them (each removed entry's place taken by the last one).
pub(super) fn expired(list: &mut Vec<(usize, usize)>, clock: usize) -> Vec<usize> {
    let mut ids = Vec::new();
    let mut i = 0;
    while i < list.len() {
        if list[i].1 <= clock {
            ids.push(list.swap_remove(i).0);
        } else {
            i += 1;
        }
    }
    ids
}
