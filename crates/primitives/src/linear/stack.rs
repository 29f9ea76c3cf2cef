//! The stack allocator: LIFO blocks with headers, and markers checked at run time.

use crate::linear::corruption::LinearCorruption;

use core::alloc::Layout;
use core::fmt;
use core::marker::PhantomData;
use core::mem::MaybeUninit;
use core::ptr::NonNull;

use crate::linear::lifo::markers::{Marker, MarkerError};
use crate::linear::lifo::validate::StackReport;
use crate::linear::lifo::{ADDR_CEILING, Dir, GRAIN, HEADER, Lifo, LifoCheck, MAX_SPAN};
use bento_pages::{AllocError, RawAlloc, dangling, impl_allocator};

/// A stack allocator over a caller's buffer: blocks are freed in LIFO order, each
/// with a 16-byte header in front of it holding where the stack stood before it (the
/// distance from the header back to the previous top, and from that top to the block
/// below, 4 bytes each)
/// and a mark word (set when the block is freed out of order, or when a marker is taken
/// with the block on top).
///
/// ```text
///  base                                                                 top
///   | hdr | block A | pad | hdr | block B | hdr | block C | waiting hdr |  free
///          prev_top ^            ^ chain to A             ^ grows in place
/// ```
///
/// The 16 bytes at the top always hold the header of the next block (written when the
/// top moves there), so an allocation writes only the header after it and the new top.
/// Those 16 bytes are the price: a full stack leaves them unused. A write past the end
/// of the top block lands in them; debug builds panic when the stack next reads them,
/// and [`validate`](Self::validate) reports it unless the bytes written happen to form
/// a header the stack could have written.
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
    // Invariant: a multiple of 8, at most `MAX_SPAN`.
    cap: u32,
    // Invariant: the address 16 bytes below the end of the usable buffer (room for the
    // waiting header above the top), or its start when it holds less than 16 bytes; at
    // most `usize::MAX - HEADER - FAST_MAX`. The fast path's limit.
    fast_limit: usize,
    // Invariant: over the buffer's 8-aligned start, whose provenance covers `cap` bytes.
    lifo: Lifo,
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
        let (base, cap) = grained(buf);
        Self {
            cap,
            fast_limit: base.addr().get() + (cap as usize).saturating_sub(HEADER),
            // SAFETY: `grained` gives an 8-aligned part of the borrowed buffer, at most
            // `MAX_SPAN` long; an eager end has its first 16 bytes.
            lifo: unsafe { Lifo::new(base, Dir::Up, 0, check, cap as usize >= HEADER) },
            _buf: PhantomData,
        }
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
    #[inline]
    pub fn alloc_layout(&self, layout: Layout) -> Result<NonNull<u8>, AllocError> {
        // SAFETY: `fast_limit` is 16 bytes below the end of the memory, which ends
        // below `ADDR_CEILING` (`grained`); at the origin of an end too small to be
        // eager.
        if let Some(p) = unsafe { self.lifo.push_up_fast(layout, self.fast_limit) } {
            return Ok(p);
        }
        self.alloc_slow(layout)
    }

    /// Zero sizes, alignments above 8, large sizes, failure.
    #[cold]
    #[inline(never)]
    fn alloc_slow(&self, layout: Layout) -> Result<NonNull<u8>, AllocError> {
        if layout.size() == 0 {
            return Ok(dangling(layout));
        }
        let placed = self.lifo.place(layout, self.cap)?;
        // SAFETY: placed just now, under the end of the memory.
        Ok(unsafe { self.lifo.push(placed) })
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
        self.lifo.marker()
    }

    /// Frees every block allocated after `marker` was taken. The next allocation
    /// lands where the marker says and `used()` returns to its value; blocks beneath
    /// the marker that were freed out of order go too (nothing above them is left),
    /// and `used()` then drops below the marker's.
    ///
    /// O(1) when the stack has only allocated since the marker was taken (the frame
    /// pattern: marker, allocations, rollback). Otherwise (a free, rollback or resize
    /// since, or a later marker) it checks the marker by walking the blocks allocated
    /// since it (the ones it frees), at O(1) per block freed.
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
        self.lifo.rollback(marker)
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
        self.lifo.reset();
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
        self.lifo.used()
    }

    /// The bytes of the buffer the stack works in (its 8-aligned part, at most 4 GiB).
    /// Blocks and headers take at most 16 bytes less: those stay free at the top for
    /// the next block's header.
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
        self.cap as usize
    }

    /// Blocks allocated and not freed, counted by walking the blocks (O(blocks): the
    /// allocation path keeps no counter).
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
        self.lifo.live()
    }

    /// Walks every block from the top down and checks the chain: headers inside the
    /// used part, each below the one above it, marker marks decreasing down the chain,
    /// and the chain ending at offset 0.
    ///
    /// # Errors
    ///
    /// A description of the first broken rule.
    ///
    /// ```
    /// use bento_primitives::Stack;
    /// use core::mem::MaybeUninit;
    ///
    /// let mut buf = [MaybeUninit::uninit(); 256];
    /// let stack = Stack::new(&mut buf);
    /// assert_eq!(stack.validate().unwrap().live_blocks, 0);
    /// ```
    pub fn validate(&self) -> Result<StackReport, LinearCorruption> {
        if self.lifo.top() as usize + self.lifo.waiting_room() as usize > self.cap as usize {
            return Err(LinearCorruption::new(
                "top (or the header waiting there) outside the buffer",
            ));
        }
        self.lifo.validate()
    }
}

/// The 8-aligned part of `buf`, at most `MAX_SPAN` bytes of it, ending at most at
/// `ADDR_CEILING` (so that the fast paths' sums cannot overflow; never a real loss):
/// its start and length.
pub(crate) fn grained(buf: &mut [MaybeUninit<u8>]) -> (NonNull<u8>, u32) {
    let len = buf.len();
    let start = NonNull::from(buf).cast::<u8>();
    let lead = start.as_ptr().align_offset(GRAIN).min(len);
    // SAFETY: `lead <= len`: inside, or one past, the buffer.
    let base = unsafe { start.add(lead) };
    let room = ADDR_CEILING.saturating_sub(base.addr().get());
    let cap = (len - lead).min(MAX_SPAN).min(room) & !(GRAIN - 1);
    (base, cap as u32)
}

impl fmt::Debug for Stack<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Stack")
            .field("capacity", &self.cap)
            .field("end", &self.lifo)
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
            self.lifo.free(ptr);
        }
    }

    unsafe fn resize_in_place(&self, ptr: NonNull<u8>, _old: Layout, new_size: usize) -> bool {
        // Only the top block changes size; any other keeps its place in the stack.
        match self.lifo.resized_top(ptr, new_size, self.cap) {
            Some(top) => {
                // SAFETY: computed just now, under the end of the memory.
                unsafe { self.lifo.set_top(top) };
                true
            }
            None => false,
        }
    }
}

impl_allocator!(impl['a, 'buf] for &'a Stack<'buf>);
