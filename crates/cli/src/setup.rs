//! The allocators a trace replays on, each as a [`ReplayTarget`] that reports its
//! own stats where it keeps them, and the bento set-up a game would use. bento's
//! targets pass the trace's frames and phases on to their allocators' retention of
//! freed pages ([`Retention`]).

use std::alloc::Layout;
use std::ptr::NonNull;

use allocator_api2::alloc::Allocator;
use bento_common::CommonAllocator;
use bento_heap::{Heap, HeapBuilder};
use bento_pages::{Decay, Metered, PageSource, Phase, SystemPages};
use bento_primitives::{ArenaConfig, Frame, FrameArena, GrowingPool};
use bento_space::{MemorySpace, SpaceConfig};
use bento_trace::workload::{PARTICLE_SIZE, tags};
use bento_trace::{ApiTarget, Footprint, ReplayTarget, Wrapper};

pub(crate) use crate::allocators::ALLOCATORS;

/// The allocators `replay` runs when none are named: all but the bento set-ups,
/// whose routing and budgets fit bento's own workloads.
pub(crate) const REPLAY_DEFAULT: &[&str] = ALLOCATORS.split_at(ALLOCATORS.len() - SET_UPS).0;

/// The bento set-ups, last in the list of allocators: `bento`, `bento-huge` on
/// Linux, `bento-guard` on Unix and `bento-prof`.
const SET_UPS: usize = 2 + cfg!(target_os = "linux") as usize + cfg!(unix) as usize;

/// What each allocator is, for `--help` and the tables' notes.
pub(crate) const ABOUT: &str = "\
system    the C library's malloc (glibc here)
mimalloc  mimalloc (the default feature `mimalloc`)
jemalloc  jemalloc, on unix (the default feature `jemalloc`)
space     one bento MemorySpace over the OS pages
common    bento's CommonAllocator: size-class regions of fixed-block runs and a
          large region, a per-thread cache in front
bento     a game's set-up: subsystem heaps with budgets over the common allocator
          (untagged blocks, as a recorded program's, in a heap without one), a
          frame arena for frame temporaries and a pool for particles
bento-huge  the same set-up with transparent huge pages (Linux): its reservations of
          2 MiB or more advised MADV_HUGEPAGE
bento-guard  the same set-up with sampled guard pages in its heaps (Unix): one
          allocation in 4096 on a page of its own beside inaccessible ones
bento-prof  the same set-up with a sampled allocation profile of its heaps: one
          allocation every 64 KiB on average recorded with its heap and site";

/// Checks that `name` is an allocator this build knows.
pub(crate) fn check_name(name: &str) -> Result<(), String> {
    if ALLOCATORS.contains(&name) {
        Ok(())
    } else if name == "jemalloc" && cfg!(not(unix)) {
        Err("jemalloc is not built in: it builds on unix only".into())
    } else if name == "mimalloc" || name == "jemalloc" {
        Err(format!(
            "{name} is not built in: build bento-alloc-cli with its default features (or \
             `--features {name}`)"
        ))
    } else {
        Err(format!(
            "unknown allocator `{name}`: expected one of {}",
            ALLOCATORS.join(", ")
        ))
    }
}

/// The phase a trace's phase record names: "… loading" is a load, "… loaded" play,
/// "… unloading" an unload (bento's sessions name three a level so); any other name
/// is none of them.
pub(crate) fn phase_of(name: &str) -> Option<Phase> {
    if name.ends_with("unloading") {
        Some(Phase::Unload)
    } else if name.ends_with("loading") {
        Some(Phase::Load)
    } else if name.ends_with("loaded") {
        Some(Phase::Play)
    } else {
        None
    }
}

/// An allocator that keeps freed pages committed for reuse and gives them back on a
/// schedule counted in frames: a replay tells it each frame end and each phase.
pub(crate) trait Retention {
    /// A frame ended: gives back the pages whose time is up; returns their bytes.
    fn tick(&self) -> usize;

    /// The game entered `phase`.
    fn phase(&self, phase: Phase);

    /// The largest free block it holds (a walk: now and then).
    fn largest_free(&self) -> usize;

    /// The calls its page source has seen so far, from the source's counters (a few
    /// loads: cheap enough for every frame end).
    fn os_calls(&self) -> u64;
}

impl<P: PageSource> Retention for MemorySpace<P> {
    fn tick(&self) -> usize {
        MemorySpace::tick(self)
    }

    fn phase(&self, phase: Phase) {
        MemorySpace::phase(self, phase);
    }

    fn largest_free(&self) -> usize {
        MemorySpace::largest_free(self)
    }

    fn os_calls(&self) -> u64 {
        calls(&self.page_stats())
    }
}

impl<P: PageSource> Retention for CommonAllocator<P> {
    fn tick(&self) -> usize {
        CommonAllocator::tick(self)
    }

    fn phase(&self, phase: Phase) {
        CommonAllocator::phase(self, phase);
    }

    fn largest_free(&self) -> usize {
        CommonAllocator::largest_free(self)
    }

    fn os_calls(&self) -> u64 {
        calls(&self.page_stats())
    }
}

/// An allocator's stats at one moment.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Stats {
    /// What it holds in the OS.
    pub(crate) footprint: Footprint,
    /// What its retention of freed pages holds and has given back.
    pub(crate) kept: Kept,
}

