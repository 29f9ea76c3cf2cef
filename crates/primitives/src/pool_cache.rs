//! `SharedPoolCache`: one thread's stock of a [`SharedPool`]'s chunks, so that most
//! allocations and frees touch no shared word.

use core::alloc::Layout;
use core::cell::Cell;
use core::fmt;
use core::num::NonZeroU32;
use core::ptr::NonNull;

use crate::alloc_api::{AllocError, RawAlloc, impl_allocator};
use crate::chunks::{alloc_chunk, dealloc_frees_chunk};
use crate::shared_pool::{Chain, SharedPool};
use crate::sync::Ordering;

/// The end of a cache's list (the pool's `NIL`).
const NIL: u32 = u32::MAX;

/// The batch [`SharedPool::cache`] uses: chunks moved per swap with the shared list.
pub const SHARED_POOL_CACHE_BATCH: u32 = 64;

/// One thread's cache in front of a [`SharedPool`] (a magazine): it takes chunks from
/// the shared free list a batch at a time, with one compare-and-swap, hands them out
/// and takes them back with plain loads and stores, and gives a batch back (one swap)
/// when it holds twice the batch. On drop it gives back everything it holds.
///
/// Get one per worker thread with [`SharedPool::cache`]; it is `Send` but not `Sync`.
/// A chunk may be freed through any cache or the pool itself, whoever allocated it.
///
/// The price: chunks resting in one thread's cache (up to twice the batch) are not
/// available to the others, so `alloc` on the pool or another cache may return `None`
/// while a cache still holds free chunks. The pool's figures (`in_use`, `validate`)
/// need `&mut SharedPool`, so they are only taken when every cache is gone.
///
/// `&SharedPoolCache` is an allocator-api2 `Allocator` (0.2 and 0.4) for layouts
/// that fit a chunk.
///
/// ```
/// use bento_primitives::SharedPool;
/// use core::alloc::Layout;
/// use core::mem::MaybeUninit;
///
/// let mut buf = vec![MaybeUninit::uninit(); 64 << 10];
/// let mut pool = SharedPool::new(&mut buf, Layout::new::<[u8; 64]>()).unwrap();
/// std::thread::scope(|s| {
///     for t in 0..4u8 {
///         let pool = &pool;
///         s.spawn(move || {
///             let cache = pool.cache();
///             let chunks: Vec<_> = (0..100).map(|_| cache.alloc().unwrap()).collect();
///             for c in chunks {
///                 // SAFETY: a chunk of 64 bytes that this thread owns, freed once.
///                 unsafe {
///                     c.write_bytes(t, 64);
///                     cache.free(c);
///                 }
///             }
///         });
///     }
/// });
/// assert_eq!(pool.in_use(), 0);
/// ```
pub struct SharedPoolCache<'p, 'buf> {
    pool: &'p SharedPool<'buf>,
    // Invariant: the chunks this cache holds, free and owned by it alone, linked
    // through the pool's table from `head` (the next one handed out), `len` of them,
    // the last one's link NIL; `head == NIL` when `len == 0`; `len < most`.
    head: Cell<u32>,
    len: Cell<u32>,
    batch: u32,
    // Twice the batch: a free that brings `len` to it gives a batch back.
    most: u32,
}

impl<'buf> SharedPool<'buf> {
    /// A cache of this pool's chunks for one thread, moving
    /// [`SHARED_POOL_CACHE_BATCH`] chunks per swap with the shared list.
    ///
    /// ```
    /// use bento_primitives::SharedPool;
    /// use core::alloc::Layout;
    /// use core::mem::MaybeUninit;
    ///
    /// let mut buf = vec![MaybeUninit::uninit(); 16 << 10];
    /// let mut pool = SharedPool::new(&mut buf, Layout::new::<u64>()).unwrap();
    /// let cache = pool.cache();
    /// let a = cache.alloc().unwrap();
    /// // SAFETY: a live chunk of the pool, freed once.
    /// unsafe { cache.free(a) };
    /// assert_eq!(cache.held(), 64);
    /// drop(cache);
    /// assert_eq!(pool.in_use(), 0);
    /// ```
    #[must_use]
    pub fn cache(&self) -> SharedPoolCache<'_, 'buf> {
        self.cache_with_batch(NonZeroU32::new(SHARED_POOL_CACHE_BATCH).expect("non-zero"))
    }

