//! One end of a stack: blocks with headers, LIFO frees, checked markers. [`Stack`]
//! has one end growing up; [`DoubleStack`] and [`DoubleArena`] have a second one
//! growing down from the other side of the same memory.
//!
//! Positions are `u32` offsets from the start of the memory (`base`), for both ends.
//! A block's 16-byte header always lies just below its payload, so a free finds it at
//! `ptr - 16` whichever end the block came from:
//!
//! ```text
//!  lower end, grows up                          upper end, grows down
//!  0 | hdr | A | pad | hdr | B |  top  ...  top | hdr | D | pad | hdr | C | origin
//!                                              ^ the newest header sits at the top
//! ```
//!
//! [`Stack`]: crate::Stack
//! [`DoubleStack`]: crate::DoubleStack
//! [`DoubleArena`]: crate::DoubleArena

use core::alloc::Layout;
use core::cell::Cell;
use core::fmt;
use core::ptr::NonNull;
use core::sync::atomic::{AtomicU32, Ordering};

use crate::alloc_api::AllocError;
use crate::bump::{FAST_MAX, grain_up};

/// The header in front of every block.
#[repr(C)]
#[derive(Clone, Copy)]
struct Header {
    /// The end's state word just before this block was placed (see [`Lifo`]): the top
    /// the block was placed at, and the header offset of the block below (or `NONE`).
    /// Popping the block restores it.
    below: u64,
    /// 0 when the block is placed. A marker taken while the block is the newest writes
    /// a marker identity into the low 63 bits (`MARK_ID`), which tells this block from
    /// a later one placed at the same offset; bit 63 (`FREED`) marks a block freed out
    /// of order.
    mark: u64,
}

pub(crate) const HEADER: usize = size_of::<Header>();
const _: () = assert!(HEADER == 16 && align_of::<Header>() == 8);

/// "No block".
const NONE: u32 = u32::MAX;
/// Set in `Header::mark` when the block was freed while not on top.
const FREED: u64 = 1 << 63;
/// The marker identity in `Header::mark`.
const MARK_ID: u64 = FREED - 1;
/// Block ends are rounded to this, so every header is aligned.
pub(crate) const GRAIN: usize = 8;
/// The largest memory an end works in: offsets and tops must fit a `u32` with room for
/// a header above.
pub(crate) const MAX_SPAN: usize = (u32::MAX as usize - 2 * HEADER) & !(GRAIN - 1);

/// Gives each end its identity, so a marker from another end is refused.
static NEXT_ID: AtomicU32 = AtomicU32::new(1);

/// What a free out of LIFO order does.
///
/// ```
/// use bento_primitives::LifoCheck;
///
/// assert_eq!(LifoCheck::default(), LifoCheck::Deferred);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum LifoCheck {
    /// The block is marked and reclaimed as soon as everything above it is gone.
    #[default]
    Deferred,
    /// The free panics, naming the block freed and the block on top.
    Strict,
}

/// A position in a [`Stack`](crate::Stack) (or one end of a
/// [`DoubleStack`](crate::DoubleStack) or [`DoubleArena`](crate::DoubleArena)) to roll
/// back to: the end's identity, its epoch when the marker was taken, its top and
/// newest block then, and the mark identity written into that block. Identities are
/// 32-bit and never reused: creating more than 2³² − 1 stack ends (`Stack`, or either
/// end of a `DoubleStack` or `DoubleArena`) in one process panics.
///
/// ```
/// use bento_primitives::Stack;
/// use core::mem::MaybeUninit;
///
/// let mut buf = [MaybeUninit::uninit(); 1024];
/// let mut stack = Stack::new(&mut buf);
/// let m = stack.marker();
/// stack.alloc_layout(core::alloc::Layout::new::<[u64; 4]>()).unwrap();
/// stack.rollback(m).unwrap();
/// assert_eq!(stack.used(), 0);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Marker {
    end: u32,
    used: u32,
    epoch: u64,
    state: u64,
    // The `MARK_ID` bits of the newest block's header when the marker was taken (0
    // when the end had no block).
    mark: u64,
}

