//! The per-thread front end: each thread keeps a few freed blocks of each small class
//! and of each medium bin (257 to 4096 bytes, eight bins per octave), so that most
//! allocations and frees take no lock. Blocks move between a thread and the regions
//! in batches: a refill takes half a bin's capacity under one lock, a flush gives
//! half back.
//!
//! A thread's cache belongs to one allocator at a time (the first one with the front
//! end that the thread uses; others take their locked paths on that thread). It is
//! flushed when the thread exits, by [`CommonAllocator::trim`] on the thread itself,
//! and when its allocator is dropped on that thread. The allocator keeps a registry
//! of the caches attached to it, so that its figures count the blocks they hold.
//!
//! Blocks of a medium bin are allocated at the bin's size, so a block freed with any
//! layout of its bin holds the bin's size (the rule the large region keeps while the
//! front end is on).
//!
//! [`CommonAllocator::trim`]: crate::CommonAllocator::trim

// Without a thread-local provider (`tls.rs`) the front end is off (`Fronts::enabled`
// is false) and the cache's own code is unused.
#![cfg_attr(not(any(feature = "std", feature = "static-tls")), allow(dead_code))]

use core::alloc::Layout;
use core::cell::Cell;
use core::ptr::{self, NonNull};

use bento_pages::lock::RawSpinLock;

use crate::common::{Inner, routed_size};
use crate::config::{MAX_CLASSES, SMALL_ALIGN};
use crate::run::{FIRST, FREED, RUN};
use crate::sync::{AtomicPtr, AtomicU32, Ordering};
use crate::tls::{arm_exit_flush, with_cache};
use crate::{AllocError, Misuse, PageSource};

/// Medium bins: eight per octave from 256 to 4096 bytes.
pub(crate) const MEDIUM_BINS: usize = 32;
/// Bins of a cache: one per small class (up to 32), then the medium ones.
pub(crate) const BINS: usize = MAX_CLASSES + MEDIUM_BINS;
/// The largest request the front end serves.
pub(crate) const MAX_CACHED: usize = 4096;
/// The bytes a bin holds at most (within 8 to 128 blocks).
const BIN_BYTES: usize = 16 << 10;
/// The most blocks a bin holds.
const BIN_MOST: u32 = 128;

/// The medium bin of `size` (257 to 4096 bytes): its octave and eighth.
#[inline]
pub(crate) const fn medium_bin(size: usize) -> usize {
    let octave = (usize::BITS - 1 - (size - 1).leading_zeros()) as usize - 8;
    octave * 8 + ((size - 1 - (256 << octave)) >> (5 + octave))
}

/// What the size lookup holds for a size no bin serves: a bin that is always empty
/// and full (capacity 0), so that the hot paths need no test for it.
pub(crate) const NO_BIN: u8 = BINS as u8;

/// Whether `size` falls in a medium bin.
#[inline]
pub(crate) const fn is_medium(size: usize) -> bool {
    size > 256 && size <= MAX_CACHED
}

/// The bin of a cache for a medium `size` (257 to 4096 bytes).
#[inline]
pub(crate) const fn medium(size: usize) -> usize {
    MAX_CLASSES + medium_bin(size)
}

/// The block size of medium bin `bin`.
#[inline]
pub(crate) const fn medium_size(bin: usize) -> usize {
    let octave = bin / 8;
    (256 << octave) + (bin % 8 + 1) * (32 << octave)
}

/// A block stride as a divisibility test without a division: `2^shift` times an
/// odd number whose inverse modulo `2^BITS` is `inverse`. `n` is a multiple of the
/// stride when its low `shift` bits are zero and `(n >> shift) * inverse`, wrapping,
/// is at most `limit` (the multiples of an odd number are exactly the numbers its
/// inverse maps to `0..=MAX / odd`).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Stride {
    shift: u32,
    /// The low `shift` bits.
    low: usize,
    inverse: usize,
    limit: usize,
}

impl Stride {
    /// The test for multiples of `stride` (non-zero).
    pub(crate) const fn new(stride: usize) -> Self {
        let shift = stride.trailing_zeros();
        let odd = stride >> shift;
        // Newton's iteration doubles the bits of the inverse each step: an odd
        // number is its own inverse to 3 bits, so 5 steps give 96 (and 64) bits.
        let mut inverse = odd;
        let mut i = 0;
        while i < 5 {
            inverse = inverse.wrapping_mul(2usize.wrapping_sub(odd.wrapping_mul(inverse)));
            i += 1;
        }
        Self {
            shift,
            low: (1 << shift) - 1,
            inverse,
            limit: usize::MAX / odd,
        }
    }

