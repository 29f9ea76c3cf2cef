//! A space's upkeep: its stats, trimming, the frame tick and phases of the
//! retention, and its accessors.

use bento_pages::{CommitCache, PageSource};

use crate::MisuseHook;
use crate::config::SpaceConfig;
use crate::memory_space::{MemorySpace, Source, State};
use crate::stats::SpaceStats;

use super::segments::release_all;

impl<P: PageSource> MemorySpace<P> {
    /// The space's stats, from its counters (O(1)).
    ///
    /// ```
    /// use bento_pages::HeapPages;
    /// use bento_space::{MemorySpace, SpaceConfig};
    ///
    /// let space = MemorySpace::new(HeapPages::new(), SpaceConfig::DEFAULT.with_page_size(4096)).unwrap();
    /// assert_eq!(space.stats().live_blocks, 0);
    /// ```
    pub fn stats(&self) -> SpaceStats {
        let mut stats = self.enter().core.stats();
        if let Some(pages) = &self.pages {
            stats.source = pages.inner().stats();
            stats.cache = pages.stats();
        }
        stats.resident = stats.committed + stats.cache.parked;
        stats
    }

    /// What the page source has seen so far (its reservations, commits and the calls
    /// of each kind), from its counters: a few loads, no lock, so a program can read
    /// it every frame. All zero for a space over fixed memory.
    ///
    /// ```
    /// use core::alloc::Layout;
    /// use bento_pages::HeapPages;
    /// use bento_space::{MemorySpace, SpaceConfig};
    ///
    /// let space = MemorySpace::new(HeapPages::new(), SpaceConfig::DEFAULT.with_page_size(4096)).unwrap();
    /// let p = space.alloc(Layout::new::<u64>()).unwrap();
    /// let pages = space.page_stats();
    /// assert!(pages.reserves > 0 && pages.commits > 0);
    /// assert_eq!(pages, space.stats().source);
    /// // SAFETY: live.
    /// unsafe { space.free(p) };
    /// ```
    pub fn page_stats(&self) -> bento_pages::PageStats {
        self.pages
            .as_ref()
            .map_or_else(bento_pages::PageStats::default, |pages| {
                pages.inner().stats()
            })
    }

    /// Empties the block cache (its blocks are freed for good, merging with their
    /// neighbours) and then the commit cache: every page it keeps committed for reuse
    /// goes back to the source. Returns the bytes the commit cache gave back. The
    /// manual prompt for memory pressure; no live block changes.
    ///
    /// ```
    /// use core::alloc::Layout;
    /// use bento_pages::HeapPages;
    /// use bento_space::{MemorySpace, SpaceConfig};
    ///
    /// let space = MemorySpace::new(HeapPages::new(), SpaceConfig::DEFAULT.with_page_size(4096)).unwrap();
    /// let keep = space.alloc(Layout::new::<u64>()).unwrap();
    /// let big = space.alloc(Layout::new::<[u8; 20_000]>()).unwrap();
    /// // SAFETY: live blocks, each freed once.
    /// unsafe { space.free(big) };
    /// let parked = space.stats().cache.parked;
    /// assert!(parked >= 16 << 10); // the pages inside the freed block wait in the cache
    /// assert_eq!(space.trim(), parked);
    /// assert_eq!(space.stats().cache.parked, 0);
    /// // SAFETY: live.
    /// unsafe { space.free(keep) };
    /// ```
    pub fn trim(&self) -> usize {
        let mut inner = self.enter();
        let pages = inner.source();
        inner.core.drain(&pages);
        self.pages.as_ref().map_or(0, CommitCache::trim)
    }

