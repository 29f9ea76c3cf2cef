//! `SharedPool`: a pool any number of threads allocate from and free to at once,
//! through a lock-free stack of chunk indices with an ABA tag.

use core::alloc::Layout;
use core::fmt;
use core::marker::PhantomData;
use core::mem::MaybeUninit;
use core::ptr::NonNull;

use bento_pages::impl_allocator;
use bento_pages::{Misuse, MisuseHook, panic_on_misuse};

use crate::pool::free_list::{PoolCorruption, PoolReport};
use crate::pool::geometry::{Carve, Geometry, PoolError, impl_chunk_raw_alloc, panicking, report};
use crate::pool::leaks::{LeakList, Links, sort_list};
use crate::sync::{AtomicU32, AtomicU64, Ordering};

/// The end of the free list.
const NIL: u32 = u32::MAX;
/// The link of a chunk in use (checked by debug builds' double-free test).
const LIVE: u32 = u32::MAX - 1;

/// The most chunks a [`SharedPool`] holds: every index stays below the two markers.
pub const SHARED_POOL_MAX_CHUNKS: usize = (u32::MAX - 1) as usize;

/// What debug builds write over a free chunk.
const FREED: u8 = 0xDD;
/// What debug builds write over a chunk when they hand it out.
const HANDED: u8 = 0xCD;

/// The head word: the first free chunk's index in the low half, the ABA tag in the
/// high half.
#[inline]
fn pack(index: u32, tag: u32) -> u64 {
    (u64::from(tag) << 32) | u64::from(index)
}

#[inline]
fn first(head: u64) -> u32 {
    head as u32
}

#[inline]
fn tag(head: u64) -> u32 {
    (head >> 32) as u32
}

/// A value alone on its cache line, so that threads hammering it do not slow down
/// readers of the fields next to it.
#[repr(align(64))]
struct CacheLine<T>(T);

/// The link table's address, read once: a loop over links that also stores elsewhere
/// (a cache's slots) keeps it in a register, where through `&SharedPool` the compiler
/// would read the address again after every store, which might have changed it.
#[derive(Clone, Copy)]
pub(crate) struct LinkTable<'p> {
    // Invariant: the pool's table of `capacity` links.
    links: NonNull<AtomicU32>,
    capacity: usize,
    _pool: PhantomData<&'p AtomicU32>,
}

impl<'p> LinkTable<'p> {
    /// The link of chunk `index`.
    ///
    /// # Safety
    ///
    /// The caller must ensure that chunk `index` is below the high-water mark as this
    /// thread last saw it after an acquire, or held by the caller (taken by
    /// `pop_chain` or `fresh_chain`, or freed into its cache): its link initialised.
    #[inline(always)]
    pub(crate) unsafe fn get(self, index: u32) -> &'p AtomicU32 {
        debug_assert!(
            (index as usize) < self.capacity,
            "link {index} out of range"
        );
        // SAFETY: `index < capacity` slots of the table, which lives as long as the
        // pool's borrow `'p`; initialised (the caller's contract), shared only through
        // atomic operations.
        unsafe { self.links.add(index as usize).as_ref() }
    }
}

/// Chunks linked through the table from `first` to `last`, `len` of them: what moves
/// between the free list and a [`SharedPoolCache`](crate::SharedPoolCache) in one swap.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Chain {
    pub(crate) first: u32,
    pub(crate) last: u32,
    pub(crate) len: u32,
}

impl Chain {
    /// The chain of the one chunk `index`.
    pub(crate) fn one(index: u32) -> Self {
        Self {
            first: index,
            last: index,
            len: 1,
        }
    }
}

