//! A heap's stats and budget: the [`Account`] every heap keeps (shared with its
//! children, which charge it too), and [`HeapStats`].
//!
//! The hot path touches one lane of counters, each on its own cache line: the lane of
//! the thread's slot (see `slot`), which only that thread writes, with plain loads and
//! stores of atomics, or the shared lane, with `fetch_add`. Threads therefore pay no
//! atomic read-modify-write and never write the same cache line (up to 16 threads
//! at once; more share a lane).
//!
//! Each lane holds a *credit*: the bytes it may grant without looking at the other
//! lanes. A refresh (the slow path) reads the other lanes into the lane's *view*,
//! refuses the allocation if the live total passes the budget, and otherwise sets
//! the credit to the account's *slack* ([`slack`]: a 256th of the budget, at most
//! 64 KiB) or to the room left under the budget, if less (none after a refusal).
//! The fast path takes an allocation's bytes from the credit (frees give none back)
//! and raises the lane's *top*, its own highest bytes since the refresh; the live
//! total it sees is those plus its view, and the peak is the highest of each lane's
//! `view + top` and of the totals its refreshes settled (its *high*).
//!
//! A refresh begins with a sequentially consistent fence, so of two refreshes the
//! later sees what the other's lane stored before the earlier. Every allocation that
//! the fast path grants comes after the latest refresh of some lane, which saw a
//! total within the budget, and each lane has allocated at most its credit, the
//! slack, since its own: so live bytes pass the budget by at most the slack per
//! thread allocating at once. A lane's `view + top` is its refresh's total plus at
//! most what it allocated since, so the peak misses a maximum, or passes one, by at
//! most as much. One thread alone is exact: its view of idle lanes is never stale. The
//! shared lane (threads past the 15 slots) spends one credit for all its threads,
//! which may each leave it below zero by one allocation before one of them starts it
//! afresh; it refreshes on every new high too, so its highs are exact totals.

use alloc::sync::Arc;
use alloc::vec::Vec;
use core::fmt;

use crate::slot::{self, LANE_BYTES, LANES, SHARED};
use crate::sync::Lock;

use crate::sync::{AtomicBool, AtomicUsize, Ordering, fence};
use crate::track::Leak;

/// A heap's stats, from [`Heap::stats`](crate::Heap::stats). A heap with children
/// counts their blocks too: its stats are its whole subtree's.
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
    /// The bytes this lane may still grant before it reads the other lanes afresh:
    /// at each refresh the slack, or the room left under the budget if less; each
    /// allocation takes its bytes (frees give none back). On the shared lane,
    /// concurrent takers may leave it "negative" (read as `isize`).
    credit: AtomicUsize,
    /// The highest live total this lane granted up to its last refresh. At most
    /// `isize::MAX`.
    high: AtomicUsize,
    /// The highest `live` since the last refresh (read as `isize`), so that the lane's
    /// highest total since is `view + top`; `isize::MIN` on the shared lane, whose
    /// refreshes raise `high` itself. A refresh stores `high`, then `top` and `view`
    /// (`Release`, as every store of `top`): see [`Account::lanes_peak`].
    top: AtomicUsize,
}

/// The most a lane allocates between two reads of the other lanes.
const MAX_SLACK: usize = 64 << 10;

/// The bytes a lane may allocate between two reads of the other lanes under
/// `budget` (`usize::MAX`: none): a 256th of it, at most [`MAX_SLACK`]. With `n`
/// threads allocating at once, live bytes pass the budget by at most `n` times this.
pub(crate) const fn slack(budget: usize) -> usize {
    let s = budget >> 8;
    if s < MAX_SLACK { s } else { MAX_SLACK }
}

const _: () = assert!(size_of::<Lane>() == LANE_BYTES);

impl Lane {
    fn new(shared: bool) -> Self {
        Self {
            live: AtomicUsize::new(0),
            allocs: AtomicUsize::new(0),
            frees: AtomicUsize::new(0),
            view: AtomicUsize::new(0),
            credit: AtomicUsize::new(0),
            high: AtomicUsize::new(0),
            top: AtomicUsize::new(if shared { isize::MIN as usize } else { 0 }),
        }
    }
}