    /// Moves the OS calls of the space's fresh memory to now: in each segment the
    /// free chunk at its end (where the blocks no other free chunk fits are cut),
    /// the first `bytes` of it are committed and handed at once to the commit cache,
    /// which keeps them (under its retention) until those blocks commit them with no
    /// call to the source; pages the cache keeps already pass through it without one.
    /// Call it before a stretch that must not wait for the OS, such as a level's
    /// gameplay frames. Returns the bytes warmed: 0 when no segment ends in free
    /// space, or the source refuses. The kept pages count against the cache's
    /// capacity (past it the oldest go back); without a commit cache (a space with
    /// no `commit_cache`, over a source that keeps nothing) they go straight back and
    /// the call only costs two.
    ///
    /// ```
    /// use core::alloc::Layout;
    /// use bento_pages::{Decay, HeapPages, Retention};
    /// use bento_space::{MemorySpace, SpaceConfig};
    ///
    /// let config = SpaceConfig::DEFAULT
    ///     .with_page_size(4096)
    ///     .with_retention(Retention::Decay(Decay::KEEP));
    /// let space = MemorySpace::new(HeapPages::new(), config).unwrap();
    /// let first = space.alloc(Layout::new::<u64>()).unwrap(); // a segment
    /// assert_eq!(space.warm(256 << 10), 256 << 10);
    /// let calls = space.stats().source.commits;
    /// let big = space.alloc(Layout::from_size_align(200 << 10, 8).unwrap()).unwrap();
    /// assert_eq!(space.stats().source.commits, calls); // its pages were kept
    /// // SAFETY: live blocks, each freed once.
    /// unsafe { space.free(big) };
    /// unsafe { space.free(first) };
    /// ```
    pub fn warm(&self, bytes: usize) -> usize {
        let mut inner = self.enter();
        let pages = inner.source();
        inner.core.warm(&pages, bytes)
    }

    /// One frame passed: what the commit cache kept and nobody took back for the decay
    /// time goes back to the source (see [`Retention`](bento_pages::Retention));
    /// when the decay takes a step, the block cache is emptied too (its blocks freed
    /// for good, their pages kept and aged from then). Returns the bytes given back.
    /// Call it once a frame; a space nobody ticks decays by the OS clock on its slow
    /// paths instead (with the feature `os` of bento-pages).
    ///
    /// ```
    /// use core::alloc::Layout;
    /// use bento_pages::{Decay, HeapPages, Retention};
    /// use bento_space::{MemorySpace, SpaceConfig};
    ///
    /// let config = SpaceConfig::DEFAULT.with_retention(Retention::Decay(Decay::frames(2)));
    /// let space = MemorySpace::new(HeapPages::new(), config).unwrap();
    /// let keep = space.alloc(Layout::new::<u64>()).unwrap();
    /// let big = space.alloc(Layout::new::<[u8; 100_000]>()).unwrap();
    /// // SAFETY: live, freed once.
    /// unsafe { space.free(big) };
    /// let kept = space.stats().cache.parked;
    /// assert!(kept >= 64 << 10); // kept committed for the next allocation
    /// assert_eq!(space.tick() + space.tick(), kept); // two frames unused: given back
    /// // SAFETY: live.
    /// unsafe { space.free(keep) };
    /// ```
    pub fn tick(&self) -> usize {
        let Some(pages) = &self.pages else {
            return 0;
        };
        let steps = pages.steps();
        let freed = pages.tick();
        self.after_step(steps);
        freed
    }

    /// For a program that does not tick: reads the clock and, when the decay time is
    /// up, gives back what [`tick`](Self::tick) would (an idle hook; the space makes
    /// the same check on its own slow paths). Returns the bytes given back.
    ///
    /// ```
    /// use bento_pages::HeapPages;
    /// use bento_space::{MemorySpace, SpaceConfig};
    ///
    /// let space = MemorySpace::new(HeapPages::new(), SpaceConfig::DEFAULT).unwrap();
    /// assert_eq!(space.decay(), 0);
    /// ```
    pub fn decay(&self) -> usize {
        let Some(pages) = &self.pages else {
            return 0;
        };
        let steps = pages.steps();
        let freed = pages.decay();
        self.after_step(steps);
        freed
    }

    /// After a decay step (the cache's count moved from `steps`), the blocks cached for
    /// reuse decay with the pages: freed for good, their pages kept and aged from now.
    pub(super) fn after_step(&self, steps: usize) {
        if let Some(pages) = &self.pages
            && pages.steps() != steps
        {
            let mut inner = self.enter();
            let source = inner.source();
            inner.core.drain(&source);
        }
    }

