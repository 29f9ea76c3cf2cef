//! A common allocator's upkeep: its stats and report, trimming, the frame tick and
//! phases of the retention, and the locks a `fork` takes.

use bento_pages::{CommitCache, PageSource};

use crate::allocator::CommonAllocator;
use crate::inner::Inner;

impl<P: PageSource> CommonAllocator<P> {
    /// Takes every lock of the allocator and keeps it, in a fixed order: each region
    /// in turn, the registry of threads' caches, the region map's, then the commit
    /// cache's (the order every path that holds two of them takes them in). For a `pthread_atfork` prepare handler:
    /// with every lock held by the forking thread, the child inherits none held by a
    /// thread it does not have. [`unlock_all`](Self::unlock_all) gives them back. An
    /// allocator that has not started starts first (so that none can start while
    /// the locks are held); one that cannot start takes none.
    ///
    /// The per-thread front end takes no lock; a program that forks with the front
    /// end on may lose the blocks other threads' caches hold, in the child (never
    /// corrupting it).
    ///
    /// ```
    /// use core::alloc::Layout;
    /// use bento_common::CommonAllocator;
    ///
    /// let common = CommonAllocator::new();
    /// let p = common.alloc(Layout::new::<u64>()).unwrap();
    /// common.lock_all();
    /// // ... fork here ...
    /// // SAFETY: taken just above by this thread.
    /// unsafe { common.unlock_all() };
    /// // SAFETY: live.
    /// unsafe { common.free(p) };
    /// ```
    pub fn lock_all(&self) {
        if let Ok(inner) = self.block() {
            inner.lock_regions();
            inner.front.registry().raw_lock().lock();
            inner.layer.raw_lock().lock();
            inner.layer.cache.hold_lock();
        }
    }

    /// Gives back the locks [`lock_all`](Self::lock_all) took, in the reverse order.
    ///
    /// # Safety
    ///
    /// The caller must hold every lock through `lock_all`: this thread, or, in a
    /// child process forked while they were held, the child's only thread.
    pub unsafe fn unlock_all(&self) {
        if let Some(inner) = self.started() {
            // SAFETY: the caller's contract: each lock is held, by `lock_all`.
            unsafe {
                inner.layer.cache.release_lock();
                inner.layer.raw_lock().unlock();
                inner.front.registry().raw_lock().unlock();
                inner.unlock_regions();
            }
        }
    }

    /// Gives back what the allocator keeps for reuse: the calling thread's cache,
    /// every class region's empty runs, the large region's cached blocks and the
    /// commit cache's parked pages and spare segments. Returns the bytes of blocks and pages given back.
    ///
    /// ```
    /// use core::alloc::Layout;
    /// use bento_common::CommonAllocator;
    ///
    /// let common = CommonAllocator::new();
    /// let layout = Layout::new::<[u8; 32]>();
    /// let p = common.alloc(layout).unwrap();
    /// // SAFETY: live.
    /// unsafe { common.dealloc(p, layout) };
    /// common.trim();
    /// assert_eq!(common.stats().reserved, 0);
    /// ```
    pub fn trim(&self) -> usize {
        self.started().map_or(0, Inner::trim)
    }

    /// One frame passed: freed pages and segments the commit cache kept and nobody
    /// took back for the decay time go back to the source (see
    /// [`Retention`](bento_pages::Retention)); under a decay in milliseconds only, the
    /// clock is read. When the decay takes a step, the freed blocks kept for reuse
    /// (the calling thread's cache, the regions' lists and their spaces' block
    /// caches) are freed for good too, so their pages decay in turn. Returns the bytes given back. Call it once a
    /// frame, from any thread; an allocator nobody ticks decays by the OS clock on its
    /// slow paths instead.
    ///
    /// ```
    /// use core::alloc::Layout;
    /// use bento_common::{CommonAllocator, CommonConfig};
    /// use bento_pages::{Decay, Retention};
    ///
    /// let config = CommonConfig::DEFAULT.with_retention(Retention::Decay(Decay::frames(2)));
    /// let common = CommonAllocator::with_config(config);
    /// let layout = Layout::from_size_align(1 << 20, 16).unwrap();
    /// let p = common.alloc(layout).unwrap();
    /// // SAFETY: live, freed once.
    /// unsafe { common.dealloc(p, layout) };
    /// assert!(common.kept() >= 1 << 20); // kept for the next megabyte
    /// common.tick();
    /// common.tick();
    /// assert_eq!(common.kept(), 0); // two frames unused: given back
    /// ```
    pub fn tick(&self) -> usize {
        self.started()
            .map_or(0, |inner| inner.decay_with(CommitCache::tick))
    }

