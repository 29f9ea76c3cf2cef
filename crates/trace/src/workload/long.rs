//! [`LongSession`]: a hundred hours of play, with what fragments memory in a real
//! game: state that outlives levels and grows, levels of varied size and mix,
//! streamed assets in a cache with eviction, and frame temporaries.

use std::collections::VecDeque;

use super::step::{Checkpoint, LevelPhase, Step, Steps, Workload};
use super::{Rng, tags};

/// The shape of a long session.
///
/// ```
/// use bento_trace::workload::{LongConfig, LongSession};
///
/// let config = LongConfig { hours: 1, frames_per_level: 4, ..LongConfig::HUNDRED_HOURS };
/// assert_eq!(config.levels(), 3);
/// assert!(LongSession::new(config).count() > 10_000);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LongConfig {
    /// Hours of play.
    pub hours: usize,
    /// Levels an hour of play holds (a level of 20 minutes: 3).
    pub levels_per_hour: usize,
    /// Frames a level runs: the hour compressed (a real level has tens of thousands).
    pub frames_per_level: usize,
    /// Resident blocks of a median level: two thirds of them of 32 B–64 KiB, the
    /// rest of the level's own mix (many small objects, medium buffers or few large
    /// chunks); a level holds 0.75, 1 or 1.5 times as many (one level in five is big,
    /// one in five small).
    pub resident_blocks: usize,
    /// Level assets (256 KiB–2 MiB) of a median level, scaled the same way.
    pub level_assets: usize,
    /// Temporaries a frame makes (each frame draws between half and all of it).
    pub temporaries: usize,
    /// Bytes the streamed-asset cache holds at most: assets of 64 KiB–4 MiB, streamed
    /// in during frames, the oldest evicted to make room, kept across levels.
    pub stream_budget: usize,
    /// Blocks of lasting state (UI text, script objects: 16 B–2 KiB) a level adds
    /// while it loads, between its own data; they are never freed.
    pub lasting_blocks: usize,
    /// Bytes the AI and path cache holds at the start (entries of 64 B–8 KiB, made
    /// during loads and frames, the least recently made evicted); it grows by 2 % of
    /// that an hour (three times as much after a hundred hours).
    pub ai_cache: usize,
    /// Saves kept (a save of 32–512 KiB is made at each level's end; the oldest
    /// beyond these goes).
    pub saves: usize,
    /// The seed of every choice.
    pub seed: u64,
}

impl LongConfig {
    /// A hundred hours of three levels each, 120 frames a level, a median level of
    /// 3,000 resident blocks and 4 assets, 40 temporaries a frame, 16 MiB of
    /// streamed assets, 48 lasting blocks a level, an AI cache of 1 MiB growing to
    /// 3 MiB, 3 saves. Peak live data is some tens of MiB.
    pub const HUNDRED_HOURS: Self = Self {
        hours: 100,
        levels_per_hour: 3,
        frames_per_level: 120,
        resident_blocks: 3000,
        level_assets: 4,
        temporaries: 40,
        stream_budget: 16 << 20,
        lasting_blocks: 48,
        ai_cache: 1 << 20,
        saves: 3,
        seed: 0xbb67_ae85_84ca_a73b,
    };

    /// The levels of the session.
    ///
    /// ```
    /// assert_eq!(bento_trace::workload::LongConfig::HUNDRED_HOURS.levels(), 300);
    /// ```
    pub const fn levels(&self) -> usize {
        self.hours.saturating_mul(self.levels_per_hour)
    }

    /// The hour of play level `level` falls in, from 0.
    ///
    /// ```
    /// use bento_trace::workload::LongConfig;
    /// assert_eq!(LongConfig::HUNDRED_HOURS.hour_of(7), 2);
    /// ```
    pub const fn hour_of(&self, level: usize) -> usize {
        level
            / if self.levels_per_hour == 0 {
                1
            } else {
                self.levels_per_hour
            }
    }
}

/// The sizes of every level's common part: the classic spread.
const SPREAD: (usize, usize) = (32, 64 << 10);