/// What an allocator's retention of freed pages holds and has given back.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Kept {
    /// Bytes of freed pages kept committed for reuse now (its commit cache's parked
    /// pages): part of its committed bytes.
    pub(crate) now: u64,
    /// Bytes of kept pages given back to the OS so far (by decay, to stay within the
    /// cache's cap, or by a trim).
    pub(crate) given_back: u64,
}

impl Kept {
    fn of(cache: &bento_pages::CacheStats) -> Self {
        Self {
            now: cache.parked as u64,
            given_back: cache.purged as u64,
        }
    }
}

/// A target that is an allocator-api2 allocator with a retention of freed pages, and
/// a function for its stats.
pub(crate) struct Measured<'a, A: ?Sized, F> {
    api: ApiTarget<'a, A>,
    retention: &'a dyn Retention,
    stats: F,
    /// OS calls the last frame end made.
    end_calls: u64,
}

impl<'a, A: ?Sized, F: Fn() -> Stats> Measured<'a, A, F> {
    pub(crate) fn new(allocator: &'a A, retention: &'a dyn Retention, stats: F) -> Self {
        Self {
            api: ApiTarget(allocator),
            retention,
            stats,
            end_calls: 0,
        }
    }
}

impl<'a, A: Allocator + ?Sized, F: Fn() -> Stats> Wrapper for Measured<'a, A, F> {
    type Inner = ApiTarget<'a, A>;

    fn inner(&mut self) -> &mut ApiTarget<'a, A> {
        &mut self.api
    }

    fn inner_ref(&self) -> &ApiTarget<'a, A> {
        &self.api
    }

    fn on_frame(&mut self) -> Result<(), String> {
        let before = self.retention.os_calls();
        self.retention.tick();
        self.end_calls = self.retention.os_calls().saturating_sub(before);
        Ok(())
    }

    fn on_phase(&mut self, name: &str) {
        if let Some(phase) = phase_of(name) {
            self.retention.phase(phase);
        }
    }

    fn report_footprint(&self) -> Option<Footprint> {
        Some((self.stats)().footprint)
    }

    fn report_largest_free(&self) -> Option<usize> {
        Some(self.retention.largest_free())
    }
}

/// A memory space's stats: what it holds in the OS (committed, and what its commit
/// cache parks).
pub(crate) fn space_figures<P: PageSource>(space: &MemorySpace<P>) -> Stats {
    let s = space.stats();
    Stats {
        footprint: Footprint {
            committed: s.resident,
            // What the source holds at most: in use, kept and the cache's table.
            peak_committed: s.source.max_committed,
            reserved: s.source.reserved,
            os_calls: calls(&s.source),
        },
        kept: Kept::of(&s.cache),
    }
}

/// The common allocator's stats: what it holds in the OS, its tables included.
pub(crate) fn common_figures<P: PageSource>(common: &CommonAllocator<P>) -> Stats {
    let s = common.stats();
    Stats {
        footprint: Footprint {
            committed: s.resident,
            peak_committed: s.max_resident,
            reserved: s.source.reserved,
            os_calls: calls(&s.source),
        },
        kept: Kept::of(&s.cache),
    }
}

fn calls(s: &bento_pages::PageStats) -> u64 {
    (s.reserves + s.releases + s.commits + s.decommits) as u64
}

