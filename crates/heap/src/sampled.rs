//! Sampled guard pages for heaps (`HeapBuilder::guard_pages`): the heaps of a
//! process share one guard pool (made with the first such heap's slots), each
//! sampling at its own rate with a countdown of its own; a guarded block carries
//! its heap's name and tag into the report.

use core::alloc::Layout;
use core::panic::Location;
use core::ptr::NonNull;

use bento_pages::GuardConfig;

#[cfg(all(feature = "std", unix, not(bento_loom)))]
mod on {
    use super::{GuardConfig, Layout, Location, NonNull};
    use bento_pages::{GuardPool, Label, Trace};
    use core::sync::atomic::{AtomicU32, Ordering};

    /// The heaps' pool: made once, by the first heap with guard pages.
    static POOL: std::sync::OnceLock<Option<&'static GuardPool>> = std::sync::OnceLock::new();

    /// A heap's sampler over the shared pool.
    pub(crate) struct HeapGuard {
        pool: &'static GuardPool,
        every: u32,
        countdown: AtomicU32,
    }

    impl HeapGuard {
        /// A sampler at `config`'s rate; `None` when the pool cannot be made (the
        /// system refused its reservation).
        pub(crate) fn new(config: GuardConfig) -> Option<Self> {
            let pool = (*POOL.get_or_init(|| GuardPool::new(config.named("heap")).ok()))?;
            Some(Self {
                pool,
                every: config.every,
                countdown: AtomicU32::new(pool.draw_for(config.every)),
            })
        }

        /// A guarded block for `layout` when this allocation is the sampled one.
        pub(crate) fn alloc(
            &self,
            layout: Layout,
            heap: &'static str,
            tag: Option<&'static str>,
            site: Option<&'static Location<'static>>,
        ) -> Option<NonNull<u8>> {
            if self.countdown.fetch_sub(1, Ordering::Relaxed) > 1 {
                return None;
            }
            self.countdown
                .store(self.pool.draw_for(self.every), Ordering::Relaxed);
            let label = Label {
                heap: Some(heap),
                tag,
            };
            self.pool.alloc(layout, label, &Trace::here(site))
        }

        /// Whether the pool holds `ptr`.
        #[inline]
        pub(crate) fn owns(&self, ptr: NonNull<u8>) -> bool {
            self.pool.owns(ptr.as_ptr())
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

    /// No guard pool on this build: the type has no value.
    pub(crate) enum HeapGuard {}

    impl HeapGuard {
        pub(crate) fn new(_: GuardConfig) -> Option<Self> {
            None
        }
        pub(crate) fn alloc(
            &self,
            _: Layout,
            _: &'static str,
            _: Option<&'static str>,
            _: Option<&'static Location<'static>>,
        ) -> Option<NonNull<u8>> {
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
