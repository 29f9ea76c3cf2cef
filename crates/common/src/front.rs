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
use bento_pages::{AllocError, Misuse, PageSource};

use crate::bins::BINS;
use crate::cache::{ATTACHING, DEAD, FREE, LIVE, ThreadCache};
use crate::config::SMALL_ALIGN;
use crate::inner::{Inner, routed_size};
use crate::run::FREED;
use crate::sync::Ordering;
use crate::tls::{arm_exit_flush, with_cache};
use core::alloc::Layout;
use core::ptr::{self, NonNull};

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
