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
    /// The top before this block was allocated.
    prev_top: u32,
    /// The header offset of the block below (older), or `NONE`.
    prev_last: u32,
    /// The block's sequence number; bit 63 (`FREED`) marks a block freed out of order.
    seq: u64,
}

pub(crate) const HEADER: usize = size_of::<Header>();
const _: () = assert!(HEADER == 16 && align_of::<Header>() == 8);

/// "No block".
const NONE: u32 = u32::MAX;
/// Set in `Header::seq` when the block was freed while not on top.
const FREED: u64 = 1 << 63;
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
/// back to: the end's identity, its generation (a reset starts a new one), the top, and
/// the sequence number of the next block.
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
    generation: u32,
    top: u32,
    seq: u64,
    used: u32,
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
pub(crate) struct Lifo {
    // Invariant: a multiple of 8; up: everything from it to the limit is free; down:
    // everything from the limit to it is free.
    top: Cell<u32>,
    // Invariant: the header offset of the newest block, or `NONE` when there is none.
    last: Cell<u32>,
    // The sequence number of the next block (below `FREED`).
    seq: Cell<u64>,
    // Blocks allocated and not freed.
    live: Cell<usize>,
    generation: Cell<u32>,
    id: u32,
    // Where the top starts: 0 up, the memory's length down.
    origin: u32,
    dir: Dir,
    check: LifoCheck,
}

impl Lifo {
    /// An empty end growing `dir` from `origin`.
    pub(crate) fn new(dir: Dir, origin: u32, check: LifoCheck) -> Self {
        debug_assert!(origin as usize <= MAX_SPAN && (origin as usize).is_multiple_of(GRAIN));
        Self {
            top: Cell::new(origin),
            last: Cell::new(NONE),
            seq: Cell::new(1),
            live: Cell::new(0),
            generation: Cell::new(0),
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            origin,
            dir,
            check,
        }
    }

    #[inline]
    pub(crate) fn top(&self) -> u32 {
        self.top.get()
    }

    pub(crate) fn id(&self) -> u32 {
        self.id
    }

    /// Bytes in use by this end: blocks, headers, padding.
    #[inline]
    pub(crate) fn used(&self) -> usize {
        self.top.get().abs_diff(self.origin) as usize
    }

    pub(crate) fn live(&self) -> usize {
        self.live.get()
    }

    #[inline]
    fn ptr_at(base: NonNull<u8>, offset: u32) -> NonNull<u8> {
        // SAFETY: every offset the end computes lies inside, or one past, the memory
        // `base` starts (the caller's contract on `base`).
        unsafe { base.add(offset as usize) }
    }

    fn header(base: NonNull<u8>, at: u32) -> Header {
        // SAFETY: `at` is the offset of a block's header (from `last` or a chain link),
        // 8-aligned and inside the used part of the memory, written by `push`.
        unsafe { Self::ptr_at(base, at).cast::<Header>().read() }
    }

    fn set_header(base: NonNull<u8>, at: u32, h: Header) {
        // SAFETY: as in `header`; headers are only written by the end, in front of the
        // blocks it hands out.
        unsafe { Self::ptr_at(base, at).cast::<Header>().write(h) }
    }

