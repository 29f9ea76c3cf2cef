//! One end of a stack: blocks with headers, LIFO frees, checked markers. [`Stack`]
//! has one end growing up; [`DoubleStack`] and [`DoubleArena`] have a second one
//! growing down from the other side of the same memory.
//!
//! Positions are `u32` offsets from the start of the memory (`base`), for both ends;
//! only the top is kept as a pointer, for the allocation fast path. A block's 16-byte
//! header always lies just below its payload, so a free finds it at `ptr - 16`
//! whichever end the block came from. An end growing up keeps the next block's header
//! waiting at its top (`wait`):
//!
//! ```text
//!  lower end, grows up                                 upper end, grows down
//!  0 | hdr | A | pad | hdr | B | wait |  ...  top | hdr | D | pad | hdr | C | origin
//!                                ^ top           ^ the newest header sits at the top
//! ```
//!
//! [`Stack`]: crate::Stack
//! [`DoubleStack`]: crate::DoubleStack
//! [`DoubleArena`]: crate::DoubleArena

pub(crate) mod markers;
pub(crate) mod validate;

use core::alloc::Layout;
use core::cell::Cell;
use core::fmt;
use core::ptr::NonNull;
use core::sync::atomic::{AtomicU32, Ordering};

use crate::linear::bump::{FAST_MAX, grain_up};
use bento_pages::AllocError;

/// The header in front of every block.
#[repr(C)]
#[derive(Clone, Copy)]
struct Header {
    /// Where the end stood just before this block was placed, relative to this header
    /// (see [`Lifo`]): the low half is the gap then (`NONE` when the end had no block),
    /// the high half the distance from this header back to the top then (the padding
    /// the block's alignment needed: 0 on the fast path). Popping the block restores
    /// both.
    below: u64,
    /// 0 when the block is placed. A marker taken while the block is the newest writes
    /// a marker identity into the low 63 bits (`MARK_ID`), which tells this block from
    /// a later one placed at the same offset; bit 63 (`FREED`) marks a block freed out
    /// of order.
    mark: u64,
}

impl Header {
    /// The `below` word of a block placed `pad` bytes from the top, with `gap` the
    /// end's gap at that moment.
    #[inline(always)]
    const fn below(gap: u32, pad: u32) -> u64 {
        gap as u64 | (pad as u64) << 32
    }

    /// The gap when the block was placed.
    #[inline(always)]
    const fn gap(&self) -> u32 {
        self.below as u32
    }

    /// The distance from the header to the top when the block was placed.
    #[inline(always)]
    const fn pad(&self) -> u32 {
        (self.below >> 32) as u32
    }
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
/// Where the memory of every end lies below: a top plus a header and a fast-path block,
/// and that again, cannot wrap (the fast paths add without checking). Memory in the top
/// 128 KiB of the address space goes unused; only a target whose whole address space is
/// usable (wasm32 with 4 GiB of memory) can lose any.
pub(crate) const ADDR_CEILING: usize = usize::MAX - 2 * (HEADER + FAST_MAX);

/// The largest memory an end works in: offsets and tops must fit a `u32` with room for
/// a header above.
pub(crate) const MAX_SPAN: usize = (u32::MAX as usize - 2 * HEADER) & !(GRAIN - 1);

/// Gives each end its identity, so a marker from another end is refused.
static NEXT_ID: AtomicU32 = AtomicU32::new(1);

/// A fresh stack-end identity from [`NEXT_ID`].
///
/// # Panics
///
/// Once 2^32 - 1 have been handed out: a stack's marker identity would repeat.
fn next_id() -> u32 {
    let mut id = NEXT_ID.load(Ordering::Relaxed);
    loop {
        let next = id.checked_add(1).expect(
            "bento: 2^32 - 1 stack ends created in this process; a stack's marker identity would repeat",
        );
        match NEXT_ID.compare_exchange_weak(id, next, Ordering::Relaxed, Ordering::Relaxed) {
            Ok(_) => return id,
            Err(now) => id = now,
        }
    }
}

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

/// Which way an end grows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Dir {
    /// From offset 0 towards higher addresses.
    Up,
    /// From its origin towards lower addresses.
    Down,
}

