//! `SharedPoolCache`: one thread's stock of a [`SharedPool`]'s chunks, so that most
//! allocations and frees touch no shared word.

use core::alloc::Layout;
use core::cell::Cell;
use core::fmt;
use core::num::NonZeroU32;
use core::ptr::NonNull;

use crate::pool::free_list::PoolCorruption;
use crate::pool::geometry::{alloc_chunk, dealloc_frees_chunk};
use crate::pool::shared_pool::{Chain, SharedPool};
use crate::sync::Ordering;
use bento_pages::{AllocError, RawAlloc, impl_allocator};

/// The batch [`SharedPool::cache`] uses: chunks moved per swap with the shared list.
pub const SHARED_POOL_CACHE_BATCH: u32 = 64;

/// The largest batch a cache takes ([`SharedPool::cache_with_batch`] clamps to it): its
/// array of chunk pointers, twice this, lives inside the cache (no heap).
///
/// ```
/// use bento_primitives::{SHARED_POOL_CACHE_MAX_BATCH, SharedPool};
/// use core::alloc::Layout;
/// use core::mem::MaybeUninit;
/// use core::num::NonZeroU32;
///
/// let mut buf = vec![MaybeUninit::uninit(); 64 << 10];
/// let pool = SharedPool::new(&mut buf, Layout::new::<u64>()).unwrap();
/// let cache = pool.cache_with_batch(NonZeroU32::MAX);
/// let a = cache.alloc().unwrap();
/// assert_eq!(cache.held() as u32, SHARED_POOL_CACHE_MAX_BATCH - 1);
/// # unsafe { cache.free(a) };
/// ```
pub const SHARED_POOL_CACHE_MAX_BATCH: u32 = 128;

/// The cache's array: room for twice the largest batch.
const SLOTS: usize = 2 * SHARED_POOL_CACHE_MAX_BATCH as usize;

