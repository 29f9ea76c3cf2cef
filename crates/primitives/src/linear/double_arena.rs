//! The double-ended stack over one reservation, committing pages from both sides.

use crate::linear::corruption::LinearCorruption;

use core::cell::Cell;
use core::fmt;

use bento_align::{align_down, align_up};
use bento_pages::{PageError, PageSource};

use crate::linear::arena::{ArenaConfig, MIN_GRANULE};
use crate::linear::double::{Backing, EndMut, Ends, StackEnd, split};
use crate::linear::lifo::markers::{Marker, MarkerError};
use crate::linear::lifo::validate::StackReport;
use crate::linear::lifo::{ADDR_CEILING, Dir, MAX_SPAN};

/// A [`DoubleStack`](crate::DoubleStack) over a reservation of address space: the
/// lower end commits pages upwards from the start, the upper end downwards from the
/// end, each only as it is used, `commit_step` bytes at a time; a commit failure is
/// [`AllocError`](crate::AllocError) and changes nothing.
///
/// ```text
///  base                                                                    end
///   | lower blocks | committed |    reserved, not committed    | committed | upper |
///                  ^ lo_commit                               hi_commit ^
/// ```
///
/// The reservation is at most 4 GiB (offsets are 32-bit). Both ends are LIFO stacks
/// with checked markers, exactly as in `DoubleStack`.
///
/// ```
/// use bento_pages::HeapPages;
/// use bento_primitives::{ArenaConfig, DoubleArena};
/// use core::alloc::Layout;
///
/// let config = ArenaConfig { reserve: 1 << 20, commit_step: 4096, ..ArenaConfig::default() };
/// let mut arena = DoubleArena::with_source(HeapPages::new(), config).unwrap();
/// let (level, mut frame) = arena.split();
/// let mesh = allocator_api2::boxed::Box::new_in([1.0f32; 256], &level);
/// let m = frame.marker();
/// frame.alloc_layout(Layout::new::<[u8; 10_000]>()).unwrap();
/// frame.rollback(m).unwrap();
/// assert_eq!(mesh[255], 1.0);
/// drop(mesh);
/// assert_eq!(arena.committed(), 4096 + 12288);
/// ```
pub struct DoubleArena<P: PageSource> {
    ends: Ends,
    // Invariant: `[0, lo_commit)` and `[hi_commit, cap)` are committed (page
    // boundaries, `lo_commit <= hi_commit`) and nothing else is.
    lo_commit: Cell<u32>,
    hi_commit: Cell<u32>,
    reserved: usize,
    config: ArenaConfig,
    source: P,
}

impl<P: PageSource> DoubleArena<P> {
    /// A double-ended arena taking its memory from `source`, set up by `config` (the
    /// reservation is capped at 4 GiB less a page).
    ///
    /// # Errors
    ///
    /// [`PageError`] when the source cannot reserve the memory, or `config.reserve`
    /// is 0.
    ///
    /// ```
    /// use bento_pages::SystemPages;
    /// use bento_primitives::{ArenaConfig, DoubleArena};
    ///
    /// let config = ArenaConfig { reserve: 16 << 20, ..ArenaConfig::default() };
    /// let arena = DoubleArena::with_source(SystemPages::new(), config).unwrap();
    /// assert_eq!((arena.reserved(), arena.committed()), (16 << 20, 0));
    /// ```
    pub fn with_source(source: P, config: ArenaConfig) -> Result<Self, PageError> {
        let page = source.page_alignment();
        // Headers and tops are 8-aligned (see `Arena::with_source`).
        let grain = page.max_with(MIN_GRANULE);
        let most = align_down(MAX_SPAN, grain);
        let reserved = align_up(config.reserve.min(most), grain).unwrap_or(most);
        let base = source.reserve(reserved, grain)?;
        // The ends' fast path adds to a top unchecked: the memory they use ends
        // below `ADDR_CEILING` (never binding in practice, but it is what makes those
        // sums safe).
        let room = ADDR_CEILING.saturating_sub(base.addr().get());
        let cap = reserved.min(align_down(room, grain)) as u32;
        // Not eager: nothing is committed yet, so the lower end keeps no waiting header
        // at its origin (its first block takes the slow path, which commits).
        // SAFETY: the reservation is the arena's own for as long as the ends live,
        // aligned to at least 16; `cap` is a multiple of the grain, at most `MAX_SPAN`,
        // and ends below `ADDR_CEILING` (clamped above); nothing is ready yet.
        let ends = unsafe { Ends::new(base, cap, 0, cap, false) };
        Ok(Self {
            ends,
            lo_commit: Cell::new(0),
            hi_commit: Cell::new(cap),
            reserved,
            config: config.fitted(reserved, page),
            source,
        })
    }