/// Writes `h` at `at` as one 16-byte store where the target has one (SSE2 on x86_64),
/// so that the fast path costs one store for it, not two (LLVM splits the plain write
/// into two 8-byte stores of immediates; measured in docs/benchmarks.md).
///
/// # Safety
///
/// The caller must ensure that `at` is valid for writing 16 bytes and 8-aligned.
#[inline(always)]
unsafe fn write_header(at: NonNull<u8>, h: Header) {
    #[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
    // SAFETY: SSE2 is enabled (the cfg); the caller makes the 16 bytes at `at`
    // writable (the store needs no alignment). The value is two integers, no pointer.
    unsafe {
        use core::arch::x86_64::{_mm_set_epi64x, _mm_storeu_si128};
        _mm_storeu_si128(
            at.as_ptr().cast(),
            _mm_set_epi64x(h.mark as i64, h.below as i64),
        );
    }
    #[cfg(not(all(target_arch = "x86_64", target_feature = "sse2")))]
    // SAFETY: the caller's contract; `Header` is 8-aligned.
    unsafe {
        at.cast::<Header>().write(h);
    }
}

/// Where a new block goes; [`Lifo::push`] makes it so.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Placed {
    /// The payload's offset.
    pub(crate) payload: u32,
    /// The top once the block is in: the rounded end (up) or the header (down).
    pub(crate) new_top: u32,
}

/// Where an end stands, as offsets: what a [`Marker`] records and a rollback restores.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Pos {
    /// The top.
    top: u32,
    /// How far the newest header lies from the top, `NONE` when the end has no block.
    gap: u32,
}

/// One end's state, over memory starting at `base`.
///
/// The end keeps only its top, as a pointer. Where the newest block's header lies
/// follows from the **gap**, its distance from the top: down, the newest header is the
/// top (gap 0); up, the gap is the newest block's length, and it is kept in memory, in
/// the **waiting header**: the 16 bytes at the top already hold the header of the next
/// block placed there (the gap and a zero mark). An end at its origin has no block
/// (every block moves the top by at least its 16-byte header), so its gap is `NONE`
/// without a read, and only an end made `eager` keeps a waiting header there too.
///
/// A block's header records the gap and its distance from the top as they were when
/// it was placed, relative to itself. So the fast path (up, aligned to at most 8,
/// header at the top) finds its header already written, and writes only the next
/// waiting header (the block's length and a zero mark: a constant of the request)
/// and the new top: no offset is converted and the memory's start is not read.
/// Popping a block restores the top and writes the waiting header there; everything
/// else (markers, walks, messages) works in offsets from `base`. The price is 16 bytes
/// above the top that an up end cannot use.
///
/// Markers are checked in two ways. The **epoch** moves on whenever the end lowers its
/// top or changes its newest block's size (a pop, a rollback, an in-place resize, a
/// reset), so a rollback to a marker of the current epoch is valid at once: only
/// placements happened since it (O(1), the frame pattern). Any other marker is checked
/// by popping, on paper, the blocks placed above the marker's top and comparing the
/// position this reaches with the marker's; the newest block at the marker must also
/// still carry the **mark** the marker wrote into its header, which tells it from a
/// block placed later at the same offset after it was freed (placements write a zero
/// mark).
pub(crate) struct Lifo {
    // Invariant: 8-aligned; its provenance covers every offset the end uses (up to
    // `MAX_SPAN` bytes).
    base: NonNull<u8>,
    // Invariant: `base` plus the top offset, a multiple of 8; up, everything from it to
    // the limit is free, and the 16 bytes at it hold the waiting header (`below` the
    // gap with no padding, mark 0) unless it is the origin of an end that is not
    // eager, so `top + waiting_room() <= limit` (and usable memory); down, everything
    // from the limit to it is free.
    top: Cell<NonNull<u8>>,
    // Whether an up end keeps a waiting header at its origin too (a `Stack`, whose
    // fast path needs one there, and a `DoubleStack`'s lower end; a `DoubleArena`'s
    // does not, since it may not have committed that memory).
    eager: bool,
    // The address where the top is bare (`is_bare`): the origin, or 0 (never a top)
    // for an eager end.
    bare_at: usize,
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

impl Lifo {
    /// An empty end over the memory at `base`, growing `dir` from `origin`; an `eager`
    /// end (up only) writes its waiting header at the origin now.
    ///
    /// # Safety
    ///
    /// `base` is 8-aligned and its provenance covers, for as long as the end is used,
    /// every offset the end will be given (its origin and limits, at most `MAX_SPAN`),
    /// and for an eager end the 16 bytes at the origin. Nothing but this end, its
    /// blocks and what its limits keep it clear of (the other end of a double stack)
    /// uses that memory.
    pub(crate) unsafe fn new(
        base: NonNull<u8>,
        dir: Dir,
        origin: u32,
        check: LifoCheck,
        eager: bool,
    ) -> Self {
        debug_assert!(origin as usize <= MAX_SPAN && (origin as usize).is_multiple_of(GRAIN));
        debug_assert!(base.addr().get().is_multiple_of(GRAIN));
        debug_assert!(!eager || dir == Dir::Up);
        let end = Self {
            base,
            top: Cell::new(Self::ptr_at(base, origin)),
            eager,
            bare_at: if eager {
                0
            } else {
                base.addr().get() + origin as usize
            },
            epoch: Cell::new(0),
            next_mark: Cell::new(1),
            floor: Cell::new(0),
            // An identity must never repeat while its marker may be alive: a marker of
            // one end accepted by another would give it a foreign position.
            id: next_id(),
            origin,
            dir,
            check,
        };
        // SAFETY: the origin; an eager end's 16 bytes there are its (the caller's
        // contract).
        unsafe {
            end.set_pos(Pos {
                top: origin,
                gap: NONE,
            });
        }
        end
    }

