//! The double-ended stack: a lower end growing up and an upper end growing down in one
//! piece of memory, each a LIFO stack with its own markers. [`DoubleStack`] works in a
//! caller's buffer; [`DoubleArena`](crate::DoubleArena) in a reservation it commits
//! from both sides.

use crate::linear::corruption::LinearCorruption;

use core::alloc::Layout;
use core::cell::Cell;
use core::fmt;
use core::marker::PhantomData;
use core::mem::MaybeUninit;
use core::ptr::NonNull;

use crate::linear::lifo::markers::{Marker, MarkerError};
use crate::linear::lifo::validate::StackReport;
use crate::linear::lifo::{ADDR_CEILING, Dir, HEADER, Lifo, LifoCheck};
use crate::linear::stack::grained;
use bento_pages::{AllocError, RawAlloc, dangling, impl_allocator};

/// What lies behind the two ends: how far each side's memory is usable, and how to
/// make more of it usable.
pub(crate) trait Backing {
    /// Makes the memory of side `dir` usable up to the offset `to` (down to it for
    /// [`Dir::Down`]) and records it with [`Ends::set_ready`]; false when it cannot.
    fn extend(&self, ends: &Ends, dir: Dir, to: u32) -> bool;
}

/// A buffer: usable everywhere already.
pub(crate) struct Fixed;

impl Backing for Fixed {
    fn extend(&self, _: &Ends, _: Dir, _: u32) -> bool {
        // The ready bounds of a buffer cover all of it, so this is never asked.
        false
    }
}

/// The two ends and the memory they share.
pub(crate) struct Ends {
    // Invariant: 8-aligned; its provenance covers `[base, base + cap)`.
    base: NonNull<u8>,
    // Invariant: a multiple of 8, at most `MAX_SPAN`.
    cap: u32,
    lower: Lifo,
    upper: Lifo,
    // Invariant: `lower.top() + lower.waiting_room() <= upper.top()` (the ends and the
    // lower end's waiting header never overlap); `[0, lo_ready)` and `[hi_ready, cap)`
    // are usable; `lower.top() + lower.waiting_room() <= lo_ready` (the waiting header
    // is usable memory too) and `hi_ready <= upper.top()`. Kept as addresses (`base`
    // plus the offset), which is what the fast paths compare with the tops.
    lo_ready: Cell<usize>,
    hi_ready: Cell<usize>,
}

impl Ends {
    /// Two empty ends over `[base, base + cap)`, usable as far as the ready bounds say.
    /// An `eager` lower end keeps a waiting header at its origin too, so its fast path
    /// works there (the first 16 bytes must be usable, and stay so).
    ///
    /// # Safety
    ///
    /// `base` is 8-aligned, `cap` a multiple of 8 of at most `MAX_SPAN`, and `base`'s
    /// provenance covers `[base, base + cap)`, memory only the ends use for as long as
    /// they are; the part below `lo_ready` and above `hi_ready` (kept so by
    /// `set_ready`) is usable. `base + cap <= ADDR_CEILING`, or `cap == 0` (the fast
    /// paths add to the tops without checking; with no memory, both ends are bare and
    /// never take them).
    pub(crate) unsafe fn new(
        base: NonNull<u8>,
        cap: u32,
        lo_ready: u32,
        hi_ready: u32,
        eager: bool,
    ) -> Self {
        debug_assert!(cap == 0 || base.addr().get() + cap as usize <= ADDR_CEILING);
        debug_assert!(!eager || (cap as usize >= HEADER && lo_ready as usize >= HEADER));
        Self {
            base,
            cap,
            // SAFETY: the caller's contract: the memory is the ends', and an eager lower
            // end's first 16 bytes are ready (asserted above).
            lower: unsafe { Lifo::new(base, Dir::Up, 0, LifoCheck::Deferred, eager) },
            // SAFETY: as above; the upper end's origin is the end of the memory.
            upper: unsafe { Lifo::new(base, Dir::Down, cap, LifoCheck::Deferred, false) },
            lo_ready: Cell::new(base.addr().get() + lo_ready as usize),
            hi_ready: Cell::new(base.addr().get() + hi_ready as usize),
        }
    }

    pub(crate) fn base(&self) -> NonNull<u8> {
        self.base
    }

    pub(crate) fn cap(&self) -> u32 {
        self.cap
    }

