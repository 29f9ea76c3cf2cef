//! The arena: a bump pointer in a reservation of address space, committing pages as
//! it grows; scopes that roll back when dropped.

use crate::linear::corruption::{BumpReport, LinearCorruption};

use core::alloc::Layout;
use core::cell::Cell;
use core::fmt;
use core::num::NonZeroUsize;
use core::ops::Deref;
use core::ptr::{self, NonNull};

use bento_align::{Alignment, align_up};
#[cfg(all(feature = "os", any(unix, windows)))]
use bento_pages::SystemPages;
use bento_pages::{PageError, PageSource};

use crate::linear::bump::{AllocFailed, FAST_MAX, GRAIN, fast_top, grain_up, ptr_in, slow_top};
use bento_pages::{AllocError, RawAlloc, dangling, impl_allocator};

/// The least alignment and size granule of an arena's reservation, whatever the page
/// size: block ends are 8-aligned and headers 8 bytes wide.
pub(crate) const MIN_GRANULE: Alignment = match Alignment::new(16) {
    Some(a) => a,
    None => unreachable!(),
};

/// How an [`Arena`] (or [`DoubleArena`](crate::DoubleArena), or each arena of a
/// [`FrameArena`](crate::FrameArena)) uses its memory. Sizes are rounded up to whole
/// pages of the source.
///
/// ```
/// use bento_primitives::ArenaConfig;
///
/// let config = ArenaConfig {
///     reserve: 256 << 20,
///     retain_on_reset: 1 << 20,
///     ..ArenaConfig::default()
/// };
/// assert_eq!(config.commit_step, 64 << 10);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ArenaConfig {
    /// Address space to reserve: the most the arena can ever hold. Default 64 MiB.
    pub reserve: usize,
    /// The least the arena commits when it needs more memory. Default 64 KiB.
    pub commit_step: usize,
    /// Bytes [`reset_and_decommit`](Arena::reset_and_decommit) (and a trapping reset)
    /// keep committed. Default 0.
    pub retain_on_reset: usize,
    /// A debug aid: every [`reset`](Arena::reset) decommits everything above the
    /// retained part, so that a stale pointer into it faults at once (with a source
    /// whose decommitted pages fault, such as `SystemPages::with_traps()`). Default false.
    pub trap_on_reset: bool,
}

impl Default for ArenaConfig {
    fn default() -> Self {
        Self {
            reserve: 64 << 20,
            commit_step: 64 << 10,
            retain_on_reset: 0,
            trap_on_reset: false,
        }
    }
}

impl ArenaConfig {
    /// The configuration of an arena that reserved `reserved` bytes of `page`-sized
    /// pages: the steps rounded up to whole pages (at most the reservation).
    pub(crate) fn fitted(self, reserved: usize, page: Alignment) -> Self {
        Self {
            reserve: reserved,
            commit_step: align_up(self.commit_step.max(1), page).unwrap_or(reserved),
            retain_on_reset: align_up(self.retain_on_reset, page).unwrap_or(reserved),
            ..self
        }
    }
}