    /// Whether `n` is a multiple of the stride.
    #[inline(always)]
    pub(crate) const fn divides(&self, n: usize) -> bool {
        n & self.low == 0 && (n >> self.shift).wrapping_mul(self.inverse) <= self.limit
    }
}

/// The states of a thread's cache.
const FREE: u8 = 0;
const ATTACHING: u8 = 1;
const LIVE: u8 = 2;
const DEAD: u8 = 3;

/// One thread's cache. It lives in a thread-local (with a `const` initialiser and no
/// destructor, so that it never allocates and stays reachable while the thread's
/// other destructors run); a second thread-local's destructor flushes it.
#[repr(C)]
pub(crate) struct ThreadCache {
    /// The owning allocator's block (`Inner<P>`), null while unattached.
    owner: Cell<*const ()>,
    /// `Inner::<P>::detach_erased` of the owner.
    detach: Cell<Option<DetachFn>>,
    state: Cell<u8>,
    // Invariant: `bins[b].head` is a list of `bins[b].count` blocks of bin `b` of the owner,
    // each free (taken from the owner's regions, not handed to the user), linked
    // through its first word; in debug builds each holds `FREED` in its second word.
    bins: [Bin; BINS + 1],
    /// The next cache in the owner's registry (under the registry's lock).
    next: AtomicPtr<ThreadCache>,
}

/// How a cache finds its way back to its owner: `Inner::<P>::detach_erased`.
type DetachFn = unsafe fn(*const (), &ThreadCache);

/// One bin of a cache: its list and count side by side, in one cache line.
struct Bin {
    head: Cell<*mut u8>,
    /// Written by the owning thread only (so a load and a store, never a locked
    /// instruction); read by the owner's `stats` through the registry.
    count: AtomicU32,
    /// The blocks the next refill takes: about 4 KiB of them at first (0 until the
    /// first refill), doubling each refill up to half the bin's capacity, so that a
    /// size a thread uses once costs it a page or so, not a batch.
    batch: Cell<u32>,
}

impl Bin {
    #[cfg(not(bento_loom))]
    const fn new() -> Self {
        Self {
            head: Cell::new(ptr::null_mut()),
            count: AtomicU32::new(0),
            batch: Cell::new(0),
        }
    }

    #[cfg(bento_loom)]
    fn new() -> Self {
        Self {
            head: Cell::new(ptr::null_mut()),
            count: AtomicU32::new(0),
            batch: Cell::new(0),
        }
    }
}

