//! The pool: equal chunks with the free list threaded through the free chunks
//! themselves, over a caller's buffer; its [`FreeList`] is the one `GrowingPool` and
//! `TypedPool` use too.

use core::alloc::Layout;
use core::fmt;
use core::marker::PhantomData;
use core::mem::MaybeUninit;
use core::ptr::NonNull;

use bento_pages::MisuseHook;
use bento_pages::{AllocError, RawAlloc, impl_allocator};

use crate::pool::free_list::{FreeList, PoolCorruption, PoolReport, free_list_accessors};
use crate::pool::geometry::{Carve, PoolError};
use crate::pool::leaks::LeakList;

/// A pool of equal chunks over a caller's buffer: O(1) allocation and free, the last
/// chunk freed reused first (it is still in cache), no per-chunk overhead.
///
/// ```text
///   base                                  fresh (high-water mark)        end
///    | chunk | free ─┐ | chunk | free ─┐ |   never used: untouched   |
///    head ───────────┼─────────────────┘ ... each free chunk's first word links on
/// ```
///
/// A free chunk's first word links to the next free one, so the pool keeps no side
/// storage. Creating a pool is O(1) and touches no chunk: chunks above the high-water
/// mark are handed out, one by one, only when the free list is empty.
///
/// Debug builds check every free (a foreign or interior pointer, a chunk never handed
/// out, a double free), poison free chunks with `0xDD` and check the poison when the
/// chunk is handed out again (a write after free), fill handed-out chunks with `0xCD`,
/// and report the chunks still in use when the pool is dropped (the leak list). What
/// they find goes to the pool's [`MisuseHook`] (a panic by default).
///
/// `&Pool` is an allocator-api2 `Allocator` (0.2 and 0.4) for layouts that fit a
/// chunk; others are `AllocError`.
///
/// ```
/// use bento_primitives::Pool;
/// use core::alloc::Layout;
/// use core::mem::MaybeUninit;
///
/// let mut buf = [MaybeUninit::uninit(); 4096];
/// let pool = Pool::new(&mut buf, Layout::new::<[f32; 16]>()).unwrap();
/// assert_eq!(pool.capacity(), 64);
/// let a = pool.alloc().unwrap();
/// // SAFETY: `a` is a live chunk of `pool`, not used after.
/// unsafe { pool.free(a) };
/// assert_eq!(pool.alloc(), Some(a)); // the last freed comes back first
/// # unsafe { pool.free(a) };
/// ```
pub struct Pool<'buf> {
    // The free list's own tests reach it through a pool.
    pub(crate) list: FreeList,
    _buf: PhantomData<&'buf mut [MaybeUninit<u8>]>,
}

// SAFETY: the pool owns its chunks exclusively (it holds the buffer's `&'buf mut`
// borrow), so moving it to another thread moves sole access with it; it is not `Sync`
// (its state is in `Cell`s).
unsafe impl Send for Pool<'_> {}

impl<'buf> Pool<'buf> {
    /// A pool of chunks for `chunk` in `buf`: the chunk size is rounded up to at least
    /// a pointer and to a multiple of the alignment (itself at least a pointer's); the
    /// first chunk starts at the first suitably aligned byte.
    ///
    /// # Errors
    ///
    /// [`PoolError::NoChunkFits`] when not one chunk fits in `buf`.
    ///
    /// ```
    /// use bento_primitives::Pool;
    /// use core::alloc::Layout;
    /// use core::mem::MaybeUninit;
    ///
    /// let mut buf = [MaybeUninit::uninit(); 1000];
    /// let pool = Pool::new(&mut buf, Layout::from_size_align(20, 4).unwrap()).unwrap();
    /// assert_eq!(pool.chunk_layout().size(), 24);
    /// assert!(pool.capacity() >= 40);
    /// ```
    pub fn new(buf: &'buf mut [MaybeUninit<u8>], chunk: Layout) -> Result<Self, PoolError> {
        let carve = Carve::new(buf, chunk)?;
        let pad = carve.start.as_ptr().align_offset(carve.align.get());
        let capacity = carve.len.saturating_sub(pad) / carve.stride;
        if pad == usize::MAX || capacity == 0 {
            return Err(carve.no_fit());
        }
        Ok(Self {
            list: FreeList::new(carve.chunks(pad, capacity), capacity),
            _buf: PhantomData,
        })
    }

