//! Sampled guard pages for heaps (`HeapBuilder::guard_pages`): the heaps of a
//! process share one guard pool (made with the first such heap's slots) and each
//! thread one countdown (a thread-local cell: no atomic on the hot path); the heap
//! whose allocation finds it at zero takes the sample and draws the next wait at its
//! own rate. A guarded block carries its heap's name and tag into the report.

use core::alloc::Layout;
use core::panic::Location;
use core::ptr::NonNull;

use bento_pages::GuardConfig;

#[cfg(all(feature = "std", unix, not(bento_loom)))]
mod on {
    use super::{GuardConfig, Layout, Location, NonNull};
    use bento_pages::{GuardPool, Label, Trace};
    use core::cell::Cell;

    /// The heaps' pool: made once, by the first heap with guard pages.
    static POOL: std::sync::OnceLock<Option<&'static GuardPool>> = std::sync::OnceLock::new();

    std::thread_local! {
        /// This thread's allocations in guarded heaps until the next sample (0: the
        /// next one is due, as on a new thread).
        static COUNTDOWN: Cell<u32> = const { Cell::new(0) };
    }

    /// The heaps' pool's figures, once a heap with guard pages made it.
    pub(crate) fn stats() -> Option<bento_pages::GuardStats> {
        POOL.get().copied().flatten().map(GuardPool::stats)
    }

    /// A heap's sampler over the shared pool.
    pub(crate) struct HeapGuard {
        pool: &'static GuardPool,
        /// The pool's range, for the hot path's check.
        lo: usize,
        len: usize,
        every: u32,
    }

    impl HeapGuard {
        /// A sampler at `config`'s rate; `None` when the pool cannot be made (the
        /// system refused its reservation).
        pub(crate) fn new(config: GuardConfig) -> Option<Self> {
            let pool = (*POOL.get_or_init(|| GuardPool::new(config.named("heap")).ok()))?;
            let (lo, len) = pool.range();
            Some(Self {
                pool,
                lo,
                len,
                every: config.every,
            })
        }

        /// Counts an allocation; true when it is the sampled one (the next wait is
        /// drawn then).
        #[inline(always)]
        pub(crate) fn due(&self) -> bool {
            // A thread whose thread-locals are gone takes no samples.
            COUNTDOWN
                .try_with(|left| {
                    let n = left.get();
                    if n > 1 {
                        left.set(n - 1);
                        return false;
                    }
                    left.set(self.pool.draw_for(self.every));
                    true
                })
                .unwrap_or(false)
        }

        /// A guarded block for `layout` (the sample [`due`](Self::due) chose).
        pub(crate) fn alloc(
            &self,
            layout: Layout,
            heap: &'static str,
            tag: Option<&'static str>,
            site: Option<&'static Location<'static>>,
            owner: usize,
        ) -> Option<NonNull<u8>> {
            let label = Label {
                heap: Some(heap),
                tag,
                owner,
            };
            self.pool.alloc(layout, label, &Trace::here(site))
        }

        /// Whether the pool holds `ptr`.
        #[inline]
        pub(crate) fn owns(&self, ptr: NonNull<u8>) -> bool {
            ptr.addr().get().wrapping_sub(self.lo) < self.len
        }

        /// Frees every guarded block of the heap `owner`.
        ///
        /// # Safety
        ///
        /// None of them is used afterwards.
        pub(crate) unsafe fn free_owned(&self, owner: usize) {
            // SAFETY: the caller's contract.
            unsafe { self.pool.free_owned(owner, &Trace::here(None)) };
        }

        /// The shared pool's check.
        pub(crate) fn validate(&self) -> Result<(), bento_pages::GuardCorruption> {
            self.pool.validate().map(|_| ())
        }

        /// Frees a guarded block (a misuse is reported and aborts).
        ///
        /// # Safety
        ///
        /// `ptr` is [`owns`](Self::owns)'s; a live block is not used afterwards.
        pub(crate) unsafe fn free(&self, ptr: NonNull<u8>) {
            // SAFETY: the caller's contract.
            unsafe { self.pool.free(ptr, &Trace::here(None)) };
        }
    }
}

#[cfg(not(all(feature = "std", unix, not(bento_loom))))]
mod on {
    use super::{GuardConfig, Layout, Location, NonNull};

    pub(crate) fn stats() -> Option<bento_pages::GuardStats> {
        None
    }

    /// No guard pool on this build: the type has no value.
    pub(crate) enum HeapGuard {}

    impl HeapGuard {
        pub(crate) fn new(_: GuardConfig) -> Option<Self> {
            None
        }
        pub(crate) fn due(&self) -> bool {
            match *self {}
        }
        pub(crate) fn validate(&self) -> Result<(), bento_pages::GuardCorruption> {
            match *self {}
        }
        pub(crate) fn alloc(
            &self,
            _: Layout,
            _: &'static str,
            _: Option<&'static str>,
            _: Option<&'static Location<'static>>,
            _: usize,
        ) -> Option<NonNull<u8>> {
            match *self {}
        }
        pub(crate) unsafe fn free_owned(&self, _: usize) {
            match *self {}
        }
        pub(crate) fn owns(&self, _: NonNull<u8>) -> bool {
            match *self {}
        }
        pub(crate) unsafe fn free(&self, _: NonNull<u8>) {
            match *self {}
        }
    }
}

pub(crate) use on::HeapGuard;

/// The figures of the guard pool the heaps share: its slots, the blocks live and in
/// quarantine, those guarded so far and its memory; `None` until a heap with
/// [`guard_pages`](crate::HeapBuilder::guard_pages) made it (or on a build without
/// guard pages: Unix with `std` has them).
///
/// ```
/// use allocator_api2::{alloc::Global, boxed::Box};
/// use bento_heap::HeapBuilder;
/// use bento_pages::GuardConfig;
///
/// let heap = HeapBuilder::new("doc-guard-stats")
///     .guard_pages(GuardConfig::DEFAULT.every(1))
///     .build(Global);
/// let b = Box::new_in(7u32, &heap);
/// # #[cfg(unix)]
/// assert!(bento_heap::guard_stats().unwrap().guarded >= 1);
/// drop(b);
/// ```
#[must_use]
pub fn guard_stats() -> Option<bento_pages::GuardStats> {
    on::stats()
}