impl ThreadCache {
    #[cfg(not(bento_loom))]
    #[cfg_attr(
        not(all(feature = "std", not(feature = "static-tls"))),
        expect(dead_code, reason = "only the `std` provider's initialiser")
    )]
    pub(crate) const fn new() -> Self {
        Self {
            owner: Cell::new(ptr::null()),
            detach: Cell::new(None),
            state: Cell::new(FREE),
            bins: [const { Bin::new() }; BINS + 1],
            next: AtomicPtr::new(ptr::null_mut()),
        }
    }

    #[cfg(bento_loom)]
    pub(crate) fn new() -> Self {
        Self {
            owner: Cell::new(ptr::null()),
            detach: Cell::new(None),
            state: Cell::new(FREE),
            bins: core::array::from_fn(|_| Bin::new()),
            next: AtomicPtr::new(ptr::null_mut()),
        }
    }

    #[inline]
    fn count(&self, bin: usize) -> u32 {
        self.bins[bin].count.load(Ordering::Relaxed)
    }

    #[inline]
    fn set_count(&self, bin: usize, n: u32) {
        self.bins[bin].count.store(n, Ordering::Relaxed);
    }

    /// Takes the first block of `bin`.
    #[inline]
    fn pop(&self, bin: usize) -> Option<NonNull<u8>> {
        let head = NonNull::new(self.bins[bin].head.get())?;
        // SAFETY: a listed block holds its link in its first word (the invariant).
        self.bins[bin]
            .head
            .set(unsafe { head.cast::<*mut u8>().read() });
        self.set_count(bin, self.count(bin) - 1);
        // The freed mark goes (a free without a layout checks it). SAFETY: every
        // block holds at least 16 bytes.
        unsafe { head.cast::<usize>().add(1).write(0) };
        Some(head)
    }

    /// Puts a free block on `bin`.
    ///
    /// # Safety
    ///
    /// `block` is a free block of the owner of bin `bin`, given up by the caller.
    #[inline]
    unsafe fn push(&self, bin: usize, block: NonNull<u8>) {
        // SAFETY: the caller gives the block up; it holds at least 24 bytes.
        unsafe {
            block.cast::<*mut u8>().write(self.bins[bin].head.get());
            if cfg!(debug_assertions) {
                block.cast::<usize>().add(1).write(FREED);
            }
        }
        self.bins[bin].head.set(block.as_ptr());
        self.set_count(bin, self.count(bin) + 1);
    }

    /// Makes a chain of `n` free blocks the whole of the empty `bin`.
    ///
    /// # Safety
    ///
    /// `head` starts a chain of `n` free blocks of the owner's bin `bin`, linked
    /// through their first words (the last to null), given up by the caller; the bin
    /// is empty.
    unsafe fn install(&self, bin: usize, head: *mut u8, n: u32) {
        debug_assert_eq!(self.count(bin), 0);
        if cfg!(debug_assertions) {
            let mut p = head;
            for _ in 0..n {
                // SAFETY: the caller's contract: each block holds at least 16 bytes.
                unsafe {
                    p.cast::<usize>().add(1).write(FREED);
                    p = p.cast::<*mut u8>().read();
                }
            }
        }
        self.bins[bin].head.set(head);
        self.set_count(bin, n);
    }

    /// Whether `block` is on `bin` (a debug check).
    fn holds(&self, bin: usize, block: NonNull<u8>) -> bool {
        let mut p = self.bins[bin].head.get();
        for _ in 0..self.count(bin) {
            if p == block.as_ptr() {
                return true;
            }
            // SAFETY: a listed block holds its link in its first word.
            p = unsafe { p.cast::<*mut u8>().read() };
        }
        false
    }
}

/// The thread is exiting: its cache goes back to its owner, and is used no more.
pub(crate) fn leave(cache: &ThreadCache) {
    if cache.state.get() == LIVE
        && let Some(detach) = cache.detach.get()
    {
        // SAFETY: `detach` is the owner's own `detach_erased`, and a live cache's
        // owner is alive (an allocator with caches attached is never torn down).
        unsafe { detach(cache.owner.get(), cache) };
    }
    cache.state.set(DEAD);
}

/// What an allocator keeps of the front end: the bins' shapes and the registry of
/// caches attached to it.
pub(crate) struct Fronts {
    pub(crate) enabled: bool,
    /// Each bin's capacity in blocks (0: no such bin, or no front end).
    cap: [u32; BINS + 1],
    /// Each bin's first refill: about 4 KiB of blocks (at least one, at most half the
    /// capacity).
    first: [u32; BINS + 1],
    /// Each bin's block stride, for the check of a free without a layout.
    stride: [Stride; BINS + 1],
    /// The bin of each size up to `MAX_CACHED` in steps of 8 (`(size + 7) / 8`), or
    /// `NO_BIN` (for size 0, and for every size without the front end): one lookup
    /// for small and medium sizes alike, so that the hot path does not branch on
    /// which kind a size is, nor on whether the front end is on.
    lookup: [u8; MAX_CACHED / 8 + 1],
    /// The bin of the class region of each region id (`NO_BIN` for the others, and
    /// for every id without the front end): what a free without a layout looks up.
    pub(crate) id_bin: [u8; 256],
    lock: RawSpinLock,
    // Invariant: a list, through `next`, of the caches attached to this allocator
    // (thread-locals of live threads), changed only under `lock`.
    head: AtomicPtr<ThreadCache>,
}