    /// A cache moving `batch` chunks per swap with the shared list; it holds at most
    /// twice that. A larger batch swaps less often and keeps more chunks away from
    /// other threads.
    ///
    /// ```
    /// use bento_primitives::SharedPool;
    /// use core::alloc::Layout;
    /// use core::mem::MaybeUninit;
    /// use core::num::NonZeroU32;
    ///
    /// let mut buf = vec![MaybeUninit::uninit(); 16 << 10];
    /// let pool = SharedPool::new(&mut buf, Layout::new::<u64>()).unwrap();
    /// let cache = pool.cache_with_batch(NonZeroU32::new(4).unwrap());
    /// let a = cache.alloc().unwrap();
    /// assert_eq!(cache.held(), 3);
    /// # unsafe { cache.free(a) };
    /// ```
    #[must_use]
    pub fn cache_with_batch(&self, batch: NonZeroU32) -> SharedPoolCache<'_, 'buf> {
        // Twice the batch must fit a `u32`.
        let batch = batch.get().min(u32::MAX / 4);
        SharedPoolCache {
            pool: self,
            head: Cell::new(NIL),
            len: Cell::new(0),
            batch,
            most: 2 * batch,
        }
    }
}

impl<'p, 'buf> SharedPoolCache<'p, 'buf> {
    /// Takes a chunk: the last one this cache took back, else a batch from the shared
    /// list (or from the never-used chunks); `None` when neither has any left.
    ///
    /// ```
    /// use bento_primitives::SharedPool;
    /// use core::alloc::Layout;
    /// use core::mem::MaybeUninit;
    ///
    /// let mut buf = vec![MaybeUninit::uninit(); 4096];
    /// let pool = SharedPool::new(&mut buf, Layout::new::<u64>()).unwrap();
    /// let cache = pool.cache();
    /// let a = cache.alloc().unwrap();
    /// // SAFETY: a live chunk of the pool, freed once.
    /// unsafe { cache.free(a) };
    /// assert_eq!(cache.alloc(), Some(a));
    /// # unsafe { cache.free(a) };
    /// ```
    #[inline]
    #[must_use]
    pub fn alloc(&self) -> Option<NonNull<u8>> {
        let top = self.head.get();
        if top == NIL {
            return self.refill();
        }
        // SAFETY: `top` is held by this cache (the invariant).
        let next = unsafe { self.pool.held_link(top) }.load(Ordering::Relaxed);
        self.head.set(next);
        self.len.set(self.len.get() - 1);
        Some(self.pool.hand_out(top))
    }

    /// The cache is empty: takes a batch from the shared list, else from the chunks
    /// never used, and hands out the first.
    #[cold]
    #[inline(never)]
    fn refill(&self) -> Option<NonNull<u8>> {
        let chain = self
            .pool
            .pop_chain(self.batch)
            .or_else(|| self.pool.fresh_chain(self.batch))?;
        // SAFETY: the chain was just handed to this cache; its links lead from `first`
        // to `last`, whose link is NIL.
        let next = unsafe { self.pool.held_link(chain.first) }.load(Ordering::Relaxed);
        self.head.set(next);
        self.len.set(chain.len - 1);
        Some(self.pool.hand_out(chain.first))
    }

