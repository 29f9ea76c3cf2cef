//! What every pool shares: the geometry of equal chunks, the errors, the misuse hook
//! of the debug checks, and the in-place sort of a free list (for leak lists and
//! `GrowingPool::shrink`).

use core::alloc::Layout;
use core::fmt;
use core::ptr::NonNull;

use bento_align::Alignment;

use crate::alloc_api::{AllocError, dangling};

/// Why a pool could not be made.
///
/// ```
/// use bento_primitives::{Pool, PoolError};
/// use core::alloc::Layout;
/// use core::mem::MaybeUninit;
///
/// let mut buf = [MaybeUninit::uninit(); 32];
/// let err = Pool::new(&mut buf, Layout::new::<[u8; 64]>()).unwrap_err();
/// assert!(matches!(err, PoolError::NoChunkFits { .. }));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PoolError {
    /// Not one chunk fits in the memory given.
    #[error("{len} bytes hold no chunk of {chunk_size} bytes aligned to {chunk_align}")]
    NoChunkFits {
        /// The bytes given (or asked for).
        len: usize,
        /// The chunk size after rounding.
        chunk_size: usize,
        /// The chunk alignment.
        chunk_align: usize,
    },
    /// The chunk size, rounded up to its alignment, overflows `isize`.
    #[error("a chunk of {size} bytes aligned to {align} is too large")]
    ChunkTooLarge {
        /// The size asked for.
        size: usize,
        /// The alignment asked for.
        align: usize,
    },
    /// The page source refused to reserve the pool's address space.
    #[error("the page source refused the reservation: {0}")]
    Pages(#[from] bento_pages::PageError),
}

/// The shape of a pool's chunks: where the first one starts, how far apart they are,
/// how many there are.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Geometry {
    // Invariant: aligned to `align`; its provenance covers every chunk.
    pub(crate) base: NonNull<u8>,
    // Invariant: a non-zero multiple of `align`, at least a pointer.
    pub(crate) stride: usize,
    pub(crate) align: Alignment,
    // Invariant: `base + capacity * stride` does not pass the memory given.
    pub(crate) capacity: usize,
    // Invariant: `ceil(2^64 / stride)`: `offset / stride` is
    // `(offset * magic) >> 64` for every multiple `offset` of `stride` (the error
    // term `magic * stride - 2^64` is below `stride`, so it never reaches a whole
    // quotient step).
    magic: u64,
}

impl Geometry {
    /// The stride of chunks holding `chunk`, holding at least `link` bytes and aligned
    /// at least to `link_align`.
    pub(crate) fn stride(
        chunk: Layout,
        link: usize,
        link_align: usize,
    ) -> Result<(usize, Alignment), PoolError> {
        let align = Alignment::new(chunk.align().max(link_align)).expect("a power of two");
        let too_large = PoolError::ChunkTooLarge {
            size: chunk.size(),
            align: chunk.align(),
        };
        let stride = bento_align::align_up(chunk.size().max(link), align).ok_or(too_large)?;
        if stride > isize::MAX as usize {
            return Err(too_large);
        }
        Ok((stride, align))
    }

    /// The geometry of `capacity` chunks of `stride` bytes from `base`.
    pub(crate) fn new(base: NonNull<u8>, stride: usize, align: Alignment, capacity: usize) -> Self {
        debug_assert!(stride >= size_of::<usize>() && stride.is_multiple_of(align.get()));
        let magic = if stride.is_power_of_two() {
            // 2^64 / stride exactly; stride >= 2 keeps it in range.
            1u64 << (64 - stride.trailing_zeros())
        } else {
            (u64::MAX / stride as u64) + 1
        };
        Self {
            base,
            stride,
            align,
            capacity,
            magic,
        }
    }

    /// The chunk at `index`.
    #[inline]
    pub(crate) fn chunk(&self, index: usize) -> NonNull<u8> {
        debug_assert!(index <= self.capacity, "chunk index {index} out of range");
        // SAFETY: `index <= capacity`, so the offset stays inside (or one past) the
        // chunks, which lie in the memory `base` points to.
        unsafe { self.base.add(index * self.stride) }
    }

    /// The index of the chunk starting at `ptr`, which must be a chunk boundary.
    #[inline]
    pub(crate) fn index_of(&self, ptr: NonNull<u8>) -> usize {
        let offset = ptr.addr().get().wrapping_sub(self.base.addr().get());
        debug_assert!(
            offset.is_multiple_of(self.stride),
            "{ptr:p} is not a chunk boundary"
        );
        ((offset as u128 * u128::from(self.magic)) >> 64) as usize
    }