impl Fronts {
    /// The bins for the small classes `classes`.
    pub(crate) fn new(enabled: bool, classes: &crate::SizeClasses) -> Self {
        let enabled = enabled && crate::tls::AVAILABLE;
        let mut size = [0u32; BINS + 1];
        for (bin, s) in size.iter_mut().enumerate().take(classes.len()) {
            *s = classes.size(bin) as u32;
        }
        let mut lookup = [NO_BIN; MAX_CACHED / 8 + 1];
        for (slot, bin) in lookup.iter_mut().enumerate().skip(1) {
            if !enabled {
                break;
            }
            let bytes = slot * 8;
            if let Some(class) = classes.class_of(bytes) {
                *bin = class as u8;
            } else if is_medium(bytes) {
                *bin = medium(bytes) as u8;
            }
        }
        for m in 0..MEDIUM_BINS {
            size[MAX_CLASSES + m] = medium_size(m) as u32;
        }
        let cap = size.map(|s| match (BIN_BYTES as u32).checked_div(s) {
            Some(n) if enabled => n.clamp(8, BIN_MOST),
            _ => 0,
        });
        let mut first = [1; BINS + 1];
        for ((f, &s), &c) in first.iter_mut().zip(&size).zip(&cap) {
            if let Some(n) = 4096u32.checked_div(s) {
                *f = n.clamp(1, (c / 2).max(1));
            }
        }
        Self {
            enabled,
            cap,
            first,
            stride: size.map(|s| Stride::new((s as usize).max(16))),
            lookup,
            id_bin: [NO_BIN; 256],
            lock: RawSpinLock::new(),
            head: AtomicPtr::new(ptr::null_mut()),
        }
    }

    /// Whether `ptr` may be a block of bin `bin` not freed already: at a block's
    /// start in its run, and without the freed mark. Not whether it was carved (the
    /// locked path's probe knows that).
    ///
    /// # Safety
    ///
    /// `ptr` lies in a run of bin `bin`'s class region, whose second word is readable.
    #[inline(always)]
    pub(crate) unsafe fn plausible(&self, bin: usize, ptr: NonNull<u8>) -> bool {
        let addr = ptr.addr().get();
        let offset = addr.wrapping_sub((addr & !(RUN - 1)) + FIRST);
        offset < RUN - FIRST
            && self.stride[bin].divides(offset)
            // SAFETY: the caller's contract.
            && unsafe { ptr.cast::<usize>().add(1).read() } != FREED
    }

    /// The registry's lock, for the fork guard (`CommonAllocator::lock_all`).
    pub(crate) fn raw_lock(&self) -> &RawSpinLock {
        &self.lock
    }

    /// Records that region id `id` is the class region of bin `bin`.
    pub(crate) fn route_id(&mut self, id: u8, bin: usize) {
        if self.enabled {
            self.id_bin[usize::from(id)] = bin as u8;
        }
    }

    /// Runs `f` on every attached cache, under the registry's lock.
    fn each(&self, mut f: impl FnMut(&ThreadCache)) {
        self.lock.lock();
        let mut p = self.head.load(Ordering::Relaxed);
        while let Some(cache) = NonNull::new(p) {
            // SAFETY: a registered cache is the thread-local of a live thread (it
            // leaves the list before its thread's locals go).
            let cache = unsafe { cache.as_ref() };
            f(cache);
            p = cache.next.load(Ordering::Relaxed);
        }
        // SAFETY: taken above by this thread.
        unsafe { self.lock.unlock() };
    }

    /// Whether any cache is attached.
    pub(crate) fn attached(&self) -> bool {
        !self.head.load(Ordering::Acquire).is_null()
    }

    /// Blocks the attached caches hold in bin `bin`.
    pub(crate) fn held(&self, bin: usize) -> usize {
        let mut held = 0;
        self.each(|c| held += c.bins[bin].count.load(Ordering::Relaxed) as usize);
        held
    }
}

impl<P: PageSource> Inner<P> {
    /// The hot path of an allocation: a block off this thread's bin for `layout`, with
    /// no lock, no atomic read-modify-write and no call; `None` sends the caller to
    /// the full path (no bin for the layout, an empty bin, the front end off, or the
    /// thread's cache not attached to this allocator).
    #[inline(always)]
    pub(crate) fn fast_alloc(&self, layout: Layout) -> Option<NonNull<u8>> {
        if layout.align() > SMALL_ALIGN {
            return None;
        }
        let bin = usize::from(*self.fronts.lookup.get(routed_size(layout).div_ceil(8))?);
        let me = ptr::from_ref(self).cast::<()>();
        with_cache(|cache| {
            if cache.owner.get() != me {
                return None;
            }
            cache.pop(bin)
        })
    }

