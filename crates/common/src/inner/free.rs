//! Freeing: the hot paths onto this thread's bin (with a layout,
//! [`Inner::fast_free`]; without one, [`Inner::fast_free_unsized`], the region map
//! naming the bin), then the slow halves ([`Inner::dealloc`], [`Inner::free`]): the
//! bin flushed half into its class region when full, or the block given to its
//! region under the region's lock.

use core::alloc::Layout;
use core::ptr::{self, NonNull};

use bento_pages::{Misuse, PageSource};

use crate::config::{Routing, SMALL_ALIGN};
use crate::front::bins::Bin;
use crate::front::thread_cache::ThreadCache;
use crate::front::tls::with_cache;
use crate::inner::{Inner, Owner, report, report_foreign, routed_size};
use crate::layer::map::RegionId;
use crate::region::Class;
use crate::region::run::FREED;

impl<P: PageSource> Inner<P> {
    /// The hot path of a free with its layout: onto this thread's bin when it has
    /// room; false sends the caller to the full path.
    ///
    /// # Safety
    ///
    /// `ptr` is a live block of this allocator allocated (or last resized) with
    /// `layout`, not used afterwards when this returns true.
    #[inline(always)]
    pub(crate) unsafe fn fast_free(&self, ptr: NonNull<u8>, layout: Layout) -> bool {
        if layout.align() > SMALL_ALIGN
            || (self.sampling && (self.guarded(ptr) || self.maybe_profiled(ptr)))
        {
            return false;
        }
        let Some(bin) = self.front.bin_of_size(routed_size(layout)) else {
            return false;
        };
        // SAFETY: the caller's contract; the lookup gives the bin of its layout.
        unsafe { self.fast_free_bin(ptr, bin, Some(layout)) }
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
        if self.sampling && self.maybe_profiled(ptr) {
            return false;
        }
        let bin = self
            .front
            .bin_of_region(self.layer.map.owner(ptr.addr().get()));
        let me = ptr::from_ref(self).cast::<()>();
        with_cache(|cache| {
            if !cache.owned_by(me)
                || cache.count(bin) >= self.front.cap(bin)
                // SAFETY: a bin with room is a class region's, whose blocks the map
                // says `ptr` lies among (the caller's contract).
                || !unsafe { self.front.plausible(bin, ptr) }
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
        bin: Bin,
        layout: Option<Layout>,
    ) -> bool {
        let me = ptr::from_ref(self).cast::<()>();
        with_cache(|cache| {
            if !cache.owned_by(me) || cache.count(bin) >= self.front.cap(bin) {
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
        bin: Bin,
        ptr: NonNull<u8>,
        layout: Option<Layout>,
    ) -> bool {
        if let Some(layout) = layout
            && !self.check_owner(ptr, layout, self.class(bin).id)
        {
            return false;
        }
        self.check_cached_free(cache, bin, ptr)
    }

    /// # Safety
    ///
    /// As for [`CommonAllocator::dealloc`], with a non-zero size.
    #[inline]
    pub(crate) unsafe fn dealloc(&self, ptr: NonNull<u8>, layout: Layout) {
        if self.sampling {
            self.profile_free(ptr);
            if self.guarded(ptr) {
                // SAFETY: the caller's contract; the pool owns `ptr`.
                return unsafe { self.free_guarded(ptr) };
            }
        }
        let Routing::BySize = self.routing else {
            let Some(Owner::General(region)) = self.owner(ptr) else {
                return report_foreign(self.misuse, ptr);
            };
            // SAFETY: the caller's contract; the map gives the block to `region`.
            return unsafe { region.lock().dealloc(ptr, layout) };
        };
        let Some(bin) = self.route(layout) else {
            let large = self.large();
            if cfg!(debug_assertions) && !self.check_owner(ptr, layout, large.id) {
                return;
            }
            // SAFETY: the caller's contract.
            return unsafe { large.lock().dealloc(ptr, layout) };
        };
        let class = self.class(bin);
        if cfg!(debug_assertions) && !self.check_owner(ptr, layout, class.id) {
            return;
        }
        // SAFETY: the caller's contract; the size routes it to this class.
        if self.front.enabled() && unsafe { self.cached_free(bin, ptr) } {
            return;
        }
        // SAFETY: as above.
        unsafe { self.free_in_class(class, ptr) }
    }

    /// # Safety
    ///
    /// As for [`CommonAllocator::free`].
    pub(crate) unsafe fn free(&self, ptr: NonNull<u8>) {
        if self.sampling {
            self.profile_free(ptr);
            if self.guarded(ptr) {
                // SAFETY: the caller's contract; the pool owns `ptr`.
                return unsafe { self.free_guarded(ptr) };
            }
        }
        match self.owner(ptr) {
            None => report_foreign(self.misuse, ptr),
            Some(Owner::Class(bin, class)) => {
                if self.front.enabled() {
                    let check = self.probe_frees || cfg!(debug_assertions);
                    // SAFETY: the map gives `ptr` to this class region; a block of
                    // it holds at least 16 bytes, readable (`probe_frees`) or ours.
                    if !check || unsafe { self.front.plausible(bin, ptr) } {
                        // SAFETY: the caller's contract (checked as the hot path
                        // does); the block goes to its class region's bin marked.
                        unsafe {
                            ptr.cast::<usize>().add(1).write(FREED);
                            if self.cached_free(bin, ptr) {
                                return;
                            }
                        }
                    } else if self.held_here(bin, ptr) {
                        return report(self.misuse, &Misuse::DoubleFree { ptr });
                    }
                }
                // SAFETY: as above; probed under the lock.
                unsafe { self.free_in_class(class, ptr) }
            }
            Some(Owner::General(region)) => {
                let held = region.lock();
                if self.probe_frees
                    && let Err(misuse) = self.probe_general(&held, region, ptr)
                {
                    drop(held);
                    return report(self.misuse, &misuse);
                }
                // SAFETY: as above (the space checks in debug builds).
                unsafe { held.free(ptr) }
            }
        }
    }

    /// Puts a freed block in this thread's cache, flushing half the bin when it is
    /// full; false when the thread cannot use its cache for this allocator.
    ///
    /// # Safety
    ///
    /// `ptr` is a live block of bin `bin` of this allocator, not used afterwards.
    #[inline]
    unsafe fn cached_free(&self, bin: Bin, ptr: NonNull<u8>) -> bool {
        let me = ptr::from_ref(self).cast::<()>();
        with_cache(|cache| {
            if !cache.owned_by(me) && !self.attach(cache) {
                return false;
            }
            if cfg!(debug_assertions) && !self.check_cached_free(cache, bin, ptr) {
                return true;
            }
            if cache.count(bin) >= self.front.cap(bin) {
                self.flush(cache, bin, self.front.cap(bin) / 2);
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
    fn check_cached_free(&self, cache: &ThreadCache, bin: Bin, ptr: NonNull<u8>) -> bool {
        // The bin is short (at most 64 blocks): walked whole, since the block's own
        // words may never have been written.
        if cache.holds(bin, ptr) {
            (self.misuse)(&Misuse::DoubleFree { ptr });
            return false;
        }
        true
    }

    /// Gives the blocks of `bin` beyond the first `keep` back to the region.
    pub(crate) fn flush(&self, cache: &ThreadCache, bin: Bin, keep: u32) {
        let count = cache.count(bin);
        if count <= keep {
            return;
        }
        // The blocks after the first `keep` go.
        let rest = cache.cut(bin, keep);
        let mut held = self.class(bin).lock();
        // The count drops under the region's lock, as the blocks reach their runs: a
        // reader of the stats under that lock sees them in one place or the other.
        cache.set_count(bin, keep);
        // SAFETY: the rest of the bin: `count - keep` free blocks of its class region
        // linked through their first words, given back once.
        unsafe { held.give_chain(rest, (count - keep) as usize) };
    }

    /// Frees `ptr` into class region `class` under its lock, probed first in debug
    /// builds and (with `probe_frees`) in release builds; a misuse found is reported
    /// and nothing is freed.
    ///
    /// # Safety
    ///
    /// `ptr` is a live block of `class`, not used afterwards.
    unsafe fn free_in_class(&self, class: &Class<P>, ptr: NonNull<u8>) {
        let mut held = class.lock();
        if (cfg!(debug_assertions) || self.probe_frees)
            && let Err(misuse) = self.probe_class(&held, class, ptr)
        {
            drop(held);
            return report(self.misuse, &misuse);
        }
        // SAFETY: the caller's contract (probed where the build does).
        unsafe { held.give(ptr) }
    }

    /// Whether the region map gives `ptr` to the region of id `id` (debug builds);
    /// reports the misuse otherwise.
    #[cold]
    fn check_owner(&self, ptr: NonNull<u8>, layout: Layout, id: RegionId) -> bool {
        let owner = self.layer.map.owner(ptr.addr().get());
        if owner == id {
            return true;
        }
        match self.owner(ptr) {
            Some(owner) => {
                let block_size = match owner {
                    Owner::Class(_, class) => class.block,
                    Owner::General(_) => 0,
                };
                (self.misuse)(&Misuse::WrongLayout {
                    ptr,
                    layout,
                    block_size,
                    block_align: SMALL_ALIGN,
                });
            }
            None => report_foreign(self.misuse, ptr),
        }
        false
    }
}