/// The stats and budget of one heap; its children hold it too.
pub(crate) struct Account {
    pub(crate) name: &'static str,
    // Invariant: `usize::MAX` when there is no budget.
    budget: usize,
    /// What a live total is compared with: `min(budget, isize::MAX)`, so that a sum
    /// torn below zero (see [`not_torn`]) is never granted on the fast path.
    limit: usize,
    /// `slack(budget)`.
    slack: usize,
    // Invariant: lane `i < OWNED` is written only by the thread that owns slot `i`,
    // with plain stores; lane `SHARED` by any thread, with read-modify-writes.
    lanes: [Lane; LANES],
    // Invariant: the bytes and blocks of the lanes that children charged (always
    // read-modify-write).
    nested_bytes: AtomicUsize,
    nested_blocks: AtomicUsize,
    /// The highest live total [`stats`](Self::stats) has read (the lanes keep the
    /// ones they granted).
    peak: AtomicUsize,
    failures: AtomicUsize,
    pub(crate) parent: Option<Arc<Account>>,
    /// False once the heap is dropped (its children may keep the account).
    pub(crate) alive: AtomicBool,
    /// The blocks dropped children left (still counted in the stats).
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
            limit: budget.min(isize::MAX as usize),
            slack: slack(budget),
            lanes: core::array::from_fn(|i| Lane::new(i == SHARED)),
            nested_bytes: AtomicUsize::new(0),
            nested_blocks: AtomicUsize::new(0),
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
    /// fast path reads no line another thread writes and writes only its own; the
    /// view is refreshed on the slow path, when the lane has spent its credit.
    #[inline]
    pub(crate) fn charge(&self, bytes: usize, blocks: usize) -> bool {
        let (lane, i) = self.lane();
        let charged = if i == SHARED {
            self.charge_shared(lane, bytes, blocks)
        } else {
            let credit = lane.credit.load(Ordering::Relaxed);
            if bytes <= credit {
                lane.credit.store(credit - bytes, Ordering::Relaxed);
                Self::grant(lane, bytes, blocks);
                true
            } else {
                let live = lane.live.load(Ordering::Relaxed).wrapping_add(bytes);
                lane.live.store(live, Ordering::Relaxed);
                let n = lane.allocs.load(Ordering::Relaxed);
                lane.allocs.store(n + blocks, Ordering::Relaxed);
                self.passed(lane, i, live, bytes)
            }
        };
        if !charged {
            self.unadd(bytes, blocks);
            return false;
        }
        match &self.parent {
            None => true,
            Some(parent) => self.charge_parent(parent, bytes, blocks),
        }
    }

    /// The lane of this thread's slot, if it owns one and its lane's offset is below
    /// `fast_below` (at most `SHARED * LANE_BYTES`).
    #[inline(always)]
    fn fast_lane(&self, fast_below: usize) -> Option<&Lane> {
        debug_assert!(fast_below <= SHARED * LANE_BYTES);
        let offset = slot::fast();
        if offset >= fast_below {
            return None;
        }
        // SAFETY: `offset` is a multiple of `LANE_BYTES` (the size of a `Lane`, as
        // asserted beside `Lane`) below `fast_below <= SHARED * LANE_BYTES`: the
        // offset of lane `offset / LANE_BYTES < SHARED < LANES` in the array.
        Some(unsafe { &*self.lanes.as_ptr().byte_add(offset) })
    }

    /// [`charge`](Self::charge) of one block of `bytes` to an account without a
    /// parent, when the thread owns a lane below `fast_below` (see `fast_lane`)
    /// and the charge needs no refresh: true when done; false, with nothing charged,
    /// when it takes [`charge`](Self::charge).
    #[inline]
    pub(crate) fn charge_fast(&self, bytes: usize, fast_below: usize) -> bool {
        let Some(lane) = self.fast_lane(fast_below) else {
            return false;
        };
        let credit = lane.credit.load(Ordering::Relaxed);
        if bytes > credit {
            return false;
        }
        lane.credit.store(credit - bytes, Ordering::Relaxed);
        Self::grant(lane, bytes, 1);
        true
    }

    /// Adds a granted charge of `bytes` and `blocks` to `lane`, which this thread
    /// owns, and raises the lane's top to its live bytes.
    #[inline]
    fn grant(lane: &Lane, bytes: usize, blocks: usize) {
        let live = lane.live.load(Ordering::Relaxed).wrapping_add(bytes);
        lane.live.store(live, Ordering::Relaxed);
        let n = lane.allocs.load(Ordering::Relaxed);
        lane.allocs.store(n + blocks, Ordering::Relaxed);
        // `Release` (a plain store on x86-64): a reader that sees this top sees the
        // `high` the lane's last refresh settled.
        if live as isize > lane.top.load(Ordering::Relaxed) as isize {
            lane.top.store(live, Ordering::Release);
        }
    }