    /// The hot path of a free with its layout: onto this thread's bin when it has
    /// room; false sends the caller to the full path.
    ///
    /// # Safety
    ///
    /// `ptr` is a live block of this allocator allocated (or last resized) with
    /// `layout`, not used afterwards when this returns true.
    #[inline(always)]
    pub(crate) unsafe fn fast_free(&self, ptr: NonNull<u8>, layout: Layout) -> bool {
        if layout.align() > SMALL_ALIGN {
            return false;
        }
        let Some(&bin) = self.fronts.lookup.get(routed_size(layout).div_ceil(8)) else {
            return false;
        };
        // SAFETY: the caller's contract; the lookup gives the bin of its layout.
        unsafe { self.fast_free_bin(ptr, usize::from(bin), Some(layout)) }
    }

    /// The hot path of a free without a layout: the region map's id says the bin.
    ///
    /// The pointer is checked first, in release builds too, as C's `free` is: it
    /// must be a block's start in its run (its offset a multiple of the bin's
    /// stride), and not hold the freed mark; one that does not pass goes to the
    /// full path, which finds out (under the region's lock) what it is. The mark is
    /// written as the block enters the bin.
    ///
    /// # Safety
    ///
    /// `ptr` is a live block of this allocator, not used afterwards when this
    /// returns true.
    #[inline(always)]
    pub(crate) unsafe fn fast_free_unsized(&self, ptr: NonNull<u8>) -> bool {
        let id = self.layer.map.owner(ptr.addr().get());
        let bin = usize::from(self.fronts.id_bin[usize::from(id)]);
        let me = ptr::from_ref(self).cast::<()>();
        with_cache(|cache| {
            if cache.owner.get() != me
                || cache.count(bin) >= self.fronts.cap[bin]
                // SAFETY: a bin with room is a class region's, whose blocks the map
                // says `ptr` lies among (the caller's contract).
                || !unsafe { self.fronts.plausible(bin, ptr) }
            {
                return false;
            }
            if cfg!(debug_assertions) && !self.check_fast_free(cache, bin, ptr, None) {
                return true;
            }
            // SAFETY: the caller gives up a live block of bin `bin` (checked as far
            // as the hot path can); it holds at least 16 bytes.
            unsafe {
                ptr.cast::<usize>().add(1).write(FREED);
                cache.push(bin, ptr);
            }
            true
        })
    }

    /// Whether `ptr` is in this thread's cache, in `bin` (a cold walk of at most
    /// its capacity), when the cache is this allocator's.
    #[cold]
    pub(crate) fn held_here(&self, bin: usize, ptr: NonNull<u8>) -> bool {
        let me = ptr::from_ref(self).cast::<()>();
        self.fronts.enabled && with_cache(|cache| cache.owner.get() == me && cache.holds(bin, ptr))
    }

    /// The hot path of a free into bin `bin` (its layout, when known, for the debug
    /// checks); false when the bin is full or the cache is not this allocator's.
    ///
    /// # Safety
    ///
    /// `ptr` is a live block of bin `bin` of this allocator (or `bin` is `NO_BIN`),
    /// not used afterwards when this returns true.
    #[inline(always)]
    pub(crate) unsafe fn fast_free_bin(
        &self,
        ptr: NonNull<u8>,
        bin: usize,
        layout: Option<Layout>,
    ) -> bool {
        let me = ptr::from_ref(self).cast::<()>();
        with_cache(|cache| {
            if cache.owner.get() != me || cache.count(bin) >= self.fronts.cap[bin] {
                return false;
            }
            if cfg!(debug_assertions) && !self.check_fast_free(cache, bin, ptr, layout) {
                return true;
            }
            // SAFETY: the caller gives up a live block of bin `bin`.
            unsafe { cache.push(bin, ptr) };
            true
        })
    }

    /// Debug builds: the region map gives a block freed into `bin` to the bin's
    /// region, and the bin does not hold it already; reports the misuse otherwise.
    #[cold]
    fn check_fast_free(
        &self,
        cache: &ThreadCache,
        bin: usize,
        ptr: NonNull<u8>,
        layout: Option<Layout>,
    ) -> bool {
        if let Some(layout) = layout
            && !self.check_owner(ptr, layout, self.bin_class(bin).id)
        {
            return false;
        }
        self.check_cached_free(cache, bin, ptr)
    }