    /// The lower end, growing up from the start of the reservation.
    ///
    /// ```
    /// use bento_pages::HeapPages;
    /// use bento_primitives::{ArenaConfig, DoubleArena};
    ///
    /// let arena = DoubleArena::with_source(HeapPages::new(), ArenaConfig::default()).unwrap();
    /// let mut v = allocator_api2::vec::Vec::new_in(arena.lower());
    /// v.extend_from_slice(&[1u8, 2, 3]);
    /// assert_eq!(v.len(), 3);
    /// ```
    #[must_use]
    pub fn lower(&self) -> StackEnd<'_> {
        StackEnd::new(&self.ends, self, Dir::Up)
    }

    /// The upper end, growing down from the end of the reservation.
    ///
    /// ```
    /// use bento_pages::HeapPages;
    /// use bento_primitives::{ArenaConfig, DoubleArena};
    ///
    /// let arena = DoubleArena::with_source(HeapPages::new(), ArenaConfig::default()).unwrap();
    /// let b = allocator_api2::boxed::Box::new_in(9u16, arena.upper());
    /// assert_eq!(*b, 9);
    /// ```
    #[must_use]
    pub fn upper(&self) -> StackEnd<'_> {
        StackEnd::new(&self.ends, self, Dir::Down)
    }

    /// Both ends, each held exclusively (see [`EndMut`]).
    ///
    /// ```
    /// use bento_pages::HeapPages;
    /// use bento_primitives::{ArenaConfig, DoubleArena};
    ///
    /// let mut arena = DoubleArena::with_source(HeapPages::new(), ArenaConfig::default()).unwrap();
    /// let (lower, mut upper) = arena.split();
    /// let keep = allocator_api2::boxed::Box::new_in(1u8, &lower);
    /// upper.reset();
    /// assert_eq!(*keep, 1);
    /// ```
    pub fn split(&mut self) -> (EndMut<'_>, EndMut<'_>) {
        split(&self.ends, self)
    }

    /// Frees every block allocated at the marker's end after it was taken.
    ///
    /// # Errors
    ///
    /// [`MarkerError`] when the marker belongs to neither end, lies above its end's
    /// top, or was invalidated; nothing changes then.
    ///
    /// ```
    /// use bento_pages::HeapPages;
    /// use bento_primitives::{ArenaConfig, DoubleArena};
    ///
    /// let mut arena = DoubleArena::with_source(HeapPages::new(), ArenaConfig::default()).unwrap();
    /// let m = arena.upper().marker();
    /// arena.upper().alloc_layout(core::alloc::Layout::new::<u64>()).unwrap();
    /// arena.rollback(m).unwrap();
    /// assert_eq!(arena.upper().used(), 0);
    /// ```
    pub fn rollback(&mut self, marker: Marker) -> Result<(), MarkerError> {
        self.ends.rollback(marker)
    }

    /// Frees both ends, invalidating every marker, in O(1); the pages stay committed
    /// unless `trap_on_reset` is set (then see
    /// [`reset_and_decommit`](Self::reset_and_decommit)).
    ///
    /// ```
    /// use bento_pages::HeapPages;
    /// use bento_primitives::{ArenaConfig, DoubleArena};
    ///
    /// let mut arena = DoubleArena::with_source(HeapPages::new(), ArenaConfig::default()).unwrap();
    /// arena.lower().alloc_layout(core::alloc::Layout::new::<u64>()).unwrap();
    /// arena.reset();
    /// assert_eq!(arena.free_between(), arena.reserved());
    /// ```
    pub fn reset(&mut self) {
        self.ends.end(Dir::Up).reset();
        self.ends.end(Dir::Down).reset();
        if self.config.trap_on_reset {
            self.decommit_beyond_retained();
        }
    }

    /// Frees both ends and gives back every committed page beyond `retain_on_reset`
    /// bytes at each side.
    ///
    /// ```
    /// use bento_pages::HeapPages;
    /// use bento_primitives::{ArenaConfig, DoubleArena};
    ///
    /// let config = ArenaConfig { commit_step: 4096, ..ArenaConfig::default() };
    /// let mut arena = DoubleArena::with_source(HeapPages::new(), config).unwrap();
    /// arena.upper().alloc_layout(core::alloc::Layout::new::<[u8; 100_000]>()).unwrap();
    /// arena.reset_and_decommit();
    /// assert_eq!(arena.committed(), 0);
    /// ```
    pub fn reset_and_decommit(&mut self) {
        self.ends.end(Dir::Up).reset();
        self.ends.end(Dir::Down).reset();
        self.decommit_beyond_retained();
    }

    /// Decommits the committed pages beyond `retain_on_reset` bytes from each side;
    /// both ends must be empty.
    fn decommit_beyond_retained(&self) {
        let cap = self.ends.cap();
        // On a page boundary even when half the reservation is not.
        let page = self.source.page_alignment();
        let retain = align_down(self.config.retain_on_reset.min(cap as usize / 2), page) as u32;
        let (lo, hi) = (self.lo_commit.get(), self.hi_commit.get());
        if lo > retain {
            self.decommit(retain, lo);
            self.lo_commit.set(retain);
        }
        if hi < cap - retain {
            self.decommit(hi, cap - retain);
            self.hi_commit.set(cap - retain);
        }
        self.publish();
    }

    /// Decommits `[from, to)`.
    fn decommit(&self, from: u32, to: u32) {
        // SAFETY: `[from, to)` lies in the committed part of the reservation, on page
        // boundaries (`retain` and the commit bounds are multiples of the page), and
        // is free: both ends are empty.
        unsafe {
            self.source
                .decommit(self.ends.base().add(from as usize), (to - from) as usize);
        }
    }

    /// Tells the ends how far each side is usable: everything, once the committed
    /// parts meet.
    fn publish(&self) {
        let (lo, hi) = (self.lo_commit.get(), self.hi_commit.get());
        if lo == hi {
            self.ends.set_ready(self.ends.cap(), 0);
        } else {
            self.ends.set_ready(lo, hi);
        }
    }

    /// Commits `[from, to)`, `from < to`, page boundaries in the uncommitted middle.
    fn commit(&self, from: u32, to: u32) -> bool {
        // SAFETY: `[from, to)` lies between the committed parts, on page boundaries, a
        // non-zero multiple of pages, inside the reservation.
        unsafe {
            self.source
                .commit(self.ends.base().add(from as usize), (to - from) as usize)
                .is_ok()
        }
    }

    /// Bytes between the two tops.
    ///
    /// ```
    /// use bento_pages::HeapPages;
    /// use bento_primitives::{ArenaConfig, DoubleArena};
    ///
    /// let arena = DoubleArena::with_source(HeapPages::new(), ArenaConfig::default()).unwrap();
    /// assert_eq!(arena.free_between(), arena.reserved());
    /// ```
    #[must_use]
    pub fn free_between(&self) -> usize {
        self.ends.free_between()
    }

    /// Bytes committed at both sides.
    ///
    /// ```
    /// use bento_pages::HeapPages;
    /// use bento_primitives::{ArenaConfig, DoubleArena};
    ///
    /// let arena = DoubleArena::with_source(HeapPages::new(), ArenaConfig::default()).unwrap();
    /// arena.lower().alloc_layout(core::alloc::Layout::new::<u8>()).unwrap();
    /// assert_eq!(arena.committed(), 64 << 10);
    /// ```
    #[must_use]
    pub fn committed(&self) -> usize {
        (self.lo_commit.get() + (self.ends.cap() - self.hi_commit.get())) as usize
    }

    /// Bytes of address space reserved.
    ///
    /// ```
    /// use bento_pages::HeapPages;
    /// use bento_primitives::{ArenaConfig, DoubleArena};
    ///
    /// let config = ArenaConfig { reserve: 1 << 20, ..ArenaConfig::default() };
    /// let arena = DoubleArena::with_source(HeapPages::new(), config).unwrap();
    /// assert_eq!(arena.reserved(), 1 << 20);
    /// ```
    #[must_use]
    pub fn reserved(&self) -> usize {
        self.reserved
    }

    /// The page source.
    ///
    /// ```
    /// use bento_pages::{HeapPages, PageSource};
    /// use bento_primitives::{ArenaConfig, DoubleArena};
    ///
    /// let arena = DoubleArena::with_source(HeapPages::new(), ArenaConfig::default()).unwrap();
    /// assert!(arena.source().page_size() >= 4096);
    /// ```
    #[must_use]
    pub fn source(&self) -> &P {
        &self.source
    }

    /// Walks both ends (see [`DoubleStack::validate`](crate::DoubleStack::validate))
    /// and checks the committed bounds against the tops.
    ///
    /// # Errors
    ///
    /// A description of the first broken rule.
    ///
    /// ```
    /// use bento_pages::HeapPages;
    /// use bento_primitives::{ArenaConfig, DoubleArena};
    ///
    /// let arena = DoubleArena::with_source(HeapPages::new(), ArenaConfig::default()).unwrap();
    /// arena.upper().alloc_layout(core::alloc::Layout::new::<u8>()).unwrap();
    /// assert_eq!(arena.validate().unwrap().live_blocks, 1);
    /// ```
    pub fn validate(&self) -> Result<StackReport, LinearCorruption> {
        let (lo, hi) = (self.lo_commit.get(), self.hi_commit.get());
        let page = self.source.page_size() as u32;
        if lo > hi || lo % page != 0 || hi % page != 0 {
            return Err(LinearCorruption::new(
                "committed bounds out of order or off page boundaries",
            ));
        }
        let expect = if lo == hi {
            (self.ends.cap(), 0)
        } else {
            (lo, hi)
        };
        if self.ends.ready() != expect {
            return Err(LinearCorruption::new(
                "the ends' usable bounds disagree with the committed bounds",
            ));
        }
        self.ends.validate()
    }
}

