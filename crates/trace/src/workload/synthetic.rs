//! The classic synthetic workloads: [`Mixed`] (log-uniform sizes freed in random
//! order around a live set) and [`LifoBatches`] (batches freed in reverse).

use std::collections::VecDeque;

use super::step::{Checkpoint, Step, Workload};
use super::{Rng, log_uniform, tags};

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
    rng: Rng,
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
            rng: Rng::new(config.seed | 1),
            done: 0,
            live: Vec::new(),
            free_ids: (0..config.live.max(1)).rev().collect(),
            queue: VecDeque::new(),
            finished: false,
        }
    }

    fn next_u64(&mut self) -> u64 {
        self.rng.next_u64()
    }

    /// One operation (or, at the end, the frees of what is live); false, making
    /// nothing, once the workload is over.
    fn refill(&mut self) -> bool {
        if self.finished {
            return false;
        }
        let c = self.config;
        if self.done == c.ops {
            for id in self.live.drain(..) {
                self.queue.push_back(Step::Free { id });
            }
            self.finished = true;
            return true;
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
        true
    }
}

refilled_iterator!(Mixed, queue);

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
    rng: Rng,
    batch: usize,
    queue: VecDeque<Step>,
}

impl LifoBatches {
    /// The workload `config` describes.
    pub fn new(config: LifoConfig) -> Self {
        Self {
            config,
            rng: Rng::new(config.seed | 1),
            batch: 0,
            queue: VecDeque::new(),
        }
    }
}

impl LifoBatches {
    /// One batch: its allocations, a checkpoint, its frees in reverse, a frame end.
    fn refill(&mut self) -> bool {
        if self.batch == self.config.batches {
            return false;
        }
        let c = self.config;
        let n = 1 + (self.rng.next_u64() % c.batch.max(1) as u64) as usize;
        let (lo, hi) = (c.min_size.max(1), c.max_size.max(c.min_size.max(1)));
        for id in 0..n {
            let size = log_uniform(self.rng.next_u64(), lo, hi);
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
        true
    }
}

refilled_iterator!(LifoBatches, queue);

impl Workload for LifoBatches {
    fn ids(&self) -> usize {
        self.config.batch.max(1)
    }
}