    /// Tells the commit cache the program's phase: what a level's unload frees is
    /// kept through the next load (see [`Phase`](bento_pages::Phase)).
    ///
    /// ```
    /// use bento_pages::{HeapPages, Phase};
    /// use bento_space::{MemorySpace, SpaceConfig};
    ///
    /// let space = MemorySpace::new(HeapPages::new(), SpaceConfig::DEFAULT).unwrap();
    /// space.phase(Phase::Unload);
    /// space.phase(Phase::Load);
    /// space.phase(Phase::Play);
    /// ```
    pub fn phase(&self, phase: bento_pages::Phase) {
        if let Some(pages) = &self.pages {
            pages.phase(phase);
        }
    }

    /// Sets the function told about misuse found by the debug checks (the default,
    /// [`panic_on_misuse`](crate::panic_on_misuse), panics). A hook that returns makes the bad call do nothing.
    /// The hook must not call back into this space.
    ///
    /// ```
    /// use bento_pages::HeapPages;
    /// use bento_space::{MemorySpace, Misuse, SpaceConfig};
    ///
    /// let mut space = MemorySpace::new(HeapPages::new(), SpaceConfig::DEFAULT.with_page_size(4096)).unwrap();
    /// space.set_misuse_hook(|m: &Misuse| eprintln!("{m}"));
    /// ```
    pub fn set_misuse_hook(&mut self, hook: MisuseHook) {
        self.state.get_mut().core.set_hook(hook);
    }

    /// The page source, when the space has one.
    ///
    /// ```
    /// use bento_pages::{HeapPages, PageSource};
    /// use bento_space::{MemorySpace, SpaceConfig};
    ///
    /// let space = MemorySpace::new(HeapPages::new(), SpaceConfig::DEFAULT.with_page_size(4096)).unwrap();
    /// assert_eq!(space.pages().unwrap().page_size(), 4096);
    /// ```
    pub fn pages(&self) -> Option<&P> {
        self.pages.as_ref().map(|p| p.inner().inner())
    }

    /// The configuration the space was made with.
    ///
    /// ```
    /// use bento_pages::HeapPages;
    /// use bento_space::{MemorySpace, SpaceConfig};
    ///
    /// let config = SpaceConfig::DEFAULT.with_page_size(4096);
    /// let space = MemorySpace::new(HeapPages::new(), config).unwrap();
    /// assert_eq!(space.config(), config);
    /// ```
    pub fn config(&self) -> SpaceConfig {
        self.enter().config
    }

    /// Releases every segment to the page source (the base segment stays the
    /// caller's) and returns the bytes given back. Blocks still live are lost.
    ///
    /// ```
    /// use core::alloc::Layout;
    /// use bento_pages::HeapPages;
    /// use bento_space::{MemorySpace, SpaceConfig};
    ///
    /// let space = MemorySpace::new(HeapPages::new(), SpaceConfig::DEFAULT.with_page_size(4096)).unwrap();
    /// space.alloc(Layout::new::<u64>()).unwrap();
    /// assert_eq!(space.destroy(), 1 << 20);
    /// ```
    pub fn destroy(mut self) -> usize {
        // `Drop` then finds only the base segment left, which it keeps.
        release_all(self.state.get_mut(), self.pages.as_ref())
    }

    /// What the source under the cache has committed, and what the space's stats
    /// say it should have: the space's committed bytes outside the base segment, the
    /// pages parked in the cache and the cache's table. `None` without a source.
    pub(crate) fn source_committed(&self, state: &State) -> Option<(usize, usize)> {
        let pages = self.pages.as_ref()?;
        let core = &state.core;
        // SAFETY: the base segment's header is live while the space is.
        let base = unsafe { core.base().as_ref() }.map_or(0, |b| b.committed);
        let expected = core.counters().committed - base + pages.stats().parked + state.table_bytes;
        Some((pages.inner().stats().committed, expected))
    }

    /// The commit cache between the space and its source, for `validate`.
    pub(crate) fn source_cache(&self) -> Option<&Source<P>> {
        self.pages.as_ref()
    }
}
