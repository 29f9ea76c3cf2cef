//! [`GuardPool`]: the slots, their records and the quarantine.

use core::alloc::Layout;
use core::cell::UnsafeCell;
use core::fmt;
use core::mem::size_of;
use core::ptr::{self, NonNull};
use core::sync::atomic::{AtomicPtr, AtomicU32, AtomicU64, Ordering};

use bento_align::Alignment;

use super::config::{
    GuardConfig, GuardCorruption, GuardFault, GuardStats, Label, MAX_SLOTS, POOL_BYTES, SLOT_BYTES,
    SLOT_PAGES,
};
use super::slot::{Slot, State};
use super::trace::Trace;
use super::{fault, report};
use crate::lock::RawSpinLock;
use crate::{PageError, PageSource, SystemPages};

/// The byte written between a block's end and its slot's end (the alignment's slack),
/// checked when it is freed.
const SLACK: u8 = 0xB7;

const _: () = assert!(size_of::<GuardPool>() <= POOL_BYTES && size_of::<Slot>() <= SLOT_BYTES);

/// The pool's counts, under its lock.
struct Counts {
    /// Slots `fresh..` have never been used.
    fresh: u32,
    /// The quarantine ring: `queued` freed slots from `head`.
    head: u32,
    queued: u32,
    live: u32,
    guarded: u64,
    refused: u64,
    committed: usize,
    peak: usize,
    os_calls: u64,
}

/// The pools made, newest first: the fault handler's list (pools are never freed).
static POOLS: AtomicPtr<GuardPool> = AtomicPtr::new(ptr::null_mut());

/// The fault handler's question: a fault at `addr` inside a pool's slots is
/// reported (and the program aborts); any other returns, for the handler before.
fn on_fault(addr: usize) {
    for pool in GuardPool::all() {
        if addr.wrapping_sub(pool.lo) < pool.len {
            pool.report_fault(addr);
        }
    }
}

/// A fixed pool of guarded slots in one reservation of the system's pages with
/// traps (`SystemPages::with_traps`): a table, then a slot of [`SLOT_PAGES`] pages
/// between inaccessible pages for each block a sampler picks. A pool lives for the
/// program (reports name its blocks after their free) and installs the fault
/// handler that reports on its slots (`SIGSEGV`, `SIGBUS`; a fault elsewhere goes
/// to the handler installed before it).
///
/// ```
/// # #[cfg(target_os = "linux")] {
/// use core::alloc::Layout;
/// use bento_pages::{GuardConfig, GuardPool, Label, Trace};
///
/// let pool = GuardPool::new(GuardConfig::DEFAULT.slots(4)).unwrap();
/// let layout = Layout::from_size_align(100, 4).unwrap();
/// let p = pool.alloc(layout, Label::default(), &Trace::here(None)).unwrap();
/// assert!(pool.owns(p.as_ptr()));
/// assert_eq!(pool.size_of(p), Some(100));
/// // The block ends where its slot does: one byte more would fault.
/// assert_eq!((p.as_ptr() as usize + 100) % 4096, 0);
/// // SAFETY: live in this pool, not used after.
/// assert_eq!(unsafe { pool.free(p, &Trace::here(None)) }, 100);
/// assert_eq!(pool.stats().quarantined, 1);
/// # }
/// ```
pub struct GuardPool {
    /// The reservation: the table (this pool first), then the slots.
    base: NonNull<u8>,
    /// The address of the first guard page and the bytes from it to the end.
    pub(super) lo: usize,
    pub(super) len: usize,
    pub(super) page: usize,
    reserved: usize,
    pub(super) slots: u32,
    every: u32,
    pub(super) name: &'static str,
    /// The slot records and the quarantine ring, in the table's pages.
    table: NonNull<Slot>,
    ring: NonNull<u32>,
    lock: RawSpinLock,
    // Invariant: read and written only under `lock`.
    counts: UnsafeCell<Counts>,
    countdown: AtomicU32,
    rng: AtomicU64,
    /// The pool made before this one.
    next: *const GuardPool,
}

// SAFETY: the counts and the table are reached only under the pool's lock; the rest
// is read-only after `new`.
unsafe impl Sync for GuardPool {}
// SAFETY: as above.
unsafe impl Send for GuardPool {}

impl fmt::Debug for GuardPool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GuardPool")
            .field("name", &self.name)
            .field("every", &self.every)
            .field("stats", &self.stats())
            .finish_non_exhaustive()
    }
}