    /// [`place`](Self::place) for an end growing up, when `layout` is aligned to at
    /// most 8 and at most `FAST_MAX` bytes: the header goes at the (8-aligned) top and
    /// the payload right after it, with no overflow possible (`limit < 4 GiB`).
    #[inline(always)]
    pub(crate) fn place_up_fast(&self, layout: Layout, limit: u32) -> Option<Placed> {
        debug_assert_eq!(self.dir, Dir::Up);
        let size = layout.size();
        if size == 0 || layout.align() > GRAIN || size > FAST_MAX {
            return None;
        }
        let payload = self.top.get() as usize + HEADER;
        let new_top = payload + grain_up(size);
        (new_top <= limit as usize).then_some(Placed {
            payload: payload as u32,
            new_top: new_top as u32,
        })
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
        let top_addr = base_addr + self.top.get() as usize;
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
    #[inline]
    pub(crate) fn push(&self, base: NonNull<u8>, placed: Placed) -> NonNull<u8> {
        let seq = self.seq.get();
        Self::set_header(
            base,
            placed.payload - HEADER as u32,
            Header {
                prev_top: self.top.get(),
                prev_last: self.last.get(),
                seq,
            },
        );
        self.seq.set(seq + 1);
        self.last.set(placed.payload - HEADER as u32);
        self.top.set(placed.new_top);
        self.live.set(self.live.get() + 1);
        Self::ptr_at(base, placed.payload)
    }

    /// The header offset of the block at `ptr`, checked in debug builds.
    fn header_of(&self, base: NonNull<u8>, ptr: NonNull<u8>) -> u32 {
        let offset = ptr.addr().get().wrapping_sub(base.addr().get());
        let (low, high) = match self.dir {
            Dir::Up => (HEADER, self.top.get() as usize),
            Dir::Down => (self.top.get() as usize + HEADER, self.origin as usize),
        };
        debug_assert!(
            offset >= low && offset <= high,
            "{ptr:p} is not a block of this stack (end {})",
            self.id
        );
        (offset - HEADER) as u32
    }

    /// Pops the newest block, whose header is at `at`.
    fn pop(&self, base: NonNull<u8>, at: u32) {
        let h = Self::header(base, at);
        self.top.set(h.prev_top);
        self.last.set(h.prev_last);
    }

    /// Frees the block at `ptr`: pops it when it is the newest (and every block beneath
    /// it freed out of order), marks it otherwise.
    pub(crate) fn free(&self, base: NonNull<u8>, ptr: NonNull<u8>) {
        let at = self.header_of(base, ptr);
        let h = Self::header(base, at);
        assert!(
            h.seq & FREED == 0,
            "Stack: double free of block #{} at {ptr:p}",
            h.seq & !FREED
        );
        if at == self.last.get() {
            self.live.set(self.live.get() - 1);
            self.pop(base, at);
            // Reclaim the blocks beneath that were freed out of order.
            while self.last.get() != NONE && Self::header(base, self.last.get()).seq & FREED != 0 {
                self.pop(base, self.last.get());
            }
            return;
        }
        match self.check {
            LifoCheck::Deferred => {
                self.live.set(self.live.get() - 1);
                Self::set_header(
                    base,
                    at,
                    Header {
                        seq: h.seq | FREED,
                        ..h
                    },
                );
            }
            LifoCheck::Strict => {
                let top_seq = Self::header(base, self.last.get()).seq & !FREED;
                panic!(
                    "Stack (LifoCheck::Strict): block #{} at {ptr:p} freed while block #{top_seq} is on top",
                    h.seq
                );
            }
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
        if at != self.last.get() {
            return None;
        }
        let payload = at as usize + HEADER;
        match self.dir {
            Dir::Up => (new_size <= limit as usize - payload)
                .then(|| (payload + new_size).next_multiple_of(GRAIN) as u32),
            Dir::Down => {
                let room = Self::header(base, at).prev_top as usize - payload;
                (new_size <= room).then_some(self.top.get())
            }
        }
    }

    /// Sets the top after [`resized_top`](Self::resized_top).
    pub(crate) fn set_top(&self, top: u32) {
        self.top.set(top);
    }

    /// A marker at the current top.
    pub(crate) fn marker(&self) -> Marker {
        Marker {
            end: self.id,
            generation: self.generation.get(),
            top: self.top.get(),
            seq: self.seq.get(),
            used: self.used() as u32,
        }
    }

    /// Frees every block allocated after `marker` was taken.
    ///
    /// Checks the marker by walking the blocks allocated since it (the ones it frees),
    /// so it costs O(1) per block freed.
    pub(crate) fn rollback(&self, base: NonNull<u8>, marker: Marker) -> Result<(), MarkerError> {
        if marker.end != self.id {
            return Err(MarkerError::Foreign);
        }
        if marker.generation != self.generation.get() {
            return Err(MarkerError::Stale);
        }
        if marker.used > self.used() as u32 {
            return Err(MarkerError::AboveTop);
        }
        // Walk down the blocks allocated since the marker; where they stop is where the
        // top was when the marker was taken, if nothing below it changed.
        let (mut boundary, mut at, mut live) = (self.top.get(), self.last.get(), 0);
        while at != NONE {
            let h = Self::header(base, at);
            if h.seq & !FREED < marker.seq {
                break;
            }
            live += usize::from(h.seq & FREED == 0);
            boundary = h.prev_top;
            at = h.prev_last;
        }
        if boundary != marker.top {
            return Err(MarkerError::Stale);
        }
        self.top.set(marker.top);
        self.last.set(at);
        self.live.set(self.live.get() - live);
        Ok(())
    }

    /// Frees everything and invalidates every marker.
    pub(crate) fn reset(&self) {
        self.top.set(self.origin);
        self.last.set(NONE);
        self.live.set(0);
        self.generation.set(self.generation.get().wrapping_add(1));
    }

    /// Walks every block from the newest down and checks the chain: headers inside the
    /// used part and in order, sequence numbers decreasing, the chain ending at the
    /// origin, and the live count equal to the counter.
    pub(crate) fn validate(&self, base: NonNull<u8>) -> Result<StackReport, &'static str> {
        let mut report = StackReport::default();
        let (mut boundary, mut at, mut seq_above) = (self.top.get(), self.last.get(), u64::MAX);
        if !(boundary as usize).is_multiple_of(GRAIN) {
            return Err("top not 8-aligned");
        }
        while at != NONE {
            let h = Self::header(base, at);
            let payload = at as usize + HEADER;
            // The block's room: from its payload to the boundary above it (up), or to
            // the top it was placed under (down).
            let room_end = match self.dir {
                Dir::Up if payload > boundary as usize || h.prev_top > at => {
                    return Err("a header lies outside the part its block was placed in");
                }
                Dir::Down if at != boundary || payload > h.prev_top as usize => {
                    return Err("a header lies outside the part its block was placed in");
                }
                Dir::Up => boundary as usize,
                Dir::Down => h.prev_top as usize,
            };
            let seq = h.seq & !FREED;
            if seq >= seq_above || seq >= self.seq.get() {
                return Err("sequence numbers do not decrease down the chain");
            }
            if h.seq & FREED == 0 {
                report.live_blocks += 1;
                report.live_bytes += room_end - payload;
            } else {
                report.deferred_blocks += 1;
            }
            seq_above = seq;
            boundary = h.prev_top;
            at = h.prev_last;
        }
        if boundary != self.origin {
            return Err("the chain does not end at the bottom of the stack");
        }
        if report.live_blocks != self.live.get() {
            return Err("the live-block counter disagrees with the walk");
        }
        Ok(report)
    }
}

impl fmt::Debug for Lifo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Lifo")
            .field("dir", &self.dir)
            .field("used", &self.used())
            .field("live_blocks", &self.live.get())
            .field("check", &self.check)
            .finish()
    }
}