    /// The usable bounds: `[0, lower)` and `[upper, cap)`.
    pub(crate) fn ready(&self) -> (u32, u32) {
        (
            self.offset(self.lo_ready.get()),
            self.offset(self.hi_ready.get()),
        )
    }

    pub(crate) fn set_ready(&self, lower: u32, upper: u32) {
        self.lo_ready.set(self.addr(lower));
        self.hi_ready.set(self.addr(upper));
    }

    pub(crate) fn end(&self, dir: Dir) -> &Lifo {
        match dir {
            Dir::Up => &self.lower,
            Dir::Down => &self.upper,
        }
    }

    /// The top the end `dir` may not pass: the other end's (above the lower end's
    /// waiting header, if it keeps one).
    fn limit(&self, dir: Dir) -> u32 {
        match dir {
            Dir::Up => self.upper.top(),
            Dir::Down => self.lower.top() + self.lower.waiting_room(),
        }
    }

    /// Makes sure the memory of side `dir` is usable as far as its new top `top` (and
    /// the lower end's waiting header above it).
    #[inline]
    fn reach(&self, backing: &dyn Backing, dir: Dir, top: u32) -> bool {
        let to = match dir {
            Dir::Up => top + HEADER as u32,
            Dir::Down => top,
        };
        let ready = match dir {
            Dir::Up => self.addr(to) <= self.lo_ready.get(),
            Dir::Down => self.addr(to) >= self.hi_ready.get(),
        };
        ready || backing.extend(self, dir, to)
    }

    /// The address of offset `at`.
    #[inline(always)]
    fn addr(&self, at: u32) -> usize {
        self.base.addr().get() + at as usize
    }

    /// The offset of address `addr`, one of the memory's.
    fn offset(&self, addr: usize) -> u32 {
        (addr - self.base.addr().get()) as u32
    }

    /// A block on the fast path of end `dir` (small, aligned to at most 8, inside the
    /// ready memory and clear of the other end), or `None` for
    /// [`alloc_slow`](Self::alloc_slow) to decide. An end at a bare origin (see
    /// [`Lifo::is_bare`]) is left to the slow path too.
    #[inline(always)]
    fn alloc_fast(&self, dir: Dir, layout: Layout) -> Option<NonNull<u8>> {
        match dir {
            Dir::Up => {
                if self.lower.is_bare() {
                    return None;
                }
                // The new top keeps 16 bytes, its waiting header, below the upper end's
                // top and the ready part. The lower end waits at its top, so both lie
                // at least 16 above it: no wrap, and the limit is at most
                // `base + cap - 16`, within what `push_up_fast` allows (`new`).
                let room = self.upper.top_addr().min(self.lo_ready.get());
                // SAFETY: the limit is 16 bytes below the upper end's top and the end
                // of the ready part, at most `ADDR_CEILING - 16` (`new`).
                unsafe { self.lower.push_up_fast(layout, room - HEADER) }
            }
            Dir::Down => {
                if self.upper.is_bare() {
                    return None;
                }
                // The lower end's top and waiting header, and the ready part, stay
                // below. Counting the waiting header where a bare lower end keeps none
                // only sends that case to the slow path.
                let floor = (self.lower.top_addr() + HEADER).max(self.hi_ready.get());
                // SAFETY: the limit is at or above the lower end's top and waiting
                // header and the start of the ready part, at most `ADDR_CEILING`.
                unsafe { self.upper.push_down_fast(layout, floor) }
            }
        }
    }

    #[inline]
    fn alloc(
        &self,
        backing: &dyn Backing,
        dir: Dir,
        layout: Layout,
    ) -> Result<NonNull<u8>, AllocError> {
        if let Some(p) = self.alloc_fast(dir, layout) {
            return Ok(p);
        }
        self.alloc_slow(backing, dir, layout)
    }

    /// Zero sizes, alignments above 8, large sizes, memory to make ready, failure.
    #[cold]
    #[inline(never)]
    fn alloc_slow(
        &self,
        backing: &dyn Backing,
        dir: Dir,
        layout: Layout,
    ) -> Result<NonNull<u8>, AllocError> {
        if layout.size() == 0 {
            return Ok(dangling(layout));
        }
        let end = self.end(dir);
        let placed = end.place(layout, self.limit(dir))?;
        if !self.reach(backing, dir, placed.new_top) {
            return Err(AllocError);
        }
        // SAFETY: placed just now under the other end's top, and made ready by `reach`.
        Ok(unsafe { end.push(placed) })
    }

