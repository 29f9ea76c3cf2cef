//! A thread's cache joins an allocator ([`Inner::attach`], on the thread's first
//! cached allocation or free) and leaves it ([`Inner::detach`]: at the thread's exit,
//! on a trim or decay step on that thread, and when the allocator is dropped there).

use core::ptr;

use bento_pages::PageSource;

use crate::front::bins::{BINS, Bin};
use crate::front::thread_cache::ThreadCache;
use crate::front::tls::{arm_exit_flush, with_cache};
use crate::inner::Inner;

impl<P: PageSource> Inner<P> {
    /// Attaches this thread's cache to this allocator if it is free.
    #[cold]
    pub(crate) fn attach(&self, cache: &ThreadCache) -> bool {
        if !self.front.enabled() || !cache.begin_attach() {
            return false;
        }
        if !arm_exit_flush(cache) {
            cache.abandon();
            return false;
        }
        cache.bind(ptr::from_ref(self).cast(), Self::detach_erased);
        // The owner's countdowns: the first waits for its samples (or none).
        cache.set_countdown(self.guard.map_or(u32::MAX, |pool| pool.draw()));
        cache.set_prof_left(self.profiler.map_or(usize::MAX, |p| p.draw()));
        self.front.registry().add(cache);
        cache.go_live();
        true
    }

    /// Flushes every bin of `cache` and takes it out of the registry.
    pub(crate) fn detach(&self, cache: &ThreadCache) {
        for bin in 0..BINS {
            self.flush(cache, Bin::new(bin), 0);
        }
        self.front.registry().remove(cache);
        cache.unbind();
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
        if !self.front.enabled() {
            return;
        }
        let me = ptr::from_ref(self).cast::<()>();
        with_cache(|cache| {
            if cache.live_for(me) {
                self.detach(cache);
            }
        });
    }
}
