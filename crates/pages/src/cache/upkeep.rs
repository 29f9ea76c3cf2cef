//! The commit cache's retention: what it keeps (its limit), for how long (the decay
//! counted in frames or by the clock, steps), what a phase or a trim does, and the
//! eviction that gives pages back.

use core::ptr::NonNull;

use crate::PageSource;
use crate::cache::{CommitCache, Decommits, EVICT_BATCH, GENERATION, Need, SPARES, State, untag};
use crate::retention::{Decay, Phase, Retention};
use crate::sync::Ordering;

impl<P: PageSource> CommitCache<P> {
    /// Bytes kept now (`stats().parked`), read without the lock: cheap enough for a
    /// hot path to ask whether anything is waiting to decay.
    ///
    /// ```
    /// let cache = bento_pages::CommitCache::new(bento_pages::HeapPages::new()).unwrap();
    /// assert_eq!(cache.kept(), 0);
    /// ```
    #[inline]
    pub fn kept(&self) -> usize {
        self.kept.load(Ordering::Relaxed)
    }

    /// Decay steps taken so far (`stats().steps`), read without the lock: a consumer
    /// that keeps freed blocks of its own compares it around [`tick`](Self::tick) to
    /// let them decay too.
    ///
    /// ```
    /// let cache = bento_pages::CommitCache::new(bento_pages::HeapPages::new()).unwrap();
    /// assert_eq!(cache.steps(), 0);
    /// ```
    #[inline]
    pub fn steps(&self) -> usize {
        self.steps.load(Ordering::Relaxed)
    }

    /// The retention policy in force.
    pub fn retention(&self) -> Retention {
        self.state.with(|s| s.retention)
    }

    /// Sets the retention policy from now on: pages kept beyond its cap go back at
    /// once, and a new schedule starts its clock afresh, in its own unit (a decay in
    /// milliseconds after frames, or frames after milliseconds, counts from this
    /// call): what is kept goes back after between half the new decay time and the
    /// whole of it. The schedule in force (a new cap at most) keeps its clock.
    ///
    /// ```
    /// use bento_pages::{CommitCache, HeapPages, Retention};
    ///
    /// let cache = CommitCache::new(HeapPages::new()).unwrap();
    /// cache.set_retention(Retention::Eager);
    /// assert!(cache.retention().is_eager());
    /// ```
    pub fn set_retention(&self, retention: Retention) {
        self.locked(|s, out| {
            // The same schedule (a new cap at most) keeps the clock going, whatever
            // the clock's function pointer compares as: a program that sets its
            // policy every frame still decays.
            let same = match (&s.retention, &retention) {
                (Retention::Decay(a), Retention::Decay(b)) => {
                    (a.frames, a.millis, a.clock.is_some())
                        == (b.frames, b.millis, b.clock.is_some())
                }
                (Retention::Eager, Retention::Eager) => true,
                _ => false,
            };
            s.retention = retention;
            if !same && let Some(now) = self.now(s) {
                s.restart_clock(now);
            }
            self.fit(s, out);
        });
    }

    /// Keeps at most `bytes` (rounded down to pages, and at most the capacity) under
    /// [`Retention::Eager`], and at least that much room under the decay's cap,
    /// giving kept pages back until the limit holds: a consumer whose memory shrinks
    /// keeps its cache in proportion.
    ///
    /// ```
    /// use bento_align::Alignment;
    /// use bento_pages::{CommitCache, HeapPages, PageSource, Retention};
    ///
    /// let pages = CommitCache::with_capacity(HeapPages::new(), 64 * 4096).unwrap();
    /// pages.set_retention(Retention::Eager);
    /// pages.set_limit(64 * 4096);
    /// let base = pages.reserve(16 * 4096, Alignment::MIN).unwrap();
    /// // SAFETY: ranges of a live reservation; everything is decommitted before release.
    /// unsafe {
    ///     pages.commit(base, 8 * 4096).unwrap();
    ///     pages.decommit(base, 8 * 4096);
    ///     assert_eq!(pages.stats().parked, 8 * 4096);
    ///     pages.set_limit(2 * 4096);
    ///     assert_eq!(pages.stats().parked, 2 * 4096);
    ///     pages.trim();
    ///     pages.release(base, 16 * 4096);
    /// }
    /// ```
    pub fn set_limit(&self, bytes: usize) {
        let floor = bytes.min(self.capacity) & !self.page.mask();
        self.locked(|s, out| {
            s.floor = Some(floor);
            self.fit(s, out);
        });
    }

