//! Upkeep: decay steps, giving back what is kept after a refused request, readying
//! memory ahead, trims, and the regions' locks for a fork.

use bento_pages::{CommitCache, Metered, PageSource};

use crate::inner::Inner;

impl<P: PageSource> Inner<P> {
    /// Runs `step` on the commit cache (a tick or a look at the clock) and, when it
    /// took a decay step, frees the blocks kept for reuse for good.
    pub(crate) fn decay_with(&self, step: fn(&CommitCache<Metered<P>>) -> usize) -> usize {
        let steps = self.layer.cache.steps();
        let mut freed = step(&self.layer.cache);
        if self.layer.cache.steps() != steps {
            // This thread's own cache first, so that its blocks reach the regions.
            self.detach_here();
            freed += self.trim_regions();
        }
        freed
    }

    /// After a refused request: gives back what the allocator keeps for reuse (this
    /// thread's cache, the class regions' empty runs, the large region's cached
    /// blocks), whose pages the commit cache then gives up to a source that refuses
    /// commits. True when anything went back, so the request is worth making again.
    #[cold]
    #[inline(never)]
    pub(crate) fn make_room(&self) -> bool {
        let kept = self.layer.cache.kept();
        // Blocks the general regions' spaces keep: draining them frees memory the
        // request may fit in even when no page goes to the commit cache.
        let cached: usize = self
            .generals()
            .filter(|g| self.layer.touched(g.id))
            .map(|g| g.lock().stats().cached_bytes)
            .sum();
        self.detach_here();
        let freed = self.trim_regions();
        freed > 0 || cached > 0 || self.layer.cache.kept() > kept
    }

    /// Makes every class region's empty runs idle and trims every general region's
    /// space; returns the bytes given back. A region that never reserved memory holds
    /// none: its lock is not taken.
    fn trim_regions(&self) -> usize {
        let touched = |id| self.layer.touched(id);
        let classes: usize = self
            .class_regions()
            .filter(|c| touched(c.id))
            .map(|c| c.lock().trim())
            .sum();
        let generals = self.generals().filter(|g| touched(g.id));
        classes + generals.map(|g| g.lock().trim()).sum::<usize>()
    }

    /// Readies memory ahead (`CommonAllocator::prepare`): an empty run for every class
    /// region in use that has none, and `large` bytes of each general region's fresh
    /// free space warmed. Returns the bytes committed.
    pub(crate) fn prepare(&self, large: usize) -> usize {
        let touched = |id| self.layer.touched(id);
        let classes: usize = self
            .class_regions()
            .filter(|c| touched(c.id))
            .map(|c| c.lock().spare())
            .sum();
        let generals = self.generals().filter(|g| touched(g.id));
        classes + generals.map(|g| g.lock().warm(large)).sum::<usize>()
    }

    pub(crate) fn trim(&self) -> usize {
        self.detach_here();
        self.trim_regions() + self.layer.cache.trim()
    }

    /// Takes every region's lock, in the order of `lock_all`.
    pub(crate) fn lock_regions(&self) {
        for class in self.class_regions() {
            class.raw_lock().lock();
        }
        for general in self.generals() {
            general.raw_lock().lock();
        }
        if let Some(pool) = self.guard {
            pool.lock_for_fork();
        }
        if let Some(profiler) = self.profiler {
            profiler.lock_for_fork();
        }
    }

    /// Gives every region's lock back.
    ///
    /// # Safety
    ///
    /// This thread holds them (`lock_regions`), or is a child's only thread forked
    /// while they were held.
    pub(crate) unsafe fn unlock_regions(&self) {
        // SAFETY: the caller's contract.
        unsafe {
            if let Some(profiler) = self.profiler {
                profiler.unlock_after_fork();
            }
            if let Some(pool) = self.guard {
                pool.unlock_after_fork();
            }
            for general in self.generals() {
                general.raw_lock().unlock();
            }
            for class in self.class_regions() {
                class.raw_lock().unlock();
            }
        }
    }
}