/// Writes the `Arena` struct, with `SystemPages` as the default source where it exists.
macro_rules! arena_struct {
    ($($default:tt)*) => {
        /// A linear allocator in a reservation of address space that commits pages only
        /// as they are used, for per-frame and per-task transient memory.
        ///
        /// ```text
        ///  base                 top          limit                        end
        ///   | block | pad | block |  committed  |   reserved, not committed   |
        ///                                       ^ moves up by `commit_step` pages
        /// ```
        ///
        /// Allocation is [`Bump`](crate::Bump)'s fast path with the committed end as the
        /// limit; passing it commits more (a failed commit is [`AllocError`] and changes
        /// nothing). [`reset`](Self::reset) frees everything in O(1) and keeps the pages
        /// committed; [`reset_and_decommit`](Self::reset_and_decommit) gives back all but
        /// `retain_on_reset` bytes. [`scope`](Self::scope) opens a temporary region that
        /// rolls back when dropped. The last block grows and shrinks in place.
        ///
        /// `&Arena` is an allocator-api2 `Allocator` (0.2 and 0.4); the memory does not
        /// move with the `Arena`, which owns its reservation and gives it back on drop.
        /// `Arena` never runs destructors of what it holds.
        ///
        /// ```
        /// use bento_primitives::Arena;
        ///
        /// let mut arena = Arena::new(1 << 20).unwrap();
        /// let mut map = hashbrown::HashMap::new_in(&arena);
        /// map.insert("lives", 3u32);
        /// assert_eq!(map["lives"], 3);
        /// drop(map);
        /// assert!(arena.committed() >= arena.used());
        /// arena.reset();
        /// assert_eq!(arena.used(), 0);
        /// ```
        ///
        /// `reset` needs `&mut self`, so it cannot run while a block is borrowed:
        ///
        /// ```compile_fail,E0502
        /// use bento_primitives::Arena;
        ///
        /// let mut arena = Arena::new(1 << 20).unwrap();
        /// let x = arena.alloc(1u32).unwrap();
        /// arena.reset(); // error: `arena` is borrowed by `x`
        /// *x += 1;
        /// ```
        pub struct Arena<P: PageSource $($default)*> {
            // Invariant: page-aligned; its provenance covers `[base, base + reserved)`.
            base: NonNull<u8>,
            // Invariant: the reservation's size, a multiple of the page size.
            reserved: usize,
            // Invariant: the usable end address, `base + reserved` (or less, to stay
            // `FAST_MAX` below `usize::MAX`), 8-aligned.
            end: usize,
            // Invariant: 8-aligned, `base <= top <= limit`; everything above is free.
            top: Cell<usize>,
            // Invariant: page-aligned (or `end`), `top <= limit <= end`; `[base, limit)`
            // is committed and nothing above it is.
            limit: Cell<usize>,
            // The highest `top - base` seen at the last point the top went down.
            peak: Cell<usize>,
            // Where the innermost live scope began: blocks below it neither resize in
            // place nor give memory back, so a scope's drop never cuts one short.
            floor: Cell<usize>,
            config: ArenaConfig,
            source: P,
        }
    };
}

#[cfg(all(feature = "os", any(unix, windows)))]
arena_struct!(= SystemPages);
#[cfg(not(all(feature = "os", any(unix, windows))))]
arena_struct!();

#[cfg(all(feature = "os", any(unix, windows)))]
impl Arena<SystemPages> {
    /// An arena of `reserve_bytes` (rounded up to pages) of the operating system's
    /// address space, with the other settings at their defaults.
    ///
    /// # Errors
    ///
    /// [`PageError`] when the address space cannot be reserved, or `reserve_bytes` is
    /// 0.
    ///
    /// ```
    /// use bento_primitives::Arena;
    ///
    /// let arena = Arena::new(4 << 20).unwrap();
    /// assert!(arena.reserved() >= 4 << 20);
    /// assert_eq!(arena.committed(), 0);
    /// ```
    pub fn new(reserve_bytes: usize) -> Result<Self, PageError> {
        Self::with_source(
            SystemPages::new(),
            ArenaConfig {
                reserve: reserve_bytes,
                ..ArenaConfig::default()
            },
        )
    }
}

// Returning `&mut` from `&self` is the arena pattern: every call hands out a fresh block
// that no other reference reaches.
#[allow(clippy::mut_from_ref)]
impl<P: PageSource> Arena<P> {
    /// An arena taking its memory from `source`, set up by `config`.
    ///
    /// # Errors
    ///
    /// [`PageError`] when the source cannot reserve `config.reserve` bytes (rounded up
    /// to pages), or that is 0.
    ///
    /// ```
    /// use bento_pages::HeapPages;
    /// use bento_primitives::{Arena, ArenaConfig};
    ///
    /// let config = ArenaConfig { reserve: 1 << 20, ..ArenaConfig::default() };
    /// let arena = Arena::with_source(HeapPages::new(), config).unwrap();
    /// assert_eq!(*arena.alloc(5u8).unwrap(), 5);
    /// ```
    pub fn with_source(source: P, config: ArenaConfig) -> Result<Self, PageError> {
        let page = source.page_alignment();
        // The top and every block end are 8-aligned: even from a source with tiny pages,
        // take whole 16-byte granules at a 16-byte boundary.
        let grain = page.max_with(MIN_GRANULE);
        let reserved = align_up(config.reserve, grain).unwrap_or(usize::MAX & !grain.mask());
        let base = source.reserve(reserved, grain)?;
        let base_addr = base.addr().get();
        let end = base_addr
            .saturating_add(reserved)
            .min(usize::MAX - FAST_MAX)
            & !(GRAIN - 1);
        Ok(Self {
            base,
            reserved,
            end,
            top: Cell::new(base_addr),
            limit: Cell::new(base_addr),
            peak: Cell::new(0),
            floor: Cell::new(base_addr),
            config: config.fitted(reserved, page),
            source,
        })
    }