    /// One frame passed: under a decay counted in frames, what stayed unused long
    /// enough goes back; under a decay in milliseconds only (`frames: 0`), the clock
    /// is read, as [`decay`](Self::decay) does. Returns the bytes given back.
    ///
    /// ```
    /// use bento_pages::{CommitCache, Decay, HeapPages, Retention};
    ///
    /// let cache = CommitCache::new(HeapPages::new()).unwrap();
    /// cache.set_retention(Retention::Decay(Decay::frames(60)));
    /// assert_eq!(cache.tick(), 0); // nothing kept
    /// ```
    pub fn tick(&self) -> usize {
        self.locked(|s, out| {
            let Retention::Decay(d) = s.retention else {
                return 0;
            };
            let before = s.stats.purged;
            if d.frames > 0 {
                if !s.ticked {
                    // Frames rule from here: the ages restart in frames.
                    s.ticked = true;
                    s.restart_clock(s.frames);
                }
                s.frames += 1;
                s.seen = s.frames;
                self.step(s, out, s.frames, d.frames);
            } else {
                self.poll(s, out);
            }
            s.stats.purged - before
        })
    }

    /// Reads the clock and takes a decay step if one is due, for a program that does
    /// not tick, or under a decay in milliseconds only (`frames: 0`): an idle hook,
    /// the same check the cache makes on its own slow paths. Once the program ticks,
    /// a decay that counts frames is ruled by them and this does nothing. Returns the
    /// bytes given back.
    ///
    /// ```
    /// use bento_pages::{CommitCache, HeapPages};
    ///
    /// let cache = CommitCache::new(HeapPages::new()).unwrap();
    /// assert_eq!(cache.decay(), 0); // nothing kept
    /// ```
    pub fn decay(&self) -> usize {
        self.locked(|s, out| {
            let before = s.stats.purged;
            self.poll(s, out);
            s.stats.purged - before
        })
    }

    /// The program's phase: through [`Phase::Load`] and [`Phase::Unload`] nothing kept
    /// decays (the decay clock stops, for one decay time at most), so what an unload
    /// frees is there for the next load; [`Phase::Play`] starts the clock again where
    /// it stopped. A load also begins a cycle: the decay keeps in use and kept
    /// together at least what the cycle that used the most held at its peak, until a
    /// decay time passes without a cycle that uses as much, so that levels shorter
    /// than the decay time find the pages a level before them held; once loads stop
    /// (or use less), what is over goes a decay time later. A cycle that used nothing
    /// needs nothing, and [`trim`](Self::trim) forgets the need.
    ///
    /// ```
    /// use bento_pages::{CommitCache, HeapPages, Phase};
    ///
    /// let cache = CommitCache::new(HeapPages::new()).unwrap();
    /// cache.phase(Phase::Unload);
    /// cache.phase(Phase::Play);
    /// ```
    pub fn phase(&self, phase: Phase) {
        self.locked(|s, _| {
            let held = phase != Phase::Play;
            let now = self.now(s);
            if phase == Phase::Load
                && s.phase != Phase::Load
                && let Retention::Decay(d) = s.retention
                && let Some(now) = now
            {
                // A load begins a cycle. The decay keeps what the cycle that used
                // the most held at its peak (in use and kept), so that a level that
                // comes round again finds its pages, until a decay time passes
                // without a cycle that uses as much.
                let delay = if s.counts_frames(&d) {
                    d.frames
                } else {
                    d.millis
                };
                let this = Need {
                    held: s.cycle_held,
                    used: s.cycle_used,
                    at: now,
                };
                s.need = match s.need {
                    // A cycle that used less leaves the need to age...
                    Some(need)
                        if this.used < need.used
                            && now.wrapping_sub(need.at) < u64::from(delay) =>
                    {
                        Some(need)
                    }
                    // ... one that used as much renews it; a cycle that used nothing
                    // needs nothing.
                    _ => (this.used > 0).then_some(this),
                };
                s.cycle_held = s.stats.committed + s.stats.parked;
                s.cycle_used = s.stats.committed;
            }
            s.phase = phase;
            match (s.held, held, now) {
                // The decay clock stops while held...
                (false, true, Some(now)) => s.held_at = now,
                // ... and the time held does not count.
                (true, false, Some(now)) => {
                    let held = now.wrapping_sub(s.held_at);
                    s.stepped_at = s.stepped_at.wrapping_add(held);
                    s.last_kept = s.last_kept.wrapping_add(held);
                }
                _ => {}
            }
            s.held = held;
        });
    }