    fn resize(&self, backing: &dyn Backing, dir: Dir, ptr: NonNull<u8>, new_size: usize) -> bool {
        let end = self.end(dir);
        match end.resized_top(ptr, new_size, self.limit(dir)) {
            Some(top) if self.reach(backing, dir, top) => {
                // SAFETY: computed just now under the other end's top, and made ready
                // by `reach`.
                unsafe { end.set_top(top) };
                true
            }
            _ => false,
        }
    }

    /// Bytes between the two tops.
    pub(crate) fn free_between(&self) -> usize {
        (self.upper.top() - self.lower.top()) as usize
    }

    /// Rolls back whichever end `marker` belongs to.
    pub(crate) fn rollback(&self, marker: Marker) -> Result<(), MarkerError> {
        if marker.end_id() == self.upper.id() {
            self.upper.rollback(marker)
        } else {
            self.lower.rollback(marker)
        }
    }

    /// Both ends walked and checked, and the tops in order inside the ready parts.
    pub(crate) fn validate(&self) -> Result<StackReport, LinearCorruption> {
        let (lo, hi) = (self.lower.top(), self.upper.top());
        if lo + self.lower.waiting_room() > hi || hi > self.cap {
            return Err(LinearCorruption::new(
                "the ends have crossed or left the memory",
            ));
        }
        let (lo_ready, hi_ready) = self.ready();
        if lo + self.lower.waiting_room() > lo_ready || hi < hi_ready {
            return Err(LinearCorruption::new(
                "a top lies outside the usable part of its side",
            ));
        }
        Ok(self.lower.validate()? + self.upper.validate()?)
    }
}

impl fmt::Debug for Ends {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Ends")
            .field("capacity", &self.cap)
            .field("lower", &self.lower)
            .field("upper", &self.upper)
            .finish()
    }
}

/// One end of a [`DoubleStack`] or [`DoubleArena`](crate::DoubleArena), to allocate
/// from: a `Copy` handle that is itself an allocator-api2 `Allocator`.
///
/// ```
/// use allocator_api2::vec::Vec;
/// use bento_primitives::DoubleStack;
/// use core::mem::MaybeUninit;
///
/// let mut buf = [MaybeUninit::uninit(); 4096];
/// let stack = DoubleStack::new(&mut buf);
/// let mut resident = Vec::new_in(stack.lower());
/// let mut scratch = Vec::new_in(stack.upper());
/// resident.extend_from_slice(b"level data");
/// scratch.extend_from_slice(b"temporary");
/// assert_eq!(resident.len() + scratch.len(), 19);
/// ```
#[derive(Clone, Copy)]
pub struct StackEnd<'a> {
    ends: &'a Ends,
    backing: &'a dyn Backing,
    dir: Dir,
}

impl<'a> StackEnd<'a> {
    pub(crate) fn new(ends: &'a Ends, backing: &'a dyn Backing, dir: Dir) -> Self {
        Self { ends, backing, dir }
    }

    /// Allocates a block for `layout` at this end; a zero-size layout gets a dangling,
    /// aligned pointer and costs nothing.
    ///
    /// # Errors
    ///
    /// [`AllocError`] when the block would cross the other end (or, in a
    /// [`DoubleArena`](crate::DoubleArena), its memory cannot be committed); nothing
    /// changes then.
    ///
    /// ```
    /// use bento_primitives::DoubleStack;
    /// use core::alloc::Layout;
    /// use core::mem::MaybeUninit;
    ///
    /// let mut buf = [MaybeUninit::uninit(); 256];
    /// let stack = DoubleStack::new(&mut buf);
    /// let layout = Layout::from_size_align(120, 8).unwrap();
    /// stack.lower().alloc_layout(layout).unwrap();
    /// assert!(stack.upper().alloc_layout(layout).is_err()); // they would meet
    /// ```
    #[inline]
    pub fn alloc_layout(&self, layout: Layout) -> Result<NonNull<u8>, AllocError> {
        self.ends.alloc(self.backing, self.dir, layout)
    }

