//! A heap's figures and budget: the [`Account`] every heap keeps (shared with its
//! children, which charge it too), and [`HeapStats`].
//!
//! The hot path touches one lane of counters, each on its own cache line: the lane of
//! the thread's slot (see `slot`), which only that thread writes, with plain loads and
//! stores of atomics, or the shared lane, with `fetch_add`. Threads therefore pay no
//! atomic read-modify-write and never write the same cache line (up to 16 threads
//! at once; more share a lane).
//!
//! One comparison covers both the budget and the peak: the live total is compared
//! with `watermark = min(peak, budget)`, and only an allocation that passes it takes
//! the slow path, which refuses it (over the budget) or raises the peak.
//!
//! The live total the fast path sees is the lane's own bytes (exact) plus its view of
//! the other lanes (as last read). So that a stale view can never let threads pass
//! the budget by more than a little, a lane also takes the slow path, which reads the
//! other lanes afresh, once it has allocated more than the account's *slack* since it
//! last did ([`slack`]: a 256th of the budget, at most 64 KiB), and every [`REFRESH`]
//! allocations. A refresh begins with a sequentially consistent fence, so of two
//! refreshes the later sees what the other's lane stored before the earlier. Every
//! allocation that the fast path grants comes after the latest refresh of some lane,
//! which saw a total within the budget, and each lane has allocated at most the slack
//! since its own: so live bytes pass the budget by at most the slack per thread
//! allocating at once, and the peak misses a maximum by at most as much. One thread
//! alone is exact: its view of idle lanes is never stale. The shared lane (threads
//! past the 15 slots) counts its threads' bytes since a refresh together, and any of
//! them starts it afresh: together they may pass their slack by what they allocate
//! between two refreshes.

use alloc::sync::Arc;
use alloc::vec::Vec;
use core::fmt;

use crate::slot::{self, LANES, SHARED};
use crate::sync::Lock;

use crate::sync::{AtomicBool, AtomicUsize, Ordering, fence};
use crate::track::Leak;

/// A heap's figures, from [`Heap::stats`](crate::Heap::stats). A heap with children
/// counts their blocks too: its figures are its whole subtree's.
///
/// ```
/// use allocator_api2::alloc::Global;
/// use bento_heap::HeapBuilder;
/// use core::alloc::Layout;
///
/// let heap = HeapBuilder::new("doc-stats").budget(1 << 20).build(Global);
/// let p = heap.alloc(Layout::new::<[u8; 100]>()).unwrap();
/// let s = heap.stats();
/// assert_eq!((s.live_bytes, s.live_blocks, s.total_allocs), (100, 1, 1));
/// assert_eq!(s.budget, Some(1 << 20));
/// // SAFETY: `p` is live, allocated with this layout.
/// unsafe { heap.free(p, Layout::new::<[u8; 100]>()) };
/// assert_eq!(heap.stats().peak_bytes, 100);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HeapStats {
    /// Bytes in live blocks, as requested (guards and rounding not counted).
    pub live_bytes: usize,
    /// Live blocks.
    pub live_blocks: usize,
    /// The most `live_bytes` has been.
    pub peak_bytes: usize,
    /// Blocks allocated so far.
    pub total_allocs: usize,
    /// Blocks freed so far.
    pub total_frees: usize,
    /// Requests this heap refused or could not serve: over a budget (its own or an
    /// ancestor's), or refused by the inner allocator.
    pub failures: usize,
    /// The budget, if any: the most `live_bytes` may be.
    pub budget: Option<usize>,
}

/// A sum of lanes read while other threads free: a block allocated on one lane and
/// freed on another leaves the second "negative", and a sum that read the free but
/// not the allocation wraps below zero. No real total comes near `isize::MAX` (no
/// layout is larger), so such a sum is read as 0.
fn not_torn(sum: usize) -> usize {
    if sum > isize::MAX as usize { 0 } else { sum }
}