    /// Gives every kept page and every spare reservation back to the source at once;
    /// returns the bytes of memory given back: the manual prompt for memory pressure,
    /// from any thread.
    pub fn trim(&self) -> usize {
        let freed = self.locked(|s, out| {
            let before = s.stats.purged;
            // SAFETY: the lock is held.
            unsafe { self.sweep(s, out, None, 0, (0, 0)) };
            s.stats.peak = s.stats.committed;
            // Memory pressure outranks the levels' need.
            s.need = None;
            s.cycle_held = s.stats.committed;
            s.cycle_used = s.stats.committed;
            self.fit(s, out);
            s.stats.purged - before
        });
        // The kept pages went back before any spare is released.
        self.release_spares(|_| true);
        freed
    }

    /// Reads the clock (unless frames rule the decay) and takes a decay step if one
    /// is due.
    pub(super) fn poll(&self, s: &mut State, out: &mut Decommits<'_, P>) {
        if let Retention::Decay(d) = s.retention
            && !s.counts_frames(&d)
            && d.millis > 0
            && let Some(clock) = d.clock
        {
            let now = clock();
            s.seen = now;
            self.step(s, out, now, d.millis);
        }
    }

    /// A decay step at `now`, if half the decay time `delay` (rounded down, at
    /// least 1) passed since the last: the older generation goes back (kept pages
    /// and spares), the younger becomes the older.
    ///
    /// A page kept at `k` (the clock's value then: in frames, the last tick before
    /// it) is in the younger generation until the next step, so the step after that
    /// gives it back at an age in `period + 1 ..= 2 * period`; with nothing kept for
    /// `half`, a step gives the younger generation back too. Either way the age is in
    /// `half ..= delay`: within the decay time, and at least half of it, rounded up.
    pub(super) fn step(&self, s: &mut State, out: &mut Decommits<'_, P>, now: u64, delay: u32) {
        let period = u64::from(delay / 2).max(1);
        // Half the decay time, rounded up: what the younger generation must have
        // waited to go with the older one.
        let half = u64::from(delay).saturating_sub(period);
        if s.held {
            // A hold lasts one decay time at most: a program that unloads and never
            // says it plays again still gets its memory back.
            if now.wrapping_sub(s.held_at) < u64::from(delay) {
                return;
            }
            s.held = false;
        }
        if now.wrapping_sub(s.stepped_at) < period {
            return;
        }
        s.stepped_at = now;
        s.stats.steps += 1;
        self.steps.store(s.stats.steps, Ordering::Relaxed);
        let old = s.young ^ GENERATION;
        // Nothing kept for half the decay time (an idle program looked at late): the
        // younger generation has waited that long too, and goes with the older.
        let all = now.wrapping_sub(s.last_kept) >= half;
        let before = s.stats.purged;
        let wanted = if all { None } else { Some(old) };
        // Within a decay time of the cycle that held the most, in use and kept stay at
        // least that much (so the next level does not fault in again what the decay
        // gave back between levels).
        let need = match s.need {
            Some(need) if now.wrapping_sub(need.at) < u64::from(delay) => need.held,
            _ => {
                s.need = None;
                0
            }
        };
        let target = need.saturating_sub(s.stats.committed) & !self.page.mask();
        if wanted.map_or(s.stats.parked, |g| s.count[g]) > 0 && s.stats.parked > target {
            // SAFETY: the lock is held.
            unsafe { self.sweep(s, out, wanted, target, (0, 0)) };
        }
        // SAFETY: the lock is held.
        let spares = unsafe { self.drop_spares(s, out, |sp| all || sp.generation == old) };
        if s.stats.purged != before || spares {
            s.stats.decays += 1;
        }
        // The emptied generation takes the new pages: what was young (entries and
        // spares keep their bit) is now the older one.
        s.young = old;
    }

