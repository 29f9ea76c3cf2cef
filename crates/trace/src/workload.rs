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
//! [`Mixed`] (log-uniform sizes freed in random order around a live set) and
//! [`LifoBatches`] (batches freed in reverse) are the classic synthetic workloads.
//!
//! Each yields [`Step`]s: blocks named by small ids, tagged with what they are for
//! ([`tags`]), [`Checkpoint`]s (after a level or cell loads, and at each frame's
//! busiest moment), frame ends, and, in a [`Session`], the moments a level begins to
//! load and to unload ([`LevelPhase`]).

use std::alloc::Layout;
use std::collections::VecDeque;

use crate::replay::{self, Live, ReplayTarget};

/// The shape of a session.
///
/// ```
/// use bento_trace::workload::{Session, SessionConfig};
///
/// let config = SessionConfig { levels: 2, frames_per_level: 10, ..SessionConfig::GAME };
/// assert!(Session::new(config).count() > 1000);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SessionConfig {
    /// Level cycles (load, frames, unload).
    pub levels: usize,
    /// Kinds of level; level `i` is of kind `i % level_kinds`.
    pub level_kinds: usize,
    /// Frames per level.
    pub frames_per_level: usize,
    /// Resident blocks a level loads (each level draws between half and all of it).
    pub resident_blocks: usize,
    /// Level assets (256 KiB–2 MiB) a level loads.
    pub level_assets: usize,
    /// Temporaries per frame (each frame draws between half and all of it).
    pub temporaries: usize,
    /// Most streamed assets live at once.
    pub streams: usize,
    /// Long-lived growers.
    pub growers: usize,
    /// Most particles (64-byte blocks of [`tags::PARTICLE`] that live 10–100 frames)
    /// alive at once; each frame spawns a few while there is room.
    pub particles: usize,
    /// The seed of every choice.
    pub seed: u64,
}

impl SessionConfig {
    /// A session of 100 levels (10 kinds) of 120 frames: about 2 000–4 000 resident
    /// blocks and 4 assets per level, 20–40 temporaries per frame, up to 6 streamed
    /// assets, 4 growers. Peak live data is some tens of MiB.
    pub const GAME: Self = Self {
        levels: 100,
        level_kinds: 10,
        frames_per_level: 120,
        resident_blocks: 4000,
        level_assets: 4,
        temporaries: 40,
        streams: 6,
        growers: 4,
        particles: 0,
        seed: 0x6a09_e667_f3bc_c908,
    };

    /// [`GAME`](Self::GAME) with particles (up to 2,000 alive) and 24 levels of 4
    /// kinds: the session `bento demo` plays, a second or two on any allocator.
    pub const DEMO: Self = Self {
        levels: 24,
        level_kinds: 4,
        particles: 2000,
        ..Self::GAME
    };
}

/// The tags a workload gives its blocks: what each block is for, which an allocator
/// set-up may route on (`bento demo` puts [`FRAME`](tags::FRAME) blocks in a frame
/// arena and [`PARTICLE`](tags::PARTICLE) blocks in a pool).
pub mod tags {
    /// Level data: loaded with a level (or cell), freed when it unloads.
    pub const LEVEL: u32 = 1;
    /// A frame's temporaries: freed before the frame after next ends.
    pub const FRAME: u32 = 2;
    /// Streamed assets (64 KiB–4 MiB), alive for tens of frames.
    pub const STREAM: u32 = 3;
    /// Long-lived blocks that grow by `realloc`.
    pub const GROWER: u32 = 4;
    /// Blocks that live for the whole session.
    pub const GLOBAL: u32 = 5;
    /// 64-byte particles, alive for tens of frames.
    pub const PARTICLE: u32 = 6;
    /// Load-time temporaries: short-lived blocks between a load's resident ones.
    pub const LOAD: u32 = 7;
    /// Blocks of the synthetic workloads, which have no purpose.
    pub const NONE: u32 = 0;