    /// Allocates a block for `layout`, committing pages when it passes the committed
    /// part; a zero-size layout gets a dangling, aligned pointer and costs nothing.
    ///
    /// # Errors
    ///
    /// [`AllocError`] when the reservation cannot hold the block or the source refuses
    /// to commit it; nothing changes then.
    ///
    /// ```
    /// use bento_primitives::Arena;
    /// use core::alloc::Layout;
    ///
    /// let arena = Arena::new(1 << 20).unwrap();
    /// let p = arena.alloc_layout(Layout::from_size_align(100, 64).unwrap()).unwrap();
    /// assert_eq!(p.addr().get() % 64, 0);
    /// assert!(arena.alloc_layout(Layout::from_size_align(2 << 20, 8).unwrap()).is_err());
    /// ```
    #[inline]
    pub fn alloc_layout(&self, layout: Layout) -> Result<NonNull<u8>, AllocError> {
        let top = self.top.get();
        let (block, new_top) = match fast_top(top, self.limit.get(), layout) {
            Some(new_top) => (ptr_in(self.base, self.end, top), new_top),
            None => self.place_slow(layout)?,
        };
        self.top.set(new_top);
        Ok(block)
    }

    /// Everything but the fast path: zero sizes, large alignments and sizes, commits,
    /// failure.
    #[cold]
    #[inline(never)]
    fn place_slow(&self, layout: Layout) -> Result<(NonNull<u8>, usize), AllocError> {
        let top = self.top.get();
        if layout.size() == 0 {
            return Ok((dangling(layout), top));
        }
        let (start, new_top) = slow_top(top, layout, 0)?;
        if new_top > self.end || !self.reach(new_top) {
            return Err(AllocError);
        }
        Ok((ptr_in(self.base, self.end, start), new_top))
    }

    /// Makes `[base, to)` committed; false (and nothing changes) when the source
    /// refuses. Commits at least `commit_step`, and retries with just what is needed
    /// when the larger commit is refused.
    #[cold]
    fn reach(&self, to: usize) -> bool {
        let limit = self.limit.get();
        if to <= limit {
            return true;
        }
        debug_assert!(to <= self.end);
        let reserve_end = self.base.addr().get() + self.reserved;
        let need =
            align_up(to, self.source.page_alignment()).map_or(reserve_end, |n| n.min(reserve_end));
        let want = need.max(
            limit
                .saturating_add(self.config.commit_step)
                .min(reserve_end),
        );
        // The full step when the source gives it, else just what the block needs.
        let target = if self.commit_range(limit, want) {
            want
        } else if need < want && self.commit_range(limit, need) {
            need
        } else {
            return false;
        };
        self.limit.set(target.min(self.end));
        true
    }

    /// Commits `[from, to)`, both page boundaries above the committed part.
    fn commit_range(&self, from: usize, to: usize) -> bool {
        debug_assert!(from == self.limit.get() && from < to);
        // SAFETY: `[from, to)` is page-aligned (the base is page-aligned and `from`,
        // the committed end, a page boundary until it reaches the usable end, which
        // `from < to` rules out), a non-zero multiple of pages, inside the
        // reservation, and not committed.
        unsafe { self.source.commit(self.ptr_at_raw(from), to - from) }.is_ok()
    }