    /// For a program that does not tick, or under a decay in milliseconds only: reads
    /// the clock and, when the decay time is up, gives back what [`tick`](Self::tick)
    /// would. The allocator makes the same check on its slow paths, so only a program
    /// that waits without allocating needs it: call it from the idle hook, or let a
    /// purger call it (`spawn_purger`, with `std`). Returns the bytes given back.
    ///
    /// ```
    /// assert_eq!(bento_common::CommonAllocator::new().decay(), 0);
    /// ```
    pub fn decay(&self) -> usize {
        self.started()
            .map_or(0, |inner| inner.decay_with(CommitCache::decay))
    }

    /// Tells the commit cache the program's phase: what a level's unload frees is
    /// kept through the next load (see [`Phase`](bento_pages::Phase)).
    ///
    /// ```
    /// use bento_common::CommonAllocator;
    /// use bento_pages::Phase;
    ///
    /// let common = CommonAllocator::new();
    /// common.phase(Phase::Unload);
    /// common.phase(Phase::Play);
    /// ```
    pub fn phase(&self, phase: bento_pages::Phase) {
        if let Some(inner) = self.started() {
            inner.layer.cache.phase(phase);
        }
    }

    /// Readies memory before a stretch that must not wait for the OS, such as a
    /// level's gameplay frames: every size class in use gets an empty run ahead
    /// (committed now, so that its next refill past its partial runs calls no one),
    /// and the first `large` bytes of the free space that ends each of the large
    /// region's segments are committed and kept by the commit cache (see
    /// [`MemorySpace::warm`](bento_space::MemorySpace::warm)). Returns the bytes
    /// committed. Call it outside the stretch (at a level's "loaded"); what it
    /// readies is memory in use to a budget: in fixed memory a commit the limit
    /// refuses readies less, and what it holds is given back before a request is
    /// refused. Kept pages decay under the retention policy as any others.
    ///
    /// ```
    /// use core::alloc::Layout;
    /// use bento_common::CommonAllocator;
    ///
    /// let common = CommonAllocator::new();
    /// let small = common.alloc(Layout::new::<[u8; 48]>()).unwrap();
    /// let big = common.alloc(Layout::from_size_align(1 << 20, 8).unwrap()).unwrap();
    /// assert!(common.prepare(4 << 20) >= (4 << 20) + (64 << 10));
    /// assert_eq!(common.prepare(0), 0); // each class in use has its run ahead
    /// // SAFETY: live blocks, each freed once.
    /// unsafe { common.free(big) };
    /// unsafe { common.free(small) };
    /// ```
    pub fn prepare(&self, large: usize) -> usize {
        self.started().map_or(0, |inner| inner.prepare(large))
    }

    /// The largest free chunk of the large region (of any general region): the
    /// biggest block past the size classes it could place without a new segment
    /// (see [`MemorySpace::largest_free`](bento_space::MemorySpace::largest_free)).
    /// Walks the region's chunks under its lock: call it now and then.
    ///
    /// ```
    /// use core::alloc::Layout;
    /// use bento_common::CommonAllocator;
    ///
    /// let common = CommonAllocator::new();
    /// assert_eq!(common.largest_free(), 0);
    /// let big = common.alloc(Layout::from_size_align(1 << 20, 8).unwrap()).unwrap();
    /// assert!(common.largest_free() > 1 << 20); // the rest of its segment
    /// // SAFETY: a live block, freed once.
    /// unsafe { common.free(big) };
    /// ```
    pub fn largest_free(&self) -> usize {
        self.started().map_or(0, |inner| {
            inner
                .generals()
                .map(|g| g.lock().largest_free())
                .max()
                .unwrap_or(0)
        })
    }