/// A new memory space over the OS, with the default settings.
pub(crate) fn new_space() -> Result<MemorySpace<SystemPages>, String> {
    MemorySpace::new(SystemPages::new(), SpaceConfig::DEFAULT)
        .map_err(|e| format!("cannot make a memory space: {e}"))
}

/// The pages the frame arena and the particle pool take from the source (the OS's,
/// or fixed memory), counted.
pub(crate) type Pages<P = SystemPages> = Metered<P>;

/// The parts of the bento set-up that outlive its frames: made first, then lent to
/// [`Bento`].
pub(crate) struct Parts<P: PageSource = SystemPages> {
    pub(crate) common: CommonAllocator<P>,
    pub(crate) pages: Pages<P>,
    /// What a level's start readies of the large region for its frames
    /// (`CommonAllocator::prepare`; 0: nothing is readied).
    headroom: usize,
    /// The heaps' sampled guard pages (`bento-guard`).
    guard: Option<bento_pages::GuardConfig>,
    /// The heaps' sampled allocation profile (`bento-prof`).
    profiler: Option<&'static bento_pages::Profiler>,
    /// Its pprof dump at the busiest moment so far (`heap_report`).
    pub(crate) profile_snapshot: std::cell::RefCell<Vec<u8>>,
}

impl Parts {
    pub(crate) fn new() -> Self {
        Self::with_pages(SystemPages::new())
    }

    /// The parts over the OS's pages with huge pages asked for (`bento-huge`).
    pub(crate) fn huge() -> Result<Self, String> {
        let pages = SystemPages::new()
            .with_huge_pages()
            .map_err(|e| e.to_string())?;
        Ok(Self::with_pages(pages))
    }

    /// The parts whose heaps sample guard pages at the default rate (`bento-guard`).
    pub(crate) fn guarded() -> Self {
        Self {
            guard: Some(bento_pages::GuardConfig::DEFAULT),
            ..Self::new()
        }
    }

    /// The parts whose heaps feed a profile at the default rate (`bento-prof`).
    pub(crate) fn profiled() -> Result<Self, String> {
        let profiler = bento_pages::Profiler::new(bento_pages::ProfileConfig::DEFAULT)
            .map_err(|e| format!("cannot reserve the profile: {e}"))?;
        Ok(Self {
            profiler: Some(profiler),
            ..Self::new()
        })
    }

    fn with_pages(pages: SystemPages) -> Self {
        Self {
            common: CommonAllocator::with_config(
                bento_common::CommonConfig::DEFAULT.with_pages(pages),
            ),
            pages: Metered::new(pages),
            headroom: 0,
            guard: None,
            profiler: None,
            profile_snapshot: std::cell::RefCell::default(),
        }
    }
}

impl<P: PageSource + Clone> Parts<P> {
    /// The parts over fixed memory, `pages` (a handle to one source both draw from):
    /// the common allocator of the default shape but for its retention, which keeps
    /// freed pages until a commit elsewhere needs them ([`Decay::KEEP`]: in fixed
    /// memory a page given back serves no other program), its commit cache, which
    /// may keep 128 MiB (the limit, not the cache's capacity, decides what is kept),
    /// and its large region's pages, the source's own (every byte committed counts
    /// against the limit); and the frame arenas' and pool's pages. A level's start
    /// readies memory for its frames ([`HEADROOM`]): in fixed memory the budget is the
    /// machine's, and what is committed ahead is given back before a request is
    /// refused.
    pub(crate) fn over(pages: P) -> Self {
        let config = bento_common::CommonConfig::DEFAULT
            .with_pages(pages.clone())
            .with_retention(bento_pages::Retention::Decay(Decay::KEEP))
            .with_commit_cache(128 << 20);
        let large = config.large.with_page_size(pages.page_size());
        let config = config.with_large(large);
        Self {
            common: CommonAllocator::with_config(config),
            pages: Metered::new(pages),
            headroom: HEADROOM,
            guard: None,
            profiler: None,
            profile_snapshot: std::cell::RefCell::default(),
        }
    }
}

/// Budgets of the subsystem heaps: generous for the demo's session (their report
/// shows how much of each it used).
const LEVEL_BUDGET: usize = 512 << 20;
const STREAM_BUDGET: usize = 64 << 20;
const GAME_BUDGET: usize = 64 << 20;
/// What a level's start readies of the large region's fresh memory for its frames,
/// over fixed memory.
const HEADROOM: usize = 8 << 20;
/// Each of the two frame arenas reserves this much.
const FRAME_RESERVE: usize = 64 << 20;
/// The most particles alive at once.
const PARTICLES: usize = 1 << 16;