    /// Gives a chunk back to this cache; when the cache then holds twice its batch, it
    /// gives the older half to the shared list.
    ///
    /// # Safety
    ///
    /// The caller must ensure that `chunk` came from this cache's pool (through any
    /// cache or the pool itself) and has not been freed since, and that nothing uses
    /// it after this call (as for [`SharedPool::free`]). Debug builds check the first
    /// point as `SharedPool::free` does.
    ///
    /// ```
    /// use bento_primitives::SharedPool;
    /// use core::alloc::Layout;
    /// use core::mem::MaybeUninit;
    ///
    /// let mut buf = vec![MaybeUninit::uninit(); 4096];
    /// let pool = SharedPool::new(&mut buf, Layout::new::<u64>()).unwrap();
    /// let a = pool.alloc().unwrap();
    /// let cache = pool.cache();
    /// // SAFETY: a live chunk of the pool, freed once.
    /// unsafe { cache.free(a) };
    /// assert_eq!(cache.held(), 1);
    /// ```
    #[inline]
    pub unsafe fn free(&self, chunk: NonNull<u8>) {
        let Some(index) = self.pool.take_back(chunk) else {
            return;
        };
        let top = self.head.get();
        // SAFETY: the caller hands the chunk over: it is this cache's now.
        unsafe { self.pool.held_link(index) }.store(top, Ordering::Release);
        self.head.set(index);
        let len = self.len.get() + 1;
        self.len.set(len);
        if len >= self.most {
            self.flush_older_half();
        }
    }

    /// Keeps the `batch` chunks freed last (still warm in the data cache) and gives
    /// the rest to the shared list in one swap.
    #[cold]
    #[inline(never)]
    fn flush_older_half(&self) {
        let mut keep_last = self.head.get();
        for _ in 1..self.batch {
            // SAFETY: the cache holds more than `batch` chunks; each link followed here
            // is one of them.
            keep_last = unsafe { self.pool.held_link(keep_last) }.load(Ordering::Relaxed);
        }
        // SAFETY: as above; `keep_last` is held.
        let link = unsafe { self.pool.held_link(keep_last) };
        let first = link.load(Ordering::Relaxed);
        let older = Chain {
            first,
            last: self.last_from(first),
            len: self.len.get() - self.batch,
        };
        link.store(NIL, Ordering::Release);
        self.len.set(self.batch);
        // SAFETY: the older chunks are this cache's, linked from `first` to `last`.
        unsafe { self.pool.push_chain(older) };
    }

    /// The last chunk of the cache's list from `at`, a chunk it holds.
    fn last_from(&self, mut at: u32) -> u32 {
        loop {
            // SAFETY: `at` is held by this cache, and so is every link followed from it
            // (its list ends in NIL).
            let next = unsafe { self.pool.held_link(at) }.load(Ordering::Relaxed);
            if next == NIL {
                return at;
            }
            at = next;
        }
    }

    /// Chunks resting in this cache (free, but not on the shared list).
    ///
    /// ```
    /// use bento_primitives::SharedPool;
    /// use core::alloc::Layout;
    /// use core::mem::MaybeUninit;
    ///
    /// let mut buf = vec![MaybeUninit::uninit(); 4096];
    /// let pool = SharedPool::new(&mut buf, Layout::new::<u64>()).unwrap();
    /// assert_eq!(pool.cache().held(), 0);
    /// ```
    #[must_use]
    pub fn held(&self) -> usize {
        self.len.get() as usize
    }

    /// Gives every chunk this cache holds to the shared list (one swap), as dropping
    /// it does.
    ///
    /// ```
    /// use bento_primitives::SharedPool;
    /// use core::alloc::Layout;
    /// use core::mem::MaybeUninit;
    ///
    /// let mut buf = vec![MaybeUninit::uninit(); 4096];
    /// let pool = SharedPool::new(&mut buf, Layout::new::<u64>()).unwrap();
    /// let cache = pool.cache();
    /// let a = cache.alloc().unwrap();
    /// assert!(cache.held() > 0);
    /// cache.flush();
    /// assert_eq!(cache.held(), 0);
    /// # unsafe { cache.free(a) };
    /// ```
    pub fn flush(&self) {
        if self.len.get() == 0 {
            return;
        }
        let first = self.head.get();
        let all = Chain {
            first,
            last: self.last_from(first),
            len: self.len.get(),
        };
        self.head.set(NIL);
        self.len.set(0);
        // SAFETY: the chunks were this cache's, linked from `first` to `last`.
        unsafe { self.pool.push_chain(all) };
    }