/// A pool of equal chunks shared by any number of threads (`Sync`): allocation and
/// free are lock-free, each one compare-and-swap on one 64-bit word in the common case.
///
/// ```text
///   buffer:  | links: one u32 per chunk | pad | chunk 0 | chunk 1 | ... |
///   head:    [ ABA tag: u32 | index of the first free chunk: u32 ]   (one AtomicU64)
///   free:    head.index -> links[index] -> links[next] -> ... -> NIL
/// ```
///
/// The free list is a stack of chunk indices (a Treiber stack). Every successful
/// compare-and-swap adds one to the tag, so a thread that read the head, stalled while
/// others popped that chunk and pushed it back, fails its swap instead of installing a
/// stale `next` (the ABA problem). The links live in a table at the front of the
/// buffer, not in the chunks: a stalled thread reads the link of a chunk another
/// thread may already own, and in a table that read races with nobody's writes.
///
/// Like [`Pool`](crate::Pool), creation touches no chunk (a high-water mark hands out
/// never-used chunks once the free list is empty), and debug builds poison freed chunks
/// and catch foreign pointers, chunks never handed out, and double frees (a chunk's
/// link reads `LIVE` while it is in use). There is no counter on the hot path (a shared
/// counter would double the cost of each pair), so the stats walk the list and need
/// `&mut self`.
///
/// `&SharedPool` is an allocator-api2 `Allocator` (0.2 and 0.4) for layouts that fit a
/// chunk.
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
///             for _ in 0..1000 {
///                 let c = pool.alloc().unwrap();
///                 // SAFETY: `c` is a chunk of 64 bytes that this thread owns.
///                 unsafe {
///                     c.write_bytes(t, 64);
///                     assert_eq!(c.add(63).read(), t);
///                     pool.free(c);
///                 }
///             }
///         });
///     }
/// });
/// assert_eq!(pool.in_use(), 0);
/// ```
pub struct SharedPool<'buf> {
    // Invariant: `pack(first free index or NIL, tag)`; every chunk on the list is below
    // `fresh` and its link (`links[index]`) names the next one.
    head: CacheLine<AtomicU64>,
    // Invariant: chunks `[0, fresh)` were handed out at least once, and their links are
    // initialised atomics; `fresh <= capacity`.
    fresh: AtomicU32,
    // Invariant: `capacity` slots for `AtomicU32` links inside the buffer, disjoint
    // from the chunks.
    links: NonNull<AtomicU32>,
    geo: Geometry,
    hook: MisuseHook,
    _buf: PhantomData<&'buf mut [MaybeUninit<u8>]>,
}

// SAFETY: the pool's shared state is atomics (head, fresh, links); the geometry and
// hook are read-only after creation (the hook changes only through `&mut self`). A
// chunk passes from the thread that frees it to the thread that takes it through the
// head: the push's release swap and the pop's acquire load order the old owner's
// writes before the new owner's. The pool owns its buffer exclusively.
unsafe impl Sync for SharedPool<'_> {}

// SAFETY: as above; moving the pool moves sole ownership of its buffer.
unsafe impl Send for SharedPool<'_> {}

impl<'buf> SharedPool<'buf> {
    /// A pool of chunks for `chunk` (rounded as [`Pool::new`](crate::Pool::new) rounds)
    /// in `buf`, after a table of one 4-byte link per chunk.
    ///
    /// # Errors
    ///
    /// [`PoolError::NoChunkFits`] when not one chunk and its link fit.
    ///
    /// ```
    /// use bento_primitives::SharedPool;
    /// use core::alloc::Layout;
    /// use core::mem::MaybeUninit;
    ///
    /// # #[repr(align(64))] struct Buf([MaybeUninit<u8>; 4096]);
    /// let mut buf = Buf([MaybeUninit::uninit(); 4096]);
    /// let pool = SharedPool::new(&mut buf.0, Layout::new::<[u8; 60]>()).unwrap();
    /// // 64-byte chunks, each with a 4-byte link: 4096 / 68 = 60.
    /// assert_eq!(pool.capacity(), 60);
    /// ```
    pub fn new(buf: &'buf mut [MaybeUninit<u8>], chunk: Layout) -> Result<Self, PoolError> {
        let carve = Carve::new(buf, chunk)?;
        let (len, stride, link) = (carve.len, carve.stride, size_of::<AtomicU32>());
        let table_pad = carve.start.as_ptr().align_offset(align_of::<AtomicU32>());
        if table_pad >= len {
            return Err(carve.no_fit());
        }
        // The most chunks that could fit, then fewer while the padding before the
        // first chunk does not (each step frees `link + stride` bytes, so the padding,
        // below `align <= stride`, costs at most two steps).
        let mut capacity = ((len - table_pad) / (link + stride)).min(SHARED_POOL_MAX_CHUNKS);
        let chunks_at = loop {
            if capacity == 0 {
                return Err(carve.no_fit());
            }
            let table_end = table_pad + capacity * link;
            // `table_end <= len`: the table and the chunks fit without padding.
            let pad = carve.at(table_end).as_ptr().align_offset(carve.align.get());
            if pad != usize::MAX && table_end + pad + capacity * stride <= len {
                break table_end + pad;
            }
            capacity -= 1;
        };
        Ok(Self {
            head: CacheLine(AtomicU64::new(pack(NIL, 0))),
            fresh: AtomicU32::new(0),
            links: carve.at(table_pad).cast(),
            geo: carve.chunks(chunks_at, capacity),
            hook: panic_on_misuse,
            _buf: PhantomData,
        })
    }