    /// A marker at this end's top, for [`DoubleStack::rollback`] or
    /// [`EndMut::rollback`].
    ///
    /// ```
    /// use bento_primitives::DoubleStack;
    /// use core::mem::MaybeUninit;
    ///
    /// let mut buf = [MaybeUninit::uninit(); 256];
    /// let stack = DoubleStack::new(&mut buf);
    /// assert_ne!(stack.lower().marker(), stack.upper().marker());
    /// ```
    #[must_use]
    pub fn marker(&self) -> Marker {
        self.ends.end(self.dir).marker()
    }

    /// Bytes this end uses: blocks, headers, padding.
    ///
    /// ```
    /// use bento_primitives::DoubleStack;
    /// use core::mem::MaybeUninit;
    ///
    /// let mut buf = [MaybeUninit::uninit(); 256];
    /// let stack = DoubleStack::new(&mut buf);
    /// stack.upper().alloc_layout(core::alloc::Layout::new::<u64>()).unwrap();
    /// assert_eq!(stack.upper().used(), 16 + 8);
    /// ```
    #[must_use]
    pub fn used(&self) -> usize {
        self.ends.end(self.dir).used()
    }

    /// Blocks allocated at this end and not freed, counted by walking its blocks.
    ///
    /// ```
    /// use bento_primitives::DoubleStack;
    /// use core::mem::MaybeUninit;
    ///
    /// let mut buf = [MaybeUninit::uninit(); 256];
    /// let stack = DoubleStack::new(&mut buf);
    /// stack.lower().alloc_layout(core::alloc::Layout::new::<u64>()).unwrap();
    /// assert_eq!(stack.lower().live_blocks(), 1);
    /// ```
    #[must_use]
    pub fn live_blocks(&self) -> usize {
        self.ends.end(self.dir).live()
    }
}

impl fmt::Debug for StackEnd<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.ends.end(self.dir), f)
    }
}

// SAFETY: each end carves blocks beyond its top and never past the other end's, so
// live blocks never overlap; a block stays valid until it is freed, rolled back over
// or reset, all of which need the end exclusively (`&mut` of the owner or the
// `EndMut`). A grow that cannot extend the newest block moves it.
unsafe impl RawAlloc for StackEnd<'_> {
    #[inline]
    fn alloc_raw(&self, layout: Layout) -> Result<NonNull<u8>, AllocError> {
        self.alloc_layout(layout)
    }

    unsafe fn dealloc_raw(&self, ptr: NonNull<u8>, layout: Layout) {
        if layout.size() != 0 {
            self.ends.end(self.dir).free(ptr);
        }
    }

    unsafe fn resize_in_place(&self, ptr: NonNull<u8>, _old: Layout, new_size: usize) -> bool {
        self.ends.resize(self.backing, self.dir, ptr, new_size)
    }
}

impl_allocator!(impl['a] for StackEnd<'a>);

/// One end held exclusively (from [`DoubleStack::split`] or
/// [`DoubleArena::split`](crate::DoubleArena::split)), so it can roll back or reset
/// while blocks of the other end stay borrowed: level data on one side, per-frame
/// scratch on the other. `&EndMut` is an allocator-api2 `Allocator`.
///
/// ```
/// use allocator_api2::vec::Vec;
/// use bento_primitives::DoubleStack;
/// use core::mem::MaybeUninit;
///
/// let mut buf = [MaybeUninit::uninit(); 4096];
/// let mut stack = DoubleStack::new(&mut buf);
/// let (level, mut frame) = stack.split();
/// let mut meshes = Vec::new_in(&level);
/// meshes.extend(0..10u32);
/// for _ in 0..3 {
///     let start = frame.marker();
///     let mut scratch = Vec::new_in(&frame);
///     scratch.extend(meshes.iter().map(|m| m * 2));
///     drop(scratch);
///     frame.rollback(start).unwrap(); // `meshes` stays borrowed meanwhile
/// }
/// assert_eq!(meshes.len(), 10);
/// ```
pub struct EndMut<'a> {
    end: StackEnd<'a>,
}