    /// The pool this cache takes from.
    ///
    /// ```
    /// use bento_primitives::SharedPool;
    /// use core::alloc::Layout;
    /// use core::mem::MaybeUninit;
    ///
    /// let mut buf = vec![MaybeUninit::uninit(); 4096];
    /// let pool = SharedPool::new(&mut buf, Layout::new::<u64>()).unwrap();
    /// assert!(core::ptr::eq(pool.cache().pool(), &pool));
    /// ```
    #[must_use]
    pub fn pool(&self) -> &'p SharedPool<'buf> {
        self.pool
    }

    /// Walks the chunks this cache holds and checks them against its count: each a
    /// chunk of the pool below the high-water mark, no cycle, fewer than twice the
    /// batch. Returns how many it holds.
    ///
    /// # Errors
    ///
    /// A message naming what disagrees.
    ///
    /// ```
    /// use bento_primitives::SharedPool;
    /// use core::alloc::Layout;
    /// use core::mem::MaybeUninit;
    ///
    /// let mut buf = vec![MaybeUninit::uninit(); 4096];
    /// let pool = SharedPool::new(&mut buf, Layout::new::<u64>()).unwrap();
    /// let cache = pool.cache();
    /// let a = cache.alloc().unwrap();
    /// assert_eq!(cache.validate(), Ok(cache.held()));
    /// # unsafe { cache.free(a) };
    /// ```
    pub fn validate(&self) -> Result<usize, &'static str> {
        let len = self.len.get();
        if len >= self.most {
            return Err("the cache holds twice its batch or more");
        }
        let (mut at, mut seen) = (self.head.get(), 0u32);
        while at != NIL {
            if at as usize >= self.pool.touched() {
                return Err("a cached chunk is not one the pool handed out");
            }
            if seen == len {
                return Err("the cache's list runs past its count (a cycle?)");
            }
            seen += 1;
            // SAFETY: `at` was just checked to be a chunk below the high-water mark,
            // and the cache holds it, so its link is initialised.
            at = unsafe { self.pool.held_link(at) }.load(Ordering::Relaxed);
        }
        if seen != len {
            return Err("the cache's list is shorter than its count");
        }
        Ok(len as usize)
    }
}

impl Drop for SharedPoolCache<'_, '_> {
    fn drop(&mut self) {
        self.flush();
    }
}

impl fmt::Debug for SharedPoolCache<'_, '_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SharedPoolCache")
            .field("held", &self.len.get())
            .field("batch", &self.batch)
            .finish_non_exhaustive()
    }
}

// SAFETY: chunks of `fits` layouts satisfy the layout, stay valid until freed, and
// never overlap (each has one owner at a time, as through the pool); a chunk holds
// any size up to the stride, so resizing within it keeps the data in place.
unsafe impl RawAlloc for SharedPoolCache<'_, '_> {
    #[inline]
    fn alloc_raw(&self, layout: Layout) -> Result<NonNull<u8>, AllocError> {
        alloc_chunk(self.pool.geometry(), layout, || self.alloc())
    }

    #[inline]
    unsafe fn dealloc_raw(&self, ptr: NonNull<u8>, layout: Layout) {
        if dealloc_frees_chunk(self.pool.geometry(), self.pool.misuse_hook(), ptr, layout) {
            // SAFETY: the caller guarantees `ptr` is a live block of the pool, so a
            // chunk.
            unsafe { self.free(ptr) }
        }
    }

    unsafe fn resize_in_place(&self, _: NonNull<u8>, _: Layout, new_size: usize) -> bool {
        new_size <= self.pool.geometry().stride
    }
}

impl_allocator!(impl['a, 'p, 'buf] for &'a SharedPoolCache<'p, 'buf>);