    /// The link of chunk `index`.
    ///
    /// # Safety
    ///
    /// The caller must ensure that `index < fresh` as this thread last saw it after an
    /// acquire (so the link was initialised before).
    #[inline]
    unsafe fn link(&self, index: usize) -> &AtomicU32 {
        debug_assert!(index < self.geo.capacity, "link {index} out of range");
        // SAFETY: `index < capacity` slots of the table, initialised (the caller's
        // contract), shared only through atomic operations.
        unsafe { self.links.add(index).as_ref() }
    }

    /// Takes a chunk: the last one freed, else one never used; `None` when every chunk
    /// is in use. Lock-free.
    ///
    /// ```
    /// use bento_primitives::SharedPool;
    /// use core::alloc::Layout;
    /// use core::mem::MaybeUninit;
    ///
    /// let mut buf = [MaybeUninit::uninit(); 256];
    /// let pool = SharedPool::new(&mut buf, Layout::new::<u64>()).unwrap();
    /// let a = pool.alloc().unwrap();
    /// // SAFETY: a live chunk of `pool`, freed once.
    /// unsafe { pool.free(a) };
    /// assert_eq!(pool.alloc(), Some(a));
    /// # unsafe { pool.free(a) };
    /// ```
    #[inline]
    #[must_use]
    pub fn alloc(&self) -> Option<NonNull<u8>> {
        let mut head = self.head.0.load(Ordering::Acquire);
        loop {
            let top = first(head);
            if top == NIL {
                if let Some(chunk) = self.take_fresh() {
                    return Some(chunk);
                }
                // Every chunk was handed out; one may have been freed meanwhile.
                head = self.head.0.load(Ordering::Acquire);
                if first(head) == NIL {
                    return None;
                }
                continue;
            }
            // SAFETY: `top` was on the list in the head this thread acquired, so it
            // was pushed after its link was initialised. The value may be stale if
            // another thread popped `top` meanwhile; then the head changed (the tag
            // moves on every swap) and the swap below fails.
            let next = unsafe { self.link(top as usize) }.load(Ordering::Relaxed);
            match self.head.0.compare_exchange_weak(
                head,
                pack(next, tag(head).wrapping_add(1)),
                Ordering::Acquire,
                Ordering::Acquire,
            ) {
                Ok(_) => return Some(self.popped(top as usize)),
                Err(now) => head = now,
            }
        }
    }

    /// Marks a chunk just popped as in use (debug builds) and returns it.
    #[inline]
    fn popped(&self, index: usize) -> NonNull<u8> {
        let chunk = self.geo.chunk(index);
        if cfg!(debug_assertions) {
            // SAFETY: `index` was popped, so it is below `fresh` and now ours alone.
            unsafe { self.link(index) }.store(LIVE, Ordering::Release);
            if let Some(offset) = self.poison_broken(chunk) {
                report(self.hook, &Misuse::WriteAfterFree { ptr: chunk, offset });
            }
            self.fill(chunk, HANDED);
        }
        chunk
    }

