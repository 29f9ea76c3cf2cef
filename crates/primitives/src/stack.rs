//! The stack allocator: LIFO blocks with headers, and markers checked at run time.

use core::alloc::Layout;
use core::cell::Cell;
use core::fmt;
use core::marker::PhantomData;
use core::mem::MaybeUninit;
use core::ptr::NonNull;
use core::sync::atomic::{AtomicU32, Ordering};

use crate::alloc_api::{AllocError, RawAlloc, dangling, impl_allocator};

/// The header in front of every block.
#[repr(C)]
#[derive(Clone, Copy)]
struct Header {
    /// The top (an offset) before this block was allocated.
    prev_top: u32,
    /// The header offset of the block below, or `NONE`.
    prev_last: u32,
    /// The block's sequence number; bit 63 (`FREED`) marks a block freed out of order.
    seq: u64,
}

const HEADER: usize = size_of::<Header>();
const _: () = assert!(HEADER == 16 && align_of::<Header>() == 8);

/// "No block".
const NONE: u32 = u32::MAX;
/// Set in `Header::seq` when the block was freed while not on top.
const FREED: u64 = 1 << 63;
/// Block ends are rounded to this, so every header is aligned.
const GRAIN: usize = 8;

/// Gives each stack its identity, so a marker from another stack is refused.
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

/// A position in a [`Stack`] to roll back to: the stack's identity, its generation (a
/// reset starts a new one), the top, and the sequence number of the next block.
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
    stack: u32,
    generation: u32,
    top: u32,
    seq: u64,
}

/// Why a rollback was refused; the stack is unchanged.
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
    /// The marker was taken on another stack.
    Foreign,
    /// The marker lies above the current top (what was below it has been freed).
    AboveTop,
    /// A rollback to an earlier marker, a reset, or a change to the block below the
    /// marker has invalidated it.
    Stale,
}

impl Marker {
    /// What [`Stack::used`] was when the marker was taken, and will be after a rollback
    /// to it.
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
        self.top as usize
    }
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

/// What [`Stack::validate`] counted by walking the blocks.
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
    /// Their bytes, each from its start to the next block's (rounding included).
    pub live_bytes: usize,
    /// Blocks freed out of order and not reclaimed yet.
    pub deferred_blocks: usize,
}

/// A stack allocator over a caller's buffer: blocks are freed in LIFO order, each
/// with a 16-byte header in front of it holding the previous top, the block below and
/// a sequence number.
///
/// ```text
///  base                                                          top
///   | hdr | block A | pad | hdr | block B | hdr | block C |       free
///          prev_top ^            ^ prev_last chain to A   ^ grows in place
/// ```
///
/// Freeing the top block pops it, and pops every block beneath it that was freed out of
/// order. With [`LifoCheck::Deferred`] (the default) an out-of-order free marks the
/// block; with [`LifoCheck::Strict`] it panics naming both blocks. [`Marker`]s are
/// checked: rolling back to a marker from another stack, above the top, or invalidated
/// by an earlier rollback or reset is an error that changes nothing; rolling back to the
/// same marker twice is fine. The top block grows and shrinks in place.
///
/// Offsets are 32-bit, so a stack uses at most 4 GiB of its buffer.
///
/// ```
/// use allocator_api2::vec::Vec;
/// use bento_primitives::Stack;
/// use core::mem::MaybeUninit;
///
/// let mut buf = [MaybeUninit::uninit(); 4096];
/// let mut stack = Stack::new(&mut buf);
/// let frame = stack.marker();
/// {
///     let mut v = Vec::new_in(&stack);
///     v.extend(0..100u32); // the top block grows in place
///     assert_eq!(v.len(), 100);
/// }
/// stack.rollback(frame).unwrap();
/// assert_eq!(stack.used(), 0);
/// ```
///
/// `rollback` needs `&mut self`, so it cannot run while an allocation is borrowed:
///
/// ```compile_fail,E0502
/// use bento_primitives::Stack;
/// use core::mem::MaybeUninit;
///
/// let mut buf = [MaybeUninit::uninit(); 256];
/// let mut stack = Stack::new(&mut buf);
/// let m = stack.marker();
/// let v = allocator_api2::boxed::Box::new_in(1u32, &stack);
/// stack.rollback(m).unwrap(); // error: `stack` is borrowed by `v`
/// drop(v);
/// ```
pub struct Stack<'buf> {
    // Invariant: 8-aligned; its provenance covers `[base, base + cap)`.
    base: NonNull<u8>,
    // Invariant: a multiple of 8, below `u32::MAX - 16`.
    cap: usize,
    // Invariant: a multiple of 8, at most `cap`; everything from it is free.
    top: Cell<u32>,
    // Invariant: the header offset of the top block, or `NONE` when there is none.
    last: Cell<u32>,
    // The sequence number of the next block (below `FREED`).
    seq: Cell<u64>,
    // Blocks allocated and not freed.
    live: Cell<usize>,
    id: u32,
    generation: Cell<u32>,
    check: LifoCheck,
    _buf: PhantomData<&'buf mut [MaybeUninit<u8>]>,
}