impl EndMut<'_> {
    /// Allocates a block for `layout` at this end; see [`StackEnd::alloc_layout`].
    ///
    /// # Errors
    ///
    /// [`AllocError`] when the block does not fit; nothing changes then.
    ///
    /// ```
    /// use bento_primitives::DoubleStack;
    /// use core::mem::MaybeUninit;
    ///
    /// let mut buf = [MaybeUninit::uninit(); 256];
    /// let mut stack = DoubleStack::new(&mut buf);
    /// let (lower, _) = stack.split();
    /// assert!(lower.alloc_layout(core::alloc::Layout::new::<u32>()).is_ok());
    /// ```
    #[inline]
    pub fn alloc_layout(&self, layout: Layout) -> Result<NonNull<u8>, AllocError> {
        self.end.alloc_layout(layout)
    }

    /// A marker at this end's top.
    ///
    /// ```
    /// use bento_primitives::DoubleStack;
    /// use core::mem::MaybeUninit;
    ///
    /// let mut buf = [MaybeUninit::uninit(); 256];
    /// let mut stack = DoubleStack::new(&mut buf);
    /// let (lower, _) = stack.split();
    /// assert_eq!(lower.marker().used(), 0);
    /// ```
    #[must_use]
    pub fn marker(&self) -> Marker {
        self.end.marker()
    }

    /// Frees every block of this end allocated after `marker`, and the blocks beneath
    /// it freed out of order.
    ///
    /// # Errors
    ///
    /// [`MarkerError`] when the marker belongs to another end, lies above the top, or
    /// was invalidated; nothing changes then.
    ///
    /// ```
    /// use bento_primitives::{DoubleStack, MarkerError};
    /// use core::mem::MaybeUninit;
    ///
    /// let mut buf = [MaybeUninit::uninit(); 256];
    /// let mut stack = DoubleStack::new(&mut buf);
    /// let (mut lower, upper) = stack.split();
    /// assert_eq!(lower.rollback(upper.marker()), Err(MarkerError::Foreign));
    /// ```
    pub fn rollback(&mut self, marker: Marker) -> Result<(), MarkerError> {
        let lifo = self.end.ends.end(self.end.dir);
        lifo.rollback(marker)
    }

    /// Frees every block of this end and invalidates its markers.
    ///
    /// ```
    /// use bento_primitives::DoubleStack;
    /// use core::mem::MaybeUninit;
    ///
    /// let mut buf = [MaybeUninit::uninit(); 256];
    /// let mut stack = DoubleStack::new(&mut buf);
    /// let (_, mut upper) = stack.split();
    /// upper.alloc_layout(core::alloc::Layout::new::<u64>()).unwrap();
    /// upper.reset();
    /// assert_eq!(upper.used(), 0);
    /// ```
    pub fn reset(&mut self) {
        self.end.ends.end(self.end.dir).reset();
    }

    /// Bytes this end uses.
    ///
    /// ```
    /// use bento_primitives::DoubleStack;
    /// use core::mem::MaybeUninit;
    ///
    /// let mut buf = [MaybeUninit::uninit(); 256];
    /// let mut stack = DoubleStack::new(&mut buf);
    /// assert_eq!(stack.split().0.used(), 0);
    /// ```
    #[must_use]
    pub fn used(&self) -> usize {
        self.end.used()
    }
}

impl fmt::Debug for EndMut<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.end, f)
    }
}

// SAFETY: forwards to the `StackEnd` it holds, which upholds the contract.
unsafe impl RawAlloc for EndMut<'_> {
    #[inline]
    fn alloc_raw(&self, layout: Layout) -> Result<NonNull<u8>, AllocError> {
        self.end.alloc_raw(layout)
    }

    unsafe fn dealloc_raw(&self, ptr: NonNull<u8>, layout: Layout) {
        // SAFETY: the caller's contract, for the same end.
        unsafe { self.end.dealloc_raw(ptr, layout) }
    }

    unsafe fn resize_in_place(&self, ptr: NonNull<u8>, old: Layout, new_size: usize) -> bool {
        // SAFETY: the caller's contract, for the same end.
        unsafe { self.end.resize_in_place(ptr, old, new_size) }
    }
}

impl_allocator!(impl['a, 'b] for &'b EndMut<'a>);

/// Splits `ends` into its two ends, each held exclusively.
pub(crate) fn split<'a>(ends: &'a Ends, backing: &'a dyn Backing) -> (EndMut<'a>, EndMut<'a>) {
    (
        EndMut {
            end: StackEnd::new(ends, backing, Dir::Up),
        },
        EndMut {
            end: StackEnd::new(ends, backing, Dir::Down),
        },
    )
}