/// Releases a pool's lock when dropped.
pub(super) struct Held<'a>(&'a RawSpinLock);

impl Drop for Held<'_> {
    fn drop(&mut self) {
        // SAFETY: made only by `GuardPool::hold`, which took the lock.
        unsafe { self.0.unlock() }
    }
}

impl GuardPool {
    /// Reserves a pool of `config`'s shape, commits its table and installs the fault
    /// handler (once for the program). The pool lives until the program ends.
    ///
    /// # Errors
    ///
    /// The [`PageError`] of a refused reservation or commit.
    pub fn new(config: GuardConfig) -> Result<&'static Self, PageError> {
        let config = config.every(config.every).slots(config.slots);
        let pages = SystemPages::with_traps();
        let page = pages.page_size();
        let table = config.table_bytes(page);
        let reserved = config.reserved_bytes(page);
        let align = Alignment::new(page).expect("the page size is a power of two");
        let base = pages.reserve(reserved, align)?;
        // SAFETY: the table's pages begin the reservation just made.
        if let Err(e) = unsafe { pages.commit(base, table) } {
            // SAFETY: the whole reservation, nothing of it in use.
            unsafe { pages.release(base, reserved) };
            return Err(e);
        }
        let slots = config.slots as usize;
        let pool = base.cast::<GuardPool>();
        // SAFETY: the table holds the pool, then `slots` records, then the ring
        // (`table_bytes`); a page-aligned base aligns all three.
        let (records, ring) = unsafe {
            let records = pool.add(1).cast::<Slot>();
            (records, records.add(slots).cast::<u32>())
        };
        for i in 0..slots {
            // SAFETY: record `i` lies in the committed table.
            unsafe { records.add(i).write(Slot::EMPTY) };
        }
        let lo = base.addr().get() + table;
        let seed = (lo as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        // SAFETY: the table's first bytes, committed, aligned for the pool.
        unsafe {
            pool.write(GuardPool {
                base,
                lo,
                len: reserved - table,
                page,
                reserved,
                slots: config.slots,
                every: config.every,
                name: config.name,
                table: records,
                ring,
                lock: RawSpinLock::new(),
                counts: UnsafeCell::new(Counts {
                    fresh: 0,
                    head: 0,
                    queued: 0,
                    live: 0,
                    guarded: 0,
                    refused: 0,
                    committed: table,
                    peak: table,
                    os_calls: 2,
                }),
                countdown: AtomicU32::new(0),
                rng: AtomicU64::new(seed),
                next: ptr::null(),
            });
        }
        // SAFETY: just written; it lives for the program (never released).
        let me: &'static Self = unsafe { pool.as_ref() };
        me.countdown.store(me.draw(), Ordering::Relaxed);
        let mut head = POOLS.load(Ordering::Acquire);
        loop {
            // SAFETY: not yet published: this thread alone writes the pool.
            unsafe { (*pool.as_ptr()).next = head };
            match POOLS.compare_exchange(head, pool.as_ptr(), Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => break,
                Err(now) => head = now,
            }
        }
        fault::install(on_fault);
        Ok(me)
    }