    /// Takes the chunk at the high-water mark, if any is left.
    #[cold]
    fn take_fresh(&self) -> Option<NonNull<u8>> {
        let mut fresh = self.fresh.load(Ordering::Relaxed);
        loop {
            if fresh as usize >= self.geo.capacity {
                return None;
            }
            match self.fresh.compare_exchange_weak(
                fresh,
                fresh + 1,
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => break,
                Err(now) => fresh = now,
            }
        }
        let index = fresh as usize;
        // SAFETY: slot `index < capacity` of the table; this thread alone won it, and no
        // other thread reads it before the chunk is pushed, which this write happens
        // before (through whoever passes the chunk on).
        unsafe { self.links.add(index).write(AtomicU32::new(LIVE)) };
        let chunk = self.geo.chunk(index);
        if cfg!(debug_assertions) {
            self.fill(chunk, HANDED);
        }
        Some(chunk)
    }

    /// Gives a chunk back. Lock-free.
    ///
    /// # Safety
    ///
    /// The caller must ensure that:
    /// - `chunk` was returned by [`alloc`](Self::alloc) (or the `Allocator` interface)
    ///   of this pool, and has not been freed since;
    /// - nothing uses the chunk after this call, and every use before it happens before
    ///   the call (a thread that did not allocate the chunk got it through some
    ///   synchronisation).
    ///
    /// Debug builds check the first point as [`Pool::free`](crate::Pool::free) does (a
    /// double free is found by the chunk's link, which reads `LIVE` only while the
    /// chunk is in use); release builds do not, and such a free corrupts the list.
    ///
    /// ```
    /// use bento_primitives::SharedPool;
    /// use core::alloc::Layout;
    /// use core::mem::MaybeUninit;
    ///
    /// let mut buf = [MaybeUninit::uninit(); 256];
    /// let mut pool = SharedPool::new(&mut buf, Layout::new::<u64>()).unwrap();
    /// let a = pool.alloc().unwrap();
    /// // SAFETY: a live chunk of `pool`, freed once.
    /// unsafe { pool.free(a) };
    /// assert_eq!(pool.in_use(), 0);
    /// ```
    #[inline]
    pub unsafe fn free(&self, chunk: NonNull<u8>) {
        let Some(index) = self.take_back(chunk) else {
            return;
        };
        // SAFETY: the caller guarantees the chunk was handed out and is not free, so
        // it is this caller's alone, and its link was initialised before.
        unsafe { self.push_chain(Chain::one(index)) }
    }

    /// Pushes `chain` (chunks the caller owns, linked through the table from
    /// `chain.first` to `chain.last`) onto the free list with one swap.
    ///
    /// # Safety
    ///
    /// The caller must ensure that every chunk of the chain was handed out by this
    /// pool (so its link is initialised) and is owned by the caller, and that the
    /// links from `first` lead to `last` through `len` chunks.
    #[inline]
    pub(crate) unsafe fn push_chain(&self, chain: Chain) {
        // SAFETY: `last` was handed out: below `fresh`, its link initialised.
        let link = unsafe { self.link(chain.last as usize) };
        let mut head = self.head.0.load(Ordering::Relaxed);
        loop {
            // Release: a thread still walking the list it saw before `last` was popped
            // and reading this link learns, by the head it reloads, that its walk is
            // stale (see `pop_chain`).
            link.store(first(head), Ordering::Release);
            match self.head.0.compare_exchange_weak(
                head,
                pack(chain.first, tag(head).wrapping_add(1)),
                Ordering::Release,
                Ordering::Relaxed,
            ) {
                Ok(_) => return,
                Err(now) => head = now,
            }
        }
    }