    /// Recomputes the limit and gives kept pages back until it holds.
    pub(super) fn fit(&self, s: &mut State, out: &mut Decommits<'_, P>) {
        s.stats.limit = self.limit_of(s);
        if s.stats.parked > s.stats.limit {
            let target = s.stats.limit;
            // SAFETY: the lock is held.
            unsafe { self.evict(s, out, target, (0, 0)) };
        }
    }

    /// [`fit`](Self::fit) after a commit under decay: [`EVICT_BATCH`] pages more go
    /// back, so that commits that outgrow the cap page by page do not scan the table
    /// each time.
    pub(super) fn fit_growing(&self, s: &mut State, out: &mut Decommits<'_, P>) {
        s.stats.limit = self.limit_of(s);
        if s.stats.parked > s.stats.limit {
            let target = s
                .stats
                .limit
                .saturating_sub(EVICT_BATCH << self.page.log2());
            // SAFETY: the lock is held.
            unsafe { self.evict(s, out, target, (0, 0)) };
        }
    }

    /// The most the cache may keep now.
    pub(super) fn limit_of(&self, s: &State) -> usize {
        self.limit_for(s, s.stats.committed, s.stats.peak)
    }

    /// The most the cache may keep with `committed` bytes in use and a peak of `peak`.
    pub(super) fn limit_for(&self, s: &State, committed: usize, peak: usize) -> usize {
        let capacity = s.stats.capacity;
        match s.retention {
            Retention::Eager => s.floor.unwrap_or(capacity),
            Retention::Decay(Decay { peak_percent, .. }) => {
                let total = u128::try_from(peak).unwrap_or(u128::MAX)
                    * u128::from(peak_percent.max(100))
                    / 100;
                let total = usize::try_from(total).unwrap_or(usize::MAX);
                let room = total.saturating_sub(committed) & !self.page.mask();
                room.max(s.floor.unwrap_or(0)).min(capacity)
            }
        }
    }

    /// Gives kept pages back, the older generation first, until at most `target`
    /// bytes are kept.
    ///
    /// # Safety
    ///
    /// The caller must hold the lock.
    pub(super) unsafe fn evict(
        &self,
        s: &mut State,
        out: &mut Decommits<'_, P>,
        target: usize,
        keep: (usize, usize),
    ) {
        let before = s.stats.purged;
        let old = s.young ^ GENERATION;
        // The spares released longest ago first: nobody uses them, and the latest
        // are handed out first.
        while s.stats.parked > target
            && let Some(oldest) = (0..SPARES)
                .filter_map(|i| Some((i, s.spares[i]?)))
                .min_by_key(|(_, sp)| sp.released)
                .map(|(i, _)| i)
        {
            if let Some(sp) = s.spares[oldest].take() {
                s.stats.spares -= 1;
                s.stats.spare_bytes -= sp.size;
                // SAFETY: a spare is a live reservation of `inner` released by the
                // consumer, all of it decommitted for the consumer; the caller holds
                // the lock.
                unsafe { self.give_back_locked(s, out, sp.base, sp.size) };
            }
        }
        // SAFETY: the caller holds the lock.
        unsafe {
            self.sweep(s, out, Some(old), target, keep);
            self.sweep(s, out, None, target, keep);
        }
        s.stats.evictions += (s.stats.purged - before) >> self.page.log2();
    }