    /// The pointer at `addr` anywhere in the reservation (up to its end, which `end`
    /// may stop short of), with the reservation's provenance. Safe: making the pointer
    /// needs no promise, and each use of it (a page call) states its own.
    fn ptr_at_raw(&self, addr: usize) -> NonNull<u8> {
        debug_assert!(
            addr >= self.base.addr().get() && addr <= self.base.addr().get() + self.reserved
        );
        let addr = NonZeroUsize::new(addr).expect("an address in the reservation");
        self.base.with_addr(addr)
    }

    /// Moves `value` into the arena and returns a reference to it, or hands the value
    /// back when there is no room.
    ///
    /// # Errors
    ///
    /// [`AllocFailed`] with the value, when it does not fit or cannot be committed.
    ///
    /// ```
    /// use bento_primitives::Arena;
    ///
    /// let arena = Arena::new(1 << 20).unwrap();
    /// let v = arena.alloc([1u32, 2, 3]).unwrap();
    /// v[0] = 10;
    /// assert_eq!(*v, [10, 2, 3]);
    /// ```
    #[inline]
    pub fn alloc<T>(&self, value: T) -> Result<&mut T, AllocFailed<T>> {
        let top = self.top.get();
        // As in `Bump::alloc`, the value is written before the top is stored: with the
        // top stored first this measured 1.28× Bump's time on 16-byte allocations.
        let (block, new_top) = match fast_top(top, self.limit.get(), Layout::new::<T>()) {
            Some(new_top) => (ptr_in(self.base, self.end, top), new_top),
            None => match self.place_slow(Layout::new::<T>()) {
                Ok(placed) => placed,
                Err(AllocError) => return Err(AllocFailed(value)),
            },
        };
        let p = block.cast::<T>();
        // SAFETY: `p` is a free block for `T` (or dangling and aligned for a zero-size
        // `T`) below `new_top`; storing the top hands it out for the borrow of `self`
        // (a reset needs `&mut`).
        unsafe {
            p.write(value);
            self.top.set(new_top);
            Ok(&mut *p.as_ptr())
        }
    }

    /// Copies `src` into the arena.
    ///
    /// # Errors
    ///
    /// [`AllocError`] when it does not fit.
    ///
    /// ```
    /// use bento_primitives::Arena;
    ///
    /// let arena = Arena::new(1 << 20).unwrap();
    /// assert_eq!(arena.alloc_slice_copy(b"frame").unwrap(), b"frame");
    /// ```
    pub fn alloc_slice_copy<T: Copy>(&self, src: &[T]) -> Result<&mut [T], AllocError> {
        let p = self.alloc_layout(Layout::for_value(src))?.cast::<T>();
        // SAFETY: `p` is a fresh block for `src.len()` values of `T` (or dangling and
        // aligned when the slice is empty); the two do not overlap.
        unsafe {
            ptr::copy_nonoverlapping(src.as_ptr(), p.as_ptr(), src.len());
            Ok(core::slice::from_raw_parts_mut(p.as_ptr(), src.len()))
        }
    }

    /// Grows or shrinks the last block to `new_size` bytes without moving it,
    /// committing pages as needed; false (and nothing changes) when it is not the last
    /// block or there is no room.
    ///
    /// # Safety
    ///
    /// The caller must ensure that `ptr` is a live block of this arena, allocated (or
    /// last resized) with `old`.
    ///
    /// ```
    /// use bento_primitives::Arena;
    /// use core::alloc::Layout;
    ///
    /// let arena = Arena::new(1 << 20).unwrap();
    /// let old = Layout::from_size_align(16, 8).unwrap();
    /// let a = arena.alloc_layout(old).unwrap();
    /// // SAFETY: `a` is the live block just allocated with `old`.
    /// assert!(unsafe { arena.try_grow_in_place(a, old, 300 << 10) });
    /// assert!(arena.committed() >= 300 << 10);
    /// ```
    pub unsafe fn try_grow_in_place(&self, ptr: NonNull<u8>, old: Layout, new_size: usize) -> bool {
        let start = ptr.addr().get();
        let is_last = old.size() != 0
            && start >= self.floor.get()
            && grain_up(start + old.size()) == self.top.get();
        if !is_last || new_size > self.end - start {
            return false;
        }
        // `start + new_size <= end`, which is 8-aligned: the rounding stays inside.
        let new_top = grain_up(start + new_size);
        if !self.reach(new_top) {
            return false;
        }
        self.lower_top(new_top);
        true
    }