impl<'buf> Stack<'buf> {
    /// A stack over `buf` that defers out-of-order frees.
    #[must_use]
    pub fn new(buf: &'buf mut [MaybeUninit<u8>]) -> Self {
        Self::with_check(buf, LifoCheck::Deferred)
    }

    /// A stack over `buf` with the given LIFO check.
    ///
    /// ```
    /// use bento_primitives::{LifoCheck, Stack};
    /// use core::mem::MaybeUninit;
    ///
    /// let mut buf = [MaybeUninit::uninit(); 256];
    /// let stack = Stack::with_check(&mut buf, LifoCheck::Strict);
    /// assert_eq!(stack.used(), 0);
    /// ```
    #[must_use]
    pub fn with_check(buf: &'buf mut [MaybeUninit<u8>], check: LifoCheck) -> Self {
        let len = buf.len();
        let start = NonNull::from(buf).cast::<u8>();
        let lead = start.as_ptr().align_offset(GRAIN).min(len);
        // SAFETY: `lead <= len`: inside, or one past, the buffer.
        let base = unsafe { start.add(lead) };
        let cap = (len - lead).min(u32::MAX as usize - 2 * HEADER) & !(GRAIN - 1);
        Self {
            base,
            cap,
            top: Cell::new(0),
            last: Cell::new(NONE),
            seq: Cell::new(1),
            live: Cell::new(0),
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            generation: Cell::new(0),
            check,
            _buf: PhantomData,
        }
    }

    fn ptr_at(&self, offset: usize) -> NonNull<u8> {
        debug_assert!(offset <= self.cap, "offset {offset} outside the stack");
        // SAFETY: `offset <= cap`: inside, or one past, the buffer.
        unsafe { self.base.add(offset) }
    }

    fn header(&self, at: u32) -> Header {
        let p = self.ptr_at(at as usize).cast::<Header>();
        // SAFETY: `at` is the offset of a live block's header (the caller walks the
        // chain from `last`), 8-aligned and inside the used part of the buffer.
        unsafe { p.read() }
    }

    fn set_header(&self, at: u32, h: Header) {
        let p = self.ptr_at(at as usize).cast::<Header>();
        // SAFETY: as in `header`; headers are only written by the stack, in front of
        // the blocks it hands out.
        unsafe { p.write(h) };
    }

    /// Allocates a block for `layout`; a zero-size layout gets a dangling, aligned
    /// pointer and costs nothing.
    ///
    /// # Errors
    ///
    /// [`AllocError`] when the block does not fit; nothing changes then.
    ///
    /// ```
    /// use bento_primitives::Stack;
    /// use core::alloc::Layout;
    /// use core::mem::MaybeUninit;
    ///
    /// let mut buf = [MaybeUninit::uninit(); 256];
    /// let stack = Stack::new(&mut buf);
    /// let p = stack.alloc_layout(Layout::from_size_align(40, 32).unwrap()).unwrap();
    /// assert_eq!(p.addr().get() % 32, 0);
    /// assert!(stack.alloc_layout(Layout::from_size_align(1024, 8).unwrap()).is_err());
    /// ```
    pub fn alloc_layout(&self, layout: Layout) -> Result<NonNull<u8>, AllocError> {
        if layout.size() == 0 {
            return Ok(dangling(layout));
        }
        let top = self.top.get() as usize;
        let align = layout.align().max(GRAIN);
        // The payload's address: the first aligned one with room for the header.
        let base = self.base.addr().get();
        let at = (base + top).checked_add(HEADER).ok_or(AllocError)?;
        let payload = at
            .checked_add(at.wrapping_neg() & (align - 1))
            .ok_or(AllocError)?
            - base;
        let end = payload.checked_add(layout.size()).ok_or(AllocError)?;
        if end > self.cap {
            return Err(AllocError);
        }
        let header_at = (payload - HEADER) as u32;
        self.set_header(
            header_at,
            Header {
                prev_top: top as u32,
                prev_last: self.last.get(),
                seq: self.seq.get(),
            },
        );
        self.seq.set(self.seq.get() + 1);
        self.last.set(header_at);
        // `end <= cap`, a multiple of 8: the rounding stays inside.
        self.top.set(end.next_multiple_of(GRAIN) as u32);
        self.live.set(self.live.get() + 1);
        Ok(self.ptr_at(payload))
    }