    /// Bytes of freed memory kept committed for reuse now, read without a lock.
    ///
    /// ```
    /// assert_eq!(bento_common::CommonAllocator::new().kept(), 0);
    /// ```
    #[inline]
    pub fn kept(&self) -> usize {
        self.started().map_or(0, |inner| inner.layer.cache.kept())
    }

    /// Sets the commit cache's retention policy from now on, starting the allocator
    /// if it has not started (a refused start leaves every allocation failing, as
    /// it would at the first allocation).
    ///
    /// ```
    /// use bento_common::CommonAllocator;
    /// use bento_pages::Retention;
    ///
    /// let common = CommonAllocator::new();
    /// common.set_retention(Retention::Eager);
    /// assert!(common.stats().cache.limit <= 8 << 20);
    /// ```
    pub fn set_retention(&self, retention: bento_pages::Retention) {
        if let Ok(inner) = self.block() {
            inner.layer.cache.set_retention(retention);
        }
    }

    /// The allocator's stats, per region and in total (all zero before it starts).
    ///
    /// Exact when no other thread allocates or frees meanwhile. While others do, each
    /// region is read at one moment, under its lock, with the blocks the threads'
    /// caches keep of it: a block moving between a region and a cache is never
    /// counted twice or missed, so a region's live stat is what the threads held of
    /// it while it was read (a thread's blocks counted as they were when its cache was
    /// read), give or take the blocks freed meanwhile on another thread than the one
    /// that allocated them. The totals add regions read one after another.
    pub fn stats(&self) -> crate::stats::CommonStats {
        self.started()
            .map_or_else(crate::stats::CommonStats::default, Inner::stats)
    }

    /// The guard pool's figures: its slots, the blocks live and in quarantine, those
    /// guarded so far and the memory it holds; `None` without sampled guard pages
    /// ([`CommonConfig::guard`](crate::CommonConfig::guard)) or before the start.
    ///
    /// ```
    /// # #[cfg(target_os = "linux")] {
    /// use core::alloc::Layout;
    /// use bento_common::{CommonAllocator, CommonConfig};
    /// use bento_pages::GuardConfig;
    ///
    /// // Every allocation guarded, for the example.
    /// let common = CommonAllocator::with_config(
    ///     CommonConfig::DEFAULT.with_guard(GuardConfig::DEFAULT.every(1).slots(4)),
    /// );
    /// let layout = Layout::new::<[u8; 40]>();
    /// let p = common.alloc(layout).unwrap();
    /// assert_eq!(common.guard_stats().unwrap().live, 1);
    /// // SAFETY: live, with its layout.
    /// unsafe { common.dealloc(p, layout) };
    /// assert_eq!(common.guard_stats().unwrap().quarantined, 1);
    /// # }
    /// ```
    #[must_use]
    pub fn guard_stats(&self) -> Option<bento_pages::GuardStats> {
        self.started()?.guard_stats()
    }