    /// Sets the top, recording the peak first when it goes down.
    #[inline]
    fn lower_top(&self, top: usize) {
        self.note_peak();
        self.top.set(top);
    }

    fn note_peak(&self) {
        self.peak.set(self.peak.get().max(self.used()));
    }

    /// Frees everything at once. O(1): the pages stay committed for the next frame,
    /// unless `trap_on_reset` is set, in which case everything above
    /// `retain_on_reset` is decommitted (see
    /// [`reset_and_decommit`](Self::reset_and_decommit)).
    ///
    /// ```
    /// use bento_primitives::Arena;
    ///
    /// let mut arena = Arena::new(1 << 20).unwrap();
    /// arena.alloc([0u8; 1000]).unwrap();
    /// let committed = arena.committed();
    /// arena.reset();
    /// assert_eq!((arena.used(), arena.committed()), (0, committed));
    /// assert!(arena.peak() >= 1000);
    /// ```
    pub fn reset(&mut self) {
        // SAFETY: `&mut self`: no block is borrowed.
        unsafe { self.reset_shared() }
    }

    /// `reset` through a shared reference.
    ///
    /// # Safety
    ///
    /// The caller must ensure that no block of the arena is used again.
    pub(crate) unsafe fn reset_shared(&self) {
        self.lower_top(self.base.addr().get());
        if self.config.trap_on_reset {
            self.decommit_above(self.config.retain_on_reset);
        }
    }

    /// Frees everything and gives back every committed page beyond the first
    /// `retain_on_reset` bytes.
    ///
    /// ```
    /// use bento_primitives::{Arena, ArenaConfig};
    /// use bento_pages::SystemPages;
    ///
    /// let config = ArenaConfig { reserve: 8 << 20, retain_on_reset: 64 << 10, ..ArenaConfig::default() };
    /// let mut arena = Arena::with_source(SystemPages::new(), config).unwrap();
    /// arena.alloc_slice_copy(&[7u8; 1 << 20]).unwrap();
    /// arena.reset_and_decommit();
    /// assert_eq!(arena.committed(), 64 << 10);
    /// ```
    pub fn reset_and_decommit(&mut self) {
        self.lower_top(self.base.addr().get());
        self.decommit_above(self.config.retain_on_reset);
    }

    /// Decommits the committed pages from `keep` bytes up; the top must be at or
    /// below `keep`.
    fn decommit_above(&self, keep: usize) {
        let from = self.base.addr().get() + keep.min(self.reserved);
        let limit = self.limit.get();
        debug_assert!(self.top.get() <= from);
        if limit > from {
            // The committed end is a page boundary, or the reservation's end.
            let to = align_up(limit - self.base.addr().get(), self.source.page_alignment())
                .map_or(self.reserved, |n| n.min(self.reserved));
            // SAFETY: `[from, base + to)` is page-aligned (`keep` is a multiple of the
            // page size), committed, inside the reservation, and free: the top is below.
            unsafe {
                self.source
                    .decommit(self.ptr_at_raw(from), self.base.addr().get() + to - from)
            };
            self.limit.set(from);
        }
    }

