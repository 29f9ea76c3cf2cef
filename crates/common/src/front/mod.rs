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
//! of the caches attached to it, so that its stats count the blocks they hold.
//!
//! Blocks of a medium bin are allocated at the bin's size, so a block freed with any
//! layout of its bin holds the bin's size (the rule the large region keeps while the
//! front end is on).
//!
//! Here: what an allocator keeps of the front end ([`Front`]: each bin's shape, the
//! size lookup, the registry); `bins.rs` the bins, `thread_cache.rs` one thread's
//! cache, `tls.rs` where it lives, `registry.rs` the caches attached to an
//! allocator. The paths through it are `inner/alloc.rs` and `inner/free.rs`, the
//! attach and detach `inner/thread.rs`.
//!
//! [`CommonAllocator::trim`]: crate::CommonAllocator::trim

// Without a thread-local provider (`tls.rs`) the front end is off (`Front::enabled`
// is false) and the cache's own code is unused.
#![cfg_attr(not(any(feature = "std", feature = "static-tls")), allow(dead_code))]

pub(crate) mod bins;
pub(crate) mod registry;
pub(crate) mod thread_cache;
pub(crate) mod tls;

use core::ptr::NonNull;

use crate::config::SizeClasses;
use crate::front::bins::{
    BIN_BYTES, BIN_MOST, BINS, Bin, MAX_CACHED, MEDIUM_BINS, Stride, is_medium, medium_size,
};
use crate::front::registry::Registry;
use crate::layer::map::RegionId;
use crate::region::run::{FIRST, FREED, RUN};

/// What an allocator keeps of the front end: the bins' shapes and the registry of
/// caches attached to it.
pub(crate) struct Front {
    enabled: bool,
    /// Each bin's capacity in blocks (0: no such bin, or no front end).
    cap: [u32; BINS + 1],
    /// Each bin's first refill: about 4 KiB of blocks (at least one, at most half the
    /// capacity).
    first: [u32; BINS + 1],
    /// Each bin's block stride, for the check of a free without a layout.
    stride: [Stride; BINS + 1],
    /// The bin of each size up to `MAX_CACHED` in steps of 8 (`(size + 7) / 8`), or
    /// `Bin::NONE` (for size 0, and for every size without the front end): one
    /// lookup for small and medium sizes alike, so that the hot path does not branch
    /// on which kind a size is, nor on whether the front end is on.
    lookup: [Bin; MAX_CACHED / 8 + 1],
    /// The bin of the class region of each region id (`Bin::NONE` for the others,
    /// and for every id without the front end): what a free without a layout looks
    /// up.
    id_bin: [Bin; 256],
    registry: Registry,
}

impl Front {
    /// The bins for the small classes `classes` (bins `0..classes.len()`, then the
    /// medium bins); `enabled` says whether the front end is on (a thread-local
    /// provider compiled in, routing by size, asked for).
    pub(crate) fn new(enabled: bool, classes: &SizeClasses) -> Self {
        let smalls = classes.len();
        let mut size = [0u32; BINS + 1];
        for (bin, s) in size.iter_mut().enumerate().take(smalls) {
            *s = classes.size(bin) as u32;
        }
        for m in 0..MEDIUM_BINS {
            size[smalls + m] = medium_size(m) as u32;
        }
        let mut lookup = [Bin::NONE; MAX_CACHED / 8 + 1];
        for (slot, bin) in lookup.iter_mut().enumerate().skip(1) {
            if !enabled {
                break;
            }
            let bytes = slot * 8;
            if let Some(class) = classes.class_of(bytes) {
                *bin = Bin::new(class);
            } else if is_medium(bytes) {
                *bin = Bin::medium(smalls, bytes);
            }
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
            id_bin: [Bin::NONE; 256],
            registry: Registry::new(),
        }
    }

    /// Whether the front end is on.
    #[inline(always)]
    pub(crate) fn enabled(&self) -> bool {
        self.enabled
    }

    /// The bin of a request of `routed` bytes (`routed_size`), `Bin::NONE` for none;
    /// `None` above the largest size a bin serves.
    #[inline(always)]
    pub(crate) fn bin_of_size(&self, routed: usize) -> Option<Bin> {
        self.lookup.get(routed.div_ceil(8)).copied()
    }

    /// The bin of the region the map names `id` (`Bin::NONE` for a general region).
    #[inline(always)]
    pub(crate) fn bin_of_region(&self, id: RegionId) -> Bin {
        self.id_bin[id.index()]
    }

    /// Records that region `id` is the class region of `bin`.
    pub(crate) fn route_id(&mut self, id: RegionId, bin: Bin) {
        if self.enabled {
            self.id_bin[id.index()] = bin;
        }
    }

    /// `bin`'s capacity in blocks (0 for `Bin::NONE`, and without the front end).
    #[inline(always)]
    pub(crate) fn cap(&self, bin: Bin) -> u32 {
        self.cap[bin.index()]
    }

    /// The size of `bin`'s first refill.
    pub(crate) fn first(&self, bin: Bin) -> u32 {
        self.first[bin.index()]
    }

    /// Whether `ptr` may be a block of `bin` not freed already: at a block's start
    /// in its run, and without the freed mark. Not whether it was carved (the locked
    /// path's probe knows that).
    ///
    /// # Safety
    ///
    /// `ptr` lies in a run of `bin`'s class region, whose second word is readable.
    #[inline(always)]
    pub(crate) unsafe fn plausible(&self, bin: Bin, ptr: NonNull<u8>) -> bool {
        let addr = ptr.addr().get();
        let offset = addr.wrapping_sub((addr & !(RUN - 1)) + FIRST);
        offset < RUN - FIRST
            && self.stride[bin.index()].divides(offset)
            // SAFETY: the caller's contract.
            && unsafe { ptr.cast::<usize>().add(1).read() } != FREED
    }

    /// The caches attached to the allocator.
    #[inline]
    pub(crate) fn registry(&self) -> &Registry {
        &self.registry
    }
}
