//! A cache of committed pages between a consumer and its source: what the consumer
//! decommits stays committed for its next commit, under a retention policy
//! ([`Retention`]), so that freeing and refilling memory does not turn into system
//! calls and page faults.
//!
//! Here the cache's face (its state, stats and validation); its `PageSource`
//! calls (reserve, release, commit, decommit) are in [`source`], its retention policy
//! (what it keeps, for how long, and the frame tick) in [`retention`], and the table
//! of kept pages and spare reservations in [`table`].

mod source;
mod table;
#[cfg(test)]
mod tests;
mod upkeep;

use core::ptr::{self, NonNull};

use bento_align::Alignment;

use crate::lock::Locked;
use crate::retention::{Decay, Phase, Retention};
use crate::sync::{AtomicUsize, Ordering};
use crate::{PageError, PageSource};

/// The cache's stats.
///
/// ```
/// use bento_pages::{CommitCache, HeapPages};
///
/// let cache = CommitCache::with_capacity(HeapPages::new(), 16 * 4096).unwrap();
/// let s = cache.stats();
/// assert_eq!((s.capacity, s.parked, s.hits, s.purged), (16 * 4096, 0, 0, 0));
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CacheStats {
    /// Pages committed from the cache, with no call to the source: faults avoided.
    pub hits: usize,
    /// Pages the source had to commit.
    pub misses: usize,
    /// Pages kept by a decommit, with no call to the source.
    pub parks: usize,
    /// Kept pages given back to the source to stay within the cap.
    pub evictions: usize,
    /// Bytes kept now (committed in the source, decommitted for the consumer).
    pub parked: usize,
    /// Bytes of kept memory given back to the source so far: by decay, by the cap
    /// and by [`CommitCache::trim`].
    pub purged: usize,
    /// Decay steps that gave something back.
    pub decays: usize,
    /// Decay steps taken (each ages what is kept by one generation).
    pub steps: usize,
    /// Bytes committed through the cache for the consumer now (kept pages not
    /// counted).
    pub committed: usize,
    /// The most bytes committed for the consumer at once (since the last trim).
    pub peak: usize,
    /// Reservations the consumer released that the cache keeps for its next
    /// `reserve` of the same size (see [`CommitCache`]).
    pub spares: usize,
    /// Bytes of address space those reservations hold (their kept pages are counted
    /// in `parked`).
    pub spare_bytes: usize,
    /// Reservations handed out again from the spares, with no call to the source.
    pub reuses: usize,
    /// Bytes the cache can keep: the hard cap.
    pub capacity: usize,
    /// Bytes the cache keeps at most now: at most `capacity`.
    pub limit: usize,
    /// Bytes of kept pages given back because the source refused a commit (fixed
    /// memory: a [`LimitedPages`](crate::LimitedPages) source), so that the commit
    /// could be asked again; counted in `purged` too.
    pub given_up: usize,
    /// Commits the source refused even with nothing kept.
    pub refused: usize,
}

/// What [`CommitCache::validate`] found broken.
///
/// ```
/// use bento_pages::CacheCorruption;
///
/// let e = CacheCorruption::Count { counted: 4096, recorded: 0 };
/// assert!(e.to_string().contains("4096"));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CacheCorruption {
    /// A table entry is not a page address.
    #[error("a kept page at {addr:#x} is not page-aligned")]
    Entry {
        /// The entry's address.
        addr: usize,
    },
    /// A kept page is not found from its own probe path (or is in the table twice).
    #[error("the kept page at {addr:#x} is not on its probe path, or kept twice")]
    Probe {
        /// The page.
        addr: usize,
    },
    /// The kept bytes recorded differ from the table's.
    #[error("{counted} bytes kept in the table, {recorded} recorded")]
    Count {
        /// Bytes found.
        counted: usize,
        /// Bytes the stats say.
        recorded: usize,
    },
    /// More is kept than the limit, or the limit exceeds the capacity.
    #[error("{parked} bytes kept over a limit of {limit}")]
    Limit {
        /// Bytes kept.
        parked: usize,
        /// The limit.
        limit: usize,
    },
    /// The spares' count or bytes differ from the stats.
    #[error("the spare reservations differ from their stats")]
    Spares,
    /// The occupancy map marks an empty slot as holding a page.
    #[error("slot {slot} of the table is marked as holding a page and is empty")]
    Occupancy {
        /// The slot.
        slot: usize,
    },
}

