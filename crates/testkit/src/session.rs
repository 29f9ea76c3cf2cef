//! A synthetic game session: the long-running workload that shows whether an
//! allocator's footprint creeps over hours of play.
//!
//! A session is a number of **levels**. Each level loads its resident data (thousands
//! of blocks of 32 B–64 KiB and a few level assets of 256 KiB–2 MiB), then runs
//! **frames**: each frame makes a burst of temporaries (16 B–4 KiB) that die at its
//! end, may start **streaming** an asset (64 KiB–4 MiB) that lives for tens of
//! frames, and now and then grows one of a few long-lived **growers** (a log, an
//! entity array) by `realloc`. Unloading the level frees its resident data and assets
//! in random order. A few **globals** live for the whole session. Every size is
//! log-uniform in its range. The game has a few **kinds** of level, played in turn
//! (as a player goes round a game's maps): each kind has its own taste in sizes, and
//! a level's choices come from its kind's seed, so a kind plays the same each time it
//! comes round. Streams end with their level, and the growers are cleared when the
//! round starts again (a new chapter), so every round of kinds asks for exactly the
//! same memory and any change of footprint from round to round is the allocator's.
//!
//! [`OpenWorld`] is a second session, unlike the first in its sizes and lifetimes: an
//! open world streams **cells** of many small resident blocks (16 B–2 KiB), loading
//! each with short-lived load-time temporaries (64 B–64 KiB) between them, and keeps
//! the last few cells; its frames make small blocks (8–520 B) that live for two
//! frames; a few **growers** double from 4 KiB to 1 MiB by `realloc` and start again.
//!
//! Both yield [`Event`]s; [`play`] runs them against a [`SessionHeap`], checks each
//! block's ends survive, and reports the live bytes at each [`Checkpoint`] (after a
//! level or cell loads, and at each frame's busiest moment).

use alloc::collections::VecDeque;
use alloc::vec::Vec;
use core::alloc::Layout;
use core::ptr::NonNull;

use allocator_api2::alloc::Allocator;

/// The shape of a session.
///
/// ```
/// use bento_testkit::session::{Session, SessionConfig};
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
        seed: 0x6a09_e667_f3bc_c908,
    };
}

/// One step of a session. Blocks are named by small integer ids, reused once freed
/// (see [`Session::ids`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    /// Allocate block `id` of `size` bytes aligned to `align`.
    Alloc {
        /// The block's id.
        id: usize,
        /// Bytes.
        size: usize,
        /// A power of two.
        align: usize,
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
}

/// Where in the session a [`Event::Checkpoint`] falls.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Checkpoint {
    /// The level, from 0.
    pub level: usize,
    /// The frame in the level, or `None` right after the level loaded.
    pub frame: Option<usize>,
}