    /// A block from this thread's cache, refilled when empty; `None` when the thread
    /// cannot use its cache for this allocator (the locked path serves it).
    #[inline]
    pub(crate) fn cached_alloc(&self, bin: usize) -> Option<Result<NonNull<u8>, AllocError>> {
        let me = ptr::from_ref(self).cast::<()>();
        with_cache(|cache| {
            if cache.owner.get() != me && !self.attach(cache) {
                return None;
            }
            if let Some(block) = cache.pop(bin) {
                return Some(Ok(block));
            }
            Some(self.refill(cache, bin))
        })
    }

    /// Puts a freed block in this thread's cache, flushing half the bin when it is
    /// full; false when the thread cannot use its cache for this allocator.
    ///
    /// # Safety
    ///
    /// `ptr` is a live block of bin `bin` of this allocator, not used afterwards.
    #[inline]
    pub(crate) unsafe fn cached_free(&self, bin: usize, ptr: NonNull<u8>) -> bool {
        let me = ptr::from_ref(self).cast::<()>();
        with_cache(|cache| {
            if cache.owner.get() != me && !self.attach(cache) {
                return false;
            }
            if cfg!(debug_assertions) && !self.check_cached_free(cache, bin, ptr) {
                return true;
            }
            if cache.count(bin) >= self.fronts.cap[bin] {
                self.flush(cache, bin, self.fronts.cap[bin] / 2);
            }
            // SAFETY: the caller gives up a live block of bin `bin`.
            unsafe { cache.push(bin, ptr) };
            true
        })
    }

    /// Debug builds: a block freed into a cache is not on this thread's bin (a double
    /// free). It reads only the bin's links, never the block: a read of
    /// the block through the region's own pointers (the space's block check) would make
    /// the caller's pointer lose its write permission under Tree Borrows when it comes
    /// from a `Box` still protected by the function freeing it.
    #[cold]
    fn check_cached_free(&self, cache: &ThreadCache, bin: usize, ptr: NonNull<u8>) -> bool {
        // The bin is short (at most 64 blocks): walked whole, since the block's own
        // words may never have been written.
        if cache.holds(bin, ptr) {
            (self.misuse)(&Misuse::DoubleFree { ptr });
            return false;
        }
        true
    }

    /// The class region of bin `bin`.
    #[inline]
    pub(crate) fn bin_class(&self, bin: usize) -> &crate::region::Class<P> {
        self.class(self.class_of_bin(bin))
    }

    /// Attaches this thread's cache to this allocator if it is free.
    #[cold]
    fn attach(&self, cache: &ThreadCache) -> bool {
        if !self.fronts.enabled || cache.state.get() != FREE {
            return false;
        }
        cache.state.set(ATTACHING);
        if !arm_exit_flush(cache) {
            cache.state.set(DEAD);
            return false;
        }
        cache.owner.set(ptr::from_ref(self).cast());
        cache.detach.set(Some(Self::detach_erased));
        self.fronts.lock.lock();
        cache
            .next
            .store(self.fronts.head.load(Ordering::Relaxed), Ordering::Relaxed);
        self.fronts
            .head
            .store(ptr::from_ref(cache).cast_mut(), Ordering::Release);
        // SAFETY: taken above by this thread.
        unsafe { self.fronts.lock.unlock() };
        cache.state.set(LIVE);
        true
    }

    /// Takes the bin's batch of blocks (growing to half its capacity) from its
    /// region in one lock, returns one and keeps the rest.
    fn refill(&self, cache: &ThreadCache, bin: usize) -> Result<NonNull<u8>, AllocError> {
        let most = (self.fronts.cap[bin] / 2).max(1);
        let batch = &cache.bins[bin].batch;
        let want = match batch.get() {
            0 => self.fronts.first[bin],
            b => b.min(most),
        };
        batch.set((want * 2).min(most));
        let mut held = self.bin_class(bin).lock();
        let (chain, n) = held.take_chain(want as usize);
        let first = NonNull::new(chain).ok_or(AllocError)?;
        // SAFETY: a chain of `n` free blocks of this bin, linked through their first
        // words; the bin is empty (a refill follows a failed pop). Installed under
        // the region's lock, so that a reader of the figures sees the blocks in the
        // region or in the cache. The first, handed out, loses any freed mark (as a
        // pop clears it): it holds at least 16 bytes.
        unsafe {
            cache.install(bin, first.cast::<*mut u8>().read(), n as u32 - 1);
            first.cast::<usize>().add(1).write(0);
        }
        drop(held);
        Ok(first)
    }