    /// Takes a chunk, `None` when every chunk is in use. O(1).
    ///
    /// The chunk holds [`chunk_layout`](Self::chunk_layout) bytes, uninitialised (debug
    /// builds fill it with `0xCD`).
    ///
    /// ```
    /// use bento_primitives::Pool;
    /// use core::alloc::Layout;
    /// use core::mem::MaybeUninit;
    ///
    /// let mut buf = [MaybeUninit::uninit(); 64];
    /// let pool = Pool::new(&mut buf, Layout::new::<[u64; 4]>()).unwrap();
    /// let a = pool.alloc().unwrap();
    /// let b = pool.alloc().unwrap();
    /// assert_eq!(pool.alloc(), None);
    /// # unsafe { pool.free(a); pool.free(b) };
    /// ```
    #[inline]
    #[must_use]
    pub fn alloc(&self) -> Option<NonNull<u8>> {
        self.list.alloc()
    }

    /// Gives a chunk back. O(1).
    ///
    /// # Safety
    ///
    /// The caller must ensure that:
    /// - `chunk` was returned by [`alloc`](Self::alloc) (or the `Allocator` interface)
    ///   of this pool, and has not been freed since;
    /// - nothing uses the chunk after this call.
    ///
    /// Debug builds check the first point: a pointer outside the pool's chunks, one
    /// inside a chunk but not at its start, a chunk never handed out, and a chunk
    /// already free are reported to the [`MisuseHook`] (a panic by default) and the
    /// free does nothing. Release builds do not check: such a free corrupts the free
    /// list (a later `alloc` may hand out memory outside the pool or a chunk twice);
    /// [`validate`](Self::validate) finds it after the fact.
    ///
    /// ```
    /// use bento_primitives::Pool;
    /// use core::alloc::Layout;
    /// use core::mem::MaybeUninit;
    ///
    /// let mut buf = [MaybeUninit::uninit(); 256];
    /// let pool = Pool::new(&mut buf, Layout::new::<u32>()).unwrap();
    /// let a = pool.alloc().unwrap();
    /// assert_eq!(pool.in_use(), 1);
    /// // SAFETY: `a` is a live chunk of `pool`, not used after.
    /// unsafe { pool.free(a) };
    /// assert_eq!(pool.in_use(), 0);
    /// ```
    #[inline]
    pub unsafe fn free(&self, chunk: NonNull<u8>) {
        // SAFETY: the caller's contract is the list's.
        unsafe { self.list.free(chunk) }
    }

    /// Whether `ptr` points into one of the pool's chunks.
    ///
    /// ```
    /// use bento_primitives::Pool;
    /// use core::alloc::Layout;
    /// use core::mem::MaybeUninit;
    ///
    /// let mut buf = [MaybeUninit::uninit(); 256];
    /// let pool = Pool::new(&mut buf, Layout::new::<u64>()).unwrap();
    /// let a = pool.alloc().unwrap();
    /// assert!(pool.contains(a));
    /// assert!(!pool.contains(core::ptr::NonNull::from(&0u8)));
    /// # unsafe { pool.free(a) };
    /// ```
    #[must_use]
    pub fn contains(&self, ptr: NonNull<u8>) -> bool {
        self.list.contains(ptr)
    }

    free_list_accessors! {
        /// How many chunks the pool holds.
        ///
        /// ```
        /// use bento_primitives::Pool;
        /// use core::alloc::Layout;
        /// use core::mem::MaybeUninit;
        ///
        /// # #[repr(align(16))] struct Buf([MaybeUninit<u8>; 160]);
        /// let mut buf = Buf([MaybeUninit::uninit(); 160]);
        /// let pool = Pool::new(&mut buf.0, Layout::new::<[u8; 16]>()).unwrap();
        /// assert_eq!(pool.capacity(), 10);
        /// ```
        fn capacity;

        /// How many chunks are free (on the free list or never used).
        ///
        /// O(1) in debug builds and with the `counters` feature, which count every
        /// allocation and free; otherwise the pool keeps no count (it would cost each
        /// operation a read-modify-write) and this walks the free list, O(free chunks).
        ///
        /// ```
        /// use bento_primitives::Pool;
        /// use core::alloc::Layout;
        /// use core::mem::MaybeUninit;
        ///
        /// let mut buf = [MaybeUninit::uninit(); 256];
        /// let pool = Pool::new(&mut buf, Layout::new::<u64>()).unwrap();
        /// let a = pool.alloc().unwrap();
        /// assert_eq!(pool.available(), pool.capacity() - 1);
        /// # unsafe { pool.free(a) };
        /// ```
        fn available;

        /// How many chunks are in use.
        ///
        /// O(1) in debug builds and with the `counters` feature, which count every
        /// allocation and free; otherwise the pool keeps no count (it would cost each
        /// operation a read-modify-write) and this walks the free list, O(free chunks).
        ///
        /// ```
        /// use bento_primitives::Pool;
        /// use core::alloc::Layout;
        /// use core::mem::MaybeUninit;
        ///
        /// let mut buf = [MaybeUninit::uninit(); 256];
        /// let pool = Pool::new(&mut buf, Layout::new::<u64>()).unwrap();
        /// assert_eq!(pool.in_use(), 0);
        /// ```
        fn in_use;

        /// The size and alignment of every chunk (after rounding).
        ///
        /// ```
        /// use bento_primitives::Pool;
        /// use core::alloc::Layout;
        /// use core::mem::MaybeUninit;
        ///
        /// let mut buf = [MaybeUninit::uninit(); 256];
        /// let pool = Pool::new(&mut buf, Layout::new::<u8>()).unwrap();
        /// assert_eq!(pool.chunk_layout(), Layout::new::<usize>());
        /// ```
        fn chunk_layout;
    }

