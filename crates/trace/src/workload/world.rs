//! [`OpenWorld`]: an open world streaming cells of small blocks.

use std::collections::VecDeque;

use super::step::{Checkpoint, Step, Steps, Workload};
use super::{Rng, tags};

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

/// An open-world session (see the [module docs](crate::workload)), generated as it is consumed.
#[derive(Debug)]
pub struct OpenWorld {
    config: WorldConfig,
    rng: Rng,
    cell: usize,
    frame: usize,
    /// Steps generated and not yet yielded, and the blocks' ids.
    steps: Steps,
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
            rng: Rng::new(config.seed | 1),
            cell: 0,
            frame: 0,
            steps: Steps::default(),
            cells: VecDeque::new(),
            last_frame: Vec::new(),
            growers: Vec::new(),
            done: config.cells == 0,
        };
        if !w.done {
            for _ in 0..config.growers {
                let id = w.steps.alloc(GROWER_START, 16, tags::GROWER);
                w.growers.push((id, GROWER_START));
            }
            w.load_cell();
        }
        w
    }

    fn below(&mut self, n: usize) -> usize {
        (self.rng.next_u64() % n as u64) as usize
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
                self.steps.free(id);
            }
        }
        let mut cell = Vec::with_capacity(self.config.cell_blocks);
        // Temporaries with the allocation count they die at.
        let mut temps: Vec<(usize, usize)> = Vec::new();
        for k in 0..self.config.cell_blocks {
            let size = self.rng.log_uniform(16, 2048);
            let align = if self.below(4) == 0 { 16 } else { 8 };
            cell.push(self.steps.alloc(size, align, tags::LEVEL));
            if self.config.temporary_every != 0 && k % self.config.temporary_every == 0 {
                let size = self.rng.log_uniform(64, 64 << 10);
                let dies = k + 1 + self.below(32);
                let id = self.steps.alloc(size, 16, tags::LOAD);
                temps.push((id, dies));
            }
            let mut i = 0;
            while i < temps.len() {
                if temps[i].1 <= k {
                    let (id, _) = temps.swap_remove(i);
                    self.steps.free(id);
                } else {
                    i += 1;
                }
            }
        }
        for (id, _) in temps {
            self.steps.free(id);
        }
        self.cells.push_back(cell);
        self.steps.queue.push_back(Step::Checkpoint(Checkpoint {
            level: self.cell,
            frame: None,
        }));
    }

    /// A frame: its blocks, a grower now and then, and the previous frame's blocks
    /// freed.
    fn run_frame(&mut self) {
        let blocks: Vec<usize> = (0..self.config.frame_blocks)
            .map(|_| {
                let size = self.rng.log_uniform(8, 520);
                self.steps.alloc(size, 8, tags::FRAME)
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
            self.steps.queue.push_back(Step::Realloc { id, size: new });
        }
        self.steps.queue.push_back(Step::Checkpoint(Checkpoint {
            level: self.cell,
            frame: Some(self.frame),
        }));
        let old = core::mem::replace(&mut self.last_frame, blocks);
        for id in old {
            self.steps.free(id);
        }
        self.steps.queue.push_back(Step::FrameEnd);
    }

    /// Generates the next frame or cell; false, generating nothing, once the world is
    /// over.
    fn refill(&mut self) -> bool {
        if self.done {
            return false;
        }
        if self.frame < self.config.frames_per_cell {
            self.run_frame();
            self.frame += 1;
            return true;
        }
        self.cell += 1;
        self.frame = 0;
        if self.cell < self.config.cells {
            self.load_cell();
            return true;
        }
        let mut rest: Vec<usize> = core::mem::take(&mut self.last_frame);
        rest.extend(self.cells.drain(..).flatten());
        rest.extend(self.growers.drain(..).map(|(id, _)| id));
        for id in rest {
            self.steps.free(id);
        }
        self.done = true;
        true
    }
}

refilled_iterator!(OpenWorld, steps.queue);

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
