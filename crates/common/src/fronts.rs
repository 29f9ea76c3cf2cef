//! What an allocator keeps of the front end ([`Fronts`]): each bin's shape, the size
//! lookup, and the registry of the thread caches attached to it.

// Without a thread-local provider (`tls.rs`) the front end is off (`Fronts::enabled`
// is false) and the cache's own code is unused.
#![cfg_attr(not(any(feature = "std", feature = "static-tls")), allow(dead_code))]
use bento_pages::lock::RawSpinLock;

use crate::bins::{
    BIN_BYTES, BIN_MOST, BINS, MAX_CACHED, MEDIUM_BINS, NO_BIN, Stride, is_medium, medium,
    medium_size,
};
use crate::cache::ThreadCache;
use crate::config::MAX_CLASSES;
use crate::run::{FIRST, FREED, RUN};
use crate::sync::{AtomicPtr, Ordering};
use core::ptr::{self, NonNull};

/// What an allocator keeps of the front end: the bins' shapes and the registry of
/// caches attached to it.
pub(crate) struct Fronts {
    pub(crate) enabled: bool,
    /// Each bin's capacity in blocks (0: no such bin, or no front end).
    pub(crate) cap: [u32; BINS + 1],
    /// Each bin's first refill: about 4 KiB of blocks (at least one, at most half the
    /// capacity).
    pub(crate) first: [u32; BINS + 1],
    /// Each bin's block stride, for the check of a free without a layout.
    pub(crate) stride: [Stride; BINS + 1],
    /// The bin of each size up to `MAX_CACHED` in steps of 8 (`(size + 7) / 8`), or
    /// `NO_BIN` (for size 0, and for every size without the front end): one lookup
    /// for small and medium sizes alike, so that the hot path does not branch on
    /// which kind a size is, nor on whether the front end is on.
    pub(crate) lookup: [u8; MAX_CACHED / 8 + 1],
    /// The bin of the class region of each region id (`NO_BIN` for the others, and
    /// for every id without the front end): what a free without a layout looks up.
    pub(crate) id_bin: [u8; 256],
    pub(crate) lock: RawSpinLock,
    // Invariant: a list, through `next`, of the caches attached to this allocator
    // (thread-locals of live threads), changed only under `lock`.
    pub(crate) head: AtomicPtr<ThreadCache>,
}

impl Fronts {
    /// The bins for the small classes `classes`; `enabled` says whether the front
    /// end is on (a thread-local provider compiled in, routing by size, asked for).
    pub(crate) fn new(enabled: bool, classes: &crate::config::SizeClasses) -> Self {
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
    pub(crate) fn each(&self, mut f: impl FnMut(&ThreadCache)) {
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