/// How many released reservations the cache keeps at most.
pub(crate) const SPARES: usize = 64;
/// How many spares a decaying cache may hand out for a smaller reserve at once.
const LENT: usize = 64;
/// ... and how much larger than the reserve they may be.
const LEND_FACTOR: usize = 4;
/// ... and how many under [`Retention::Eager`].
const EAGER_SPARES: usize = 4;
/// An empty slot of the table.
const EMPTY: *mut u8 = ptr::null_mut();

/// Fresh reservations from this size up are rounded to a size class under a decay.
const ROUND_FROM: usize = 256 << 10;

/// Pages given back at once beyond what a commit over the cap needs.
const EVICT_BATCH: usize = 16;

/// A table entry's generation: its low bit (pages are at least 2-aligned).
const GENERATION: usize = 1;

#[derive(Clone, Copy, Debug)]
struct Spare {
    base: NonNull<u8>,
    size: usize,
    generation: usize,
    // When it was released (a count of releases): the latest, with the most pages
    // still kept, is handed out first.
    released: u64,
}

/// What a cycle of levels held at its peak, for the decay to keep (see `State::need`).
#[derive(Clone, Copy, Debug)]
struct Need {
    held: usize,
    used: usize,
    at: u64,
}

#[derive(Debug)]
struct State {
    // Invariant: `stats.parked` is the bytes of the table's entries and
    // `stats.parked <= stats.limit <= stats.capacity` between calls; `young` is the
    // generation new entries take, and `count[g]` the entries of generation `g`.
    stats: CacheStats,
    retention: Retention,
    // The limit `set_limit` asked for: the limit under `Eager` (the capacity until
    // set), the least one under `Decay` (none until set).
    floor: Option<usize>,
    young: usize,
    count: [usize; 2],
    // Frames ticked, and whether the program ticks (then frames rule a decay that
    // counts them).
    frames: u64,
    ticked: bool,
    // When the last decay step ran, in the decay clock's unit (see `counts_frames`).
    stepped_at: u64,
    // A level loads or unloads: nothing decays.
    held: bool,
    // The phase the program last said it is in.
    phase: Phase,
    // When the hold began, in the decay clock's unit.
    held_at: u64,
    // Since the last load began: the most held (in use and kept) and the most in
    // use. `need`: the held and in-use peaks of the cycle the decay keeps memory for,
    // with when the load after it began (in the decay clock's unit): in use and kept
    // together stay at least its held peak until one decay time has passed since a
    // cycle last used as much as it did.
    cycle_held: usize,
    cycle_used: usize,
    need: Option<Need>,
    // The decay clock when last read, and when a page or a spare was last kept.
    seen: u64,
    last_kept: u64,
    // Where the next eviction scan starts.
    cursor: usize,
    // Releases kept as spares so far, to order them.
    releases: u64,
    // Invariant: each `Some` is a live reservation of `inner` that the consumer has
    // released: every page of it decommitted for the consumer (its pages either
    // kept or decommitted in `inner`), of at most `capacity` bytes; `stats.spares`
    // and `stats.spare_bytes` count them.
    spares: [Option<Spare>; SPARES],
    // Invariant: each `Some((base, real))` is a spare handed out for a reserve of a
    // smaller size: a live reservation of `inner` of `real` bytes the consumer holds
    // as its reservation at `base`.
    lent: [Option<(NonNull<u8>, usize)>; LENT],
}

impl State {
    /// Whether frames rule the decay `d` now: it counts frames and the program ticks.
    /// Otherwise its clock does (a decay of `frames: 0` is timed even in a program
    /// that ticks).
    fn counts_frames(&self, d: &Decay) -> bool {
        d.frames > 0 && self.ticked
    }

    /// Starts the decay clock afresh at `now`, in its unit: when the schedule or the
    /// unit changes, the next step is half the new decay time away, so what is kept
    /// goes back after between half of it and the whole of it.
    fn restart_clock(&mut self, now: u64) {
        self.stepped_at = now;
        self.seen = now;
        self.last_kept = now;
        if self.held {
            self.held_at = now;
        }
        if let Some(need) = &mut self.need {
            need.at = now;
        }
    }
}

/// Kept pages on their way back to the source, gathered into runs of adjacent pages
/// so that a run costs one `decommit` where the source allows a call to span
/// reservations ([`PageSource::decommit_may_span`]); elsewhere each page is its own
/// call. Gives the last run back on drop.
struct Decommits<'a, P: PageSource> {
    inner: &'a P,
    page: usize,
    span: bool,
    // Invariant: `None`, or `len` bytes of kept pages from `start`, taken out of the
    // table, committed in `inner`, inside live reservations, unused.
    run: Option<(NonNull<u8>, usize)>,
}

