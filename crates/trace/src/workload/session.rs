//! [`Session`]: a game session of levels, frames, streams, growers and particles.

use super::step::{Checkpoint, LevelPhase, PARTICLE_SIZE, Step, Steps, Workload, expired};
use super::{Rng, tags};

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

/// The events of a session, generated as they are consumed.
#[derive(Debug)]
pub struct Session {
    config: SessionConfig,
    rng: Rng,
    level: usize,
    frame: usize,
    /// Steps generated and not yet yielded, and the blocks' ids.
    steps: Steps,
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
    particle_rng: Rng,
    clock: usize,
    done: bool,
}

impl Session {
    /// The session `config` describes.
    pub fn new(config: SessionConfig) -> Self {
        let mut s = Self {
            config,
            rng: Rng::new(config.seed | 1),
            level: 0,
            frame: 0,
            steps: Steps::default(),
            resident: Vec::new(),
            streams: Vec::new(),
            growers: Vec::new(),
            globals: Vec::new(),
            particles: Vec::new(),
            particle_rng: Rng::new(Rng::step(config.seed ^ 0x3c6e_f372_fe94_f82b) | 1),
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

    fn below(&mut self, n: usize) -> usize {
        (self.rng.next_u64() % n as u64) as usize
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

    /// The session's start: globals and growers.
    fn start(&mut self) {
        for _ in 0..16 {
            let (size, align) = (self.rng.log_uniform(64, 256 << 10), self.align());
            let id = self.steps.alloc(size, align, tags::GLOBAL);
            self.globals.push(id);
        }
        for _ in 0..self.config.growers {
            let id = self.steps.alloc(1024, 16, tags::GROWER);
            self.growers.push((id, 1024));
        }
        self.load_level();
    }

    fn load_level(&mut self) {
        self.steps
            .queue
            .push_back(Step::Phase(LevelPhase::Loading(self.level)));
        // The level's kind decides what it does: the same each time it comes round.
        let kind = self.level % self.config.level_kinds.max(1);
        self.rng = Rng::new(
            Rng::step(self.config.seed ^ (kind as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15)) | 1,
        );
        if kind == 0 && self.level > 0 {
            // A new round: the growers are cleared.
            for g in 0..self.growers.len() {
                let id = self.growers[g].0;
                self.growers[g].1 = 1024;
                self.steps.queue.push_back(Step::Realloc { id, size: 1024 });
            }
        }
        let n = self.config.resident_blocks;
        let n = n / 2 + self.below(n / 2 + 1);
        // Each kind has its own taste in sizes: the top of the range moves.
        let top = self.rng.log_uniform(4 << 10, 64 << 10);
        for _ in 0..n {
            let (size, align) = (self.rng.log_uniform(32, top), self.align());
            let id = self.steps.alloc(size, align, tags::LEVEL);
            self.resident.push(id);
        }
        for _ in 0..self.config.level_assets {
            let size = self.rng.log_uniform(256 << 10, 2 << 20);
            let id = self.steps.alloc(size, 4096, tags::LEVEL);
            self.resident.push(id);
        }
        self.steps.queue.push_back(Step::Checkpoint(Checkpoint {
            level: self.level,
            frame: None,
        }));
    }

    fn unload_level(&mut self) {
        self.steps
            .queue
            .push_back(Step::Phase(LevelPhase::Unloading(self.level)));
        let streams = self.drain_streams_and_particles();
        for id in streams {
            self.steps.free(id);
        }
        // In random order, as a level's objects die.
        while !self.resident.is_empty() {
            let i = self.below(self.resident.len());
            let id = self.resident.swap_remove(i);
            self.steps.free(id);
        }
    }

    fn run_frame(&mut self) {
        self.clock += 1;
        let n = self.config.temporaries;
        let n = n / 2 + self.below(n / 2 + 1);
        let temps: Vec<usize> = (0..n)
            .map(|_| {
                let size = self.rng.log_uniform(16, 4096);
                self.steps.alloc(size, 16, tags::FRAME)
            })
            .collect();
        // Streaming: finished assets go, and now and then a new one starts.
        let clock = self.clock;
        for id in expired(&mut self.streams, clock) {
            self.steps.free(id);
        }
        if self.streams.len() < self.config.streams && self.below(4) == 0 {
            let size = self.rng.log_uniform(64 << 10, 4 << 20);
            let id = self.steps.alloc(size, 4096, tags::STREAM);
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
            self.steps.queue.push_back(Step::Realloc { id, size: new });
        }
        self.steps.queue.push_back(Step::Checkpoint(Checkpoint {
            level: self.level,
            frame: Some(self.frame),
        }));
        // Temporaries die at the end of the frame, in reverse order mostly: every
        // seventh outlives the others by a moment.
        let (late, soon): (Vec<_>, Vec<_>) =
            temps.into_iter().enumerate().partition(|(k, _)| k % 7 == 3);
        for (_, id) in soon.into_iter().rev().chain(late) {
            self.steps.free(id);
        }
        self.run_particles();
        self.steps.queue.push_back(Step::FrameEnd);
    }

    /// Particles whose time is up die; a few new ones spawn while there is room.
    fn run_particles(&mut self) {
        if self.config.particles == 0 {
            return;
        }
        let clock = self.clock;
        for id in expired(&mut self.particles, clock) {
            self.steps.free(id);
        }
        let r = self.particle_rng.next_u64();
        let room = self.config.particles - self.particles.len();
        let spawn = ((r % (self.config.particles as u64 / 16 + 1)) as usize).min(room);
        for k in 0..spawn {
            let life = 10 + ((r >> 20).wrapping_add(k as u64 * 0x9e37) % 91) as usize;
            let id = self.steps.alloc(PARTICLE_SIZE, 16, tags::PARTICLE);
            self.particles.push((id, clock + life));
        }
    }

    /// Takes the streams and the particles out of the session; returns their ids.
    fn drain_streams_and_particles(&mut self) -> Vec<usize> {
        self.streams
            .drain(..)
            .chain(self.particles.drain(..))
            .map(|(id, _)| id)
            .collect()
    }

    /// Frees what the session still holds: streams, growers, globals.
    fn finish(&mut self) {
        let streams = self.drain_streams_and_particles();
        let growers: Vec<usize> = self.growers.drain(..).map(|(id, _)| id).collect();
        let globals: Vec<usize> = self.globals.drain(..).collect();
        for id in streams.into_iter().chain(growers).chain(globals) {
            self.steps.free(id);
        }
    }

    /// Generates the next batch of events; false, generating none, once the session
    /// is over.
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
        if self.level < self.config.levels {
            self.load_level();
        } else {
            self.finish();
            self.done = true;
        }
        true
    }
}

refilled_iterator!(Session, steps.queue);

impl Workload for Session {
    fn ids(&self) -> usize {
        Session::ids(self)
    }
}