    /// Where `ptr` lies among the first `touched` chunks: `Ok(index)` at a chunk's
    /// start, else the misuse it is.
    pub(crate) fn locate(
        &self,
        ptr: NonNull<u8>,
        touched: usize,
    ) -> Result<usize, PoolMisuse<'static>> {
        let offset = ptr.addr().get().wrapping_sub(self.base.addr().get());
        if ptr.addr() < self.base.addr() || offset >= self.capacity * self.stride {
            return Err(PoolMisuse::Foreign { ptr });
        }
        let index = offset / self.stride;
        if index * self.stride != offset {
            return Err(PoolMisuse::Interior {
                ptr,
                chunk: self.chunk(index),
            });
        }
        if index >= touched {
            return Err(PoolMisuse::NeverAllocated { ptr });
        }
        Ok(index)
    }

    /// The chunk size and alignment a block must fit.
    pub(crate) fn fits(&self, layout: Layout) -> bool {
        layout.size() <= self.stride && layout.align() <= self.align.get()
    }

    /// Whether the chunk at `ptr` can hold `layout`: at most the chunk size, at an
    /// address aligned to it.
    pub(crate) fn holds(&self, ptr: NonNull<u8>, layout: Layout) -> bool {
        layout.size() <= self.stride && ptr.addr().get().is_multiple_of(layout.align())
    }
}

/// Misuse the pools' debug checks detect, handed to the pool's [`MisuseHook`].
///
/// The checks run in debug builds (`debug_assertions`); in release builds only
/// `validate()` looks. When the hook returns instead of panicking, the operation is
/// skipped (a bad free frees nothing), so nothing overlaps; after a
/// [`BrokenLink`](Self::BrokenLink) the rest of the free list is dropped on purpose.
///
/// ```
/// use bento_primitives::{Pool, PoolMisuse};
/// use core::alloc::Layout;
/// use core::mem::MaybeUninit;
/// use std::sync::atomic::{AtomicUsize, Ordering};
///
/// static SEEN: AtomicUsize = AtomicUsize::new(0);
/// fn count(misuse: &PoolMisuse<'_>) {
///     assert!(matches!(misuse, PoolMisuse::DoubleFree { .. }), "{misuse}");
///     SEEN.fetch_add(1, Ordering::Relaxed);
/// }
///
/// let mut buf = [MaybeUninit::uninit(); 1024];
/// let mut pool = Pool::new(&mut buf, Layout::new::<[u64; 4]>()).unwrap();
/// pool.set_misuse_hook(count);
/// let a = pool.alloc().unwrap();
/// // SAFETY: `a` is a live chunk of `pool`; the second free, made only where the debug
/// // checks run (a build without them is not told of it), is the misuse under test,
/// // which the checks catch before it touches anything.
/// unsafe {
///     pool.free(a);
///     if bento_primitives::DEBUG_CHECKS {
///         pool.free(a);
///     }
/// }
/// assert_eq!(SEEN.load(Ordering::Relaxed), usize::from(bento_primitives::DEBUG_CHECKS));
/// assert_eq!(pool.in_use(), 0);
/// ```
#[derive(Clone, Copy, Debug)]
#[non_exhaustive]
pub enum PoolMisuse<'a> {
    /// A pointer freed that is not inside the pool's chunks.
    Foreign {
        /// The pointer.
        ptr: NonNull<u8>,
    },
    /// A pointer freed that points inside a chunk, not at its start.
    Interior {
        /// The pointer.
        ptr: NonNull<u8>,
        /// The start of the chunk it points into.
        chunk: NonNull<u8>,
    },
    /// A chunk freed that the pool never handed out (above its high-water mark).
    NeverAllocated {
        /// The pointer.
        ptr: NonNull<u8>,
    },
    /// A chunk freed that is already free.
    DoubleFree {
        /// The chunk.
        ptr: NonNull<u8>,
    },
    /// A free chunk's poison fill was overwritten: something wrote to it after it was
    /// freed. Found when the chunk is handed out again, or by `validate()`.
    WriteAfterFree {
        /// The chunk.
        ptr: NonNull<u8>,
        /// The first byte found changed, from the chunk's start.
        offset: usize,
    },
    /// A free chunk's link was overwritten with something that is not a free chunk:
    /// the rest of the free list cannot be trusted and is dropped (those chunks stay
    /// unused rather than risk being handed out twice).
    BrokenLink {
        /// The chunk whose link was overwritten.
        ptr: NonNull<u8>,
    },
    /// A block given back through the `Allocator` interface with a layout its chunk
    /// cannot hold: larger than a chunk, or of an alignment its address does not meet.
    WrongLayout {
        /// The pointer.
        ptr: NonNull<u8>,
        /// The layout given.
        layout: Layout,
        /// The pool's chunk size.
        chunk_size: usize,
        /// The pool's chunk alignment.
        chunk_align: usize,
    },
    /// The pool was dropped with chunks still in use: the leak list.
    Leaked(LeakList<'a>),
}