    /// Gives the blocks of `bin` beyond the first `keep` back to the region.
    fn flush(&self, cache: &ThreadCache, bin: usize, keep: u32) {
        let count = cache.count(bin);
        if count <= keep {
            return;
        }
        // The blocks after the first `keep` go; cut the list there.
        let mut rest = cache.bins[bin].head.get();
        let mut last: *mut u8 = ptr::null_mut();
        for _ in 0..keep {
            last = rest;
            // SAFETY: a listed block holds its link in its first word.
            rest = unsafe { rest.cast::<*mut u8>().read() };
        }
        if last.is_null() {
            cache.bins[bin].head.set(ptr::null_mut());
        } else {
            // SAFETY: `last` is a listed block; it now ends the list.
            unsafe { last.cast::<*mut u8>().write(ptr::null_mut()) };
        }
        let mut held = self.bin_class(bin).lock();
        // The count drops under the region's lock, as the blocks reach their runs: a
        // reader of the figures under that lock sees them in one place or the other.
        cache.set_count(bin, keep);
        // SAFETY: the rest of the bin: `count - keep` free blocks of its class region
        // linked through their first words, given back once.
        unsafe { held.give_chain(rest, (count - keep) as usize) };
    }

    /// Flushes every bin of `cache` and takes it out of the registry.
    pub(crate) fn detach(&self, cache: &ThreadCache) {
        for bin in 0..BINS {
            self.flush(cache, bin, 0);
        }
        self.fronts.lock.lock();
        let me = ptr::from_ref(cache).cast_mut();
        let mut link = &self.fronts.head;
        loop {
            let p = link.load(Ordering::Relaxed);
            if p == me {
                link.store(cache.next.load(Ordering::Relaxed), Ordering::Release);
                break;
            }
            let Some(node) = NonNull::new(p) else { break };
            // SAFETY: a registered cache of a live thread.
            link = unsafe { &node.as_ref().next };
        }
        // SAFETY: taken above by this thread.
        unsafe { self.fronts.lock.unlock() };
        cache.owner.set(ptr::null());
        cache.detach.set(None);
        cache.state.set(FREE);
    }

    /// [`detach`](Self::detach) for a cache that knows its owner only by address.
    ///
    /// # Safety
    ///
    /// `owner` is a live `Inner<P>`.
    unsafe fn detach_erased(owner: *const (), cache: &ThreadCache) {
        // SAFETY: the caller's contract.
        unsafe { &*owner.cast::<Self>() }.detach(cache);
    }

    /// Flushes this thread's cache if it belongs to this allocator.
    pub(crate) fn detach_here(&self) {
        if !self.fronts.enabled {
            return;
        }
        let me = ptr::from_ref(self).cast::<()>();
        with_cache(|cache| {
            if cache.owner.get() == me && cache.state.get() == LIVE {
                self.detach(cache);
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::{FREE, ThreadCache};
    use crate::sync::Ordering;

    /// The static-TLS provider's cache starts as zeroed memory: that must read as a
    /// fresh cache, unattached with empty bins.
    #[test]
    fn a_zeroed_cache_is_a_new_one() {
        // SAFETY: every field is a pointer, an integer, a cell or atomic of one, or
        // an `Option` of a function pointer, for which zero bytes are valid (`None`).
        let cache: ThreadCache = unsafe { core::mem::zeroed() };
        assert!(cache.owner.get().is_null());
        assert!(cache.detach.get().is_none());
        assert_eq!(cache.state.get(), FREE);
        for bin in &cache.bins {
            assert!(bin.head.get().is_null());
            assert_eq!(bin.count.load(Ordering::Relaxed), 0);
            assert_eq!(bin.batch.get(), 0);
        }
        assert!(cache.next.load(Ordering::Relaxed).is_null());
    }

    /// The division-free test agrees with `%` for every stride a bin has.
    #[test]
    fn stride_tests_agree_with_the_remainder() {
        // Every stride, or a sample of them under Miri.
        for stride in (16..=4096).step_by(if cfg!(miri) { 8 * 41 } else { 8 }) {
            let test = super::Stride::new(stride);
            let near = (0..3 * stride).step_by(if cfg!(miri) { 7 } else { 1 });
            for n in near.chain([usize::MAX - 7, usize::MAX / 2, 65_408, 2 * stride]) {
                assert_eq!(test.divides(n), n % stride == 0, "{n} by {stride}");
            }
        }
    }
}