/// A game's memory set-up on bento: level data, streamed assets and the rest in
/// subsystem heaps with budgets over the common allocator, each frame's temporaries
/// in a frame arena (two in rotation, as a frame's memory may be read during the
/// next), particles in a pool of 64-byte chunks.
///
/// Blocks are routed by tag and layout, so a block's free goes where its allocation
/// went: [`tags::FRAME`] to the frame arena, [`tags::PARTICLE`] blocks that fit a
/// chunk to the pool, [`tags::LEVEL`] to the "level" heap, [`tags::STREAM`] to
/// "streaming", [`tags::NONE`] to "untagged", everything else to "game". The
/// "untagged" heap has no budget: a program recorded by `bento record` names no
/// subsystem, and a budget of bento's game would refuse it for no reason of its own.
pub(crate) struct Bento<'a, P: PageSource = SystemPages> {
    parts: &'a Parts<P>,
    level: Heap<&'a CommonAllocator<P>>,
    streaming: Heap<&'a CommonAllocator<P>>,
    game: Heap<&'a CommonAllocator<P>>,
    untagged: Heap<&'a CommonAllocator<P>>,
    frames: &'a FrameArena<Room<'a, P>, 2>,
    // Invariant: `Some` but while `frame` swaps them.
    current: Option<Frame<'a, Room<'a, P>>>,
    previous: Option<Frame<'a, Room<'a, P>>>,
    // Frame blocks live in the current and the previous frame.
    current_live: u64,
    previous_live: u64,
    particles: &'a GrowingPool<Room<'a, P>>,
    /// OS calls the last frame end made.
    end_calls: u64,
    /// A level plays (between its "level N loaded" and its "level N unloading"): its
    /// frame ends are counted in `unticked` and ticked at its unload, so that what the
    /// decay gives back goes between levels, never inside a gameplay frame. Outside
    /// levels (a menu, a trace without them) each frame end ticks.
    playing: bool,
    unticked: u32,
}

/// The profile's estimate of each heap's live bytes beside its own count:
/// `profile: heap NAME: estimated E of L live bytes (D %)`, a line a heap with
/// blocks live.
fn profile_lines(profiler: &bento_pages::Profiler) -> String {
    let mut lines = String::new();
    for row in bento_heap::report().rows() {
        let name = row.name;
        let live = row.stats.live_bytes;
        if live == 0 {
            continue;
        }
        let estimated = profiler.estimate(|l, _| l.heap == Some(name));
        let off = (estimated as f64 / live as f64 - 1.0) * 100.0;
        lines.push_str(&format!(
            "profile: heap {name}: estimated {estimated} of {live} live bytes ({off:+.1} %)\n"
        ));
    }
    lines
}

/// The frame arena and particle pool of a [`Bento`], made from its [`Parts`].
pub(crate) struct Linear<'a, P: PageSource = SystemPages> {
    pub(crate) frames: FrameArena<Room<'a, P>, 2>,
    pub(crate) particles: GrowingPool<Room<'a, P>>,
}

impl<'a, P: PageSource> Linear<'a, P> {
    pub(crate) fn new(parts: &'a Parts<P>) -> Result<Self, String> {
        let config = ArenaConfig {
            reserve: FRAME_RESERVE,
            ..ArenaConfig::default()
        };
        let frames = FrameArena::with_source(Room(parts), config)
            .map_err(|e| format!("cannot reserve the frame arenas: {e}"))?;
        let chunk = Layout::from_size_align(PARTICLE_SIZE, 16).expect("a valid layout");
        let particles = GrowingPool::with_source(Room(parts), chunk, PARTICLES)
            .map_err(|e| format!("cannot reserve the particle pool: {e}"))?;
        Ok(Self { frames, particles })
    }
}

/// The pages of the frame arenas and the pool: the parts' own, and when their source
/// refuses a commit (fixed memory), the common allocator gives back what it keeps for
/// reuse and the commit is asked once more — the memory the common allocator keeps
/// never makes a frame or a particle fail.
pub(crate) struct Room<'a, P: PageSource>(&'a Parts<P>);

impl<P: PageSource> Clone for Room<'_, P> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<P: PageSource> Copy for Room<'_, P> {}