/// A double-ended stack over a caller's buffer, for level loading: level-resident
/// data from the [`lower`](Self::lower) end, temporaries from the [`upper`](Self::upper)
/// end (which grows down), and no fragmentation between them.
///
/// ```text
///  base                                                            end
///   | hdr | level A | hdr | level B |  ->   free   <-  | hdr | tmp | hdr | tmp |
///                                 lower top         upper top
/// ```
///
/// Each end is a LIFO [`Stack`](crate::Stack) of its own, with a 16-byte header per
/// block, deferred out-of-order frees and checked [`Marker`]s; the ends fail with
/// [`AllocError`] where they would meet (16 bytes above the lower end's top stay free
/// for its next header, as in a `Stack`). The lower end's newest block grows and
/// shrinks in place; the upper end's newest block can only use its alignment slack (its
/// start cannot move), so it grows by moving. Offsets are 32-bit: at most 4 GiB of the
/// buffer is used.
///
/// ```
/// use bento_primitives::DoubleStack;
/// use core::alloc::Layout;
/// use core::mem::MaybeUninit;
///
/// let mut buf = [MaybeUninit::uninit(); 1024];
/// let mut stack = DoubleStack::new(&mut buf);
/// let before = stack.upper().marker();
/// stack.lower().alloc_layout(Layout::new::<[u8; 200]>()).unwrap();
/// stack.upper().alloc_layout(Layout::new::<[u8; 300]>()).unwrap();
/// assert_eq!(stack.free_between(), stack.capacity() - (16 + 200) - (16 + 304));
/// stack.rollback(before).unwrap();
/// assert_eq!(stack.upper().used(), 0);
/// ```
///
/// `rollback` and `reset` need `&mut self`, so they cannot run while a block is
/// borrowed:
///
/// ```compile_fail,E0502
/// use bento_primitives::DoubleStack;
/// use core::mem::MaybeUninit;
///
/// let mut buf = [MaybeUninit::uninit(); 256];
/// let mut stack = DoubleStack::new(&mut buf);
/// let m = stack.upper().marker();
/// let b = allocator_api2::boxed::Box::new_in(1u32, stack.upper());
/// stack.rollback(m).unwrap(); // error: `stack` is borrowed by `b`
/// drop(b);
/// ```
pub struct DoubleStack<'buf> {
    ends: Ends,
    _buf: PhantomData<&'buf mut [MaybeUninit<u8>]>,
}

impl<'buf> DoubleStack<'buf> {
    /// A double-ended stack over `buf`.
    #[must_use]
    pub fn new(buf: &'buf mut [MaybeUninit<u8>]) -> Self {
        let (base, cap) = grained(buf);
        Self {
            // SAFETY: `grained` gives an 8-aligned part of the borrowed buffer, at most
            // `MAX_SPAN` long and ending below `ADDR_CEILING`; all of it is ready.
            ends: unsafe { Ends::new(base, cap, cap, 0, cap as usize >= HEADER) },
            _buf: PhantomData,
        }
    }