    /// The name of a tag, for tables and charts ("tag 9" for one not listed here).
    ///
    /// ```
    /// use bento_trace::workload::tags;
    ///
    /// assert_eq!(tags::name(tags::PARTICLE), "particle");
    /// assert_eq!(tags::name(42), "tag 42");
    /// ```
    pub fn name(tag: u32) -> std::borrow::Cow<'static, str> {
        match tag {
            NONE => "none".into(),
            LEVEL => "level".into(),
            FRAME => "frame".into(),
            STREAM => "stream".into(),
            GROWER => "grower".into(),
            GLOBAL => "global".into(),
            PARTICLE => "particle".into(),
            LOAD => "load".into(),
            other => format!("tag {other}").into(),
        }
    }
}

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

/// The name of the phase after level `level` has loaded.
fn loaded(level: usize) -> String {
    format!("level {level} loaded")
}

/// The events of a session, generated as they are consumed.
#[derive(Debug)]
pub struct Session {
    config: SessionConfig,
    rng: u64,
    level: usize,
    frame: usize,
    /// Events generated and not yet yielded.
    queue: VecDeque<Step>,
    /// Ids free for reuse, and the next never-used id.
    free_ids: Vec<usize>,
    next_id: usize,
    /// The level's resident blocks and assets.
    resident: Vec<usize>,
    /// Streamed assets with the frame (counted over the session) they end on.
    streams: Vec<(usize, usize)>,
    /// Growers with their current sizes.
    growers: Vec<(usize, usize)>,
    globals: Vec<usize>,
    /// Live particles with the frame they die on, and their own generator (so that
    /// a session without particles draws what it did before they existed).
    particles: Vec<(usize, usize)>,
    particle_rng: u64,
    clock: usize,
    done: bool,
}

impl Session {
    /// The session `config` describes.
    pub fn new(config: SessionConfig) -> Self {
        let mut s = Self {
            config,
            rng: config.seed | 1,
            level: 0,
            frame: 0,
            queue: VecDeque::new(),
            free_ids: Vec::new(),
            next_id: 0,
            resident: Vec::new(),
            streams: Vec::new(),
            growers: Vec::new(),
            globals: Vec::new(),
            particles: Vec::new(),
            particle_rng: xorshift(config.seed ^ 0x3c6e_f372_fe94_f82b) | 1,
            clock: 0,
            done: config.levels == 0,
        };
        if !s.done {
            s.start();
        }
        s
    }

    /// An upper bound of the ids the session uses: a table of this many slots can
    /// hold every live block.
    pub fn ids(&self) -> usize {
        let c = &self.config;
        64 + c.growers
            + c.streams
            + c.level_assets
            + c.resident_blocks
            + c.temporaries
            + c.particles
    }

    fn next(&mut self) -> u64 {
        self.rng = xorshift(self.rng);
        self.rng
    }

