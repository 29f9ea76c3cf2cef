//! Sampled guard pages: the allocation a thread's countdown picks (one in
//! `GuardConfig::every`) goes to the allocator's guard pool, where an overrun or a
//! use after free faults and is reported; the pool's blocks are freed, sized and
//! resized here. Without a pool (none configured, or a system without one) every
//! check is one compare that fails.

use core::alloc::Layout;
use core::ptr::{self, NonNull};

use bento_pages::{GuardStats, Label, PageSource, Trace};

use crate::front::tls::with_cache;
use crate::inner::Inner;
use crate::inner::guard_pool::Pool;

impl<P: PageSource> Inner<P> {
    /// Whether `ptr` lies in the guard pool: one subtraction and compare (none
    /// without a pool: the range is empty).
    #[inline(always)]
    pub(crate) fn guarded(&self, ptr: NonNull<u8>) -> bool {
        ptr.addr().get().wrapping_sub(self.guard_lo) < self.guard_len
    }

    /// Counts this allocation against the thread's countdown and, when it is due,
    /// a guarded block for `layout` (`None`: not sampled, or the pool cannot take
    /// it). The full path of every allocation calls it; the hot path only counts.
    pub(crate) fn sampled(&self, layout: Layout) -> Option<NonNull<u8>> {
        let me = ptr::from_ref(self).cast::<()>();
        let due = with_cache(|cache| {
            if !cache.owned_by(me) {
                // Another allocator's cache: the pool's own countdown.
                return self.guard.is_some_and(Pool::sample);
            }
            let left = cache.countdown();
            if left > 1 {
                cache.set_countdown(left - 1);
                return false;
            }
            cache.set_countdown(self.guard.map_or(u32::MAX, Pool::draw));
            self.guard.is_some()
        });
        if !due {
            return None;
        }
        self.guard?
            .alloc(layout, Label::default(), &Trace::here(None))
    }

    /// Counts `size` bytes against the thread's profile countdown (for an allocation
    /// the hot path did not serve); true when the sample falls in this allocation,
    /// which the caller then [`record`](Self::profile_record)s.
    pub(crate) fn profile_due(&self, size: usize) -> bool {
        let me = ptr::from_ref(self).cast::<()>();
        with_cache(|cache| {
            let Some(profiler) = self.profiler else {
                if cache.owned_by(me) {
                    cache.set_prof_left(usize::MAX);
                }
                return false;
            };
            if !cache.owned_by(me) {
                return profiler.count(size);
            }
            let mut left = cache.prof_left();
            if left == 0 || left == usize::MAX {
                // A new thread (or one another allocator's countdown left): a wait.
                left = profiler.draw();
            }
            if left > size {
                cache.set_prof_left(left - size);
                return false;
            }
            cache.set_prof_left(profiler.draw());
            true
        })
    }

    /// Records the sampled block `ptr` of `size` bytes in the profile.
    #[cold]
    #[inline(never)]
    pub(crate) fn profile_record(&self, ptr: NonNull<u8>, size: usize) {
        if let Some(profiler) = self.profiler {
            let trace = if profiler.backtrace() {
                Trace::here(None)
            } else {
                Trace::EMPTY
            };
            profiler.record(ptr, size, Label::default(), &trace);
        }
    }

    /// Whether the block at `ptr` may be a profile sample: a free of it takes the
    /// full path, which forgets it.
    #[inline(always)]
    pub(crate) fn maybe_profiled(&self, ptr: NonNull<u8>) -> bool {
        self.profiler.is_some_and(|p| p.may_hold(ptr))
    }

    /// The free of a block the profile may hold.
    pub(crate) fn profile_free(&self, ptr: NonNull<u8>) {
        if let Some(profiler) = self.profiler
            && profiler.may_hold(ptr)
        {
            profiler.forget(ptr);
        }
    }

    /// A resize from `old` to `new` (`size` bytes now): for the profile a free and
    /// an allocation (the old sample, if any, goes; the new size is counted).
    #[inline]
    pub(crate) fn profile_resized(&self, old: NonNull<u8>, new: NonNull<u8>, size: usize) {
        if self.profiler.is_some() {
            self.profile_free(old);
            if self.profile_due(size) {
                self.profile_record(new, size);
            }
        }
    }

    /// Frees a block of the guard pool (a misuse is reported and aborts).
    ///
    /// # Safety
    ///
    /// `ptr` is [`guarded`](Self::guarded); a live block is not used afterwards.
    #[cold]
    #[inline(never)]
    pub(crate) unsafe fn free_guarded(&self, ptr: NonNull<u8>) {
        if let Some(pool) = self.guard {
            // SAFETY: the caller's contract: the pool owns `ptr`.
            unsafe { pool.free(ptr, &Trace::here(None)) };
        }
    }

    /// The size of a live guarded block (0 for a pointer that is none).
    #[cold]
    pub(crate) fn guarded_size(&self, ptr: NonNull<u8>) -> usize {
        self.guard.and_then(|pool| pool.size_of(ptr)).unwrap_or(0)
    }

    /// The guard pool's figures, if the allocator has one.
    pub(crate) fn guard_stats(&self) -> Option<GuardStats> {
        self.guard.map(Pool::stats)
    }
}