    /// A temporary region: everything allocated through the scope is freed when it is
    /// dropped. Scopes nest; `&ArenaScope` is itself an `Allocator`, and the scope
    /// derefs to the arena for its allocation methods.
    ///
    /// ```
    /// use bento_primitives::Arena;
    ///
    /// let mut arena = Arena::new(1 << 20).unwrap();
    /// arena.alloc(1u64).unwrap();
    /// let before = arena.used();
    /// {
    ///     let mut outer = arena.scope();
    ///     outer.alloc([0u8; 100]).unwrap();
    ///     {
    ///         let inner = outer.scope();
    ///         let v = allocator_api2::vec::Vec::<u32, _>::with_capacity_in(50, &inner);
    ///         assert_eq!(v.capacity(), 50);
    ///     }
    ///     assert_eq!(outer.used(), before + 104);
    /// }
    /// assert_eq!(arena.used(), before);
    /// ```
    ///
    /// Blocks cannot outlive their scope:
    ///
    /// ```compile_fail,E0597
    /// use bento_primitives::Arena;
    ///
    /// let mut arena = Arena::new(1 << 20).unwrap();
    /// let x;
    /// {
    ///     let scope = arena.scope();
    ///     x = scope.alloc(5u32).unwrap(); // error: `scope` does not live long enough
    /// }
    /// assert_eq!(*x, 5);
    /// ```
    pub fn scope(&mut self) -> ArenaScope<'_, P> {
        ArenaScope::new(self)
    }

    /// Bytes in use, padding and rounding included.
    ///
    /// ```
    /// use bento_primitives::Arena;
    ///
    /// let arena = Arena::new(1 << 20).unwrap();
    /// arena.alloc(0u8).unwrap();
    /// assert_eq!(arena.used(), 8); // block ends are rounded to 8 bytes
    /// ```
    #[must_use]
    pub fn used(&self) -> usize {
        self.top.get() - self.base.addr().get()
    }

    /// Whether `ptr` lies in the arena's reservation: a block it handed out (live
    /// or not) rather than another allocator's. A frame's memory tells its blocks
    /// from a heap's this way.
    ///
    /// ```
    /// use bento_primitives::Arena;
    ///
    /// let arena = Arena::new(1 << 20).unwrap();
    /// let x = arena.alloc(7u32).unwrap();
    /// assert!(arena.contains(core::ptr::NonNull::from(&*x).cast()));
    /// assert!(!arena.contains(core::ptr::NonNull::from(&0u8)));
    /// ```
    #[must_use]
    pub fn contains(&self, ptr: NonNull<u8>) -> bool {
        ptr.addr().get().wrapping_sub(self.base.addr().get()) < self.reserved
    }

    /// Bytes committed: pages that hold memory.
    ///
    /// ```
    /// use bento_primitives::Arena;
    ///
    /// let arena = Arena::new(1 << 20).unwrap();
    /// arena.alloc(1u8).unwrap();
    /// assert_eq!(arena.committed(), 64 << 10); // one commit step
    /// ```
    #[must_use]
    pub fn committed(&self) -> usize {
        self.limit.get() - self.base.addr().get()
    }

    /// Bytes of address space reserved: the most the arena can hold.
    ///
    /// ```
    /// use bento_primitives::Arena;
    ///
    /// assert_eq!(Arena::new(1 << 20).unwrap().reserved(), 1 << 20);
    /// ```
    #[must_use]
    pub fn reserved(&self) -> usize {
        self.reserved
    }

    /// The most bytes ever in use at once.
    ///
    /// ```
    /// use bento_primitives::Arena;
    ///
    /// let mut arena = Arena::new(1 << 20).unwrap();
    /// arena.alloc([0u64; 64]).unwrap();
    /// arena.reset();
    /// arena.alloc(0u64).unwrap();
    /// assert_eq!(arena.peak(), 512);
    /// ```
    #[must_use]
    pub fn peak(&self) -> usize {
        self.peak.get().max(self.used())
    }

    /// The settings in force (sizes rounded up to pages).
    ///
    /// ```
    /// use bento_primitives::Arena;
    ///
    /// assert_eq!(Arena::new(1000).unwrap().config().reserve % 4096, 0);
    /// ```
    #[must_use]
    pub fn config(&self) -> &ArenaConfig {
        &self.config
    }

    /// The page source.
    ///
    /// ```
    /// use bento_pages::PageSource;
    /// use bento_primitives::Arena;
    ///
    /// assert!(Arena::new(1 << 20).unwrap().source().page_size() >= 4096);
    /// ```
    #[must_use]
    pub fn source(&self) -> &P {
        &self.source
    }

    /// Checks the invariants (top and committed end aligned and in order inside the
    /// reservation) and returns the bytes in use.
    ///
    /// # Errors
    ///
    /// A [`LinearCorruption`] naming the broken invariant.
    ///
    /// ```
    /// use bento_primitives::Arena;
    ///
    /// let arena = Arena::new(1 << 20).unwrap();
    /// arena.alloc(1u32).unwrap();
    /// assert_eq!(arena.validate().unwrap().used_bytes, 8);
    /// ```
    pub fn validate(&self) -> Result<BumpReport, LinearCorruption> {
        let (base, top, limit) = (self.base.addr().get(), self.top.get(), self.limit.get());
        if !(base <= top && top <= limit && limit <= self.end) {
            return Err(LinearCorruption::new(
                "top and committed end out of order or outside the reservation",
            ));
        }
        if !top.is_multiple_of(GRAIN) {
            return Err(LinearCorruption::new("top not 8-aligned"));
        }
        if limit != self.end && !(limit - base).is_multiple_of(self.source.page_size()) {
            return Err(LinearCorruption::new(
                "committed end not on a page boundary",
            ));
        }
        Ok(BumpReport {
            used_bytes: top - base,
        })
    }
}