    /// A size log-uniform in `[lo, hi]`.
    fn size(&mut self, lo: usize, hi: usize) -> usize {
        log_uniform(self.next(), lo, hi)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn align(&mut self) -> usize {
        // Mostly 8 or 16, now and then a cache line or a page (GPU-facing data).
        match self.below(32) {
            0 => 4096,
            1..=3 => 64,
            4..=15 => 16,
            _ => 8,
        }
    }

    fn id(&mut self) -> usize {
        self.free_ids.pop().unwrap_or_else(|| {
            self.next_id += 1;
            self.next_id - 1
        })
    }

    fn alloc(&mut self, size: usize, align: usize, tag: u32) -> usize {
        let id = self.id();
        self.queue.push_back(Step::Alloc {
            id,
            size,
            align,
            tag,
        });
        id
    }

    fn free(&mut self, id: usize) {
        self.queue.push_back(Step::Free { id });
        self.free_ids.push(id);
    }

    /// The session's start: globals and growers.
    fn start(&mut self) {
        for _ in 0..16 {
            let (size, align) = (self.size(64, 256 << 10), self.align());
            let id = self.alloc(size, align, tags::GLOBAL);
            self.globals.push(id);
        }
        for _ in 0..self.config.growers {
            let id = self.alloc(1024, 16, tags::GROWER);
            self.growers.push((id, 1024));
        }
        self.load_level();
    }

    fn load_level(&mut self) {
        self.queue
            .push_back(Step::Phase(LevelPhase::Loading(self.level)));
        // The level's kind decides what it does: the same each time it comes round.
        let kind = self.level % self.config.level_kinds.max(1);
        self.rng =
            xorshift(self.config.seed ^ (kind as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15)) | 1;
        if kind == 0 && self.level > 0 {
            // A new round: the growers are cleared.
            for g in 0..self.growers.len() {
                let id = self.growers[g].0;
                self.growers[g].1 = 1024;
                self.queue.push_back(Step::Realloc { id, size: 1024 });
            }
        }
        let n = self.config.resident_blocks;
        let n = n / 2 + self.below(n / 2 + 1);
        // Each kind has its own taste in sizes: the top of the range moves.
        let top = self.size(4 << 10, 64 << 10);
        for _ in 0..n {
            let (size, align) = (self.size(32, top), self.align());
            let id = self.alloc(size, align, tags::LEVEL);
            self.resident.push(id);
        }
        for _ in 0..self.config.level_assets {
            let size = self.size(256 << 10, 2 << 20);
            let id = self.alloc(size, 4096, tags::LEVEL);
            self.resident.push(id);
        }
        self.queue.push_back(Step::Checkpoint(Checkpoint {
            level: self.level,
            frame: None,
        }));
    }

    fn unload_level(&mut self) {
        self.queue
            .push_back(Step::Phase(LevelPhase::Unloading(self.level)));
        let streams: Vec<usize> = self
            .streams
            .drain(..)
            .chain(self.particles.drain(..))
            .map(|(id, _)| id)
            .collect();
        for id in streams {
            self.free(id);
        }
        // In random order, as a level's objects die.
        while !self.resident.is_empty() {
            let i = self.below(self.resident.len());
            let id = self.resident.swap_remove(i);
            self.free(id);
        }
    }

    fn run_frame(&mut self) {
        self.clock += 1;
        let n = self.config.temporaries;
        let n = n / 2 + self.below(n / 2 + 1);
        let temps: Vec<usize> = (0..n)
            .map(|_| {
                let size = self.size(16, 4096);
                self.alloc(size, 16, tags::FRAME)
            })
            .collect();
        // Streaming: finished assets go, and now and then a new one starts.
        let clock = self.clock;
        let mut i = 0;
        while i < self.streams.len() {
            if self.streams[i].1 <= clock {
                let (id, _) = self.streams.swap_remove(i);
                self.free(id);
            } else {
                i += 1;
            }
        }
        if self.streams.len() < self.config.streams && self.below(4) == 0 {
            let size = self.size(64 << 10, 4 << 20);
            let id = self.alloc(size, 4096, tags::STREAM);
            let life = 10 + self.below(90);
            self.streams.push((id, clock + life));
        }
        // A grower grows by half now and then, and is cleared back to small rarely.
        if !self.growers.is_empty() && self.below(8) == 0 {
            let g = self.below(self.growers.len());
            let (id, size) = self.growers[g];
            let new = if size > (2 << 20) || self.below(16) == 0 {
                1024
            } else {
                size + size / 2
            };
            self.growers[g].1 = new;
            self.queue.push_back(Step::Realloc { id, size: new });
        }
        self.queue.push_back(Step::Checkpoint(Checkpoint {
            level: self.level,
            frame: Some(self.frame),
        }));
        // Temporaries die at the end of the frame, in reverse order mostly: every
        // seventh outlives the others by a moment.
        let (late, soon): (Vec<_>, Vec<_>) =
            temps.into_iter().enumerate().partition(|(k, _)| k % 7 == 3);
        for (_, id) in soon.into_iter().rev().chain(late) {
            self.free(id);
        }
        self.run_particles();
        self.queue.push_back(Step::FrameEnd);
    }

    /// Particles whose time is up die; a few new ones spawn while there is room.
    fn run_particles(&mut self) {
        if self.config.particles == 0 {
            return;
        }
        let clock = self.clock;
        let mut i = 0;
        while i < self.particles.len() {
            if self.particles[i].1 <= clock {
                let (id, _) = self.particles.swap_remove(i);
                self.free(id);
            } else {
                i += 1;
            }
        }
        self.particle_rng = xorshift(self.particle_rng);
        let r = self.particle_rng;
        let room = self.config.particles - self.particles.len();
        let spawn = ((r % (self.config.particles as u64 / 16 + 1)) as usize).min(room);
        for k in 0..spawn {
            let life = 10 + ((r >> 20).wrapping_add(k as u64 * 0x9e37) % 91) as usize;
            let id = self.alloc(PARTICLE_SIZE, 16, tags::PARTICLE);
            self.particles.push((id, clock + life));
        }
    }

    /// Frees what the session still holds: streams, growers, globals.
    fn finish(&mut self) {
        let streams: Vec<usize> = self
            .streams
            .drain(..)
            .chain(self.particles.drain(..))
            .map(|(id, _)| id)
            .collect();
        let growers: Vec<usize> = self.growers.drain(..).map(|(id, _)| id).collect();
        let globals: Vec<usize> = self.globals.drain(..).collect();
        for id in streams.into_iter().chain(growers).chain(globals) {
            self.free(id);
        }
    }

    /// Generates the next batch of events.
    fn advance(&mut self) {
        if self.frame < self.config.frames_per_level {
            self.run_frame();
            self.frame += 1;
            return;
        }
        self.unload_level();
        self.level += 1;
        self.frame = 0;
        if self.level < self.config.levels {
            self.load_level();
        } else {
            self.finish();
            self.done = true;
        }
    }
}

impl Iterator for Session {
    type Item = Step;