    /// The pools made, newest first.
    fn all() -> impl Iterator<Item = &'static GuardPool> {
        let mut at = POOLS.load(Ordering::Acquire).cast_const();
        core::iter::from_fn(move || {
            // SAFETY: a published pool lives for the program; `next` is written
            // before the pool is published (AcqRel/Acquire).
            let pool = unsafe { at.as_ref()? };
            at = pool.next;
            Some(pool)
        })
    }

    /// One allocation in [`every`](GuardConfig::every) on average: the next
    /// countdown, drawn uniformly from 1 to `2 * every - 1`.
    #[must_use]
    pub fn draw(&self) -> u32 {
        self.draw_for(self.every)
    }

    /// A countdown for a sampler of its own rate: drawn uniformly from 1 to
    /// `2 * every - 1` (`every` at least 1).
    #[must_use]
    pub fn draw_for(&self, every: u32) -> u32 {
        // xorshift64*; a lost update between threads only repeats a draw.
        let mut x = self.rng.load(Ordering::Relaxed);
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.rng.store(x, Ordering::Relaxed);
        let r = x.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 32;
        let span = u64::from(every.max(1)) * 2 - 1;
        (r % span) as u32 + 1
    }

    /// The pool's own sampler, for a caller without a countdown per thread: true
    /// for one call in [`every`](GuardConfig::every) on average.
    ///
    /// ```
    /// # #[cfg(target_os = "linux")] {
    /// use bento_pages::{GuardConfig, GuardPool};
    ///
    /// let pool = GuardPool::new(GuardConfig::DEFAULT.every(1).slots(1)).unwrap();
    /// assert!(pool.sample());
    /// # }
    /// ```
    pub fn sample(&self) -> bool {
        let left = self.countdown.fetch_sub(1, Ordering::Relaxed);
        if left > 1 {
            return false;
        }
        self.countdown.store(self.draw(), Ordering::Relaxed);
        true
    }

    /// The allocations per guarded one, on average.
    #[must_use]
    pub fn every(&self) -> u32 {
        self.every
    }

    /// The first address of the pool's slots and the bytes after it that it owns,
    /// for an allocator's own range check.
    #[must_use]
    pub fn range(&self) -> (usize, usize) {
        (self.lo, self.len)
    }

    /// Whether `ptr` lies in the pool's slots (a block of it, or a guard page).
    #[inline]
    #[must_use]
    pub fn owns(&self, ptr: *const u8) -> bool {
        ptr.addr().wrapping_sub(self.lo) < self.len
    }

    /// The stride from one slot to the next: its pages and a guard page.
    pub(super) fn stride(&self) -> usize {
        (SLOT_PAGES + 1) * self.page
    }

    /// The first address of slot `i`'s pages.
    fn slot_start(&self, i: u32) -> usize {
        self.lo + self.page + i as usize * self.stride()
    }

    /// Slot `i`'s record.
    ///
    /// # Safety
    ///
    /// The caller holds the lock, `i < slots`, and no other reference to the record
    /// lives.
    #[allow(clippy::mut_from_ref)]
    pub(super) unsafe fn record(&self, i: u32) -> &mut Slot {
        // SAFETY: the caller's contract; the records lie in the committed table.
        unsafe { &mut *self.table.as_ptr().add(i as usize) }
    }

    /// The counts.
    ///
    /// # Safety
    ///
    /// The caller holds the lock and no other reference to the counts lives.
    #[allow(clippy::mut_from_ref)]
    unsafe fn counts(&self) -> &mut Counts {
        // SAFETY: the caller's contract (the field's invariant).
        unsafe { &mut *self.counts.get() }
    }

    pub(super) fn hold(&self) -> Held<'_> {
        self.lock.lock();
        Held(&self.lock)
    }

    /// A pointer into the reservation at address `addr`.
    fn at(&self, addr: usize) -> NonNull<u8> {
        self.base.map_addr(|_| {
            core::num::NonZeroUsize::new(addr).expect("an address inside the reservation")
        })
    }

    /// A block for `layout` (a size of 1 byte to [`SLOT_PAGES`] pages, an alignment
    /// of at most a page) against the end of a slot (every other one against its
    /// start, so that underruns fault too), labelled for reports; `None`
    /// when the layout does not fit a slot, every slot is live, or the commit is
    /// refused. The caller's allocator frees it through [`free`](Self::free).
    pub fn alloc(&self, layout: Layout, label: Label, trace: &Trace) -> Option<NonNull<u8>> {
        let size = layout.size();
        let room = SLOT_PAGES * self.page;
        if size == 0 || size > room || layout.align() > self.page {
            return None;
        }
        let _held = self.hold();
        // SAFETY: under the lock.
        let counts = unsafe { self.counts() };
        let i = if counts.fresh < self.slots {
            counts.fresh += 1;
            counts.fresh - 1
        } else if counts.queued > 0 {
            // SAFETY: `head < slots`: a ring entry in the table.
            let i = unsafe { self.ring.add(counts.head as usize).read() };
            counts.head = (counts.head + 1) % self.slots;
            counts.queued -= 1;
            i
        } else {
            counts.refused += 1;
            return None;
        };
        // Every other block against the slot's end (an overrun faults at its first
        // byte past the block) or its start (an underrun faults at the byte before):
        // GWP-ASan's choice. The slack after either is checked at the free.
        let slot = self.slot_start(i);
        let start = if counts.guarded % 2 == 0 {
            (slot + room - size) & !(layout.align() - 1)
        } else {
            slot
        };
        let end = (start + size).next_multiple_of(self.page);
        let first = start & !(self.page - 1);
        // SAFETY: whole pages of slot `i`, inside the reservation, unused.
        let committed = unsafe { SystemPages::with_traps().commit(self.at(first), end - first) };
        counts.os_calls += 1;
        if committed.is_err() {
            if i + 1 == counts.fresh {
                counts.fresh -= 1;
            } else {
                self.requeue(counts, i);
            }
            counts.refused += 1;
            return None;
        }
        let p = self.at(start);
        // SAFETY: `[start + size, end)` lies in the pages just committed.
        unsafe { p.add(size).write_bytes(SLACK, end - start - size) };
        // SAFETY: under the lock, `i < slots`.
        let record = unsafe { self.record(i) };
        *record = Slot {
            state: State::Live,
            start,
            size,
            label,
            alloc: *trace,
            free: Trace::EMPTY,
        };
        counts.live += 1;
        counts.guarded += 1;
        counts.committed += end - first;
        counts.peak = counts.peak.max(counts.committed);
        Some(p)
    }

    /// Puts slot `i` back at the quarantine's tail.
    fn requeue(&self, counts: &mut Counts, i: u32) {
        let tail = (counts.head + counts.queued) % self.slots;
        // SAFETY: `tail < slots`: a ring entry in the table.
        unsafe { self.ring.add(tail as usize).write(i) };
        counts.queued += 1;
    }

    /// The size of the live block at `ptr`, or `None` when no live block of this
    /// pool starts there.
    #[must_use]
    pub fn size_of(&self, ptr: NonNull<u8>) -> Option<usize> {
        let i = self.slot_of(ptr.addr().get())?;
        let _held = self.hold();
        // SAFETY: under the lock, `i < slots`.
        let slot = unsafe { self.record(i) };
        (slot.state == State::Live && slot.start == ptr.addr().get()).then_some(slot.size)
    }

    /// The slot whose pages hold `addr`, if any (not a guard page).
    fn slot_of(&self, addr: usize) -> Option<u32> {
        let rel = addr.checked_sub(self.lo)?;
        let i = rel / self.stride();
        (rel < self.len && i < self.slots as usize && rel % self.stride() >= self.page)
            .then_some(i as u32)
    }

    /// Frees the block at `ptr`: its pages become inaccessible and its slot joins
    /// the quarantine. Returns its size. A pointer that is not a live block of the
    /// pool (a double free, a pointer into a block) or a block whose slack past its
    /// end was overwritten is reported, and the program aborts.
    ///
    /// # Safety
    ///
    /// `ptr` is owned by this pool ([`owns`](Self::owns)); when it is a live block,
    /// it is not used afterwards.
    pub unsafe fn free(&self, ptr: NonNull<u8>, trace: &Trace) -> usize {
        let addr = ptr.addr().get();
        let held = self.hold();
        let Some(i) = self.slot_of(addr) else {
            report::misuse(self.name, GuardFault::InvalidFree, addr, None, trace)
        };
        // SAFETY: under the lock, `i < slots`.
        let slot = unsafe { self.record(i) };
        if slot.state != State::Live || slot.start != addr {
            let kind = if slot.state == State::Freed && slot.start == addr {
                GuardFault::DoubleFree
            } else {
                GuardFault::InvalidFree
            };
            report::misuse(self.name, kind, addr, Some(slot), trace);
        }
        let end = (addr + slot.size).next_multiple_of(self.page);
        // SAFETY: `[start + size, end)` is the live block's committed slack.
        let slack = unsafe {
            core::slice::from_raw_parts(ptr.add(slot.size).as_ptr(), end - addr - slot.size)
        };
        if let Some(k) = slack.iter().position(|&b| b != SLACK) {
            report::misuse(
                self.name,
                GuardFault::OverrunAtFree,
                addr + slot.size + k,
                Some(slot),
                trace,
            );
        }
        let first = addr & !(self.page - 1);
        // SAFETY: the live block's pages, which the caller no longer uses; with traps
        // they become inaccessible.
        unsafe { SystemPages::with_traps().decommit(self.at(first), end - first) };
        slot.state = State::Freed;
        slot.free = *trace;
        let size = slot.size;
        // SAFETY: under the lock.
        let counts = unsafe { self.counts() };
        self.requeue(counts, i);
        counts.live -= 1;
        counts.committed -= end - first;
        counts.os_calls += if cfg!(any(target_os = "linux", target_os = "android")) {
            2
        } else {
            1
        };
        drop(held);
        size
    }

    /// Takes the pool's lock for a `fork`: a child forked while another thread held
    /// it would wait forever. Nothing else is taken under it, so any lock order
    /// holds. [`unlock_after_fork`](Self::unlock_after_fork) gives it back.
    pub fn lock_for_fork(&self) {
        self.lock.lock();
    }

    /// Gives back the lock [`lock_for_fork`](Self::lock_for_fork) took.
    ///
    /// # Safety
    ///
    /// This thread took it with `lock_for_fork`, or is a child's only thread forked
    /// while it was held.
    pub unsafe fn unlock_after_fork(&self) {
        // SAFETY: the caller's contract.
        unsafe { self.lock.unlock() }
    }

    /// Reports a fault at `addr` inside the pool's slots and aborts. It runs on the
    /// signal stack, a few KiB: it copies no slot record.
    fn report_fault(&self, addr: usize) -> ! {
        let pool = self;
        // Held until the abort: a thread that faults is outside the pool's code, so the
        // lock is free or about to be.
        core::mem::forget(pool.hold());
        let (kind, slot) = pool.classify(addr);
        // SAFETY: under the lock, `i < slots`; the only reference to the record.
        let slot = slot.map(|i| &*unsafe { pool.record(i) });
        report::fault(pool.name, kind, addr, slot)
    }

    /// What a fault at `addr` is, and about which slot. The caller holds the lock.
    fn classify(&self, addr: usize) -> (GuardFault, Option<u32>) {
        let pool = self;
        let rel = addr - pool.lo;
        let (i, within) = (rel / pool.stride(), rel % pool.stride());
        let slots = pool.slots as usize;
        // A slot's state, start and end.
        let read = |j: usize| {
            // SAFETY: under the lock; `j < slots`; the reference ends here.
            let s = unsafe { pool.record(j as u32) };
            (s.state, s.start, s.start + s.size)
        };
        if within >= pool.page && i < slots {
            let kind = match read(i) {
                (State::Empty, ..) => return (GuardFault::Wild, None),
                (State::Freed, ..) => GuardFault::UseAfterFree,
                (State::Live, start, _) if addr < start => GuardFault::Underrun,
                (State::Live, _, end) if addr >= end => GuardFault::Overrun,
                (State::Live, ..) => GuardFault::Wild,
            };
            return (kind, Some(i as u32));
        }
        // A guard page: past the end of the slot before it, or before the start of the
        // one after it, whichever block is nearer.
        let before = (i > 0).then(|| read(i - 1)).filter(|s| s.0 != State::Empty);
        let after = (i < slots).then(|| read(i)).filter(|s| s.0 != State::Empty);
        let (j, state, live) = match (before, after) {
            (Some(b), Some(a)) if addr - b.2 <= a.1 - addr => (i - 1, b.0, GuardFault::Overrun),
            (Some(b), None) => (i - 1, b.0, GuardFault::Overrun),
            (_, Some(a)) => (i, a.0, GuardFault::Underrun),
            (None, None) => return (GuardFault::Wild, None),
        };
        let kind = if state == State::Freed {
            GuardFault::UseAfterFree
        } else {
            live
        };
        (kind, Some(j as u32))
    }

    /// Frees every live block whose label names `owner` (an allocator that frees its
    /// blocks wholesale, as a heap over a frame arena does at the frame's end); the
    /// number freed.
    ///
    /// # Safety
    ///
    /// No block of `owner` is used afterwards.
    ///
    /// ```
    /// # #[cfg(target_os = "linux")] {
    /// use core::alloc::Layout;
    /// use bento_pages::{GuardConfig, GuardPool, Label, Trace};
    ///
    /// let pool = GuardPool::new(GuardConfig::DEFAULT.slots(4)).unwrap();
    /// let mine = Label { owner: 7, ..Label::default() };
    /// for _ in 0..3 {
    ///     pool.alloc(Layout::new::<u64>(), mine, &Trace::EMPTY).unwrap();
    /// }
    /// // SAFETY: owner 7's blocks are not used again.
    /// assert_eq!(unsafe { pool.free_owned(7, &Trace::EMPTY) }, 3);
    /// assert_eq!(pool.stats().live, 0);
    /// # }
    /// ```
    pub unsafe fn free_owned(&self, owner: usize, trace: &Trace) -> usize {
        let mut freed = 0;
        for i in 0..self.slots {
            let start = {
                let _held = self.hold();
                // SAFETY: under the lock, `i < slots`.
                let slot = unsafe { self.record(i) };
                (slot.state == State::Live && slot.label.owner == owner).then_some(slot.start)
            };
            if let Some(start) = start {
                // SAFETY: a live block of this pool that the caller gives up.
                unsafe { self.free(self.at(start), trace) };
                freed += 1;
            }
        }
        freed
    }

    /// Recomputes the pool's figures from its slot records and checks them against
    /// its counts: every live block inside its slot, the quarantine exactly the freed
    /// slots (once each), the committed bytes the table's and the live blocks' pages.
    ///
    /// # Errors
    ///
    /// The first [`GuardCorruption`] found.
    ///
    /// ```
    /// # #[cfg(target_os = "linux")] {
    /// use core::alloc::Layout;
    /// use bento_pages::{GuardConfig, GuardPool, Label, Trace};
    ///
    /// let pool = GuardPool::new(GuardConfig::DEFAULT.slots(2)).unwrap();
    /// let p = pool.alloc(Layout::new::<u64>(), Label::default(), &Trace::EMPTY).unwrap();
    /// assert_eq!(pool.validate().unwrap().live, 1);
    /// // SAFETY: live, not used after.
    /// unsafe { pool.free(p, &Trace::EMPTY) };
    /// assert_eq!(pool.validate().unwrap().quarantined, 1);
    /// # }
    /// ```
    pub fn validate(&self) -> Result<GuardStats, GuardCorruption> {
        let held = self.hold();
        // SAFETY: under the lock.
        let counts = unsafe { self.counts() };
        let room = SLOT_PAGES * self.page;
        let (mut live, mut freed) = (0u32, 0u32);
        let mut committed = self.reserved - self.len;
        for i in 0..self.slots {
            // SAFETY: under the lock, `i < slots`; the reference ends in this turn.
            let slot = unsafe { self.record(i) };
            let start = self.slot_start(i);
            let inside = slot.start >= start && slot.start + slot.size <= start + room;
            match slot.state {
                State::Empty => {}
                _ if i >= counts.fresh || !inside || slot.size == 0 => {
                    return Err(GuardCorruption::Block { slot: i });
                }
                State::Live => {
                    live += 1;
                    committed += (slot.start + slot.size).next_multiple_of(self.page)
                        - (slot.start & !(self.page - 1));
                }
                State::Freed => freed += 1,
            }
        }
        if (live, freed) != (counts.live, counts.queued) {
            return Err(GuardCorruption::Count {
                live,
                freed,
                counted_live: counts.live,
                counted_freed: counts.queued,
            });
        }
        // A bit a slot: each freed slot in the quarantine once.
        let mut seen = [0u64; MAX_SLOTS as usize / 64];
        for k in 0..counts.queued {
            // SAFETY: `(head + k) % slots < slots`: a ring entry in the table.
            let i = unsafe {
                self.ring
                    .add(((counts.head + k) % self.slots) as usize)
                    .read()
            };
            // SAFETY: under the lock; `i` is checked first.
            let state = (i < self.slots).then(|| unsafe { self.record(i) }.state);
            let (word, bit) = (i as usize / 64, 1u64 << (i % 64));
            if state != Some(State::Freed) || seen[word] & bit != 0 {
                return Err(GuardCorruption::Quarantine { slot: i });
            }
            seen[word] |= bit;
        }
        if committed != counts.committed {
            return Err(GuardCorruption::Committed {
                counted: counts.committed,
                found: committed,
            });
        }
        drop(held);
        Ok(self.stats())
    }

    /// The pool's figures.
    #[must_use]
    pub fn stats(&self) -> GuardStats {
        let _held = self.hold();
        // SAFETY: under the lock.
        let counts = unsafe { self.counts() };
        GuardStats {
            slots: self.slots,
            live: counts.live,
            quarantined: counts.queued,
            guarded: counts.guarded,
            refused: counts.refused,
            reserved_bytes: self.reserved,
            committed_bytes: counts.committed,
            peak_committed_bytes: counts.peak,
            os_calls: counts.os_calls,
        }
    }
}