    /// The top, as an offset.
    #[inline]
    pub(crate) fn top(&self) -> u32 {
        // The top lies at most `MAX_SPAN` above `base`.
        (self.top.get().addr().get() - self.base.addr().get()) as u32
    }

    /// The top, as an address.
    #[inline(always)]
    pub(crate) fn top_addr(&self) -> usize {
        self.top.get().addr().get()
    }

    /// Whether the end is at its origin and keeps no header at its top: up, no waiting
    /// header (an end that is not eager); down, no newest block. A double stack's fast
    /// paths need that header and leave this case to the slow path.
    #[inline(always)]
    pub(crate) fn is_bare(&self) -> bool {
        self.top_addr() == self.bare_at
    }

    /// Where the end stands.
    #[inline]
    fn pos(&self) -> Pos {
        let top = self.top();
        let gap = match self.dir {
            _ if top == self.origin => NONE,
            // SAFETY: an up end above its origin keeps its waiting header at the top.
            Dir::Up => unsafe { self.header(top) }.gap(),
            Dir::Down => 0,
        };
        // A block written past its end overwrites the waiting header first.
        debug_assert!(
            self.dir == Dir::Down || top == self.origin || self.gap_fits(top, gap),
            "Stack: the header waiting at the top (offset {top}) was overwritten: a block \
             was written past its end (end {})",
            self.id
        );
        Pos { top, gap }
    }

    /// Whether `gap` can be an up end's gap at `top` (above its origin): the length of
    /// a block (a header and a multiple of 8 bytes) that fits below the top.
    fn gap_fits(&self, top: u32, gap: u32) -> bool {
        gap >= HEADER as u32 && gap.is_multiple_of(GRAIN as u32) && gap <= top - self.origin
    }

    /// Whether an up end at `top` keeps a waiting header there.
    #[inline]
    fn waits_at(&self, top: u32) -> bool {
        self.dir == Dir::Up && (top != self.origin || self.eager)
    }

    /// The bytes at the top that the end keeps for its waiting header: 16 when it
    /// keeps one there, else 0. Nothing else may use them.
    #[inline]
    pub(crate) fn waiting_room(&self) -> u32 {
        if self.waits_at(self.top()) {
            HEADER as u32
        } else {
            0
        }
    }