impl fmt::Display for PoolMisuse<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("bento pool misuse: ")?;
        match *self {
            Self::Foreign { ptr } => write!(f, "{ptr:p} freed is not a chunk of this pool"),
            Self::Interior { ptr, chunk } => write!(
                f,
                "{ptr:p} freed points inside the chunk at {chunk:p}, not at its start"
            ),
            Self::NeverAllocated { ptr } => {
                write!(f, "{ptr:p} freed was never handed out by this pool")
            }
            Self::DoubleFree { ptr } => {
                write!(f, "double free of {ptr:p}: the chunk is already free")
            }
            Self::WriteAfterFree { ptr, offset } => write!(
                f,
                "write after free: the free chunk at {ptr:p} was changed at offset {offset}"
            ),
            Self::BrokenLink { ptr } => write!(
                f,
                "the free chunk at {ptr:p} was overwritten (its free-list link is not a free \
                 chunk); the rest of the free list is dropped"
            ),
            Self::WrongLayout {
                ptr,
                layout,
                chunk_size,
                chunk_align,
            } => write!(
                f,
                "{ptr:p} freed with size {} and alignment {}, which a chunk of {chunk_size} \
                 bytes (aligned to {chunk_align}) at that address cannot hold",
                layout.size(),
                layout.align()
            ),
            Self::Leaked(leaks) => write!(f, "{leaks}"),
        }
    }
}

/// What a pool calls on misuse its debug checks detect. The default,
/// [`panic_on_misuse`], panics with the misuse's message.
pub type MisuseHook = fn(&PoolMisuse<'_>);

/// The default [`MisuseHook`]: panics with the message of `misuse`.
///
/// ```should_panic
/// use bento_primitives::{PoolMisuse, panic_on_misuse};
/// use core::ptr::NonNull;
///
/// panic_on_misuse(&PoolMisuse::DoubleFree { ptr: NonNull::dangling() });
/// ```
#[track_caller]
pub fn panic_on_misuse(misuse: &PoolMisuse<'_>) {
    panic!("{misuse}")
}

/// Reports misuse to `hook`, unless the thread is already panicking (a report from a
/// `Drop` during unwinding would abort the process).
#[cold]
pub(crate) fn report(hook: MisuseHook, misuse: &PoolMisuse<'_>) {
    if !panicking() {
        hook(misuse);
    }
}

/// Whether the thread is unwinding (known with `std` only).
pub(crate) fn panicking() -> bool {
    #[cfg(feature = "std")]
    return std::thread::panicking();
    #[cfg(not(feature = "std"))]
    false
}

/// The `Allocator` side of a pool: a zero-size layout gets a dangling pointer, one
/// that fits a chunk gets `take()`, any other is refused.
#[inline]
pub(crate) fn alloc_chunk(
    geo: &Geometry,
    layout: Layout,
    take: impl FnOnce() -> Option<NonNull<u8>>,
) -> Result<NonNull<u8>, AllocError> {
    if layout.size() == 0 {
        return Ok(dangling(layout));
    }
    if !geo.fits(layout) {
        return Err(AllocError);
    }
    take().ok_or(AllocError)
}

/// Whether a block given back through the `Allocator` interface is a chunk to free:
/// not for a zero-size layout (nothing was taken), and, in debug builds, not for a
/// layout the chunk at `ptr` cannot hold (reported to `hook`). A chunk holds any
/// layout of at most its size whose alignment its address meets: the chunks'
/// alignment, or a stricter one the chunk happens to meet after an in-place resize
/// to it (the `Allocator` trait's `grow` and `shrink` keep a block in place whenever
/// its address meets the new alignment).
#[inline]
pub(crate) fn dealloc_frees_chunk(
    geo: &Geometry,
    hook: MisuseHook,
    ptr: NonNull<u8>,
    layout: Layout,
) -> bool {
    if layout.size() == 0 {
        return false;
    }
    if cfg!(debug_assertions) && !geo.holds(ptr, layout) {
        report(
            hook,
            &PoolMisuse::WrongLayout {
                ptr,
                layout,
                chunk_size: geo.stride,
                chunk_align: geo.align.get(),
            },
        );
        return false;
    }
    true
}

/// Access to a free list threaded through chunk indices, for the in-place sort.
pub(crate) trait Links {
    /// The chunk after `index` in the list.
    fn next(&self, index: usize) -> Option<usize>;
    /// Makes `next` follow `index`.
    fn set_next(&self, index: usize, next: Option<usize>);
    /// The chunk at `index` (for leak lists).
    fn chunk(&self, index: usize) -> NonNull<u8>;
}

/// Sorts the list starting at `head` by index, in place and with O(1) extra memory (a
/// bottom-up merge sort of linked runs), and returns the new head. O(n log n).
pub(crate) fn sort_list(links: &dyn Links, head: Option<usize>) -> Option<usize> {
    let mut list = head;
    let mut run = 1usize;
    loop {
        let mut rest = list;
        let mut tail: Option<usize> = None;
        list = None;
        let mut merges = 0usize;
        while let Some(first) = rest {
            merges += 1;
            // `left` is the run from `first`, `right` the run after it.
            let mut left = Some(first);
            let mut left_len = 0usize;
            let mut right = Some(first);
            while left_len < run {
                left_len += 1;
                right = links.next(right.expect("inside the left run"));
                if right.is_none() {
                    break;
                }
            }
            let mut right_len = run;
            loop {
                let right_open = right_len > 0 && right.is_some();
                let take = match (left_len > 0, right_open) {
                    (false, false) => break,
                    (true, false) => left,
                    (false, true) => right,
                    (true, true) => {
                        if left <= right {
                            left
                        } else {
                            right
                        }
                    }
                };
                let node = take.expect("an open run has a node");
                if take == left && left_len > 0 {
                    left = links.next(node);
                    left_len -= 1;
                } else {
                    right = links.next(node);
                    right_len -= 1;
                }
                match tail {
                    Some(t) => links.set_next(t, Some(node)),
                    None => list = Some(node),
                }
                tail = Some(node);
            }
            rest = right;
        }
        if let Some(t) = tail {
            links.set_next(t, None);
        }
        if merges <= 1 {
            return list;
        }
        run *= 2;
    }
}

/// The chunks of a pool still in use, computed from its free list sorted by address:
/// every chunk below the high-water mark that the list skips. Borrowing the pool
/// exclusively (or from its `Drop`), so nothing changes while it is read.
///
/// ```
/// use bento_primitives::Pool;
/// use core::alloc::Layout;
/// use core::mem::MaybeUninit;
///
/// let mut buf = [MaybeUninit::uninit(); 1024];
/// let mut pool = Pool::new(&mut buf, Layout::new::<u64>()).unwrap();
/// let a = pool.alloc().unwrap();
/// let b = pool.alloc().unwrap();
/// // SAFETY: `a` is a live chunk of `pool`.
/// unsafe { pool.free(a) };
/// let live = pool.live_chunks();
/// assert_eq!(live.len(), 1);
/// assert_eq!(live.iter().collect::<Vec<_>>(), [b]);
/// # unsafe { pool.free(b) };
/// ```
#[derive(Clone, Copy)]
pub struct LeakList<'a> {
    links: &'a dyn Links,
    // Invariant: the pool's free list, sorted by index, every index below `touched`.
    first_free: Option<usize>,
    touched: usize,
    count: usize,
}