impl<'a, P: PageSource> Decommits<'a, P> {
    fn new(inner: &'a P, page: usize) -> Self {
        Self {
            inner,
            page,
            span: inner.decommit_may_span(),
            run: None,
        }
    }

    /// Adds the `len` bytes of pages from `p` to the run, or starts a new one.
    ///
    /// # Safety
    ///
    /// The pages were taken out of the table: committed in `inner`, inside a live
    /// reservation, unused, and not already gathered.
    unsafe fn push(&mut self, p: NonNull<u8>, len: usize) {
        if !self.span {
            // Pages of one run may lie in different reservations: one call each.
            for k in (0..len).step_by(self.page) {
                // SAFETY: the caller's contract, page by page.
                unsafe { self.inner.decommit(p.add(k), self.page) };
            }
            return;
        }
        if let Some((start, n)) = &mut self.run
            && start.addr().get() + *n == p.addr().get()
        {
            *n += len;
            return;
        }
        self.flush();
        self.run = Some((p, len));
    }

    fn flush(&mut self) {
        if let Some((start, len)) = self.run.take() {
            // SAFETY: the run's invariant; pages of several reservations only when
            // `inner` allows a decommit to span them.
            unsafe { self.inner.decommit(start, len) };
        }
    }
}

impl<P: PageSource> Drop for Decommits<'_, P> {
    fn drop(&mut self) {
        self.flush();
    }
}

/// A cache of committed pages, under a retention policy.
///
/// A `decommit` does not reach the source: each page is **kept**, still committed, in
/// a hash table of kept pages (while there is room under the cap; otherwise it goes to
/// the source at once). A `commit` of a kept page takes it out of the table and costs
/// no call to the source and no page fault; the other pages of the range are committed
/// by the source in as few calls as there are runs of them.
///
/// A `release` of a reservation of at most `capacity` bytes keeps it as a **spare**,
/// whole, with its kept pages, and the next `reserve` of the same size and alignment
/// takes it back with no call to the source. A reserve the source refuses while
/// spares are kept gives them back and asks once more (a source of fixed size may need
/// their room).
///
/// How much is kept, and for how long, is the [`Retention`]:
/// - [`Retention::Decay`] (the default): kept pages and spares age in frames
///   ([`tick`](Self::tick)) or milliseconds and go back after the decay time unused;
///   [`phase`](Self::phase) holds them through a level's unload and load. What is
///   committed, in use and kept, stays within a share of the peak in use, and what is
///   kept within the capacity.
/// - [`Retention::Eager`]: at most the limit the consumer sets
///   ([`set_limit`](Self::set_limit)) is kept, with no decay.
///
/// [`trim`](Self::trim) gives every kept page and spare back at once, from any thread.
///
/// A kept page keeps its contents, so memory committed through the cache does not read
/// as zero ([`decommitted_reads_zero`](PageSource::decommitted_reads_zero) is false).
/// The table (a pointer per slot, twice as many slots as pages of capacity, and a bit
/// per slot saying which hold a page) is reserved and committed from the source
/// itself: the cache never calls the global allocator. A trim, a drop and
/// [`validate`](Self::validate) go from one kept page to the next through the bits, a
/// word of 64 slots at a time, rather than reading every slot.
///
/// ```
/// use bento_align::Alignment;
/// use bento_pages::{CommitCache, Decay, HeapPages, Metered, PageSource, Retention};
///
/// let pages = CommitCache::with_capacity(Metered::new(HeapPages::new()), 64 * 4096).unwrap();
/// pages.set_retention(Retention::Decay(Decay::frames(2)));
/// let base = pages.reserve(16 * 4096, Alignment::MIN).unwrap();
/// // SAFETY: ranges of a live reservation; everything is decommitted before release.
/// unsafe {
///     pages.commit(base, 4 * 4096).unwrap();
///     let before = pages.inner().stats().commits;
///     pages.decommit(base, 4 * 4096); // kept, no call to the source
///     pages.commit(base, 4 * 4096).unwrap(); // four hits, no call to the source
///     assert_eq!(pages.inner().stats().commits, before);
///     assert_eq!(pages.stats().hits, 4);
///     pages.decommit(base, 4 * 4096);
///     // Two frames unused: the kept pages go back.
///     pages.tick();
///     pages.tick();
///     assert_eq!(pages.stats().parked, 0);
///     assert_eq!(pages.stats().purged, 4 * 4096);
///     pages.release(base, 16 * 4096);
/// }
/// ```
#[derive(Debug)]
pub struct CommitCache<P: PageSource> {
    inner: P,
    page: Alignment,
    // Invariant: `slots` pointers (a power of two, or 0), each null (empty) or a kept
    // page tagged with its generation in the low bit: page-aligned, committed in
    // `inner`, inside a live reservation, decommitted for the consumer, in the table
    // once. Open addressing with linear probing from `home(page)`; no entry lies
    // after an empty slot on its probe path. Reached under `state`.
    table: NonNull<*mut u8>,
    // Invariant: `slots.div_ceil(64)` words after the table, bit `i % 64` of word
    // `i / 64` set exactly when slot `i` holds a page. Reached under `state`.
    occupied: NonNull<u64>,
    slots: usize,
    // log2(slots), for the hash.
    slots_log2: u32,
    // Bytes the cache can keep (`stats.capacity`), readable without the lock.
    capacity: usize,
    // The table's own reservation, released on drop (0 bytes when `slots == 0`).
    table_bytes: usize,
    state: Locked<State>,
    // `stats.parked`, readable without the lock.
    kept: AtomicUsize,
    // `stats.steps`, readable without the lock.
    steps: AtomicUsize,
}

