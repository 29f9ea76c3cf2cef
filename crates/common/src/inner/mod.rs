//! The allocator's block, [`Inner`]: built once on first use (`build.rs`), it routes
//! each request to a region (a small class, a medium bin, or the large region).
//! A file per operation, each with its fast half (the thread's cache) and its slow
//! half (a region under its lock): `alloc.rs`, `free.rs`, `resize.rs`, `probe.rs`
//! (sizes and the checks of a free without a layout); `thread.rs` attaches a
//! thread's cache and detaches it, `upkeep.rs` decays, trims and locks for a fork.

mod alloc;
pub(crate) mod build;
mod free;
mod guard;
pub(crate) mod guard_pool;
mod probe;
mod resize;
mod thread;
mod upkeep;

use core::alloc::Layout;
use core::ptr::NonNull;

use bento_pages::{Misuse, MisuseHook, PageSource};

use crate::config::{MAX_CLASSES, Routing, SMALL_ALIGN, SizeClasses};
use crate::front::Front;
use crate::front::bins::{Bin, MEDIUM_BINS, is_medium};
use crate::layer::Layer;
use crate::layer::map::RegionId;
use crate::region::{Class, General};

/// The most regions an allocator has: 32 small classes, the large region and the 32
/// medium bins.
pub(crate) const MAX_REGIONS: usize = MAX_CLASSES + 1 + MEDIUM_BINS;

/// The allocator's block: what exists once it has started.
///
/// Its regions, in the order of the stats (region id = index + 1): under
/// `Routing::BySize` the small classes, the large region, then the 32 medium bins;
/// under `Routing::Contention` the general regions alone.
pub(crate) struct Inner<P: PageSource> {
    pub(crate) layer: Layer<P>,
    classes: SizeClasses,
    routing: Routing,
    pub(crate) misuse: MisuseHook,
    /// The per-thread front end's bins and registry.
    pub(crate) front: Front,
    /// Requests of at least this size get a dedicated segment in a general region.
    dedicated: usize,
    /// Whether a free without a layout is probed (`probe_class`, `probe_general`):
    /// in release builds (debug builds check anyway), over a source whose reserved
    /// memory reads.
    probe_frees: bool,
    /// The guard pool, if the allocator samples guarded blocks, and its range
    /// (`GuardPool::range`; empty without a pool).
    pub(crate) guard: Option<&'static guard_pool::Pool>,
    /// The sampled allocation profile, if on.
    pub(crate) profiler: Option<&'static guard_pool::Prof>,
    /// Whether either is on: without, the hot paths count nothing and check no range.
    pub(crate) sampling: bool,
    guard_lo: usize,
    guard_len: usize,
    /// The block's own size.
    pub(crate) block_bytes: usize,
    /// What the commit cache's slot table took from the source.
    pub(crate) table_bytes: usize,
    /// The number of small classes: the bin (and stats index) of the first medium
    /// bin, and the stats index of the first general region.
    smalls: usize,
    // Invariant: `generals` points at `general_count` initialised general regions in
    // the block and `class_regions` at `class_count` class regions (indexed by
    // `Bin`: the small classes in order, then the medium bins), after `Inner` so that a reference to
    // `Inner` stays small.
    pub(crate) general_count: usize,
    generals: NonNull<General<P>>,
    pub(crate) class_count: usize,
    class_regions: NonNull<Class<P>>,
}

/// Reports `misuse` through `hook`, off the hot path.
#[cold]
#[inline(never)]
pub(crate) fn report(hook: MisuseHook, misuse: &Misuse<'_>) {
    hook(misuse);
}

/// Reports `ptr` as owned by no region.
#[cold]
pub(crate) fn report_foreign(hook: MisuseHook, ptr: NonNull<u8>) {
    hook(&Misuse::Foreign { ptr });
}

