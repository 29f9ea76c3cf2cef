//! Allocation: the hot path off this thread's bin ([`Inner::fast_alloc`]), then
//! the full one ([`Inner::alloc`]): the bin refilled from its class region, the
//! class region itself, the large region, or (under `Routing::Contention`) the
//! first general region free to lock.

use core::alloc::Layout;
use core::ptr::{self, NonNull};

use bento_pages::{AllocError, PageSource};
use bento_space::MemorySpace;

use crate::config::{Routing, SMALL_ALIGN};
use crate::front::bins::Bin;
use crate::front::thread_cache::ThreadCache;
use crate::front::tls::with_cache;
use crate::inner::{Inner, routed_size};
use crate::layer::RegionPages;

impl<P: PageSource> Inner<P> {
    /// The hot path of an allocation: a block off this thread's bin for `layout`, with
    /// no lock, no atomic read-modify-write and no call; `None` sends the caller to
    /// the full path (no bin for the layout, an empty bin, the front end off, the
    /// thread's cache not attached to this allocator, or a guard or profile sample
    /// due). It counts the allocation against the thread's countdowns.
    #[inline(always)]
    pub(crate) fn fast_alloc(&self, layout: Layout) -> Option<NonNull<u8>> {
        if layout.align() > SMALL_ALIGN {
            return None;
        }
        let bin = self.front.bin_of_size(routed_size(layout))?;
        let me = ptr::from_ref(self).cast::<()>();
        with_cache(|cache| {
            if !cache.owned_by(me) {
                return None;
            }
            if !self.sampling {
                return cache.pop(bin);
            }
            let left = cache.countdown();
            let bytes = cache.prof_left();
            if left == 0 || bytes <= layout.size() {
                return None;
            }
            let block = cache.pop(bin)?;
            cache.set_countdown(left - 1);
            cache.set_prof_left(bytes - layout.size());
            Some(block)
        })
    }

    #[inline]
    pub(crate) fn alloc(&self, layout: Layout) -> Result<NonNull<u8>, AllocError> {
        match self.routing {
            Routing::BySize => match self.route(layout) {
                Some(bin) => {
                    if self.front.enabled()
                        && let Some(result) = self.cached_alloc(bin)
                    {
                        return result;
                    }
                    self.class(bin).lock().take().ok_or(AllocError)
                }
                None => self.large().lock().alloc(layout),
            },
            Routing::Contention { .. } => self.alloc_contended(layout, false).map(|(p, _)| p),
        }
    }

    /// A block from this thread's cache, refilled when empty; `None` when the thread
    /// cannot use its cache for this allocator (the locked path serves it).
    #[inline]
    fn cached_alloc(&self, bin: Bin) -> Option<Result<NonNull<u8>, AllocError>> {
        let me = ptr::from_ref(self).cast::<()>();
        with_cache(|cache| {
            if !cache.owned_by(me) && !self.attach(cache) {
                return None;
            }
            if let Some(block) = cache.pop(bin) {
                return Some(Ok(block));
            }
            Some(self.refill(cache, bin))
        })
    }

    /// Takes the bin's batch of blocks (growing to half its capacity) from its
    /// region in one lock, returns one and keeps the rest.
    fn refill(&self, cache: &ThreadCache, bin: Bin) -> Result<NonNull<u8>, AllocError> {
        let most = (self.front.cap(bin) / 2).max(1);
        let want = cache.next_batch(bin, self.front.first(bin), most);
        let mut held = self.class(bin).lock();
        let (chain, n) = held.take_chain(want as usize);
        let first = NonNull::new(chain).ok_or(AllocError)?;
        // SAFETY: a chain of `n` free blocks of this bin, linked through their first
        // words; the bin is empty (a refill follows a failed pop). Installed under
        // the region's lock, so that a reader of the stats sees the blocks in the
        // region or in the cache. The first, handed out, loses any freed mark (as a
        // pop clears it): it holds at least 16 bytes.
        unsafe {
            cache.install(bin, first.cast::<*mut u8>().read(), n as u32 - 1);
            first.cast::<usize>().add(1).write(0);
        }
        drop(held);
        Ok(first)
    }

    /// Tries each region in turn from one picked by the thread's stack, and waits
    /// only after a full cycle of failed tries.
    fn alloc_contended(
        &self,
        layout: Layout,
        zeroed: bool,
    ) -> Result<(NonNull<u8>, bool), AllocError> {
        let n = self.general_count;
        let first = thread_hint() % n;
        for k in 0..n {
            if let Some(held) = self.general((first + k) % n).try_lock() {
                return alloc_in(&held, layout, zeroed, self.dedicated);
            }
        }
        alloc_in(&self.general(first).lock(), layout, zeroed, self.dedicated)
    }

    pub(crate) fn alloc_zeroed(&self, layout: Layout) -> Result<(NonNull<u8>, bool), AllocError> {
        match self.routing {
            Routing::BySize => {
                if self.route(layout).is_some() || layout.size() < self.dedicated {
                    return self.alloc(layout).map(|p| (p, false));
                }
                alloc_in(&self.large().lock(), layout, true, self.dedicated)
            }
            Routing::Contention { .. } => self.alloc_contended(layout, true),
        }
    }
}

/// Allocates `layout` in a general region's space; with `zeroed`, says whether the
/// block is known to read as zero (a dedicated segment fresh from a source whose
/// new pages are zero).
pub(crate) fn alloc_in<P: PageSource>(
    space: &MemorySpace<RegionPages<P>>,
    layout: Layout,
    zeroed: bool,
    dedicated: usize,
) -> Result<(NonNull<u8>, bool), AllocError> {
    if !zeroed || layout.size() < dedicated {
        return space.alloc(layout).map(|p| (p, false));
    }
    let pages = space.pages().expect("a region's space has a source");
    pages.take_fresh();
    let p = space.alloc(layout)?;
    Ok((p, pages.take_fresh()))
}

/// A number that differs between threads without asking the OS: the address of the
/// caller's stack frame, hashed (thread stacks lie megabytes apart).
#[cfg(not(bento_loom))]
#[inline]
pub(crate) fn thread_hint() -> usize {
    let probe = 0u8;
    let addr = core::hint::black_box(&raw const probe).addr();
    ((addr >> 16).wrapping_mul(0x9e37_79b9)) >> 8
}

/// Under loom every thread starts at the first region (a model must be
/// deterministic, and loom's stacks move between runs): the tries then meet.
#[cfg(bento_loom)]
pub(crate) fn thread_hint() -> usize {
    0
}