// SAFETY: the table and the spares hold pointers into reservations of `inner`, which
// moves with the cache; they are only read or written under `state`'s lock.
unsafe impl<P: PageSource + Send> Send for CommitCache<P> {}
// SAFETY: as above; every access to the table holds the lock, and `inner` is `Sync`.
unsafe impl<P: PageSource + Sync> Sync for CommitCache<P> {}

impl<P: PageSource> CommitCache<P> {
    /// The capacity of [`CommitCache::new`]: 32 MiB.
    pub const DEFAULT_CAPACITY: usize = 32 << 20;

    /// A cache of [`DEFAULT_CAPACITY`](Self::DEFAULT_CAPACITY) bytes over `inner`,
    /// with [`Retention::DEFAULT`].
    ///
    /// # Errors
    ///
    /// When `inner` cannot reserve or commit the table.
    pub fn new(inner: P) -> Result<Self, PageError> {
        Self::with_capacity(inner, Self::DEFAULT_CAPACITY)
    }

    /// A cache that keeps up to `bytes` (rounded down to pages) over `inner`, with
    /// [`Retention::DEFAULT`] and no floor; 0 makes it a plain pass-through.
    ///
    /// # Errors
    ///
    /// When `inner` cannot reserve or commit the table.
    pub fn with_capacity(inner: P, bytes: usize) -> Result<Self, PageError> {
        let page = inner.page_alignment();
        let pages = bytes >> page.log2();
        let slots = if pages == 0 {
            0
        } else {
            pages
                .checked_mul(2)
                .and_then(usize::checked_next_power_of_two)
                .ok_or(PageError::OutOfAddressSpace { size: bytes })?
        };
        let words = slots.div_ceil(64);
        let (table, occupied, table_bytes) = if slots == 0 {
            (NonNull::dangling(), NonNull::dangling(), 0)
        } else {
            // The slots, then the occupancy words (a multiple of 8 bytes in, aligned).
            let want = slots
                .checked_add(words)
                .and_then(|n| n.checked_mul(size_of::<*mut u8>()))
                .ok_or(PageError::OutOfAddressSpace { size: bytes })?;
            let table_bytes = bento_align::align_up(want, page)
                .ok_or(PageError::OutOfAddressSpace { size: want })?;
            let base = inner.reserve(table_bytes, Alignment::of::<*mut u8>())?;
            // SAFETY: the whole of a reservation just made.
            if let Err(e) = unsafe { inner.commit(base, table_bytes) } {
                // SAFETY: the reservation just made; its commit failed, so nothing of it
                // is committed.
                unsafe { inner.release(base, table_bytes) };
                return Err(e);
            }
            let table = base.cast::<*mut u8>();
            // SAFETY: the occupancy words start `slots` pointers in, inside the
            // reservation (`want` bytes fit in `table_bytes`), aligned for `u64`.
            let occupied = unsafe { table.add(slots) }.cast::<u64>();
            if !inner.decommitted_reads_zero() {
                for i in 0..slots {
                    // SAFETY: `i < slots` and the table holds `slots` pointers; the
                    // memory is committed and aligned for pointers.
                    unsafe { table.add(i).write(ptr::null_mut()) };
                }
                // SAFETY: the `words` words after the table, committed and aligned.
                unsafe { occupied.write_bytes(0, words) };
            }
            // Otherwise fresh pages read as zero: every slot is null, no bit is set,
            // and a source that commits on touch makes only the slots used resident.
            (table, occupied, table_bytes)
        };
        let capacity = pages << page.log2();
        Ok(Self {
            inner,
            page,
            table,
            occupied,
            slots,
            slots_log2: slots.max(1).trailing_zeros(),
            capacity,
            table_bytes,
            state: Locked::new(State {
                stats: CacheStats {
                    capacity,
                    limit: capacity,
                    ..CacheStats::default()
                },
                retention: Retention::DEFAULT,
                floor: None,
                young: 0,
                count: [0; 2],
                frames: 0,
                ticked: false,
                stepped_at: 0,
                held: false,
                phase: Phase::Play,
                held_at: 0,
                cycle_held: 0,
                cycle_used: 0,
                need: None,
                seen: 0,
                last_kept: 0,
                cursor: 0,
                releases: 0,
                spares: [None; SPARES],
                lent: [None; LENT],
            }),
            kept: AtomicUsize::new(0),
            steps: AtomicUsize::new(0),
        })
    }