impl<'a> LeakList<'a> {
    /// The leak list of the `touched` chunks of `links` whose free list, sorted, starts
    /// at `first_free` and holds `touched - count` chunks.
    pub(crate) fn new(
        links: &'a dyn Links,
        first_free: Option<usize>,
        touched: usize,
        count: usize,
    ) -> Self {
        Self {
            links,
            first_free,
            touched,
            count,
        }
    }

    /// How many chunks are in use.
    #[must_use]
    pub fn len(&self) -> usize {
        self.count
    }

    /// Whether no chunk is in use.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// The chunks in use, in address order.
    #[must_use]
    pub fn iter(&self) -> LeakIter<'a> {
        LeakIter {
            links: self.links,
            next_free: self.first_free,
            index: 0,
            touched: self.touched,
        }
    }
}

impl fmt::Debug for LeakList<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

/// Names the count and the first few chunks.
impl fmt::Display for LeakList<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const SHOWN: usize = 8;
        write!(f, "pool dropped with {} chunk(s) in use:", self.count)?;
        for chunk in self.iter().take(SHOWN) {
            write!(f, " {chunk:p}")?;
        }
        if self.count > SHOWN {
            write!(f, " and {} more", self.count - SHOWN)?;
        }
        Ok(())
    }
}

/// The iterator of [`LeakList::iter`].
#[derive(Clone)]
pub struct LeakIter<'a> {
    links: &'a dyn Links,
    next_free: Option<usize>,
    index: usize,
    touched: usize,
}

impl fmt::Debug for LeakIter<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LeakIter")
            .field("index", &self.index)
            .field("touched", &self.touched)
            .finish_non_exhaustive()
    }
}

impl Iterator for LeakIter<'_> {
    type Item = NonNull<u8>;

    fn next(&mut self) -> Option<NonNull<u8>> {
        while self.index < self.touched {
            let index = self.index;
            self.index += 1;
            if self.next_free == Some(index) {
                self.next_free = self.links.next(index);
            } else {
                return Some(self.links.chunk(index));
            }
        }
        None
    }
}

#[cfg(test)]
mod tests;