    /// Takes kept pages out of the table (those of `generation`, or all) and gives
    /// them back, each with the adjacent kept pages of that generation as one run,
    /// until at most `target` bytes are kept or none is left to take, leaving the
    /// pages of `keep` (a range of addresses, `start..end`). A sweep for the decay or
    /// a trim visits the whole table, going over empty slots through the occupancy
    /// bits; an eviction starts where the last one stopped.
    ///
    /// # Safety
    ///
    /// The caller must hold the lock.
    pub(super) unsafe fn sweep(
        &self,
        s: &mut State,
        out: &mut Decommits<'_, P>,
        generation: Option<usize>,
        target: usize,
        keep: (usize, usize),
    ) {
        if self.slots == 0 {
            return;
        }
        let page = self.page.get();
        let wanted = |e: *mut u8| {
            let addr = e.addr() & !GENERATION;
            generation.is_none_or(|g| e.addr() & GENERATION == g)
                && !(keep.0..keep.1).contains(&addr)
        };
        let left = |s: &State| match generation {
            Some(g) => s.count[g],
            None => s.stats.parked,
        };
        // A removal shifts later entries back, possibly past the scan: pass again
        // while any is left and the last pass took some.
        let mut progress = true;
        while progress && s.stats.parked > target && left(s) > 0 {
            let at_start = s.stats.parked;
            let mut i = s.cursor;
            let mut seen = 0;
            let mask = self.slots - 1;
            while seen < self.slots && s.stats.parked > target {
                // SAFETY: the lock is held and `i < slots`.
                let e = unsafe { self.slot(i) };
                if e.is_null() {
                    // Over the empty slots to the next kept page (wrapping at the end),
                    // as far as the pass goes.
                    // SAFETY: the lock is held.
                    let next = unsafe { self.next_kept(i).or_else(|| self.next_kept(0)) };
                    let gap = next.map_or(self.slots, |j| j.wrapping_sub(i) & mask);
                    let step = gap.min(self.slots - seen);
                    i = (i + step) & mask;
                    seen += step;
                    continue;
                }
                if !wanted(e) {
                    i = (i + 1) & mask;
                    seen += 1;
                    continue;
                }
                // SAFETY: the lock is held; `i` holds the entry.
                unsafe { self.remove(s, i) };
                let p = untag(e);
                // The run around it, of pages of the same generation(s), where one call
                // may span reservations (a run of pages of several reservations would
                // otherwise be reached through one page's pointer).
                let (mut lo, mut hi) = (p.addr(), p.addr() + page);
                while out.span
                    && s.stats.parked > target
                    // SAFETY: the lock is held.
                    && let Some(j) = unsafe { self.find_if(lo.wrapping_sub(page), wanted) }
                {
                    // SAFETY: the lock is held and `j` holds an entry.
                    unsafe { self.remove(s, j) };
                    lo -= page;
                }
                while out.span
                    && s.stats.parked > target
                    // SAFETY: the lock is held.
                    && let Some(j) = unsafe { self.find_if(hi, wanted) }
                {
                    // SAFETY: the lock is held and `j` holds an entry.
                    unsafe { self.remove(s, j) };
                    hi += page;
                }
                s.stats.purged += hi - lo;
                // SAFETY: the pages of `[lo, hi)` were all kept and are now out of the
                // table: committed in `inner`, inside live reservations, unused. The
                // pointer takes its provenance from the kept page's.
                unsafe { out.push(NonNull::new_unchecked(p.with_addr(lo)), hi - lo) };
                // The slot may hold a shifted entry now: look at it again.
            }
            s.cursor = i;
            progress = s.stats.parked < at_start;
        }
    }
}