/// One thread's cache in front of a [`SharedPool`] (a magazine): it takes chunks from
/// the shared free list a batch at a time, with one compare-and-swap, hands them out
/// and takes them back with plain loads and stores on an array of chunk pointers inside
/// the cache (room for twice [`SHARED_POOL_CACHE_MAX_BATCH`], a pointer each: 2 KiB on
/// 64-bit targets, no heap), and gives a batch back (one swap) when it holds twice the
/// batch. On drop it gives back everything it holds.
///
/// Get one per worker thread with [`SharedPool::cache`]; it is `Send` but not `Sync`.
/// A chunk may be freed through any cache or the pool itself, whoever allocated it.
///
/// The price: chunks resting in one thread's cache (up to twice the batch) are not
/// available to the others, so `alloc` on the pool or another cache may return `None`
/// while a cache still holds free chunks. The pool's stats (`in_use`, `validate`)
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
    // Invariant: `slots[..len]` are the chunks this cache holds (pointers to their
    // starts, with the pool's provenance), free, distinct and owned by it alone; the
    // newest is at `len - 1`, handed out first.
    slots: [Cell<NonNull<u8>>; SLOTS],
    // Invariant: `len < most` between calls.
    len: Cell<u32>,
    batch: u32,
    // Invariant: twice the batch, at most `SLOTS`: a free that brings `len` to it gives
    // a batch back.
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
    /// other threads. A batch above [`SHARED_POOL_CACHE_MAX_BATCH`] or the pool's
    /// capacity is taken as the smaller of the two.
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
        // More than the pool holds could never be taken.
        let batch = batch
            .get()
            .min(SHARED_POOL_CACHE_MAX_BATCH)
            .min(self.capacity().try_into().unwrap_or(u32::MAX));
        SharedPoolCache {
            pool: self,
            slots: [const { Cell::new(NonNull::dangling()) }; SLOTS],
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
        let len = self.len.get();
        if len == 0 {
            return self.refill();
        }
        let len = len - 1;
        self.len.set(len);
        // SAFETY: `len` was below `most` (the invariant of `len`), so this is too.
        Some(self.pool.hand_out_ptr(unsafe { self.slot(len) }.get()))
    }

    /// Slot `i` of the array, with no bounds check (the fast paths' loads and stores).
    ///
    /// # Safety
    ///
    /// The caller must ensure `i < most`; `most <= SLOTS` is the cache's invariant, so
    /// the slot exists.
    #[inline(always)]
    unsafe fn slot(&self, i: u32) -> &Cell<NonNull<u8>> {
        debug_assert!(i < self.most && self.most as usize <= SLOTS);
        // SAFETY: `i < most <= SLOTS` (the caller's contract and the invariant).
        unsafe { self.slots.get_unchecked(i as usize) }
    }

    /// The cache is empty: takes a batch from the shared list, else from the chunks
    /// never used, and hands out the first.
    #[cold]
    #[inline(never)]
    fn refill(&self) -> Option<NonNull<u8>> {
        // (Copies, so that the slot stores do not make the compiler read them again.)
        let geo = *self.pool.geometry();
        // The chain's first chunk goes on top (slot `batch - 1`), handed out now; the
        // rest below it, written as the walk down the shared list reaches them.
        let top = self.batch - 1;
        let put = move |position: u32, index: u32| {
            // SAFETY: a chain has at most `batch` chunks, so `position < batch` and
            // `top - position <= batch - 1 < most`.
            unsafe { self.slot(top - position) }.set(geo.chunk(index as usize));
        };
        let chain = match self.pool.pop_chain(self.batch, put) {
            Some(chain) => chain,
            None => {
                let chain = self.pool.fresh_chain(self.batch)?;
                (0..chain.len).for_each(|position| put(position, chain.first + position));
                chain
            }
        };
        // A short chain (the list or the fresh chunks ran out) sits at the top of the
        // batch's slots: move it down to slot 0.
        // (Upwards, so each slot is read before the copy overwrites it.)
        let short = self.batch - chain.len;
        if short > 0 {
            for i in 0..chain.len {
                // SAFETY: `i < short + i < short + chain.len = batch < most`.
                unsafe { self.slot(i).set(self.slot(short + i).get()) };
            }
        }
        // Only now that the slots hold the chain.
        self.len.set(chain.len);
        self.alloc()
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
        let Some(chunk) = self.pool.take_back_ptr(chunk) else {
            return;
        };
        let len = self.len.get();
        // SAFETY: `len < most` between calls (the invariant of `len`).
        unsafe { self.slot(len) }.set(chunk);
        let len = len + 1;
        self.len.set(len);
        if len == self.most {
            self.flush_older_half();
        }
    }

    /// Keeps the `batch` chunks freed last (still warm in the data cache) and gives
    /// the rest, the bottom of the array, to the shared list in one swap.
    #[cold]
    #[inline(never)]
    fn flush_older_half(&self) {
        let older = self.len.get() - self.batch;
        // SAFETY: slots below `older` are this cache's chunks, distinct.
        unsafe { self.give_back(older) };
        // The copy below relies on this (a cold path: checked in every build).
        assert!(older >= self.batch && older + self.batch <= self.most);
        let slots = self.slots.as_ptr();
        // SAFETY: `Cell<T>` has the layout of `T`, and the cells' bytes may be written
        // through a pointer from `&self.slots` (they are inside `UnsafeCell`s; the cache
        // is not `Sync`, and no reference to a slot's contents is alive). The source,
        // slots `older..older + batch`, and the destination, `0..batch`, lie inside the
        // array (`older + batch == len <= most <= SLOTS`) and apart (`older >= batch`:
        // the flush comes when `len` reaches twice the batch).
        unsafe {
            slots
                .add(older as usize)
                .copy_to_nonoverlapping(slots.cast_mut(), self.batch as usize);
        }
        self.len.set(self.batch);
    }

    /// Links the chunks in `slots[..n]` (`n > 0`) into a chain, through the pool's
    /// table, and pushes it on the shared list with one swap.
    ///
    /// # Safety
    ///
    /// The caller must ensure that `slots[..n]` are chunks this cache holds, distinct,
    /// and that it stops holding them (lowers `len` past them or moves others down).
    unsafe fn give_back(&self, n: u32) {
        // (Copies, so that the link stores do not make the compiler read them again.)
        let (geo, table) = (*self.pool.geometry(), self.pool.table());
        // SAFETY: each call passes `i < n`, and the slots `..n` the caller names are
        // chunks the cache holds, below `most`.
        let index = |i: u32| geo.index_of(unsafe { self.slot(i) }.get()) as u32;
        // The chain runs from the top of the part given back down to slot 0.
        let first = index(n - 1);
        let mut at = first;
        for i in (0..n - 1).rev() {
            let next = index(i);
            // SAFETY: `at` is a chunk this cache holds, so its link is ours to write;
            // release, as every link store (see `SharedPool::pop_chain`).
            unsafe { table.get(at) }.store(next, Ordering::Release);
            at = next;
        }
        // SAFETY: the chunks are this cache's (the caller's contract), linked from
        // `first` to `at`.
        unsafe {
            self.pool.push_chain(Chain {
                first,
                last: at,
                len: n,
            });
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
        let len = self.len.get();
        if len == 0 {
            return;
        }
        // SAFETY: `slots[..len]` are this cache's chunks, distinct; it holds none after.
        unsafe { self.give_back(len) };
        self.len.set(0);
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

    /// Checks the chunks this cache holds: each the start of a chunk of the pool below
    /// the high-water mark, no chunk twice, fewer than twice the batch. Returns how
    /// many it holds.
    ///
    /// # Errors
    ///
    /// A [`PoolCorruption::Cache`] naming what disagrees.
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
    /// assert_eq!(cache.validate().unwrap().held, cache.held());
    /// # unsafe { cache.free(a) };
    /// ```
    pub fn validate(&self) -> Result<PoolCacheReport, PoolCorruption> {
        let len = self.len.get();
        if self.most as usize > SLOTS || self.most != 2 * self.batch {
            return Err(PoolCorruption::Cache(
                "the cache's bound is not twice its batch within its array",
            ));
        }
        if len >= self.most {
            return Err(PoolCorruption::Cache(
                "the cache holds twice its batch or more",
            ));
        }
        let touched = self.pool.touched();
        let mut indices = [0usize; SLOTS];
        for (i, index) in (0..len).zip(indices.iter_mut()) {
            // SAFETY: `i < len < most <= SLOTS`, checked above.
            let chunk = unsafe { self.slot(i) }.get();
            match self.pool.geometry().locate(chunk, touched) {
                Ok(at) => *index = at,
                Err(_) => {
                    return Err(PoolCorruption::Cache(
                        "a cached chunk is not one the pool handed out",
                    ));
                }
            }
        }
        let indices = &mut indices[..len as usize];
        indices.sort_unstable();
        if indices.windows(2).any(|w| w[0] == w[1]) {
            return Err(PoolCorruption::Cache("the cache holds a chunk twice"));
        }
        Ok(PoolCacheReport { held: len as usize })
    }
}

/// What [`SharedPoolCache::validate`] recomputed.
///
/// ```
/// use bento_primitives::SharedPool;
/// use core::alloc::Layout;
/// use core::mem::MaybeUninit;
///
/// let mut buf = vec![MaybeUninit::uninit(); 4096];
/// let pool = SharedPool::new(&mut buf, Layout::new::<u64>()).unwrap();
/// let cache = pool.cache();
/// assert_eq!(cache.validate().unwrap().held, 0);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PoolCacheReport {
    /// Chunks the cache holds, each checked to be one the pool handed out, once.
    pub held: usize,
}

// SAFETY: the cache's pointers are chunks it owns alone (free, taken off the shared
// list or freed into it by its owner), and `SharedPool` is `Sync`: moving the cache to
// another thread moves that ownership with it, as handing the chunks over through the
// pool would. Its `Cell`s keep it `!Sync`.
unsafe impl Send for SharedPoolCache<'_, '_> {}

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