    /// The sampled allocation profile ([`CommonConfig::profile`](crate::CommonConfig::profile)),
    /// for its pprof dumps, marks and estimates; `None` without one or before the
    /// start.
    ///
    /// ```
    /// use core::alloc::Layout;
    /// use bento_common::{CommonAllocator, CommonConfig};
    /// use bento_pages::ProfileConfig;
    ///
    /// let common = CommonAllocator::with_config(
    ///     CommonConfig::DEFAULT.with_profile(ProfileConfig::DEFAULT.every(4096)),
    /// );
    /// let big = Layout::from_size_align(4 << 20, 16).unwrap();
    /// let p = common.alloc(big).unwrap();
    /// let profiler = common.profiler().unwrap();
    /// assert_eq!(profiler.stats().estimated_live_bytes, 4 << 20);
    /// // SAFETY: live, with its layout.
    /// unsafe { common.dealloc(p, big) };
    /// assert_eq!(profiler.stats().live_samples, 0);
    /// ```
    #[cfg(all(feature = "profile", any(unix, windows), not(bento_loom)))]
    #[must_use]
    pub fn profiler(&self) -> Option<&'static bento_pages::Profiler> {
        self.started()?.profiler
    }

    /// What the page source has seen so far (its reservations, commits and the calls
    /// of each kind), from its counters: a few loads, no lock and no walk, so a
    /// program can read it every frame. All zero before the allocator starts.
    ///
    /// ```
    /// use core::alloc::Layout;
    /// use bento_common::CommonAllocator;
    ///
    /// let common = CommonAllocator::new();
    /// assert_eq!(common.page_stats().reserves, 0);
    /// let p = common.alloc(Layout::new::<[u8; 100]>()).unwrap();
    /// let pages = common.page_stats();
    /// assert!(pages.reserves > 0 && pages.commits > 0);
    /// assert_eq!(pages, common.stats().source);
    /// // SAFETY: live.
    /// unsafe { common.free(p) };
    /// ```
    pub fn page_stats(&self) -> bento_pages::PageStats {
        self.started()
            .map_or_else(bento_pages::PageStats::default, |inner| {
                inner.layer.source().stats()
            })
    }

    /// The stats as a table, one row per region: what a program prints on a debug
    /// key or at exit.
    ///
    /// ```
    /// use core::alloc::Layout;
    /// use bento_common::CommonAllocator;
    ///
    /// let common = CommonAllocator::new();
    /// let p = common.alloc(Layout::new::<[u8; 100]>()).unwrap();
    /// let table = common.report().to_string();
    /// assert!(table.contains("112"));
    /// // SAFETY: live.
    /// unsafe { common.free(p) };
    /// ```
    pub fn report(&self) -> crate::stats::CommonReport {
        crate::stats::CommonReport(self.stats())
    }

    /// The live blocks per region, when any is left: the leak report of a test or
    /// a tool at exit.
    ///
    /// ```
    /// use core::alloc::Layout;
    /// use bento_common::CommonAllocator;
    ///
    /// let common = CommonAllocator::new();
    /// let p = common.alloc(Layout::new::<[u8; 8]>()).unwrap();
    /// assert!(common.leaks().unwrap().to_string().contains("1 live block"));
    /// // SAFETY: live.
    /// unsafe { common.free(p) };
    /// assert!(common.leaks().is_none());
    /// ```
    pub fn leaks(&self) -> Option<crate::stats::CommonLeaks> {
        let stats = self.stats();
        (stats.live_blocks > 0).then_some(crate::stats::CommonLeaks(stats))
    }

    /// Checks every region: its space's structures (see
    /// [`MemorySpace::validate`](bento_space::MemorySpace::validate)), its free list, and that the region map gives
    /// each live block to it; returns the stats recomputed by the walk.
    ///
    /// # Errors
    ///
    /// [`CommonCorruption`](crate::stats::CommonCorruption) naming the region and what is wrong.
    ///
    /// ```
    /// use core::alloc::Layout;
    /// use bento_common::CommonAllocator;
    ///
    /// let common = CommonAllocator::new();
    /// let p = common.alloc(Layout::new::<[u8; 40]>()).unwrap();
    /// assert_eq!(common.validate().unwrap().live_blocks, 1);
    /// // SAFETY: live.
    /// unsafe { common.free(p) };
    /// ```
    pub fn validate(&self) -> Result<crate::stats::CommonStats, crate::stats::CommonCorruption> {
        match self.started() {
            Some(inner) => inner.validate(),
            None => Ok(crate::stats::CommonStats::default()),
        }
    }
}