    /// The lower end, growing up from the start of the buffer.
    ///
    /// ```
    /// use bento_primitives::DoubleStack;
    /// use core::mem::MaybeUninit;
    ///
    /// let mut buf = [MaybeUninit::uninit(); 256];
    /// let stack = DoubleStack::new(&mut buf);
    /// let a = stack.lower().alloc_layout(core::alloc::Layout::new::<u64>()).unwrap();
    /// let b = stack.lower().alloc_layout(core::alloc::Layout::new::<u64>()).unwrap();
    /// assert!(b > a);
    /// ```
    #[must_use]
    pub fn lower(&self) -> StackEnd<'_> {
        StackEnd::new(&self.ends, &Fixed, Dir::Up)
    }

    /// The upper end, growing down from the end of the buffer.
    ///
    /// ```
    /// use bento_primitives::DoubleStack;
    /// use core::mem::MaybeUninit;
    ///
    /// let mut buf = [MaybeUninit::uninit(); 256];
    /// let stack = DoubleStack::new(&mut buf);
    /// let a = stack.upper().alloc_layout(core::alloc::Layout::new::<u64>()).unwrap();
    /// let b = stack.upper().alloc_layout(core::alloc::Layout::new::<u64>()).unwrap();
    /// assert!(b < a);
    /// ```
    #[must_use]
    pub fn upper(&self) -> StackEnd<'_> {
        StackEnd::new(&self.ends, &Fixed, Dir::Down)
    }

    /// Both ends, each held exclusively, so one can roll back while the other's blocks
    /// stay borrowed (see [`EndMut`]).
    ///
    /// ```
    /// use bento_primitives::DoubleStack;
    /// use core::mem::MaybeUninit;
    ///
    /// let mut buf = [MaybeUninit::uninit(); 256];
    /// let mut stack = DoubleStack::new(&mut buf);
    /// let (lower, mut upper) = stack.split();
    /// let keep = allocator_api2::boxed::Box::new_in(7u64, &lower);
    /// upper.reset();
    /// assert_eq!(*keep, 7);
    /// ```
    pub fn split(&mut self) -> (EndMut<'_>, EndMut<'_>) {
        split(&self.ends, &Fixed)
    }

    /// Frees every block allocated at the marker's end after it was taken, and the
    /// blocks beneath it freed out of order.
    ///
    /// # Errors
    ///
    /// [`MarkerError`] when the marker belongs to neither end, lies above its end's
    /// top, or was invalidated; nothing changes then.
    ///
    /// ```
    /// use bento_primitives::{DoubleStack, MarkerError};
    /// use core::mem::MaybeUninit;
    ///
    /// let mut buf = [MaybeUninit::uninit(); 256];
    /// let mut stack = DoubleStack::new(&mut buf);
    /// let m = stack.lower().marker();
    /// stack.lower().alloc_layout(core::alloc::Layout::new::<u64>()).unwrap();
    /// stack.rollback(m).unwrap();
    /// assert_eq!(stack.lower().used(), 0);
    /// ```
    pub fn rollback(&mut self, marker: Marker) -> Result<(), MarkerError> {
        self.ends.rollback(marker)
    }

    /// Frees both ends and invalidates every marker.
    ///
    /// ```
    /// use bento_primitives::DoubleStack;
    /// use core::mem::MaybeUninit;
    ///
    /// let mut buf = [MaybeUninit::uninit(); 256];
    /// let mut stack = DoubleStack::new(&mut buf);
    /// stack.upper().alloc_layout(core::alloc::Layout::new::<u64>()).unwrap();
    /// stack.reset();
    /// assert_eq!(stack.free_between(), stack.capacity());
    /// ```
    pub fn reset(&mut self) {
        self.ends.end(Dir::Up).reset();
        self.ends.end(Dir::Down).reset();
    }

    /// Bytes between the two tops: the most the next allocation at either end can
    /// take, less its header and alignment, and less the 16 bytes the lower end keeps
    /// above its top for its next header (as a [`Stack`](crate::Stack) does).
    ///
    /// ```
    /// use bento_primitives::DoubleStack;
    /// use core::mem::MaybeUninit;
    ///
    /// let mut buf = [MaybeUninit::uninit(); 256];
    /// let stack = DoubleStack::new(&mut buf);
    /// assert_eq!(stack.free_between(), stack.capacity());
    /// ```
    #[must_use]
    pub fn free_between(&self) -> usize {
        self.ends.free_between()
    }

    /// The usable size of the buffer (its 8-aligned part).
    ///
    /// ```
    /// use bento_primitives::DoubleStack;
    /// use core::mem::MaybeUninit;
    ///
    /// let mut buf = [MaybeUninit::uninit(); 256];
    /// assert!(DoubleStack::new(&mut buf).capacity() >= 248);
    /// ```
    #[must_use]
    pub fn capacity(&self) -> usize {
        self.ends.cap() as usize
    }

    /// Walks both ends' blocks and checks their chains (see
    /// [`Stack::validate`](crate::Stack::validate)) and that the ends have not crossed.
    ///
    /// # Errors
    ///
    /// A description of the first broken rule.
    ///
    /// ```
    /// use bento_primitives::DoubleStack;
    /// use core::mem::MaybeUninit;
    ///
    /// let mut buf = [MaybeUninit::uninit(); 256];
    /// let stack = DoubleStack::new(&mut buf);
    /// stack.lower().alloc_layout(core::alloc::Layout::new::<u64>()).unwrap();
    /// stack.upper().alloc_layout(core::alloc::Layout::new::<u64>()).unwrap();
    /// assert_eq!(stack.validate().unwrap().live_blocks, 2);
    /// ```
    pub fn validate(&self) -> Result<StackReport, LinearCorruption> {
        self.ends.validate()
    }
}

impl fmt::Debug for DoubleStack<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DoubleStack")
            .field("ends", &self.ends)
            .finish()
    }
}