    /// The source behind the cache.
    pub fn inner(&self) -> &P {
        &self.inner
    }

    /// Takes the cache's lock and keeps it until [`release_lock`](Self::release_lock): for a
    /// `pthread_atfork` prepare handler, so that a child process never inherits the
    /// lock held by a thread it does not have. Every call that reaches the cache
    /// waits meanwhile.
    ///
    /// ```
    /// use bento_pages::{CommitCache, HeapPages};
    ///
    /// let cache = CommitCache::new(HeapPages::new()).unwrap();
    /// cache.hold_lock();
    /// // SAFETY: held just above, by this thread.
    /// unsafe { cache.release_lock() };
    /// assert_eq!(cache.trim(), 0);
    /// ```
    pub fn hold_lock(&self) {
        self.state.raw().lock();
    }

    /// Gives back the lock [`hold_lock`](Self::hold_lock) took.
    ///
    /// # Safety
    ///
    /// The caller must hold the lock through `hold_lock`: this thread, or, in a child
    /// process forked while it was held, the child's only thread.
    pub unsafe fn release_lock(&self) {
        // SAFETY: the caller's contract: the lock is held and is this caller's.
        unsafe { self.state.raw().unlock() }
    }

    /// The source behind the cache, given back after what [`Drop`] does: every
    /// kept page decommitted, the spares and the table released.
    ///
    /// ```
    /// use bento_pages::{CommitCache, HeapPages, Metered};
    ///
    /// let cache = CommitCache::with_capacity(Metered::new(HeapPages::new()), 16 * 4096).unwrap();
    /// let metered = cache.into_inner();
    /// assert_eq!(metered.stats().reserved, 0); // the table went back
    /// ```
    pub fn into_inner(self) -> P {
        let mut this = core::mem::ManuallyDrop::new(self);
        this.release_all();
        // SAFETY: `this` is never used or dropped again, so `inner` is moved out once;
        // the other fields own nothing (the table went back in `release_all`, and the
        // state holds plain values).
        unsafe { core::ptr::read(&raw const this.inner) }
    }

    /// Decommits every kept page and releases the spares and the table.
    fn release_all(&mut self) {
        self.trim();
        if self.table_bytes > 0 {
            let base = self.table.cast::<u8>();
            // SAFETY: the table's own reservation, committed in `with_capacity`, no
            // longer used.
            unsafe {
                self.inner.decommit(base, self.table_bytes);
                self.inner.release(base, self.table_bytes);
            }
            self.table_bytes = 0;
        }
    }

    /// The cache's stats now.
    pub fn stats(&self) -> CacheStats {
        self.state.with(|s| s.stats)
    }