/// A region the region map names.
pub(crate) enum Owner<'a, P: PageSource> {
    /// The class region of a bin.
    Class(Bin, &'a Class<P>),
    /// A general region.
    General(&'a General<P>),
}

impl<P: PageSource> Inner<P> {
    /// The class region of `bin`.
    #[inline]
    pub(crate) fn class(&self, bin: Bin) -> &Class<P> {
        debug_assert!(bin.index() < self.class_count);
        // SAFETY: the first `class_count` class regions are initialised (the field's
        // invariant), and every bin the routing produces is below it.
        unsafe { self.class_regions.add(bin.index()).as_ref() }
    }

    /// General region `g`.
    #[inline]
    pub(crate) fn general(&self, g: usize) -> &General<P> {
        debug_assert!(g < self.general_count);
        // SAFETY: as for `class`.
        unsafe { self.generals.add(g).as_ref() }
    }

    /// The large region (under `BySize`).
    #[inline]
    fn large(&self) -> &General<P> {
        self.general(0)
    }

    /// Every region in the order of the stats (and of the ids, less one): the
    /// small classes, the general regions, then the medium bins.
    pub(crate) fn slots(&self) -> impl Iterator<Item = Owner<'_, P>> {
        (0..self.class_count + self.general_count).map(|slot| self.slot(slot))
    }

    /// The region of stats index `slot` (below the region count).
    fn slot(&self, slot: usize) -> Owner<'_, P> {
        if slot < self.smalls {
            let bin = Bin::new(slot);
            Owner::Class(bin, self.class(bin))
        } else if slot < self.smalls + self.general_count {
            Owner::General(self.general(slot - self.smalls))
        } else {
            let bin = Bin::new(slot - self.general_count);
            Owner::Class(bin, self.class(bin))
        }
    }

    /// The class regions, in the order of their bins.
    pub(crate) fn class_regions(&self) -> impl Iterator<Item = &Class<P>> {
        (0..self.class_count).map(|c| self.class(Bin::new(c)))
    }

    /// The general regions.
    pub(crate) fn generals(&self) -> impl Iterator<Item = &General<P>> {
        (0..self.general_count).map(|g| self.general(g))
    }

    /// The region the map names `id`, if any.
    #[inline]
    pub(crate) fn region(&self, id: RegionId) -> Option<Owner<'_, P>> {
        let slot = id.slot()?;
        (slot < self.class_count + self.general_count).then(|| self.slot(slot))
    }

    /// The region the region map gives `ptr` to.
    #[inline]
    pub(crate) fn owner(&self, ptr: NonNull<u8>) -> Option<Owner<'_, P>> {
        self.region(self.layer.map.owner(ptr.addr().get()))
    }

    /// The bin (and class region) serving a request of `size` bytes (routed, under
    /// `BySize`, aligned to at most `SMALL_ALIGN`): its small class, else its
    /// medium bin.
    #[inline]
    fn class_for(&self, size: usize) -> Option<Bin> {
        if self.class_count == 0 {
            None
        } else if let Some(class) = self.classes.class_of(size) {
            Some(Bin::new(class))
        } else if is_medium(size) {
            Some(Bin::medium(self.smalls, size))
        } else {
            None
        }
    }

    /// The bin `layout` goes to under `BySize`, or `None` for the large region.
    #[inline]
    fn route(&self, layout: Layout) -> Option<Bin> {
        if layout.align() <= SMALL_ALIGN {
            self.class_for(routed_size(layout))
        } else {
            None
        }
    }
}

/// The size a request aligned to at most `SMALL_ALIGN` is routed by: its size rounded
/// up to its alignment, so that a request aligned to 16 reaches a class whose blocks
/// are (see `SizeClasses`), never one of 24 bytes whose blocks are aligned to 8.
#[inline(always)]
pub(crate) fn routed_size(layout: Layout) -> usize {
    let mask = layout.align() - 1;
    // A layout's size rounded up to its alignment does not overflow.
    (layout.size() + mask) & !mask
}