    /// Moves the end to `pos`, writing the waiting header there.
    ///
    /// # Safety
    ///
    /// `pos` is a position the end's blocks allow (`gap` is `NONE` exactly at the
    /// origin, and 0 down): the origin, the position below a block of the chain
    /// ([`step_down`](Self::step_down), [`reclaim`](Self::reclaim), a marker's that
    /// `rollback` accepted), or the new top [`place`](Self::place) or
    /// [`resized_top`](Self::resized_top) computed under a limit inside the end's
    /// memory. Each keeps room for the waiting header below the limit.
    #[inline]
    unsafe fn set_pos(&self, pos: Pos) {
        debug_assert_eq!(pos.gap == NONE, pos.top == self.origin);
        debug_assert!(self.dir == Dir::Up || pos.gap == 0 || pos.gap == NONE);
        self.top.set(Self::ptr_at(self.base, pos.top));
        if self.waits_at(pos.top) {
            // SAFETY: the top of a position the end's blocks allow (the caller's
            // contract), where it keeps a waiting header.
            unsafe {
                self.set_header(
                    pos.top,
                    Header {
                        below: Header::below(pos.gap, 0),
                        mark: 0,
                    },
                );
            }
        }
    }

    /// The newest header offset at `pos`, `NONE` when there is no block.
    #[inline]
    fn last_at(&self, pos: Pos) -> u32 {
        match (pos.gap, self.dir) {
            (NONE, _) => NONE,
            (gap, Dir::Up) => pos.top.wrapping_sub(gap),
            (gap, Dir::Down) => pos.top.wrapping_add(gap),
        }
    }

    /// Where the end stood before the block whose header `h` is at `at` was placed.
    #[inline]
    fn below(&self, at: u32, h: Header) -> Pos {
        Pos {
            top: match self.dir {
                Dir::Up => at.wrapping_sub(h.pad()),
                Dir::Down => at.wrapping_add(h.pad()),
            },
            gap: h.gap(),
        }
    }

    /// [`below`](Self::below) for a walk down the chain: `None` when the header below
    /// does not lie strictly nearer the origin, 8-aligned and inside the memory, as it
    /// does in an intact chain. Only a block written past its end into the header of
    /// the next newer block breaks that; debug builds panic naming it, release builds
    /// end the walk (or, in a free, keep the top). So every walk ends, and each step
    /// reads only between the header it starts from and the origin. (The first header
    /// of a walk is the newest block's, from the end's position: up, the waiting
    /// header's gap, which debug builds check in `pos`.)
    #[inline]
    fn step_down(&self, at: u32, h: Header) -> Option<Pos> {
        let pos = self.below(at, h);
        let next = self.last_at(pos);
        let nearer = next == NONE
            || next.is_multiple_of(GRAIN as u32)
                && match self.dir {
                    Dir::Up => next < at,
                    Dir::Down => next > at && next as usize + HEADER <= self.origin as usize,
                };
        if nearer {
            Some(pos)
        } else {
            debug_assert!(
                false,
                "Stack: the block header at offset {at} was overwritten (it records the \
                 header below it at offset {next}, not nearer the origin): a block was \
                 written past its end (end {})",
                self.id
            );
            None
        }
    }

