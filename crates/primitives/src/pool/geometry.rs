//! What every pool shares: the geometry of equal chunks, the error of a pool that
//! cannot be made, the misuse report, and the `Allocator` side of a chunk.

use core::alloc::Layout;
use core::mem::MaybeUninit;
use core::ptr::NonNull;

use bento_align::Alignment;

use bento_pages::{AllocError, Misuse, MisuseHook, dangling};

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
    #[error("the page source refused the reservation")]
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
    ) -> Result<usize, Misuse<'static>> {
        let offset = ptr.addr().get().wrapping_sub(self.base.addr().get());
        if ptr.addr() < self.base.addr() || offset >= self.capacity * self.stride {
            return Err(Misuse::Foreign { ptr });
        }
        let index = offset / self.stride;
        if index * self.stride != offset {
            return Err(Misuse::Interior {
                ptr,
                block: Some(self.chunk(index)),
            });
        }
        if index >= touched {
            return Err(Misuse::NeverAllocated { ptr });
        }
        Ok(index)
    }

    /// The size and alignment of every chunk.
    pub(crate) fn layout(&self) -> Layout {
        Layout::from_size_align(self.stride, self.align.get()).expect("checked at creation")
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

/// A caller's buffer about to hold a pool's chunks, each with room for a pointer-sized
/// free-list link: what `Pool::new` and `SharedPool::new` start from.
pub(crate) struct Carve {
    // Invariant: the start of `len` bytes the pool borrows for its lifetime.
    pub(crate) start: NonNull<u8>,
    pub(crate) len: usize,
    pub(crate) stride: usize,
    pub(crate) align: Alignment,
}

impl Carve {
    /// `buf`, to hold chunks for `chunk` (rounded by [`Geometry::stride`] to hold a
    /// pointer).
    pub(crate) fn new(buf: &mut [MaybeUninit<u8>], chunk: Layout) -> Result<Self, PoolError> {
        let (stride, align) = Geometry::stride(chunk, size_of::<usize>(), align_of::<usize>())?;
        Ok(Self {
            len: buf.len(),
            start: NonNull::from(buf).cast(),
            stride,
            align,
        })
    }

    /// The error of a buffer that holds no chunk.
    pub(crate) fn no_fit(&self) -> PoolError {
        no_chunk_fits(self.len, self.stride, self.align)
    }

    /// The pointer `offset` bytes into the buffer.
    ///
    /// # Panics
    ///
    /// When `offset` is past the buffer's end.
    pub(crate) fn at(&self, offset: usize) -> NonNull<u8> {
        assert!(offset <= self.len, "offset {offset} past the buffer");
        // SAFETY: `offset <= len`: inside, or one past, the buffer.
        unsafe { self.start.add(offset) }
    }

    /// The geometry of `capacity` chunks from `offset` bytes into the buffer (aligned).
    ///
    /// # Panics
    ///
    /// When the chunks do not fit in the buffer from there.
    pub(crate) fn chunks(&self, offset: usize, capacity: usize) -> Geometry {
        assert!(
            capacity
                .checked_mul(self.stride)
                .and_then(|bytes| bytes.checked_add(offset))
                .is_some_and(|end| end <= self.len),
            "the chunks pass the buffer's end"
        );
        Geometry::new(self.at(offset), self.stride, self.align, capacity)
    }
}

/// The error of `len` bytes that hold no chunk of `stride` bytes aligned to `align`.
pub(crate) fn no_chunk_fits(len: usize, stride: usize, align: Alignment) -> PoolError {
    PoolError::NoChunkFits {
        len,
        chunk_size: stride,
        chunk_align: align.get(),
    }
}

/// Reports misuse to `hook`, unless the thread is already panicking (a report from a
/// `Drop` during unwinding would abort the process).
#[cold]
pub(crate) fn report(hook: MisuseHook, misuse: &Misuse<'_>) {
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
            &Misuse::WrongLayout {
                ptr,
                layout,
                block_size: geo.stride,
                block_align: geo.align.get(),
            },
        );
        return false;
    }
    true
}

/// Implements `RawAlloc` for a pool that owns its chunks' free list: `FreeList` and
/// `SharedPool`, which each have fields `geo` (a [`Geometry`]) and `hook` (a
/// `MisuseHook`), `alloc(&self) -> Option<NonNull<u8>>`, and `unsafe free(&self,
/// NonNull<u8>)` with [`Pool::free`](crate::Pool::free)'s contract. A generic impl
/// over a trait of this crate cannot do it: `RawAlloc` is another crate's.
macro_rules! impl_chunk_raw_alloc {
    (impl[$($gen:tt)*] for $ty:ty) => {
        // SAFETY: chunks of `fits` layouts satisfy the layout (size and alignment), stay
        // valid until freed, and never overlap (each is handed to one owner at a time);
        // a chunk holds any size up to the stride, so resizing in place within it keeps
        // the data where it is.
        unsafe impl<$($gen)*> bento_pages::RawAlloc for $ty {
            #[inline]
            fn alloc_raw(&self, layout: core::alloc::Layout) -> Result<core::ptr::NonNull<u8>, bento_pages::AllocError> {
                $crate::pool::geometry::alloc_chunk(&self.geo, layout, || self.alloc())
            }

            #[inline]
            unsafe fn dealloc_raw(&self, ptr: core::ptr::NonNull<u8>, layout: core::alloc::Layout) {
                if $crate::pool::geometry::dealloc_frees_chunk(&self.geo, self.hook, ptr, layout) {
                    // SAFETY: the caller guarantees `ptr` is a live block of ours, so a
                    // chunk handed out and not free.
                    unsafe { self.free(ptr) }
                }
            }

            unsafe fn resize_in_place(&self, _: core::ptr::NonNull<u8>, _: core::alloc::Layout, new_size: usize) -> bool {
                new_size <= self.geo.stride
            }
        }
    };
}

pub(crate) use impl_chunk_raw_alloc;

#[cfg(test)]
mod tests;