impl<P: PageSource> Drop for Arena<P> {
    fn drop(&mut self) {
        self.top.set(self.base.addr().get());
        self.decommit_above(0);
        // SAFETY: the reservation is this arena's, now wholly decommitted, and nothing
        // uses it any more (dropping needs every borrow to have ended).
        unsafe { self.source.release(self.base, self.reserved) };
    }
}

impl<P: PageSource> fmt::Debug for Arena<P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Arena")
            .field("used", &self.used())
            .field("committed", &self.committed())
            .field("reserved", &self.reserved)
            .field("peak", &self.peak())
            .finish()
    }
}

// SAFETY: blocks come from above the top, inside the committed part of the
// reservation, so no two live blocks overlap; they stay valid until freed, reset (which
// takes `&mut self`) or their scope is dropped (which needs every borrow of the scope to
// have ended). A grow that cannot extend the last block copies into a new one.
unsafe impl<P: PageSource> RawAlloc for Arena<P> {
    #[inline]
    fn alloc_raw(&self, layout: Layout) -> Result<NonNull<u8>, AllocError> {
        self.alloc_layout(layout)
    }

    #[inline]
    unsafe fn dealloc_raw(&self, ptr: NonNull<u8>, layout: Layout) {
        // Only the last block gives its memory back.
        let start = ptr.addr().get();
        if layout.size() != 0
            && start >= self.floor.get()
            && grain_up(start + layout.size()) == self.top.get()
        {
            self.lower_top(start & !(GRAIN - 1));
        }
    }

    unsafe fn resize_in_place(&self, ptr: NonNull<u8>, old: Layout, new_size: usize) -> bool {
        // SAFETY: the caller guarantees `ptr` is live with `old`.
        unsafe { self.try_grow_in_place(ptr, old, new_size) }
    }
}

impl_allocator!(impl['a, P: PageSource] for &'a Arena<P>);

/// A temporary region of an [`Arena`] from [`Arena::scope`]: everything allocated
/// through it is freed when it is dropped, in O(1). Derefs to the arena for
/// allocation; `&ArenaScope` is an allocator-api2 `Allocator`; scopes nest through
/// [`ArenaScope::scope`].
///
/// ```
/// use bento_primitives::Arena;
///
/// let mut arena = Arena::new(1 << 20).unwrap();
/// for frame in 0..3u32 {
///     let scope = arena.scope();
///     let xs = scope.alloc_slice_copy(&[frame; 64]).unwrap();
///     assert_eq!(xs[63], frame);
/// }
/// assert_eq!(arena.used(), 0);
/// ```
pub struct ArenaScope<'a, P: PageSource> {
    arena: &'a Arena<P>,
    // The arena's top, and its floor, when the scope began.
    mark: usize,
    outer_floor: usize,
}