    #[inline]
    fn last(&self) -> u32 {
        self.last_at(self.pos())
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
    pub(crate) fn live(&self) -> usize {
        let mut live = 0;
        let mut at = self.last();
        while at != NONE {
            // SAFETY: the newest block's header, then each one `step_down` returned.
            let h = unsafe { self.header(at) };
            live += usize::from(h.mark & FREED == 0);
            match self.step_down(at, h) {
                Some(pos) => at = self.last_at(pos),
                None => break,
            }
        }
        live
    }

    #[inline]
    fn ptr_at(base: NonNull<u8>, offset: u32) -> NonNull<u8> {
        // SAFETY: every offset the end computes lies inside, or one past, the memory
        // `base` starts (the contract of `new`).
        unsafe { base.add(offset as usize) }
    }

    /// The header at offset `at`.
    ///
    /// # Safety
    ///
    /// `at` is the offset of a header of this end: the newest block's (from the
    /// position), one a [`step_down`](Self::step_down) returned, one `validate` has
    /// checked lies in the part in use, or the waiting header at the top of an up end
    /// that keeps one there ([`waits_at`](Self::waits_at)). Such an offset is 8-aligned
    /// with its 16 bytes inside the end's memory, written by the end.
    #[inline]
    unsafe fn header(&self, at: u32) -> Header {
        // SAFETY: the caller's contract: 16 readable, 8-aligned bytes the end wrote.
        unsafe { Self::ptr_at(self.base, at).cast::<Header>().read() }
    }

    /// Writes the header at offset `at`.
    ///
    /// # Safety
    ///
    /// As for [`header`](Self::header); or `at` is the top of a position the end's
    /// blocks allow, which keeps room below the limit for the waiting header (`place`,
    /// `resized_top` and the pops leave it); or `at` is the header slot `place`
    /// computed for a new block, between the top and the limit. Headers lie in front of
    /// the blocks the end hands out and at the top, which no block reaches.
    #[inline]
    unsafe fn set_header(&self, at: u32, h: Header) {
        // SAFETY: the caller's contract: 16 writable, 8-aligned bytes of the end's
        // memory that no block holds.
        unsafe { Self::ptr_at(self.base, at).cast::<Header>().write(h) }
    }

    /// [`place`](Self::place) and [`push`](Self::push) in one for an end growing up
    /// that keeps a waiting header at its top (not [bare](Self::is_bare)), when
    /// `layout` is aligned to at most 8 and at most `FAST_MAX` bytes: the block's
    /// header is the one waiting at the top, the payload follows it, and the next
    /// waiting header goes at the new top. `None` when the layout is not such or does
    /// not fit.
    ///
    /// `limit` is the address the new top may not pass.
    ///
    /// # Safety
    ///
    /// `limit` is at most `usize::MAX - HEADER - FAST_MAX`, so the sum below cannot
    /// overflow, and 16 bytes (the next waiting header) below everything the end may
    /// not reach: the end of its memory (`Stack`), the other end's top and the ready
    /// part (`Ends`); below the top when the end keeps no waiting header there (a
    /// `Stack` too small to be eager has its limit at the origin).
    #[inline(always)]
    pub(crate) unsafe fn push_up_fast(&self, layout: Layout, limit: usize) -> Option<NonNull<u8>> {
        debug_assert!(limit <= usize::MAX - HEADER - FAST_MAX);
        let size = layout.size();
        if size == 0 || layout.align() > GRAIN || size > FAST_MAX {
            return None;
        }
        let top = self.top.get();
        let step = HEADER + grain_up(size);
        if top.addr().get() + step > limit {
            return None;
        }
        // Only an end keeping a waiting header at its top gets here: a `Stack` too small
        // to be eager has its limit at the origin, below any block, and `Ends` does not
        // call this for a bare end.
        debug_assert!(self.waits_at(self.top()));
        // SAFETY: `top + step <= limit`, 16 bytes below what the end may not reach (the
        // caller's contract), so the payload and the next waiting header (8-aligned, as
        // the top is) lie in usable memory above the block's header, where nothing is
        // live, clear of the other end's blocks.
        unsafe {
            let new_top = top.add(step);
            // The block is the newest, `step` below the new top.
            write_header(
                new_top,
                Header {
                    below: Header::below(step as u32, 0),
                    mark: 0,
                },
            );
            self.top.set(new_top);
            Some(top.add(HEADER))
        }
    }

    /// [`place`](Self::place) and [`push`](Self::push) in one for an end growing down
    /// that is not [bare](Self::is_bare), when `layout` is aligned to at most 8 and at
    /// most `FAST_MAX` bytes: the payload ends at the top, its header goes just below
    /// it and becomes the new top, recording a gap of 0 (the newest header was the
    /// top) and the block's length. `None` when the layout is not such or does not fit.
    ///
    /// `limit` is the address the new top may not pass.
    ///
    /// # Safety
    ///
    /// `limit` is at most `ADDR_CEILING + HEADER`, so the sum below cannot overflow,
    /// and at or above everything the end may not reach: the start of the memory, the
    /// other end's top and waiting header, the ready part (`Ends`).
    #[inline(always)]
    pub(crate) unsafe fn push_down_fast(
        &self,
        layout: Layout,
        limit: usize,
    ) -> Option<NonNull<u8>> {
        debug_assert!(self.dir == Dir::Down && !self.is_bare());
        let size = layout.size();
        if size == 0 || layout.align() > GRAIN || size > FAST_MAX {
            return None;
        }
        let top = self.top.get();
        let step = HEADER + grain_up(size);
        debug_assert!(limit <= ADDR_CEILING + HEADER);
        if limit + step > top.addr().get() {
            return None;
        }
        // SAFETY: `limit <= top - step`, and the limit lies at or above everything the
        // end may not reach (the caller's contract): the block's header and payload lie
        // between the limit and the top, in usable memory where nothing is live;
        // 8-aligned as the top is.
        unsafe {
            let new_top = top.sub(step);
            write_header(
                new_top,
                Header {
                    below: Header::below(0, step as u32),
                    mark: 0,
                },
            );
            self.top.set(new_top);
            Some(new_top.add(HEADER))
        }
    }

    /// Where a block for `layout` (of non-zero size) goes, given that this end may not
    /// pass `limit` (the other end's top, or the end of the memory).
    #[inline]
    pub(crate) fn place(&self, layout: Layout, limit: u32) -> Result<Placed, AllocError> {
        debug_assert!(layout.size() != 0);
        let base_addr = self.base.addr().get();
        let top_addr = self.top.get().addr().get();
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
                // The waiting header goes at the new top.
                if end > (limit as usize).saturating_sub(HEADER) {
                    return Err(AllocError);
                }
                Ok(Placed {
                    payload: payload as u32,
                    // `end <= limit - 16`, a multiple of 8: the rounding stays below.
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

    /// Writes the header of the block `placed` and makes it the newest (up, writing the
    /// waiting header at the new top).
    ///
    /// # Safety
    ///
    /// `placed` is what [`place`](Self::place) returned for this end, given a limit
    /// inside the end's memory (and clear of what else uses it), and the end has not
    /// changed since; the memory up to the new top (and, up, its waiting header) is
    /// usable: committed where the memory is a reservation (`Ends::reach`).
    #[inline(always)]
    pub(crate) unsafe fn push(&self, placed: Placed) -> NonNull<u8> {
        let at = placed.payload - HEADER as u32;
        let pos = self.pos();
        // SAFETY: `place` put the header 16 bytes below the payload, 8-aligned, in
        // free memory between the top and the limit (the caller's contract).
        unsafe {
            self.set_header(
                at,
                Header {
                    below: Header::below(pos.gap, at.abs_diff(pos.top)),
                    mark: 0,
                },
            );
        }
        // Up, the new top is the block's rounded end; down, it is the header.
        // SAFETY: the new top `place` computed (the caller's contract).
        unsafe {
            self.set_pos(Pos {
                top: placed.new_top,
                gap: placed.new_top.abs_diff(at),
            });
        }
        Self::ptr_at(self.base, placed.payload)
    }

    /// The header offset of the block at `ptr`: a panic when `ptr` lies outside the
    /// part of the memory this end has handed out.
    fn header_of(&self, ptr: NonNull<u8>) -> u32 {
        let offset = ptr.addr().get().wrapping_sub(self.base.addr().get());
        let (low, high) = match self.dir {
            Dir::Up => (HEADER, self.top() as usize),
            Dir::Down => (self.top() as usize + HEADER, self.origin as usize),
        };
        assert!(
            offset >= low && offset <= high,
            "Stack: {ptr:p} is not a block of this stack (end {})",
            self.id
        );
        (offset - HEADER) as u32
    }

    /// Whether a header lies at offset `at`, found by walking the chain from the
    /// newest block down to it: O(blocks above it). False for a pointer into the
    /// middle of a block.
    fn chain_holds(&self, at: u32) -> bool {
        let mut cur = self.last();
        while self.above(cur, at) && cur != at {
            // SAFETY: the newest block's header, then each one `step_down` returned.
            match self.step_down(cur, unsafe { self.header(cur) }) {
                Some(pos) => cur = self.last_at(pos),
                None => return false,
            }
        }
        cur == at
    }

    /// From `pos`, steps down over the newest blocks as long as they were freed out of
    /// order: the position that reclaims them.
    fn reclaim(&self, mut pos: Pos) -> Pos {
        loop {
            let last = self.last_at(pos);
            if last == NONE {
                return pos;
            }
            // SAFETY: the newest header at a position of the chain (the end's, a
            // marker's checked by `rollback`, or one `step_down` returned).
            let below = unsafe { self.header(last) };
            if below.mark & FREED == 0 {
                return pos;
            }
            match self.step_down(last, below) {
                Some(next) => pos = next,
                None => return pos,
            }
        }
    }

    /// The position of the block whose header is at `at` in the chain, counting from
    /// 1 at the bottom (for messages; walks the chain).
    #[cold]
    fn number(&self, at: u32) -> usize {
        let (mut depth, mut below_it, mut cur) = (0, 0, self.last());
        while cur != NONE {
            depth += 1;
            if cur == at {
                below_it = depth;
            }
            // SAFETY: the newest block's header, then each one `step_down` returned.
            match self.step_down(cur, unsafe { self.header(cur) }) {
                Some(pos) => cur = self.last_at(pos),
                None => break,
            }
        }
        depth + 1 - below_it
    }

    /// Frees the block at `ptr`: pops it when it is the newest (and every block beneath
    /// it freed out of order), marks it otherwise. A block below the newest is first
    /// found on the chain (a walk over the blocks above it), so a pointer into the
    /// middle of a block is refused, never taken for a header.
    ///
    /// # Panics
    ///
    /// In every build, when `ptr` is not a live block of this end (outside the part
    /// in use, inside a block, or freed before), naming it; under
    /// [`LifoCheck::Strict`] when the block is not the newest.
    ///
    /// Safe for any pointer: `ptr` is only compared with header offsets found on the
    /// chain, never read through, so a wrong one panics before anything is touched.
    pub(crate) fn free(&self, ptr: NonNull<u8>) {
        let at = self.header_of(ptr);
        let last = self.last();
        if at != last && !self.chain_holds(at) {
            panic!(
                "Stack: {ptr:p} is not the start of a block of this stack (end {}): a pointer \
                 into a block, or one it never handed out",
                self.id
            );
        }
        // SAFETY: `at` is the newest block's header, or found on the chain above.
        let h = unsafe { self.header(at) };
        if h.mark & FREED != 0 {
            panic!(
                "Stack: double free of block #{} at {ptr:p}",
                self.number(at)
            );
        }
        if at == last {
            // A header overwritten by the block beneath gives no position to pop to:
            // the block is then only marked, as a free out of order, and the top stays.
            if let Some(pos) = self.step_down(at, h) {
                // SAFETY: the position below a block of the chain, reclaimed further.
                unsafe { self.set_pos(self.reclaim(pos)) };
                self.next_epoch();
                return;
            }
        } else if self.check == LifoCheck::Strict {
            panic!(
                "Stack (LifoCheck::Strict): block #{} at {ptr:p} freed while block #{} is on top",
                self.number(at),
                self.number(last)
            );
        }
        // SAFETY: `at` is a header of the chain (above).
        unsafe {
            self.set_header(
                at,
                Header {
                    mark: h.mark | FREED,
                    ..h
                },
            );
        }
    }

    /// The top after resizing the block at `ptr` to `new_size` bytes in place, or
    /// `None` when it is not the newest block or there is no room below `limit`. Up,
    /// the newest block's end moves; down, its start is fixed and the block can only
    /// use the slack up to the block above it, so the top stays.
    pub(crate) fn resized_top(&self, ptr: NonNull<u8>, new_size: usize, limit: u32) -> Option<u32> {
        let at = self.header_of(ptr);
        if at != self.last() {
            return None;
        }
        let payload = at as usize + HEADER;
        match self.dir {
            // The waiting header goes at the new top, below `limit`.
            Dir::Up => (new_size <= (limit as usize).saturating_sub(payload + HEADER))
                .then(|| (payload + new_size).next_multiple_of(GRAIN) as u32),
            Dir::Down => {
                // SAFETY: `at` is the newest block's header.
                let room = self.below(at, unsafe { self.header(at) }).top as usize - payload;
                (new_size <= room).then_some(self.top())
            }
        }
    }

    /// Sets the top after [`resized_top`](Self::resized_top) (the newest block stays
    /// the newest): a new epoch, since a marker taken above the newest block no longer
    /// lies at its end.
    ///
    /// # Safety
    ///
    /// `top` is what `resized_top` returned for this end, given a limit inside the
    /// end's memory (and clear of what else uses it), and the end has not changed
    /// since; the memory up to the new top (and, up, its waiting header) is usable:
    /// committed where the memory is a reservation (`Ends::reach`).
    pub(crate) unsafe fn set_top(&self, top: u32) {
        let last = self.last();
        debug_assert_ne!(last, NONE, "set_top resizes the newest block");
        // SAFETY: the new top `resized_top` computed (the caller's contract).
        unsafe {
            self.set_pos(Pos {
                top,
                gap: top.abs_diff(last),
            });
        }
        self.next_epoch();
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