    /// Takes up to `max` chunks (at least 1) off the top of the free list with one
    /// swap, as a chain ending in `NIL`; `None` when the list is empty.
    ///
    /// The walk down the list reads links of chunks other threads may pop meanwhile.
    /// After each link it reloads the head: while the head (index and tag) is the one
    /// this walk started from, no swap happened, so the link read is the list's own,
    /// and the chunk it names was pushed before that head (its link initialised and
    /// visible through the acquire). A link written later, by a thread that popped
    /// the chunk, is a release store after that pop, so reading it (acquire) makes
    /// the reload see the moved head: the walk starts again before it follows the
    /// link. The final swap succeeds only on the same head, so the chain taken is
    /// the list's top.
    ///
    /// `seen(position, index)` is called for each chunk of the chain as the walk
    /// reaches it (the first at position 0), so that a cache can take the chunks down
    /// without a second walk. A walk that starts again calls it again from position
    /// 0: only the calls of the last walk, positions below the chain's `len`, name the
    /// chain's chunks.
    pub(crate) fn pop_chain(&self, max: u32, mut seen: impl FnMut(u32, u32)) -> Option<Chain> {
        debug_assert!(max > 0);
        let table = self.table();
        let mut head = self.head.0.load(Ordering::Acquire);
        'walk: loop {
            let start = first(head);
            if start == NIL {
                return None;
            }
            seen(0, start);
            let (mut last, mut len) = (start, 1);
            let rest = loop {
                // SAFETY: `last` is the top of the list in `head` (acquired), or a
                // link read while the head still read `head`: on the list, pushed
                // before (so below the high-water mark), its link initialised and
                // visible.
                let next = unsafe { table.get(last) }.load(Ordering::Acquire);
                let now = self.head.0.load(Ordering::Acquire);
                if now != head {
                    head = now;
                    continue 'walk;
                }
                if len == max || next == NIL {
                    break next;
                }
                seen(len, next);
                last = next;
                len += 1;
            };
            match self.head.0.compare_exchange_weak(
                head,
                pack(rest, tag(head).wrapping_add(1)),
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => {
                    // SAFETY: `last` is ours now (the swap took the chain), its link
                    // initialised; end the chain there.
                    unsafe { table.get(last) }.store(NIL, Ordering::Release);
                    return Some(Chain {
                        first: start,
                        last,
                        len,
                    });
                }
                Err(now) => head = now,
            }
        }
    }

    /// Takes up to `max` chunks (at least 1) above the high-water mark, as a chain
    /// ending in `NIL` (debug builds poison them as free chunks); `None` when every
    /// chunk was handed out.
    pub(crate) fn fresh_chain(&self, max: u32) -> Option<Chain> {
        debug_assert!(max > 0);
        let capacity = self.geo.capacity as u32;
        let mut fresh = self.fresh.load(Ordering::Relaxed);
        let end = loop {
            if fresh >= capacity {
                return None;
            }
            let end = fresh + max.min(capacity - fresh);
            match self
                .fresh
                .compare_exchange_weak(fresh, end, Ordering::Relaxed, Ordering::Relaxed)
            {
                Ok(_) => break end,
                Err(now) => fresh = now,
            }
        };
        for index in fresh..end {
            let next = if index + 1 == end { NIL } else { index + 1 };
            // SAFETY: slot `index < capacity` of the table; this thread alone won it,
            // and no other thread reads it before the chunk is pushed, which this write
            // happens before (as in `take_fresh`).
            unsafe {
                self.links.add(index as usize).write(AtomicU32::new(next));
            }
            if cfg!(debug_assertions) {
                self.fill(self.geo.chunk(index as usize), FREED);
            }
        }
        Some(Chain {
            first: fresh,
            last: end - 1,
            len: end - fresh,
        })
    }

    /// The link table, its address read once (see [`LinkTable`]).
    #[inline]
    pub(crate) fn table(&self) -> LinkTable<'_> {
        LinkTable {
            links: self.links,
            capacity: self.geo.capacity,
            _pool: PhantomData,
        }
    }

    /// `chunk`, a chunk start a cache held, marked in use (debug builds) as `alloc`
    /// marks it.
    #[inline]
    pub(crate) fn hand_out_ptr(&self, chunk: NonNull<u8>) -> NonNull<u8> {
        if cfg!(debug_assertions) {
            self.popped(self.geo.index_of(chunk))
        } else {
            chunk
        }
    }

    /// The index of `chunk`, a chunk being freed, after the debug checks `free`
    /// makes; `None` when they reported misuse (the chunk must not be kept).
    #[inline]
    pub(crate) fn take_back(&self, chunk: NonNull<u8>) -> Option<u32> {
        // The caller's pointer may reach only the bytes it asked for; the pool's own
        // pointer reaches the whole chunk (which the debug fill writes).
        let chunk = self.geo.base.with_addr(chunk.addr());
        if cfg!(debug_assertions) {
            self.check_free(chunk).map(|i| i as u32)
        } else {
            Some(self.geo.index_of(chunk) as u32)
        }
    }

    /// [`take_back`](Self::take_back) for a cache that keeps pointers: the chunk's
    /// start with the pool's provenance (reaching the whole chunk).
    #[inline]
    pub(crate) fn take_back_ptr(&self, chunk: NonNull<u8>) -> Option<NonNull<u8>> {
        if cfg!(debug_assertions) {
            self.take_back(chunk).map(|i| self.geo.chunk(i as usize))
        } else {
            Some(self.geo.base.with_addr(chunk.addr()))
        }
    }

    /// Debug check of a free: a chunk boundary of ours, handed out, in use (its link
    /// swapped from `LIVE`, so of two racing frees one is caught). `None` after
    /// reporting misuse: the free must not happen.
    fn check_free(&self, chunk: NonNull<u8>) -> Option<usize> {
        let touched = self.fresh.load(Ordering::Relaxed) as usize;
        let index = match self.geo.locate(chunk, touched) {
            Ok(index) => index,
            Err(misuse) => {
                report(self.hook, &misuse);
                return None;
            }
        };
        // SAFETY: `index < fresh`, which this thread read; the chunk's take happened
        // before (the caller's contract), so its link is initialised.
        let link = unsafe { self.link(index) };
        if link
            .compare_exchange(LIVE, NIL, Ordering::Release, Ordering::Relaxed)
            .is_err()
        {
            report(self.hook, &Misuse::DoubleFree { ptr: chunk });
            return None;
        }
        self.fill(chunk, FREED);
        Some(index)
    }

    /// Writes `byte` over the whole chunk (debug builds).
    fn fill(&self, chunk: NonNull<u8>, byte: u8) {
        // SAFETY: the chunk is being handed out or freed by the thread that owns it.
        unsafe { chunk.write_bytes(byte, self.geo.stride) };
    }

    /// Where a free chunk's poison was changed, if it was (debug builds).
    fn poison_broken(&self, chunk: NonNull<u8>) -> Option<usize> {
        (0..self.geo.stride).find(|&i| {
            // SAFETY: inside the chunk, which this thread owns (just popped, or the
            // pool is borrowed exclusively); debug builds initialise every chunk.
            unsafe { chunk.add(i).read() != FREED }
        })
    }

    /// How many chunks the pool holds.
    ///
    /// ```
    /// use bento_primitives::SharedPool;
    /// use core::alloc::Layout;
    /// use core::mem::MaybeUninit;
    ///
    /// let mut buf = [MaybeUninit::uninit(); 1200];
    /// let pool = SharedPool::new(&mut buf, Layout::new::<[u8; 96]>()).unwrap();
    /// assert!((11..=12).contains(&pool.capacity()));
    /// ```
    #[must_use]
    pub fn capacity(&self) -> usize {
        self.geo.capacity
    }

    /// How many chunks are in use, by walking the free list (so `&mut self`: no
    /// thread is using the pool).
    ///
    /// ```
    /// use bento_primitives::SharedPool;
    /// use core::alloc::Layout;
    /// use core::mem::MaybeUninit;
    ///
    /// let mut buf = [MaybeUninit::uninit(); 256];
    /// let mut pool = SharedPool::new(&mut buf, Layout::new::<u64>()).unwrap();
    /// let a = pool.alloc().unwrap();
    /// assert_eq!(pool.in_use(), 1);
    /// # unsafe { pool.free(a) };
    /// ```
    pub fn in_use(&mut self) -> usize {
        let touched = self.touched();
        touched - self.walk(touched).unwrap_or(0)
    }

    /// How many chunks are free (listed or never used), by walking the free list.
    ///
    /// ```
    /// use bento_primitives::SharedPool;
    /// use core::alloc::Layout;
    /// use core::mem::MaybeUninit;
    ///
    /// let mut buf = [MaybeUninit::uninit(); 256];
    /// let mut pool = SharedPool::new(&mut buf, Layout::new::<u64>()).unwrap();
    /// let cap = pool.capacity();
    /// assert_eq!(pool.available(), cap);
    /// ```
    pub fn available(&mut self) -> usize {
        self.geo.capacity - self.in_use()
    }

    /// The size and alignment of every chunk (after rounding).
    ///
    /// ```
    /// use bento_primitives::SharedPool;
    /// use core::alloc::Layout;
    /// use core::mem::MaybeUninit;
    ///
    /// let mut buf = [MaybeUninit::uninit(); 256];
    /// let pool = SharedPool::new(&mut buf, Layout::new::<u16>()).unwrap();
    /// assert_eq!(pool.chunk_layout(), Layout::new::<usize>());
    /// ```
    #[must_use]
    pub fn chunk_layout(&self) -> Layout {
        self.geo.layout()
    }

    /// Sets what the debug checks call on misuse (see
    /// [`Pool::set_misuse_hook`](crate::Pool::set_misuse_hook)).
    ///
    /// ```
    /// use bento_primitives::{Misuse, SharedPool};
    /// use core::alloc::Layout;
    /// use core::mem::MaybeUninit;
    ///
    /// fn quiet(_: &Misuse<'_>) {}
    /// let mut buf = [MaybeUninit::uninit(); 256];
    /// let mut pool = SharedPool::new(&mut buf, Layout::new::<u64>()).unwrap();
    /// pool.set_misuse_hook(quiet);
    /// ```
    pub fn set_misuse_hook(&mut self, hook: MisuseHook) {
        self.hook = hook;
    }

    /// The chunks' geometry.
    pub(crate) fn geometry(&self) -> &Geometry {
        &self.geo
    }

    /// What the debug checks call on misuse.
    pub(crate) fn misuse_hook(&self) -> MisuseHook {
        self.hook
    }

    /// Chunks handed out at least once.
    pub(crate) fn touched(&self) -> usize {
        self.fresh.load(Ordering::Relaxed) as usize
    }

    /// Walks the free list from the head: the count, and where it went wrong.
    fn walk(&self, touched: usize) -> Result<usize, PoolCorruption> {
        let mut listed = 0usize;
        let mut at = first(self.head.0.load(Ordering::Acquire));
        while at != NIL {
            let i = at as usize;
            if i >= touched {
                return Err(PoolCorruption::NotAChunk {
                    position: listed,
                    ptr: self.geo.chunk(i.min(self.geo.capacity)),
                });
            }
            if listed == touched {
                return Err(PoolCorruption::Cycle { expected: touched });
            }
            if cfg!(debug_assertions) {
                let chunk = self.geo.chunk(i);
                if let Some(offset) = self.poison_broken(chunk) {
                    return Err(PoolCorruption::Poison { ptr: chunk, offset });
                }
            }
            listed += 1;
            // SAFETY: `i < touched`: its link is initialised.
            at = unsafe { self.link(i) }.load(Ordering::Relaxed);
        }
        Ok(listed)
    }

    /// Walks the free list and checks the pool: every entry a chunk handed out, no
    /// cycle, and (debug builds) every free chunk's poison intact and exactly the
    /// chunks not listed marked `LIVE`. `&mut self`: no thread is using the pool.
    ///
    /// # Errors
    ///
    /// [`PoolCorruption`] naming what is broken.
    ///
    /// ```
    /// use bento_primitives::SharedPool;
    /// use core::alloc::Layout;
    /// use core::mem::MaybeUninit;
    ///
    /// let mut buf = [MaybeUninit::uninit(); 256];
    /// let mut pool = SharedPool::new(&mut buf, Layout::new::<u64>()).unwrap();
    /// let a = pool.alloc().unwrap();
    /// let report = pool.validate().unwrap();
    /// assert_eq!(report.capacity, report.in_use + report.free_listed + report.untouched);
    /// # unsafe { pool.free(a) };
    /// ```
    pub fn validate(&mut self) -> Result<PoolReport, PoolCorruption> {
        let touched = self.touched();
        if touched > self.geo.capacity {
            return Err(PoolCorruption::Bounds(
                "the high-water mark is above the capacity",
            ));
        }
        let listed = self.walk(touched)?;
        let in_use = touched - listed;
        if cfg!(debug_assertions) {
            let live = (0..touched)
                // SAFETY: `i < touched`: its link is initialised.
                .filter(|&i| unsafe { self.link(i) }.load(Ordering::Relaxed) == LIVE)
                .count();
            if live != in_use {
                return Err(PoolCorruption::Count {
                    listed,
                    expected: touched - live,
                });
            }
        }
        Ok(PoolReport::new(self.geo.capacity, touched, listed))
    }

    /// The chunks in use, in address order (see [`Pool::live_chunks`](crate::Pool::live_chunks)).
    ///
    /// ```
    /// use bento_primitives::SharedPool;
    /// use core::alloc::Layout;
    /// use core::mem::MaybeUninit;
    ///
    /// let mut buf = [MaybeUninit::uninit(); 256];
    /// let mut pool = SharedPool::new(&mut buf, Layout::new::<u64>()).unwrap();
    /// let a = pool.alloc().unwrap();
    /// assert_eq!(pool.live_chunks().iter().next(), Some(a));
    /// # unsafe { pool.free(a) };
    /// ```
    pub fn live_chunks(&mut self) -> LeakList<'_> {
        let touched = self.touched();
        let top = first(self.head.0.load(Ordering::Relaxed));
        let head = (top != NIL).then_some(top as usize);
        let sorted = sort_list(self, head);
        let tag = tag(self.head.0.load(Ordering::Relaxed));
        self.head.0.store(
            pack(sorted.map_or(NIL, |i| i as u32), tag.wrapping_add(1)),
            Ordering::Relaxed,
        );
        let listed = self.walk(touched).unwrap_or(0);
        LeakList::new(self, sorted, touched, touched - listed)
    }
}