impl<'a, P: PageSource> ArenaScope<'a, P> {
    fn new(arena: &'a Arena<P>) -> Self {
        let mark = arena.top.get();
        Self {
            arena,
            mark,
            outer_floor: arena.floor.replace(mark),
        }
    }

    /// A nested scope: freed when dropped, before this one.
    ///
    /// ```
    /// use bento_primitives::Arena;
    ///
    /// let mut arena = Arena::new(1 << 20).unwrap();
    /// let mut outer = arena.scope();
    /// outer.alloc(1u64).unwrap();
    /// let used = outer.used();
    /// outer.scope().alloc([0u8; 64]).unwrap();
    /// assert_eq!(outer.used(), used);
    /// ```
    pub fn scope(&mut self) -> ArenaScope<'_, P> {
        ArenaScope::new(self.arena)
    }

    /// Bytes the scope has allocated (the arena's use above where the scope began).
    ///
    /// ```
    /// use bento_primitives::Arena;
    ///
    /// let mut arena = Arena::new(1 << 20).unwrap();
    /// let scope = arena.scope();
    /// scope.alloc(1u64).unwrap();
    /// assert_eq!(scope.scope_used(), 8);
    /// ```
    #[must_use]
    pub fn scope_used(&self) -> usize {
        self.arena.top.get() - self.mark
    }
}

impl<P: PageSource> Deref for ArenaScope<'_, P> {
    type Target = Arena<P>;

    fn deref(&self) -> &Arena<P> {
        self.arena
    }
}

impl<P: PageSource> Drop for ArenaScope<'_, P> {
    fn drop(&mut self) {
        // Every block allocated through this scope borrowed it, so none is alive; the
        // blocks below the mark belong to enclosing scopes and are untouched (the floor
        // kept them from growing or shrinking in place meanwhile).
        self.arena.lower_top(self.mark);
        self.arena.floor.set(self.outer_floor);
    }
}

impl<P: PageSource> fmt::Debug for ArenaScope<'_, P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ArenaScope")
            .field("scope_used", &self.scope_used())
            .field("arena", self.arena)
            .finish()
    }
}

/// Writes `RawAlloc`, and so allocator-api2 `Allocator` on a reference, for a handle
/// type `$handle<'_, P>` with a field `arena: &Arena<P>` whose blocks borrow the handle:
/// [`ArenaScope`] and [`Frame`](crate::Frame).
macro_rules! arena_handle {
    ($handle:ident) => {
        // SAFETY: forwards to the arena the handle holds. Every block borrows the
        // handle, and the arena is neither reset nor rolled back below the handle's
        // blocks while the handle lives (the scope rolls back only when dropped;
        // `FrameArena::next_frame` refuses a frame whose handle lives).
        unsafe impl<P: bento_pages::PageSource> bento_pages::RawAlloc for $handle<'_, P> {
            #[inline]
            fn alloc_raw(
                &self,
                layout: core::alloc::Layout,
            ) -> Result<core::ptr::NonNull<u8>, bento_pages::AllocError> {
                self.arena.alloc_layout(layout)
            }

            unsafe fn dealloc_raw(&self, ptr: core::ptr::NonNull<u8>, layout: core::alloc::Layout) {
                // SAFETY: the caller's contract; the handle's blocks are the arena's.
                unsafe { bento_pages::RawAlloc::dealloc_raw(self.arena, ptr, layout) }
            }

            unsafe fn resize_in_place(
                &self,
                ptr: core::ptr::NonNull<u8>,
                old: core::alloc::Layout,
                new_size: usize,
            ) -> bool {
                // SAFETY: the caller's contract; the handle's blocks are the arena's.
                unsafe {
                    bento_pages::RawAlloc::resize_in_place(self.arena, ptr, old, new_size)
                }
            }
        }

        bento_pages::impl_allocator!(
            impl['a, 'h, P: bento_pages::PageSource] for &'h $handle<'a, P>
        );
    };
}

pub(crate) use arena_handle;

arena_handle!(ArenaScope);