    /// The header offset of the block at `ptr`, checked in debug builds.
    fn header_of(&self, ptr: NonNull<u8>) -> u32 {
        let offset = ptr.addr().get().wrapping_sub(self.base.addr().get());
        debug_assert!(
            offset >= HEADER && offset <= self.top.get() as usize,
            "Stack: {ptr:p} is not a block of this stack"
        );
        (offset - HEADER) as u32
    }

    /// Pops the top block, whose header is at `at`.
    fn pop(&self, at: u32) {
        let h = self.header(at);
        self.top.set(h.prev_top);
        self.last.set(h.prev_last);
    }

    fn free(&self, ptr: NonNull<u8>) {
        let at = self.header_of(ptr);
        let h = self.header(at);
        if h.seq & FREED != 0 {
            panic!("Stack: double free of block #{} at {ptr:p}", h.seq & !FREED);
        }
        self.live.set(self.live.get() - 1);
        if at == self.last.get() {
            self.pop(at);
            // Reclaim the blocks beneath that were freed out of order.
            while self.last.get() != NONE && self.header(self.last.get()).seq & FREED != 0 {
                self.pop(self.last.get());
            }
            return;
        }
        match self.check {
            LifoCheck::Deferred => self.set_header(
                at,
                Header {
                    seq: h.seq | FREED,
                    ..h
                },
            ),
            LifoCheck::Strict => {
                let top_seq = self.header(self.last.get()).seq & !FREED;
                panic!(
                    "Stack (LifoCheck::Strict): block #{} at {ptr:p} freed while block #{top_seq} is on top",
                    h.seq
                );
            }
        }
    }

    /// Grows or shrinks the top block in place; false when `ptr` is not the top block
    /// or there is no room.
    fn resize_top(&self, ptr: NonNull<u8>, new_size: usize) -> bool {
        let at = self.header_of(ptr);
        let payload = at as usize + HEADER;
        if at != self.last.get() || new_size > self.cap - payload {
            return false;
        }
        self.top
            .set((payload + new_size).next_multiple_of(GRAIN) as u32);
        true
    }

    /// A marker at the current top.
    ///
    /// ```
    /// use bento_primitives::Stack;
    /// use core::mem::MaybeUninit;
    ///
    /// let mut buf = [MaybeUninit::uninit(); 256];
    /// let stack = Stack::new(&mut buf);
    /// assert_eq!(stack.marker(), stack.marker());
    /// ```
    #[must_use]
    pub fn marker(&self) -> Marker {
        Marker {
            stack: self.id,
            generation: self.generation.get(),
            top: self.top.get(),
            seq: self.seq.get(),
        }
    }