// SAFETY: every call goes to the parts' `Metered` source unchanged; a refused commit
// leaves its range decommitted, and is asked again only after the common allocator's
// `trim`, which touches none of this source's ranges.
unsafe impl<P: PageSource> PageSource for Room<'_, P> {
    fn page_size(&self) -> usize {
        self.0.pages.page_size()
    }

    fn reserve(
        &self,
        size: usize,
        align: bento_align::Alignment,
    ) -> Result<NonNull<u8>, bento_pages::PageError> {
        self.0.pages.reserve(size, align)
    }

    unsafe fn release(&self, base: NonNull<u8>, size: usize) {
        // SAFETY: the caller's contract, which is the source's.
        unsafe { self.0.pages.release(base, size) }
    }

    unsafe fn commit(&self, ptr: NonNull<u8>, size: usize) -> Result<(), bento_pages::PageError> {
        // SAFETY: the caller's contract, which is the source's, for each try.
        unsafe {
            self.0.pages.commit(ptr, size).or_else(|e| {
                if self.0.common.trim() > 0 {
                    self.0.pages.commit(ptr, size)
                } else {
                    Err(e)
                }
            })
        }
    }

    unsafe fn decommit(&self, ptr: NonNull<u8>, size: usize) {
        // SAFETY: the caller's contract, which is the source's.
        unsafe { self.0.pages.decommit(ptr, size) }
    }

    fn commit_is_implicit(&self) -> bool {
        self.0.pages.commit_is_implicit()
    }

    fn decommitted_reads_zero(&self) -> bool {
        self.0.pages.decommitted_reads_zero()
    }

    fn decommit_may_span(&self) -> bool {
        self.0.pages.decommit_may_span()
    }
}

/// Where a block goes.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Route {
    Frame,
    Pool,
    Level,
    Streaming,
    Game,
    Untagged,
}

impl<'a, P: PageSource> Bento<'a, P> {
    pub(crate) fn new(parts: &'a Parts<P>, linear: &'a Linear<'a, P>) -> Result<Self, String> {
        let builder = |name| {
            let b = match parts.guard {
                Some(guard) => HeapBuilder::new(name).guard_pages(guard),
                None => HeapBuilder::new(name),
            };
            match parts.profiler {
                Some(profiler) => b.profile(profiler),
                None => b,
            }
        };
        let heap = |name, budget| builder(name).budget(budget).build(&parts.common);
        let current = linear
            .frames
            .next_frame()
            .map_err(|e| format!("cannot begin a frame: {e}"))?;
        Ok(Self {
            parts,
            level: heap("level", LEVEL_BUDGET),
            streaming: heap("streaming", STREAM_BUDGET),
            game: heap("game", GAME_BUDGET),
            untagged: builder("untagged").build(&parts.common),
            frames: &linear.frames,
            current: Some(current),
            previous: None,
            current_live: 0,
            previous_live: 0,
            particles: &linear.particles,
            end_calls: 0,
            playing: false,
            unticked: 0,
        })
    }

    fn route(layout: Layout, tag: u32) -> Route {
        match tag {
            tags::FRAME => Route::Frame,
            tags::PARTICLE if layout.size() <= PARTICLE_SIZE && layout.align() <= 16 => Route::Pool,
            tags::LEVEL => Route::Level,
            tags::STREAM => Route::Streaming,
            tags::NONE => Route::Untagged,
            _ => Route::Game,
        }
    }

    fn heap(&self, route: Route) -> &Heap<&'a CommonAllocator<P>> {
        match route {
            Route::Level => &self.level,
            Route::Streaming => &self.streaming,
            Route::Untagged => &self.untagged,
            _ => &self.game,
        }
    }

    /// The frame whose arena holds `ptr`: true for the current one.
    fn in_current(&self, ptr: NonNull<u8>) -> bool {
        self.current.as_ref().is_some_and(|f| f.contains(ptr))
    }
}

/// What a replay target tells beyond its footprint: its subsystem heaps, and what
/// its retention of freed pages does.
pub(crate) trait Report {
    /// The heaps' report as a table, when there are heaps.
    fn heap_report(&self) -> Option<String> {
        None
    }

    /// What the allocator's retention of freed pages holds and has given back, where
    /// it keeps stats.
    fn kept(&self) -> Option<Kept> {
        None
    }

    /// The OS calls the last frame end made (the retention's tick, a frame arena's
    /// turn): 0 where they are not counted.
    fn frame_end_calls(&self) -> u64 {
        0
    }
}