/// A level's own mix of sizes beside the common part: the range its other resident
/// blocks are drawn from, and how many of them it holds, in 48ths of the resident
/// blocks (a level of large blocks holds fewer, so that levels of every mix hold
/// bytes of the same order).
const MIXES: [(usize, usize, usize); 4] = [
    // Many small objects (entities, components).
    (16, 1024, 64),
    // More of the spread.
    (32, 64 << 10, 16),
    // Medium meshes and buffers.
    (1024, 32 << 10, 16),
    // Few large chunks (navigation, audio banks).
    (8 << 10, 256 << 10, 2),
];

/// The common part's blocks, in 48ths of the resident blocks.
const COMMON_48THS: usize = 32;

/// The events of a long session, generated as they are consumed.
#[derive(Debug)]
pub struct LongSession {
    config: LongConfig,
    rng: Rng,
    level: usize,
    frame: usize,
    steps: Steps,
    /// The level's resident blocks and assets.
    resident: Vec<usize>,
    /// The streamed assets in the cache, oldest first, with their sizes; their bytes.
    streams: VecDeque<(usize, usize)>,
    stream_bytes: usize,
    /// The AI cache's entries, oldest first, with their sizes; their bytes.
    ai: VecDeque<(usize, usize)>,
    ai_bytes: usize,
    /// The saves, oldest first.
    saves: VecDeque<usize>,
    /// Lasting blocks (never freed until the session ends).
    lasting: Vec<usize>,
    done: bool,
}

impl LongSession {
    /// The session `config` describes.
    pub fn new(config: LongConfig) -> Self {
        let mut s = Self {
            config,
            rng: Rng::mixed(config.seed),
            level: 0,
            frame: 0,
            steps: Steps::default(),
            resident: Vec::new(),
            streams: VecDeque::new(),
            stream_bytes: 0,
            ai: VecDeque::new(),
            ai_bytes: 0,
            saves: VecDeque::new(),
            lasting: Vec::new(),
            done: config.levels() == 0,
        };
        if !s.done {
            s.load_level();
        }
        s
    }

    /// An upper bound of the ids the session uses.
    pub fn ids(&self) -> usize {
        let c = &self.config;
        let most = COMMON_48THS + MIXES[0].2;
        let resident = c.resident_blocks * 3 / 2 * most / 48 + 1 + c.level_assets * 2;
        64 + resident
            + c.temporaries
            + c.stream_budget / (64 << 10)
            + ai_budget(c, c.hours) / 64
            + c.saves
            + c.levels() * c.lasting_blocks
    }

    fn below(&mut self, n: usize) -> usize {
        self.rng.below(n.max(1) as u64) as usize
    }

    /// What the AI cache may hold now: `ai_cache`, and 2 % more for every hour
    /// played (three times as much after a hundred hours). It depends on the hour
    /// alone, so the first hours of a longer session are those of a shorter one.
    fn ai_budget(&self) -> usize {
        ai_budget(&self.config, self.config.hour_of(self.level))
    }

    /// An entry of the AI and path cache, the least recently made ones evicted.
    fn ai_entry(&mut self) {
        let size = self.rng.log_uniform(64, 8 << 10);
        let id = self.steps.alloc(size, 16, tags::CACHE);
        self.ai.push_back((id, size));
        self.ai_bytes += size;
        while self.ai_bytes > self.ai_budget() {
            let Some((old, bytes)) = self.ai.pop_front() else {
                break;
            };
            self.ai_bytes -= bytes;
            self.steps.free(old);
        }
    }