    /// [`charge`](Self::charge) on the shared lane, with read-modify-writes: true
    /// when the budget allows it (the bytes and block are added either way).
    #[inline(never)]
    fn charge_shared(&self, lane: &Lane, bytes: usize, blocks: usize) -> bool {
        let live = lane
            .live
            .fetch_add(bytes, Ordering::Relaxed)
            .wrapping_add(bytes);
        lane.allocs.fetch_add(blocks, Ordering::Relaxed);
        // Takers may each leave the credit below zero by at most the slack, so it
        // never wraps round to a positive reading.
        if bytes <= self.slack {
            let credit = lane.credit.fetch_sub(bytes, Ordering::Relaxed) as isize;
            let total = live.wrapping_add(lane.view.load(Ordering::Relaxed));
            if credit >= bytes as isize
                && total as isize <= lane.high.load(Ordering::Relaxed) as isize
            {
                return true;
            }
        }
        self.passed(lane, SHARED, live, bytes)
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

    /// The slow path of a charge that took `lane` (index `i`) to `live` bytes past the
    /// lane's credit (or, on the shared lane, above the lane's high): reads the other
    /// lanes afresh; false when the total passes the budget (the lane stays due for a
    /// refresh), else the lane's high rises to it and its credit starts afresh.
    #[cold]
    #[inline(never)]
    fn passed(&self, lane: &Lane, i: usize, live: usize, bytes: usize) -> bool {
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
        let total = not_torn(live.wrapping_add(seen));
        if i == SHARED {
            lane.view.store(seen, Ordering::Relaxed);
            if total > self.limit {
                return false;
            }
            lane.high.fetch_max(total, Ordering::Relaxed);
        } else {
            // The period ending settles into `high`; the new one starts at `live`
            // (before this charge if it is refused), under the new view.
            let old = lane.view.load(Ordering::Relaxed);
            let top = lane.top.load(Ordering::Relaxed);
            let mut high = not_torn(old.wrapping_add(top)).max(lane.high.load(Ordering::Relaxed));
            let granted = total <= self.limit;
            let start = if granted {
                live
            } else {
                live.wrapping_sub(bytes)
            };
            if granted {
                high = high.max(total);
            }
            lane.high.store(high, Ordering::Relaxed);
            lane.top.store(start, Ordering::Release);
            lane.view.store(seen, Ordering::Release);
            if !granted {
                // The credit left was granted against the old view: the next charge
                // reads the lanes again.
                lane.credit.store(0, Ordering::Relaxed);
                return false;
            }
        }
        lane.credit
            .store(self.slack.min(self.limit - total), Ordering::Relaxed);
        true
    }

    /// Takes `bytes` (and `blocks` frees) off this account and every ancestor.
    #[inline]
    pub(crate) fn release(&self, bytes: usize, blocks: usize) {
        let (lane, i) = self.lane();
        if i == SHARED {
            Self::release_shared(lane, bytes, blocks);
        } else {
            let live = lane.live.load(Ordering::Relaxed);
            lane.live.store(live.wrapping_sub(bytes), Ordering::Relaxed);
            let n = lane.frees.load(Ordering::Relaxed);
            lane.frees.store(n + blocks, Ordering::Relaxed);
        }
        if let Some(parent) = &self.parent {
            Self::release_parent(parent, bytes, blocks);
        }
    }

    /// [`release`](Self::release) of one block of `bytes` from an account without a
    /// parent, when the thread owns a lane below `fast_below` (see `fast_lane`):
    /// true when done; false, with nothing released, when it takes
    /// [`release`](Self::release).
    #[inline]
    pub(crate) fn release_fast(&self, bytes: usize, fast_below: usize) -> bool {
        let Some(lane) = self.fast_lane(fast_below) else {
            return false;
        };
        let live = lane.live.load(Ordering::Relaxed);
        lane.live.store(live.wrapping_sub(bytes), Ordering::Relaxed);
        let n = lane.frees.load(Ordering::Relaxed);
        lane.frees.store(n + 1, Ordering::Relaxed);
        true
    }

    /// [`release`](Self::release) on the shared lane, with read-modify-writes.
    #[inline(never)]
    fn release_shared(lane: &Lane, bytes: usize, blocks: usize) {
        lane.live.fetch_sub(bytes, Ordering::Relaxed);
        lane.frees.fetch_add(blocks, Ordering::Relaxed);
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

    /// The highest live total the lanes granted: each lane's settled `high` or its
    /// `view + top` since. The view is read first (`Acquire`, against the refresh's
    /// `Release`), so a new view never meets an old top; the top is read with
    /// `Acquire`, so a top of the new period brings the `high` its refresh settled.
    pub(crate) fn lanes_peak(&self) -> usize {
        self.lanes.iter().fold(0, |most, l| {
            let view = l.view.load(Ordering::Acquire);
            let top = l.top.load(Ordering::Acquire);
            let high = l.high.load(Ordering::Relaxed);
            most.max(high).max(not_torn(view.wrapping_add(top)))
        })
    }

    /// The stats, summed over the lanes. The peak read here (the highest of the
    /// live total read and [`lanes_peak`](Self::lanes_peak)) raises the account's,
    /// so that no later stat shows a lower one.
    pub(crate) fn stats(&self) -> HeapStats {
        let sum = |f: fn(&Lane) -> &AtomicUsize| {
            self.lanes
                .iter()
                .fold(0usize, |s, l| s.wrapping_add(f(l).load(Ordering::Relaxed)))
        };
        let live_bytes = not_torn(sum(|l| &l.live));
        let total_allocs = sum(|l| &l.allocs);
        let total_frees = sum(|l| &l.frees);
        let seen = live_bytes.max(self.lanes_peak());
        let peak = self.peak.fetch_max(seen, Ordering::Relaxed).max(seen);
        HeapStats {
            live_bytes,
            live_blocks: total_allocs.wrapping_sub(total_frees),
            peak_bytes: peak,
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