impl<A: ?Sized, F: Fn() -> Stats> Report for Measured<'_, A, F> {
    fn kept(&self) -> Option<Kept> {
        Some((self.stats)().kept)
    }

    fn frame_end_calls(&self) -> u64 {
        self.end_calls
    }
}

impl<A> Report for bento_trace::GlobalTarget<A> {}

impl<P: PageSource> Report for Bento<'_, P> {
    fn heap_report(&self) -> Option<String> {
        let mut report = bento_heap::report().to_string();
        if let Some(profiler) = self.parts.profiler {
            report.push_str(&profile_lines(profiler));
            let mut snapshot = self.parts.profile_snapshot.borrow_mut();
            snapshot.clear();
            profiler.write_pprof(false, &mut |b| snapshot.extend_from_slice(b));
        }
        Some(report)
    }

    fn kept(&self) -> Option<Kept> {
        // The frame arenas and the pool keep no cache: their pages are theirs.
        Some(common_figures(&self.parts.common).kept)
    }

    fn frame_end_calls(&self) -> u64 {
        self.end_calls
    }
}

impl<P: PageSource> ReplayTarget for Bento<'_, P> {
    fn alloc(&mut self, layout: Layout, tag: u32) -> Option<NonNull<u8>> {
        match Self::route(layout, tag) {
            Route::Frame => {
                let block = self.current.as_ref()?.alloc_layout(layout).ok()?;
                self.current_live += 1;
                Some(block)
            }
            Route::Pool => self.particles.alloc(),
            route => Some(self.heap(route).allocate(layout).ok()?.cast()),
        }
    }

    unsafe fn realloc(
        &mut self,
        ptr: NonNull<u8>,
        old: Layout,
        new: usize,
        tag: u32,
    ) -> Option<NonNull<u8>> {
        let new_layout = Layout::from_size_align(new, old.align()).ok()?;
        let (from, to) = (Self::route(old, tag), Self::route(new_layout, tag));
        if from == Route::Frame {
            // A frame block stays in its frame's arena.
            let current = self.in_current(ptr);
            let frame = if current {
                &self.current
            } else {
                &self.previous
            };
            let arena: &bento_primitives::Arena<Room<'_, P>> = frame.as_ref()?;
            // SAFETY: the caller's contract: `ptr` is live with `old` in this arena
            // (the frame that holds it is alive).
            return unsafe { ApiTarget(&arena).realloc(ptr, old, new, tag) };
        }
        if from == to && from != Route::Pool {
            // SAFETY: the caller's contract: `ptr` is live with `old` in this heap.
            return unsafe { ApiTarget(&self.heap(from)).realloc(ptr, old, new, tag) };
        }
        if from == Route::Pool && to == Route::Pool {
            // A chunk holds any size that routes to the pool.
            return Some(ptr);
        }
        // The block changes allocator (a particle grown past a chunk, or shrunk
        // into one): a new block, the contents, the old block freed.
        let moved = self.alloc(new_layout, tag)?;
        // SAFETY: `ptr` holds `old.size()` bytes and `moved` at least `new`; they are
        // different blocks of live allocators.
        unsafe {
            core::ptr::copy_nonoverlapping(ptr.as_ptr(), moved.as_ptr(), old.size().min(new));
            self.free(ptr, old, tag);
        }
        Some(moved)
    }

    unsafe fn free(&mut self, ptr: NonNull<u8>, layout: Layout, tag: u32) {
        match Self::route(layout, tag) {
            Route::Frame => {
                // The arena takes its memory back when its frame comes round again.
                if self.in_current(ptr) {
                    self.current_live -= 1;
                } else {
                    self.previous_live -= 1;
                }
            }
            // SAFETY: the caller's contract: a live chunk of the pool (the route of
            // a layout and tag is the same at its allocation and its free).
            Route::Pool => unsafe { self.particles.free(ptr) },
            // SAFETY: as above, a live block of this heap.
            route => unsafe { self.heap(route).deallocate(ptr, layout) },
        }
    }

    fn frame(&mut self) -> Result<(), String> {
        let before = self.os_calls();
        self.turn_frame()?;
        if self.playing {
            // The level's frames are counted, and ticked at its unload.
            self.unticked += 1;
        } else {
            self.parts.common.tick();
        }
        self.end_calls = self.os_calls().saturating_sub(before);
        Ok(())
    }

    fn phase(&mut self, name: &str) {
        let Some(phase) = phase_of(name) else {
            return;
        };
        // The level's frames pass at once, outside gameplay, at whatever phase ends
        // it (its unload, or a load with none before): what their decay gives back
        // goes now, before an unload or a load holds the decay.
        for _ in 0..std::mem::take(&mut self.unticked) {
            self.parts.common.tick();
        }
        // A level of bento's sessions ("level N loaded"); a menu, or a phase of a
        // recorded program, ticks each frame.
        self.playing = phase == Phase::Play && name.starts_with("level ");
        self.parts.common.phase(phase);
        if self.playing && self.parts.headroom > 0 {
            // Before the level's frames: a run ahead for each size class in use and
            // fresh large-block memory committed, so that no frame waits for the OS.
            self.parts.common.prepare(self.parts.headroom);
        }
    }

    fn footprint(&self) -> Option<Footprint> {
        let common = common_figures(&self.parts.common).footprint;
        let pages = self.parts.pages.stats();
        // The heaps' guard pool, with `bento-guard`.
        let guard = bento_heap::guard_stats()
            .filter(|_| self.parts.guard.is_some())
            .unwrap_or_default();
        Some(Footprint {
            committed: common.committed + pages.committed + guard.committed_bytes,
            // The sum of the parts' peaks: an upper bound of the peak of the sum.
            peak_committed: common.peak_committed
                + pages.max_committed
                + guard.peak_committed_bytes,
            reserved: common.reserved + pages.reserved + guard.reserved_bytes,
            os_calls: common.os_calls + calls(&pages) + guard.os_calls,
        })
    }

    fn largest_free(&self) -> Option<usize> {
        Some(self.parts.common.largest_free())
    }
}