/// The list by index, for the sort and the leak list; used with the pool borrowed
/// exclusively (or dropped).
impl Links for SharedPool<'_> {
    fn next(&self, i: usize) -> Option<usize> {
        // SAFETY: `i` is on the free list, so below `fresh`.
        let next = unsafe { self.link(i) }.load(Ordering::Relaxed);
        (next != NIL).then_some(next as usize)
    }

    fn set_next(&self, i: usize, next: Option<usize>) {
        // SAFETY: as above.
        unsafe { self.link(i) }.store(next.map_or(NIL, |n| n as u32), Ordering::Relaxed);
    }

    fn chunk(&self, i: usize) -> NonNull<u8> {
        self.geo.chunk(i)
    }
}

impl fmt::Debug for SharedPool<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SharedPool")
            .field("chunk_size", &self.geo.stride)
            .field("chunk_align", &self.geo.align.get())
            .field("capacity", &self.geo.capacity)
            .field("touched", &self.touched())
            .finish_non_exhaustive()
    }
}

/// Debug builds report the chunks still in use to the misuse hook.
impl Drop for SharedPool<'_> {
    fn drop(&mut self) {
        if cfg!(all(debug_assertions, feature = "std")) && !panicking() && self.validate().is_ok() {
            let hook = self.hook;
            let leaks = self.live_chunks();
            if !leaks.is_empty() {
                report(hook, &Misuse::Leaked(&leaks));
            }
        }
    }
}

impl_chunk_raw_alloc!(impl['buf] for SharedPool<'buf>);

impl_allocator!(impl['a, 'buf] for &'a SharedPool<'buf>);