impl Marker {
    /// What `used()` of its end was when the marker was taken, and will be after a
    /// rollback to it.
    ///
    /// ```
    /// use bento_primitives::Stack;
    /// use core::mem::MaybeUninit;
    ///
    /// let mut buf = [MaybeUninit::uninit(); 256];
    /// let mut stack = Stack::new(&mut buf);
    /// stack.alloc_layout(core::alloc::Layout::new::<u64>()).unwrap();
    /// let m = stack.marker();
    /// stack.alloc_layout(core::alloc::Layout::new::<u64>()).unwrap();
    /// stack.rollback(m).unwrap();
    /// assert_eq!(stack.used(), m.used());
    /// ```
    #[must_use]
    pub fn used(&self) -> usize {
        self.used as usize
    }

    /// The identity of the end the marker was taken on.
    pub(crate) fn end_id(&self) -> u32 {
        self.end
    }
}

/// Why a rollback was refused; the allocator is unchanged.
///
/// ```
/// use bento_primitives::{MarkerError, Stack};
/// use core::mem::MaybeUninit;
///
/// let (mut a, mut b) = ([MaybeUninit::uninit(); 256], [MaybeUninit::uninit(); 256]);
/// let mut one = Stack::new(&mut a);
/// let two = Stack::new(&mut b);
/// assert_eq!(one.rollback(two.marker()), Err(MarkerError::Foreign));
/// assert_eq!(MarkerError::Foreign.to_string(), "the marker belongs to another stack");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MarkerError {
    /// The marker was taken on another stack (or the other end of a double stack).
    Foreign,
    /// The marker lies above the current top (what was below it has been freed).
    AboveTop,
    /// A rollback to an earlier marker, a reset, or a change to the block below the
    /// marker has invalidated it.
    Stale,
}

impl fmt::Display for MarkerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Foreign => "the marker belongs to another stack",
            Self::AboveTop => "the marker lies above the current top",
            Self::Stale => "the marker was invalidated by an earlier rollback or reset",
        })
    }
}

impl core::error::Error for MarkerError {}

/// What `validate()` counted by walking the blocks of a stack (or of both ends of a
/// double stack).
///
/// ```
/// use bento_primitives::Stack;
/// use core::mem::MaybeUninit;
///
/// let mut buf = [MaybeUninit::uninit(); 256];
/// let stack = Stack::new(&mut buf);
/// stack.alloc_layout(core::alloc::Layout::new::<u64>()).unwrap();
/// let report = stack.validate().unwrap();
/// assert_eq!(report.live_blocks, 1);
/// assert!(report.live_bytes >= 8);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StackReport {
    /// Blocks allocated and not freed.
    pub live_blocks: usize,
    /// Their bytes, each from its start to where the next block's header may begin
    /// (rounding and alignment slack included).
    pub live_bytes: usize,
    /// Blocks freed out of order and not reclaimed yet.
    pub deferred_blocks: usize,
}

impl core::ops::Add for StackReport {
    type Output = Self;

    fn add(self, other: Self) -> Self {
        Self {
            live_blocks: self.live_blocks + other.live_blocks,
            live_bytes: self.live_bytes + other.live_bytes,
            deferred_blocks: self.deferred_blocks + other.deferred_blocks,
        }
    }
}

/// Which way an end grows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Dir {
    /// From offset 0 towards higher addresses.
    Up,
    /// From its origin towards lower addresses.
    Down,
}

/// Where a new block goes; [`Lifo::push`] makes it so.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Placed {
    /// The payload's offset.
    pub(crate) payload: u32,
    /// The top once the block is in: the rounded end (up) or the header (down).
    pub(crate) new_top: u32,
}