/// One lane of counters, on a cache line of its own.
#[repr(align(128))]
struct Lane {
    // Invariant: bytes allocated minus bytes freed through this lane, wrapping (a
    // block freed on another lane than it was allocated on leaves one lane "negative").
    live: AtomicUsize,
    allocs: AtomicUsize,
    frees: AtomicUsize,
    /// The other lanes' `live` as this lane's writers last read it.
    view: AtomicUsize,
    /// Bytes allocated through this lane since its writers last read the other lanes
    /// (what its view may be behind by, from this lane's side).
    grown: AtomicUsize,
}

/// A lane reads the other lanes afresh at least once in this many allocations.
const REFRESH: usize = 64;

/// The most a lane allocates between two reads of the other lanes.
const MAX_SLACK: usize = 64 << 10;

/// The bytes a lane may allocate between two reads of the other lanes under
/// `budget` (`usize::MAX`: none): a 256th of it, at most [`MAX_SLACK`]. With `n`
/// threads allocating at once, live bytes pass the budget by at most `n` times this.
pub(crate) const fn slack(budget: usize) -> usize {
    let s = budget >> 8;
    if s < MAX_SLACK { s } else { MAX_SLACK }
}

impl Lane {
    fn new() -> Self {
        Self {
            live: AtomicUsize::new(0),
            allocs: AtomicUsize::new(0),
            frees: AtomicUsize::new(0),
            view: AtomicUsize::new(0),
            grown: AtomicUsize::new(0),
        }
    }
}

/// The figures and budget of one heap; its children hold it too.
pub(crate) struct Account {
    pub(crate) name: &'static str,
    // Invariant: `usize::MAX` when there is no budget.
    budget: usize,
    /// `slack(budget)`.
    slack: usize,
    // Invariant: lane `i < OWNED` is written only by the thread that owns slot `i`,
    // with plain stores; lane `SHARED` by any thread, with read-modify-writes.
    lanes: [Lane; LANES],
    // Invariant: the bytes and blocks of the lanes that children charged (always
    // read-modify-write).
    nested_bytes: AtomicUsize,
    nested_blocks: AtomicUsize,
    // Invariant: `min(peak, budget)`.
    watermark: AtomicUsize,
    peak: AtomicUsize,
    failures: AtomicUsize,
    pub(crate) parent: Option<Arc<Account>>,
    /// False once the heap is dropped (its children may keep the account).
    pub(crate) alive: AtomicBool,
    /// The blocks dropped children left (still counted in the figures).
    pub(crate) orphans: Lock<Vec<Leak>>,
    /// Without `std`: whether a thread runs the heap's budget callback.
    #[cfg(not(feature = "std"))]
    pub(crate) in_callback: AtomicBool,
}

impl fmt::Debug for Account {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Account")
            .field("name", &self.name)
            .field("stats", &self.stats())
            .finish_non_exhaustive()
    }
}

impl Account {
    pub(crate) fn new(
        name: &'static str,
        budget: Option<usize>,
        parent: Option<Arc<Self>>,
    ) -> Self {
        let budget = budget.unwrap_or(usize::MAX);
        Self {
            name,
            budget,
            slack: slack(budget),
            lanes: core::array::from_fn(|_| Lane::new()),
            nested_bytes: AtomicUsize::new(0),
            nested_blocks: AtomicUsize::new(0),
            watermark: AtomicUsize::new(0),
            peak: AtomicUsize::new(0),
            failures: AtomicUsize::new(0),
            parent,
            alive: AtomicBool::new(true),
            orphans: Lock::new(Vec::new()),
            #[cfg(not(feature = "std"))]
            in_callback: AtomicBool::new(false),
        }
    }

    /// The lane this thread writes and its index.
    #[inline]
    fn lane(&self) -> (&Lane, usize) {
        let i = slot::current() % LANES;
        (&self.lanes[i], i)
    }