/// The events of a session, generated as they are consumed.
#[derive(Debug)]
pub struct Session {
    config: SessionConfig,
    rng: u64,
    level: usize,
    frame: usize,
    /// Events generated and not yet yielded.
    queue: VecDeque<Event>,
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
        64 + c.growers + c.streams + c.level_assets + c.resident_blocks + c.temporaries
    }

    fn next(&mut self) -> u64 {
        self.rng = xorshift(self.rng);
        self.rng
    }

    /// A size log-uniform in `[lo, hi]`.
    fn size(&mut self, lo: usize, hi: usize) -> usize {
        let u = (self.next() >> 11) as f64 / (1u64 << 53) as f64;
        let span = (hi as f64 / lo as f64).log2();
        ((lo as f64 * (u * span).exp2()) as usize).clamp(lo, hi)
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

    fn alloc(&mut self, size: usize, align: usize) -> usize {
        let id = self.id();
        self.queue.push_back(Event::Alloc { id, size, align });
        id
    }

    fn free(&mut self, id: usize) {
        self.queue.push_back(Event::Free { id });
        self.free_ids.push(id);
    }

    /// The session's start: globals and growers.
    fn start(&mut self) {
        for _ in 0..16 {
            let (size, align) = (self.size(64, 256 << 10), self.align());
            let id = self.alloc(size, align);
            self.globals.push(id);
        }
        for _ in 0..self.config.growers {
            let id = self.alloc(1024, 16);
            self.growers.push((id, 1024));
        }
        self.load_level();
    }

    fn load_level(&mut self) {
        // The level's kind decides what it does: the same each time it comes round.
        let kind = self.level % self.config.level_kinds.max(1);
        self.rng =
            xorshift(self.config.seed ^ (kind as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15)) | 1;
        if kind == 0 && self.level > 0 {
            // A new round: the growers are cleared.
            for g in 0..self.growers.len() {
                let id = self.growers[g].0;
                self.growers[g].1 = 1024;
                self.queue.push_back(Event::Realloc { id, size: 1024 });
            }
        }
        let n = self.config.resident_blocks;
        let n = n / 2 + self.below(n / 2 + 1);
        // Each kind has its own taste in sizes: the top of the range moves.
        let top = self.size(4 << 10, 64 << 10);
        for _ in 0..n {
            let (size, align) = (self.size(32, top), self.align());
            let id = self.alloc(size, align);
            self.resident.push(id);
        }
        for _ in 0..self.config.level_assets {
            let size = self.size(256 << 10, 2 << 20);
            let id = self.alloc(size, 4096);
            self.resident.push(id);
        }
        self.queue.push_back(Event::Checkpoint(Checkpoint {
            level: self.level,
            frame: None,
        }));
    }

    fn unload_level(&mut self) {
        let streams: Vec<usize> = self.streams.drain(..).map(|(id, _)| id).collect();
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
                self.alloc(size, 16)
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
            let id = self.alloc(size, 4096);
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
            self.queue.push_back(Event::Realloc { id, size: new });
        }
        self.queue.push_back(Event::Checkpoint(Checkpoint {
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
    }

    /// Frees what the session still holds: streams, growers, globals.
    fn finish(&mut self) {
        let streams: Vec<usize> = self.streams.drain(..).map(|(id, _)| id).collect();
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
    type Item = Event;

    fn next(&mut self) -> Option<Event> {
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

/// A stream of session [`Event`]s that names its blocks by ids below a bound, which
/// [`play`] sizes its table with.
pub trait Events: Iterator<Item = Event> {
    /// An upper bound of the ids the session uses.
    fn ids(&self) -> usize;
}

impl Events for Session {
    fn ids(&self) -> usize {
        Session::ids(self)
    }
}

/// The shape of an [`OpenWorld`] session.
///
/// ```
/// use bento_testkit::session::{OpenWorld, WorldConfig};
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
    queue: VecDeque<Event>,
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
                let id = w.alloc(GROWER_START, 16);
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
        let u = (self.next() >> 11) as f64 / (1u64 << 53) as f64;
        let span = (hi as f64 / lo as f64).log2();
        ((lo as f64 * (u * span).exp2()) as usize).clamp(lo, hi)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn alloc(&mut self, size: usize, align: usize) -> usize {
        let id = self.free_ids.pop().unwrap_or_else(|| {
            self.next_id += 1;
            self.next_id - 1
        });
        self.queue.push_back(Event::Alloc { id, size, align });
        id
    }

    fn free(&mut self, id: usize) {
        self.queue.push_back(Event::Free { id });
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
            cell.push(self.alloc(size, align));
            if self.config.temporary_every != 0 && k % self.config.temporary_every == 0 {
                let size = self.size(64, 64 << 10);
                let dies = k + 1 + self.below(32);
                let id = self.alloc(size, 16);
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
        self.queue.push_back(Event::Checkpoint(Checkpoint {
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
                self.alloc(size, 8)
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
            self.queue.push_back(Event::Realloc { id, size: new });
        }
        self.queue.push_back(Event::Checkpoint(Checkpoint {
            level: self.cell,
            frame: Some(self.frame),
        }));
        let old = core::mem::replace(&mut self.last_frame, blocks);
        for id in old {
            self.free(id);
        }
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
    type Item = Event;

    fn next(&mut self) -> Option<Event> {
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

impl Events for OpenWorld {
    fn ids(&self) -> usize {
        let c = &self.config;
        64 + c.growers
            + 2 * c.frame_blocks
            + (c.resident_cells.max(1) + 1) * c.cell_blocks
            + c.cell_blocks / c.temporary_every.max(1)
            + 32
    }
}

/// One step of the xorshift64 generator.
fn xorshift(mut x: u64) -> u64 {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    x
}

/// An allocator a session runs against.
pub trait SessionHeap {
    /// A block of `size > 0` bytes aligned to `align`, or `None`.
    fn alloc(&mut self, size: usize, align: usize) -> Option<NonNull<u8>>;

    /// Resizes a block, keeping its first `min(old, new)` bytes; `None` leaves it.
    ///
    /// # Safety
    ///
    /// `ptr` is a live block of this heap of `old` bytes aligned to `align`.
    unsafe fn realloc(
        &mut self,
        ptr: NonNull<u8>,
        old: usize,
        align: usize,
        new: usize,
    ) -> Option<NonNull<u8>>;

    /// Frees a block.
    ///
    /// # Safety
    ///
    /// `ptr` is a live block of this heap of `size` bytes aligned to `align`.
    unsafe fn free(&mut self, ptr: NonNull<u8>, size: usize, align: usize);
}

/// Any allocator-api2 0.2 `Allocator` as a [`SessionHeap`]: `realloc` is `grow` or
/// `shrink` (so the block keeps its alignment, and the allocator's in-place paths are
/// tried first).
///
/// ```
/// use allocator_api2::alloc::Global;
/// use bento_testkit::session::{play, ApiHeap, Session, SessionConfig};
///
/// let config = SessionConfig { levels: 1, frames_per_level: 3, ..SessionConfig::GAME };
/// let report = play(&mut ApiHeap(&Global), Session::new(config), |_, _| {});
/// assert_eq!(report.failures, 0);
/// ```
#[derive(Debug)]
pub struct ApiHeap<'a, A: ?Sized>(pub &'a A);

impl<A: Allocator + ?Sized> SessionHeap for ApiHeap<'_, A> {
    fn alloc(&mut self, size: usize, align: usize) -> Option<NonNull<u8>> {
        let layout = Layout::from_size_align(size, align).ok()?;
        Some(self.0.allocate(layout).ok()?.cast())
    }

    unsafe fn realloc(
        &mut self,
        ptr: NonNull<u8>,
        old: usize,
        align: usize,
        new: usize,
    ) -> Option<NonNull<u8>> {
        let old_layout = Layout::from_size_align(old, align).ok()?;
        let new_layout = Layout::from_size_align(new, align).ok()?;
        // SAFETY: the caller's contract: `ptr` is live with `old_layout`.
        let block = unsafe {
            if new >= old {
                self.0.grow(ptr, old_layout, new_layout)
            } else {
                self.0.shrink(ptr, old_layout, new_layout)
            }
        };
        Some(block.ok()?.cast())
    }

    unsafe fn free(&mut self, ptr: NonNull<u8>, size: usize, align: usize) {
        // SAFETY: the caller's contract: `ptr` is live with this layout.
        unsafe {
            self.0
                .deallocate(ptr, Layout::from_size_align_unchecked(size, align))
        }
    }
}

/// What [`play`] saw.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SessionReport {
    /// Events run.
    pub events: usize,
    /// Most bytes (as asked) live at once.
    pub peak_live: usize,
    /// Allocations and reallocs that failed.
    pub failures: usize,
}

/// Runs `session` against `heap`, writing each block's first and last bytes (and a
/// byte in every 4 KiB between) and checking them when the block is resized or freed, and calls `at` with each
/// checkpoint and the bytes live then. Frees everything the session leaves.
///
/// # Panics
///
/// When a block's ends were overwritten (the heap handed out overlapping memory).
///
/// ```
/// use std::alloc::{alloc, dealloc, realloc, Layout};
/// use std::ptr::NonNull;
/// use bento_testkit::session::{play, Session, SessionConfig, SessionHeap};
///
/// struct System;
/// impl SessionHeap for System {
///     fn alloc(&mut self, size: usize, align: usize) -> Option<NonNull<u8>> {
///         // SAFETY: a non-zero size.
///         NonNull::new(unsafe { alloc(Layout::from_size_align(size, align).ok()?) })
///     }
///     unsafe fn realloc(&mut self, p: NonNull<u8>, old: usize, align: usize, new: usize) -> Option<NonNull<u8>> {
///         // SAFETY: the caller's contract.
///         NonNull::new(unsafe { realloc(p.as_ptr(), Layout::from_size_align(old, align).ok()?, new) })
///     }
///     unsafe fn free(&mut self, p: NonNull<u8>, size: usize, align: usize) {
///         // SAFETY: the caller's contract.
///         unsafe { dealloc(p.as_ptr(), Layout::from_size_align(size, align).unwrap()) }
///     }
/// }
///
/// let config = SessionConfig { levels: 2, frames_per_level: 5, ..SessionConfig::GAME };
/// let mut checkpoints = 0;
/// let report = play(&mut System, Session::new(config), |_, _| checkpoints += 1);
/// assert_eq!(checkpoints, 2 * 6);
/// assert!(report.peak_live > 1 << 20);
/// ```
pub fn play<H: SessionHeap>(
    heap: &mut H,
    session: impl Events,
    mut at: impl FnMut(Checkpoint, usize),
) -> SessionReport {
    // Each slot: the block, its size and alignment.
    let mut table: Vec<Option<(NonNull<u8>, usize, usize)>> = alloc::vec![None; session.ids()];
    let mut report = SessionReport::default();
    let mut live = 0usize;
    for event in session {
        report.events += 1;
        match event {
            Event::Alloc { id, size, align } => {
                let Some(p) = heap.alloc(size, align) else {
                    report.failures += 1;
                    continue;
                };
                // SAFETY: a fresh block of `size > 0` bytes.
                unsafe { mark(p, size, id) };
                table[id] = Some((p, size, align));
                live += size;
                report.peak_live = report.peak_live.max(live);
            }
            Event::Realloc { id, size } => {
                let Some((p, old, align)) = table[id] else {
                    continue;
                };
                // SAFETY: a live block of `old` bytes, marked with `id`.
                unsafe { check(p, old, id) };
                // SAFETY: as above.
                let Some(q) = (unsafe { heap.realloc(p, old, align, size) }) else {
                    report.failures += 1;
                    continue;
                };
                // SAFETY: the block keeps its first `min(old, size)` bytes; it is
                // `size` bytes now.
                unsafe {
                    assert_eq!(
                        q.as_ptr().read(),
                        id as u8,
                        "realloc lost block {id}'s head"
                    );
                    mark(q, size, id);
                }
                table[id] = Some((q, size, align));
                live = live - old + size;
                report.peak_live = report.peak_live.max(live);
            }
            Event::Free { id } => {
                if let Some((p, size, align)) = table[id].take() {
                    // SAFETY: a live block of `size` bytes of this heap, marked.
                    unsafe {
                        check(p, size, id);
                        heap.free(p, size, align);
                    }
                    live -= size;
                }
            }
            Event::Checkpoint(c) => at(c, live),
        }
    }
    for (id, slot) in table.iter_mut().enumerate() {
        if let Some((p, size, align)) = slot.take() {
            // SAFETY: as for `Event::Free`.
            unsafe {
                check(p, size, id);
                heap.free(p, size, align);
            }
        }
    }
    report
}

/// Writes the first and last bytes of a block from its id, and a byte in every 4 KiB
/// between, as a program filling the block would (so that every page of it is
/// resident when the footprint is measured as the process's resident set).
///
/// # Safety
///
/// `p` is a block of `size > 0` writable bytes.
unsafe fn mark(p: NonNull<u8>, size: usize, id: usize) {
    // SAFETY: the caller's contract.
    unsafe {
        for at in (4096..size).step_by(4096) {
            p.as_ptr().add(at).write(0);
        }
        p.as_ptr().write(id as u8);
        p.as_ptr().add(size - 1).write(!(id as u8));
    }
}

/// Checks what [`mark`] wrote.
///
/// # Safety
///
/// As for [`mark`], and marked.
unsafe fn check(p: NonNull<u8>, size: usize, id: usize) {
    // SAFETY: the caller's contract.
    let (head, tail) = unsafe { (p.as_ptr().read(), p.as_ptr().add(size - 1).read()) };
    assert!(
        head == id as u8 && tail == !(id as u8),
        "block {id} at {p:p} ({size} bytes) was overwritten: {head:#04x} .. {tail:#04x}"
    );
}