    /// Frees every block allocated after `marker` was taken. The next allocation
    /// lands where the marker says and `used()` returns to its value.
    ///
    /// Checks the marker by walking the blocks allocated since it (the ones it frees),
    /// so it costs O(1) per block freed.
    ///
    /// # Errors
    ///
    /// [`MarkerError`] when the marker belongs to another stack, lies above the top, or
    /// was invalidated; nothing changes then.
    ///
    /// ```
    /// use bento_primitives::{MarkerError, Stack};
    /// use core::alloc::Layout;
    /// use core::mem::MaybeUninit;
    ///
    /// let mut buf = [MaybeUninit::uninit(); 1024];
    /// let mut stack = Stack::new(&mut buf);
    /// let level = stack.marker();
    /// stack.alloc_layout(Layout::new::<[u8; 100]>()).unwrap();
    /// let frame = stack.marker();
    /// stack.alloc_layout(Layout::new::<[u8; 50]>()).unwrap();
    /// stack.rollback(frame).unwrap();
    /// stack.rollback(frame).unwrap(); // twice is fine
    /// stack.rollback(level).unwrap();
    /// stack.alloc_layout(Layout::new::<[u8; 200]>()).unwrap();
    /// assert_eq!(stack.rollback(frame), Err(MarkerError::Stale));
    /// ```
    pub fn rollback(&mut self, marker: Marker) -> Result<(), MarkerError> {
        if marker.stack != self.id {
            return Err(MarkerError::Foreign);
        }
        if marker.generation != self.generation.get() {
            return Err(MarkerError::Stale);
        }
        if marker.top > self.top.get() {
            return Err(MarkerError::AboveTop);
        }
        // Walk down the blocks allocated since the marker; where they stop is where
        // the top was when the marker was taken, if nothing below it changed.
        let (mut boundary, mut at, mut live) = (self.top.get(), self.last.get(), 0);
        while at != NONE {
            let h = self.header(at);
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

    /// Frees everything at once and invalidates every marker.
    ///
    /// ```
    /// use bento_primitives::{MarkerError, Stack};
    /// use core::mem::MaybeUninit;
    ///
    /// let mut buf = [MaybeUninit::uninit(); 256];
    /// let mut stack = Stack::new(&mut buf);
    /// let m = stack.marker();
    /// stack.reset();
    /// assert_eq!(stack.rollback(m), Err(MarkerError::Stale));
    /// ```
    pub fn reset(&mut self) {
        self.top.set(0);
        self.last.set(NONE);
        self.live.set(0);
        self.generation.set(self.generation.get().wrapping_add(1));
    }

    /// Bytes in use: blocks, headers, padding.
    ///
    /// ```
    /// use bento_primitives::Stack;
    /// use core::mem::MaybeUninit;
    ///
    /// let mut buf = [MaybeUninit::uninit(); 256];
    /// let stack = Stack::new(&mut buf);
    /// stack.alloc_layout(core::alloc::Layout::new::<u64>()).unwrap();
    /// assert_eq!(stack.used(), 16 + 8);
    /// ```
    #[must_use]
    pub fn used(&self) -> usize {
        self.top.get() as usize
    }

    /// The usable size of the buffer.
    ///
    /// ```
    /// use bento_primitives::Stack;
    /// use core::mem::MaybeUninit;
    ///
    /// let mut buf = [MaybeUninit::uninit(); 256];
    /// assert!(Stack::new(&mut buf).capacity() >= 248);
    /// ```
    #[must_use]
    pub fn capacity(&self) -> usize {
        self.cap
    }

    /// Blocks allocated and not freed.
    ///
    /// ```
    /// use bento_primitives::Stack;
    /// use core::mem::MaybeUninit;
    ///
    /// let mut buf = [MaybeUninit::uninit(); 256];
    /// let stack = Stack::new(&mut buf);
    /// stack.alloc_layout(core::alloc::Layout::new::<u64>()).unwrap();
    /// assert_eq!(stack.live_blocks(), 1);
    /// ```
    #[must_use]
    pub fn live_blocks(&self) -> usize {
        self.live.get()
    }

    /// Walks every block from the top down and checks the chain: headers inside the
    /// used part, each below the one above it, sequence numbers decreasing, the chain
    /// ending at offset 0, and the live count equal to the counter.
    ///
    /// # Errors
    ///
    /// A description of the first broken rule.
    pub fn validate(&self) -> Result<StackReport, &'static str> {
        let mut report = StackReport::default();
        let (mut above, mut at, mut seq_above) = (self.top.get(), self.last.get(), u64::MAX);
        if above as usize > self.cap || !(above as usize).is_multiple_of(GRAIN) {
            return Err("top outside the buffer or not 8-aligned");
        }
        while at != NONE {
            if at as usize + HEADER > above as usize {
                return Err("a header lies above the block over it");
            }
            let h = self.header(at);
            let seq = h.seq & !FREED;
            if seq >= seq_above || seq >= self.seq.get() {
                return Err("sequence numbers do not decrease down the chain");
            }
            if h.prev_top > at {
                return Err("a block's previous top lies above its header");
            }
            if h.seq & FREED == 0 {
                report.live_blocks += 1;
                report.live_bytes += above as usize - (at as usize + HEADER);
            } else {
                report.deferred_blocks += 1;
            }
            seq_above = seq;
            above = h.prev_top;
            at = h.prev_last;
        }
        if above != 0 {
            return Err("the chain does not end at the bottom of the stack");
        }
        if report.live_blocks != self.live.get() {
            return Err("the live-block counter disagrees with the walk");
        }
        Ok(report)
    }
}

impl fmt::Debug for Stack<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Stack")
            .field("used", &self.used())
            .field("capacity", &self.cap)
            .field("live_blocks", &self.live.get())
            .field("check", &self.check)
            .finish()
    }
}

// SAFETY: blocks are carved above the top, so live blocks never overlap; a block stays
// valid until it is freed, rolled back over or reset (both of which take `&mut self`).
// A grow that cannot extend the top block moves it (`RawAlloc::relocate`).
unsafe impl RawAlloc for Stack<'_> {
    fn alloc_raw(&self, layout: Layout) -> Result<NonNull<u8>, AllocError> {
        self.alloc_layout(layout)
    }

    unsafe fn dealloc_raw(&self, ptr: NonNull<u8>, layout: Layout) {
        if layout.size() != 0 {
            self.free(ptr);
        }
    }

    unsafe fn resize_in_place(&self, ptr: NonNull<u8>, _old: Layout, new_size: usize) -> bool {
        // Only the top block changes size; any other keeps its place in the stack.
        self.resize_top(ptr, new_size)
    }
}

impl_allocator!('buf, Stack<'buf>);