    /// Adds `bytes` (and `blocks`, 0 or 1) to `lane`; returns its live bytes, its
    /// allocation count and the bytes it has allocated since its last refresh, after.
    #[inline]
    fn add(lane: &Lane, mine: bool, bytes: usize, blocks: usize) -> (usize, usize, usize) {
        if mine {
            let live = lane.live.load(Ordering::Relaxed).wrapping_add(bytes);
            lane.live.store(live, Ordering::Relaxed);
            let n = lane.allocs.load(Ordering::Relaxed) + blocks;
            lane.allocs.store(n, Ordering::Relaxed);
            let grown = lane.grown.load(Ordering::Relaxed).saturating_add(bytes);
            lane.grown.store(grown, Ordering::Relaxed);
            (live, n, grown)
        } else {
            let live = lane
                .live
                .fetch_add(bytes, Ordering::Relaxed)
                .wrapping_add(bytes);
            let n = lane.allocs.fetch_add(blocks, Ordering::Relaxed) + blocks;
            let grown = lane
                .grown
                .fetch_add(bytes, Ordering::Relaxed)
                .saturating_add(bytes);
            (live, n, grown)
        }
    }

    /// Takes `bytes` (and `blocks` frees, 0 or 1) off this thread's lane.
    #[inline]
    fn sub(&self, bytes: usize, blocks: usize) {
        let (lane, i) = self.lane();
        if i != SHARED {
            let live = lane.live.load(Ordering::Relaxed);
            lane.live.store(live.wrapping_sub(bytes), Ordering::Relaxed);
            let n = lane.frees.load(Ordering::Relaxed);
            lane.frees.store(n + blocks, Ordering::Relaxed);
        } else {
            lane.live.fetch_sub(bytes, Ordering::Relaxed);
            lane.frees.fetch_add(blocks, Ordering::Relaxed);
        }
    }

    /// Undoes an `add` that the budget refused: bytes back, and the block uncounted.
    fn unadd(&self, bytes: usize, blocks: usize) {
        let (lane, i) = self.lane();
        if i != SHARED {
            let live = lane.live.load(Ordering::Relaxed);
            lane.live.store(live.wrapping_sub(bytes), Ordering::Relaxed);
            let n = lane.allocs.load(Ordering::Relaxed);
            lane.allocs.store(n - blocks, Ordering::Relaxed);
        } else {
            lane.live.fetch_sub(bytes, Ordering::Relaxed);
            lane.allocs.fetch_sub(blocks, Ordering::Relaxed);
        }
    }

    /// Charges `bytes` (and `blocks`) to this account and every ancestor; false (and
    /// nothing charged) when that passes a budget on the way.
    ///
    /// The live total is this lane's bytes plus its `view` of the other lanes, so the
    /// fast path reads no line another thread writes; the view is refreshed on the
    /// slow path: when the total passes the watermark, when the lane has allocated
    /// more than the slack since the last refresh, and every [`REFRESH`] allocations.
    #[inline]
    pub(crate) fn charge(&self, bytes: usize, blocks: usize) -> bool {
        let (lane, i) = self.lane();
        let (live, allocs, grown) = Self::add(lane, i != SHARED, bytes, blocks);
        let total = live.wrapping_add(lane.view.load(Ordering::Relaxed));
        if (total > self.watermark.load(Ordering::Relaxed)
            || grown > self.slack
            || allocs % REFRESH == 0)
            && !self.passed(lane, i, live)
        {
            self.unadd(bytes, blocks);
            return false;
        }
        match &self.parent {
            None => true,
            Some(parent) => self.charge_parent(parent, bytes, blocks),
        }
    }

    #[inline(never)]
    fn charge_parent(&self, parent: &Self, bytes: usize, blocks: usize) -> bool {
        if parent.charge(bytes, blocks) {
            parent.nested_bytes.fetch_add(bytes, Ordering::Relaxed);
            parent.nested_blocks.fetch_add(blocks, Ordering::Relaxed);
            true
        } else {
            self.unadd(bytes, blocks);
            false
        }
    }