impl<P: PageSource> Backing for DoubleArena<P> {
    fn extend(&self, _: &Ends, dir: Dir, to: u32) -> bool {
        let page = self.source.page_alignment();
        let step = self.config.commit_step.min(self.ends.cap() as usize) as u32;
        let (lo, hi) = (self.lo_commit.get(), self.hi_commit.get());
        // What must be committed, and what a full step would commit, clamped to the
        // uncommitted middle `[lo, hi)`.
        let ok = match dir {
            Dir::Up => {
                let need = (align_up(to as usize, page).unwrap_or(hi as usize) as u32).min(hi);
                let want = need.max(lo.saturating_add(step).min(hi));
                let done = (lo < want && self.commit(lo, want) && {
                    self.lo_commit.set(want);
                    true
                }) || (need < want && lo < need && self.commit(lo, need) && {
                    self.lo_commit.set(need);
                    true
                });
                // `to` may lie in the upper side's committed part when the middle is
                // exhausted: nothing to commit then.
                done || need <= lo
            }
            Dir::Down => {
                let need = (align_down(to as usize, page) as u32).max(lo);
                let want = need.min(hi.saturating_sub(step).max(lo));
                let done = (want < hi && self.commit(want, hi) && {
                    self.hi_commit.set(want);
                    true
                }) || (want < need && need < hi && self.commit(need, hi) && {
                    self.hi_commit.set(need);
                    true
                });
                done || need >= hi
            }
        };
        self.publish();
        ok
    }
}

impl<P: PageSource> Drop for DoubleArena<P> {
    fn drop(&mut self) {
        let (lo, hi) = (self.lo_commit.get(), self.hi_commit.get());
        if lo > 0 {
            self.decommit(0, lo);
        }
        if hi < self.ends.cap() {
            self.decommit(hi, self.ends.cap());
        }
        // SAFETY: the reservation is ours, now wholly decommitted, and unused (every
        // borrow of the arena has ended).
        unsafe { self.source.release(self.ends.base(), self.reserved) };
    }
}

impl<P: PageSource> fmt::Debug for DoubleArena<P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DoubleArena")
            .field("committed", &self.committed())
            .field("reserved", &self.reserved)
            .field("ends", &self.ends)
            .finish()
    }
}