/// One end's state. Every method takes `base`, the start of the memory, whose
/// provenance covers every offset the end uses.
///
/// The top and the newest block's header offset share one word (`state`), which is
/// exactly what a block's header keeps of the state before it: placing a block writes
/// the old word into its header and sets the new one; popping it copies the header's
/// word back. The word holds the top and the distance from the newest header to the
/// top (see [`pack`]), so that the fast path's new word is the old top plus a constant
/// of the request's size: one addition between the load of the word and its store.
///
/// Markers are checked in two ways. The **epoch** moves on whenever the end lowers its
/// top or changes its newest block's size (a pop, a rollback, an in-place resize, a
/// reset), so a rollback to a marker of the current epoch is valid at once: only
/// placements happened since it (O(1), the frame pattern). Any other marker is checked
/// by popping, on paper, the blocks placed above the marker's top and comparing the
/// state this reaches with the marker's; the newest block at the marker must also
/// still carry the **mark** the marker wrote into its header, which tells it from a
/// block placed later at the same offset after it was freed (placements write a zero
/// mark).
pub(crate) struct Lifo {
    // Invariant: `pack(top, last)`. `top` is a multiple of 8; up, everything from it
    // to the limit is free; down, everything from the limit to it is free. `last` is
    // the header offset of the newest block, or `NONE` when there is none (down, it
    // equals `top` whenever there is a block).
    state: Cell<u64>,
    // Moves on at every pop, rollback, in-place resize and reset.
    epoch: Cell<u64>,
    // Invariant: above every mark identity in a header, and below `FREED`; mark
    // identities increase up the chain.
    next_mark: Cell<u64>,
    // Markers of an epoch below this were taken before the last reset.
    floor: Cell<u64>,
    id: u32,
    // Where the top starts: 0 up, the memory's length down.
    origin: u32,
    dir: Dir,
    check: LifoCheck,
}

/// The state word of an end with top `top` and newest header `last`: the top in the
/// low half, `top - last` (wrapping) in the high half. Up, a block of `d` bytes with
/// its header at the old top gives `pack(top + d, top) = top + (d | d << 32)`; down,
/// the newest header is the top (distance 0); with no block, `last = NONE` decodes
/// from the wrapped distance `top + 1`.
#[inline(always)]
const fn pack(top: u32, last: u32) -> u64 {
    top as u64 | (top.wrapping_sub(last) as u64) << 32
}

/// The top of a state word.
#[inline(always)]
const fn top_of(state: u64) -> u32 {
    state as u32
}

/// The newest header offset of a state word.
#[inline(always)]
const fn last_of(state: u64) -> u32 {
    top_of(state).wrapping_sub((state >> 32) as u32)
}