    /// Sets what the debug checks call on misuse (the default panics).
    ///
    /// ```
    /// use bento_primitives::{Pool, Misuse};
    /// use core::alloc::Layout;
    /// use core::mem::MaybeUninit;
    ///
    /// fn ignore(_: &Misuse<'_>) {}
    /// let mut buf = [MaybeUninit::uninit(); 256];
    /// let mut pool = Pool::new(&mut buf, Layout::new::<u64>()).unwrap();
    /// pool.set_misuse_hook(ignore);
    /// let leaked = pool.alloc().unwrap();
    /// drop(pool); // the leak goes to `ignore`, not to a panic
    /// ```
    pub fn set_misuse_hook(&mut self, hook: MisuseHook) {
        self.list.hook = hook;
    }

    /// Walks the free list and checks the pool: every entry a chunk the pool handed
    /// out, no cycle, `capacity == in_use + free_listed + untouched` with the free
    /// count from the walk (and, in debug builds, every free chunk's poison intact).
    ///
    /// # Errors
    ///
    /// [`PoolCorruption`] naming what is broken.
    ///
    /// ```
    /// use bento_primitives::Pool;
    /// use core::alloc::Layout;
    /// use core::mem::MaybeUninit;
    ///
    /// let mut buf = [MaybeUninit::uninit(); 256];
    /// let pool = Pool::new(&mut buf, Layout::new::<u64>()).unwrap();
    /// assert_eq!(pool.validate().unwrap().in_use, 0);
    /// ```
    pub fn validate(&self) -> Result<PoolReport, PoolCorruption> {
        self.list.validate()
    }

    /// The chunks in use (the leak list), in address order. Sorts the free list by
    /// address on the way, so the lowest free chunks are handed out first afterwards.
    /// O(f log f) for `f` free chunks; no memory besides the chunks.
    ///
    /// ```
    /// use bento_primitives::Pool;
    /// use core::alloc::Layout;
    /// use core::mem::MaybeUninit;
    ///
    /// let mut buf = [MaybeUninit::uninit(); 256];
    /// let mut pool = Pool::new(&mut buf, Layout::new::<u64>()).unwrap();
    /// let a = pool.alloc().unwrap();
    /// assert_eq!(pool.live_chunks().iter().next(), Some(a));
    /// # unsafe { pool.free(a) };
    /// ```
    pub fn live_chunks(&mut self) -> LeakList<'_> {
        self.list.live_chunks()
    }
}

impl fmt::Debug for Pool<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Pool").field(&self.list).finish()
    }
}

/// Debug builds report the chunks still in use to the misuse hook.
impl Drop for Pool<'_> {
    fn drop(&mut self) {
        self.list.report_leaks();
    }
}

// SAFETY: forwards to the list, whose contract is `RawAlloc`'s.
unsafe impl RawAlloc for Pool<'_> {
    #[inline]
    fn alloc_raw(&self, layout: Layout) -> Result<NonNull<u8>, AllocError> {
        self.list.alloc_raw(layout)
    }

    #[inline]
    unsafe fn dealloc_raw(&self, ptr: NonNull<u8>, layout: Layout) {
        // SAFETY: the caller's contract.
        unsafe { self.list.dealloc_raw(ptr, layout) }
    }

    unsafe fn resize_in_place(&self, ptr: NonNull<u8>, old: Layout, new_size: usize) -> bool {
        // SAFETY: the caller's contract.
        unsafe { self.list.resize_in_place(ptr, old, new_size) }
    }
}

impl_allocator!(impl['a, 'buf] for &'a Pool<'buf>);