    /// Recomputes the cache's stats from its table and spares and checks its
    /// invariants: each kept page in the table once, on its probe path, page-aligned,
    /// its slot marked in the occupancy bits and no empty slot marked;
    /// the counts of each generation and the kept bytes agree; at most the limit is
    /// kept, the limit at most the capacity; the spares' count and bytes agree.
    ///
    /// # Errors
    ///
    /// The first invariant found broken.
    ///
    /// ```
    /// let cache = bento_pages::CommitCache::new(bento_pages::HeapPages::new()).unwrap();
    /// assert_eq!(cache.validate().unwrap().parked, 0);
    /// ```
    pub fn validate(&self) -> Result<CacheStats, CacheCorruption> {
        self.state.with(|s| {
            let mut count = [0usize; 2];
            // Plain loops and comparisons: Miri interprets every call an iterator
            // chain would make, and the model tests validate after every few steps.
            // A page in a slot without its bit is not counted, so the counts differ.
            let mut from = 0;
            // SAFETY: the lock is held.
            while let Some(i) = unsafe { self.next_kept(from) } {
                from = i + 1;
                // SAFETY: the lock is held and `i < slots`.
                let e = unsafe { self.slot(i) };
                if e == EMPTY {
                    return Err(CacheCorruption::Occupancy { slot: i });
                }
                let addr = e.addr() & !GENERATION;
                if addr & self.page.mask() != 0 {
                    return Err(CacheCorruption::Entry { addr });
                }
                // SAFETY: the lock is held.
                if unsafe { self.find(addr) } != Some(i) {
                    return Err(CacheCorruption::Probe { addr });
                }
                count[e.addr() & GENERATION] += 1;
            }
            let parked = (count[0] + count[1]) << self.page.log2();
            if count != s.count || parked != s.stats.parked {
                return Err(CacheCorruption::Count {
                    counted: parked,
                    recorded: s.stats.parked,
                });
            }
            if s.stats.parked > s.stats.limit || s.stats.limit > s.stats.capacity {
                return Err(CacheCorruption::Limit {
                    parked: s.stats.parked,
                    limit: s.stats.limit,
                });
            }
            let (mut n, mut bytes) = (0, 0);
            let mut k = 0;
            while k < s.spares.len() {
                if let Some(sp) = &s.spares[k] {
                    n += 1;
                    bytes += sp.size;
                }
                k += 1;
            }
            if (n, bytes) != (s.stats.spares, s.stats.spare_bytes) {
                return Err(CacheCorruption::Spares);
            }
            if self.kept.load(Ordering::Relaxed) != s.stats.parked {
                return Err(CacheCorruption::Count {
                    counted: s.stats.parked,
                    recorded: self.kept.load(Ordering::Relaxed),
                });
            }
            Ok(s.stats)
        })
    }

    /// Runs `f` with the state locked and a run of decommits for the pages it gives
    /// back (sent to the source before the lock is dropped), then updates the
    /// lock-free copy of the kept bytes.
    fn locked<R>(&self, f: impl FnOnce(&mut State, &mut Decommits<'_, P>) -> R) -> R {
        self.state.with(|s| {
            let mut out = Decommits::new(&self.inner, self.page.get());
            let r = f(s, &mut out);
            drop(out);
            self.kept.store(s.stats.parked, Ordering::Relaxed);
            r
        })
    }

    /// The size class a fresh reservation of `size` bytes is rounded up to under a
    /// decay: from [`ROUND_FROM`] up, the next of `2^k` and `1.5 * 2^k` (in pages);
    /// `None` where it is not rounded.
    fn class_of(&self, size: usize) -> Option<usize> {
        if size < ROUND_FROM || size > self.capacity || self.slots == 0 {
            return None;
        }
        if self.state.with(|s| s.retention.is_eager()) {
            return None;
        }
        let octave = 1usize << (usize::BITS - 1 - size.leading_zeros());
        let class = if size == octave {
            size
        } else if size <= octave + octave / 2 {
            octave + octave / 2
        } else {
            octave.checked_mul(2)?
        };
        let class = class.checked_next_multiple_of(self.page.get())?;
        (class != size).then_some(class)
    }

    /// The decay's clock now, in its unit (frames once they rule the decay).
    fn now(&self, s: &State) -> Option<u64> {
        let Retention::Decay(d) = s.retention else {
            return None;
        };
        if s.counts_frames(&d) {
            return Some(s.frames);
        }
        d.clock.filter(|_| d.millis > 0).map(|clock| clock())
    }
}

/// A table entry's page pointer, without its generation bit.
#[inline]
fn untag(e: *mut u8) -> *mut u8 {
    e.map_addr(|a| a & !GENERATION)
}

impl<P: PageSource> Drop for CommitCache<P> {
    fn drop(&mut self) {
        self.release_all();
    }
}