    fn next(&mut self) -> Option<Step> {
        loop {
            if let Some(e) = self.queue.pop_front() {
                return Some(e);
            }
            if self.done {
                return None;
            }
            self.advance();
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

impl Workload for Session {
    fn ids(&self) -> usize {
        Session::ids(self)
    }
}

/// The shape of an [`OpenWorld`] session.
///
/// ```
/// use bento_trace::workload::{OpenWorld, WorldConfig};
///
/// let config = WorldConfig { cells: 2, frames_per_cell: 10, ..WorldConfig::WORLD };
/// assert!(OpenWorld::new(config).count() > 5000);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WorldConfig {
    /// Cells streamed in over the session.
    pub cells: usize,
    /// Cells kept loaded: loading one more unloads the oldest.
    pub resident_cells: usize,
    /// Frames between two cell loads.
    pub frames_per_cell: usize,
    /// Resident blocks (16 B–2 KiB) a cell loads.
    pub cell_blocks: usize,
    /// One load-time temporary (64 B–64 KiB) per this many resident blocks; each
    /// lives for up to 32 more allocations of the load.
    pub temporary_every: usize,
    /// Blocks (8–520 B) each frame makes; each lives until the end of the next frame.
    pub frame_blocks: usize,
    /// Long-lived growers (4 KiB doubling to 1 MiB).
    pub growers: usize,
    /// The seed of every choice.
    pub seed: u64,
}

impl WorldConfig {
    /// 40 cells, 3 kept, 60 frames each: 3,000 resident blocks a cell, a load-time
    /// temporary every 8 blocks, 50 blocks a frame, 8 growers. Peak live data is
    /// about 10–12 MiB.
    pub const WORLD: Self = Self {
        cells: 40,
        resident_cells: 3,
        frames_per_cell: 60,
        cell_blocks: 3000,
        temporary_every: 8,
        frame_blocks: 50,
        growers: 8,
        seed: 0xbb67_ae85_84ca_a73b,
    };
}

/// An open-world session (see the [module docs](self)), generated as it is consumed.
#[derive(Debug)]
pub struct OpenWorld {
    config: WorldConfig,
    rng: u64,
    cell: usize,
    frame: usize,
    queue: VecDeque<Step>,
    free_ids: Vec<usize>,
    next_id: usize,
    /// The loaded cells' blocks, oldest cell first.
    cells: VecDeque<Vec<usize>>,
    /// The previous frame's blocks, freed at the end of this one.
    last_frame: Vec<usize>,
    /// Growers with their current sizes.
    growers: Vec<(usize, usize)>,
    done: bool,
}

/// Where a grower starts, and where it starts again.
const GROWER_START: usize = 4 << 10;
/// The most a grower holds.
const GROWER_MAX: usize = 1 << 20;

impl OpenWorld {
    /// The session `config` describes.
    pub fn new(config: WorldConfig) -> Self {
        let mut w = Self {
            config,
            rng: config.seed | 1,
            cell: 0,
            frame: 0,
            queue: VecDeque::new(),
            free_ids: Vec::new(),
            next_id: 0,
            cells: VecDeque::new(),
            last_frame: Vec::new(),
            growers: Vec::new(),
            done: config.cells == 0,
        };
        if !w.done {
            for _ in 0..config.growers {
                let id = w.alloc(GROWER_START, 16, tags::GROWER);
                w.growers.push((id, GROWER_START));
            }
            w.load_cell();
        }
        w
    }

    fn next(&mut self) -> u64 {
        self.rng = xorshift(self.rng);
        self.rng
    }

    /// A size log-uniform in `[lo, hi]`.
    fn size(&mut self, lo: usize, hi: usize) -> usize {
        log_uniform(self.next(), lo, hi)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn alloc(&mut self, size: usize, align: usize, tag: u32) -> usize {
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

    fn free(&mut self, id: usize) {
        self.queue.push_back(Step::Free { id });
        self.free_ids.push(id);
    }

    /// Streams a cell in (unloading the oldest when too many are loaded): its
    /// resident blocks, with load-time temporaries between them that each die a few
    /// allocations later.
    fn load_cell(&mut self) {
        if self.cells.len() == self.config.resident_cells.max(1) {
            let mut old = self.cells.pop_front().unwrap_or_default();
            // Unloaded in random order.
            while !old.is_empty() {
                let i = self.below(old.len());
                let id = old.swap_remove(i);
                self.free(id);
            }
        }
        let mut cell = Vec::with_capacity(self.config.cell_blocks);
        // Temporaries with the allocation count they die at.
        let mut temps: Vec<(usize, usize)> = Vec::new();
        for k in 0..self.config.cell_blocks {
            let size = self.size(16, 2048);
            let align = if self.below(4) == 0 { 16 } else { 8 };
            cell.push(self.alloc(size, align, tags::LEVEL));
            if self.config.temporary_every != 0 && k % self.config.temporary_every == 0 {
                let size = self.size(64, 64 << 10);
                let dies = k + 1 + self.below(32);
                let id = self.alloc(size, 16, tags::LOAD);
                temps.push((id, dies));
            }
            let mut i = 0;
            while i < temps.len() {
                if temps[i].1 <= k {
                    let (id, _) = temps.swap_remove(i);
                    self.free(id);
                } else {
                    i += 1;
                }
            }
        }
        for (id, _) in temps {
            self.free(id);
        }
        self.cells.push_back(cell);
        self.queue.push_back(Step::Checkpoint(Checkpoint {
            level: self.cell,
            frame: None,
        }));
    }

    /// A frame: its blocks, a grower now and then, and the previous frame's blocks
    /// freed.
    fn run_frame(&mut self) {
        let blocks: Vec<usize> = (0..self.config.frame_blocks)
            .map(|_| {
                let size = self.size(8, 520);
                self.alloc(size, 8, tags::FRAME)
            })
            .collect();
        if !self.growers.is_empty() && self.below(6) == 0 {
            let g = self.below(self.growers.len());
            let (id, size) = self.growers[g];
            let new = if size >= GROWER_MAX {
                GROWER_START
            } else {
                size * 2
            };
            self.growers[g].1 = new;
            self.queue.push_back(Step::Realloc { id, size: new });
        }
        self.queue.push_back(Step::Checkpoint(Checkpoint {
            level: self.cell,
            frame: Some(self.frame),
        }));
        let old = core::mem::replace(&mut self.last_frame, blocks);
        for id in old {
            self.free(id);
        }
        self.queue.push_back(Step::FrameEnd);
    }

    fn advance(&mut self) {
        if self.frame < self.config.frames_per_cell {
            self.run_frame();
            self.frame += 1;
            return;
        }
        self.cell += 1;
        self.frame = 0;
        if self.cell < self.config.cells {
            self.load_cell();
            return;
        }
        let mut rest: Vec<usize> = core::mem::take(&mut self.last_frame);
        rest.extend(self.cells.drain(..).flatten());
        rest.extend(self.growers.drain(..).map(|(id, _)| id));
        for id in rest {
            self.free(id);
        }
        self.done = true;
    }
}

impl Iterator for OpenWorld {
    type Item = Step;

    fn next(&mut self) -> Option<Step> {
        loop {
            if let Some(e) = self.queue.pop_front() {
                return Some(e);
            }
            if self.done {
                return None;
            }
            self.advance();
        }
    }
}

impl Workload for OpenWorld {
    fn ids(&self) -> usize {
        let c = &self.config;
        64 + c.growers
            + 2 * c.frame_blocks
            + (c.resident_cells.max(1) + 1) * c.cell_blocks
            + c.cell_blocks / c.temporary_every.max(1)
            + 32
    }
}

/// The shape of a [`Mixed`] workload.
///
/// ```
/// use bento_trace::workload::{Mixed, MixedConfig};
///
/// let config = MixedConfig { ops: 1000, ..MixedConfig::DEFAULT };
/// assert!(Mixed::new(config).count() >= 1000);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MixedConfig {
    /// Allocations and frees to make (the blocks still live then are freed after).
    pub ops: usize,
    /// The most blocks live at once; the live set hovers between half and all of it.
    pub live: usize,
    /// The smallest size (at least 1).
    pub min_size: usize,
    /// The largest size.
    pub max_size: usize,
    /// The seed of every choice.
    pub seed: u64,
}

impl MixedConfig {
    /// 200,000 operations on up to 2,000 live blocks of 16 B–64 KiB.
    pub const DEFAULT: Self = Self {
        ops: 200_000,
        live: 2000,
        min_size: 16,
        max_size: 64 << 10,
        seed: 0x3c6e_f372_fe94_f82b,
    };
}

/// The classic synthetic workload: sizes log-uniform in a range, freed in random
/// order, with a live set that hovers between half and all of its bound. A
/// [`Checkpoint`] every 1,024 operations (level 0, frame = the count of them).
#[derive(Debug)]
pub struct Mixed {
    config: MixedConfig,
    rng: u64,
    done: usize,
    live: Vec<usize>,
    free_ids: Vec<usize>,
    queue: VecDeque<Step>,
    finished: bool,
}

impl Mixed {
    /// The workload `config` describes.
    pub fn new(config: MixedConfig) -> Self {
        Self {
            config,
            rng: config.seed | 1,
            done: 0,
            live: Vec::new(),
            free_ids: (0..config.live.max(1)).rev().collect(),
            queue: VecDeque::new(),
            finished: false,
        }
    }

    fn next_u64(&mut self) -> u64 {
        self.rng = xorshift(self.rng);
        self.rng
    }

    fn advance(&mut self) {
        let c = self.config;
        if self.done == c.ops {
            for id in self.live.drain(..) {
                self.queue.push_back(Step::Free { id });
            }
            self.finished = true;
            return;
        }
        self.done += 1;
        let r = self.next_u64();
        let bound = c.live.max(1);
        let grow = self.live.len() < bound / 2 || (self.live.len() < bound && r & 1 == 0);
        if grow {
            let (lo, hi) = (c.min_size.max(1), c.max_size.max(c.min_size.max(1)));
            let size = log_uniform(self.next_u64(), lo, hi);
            let align = if r & 0x30 == 0 { 64 } else { 16 };
            let id = self.free_ids.pop().unwrap_or(0);
            self.live.push(id);
            self.queue.push_back(Step::Alloc {
                id,
                size,
                align,
                tag: tags::NONE,
            });
        } else {
            let i = ((r >> 8) % self.live.len() as u64) as usize;
            let id = self.live.swap_remove(i);
            self.free_ids.push(id);
            self.queue.push_back(Step::Free { id });
        }
        if self.done.is_multiple_of(1024) {
            self.queue.push_back(Step::Checkpoint(Checkpoint {
                level: 0,
                frame: Some(self.done / 1024),
            }));
        }
    }
}

impl Iterator for Mixed {
    type Item = Step;

    fn next(&mut self) -> Option<Step> {
        loop {
            if let Some(s) = self.queue.pop_front() {
                return Some(s);
            }
            if self.finished {
                return None;
            }
            self.advance();
        }
    }
}

impl Workload for Mixed {
    fn ids(&self) -> usize {
        self.config.live.max(1)
    }
}

/// The shape of a [`LifoBatches`] workload.
///
/// ```
/// use bento_trace::workload::{LifoBatches, LifoConfig};
///
/// let config = LifoConfig { batches: 10, ..LifoConfig::DEFAULT };
/// assert!(LifoBatches::new(config).count() > 10);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LifoConfig {
    /// Batches to run.
    pub batches: usize,
    /// The most blocks a batch allocates (each draws between 1 and this many).
    pub batch: usize,
    /// The smallest size (at least 1).
    pub min_size: usize,
    /// The largest size.
    pub max_size: usize,
    /// The seed of every choice.
    pub seed: u64,
}

impl LifoConfig {
    /// 2,000 batches of up to 256 blocks of 8 B–4 KiB.
    pub const DEFAULT: Self = Self {
        batches: 2000,
        batch: 256,
        min_size: 8,
        max_size: 4096,
        seed: 0xa54f_f53a_5f1d_36f1,
    };
}

/// Batches of blocks freed in the reverse order of their allocation, as a stack
/// allocator or a frame's scratch memory sees them. Each batch ends with a
/// [`Checkpoint`] at its peak (level 0, frame = the batch) and, once it is freed, a
/// [`Step::FrameEnd`].
#[derive(Debug)]
pub struct LifoBatches {
    config: LifoConfig,
    rng: u64,
    batch: usize,
    queue: VecDeque<Step>,
}

impl LifoBatches {
    /// The workload `config` describes.
    pub fn new(config: LifoConfig) -> Self {
        Self {
            config,
            rng: config.seed | 1,
            batch: 0,
            queue: VecDeque::new(),
        }
    }
}

impl Iterator for LifoBatches {
    type Item = Step;

    fn next(&mut self) -> Option<Step> {
        loop {
            if let Some(s) = self.queue.pop_front() {
                return Some(s);
            }
            if self.batch == self.config.batches {
                return None;
            }
            let c = self.config;
            self.rng = xorshift(self.rng);
            let n = 1 + (self.rng % c.batch.max(1) as u64) as usize;
            let (lo, hi) = (c.min_size.max(1), c.max_size.max(c.min_size.max(1)));
            for id in 0..n {
                self.rng = xorshift(self.rng);
                let size = log_uniform(self.rng, lo, hi);
                self.queue.push_back(Step::Alloc {
                    id,
                    size,
                    align: 8,
                    tag: tags::FRAME,
                });
            }
            self.queue.push_back(Step::Checkpoint(Checkpoint {
                level: 0,
                frame: Some(self.batch),
            }));
            for id in (0..n).rev() {
                self.queue.push_back(Step::Free { id });
            }
            self.queue.push_back(Step::FrameEnd);
            self.batch += 1;
        }
    }
}

impl Workload for LifoBatches {
    fn ids(&self) -> usize {
        self.config.batch.max(1)
    }
}

/// A size log-uniform in `[lo, hi]` (`lo >= 1`) from 64 random bits.
fn log_uniform(bits: u64, lo: usize, hi: usize) -> usize {
    let u = (bits >> 11) as f64 / (1u64 << 53) as f64;
    let span = (hi as f64 / lo as f64).log2();
    ((lo as f64 * (u * span).exp2()) as usize).clamp(lo, hi)
}

/// One step of the xorshift64 generator.
fn xorshift(mut x: u64) -> u64 {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    x
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
    writer: &mut crate::TraceWriter<W>,
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