impl Lifo {
    /// An empty end growing `dir` from `origin`.
    pub(crate) fn new(dir: Dir, origin: u32, check: LifoCheck) -> Self {
        debug_assert!(origin as usize <= MAX_SPAN && (origin as usize).is_multiple_of(GRAIN));
        Self {
            state: Cell::new(pack(origin, NONE)),
            epoch: Cell::new(0),
            next_mark: Cell::new(1),
            floor: Cell::new(0),
            // An identity must never repeat while its marker may be alive: a marker of
            // one end accepted by another would give it a foreign state word.
            id: NEXT_ID
                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |id| id.checked_add(1))
                .expect("bento: 2^32 - 1 stack ends created in this process; a stack's marker identity would repeat"),
            origin,
            dir,
            check,
        }
    }

    #[inline]
    pub(crate) fn top(&self) -> u32 {
        top_of(self.state.get())
    }

    #[inline]
    fn last(&self) -> u32 {
        last_of(self.state.get())
    }

    pub(crate) fn id(&self) -> u32 {
        self.id
    }

    /// Bytes in use by this end: blocks, headers, padding.
    #[inline]
    pub(crate) fn used(&self) -> usize {
        self.top().abs_diff(self.origin) as usize
    }

    /// Moves the epoch on: markers of earlier epochs are checked by the walk.
    #[inline]
    fn next_epoch(&self) {
        self.epoch.set(self.epoch.get() + 1);
    }

    /// Blocks allocated and not freed, counted by walking the chain.
    pub(crate) fn live(&self, base: NonNull<u8>) -> usize {
        let mut live = 0;
        let mut at = self.last();
        while at != NONE {
            let h = Self::header(base, at);
            live += usize::from(h.mark & FREED == 0);
            at = last_of(h.below);
        }
        live
    }

    #[inline]
    fn ptr_at(base: NonNull<u8>, offset: u32) -> NonNull<u8> {
        // SAFETY: every offset the end computes lies inside, or one past, the memory
        // `base` starts (the caller's contract on `base`).
        unsafe { base.add(offset as usize) }
    }

    #[inline]
    fn header(base: NonNull<u8>, at: u32) -> Header {
        // SAFETY: `at` is the offset of a block's header (from the state or a chain
        // link), 8-aligned and inside the used part of the memory, written by `push`.
        unsafe { Self::ptr_at(base, at).cast::<Header>().read() }
    }

    #[inline]
    fn set_header(base: NonNull<u8>, at: u32, h: Header) {
        // SAFETY: as in `header`; headers are only written by the end, in front of the
        // blocks it hands out.
        unsafe { Self::ptr_at(base, at).cast::<Header>().write(h) }
    }

    /// [`place`](Self::place) and [`push`](Self::push) in one for an end growing up,
    /// when `layout` is aligned to at most 8 and at most `FAST_MAX` bytes: the header
    /// goes at the (8-aligned) top and the payload right after it, with no overflow
    /// possible (`limit < 4 GiB`). `None` when the layout is not such or does not fit.
    #[inline(always)]
    pub(crate) fn push_up_fast(
        &self,
        base: NonNull<u8>,
        layout: Layout,
        limit: u32,
    ) -> Option<NonNull<u8>> {
        debug_assert_eq!(self.dir, Dir::Up);
        let size = layout.size();
        if size == 0 || layout.align() > GRAIN || size > FAST_MAX {
            return None;
        }
        let state = self.state.get();
        let top = top_of(state) as usize;
        let step = HEADER + grain_up(size);
        let new_top = top + step;
        if new_top > limit as usize {
            return None;
        }
        // SAFETY: `top + HEADER <= new_top <= limit`: the header (8-aligned, as the top
        // is) and the payload lie inside the memory, above the top.
        unsafe {
            let header = base.add(top);
            header.cast::<Header>().write(Header {
                below: state,
                mark: 0,
            });
            // `pack(new_top, top)`: `new_top < 2^32`, so the low half does not carry.
            self.state
                .set(top as u64 + (step as u64 | (step as u64) << 32));
            Some(header.add(HEADER))
        }
    }

    /// Where a block for `layout` (of non-zero size) goes, given that this end may not
    /// pass `limit` (the other end's top, or the end of the memory).
    #[inline]
    pub(crate) fn place(
        &self,
        base: NonNull<u8>,
        layout: Layout,
        limit: u32,
    ) -> Result<Placed, AllocError> {
        debug_assert!(layout.size() != 0);
        let base_addr = base.addr().get();
        let top_addr = base_addr + self.top() as usize;
        let align = layout.align().max(GRAIN);
        match self.dir {
            Dir::Up => {
                // The payload: the first aligned address with room for the header.
                let at = top_addr + HEADER;
                let payload = at
                    .checked_add(at.wrapping_neg() & (align - 1))
                    .ok_or(AllocError)?
                    - base_addr;
                let end = payload.checked_add(layout.size()).ok_or(AllocError)?;
                if end > limit as usize {
                    return Err(AllocError);
                }
                Ok(Placed {
                    payload: payload as u32,
                    // `end <= limit`, a multiple of 8: the rounding stays inside.
                    new_top: end.next_multiple_of(GRAIN) as u32,
                })
            }
            Dir::Down => {
                let payload = top_addr.checked_sub(layout.size()).ok_or(AllocError)? & !(align - 1);
                let header = payload.checked_sub(HEADER).ok_or(AllocError)?;
                if header < base_addr + limit as usize {
                    return Err(AllocError);
                }
                Ok(Placed {
                    payload: (payload - base_addr) as u32,
                    new_top: (header - base_addr) as u32,
                })
            }
        }
    }

    /// Writes the header of the block `placed` and makes it the newest.
    #[inline(always)]
    pub(crate) fn push(&self, base: NonNull<u8>, placed: Placed) -> NonNull<u8> {
        let at = placed.payload - HEADER as u32;
        Self::set_header(
            base,
            at,
            Header {
                below: self.state.get(),
                mark: 0,
            },
        );
        self.state.set(pack(placed.new_top, at));
        Self::ptr_at(base, placed.payload)
    }

    /// The header offset of the block at `ptr`, checked in debug builds.
    fn header_of(&self, base: NonNull<u8>, ptr: NonNull<u8>) -> u32 {
        let offset = ptr.addr().get().wrapping_sub(base.addr().get());
        let (low, high) = match self.dir {
            Dir::Up => (HEADER, self.top() as usize),
            Dir::Down => (self.top() as usize + HEADER, self.origin as usize),
        };
        debug_assert!(
            offset >= low && offset <= high,
            "{ptr:p} is not a block of this stack (end {})",
            self.id
        );
        (offset - HEADER) as u32
    }

    /// The position of the block whose header is at `at` in the chain, counting from
    /// 1 at the bottom (for messages; walks the chain).
    #[cold]
    fn number(&self, base: NonNull<u8>, at: u32) -> usize {
        let (mut depth, mut below_it, mut cur) = (0, 0, self.last());
        while cur != NONE {
            depth += 1;
            if cur == at {
                below_it = depth;
            }
            cur = last_of(Self::header(base, cur).below);
        }
        depth + 1 - below_it
    }

    /// Frees the block at `ptr`: pops it when it is the newest (and every block beneath
    /// it freed out of order), marks it otherwise.
    pub(crate) fn free(&self, base: NonNull<u8>, ptr: NonNull<u8>) {
        let at = self.header_of(base, ptr);
        let h = Self::header(base, at);
        if h.mark & FREED != 0 {
            panic!(
                "Stack: double free of block #{} at {ptr:p}",
                self.number(base, at)
            );
        }
        if at == self.last() {
            let mut state = h.below;
            // Reclaim the blocks beneath that were freed out of order.
            while last_of(state) != NONE {
                let below = Self::header(base, last_of(state));
                if below.mark & FREED == 0 {
                    break;
                }
                state = below.below;
            }
            self.state.set(state);
            self.next_epoch();
            return;
        }
        match self.check {
            LifoCheck::Deferred => Self::set_header(
                base,
                at,
                Header {
                    mark: h.mark | FREED,
                    ..h
                },
            ),
            LifoCheck::Strict => panic!(
                "Stack (LifoCheck::Strict): block #{} at {ptr:p} freed while block #{} is on top",
                self.number(base, at),
                self.number(base, self.last())
            ),
        }
    }

    /// The top after resizing the block at `ptr` to `new_size` bytes in place, or
    /// `None` when it is not the newest block or there is no room below `limit`. Up,
    /// the newest block's end moves; down, its start is fixed and the block can only
    /// use the slack up to the block above it, so the top stays.
    pub(crate) fn resized_top(
        &self,
        base: NonNull<u8>,
        ptr: NonNull<u8>,
        new_size: usize,
        limit: u32,
    ) -> Option<u32> {
        let at = self.header_of(base, ptr);
        if at != self.last() {
            return None;
        }
        let payload = at as usize + HEADER;
        match self.dir {
            Dir::Up => (new_size <= limit as usize - payload)
                .then(|| (payload + new_size).next_multiple_of(GRAIN) as u32),
            Dir::Down => {
                let room = top_of(Self::header(base, at).below) as usize - payload;
                (new_size <= room).then_some(self.top())
            }
        }
    }

    /// Sets the top after [`resized_top`](Self::resized_top): a new epoch, since a
    /// marker taken above the newest block no longer lies at its end.
    pub(crate) fn set_top(&self, top: u32) {
        self.state.set(pack(top, self.last()));
        self.next_epoch();
    }

    /// A marker at the current top. Marks the newest block (once: later markers on
    /// the same block share its mark).
    pub(crate) fn marker(&self, base: NonNull<u8>) -> Marker {
        let state = self.state.get();
        let last = last_of(state);
        let mark = if last == NONE {
            0
        } else {
            let h = Self::header(base, last);
            if h.mark & MARK_ID == 0 {
                let id = self.next_mark.get();
                self.next_mark.set(id + 1);
                Self::set_header(
                    base,
                    last,
                    Header {
                        mark: h.mark | id,
                        ..h
                    },
                );
                id
            } else {
                h.mark & MARK_ID
            }
        };
        Marker {
            end: self.id,
            used: self.used() as u32,
            epoch: self.epoch.get(),
            state,
            mark,
        }
    }

    /// Whether a block whose header is at `at` was placed above a marker at `top`.
    #[inline]
    fn above(&self, at: u32, top: u32) -> bool {
        at != NONE
            && match self.dir {
                Dir::Up => at >= top,
                Dir::Down => at < top,
            }
    }

    /// Frees every block allocated after `marker` was taken.
    ///
    /// O(1) when the end has only placed blocks since the marker was taken; otherwise
    /// the marker is checked by walking the blocks above it (the ones it frees), at
    /// O(1) per block.
    pub(crate) fn rollback(&self, base: NonNull<u8>, marker: Marker) -> Result<(), MarkerError> {
        if marker.end != self.id {
            return Err(MarkerError::Foreign);
        }
        if marker.epoch < self.floor.get() {
            return Err(MarkerError::Stale);
        }
        if marker.used as usize > self.used() {
            return Err(MarkerError::AboveTop);
        }
        if marker.epoch != self.epoch.get() {
            // Pop, on paper, the blocks placed above the marker's top; if nothing below
            // it changed, that gives back its state, with its newest block still the
            // one it marked.
            let top = top_of(marker.state);
            let mut state = self.state.get();
            while self.above(last_of(state), top) {
                state = Self::header(base, last_of(state)).below;
            }
            let last = last_of(state);
            if state != marker.state
                || (last != NONE && Self::header(base, last).mark & MARK_ID != marker.mark)
            {
                return Err(MarkerError::Stale);
            }
        }
        self.state.set(marker.state);
        self.next_epoch();
        Ok(())
    }

    /// Frees everything and invalidates every marker.
    pub(crate) fn reset(&self) {
        self.state.set(pack(self.origin, NONE));
        self.next_epoch();
        self.floor.set(self.epoch.get());
    }

    /// Walks every block from the newest down and checks the chain: headers inside the
    /// used part and in order, mark identities decreasing down the chain and below the
    /// next one to be given, and the chain ending at the origin.
    pub(crate) fn validate(&self, base: NonNull<u8>) -> Result<StackReport, &'static str> {
        let mut report = StackReport::default();
        let (mut boundary, mut at) = (self.top(), self.last());
        let mut mark_above = self.next_mark.get();
        if !(boundary as usize).is_multiple_of(GRAIN) {
            return Err("top not 8-aligned");
        }
        if self.floor.get() > self.epoch.get() || mark_above == 0 || mark_above > FREED {
            return Err("the epoch is below the last reset's, or the next mark out of range");
        }
        while at != NONE {
            let h = Self::header(base, at);
            let (prev_top, payload) = (top_of(h.below), at as usize + HEADER);
            // The block's room: from its payload to the boundary above it (up), or to
            // the top it was placed under (down).
            let room_end = match self.dir {
                Dir::Up if payload > boundary as usize || prev_top > at => {
                    return Err("a header lies outside the part its block was placed in");
                }
                Dir::Down if at != boundary || payload > prev_top as usize => {
                    return Err("a header lies outside the part its block was placed in");
                }
                Dir::Up => boundary as usize,
                Dir::Down => prev_top as usize,
            };
            let mark = h.mark & MARK_ID;
            if mark != 0 {
                if mark >= mark_above {
                    return Err(
                        "a block's mark is not below the next mark or the mark of a newer block",
                    );
                }
                mark_above = mark;
            }
            if h.mark & FREED == 0 {
                report.live_blocks += 1;
                report.live_bytes += room_end - payload;
            } else {
                report.deferred_blocks += 1;
            }
            boundary = prev_top;
            at = last_of(h.below);
        }
        if boundary != self.origin {
            return Err("the chain does not end at the bottom of the stack");
        }
        Ok(report)
    }
}

impl fmt::Debug for Lifo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Lifo")
            .field("dir", &self.dir)
            .field("used", &self.used())
            .field("check", &self.check)
            .finish()
    }
}
