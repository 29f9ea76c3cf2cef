//! Sampled allocation profiles for heaps (`HeapBuilder::profile`): each thread counts
//! the bytes its heaps allocate down from an exponential draw (a thread-local cell),
//! and the allocation that crosses zero is recorded in the profiler with its heap,
//! tag, site and the game's frame and phase; its free, resize or the heap's discard
//! takes it out.

use core::alloc::Layout;
use core::panic::Location;
use core::ptr::NonNull;

#[cfg(all(feature = "std", any(unix, windows), not(bento_loom)))]
mod on {
    use super::{Layout, Location, NonNull};
    use bento_pages::{Label, Profiler, Trace};
    use core::cell::Cell;

    std::thread_local! {
        /// Bytes this thread's profiled heaps allocate until the next sample (0: a
        /// draw is due, as on a new thread).
        static LEFT: Cell<usize> = const { Cell::new(0) };
    }

    /// A heap's side of its profiler.
    pub(crate) struct HeapProfile {
        profiler: &'static Profiler,
    }

    impl HeapProfile {
        pub(crate) fn new(profiler: &'static Profiler) -> Self {
            Self { profiler }
        }

        /// Counts an allocation of `size` bytes; true when the sample falls in it.
        #[inline(always)]
        pub(crate) fn due(&self, size: usize) -> bool {
            LEFT.try_with(|left| {
                let mut n = left.get();
                if n > size {
                    left.set(n - size);
                    return false;
                }
                if n == 0 {
                    // A new thread: its first wait.
                    n = self.profiler.draw();
                    if n > size {
                        left.set(n - size);
                        return false;
                    }
                }
                left.set(self.profiler.draw());
                true
            })
            .unwrap_or(false)
        }

        /// Records the sampled block.
        #[cold]
        #[inline(never)]
        pub(crate) fn record(
            &self,
            ptr: NonNull<u8>,
            layout: Layout,
            heap: &'static str,
            tag: Option<&'static str>,
            site: Option<&'static Location<'static>>,
            owner: usize,
        ) {
            let trace = if self.profiler.backtrace() {
                Trace::here(site)
            } else {
                Trace::at(site)
            };
            let label = Label {
                heap: Some(heap),
                tag,
                owner,
            };
            self.profiler.record(ptr, layout.size(), label, &trace);
        }

        /// The free (or move) of the block at `ptr`: forgotten if it was a sample.
        #[inline(always)]
        pub(crate) fn freed(&self, ptr: NonNull<u8>) {
            if self.profiler.may_hold(ptr) {
                self.profiler.forget(ptr);
            }
        }

        /// The heap `owner` dropped all its blocks.
        pub(crate) fn discarded(&self, owner: usize) {
            self.profiler.forget_owned(owner);
        }
    }
}

#[cfg(not(all(feature = "std", any(unix, windows), not(bento_loom))))]
mod on {
    use super::{Layout, Location, NonNull};

    /// No profiler on this build: the type has no value.
    pub(crate) enum HeapProfile {}

    impl HeapProfile {
        pub(crate) fn due(&self, _: usize) -> bool {
            match *self {}
        }
        pub(crate) fn record(
            &self,
            _: NonNull<u8>,
            _: Layout,
            _: &'static str,
            _: Option<&'static str>,
            _: Option<&'static Location<'static>>,
            _: usize,
        ) {
            match *self {}
        }
        pub(crate) fn freed(&self, _: NonNull<u8>) {
            match *self {}
        }
        pub(crate) fn discarded(&self, _: usize) {
            match *self {}
        }
    }
}

pub(crate) use on::HeapProfile;