    /// The slow path of a charge that took `lane` (index `i`) to `live` bytes and the
    /// live total, as the lane saw it, above the watermark (or a refresh after the
    /// slack or `REFRESH` allocations): reads the other lanes afresh; false when the
    /// total passes the budget (the lane stays due for a refresh), else the peak rises
    /// to it and the lane starts a new slack.
    #[cold]
    #[inline(never)]
    fn passed(&self, lane: &Lane, i: usize, live: usize) -> bool {
        // Orders this lane's stores before the reads below, against every other
        // lane's last refresh (which has the same fence): of two refreshes, the later
        // sees what the other lane had stored before the earlier one. So a lane's
        // stores that a refresh misses are those since its own last refresh: at most
        // the slack (the bound the module's docs give).
        fence(Ordering::SeqCst);
        let seen = self
            .lanes
            .iter()
            .enumerate()
            .filter(|&(j, _)| j != i)
            .fold(0usize, |sum, (_, l)| {
                sum.wrapping_add(l.live.load(Ordering::Relaxed))
            });
        lane.view.store(seen, Ordering::Relaxed);
        let total = not_torn(live.wrapping_add(seen));
        if total > self.budget {
            return false;
        }
        lane.grown.store(0, Ordering::Relaxed);
        self.raise_peak(total);
        true
    }

    /// Raises the peak (and the watermark with it) to `total` if it is below.
    fn raise_peak(&self, total: usize) {
        if total > self.peak.load(Ordering::Relaxed) {
            let peak = self.peak.fetch_max(total, Ordering::Relaxed).max(total);
            self.watermark
                .fetch_max(peak.min(self.budget), Ordering::Relaxed);
        }
    }

    /// Takes `bytes` (and `blocks` frees) off this account and every ancestor.
    #[inline]
    pub(crate) fn release(&self, bytes: usize, blocks: usize) {
        self.sub(bytes, blocks);
        if let Some(parent) = &self.parent {
            Self::release_parent(parent, bytes, blocks);
        }
    }

    #[inline(never)]
    fn release_parent(parent: &Self, bytes: usize, blocks: usize) {
        parent.release(bytes, blocks);
        parent.nested_bytes.fetch_sub(bytes, Ordering::Relaxed);
        parent.nested_blocks.fetch_sub(blocks, Ordering::Relaxed);
    }

    /// Takes back a charge that the inner allocator then refused (the block was never
    /// handed out): from this account and every ancestor.
    pub(crate) fn uncharge(&self, bytes: usize, blocks: usize) {
        self.unadd(bytes, blocks);
        if let Some(parent) = &self.parent {
            parent.uncharge(bytes, blocks);
            parent.nested_bytes.fetch_sub(bytes, Ordering::Relaxed);
            parent.nested_blocks.fetch_sub(blocks, Ordering::Relaxed);
        }
    }

    /// Counts a refused request.
    pub(crate) fn fail(&self) {
        self.failures.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn budget(&self) -> Option<usize> {
        (self.budget != usize::MAX).then_some(self.budget)
    }

    /// The slack of the budget: see [`slack`].
    pub(crate) fn slack(&self) -> usize {
        self.slack
    }

    /// The figures, summed over the lanes. A live total read here raises the peak,
    /// so that no later figure shows a peak below a live total seen.
    pub(crate) fn stats(&self) -> HeapStats {
        let sum = |f: fn(&Lane) -> &AtomicUsize| {
            self.lanes
                .iter()
                .fold(0usize, |s, l| s.wrapping_add(f(l).load(Ordering::Relaxed)))
        };
        let live_bytes = not_torn(sum(|l| &l.live));
        let total_allocs = sum(|l| &l.allocs);
        let total_frees = sum(|l| &l.frees);
        self.raise_peak(live_bytes);
        HeapStats {
            live_bytes,
            live_blocks: total_allocs.wrapping_sub(total_frees),
            peak_bytes: self.peak.load(Ordering::Relaxed).max(live_bytes),
            total_allocs,
            total_frees,
            failures: self.failures.load(Ordering::Relaxed),
            budget: self.budget(),
        }
    }

    /// The bytes and blocks live that this heap allocated itself, not its children.
    pub(crate) fn own_live(&self) -> (usize, usize) {
        let s = self.stats();
        (
            s.live_bytes
                .wrapping_sub(self.nested_bytes.load(Ordering::Relaxed)),
            s.live_blocks
                .wrapping_sub(self.nested_blocks.load(Ordering::Relaxed)),
        )
    }
}