    fn load_level(&mut self) {
        let c = self.config;
        self.steps
            .queue
            .push_back(Step::Phase(LevelPhase::Loading(self.level)));
        // Each level its own size (one in five big, one in five small) and mix.
        let scale = match self.below(5) {
            0 => 24,
            1 => 12,
            _ => 16,
        };
        let (lo, hi, own) = MIXES[self.below(MIXES.len())];
        let blocks = c.resident_blocks * scale / 16;
        let (common, own) = (blocks * COMMON_48THS / 48, blocks * own / 48);
        let n = common + own;
        // Lasting state and AI entries are made between the level's own blocks.
        let every = n / (c.lasting_blocks + 1) + 1;
        for k in 0..n {
            let align = if self.below(16) == 0 { 64 } else { 16 };
            let size = if self.below(n) < own {
                self.rng.log_uniform(lo, hi)
            } else {
                self.rng.log_uniform(SPREAD.0, SPREAD.1)
            };
            let id = self.steps.alloc(size, align, tags::LEVEL);
            self.resident.push(id);
            if k % every == every / 2 {
                let size = self.rng.log_uniform(16, 2048);
                let id = self.steps.alloc(size, 8, tags::LASTING);
                self.lasting.push(id);
            }
            if k % 64 == 17 {
                self.ai_entry();
            }
        }
        for _ in 0..c.level_assets * scale / 16 {
            let size = self.rng.log_uniform(256 << 10, 2 << 20);
            let id = self.steps.alloc(size, 4096, tags::LEVEL);
            self.resident.push(id);
        }
        self.steps.queue.push_back(Step::Checkpoint(Checkpoint {
            level: self.level,
            frame: None,
        }));
    }

    fn run_frame(&mut self) {
        let n = self.config.temporaries;
        let n = n / 2 + self.below(n / 2 + 1);
        let temps: Vec<usize> = (0..n)
            .map(|_| {
                let size = self.rng.log_uniform(16, 4096);
                self.steps.alloc(size, 16, tags::FRAME)
            })
            .collect();
        // Now and then an asset streams in; the oldest make room for it.
        if self.below(6) == 0 {
            let size = self
                .rng
                .log_uniform(64 << 10, 4 << 20)
                .min(self.config.stream_budget);
            while self.stream_bytes + size > self.config.stream_budget {
                let Some((old, bytes)) = self.streams.pop_front() else {
                    break;
                };
                self.stream_bytes -= bytes;
                self.steps.free(old);
            }
            let id = self.steps.alloc(size, 4096, tags::STREAM);
            self.streams.push_back((id, size));
            self.stream_bytes += size;
        }
        // Path queries fill the AI cache.
        if self.below(3) == 0 {
            self.ai_entry();
        }
        self.steps.queue.push_back(Step::Checkpoint(Checkpoint {
            level: self.level,
            frame: Some(self.frame),
        }));
        for id in temps.into_iter().rev() {
            self.steps.free(id);
        }
        self.steps.queue.push_back(Step::FrameEnd);
    }

    fn unload_level(&mut self) {
        // The level's end: a save, the oldest beyond the kept ones gone.
        let size = self.rng.log_uniform(32 << 10, 512 << 10);
        let id = self.steps.alloc(size, 16, tags::LASTING);
        self.saves.push_back(id);
        while self.saves.len() > self.config.saves {
            let old = self.saves.pop_front().expect("more saves than kept");
            self.steps.free(old);
        }
        self.steps
            .queue
            .push_back(Step::Phase(LevelPhase::Unloading(self.level)));
        // In random order, as a level's objects die.
        while !self.resident.is_empty() {
            let i = self.below(self.resident.len());
            let id = self.resident.swap_remove(i);
            self.steps.free(id);
        }
    }

    /// Frees what the session still holds.
    fn finish(&mut self) {
        let ids: Vec<usize> = self
            .streams
            .drain(..)
            .chain(self.ai.drain(..))
            .map(|(id, _)| id)
            .chain(self.saves.drain(..))
            .chain(self.lasting.drain(..))
            .collect();
        for id in ids {
            self.steps.free(id);
        }
    }

    /// Generates the next batch of events; false once the session is over.
    fn refill(&mut self) -> bool {
        if self.done {
            return false;
        }
        if self.frame < self.config.frames_per_level {
            self.run_frame();
            self.frame += 1;
            return true;
        }
        self.unload_level();
        self.level += 1;
        self.frame = 0;
        if self.level < self.config.levels() {
            self.load_level();
        } else {
            self.finish();
            self.done = true;
        }
        true
    }
}

/// What the AI cache of `config` may hold in hour `hour`.
fn ai_budget(config: &LongConfig, hour: usize) -> usize {
    config
        .ai_cache
        .saturating_add(config.ai_cache.saturating_mul(hour) / 50)
}

refilled_iterator!(LongSession, steps.queue);

impl Workload for LongSession {
    fn ids(&self) -> usize {
        LongSession::ids(self)
    }
}