impl<P: PageSource> Bento<'_, P> {
    /// The OS calls of every part so far, from the page sources' counters (not the
    /// full stats: a frame end reads this twice, inside the timed region).
    fn os_calls(&self) -> u64 {
        calls(&self.parts.common.page_stats()) + calls(&self.parts.pages.stats())
    }

    /// The frame ends: the next frame of the arenas begins, unless a block of the
    /// frame before this one is still live.
    fn turn_frame(&mut self) -> Result<(), String> {
        if self.previous_live > 0 {
            let n = self.previous.as_ref().map_or(0, |f| f.number());
            return Err(format!(
                "{} blocks of frame {n} are still live two frames later; the frame \
                 arena would recycle them",
                self.previous_live
            ));
        }
        self.previous = None;
        self.previous = self.current.take();
        self.previous_live = self.current_live;
        self.current_live = 0;
        let next = self.frames.next_frame().map_err(|e| e.to_string());
        match next {
            Ok(frame) => {
                self.current = Some(frame);
                Ok(())
            }
            Err(e) => {
                // Not reachable with two arenas and one older handle; undo the
                // swap anyway, counts included.
                self.current = self.previous.take();
                self.current_live = self.previous_live;
                self.previous_live = 0;
                Err(e)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn phase_names_tell_load_play_and_unload() {
        assert_eq!(phase_of("level 3 loading"), Some(Phase::Load));
        assert_eq!(phase_of("level 3 loaded"), Some(Phase::Play));
        assert_eq!(phase_of("level 3 unloading"), Some(Phase::Unload));
        assert_eq!(phase_of("boss fight"), None);
        assert_eq!(phase_of(""), None);
    }

    #[test]
    fn every_allocator_built_in_is_known_and_others_are_named() {
        for set_up in ["bento", "bento-huge", "bento-guard", "bento-prof"] {
            assert!(!REPLAY_DEFAULT.contains(&set_up));
        }
        let others: Vec<&str> = ALLOCATORS
            .iter()
            .copied()
            .filter(|n| !n.starts_with("bento"))
            .collect();
        assert_eq!(others, REPLAY_DEFAULT);
        for name in ALLOCATORS.iter().chain(REPLAY_DEFAULT) {
            check_name(name).unwrap();
        }
        let e = check_name("tcmalloc").unwrap_err();
        assert!(e.contains("unknown allocator `tcmalloc`"), "{e}");
        for peer in ["mimalloc", "jemalloc"] {
            if !ALLOCATORS.contains(&peer) {
                let e = check_name(peer).unwrap_err();
                assert!(e.contains("not built in"), "{e}");
            }
        }
    }
}
