//! The allocator's block, [`Inner`]: built once on first use ([`build`]), it routes
//! each request to a region (a small class, a medium bin, or the large region) and
//! frees, resizes and probes through the region map. The per-thread front end's
//! fast paths are in `front.rs`.

use core::alloc::Layout;
use core::ptr::NonNull;

use bento_align::Alignment;
use bento_pages::{AllocError, CommitCache, Metered, Misuse, MisuseHook, PageSource};
use bento_space::MemorySpace;

use crate::bins::{MEDIUM_BINS, is_medium, medium_bin};
use crate::config::{CommonConfig, CommonError, MAX_CLASSES, Routing, SMALL_ALIGN, SizeClasses};
use crate::layer::{Layer, RegionPages};
use crate::map::NOBODY;
use crate::region::{Class, ClassRuns, General, Region};

/// The most regions an allocator has: 32 small classes, the large region and the 32
/// medium bins.
pub(crate) const MAX_REGIONS: usize = MAX_CLASSES + 1 + MEDIUM_BINS;

/// The allocator's block: what exists once it has started.
///
/// Its regions, in the order of the figures (region id = index + 1): under
/// `Routing::BySize` the small classes, the large region, then the 32 medium bins;
/// under `Routing::Contention` the general regions alone.
pub(crate) struct Inner<P: PageSource> {
    pub(crate) layer: Layer<P>,
    classes: SizeClasses,
    routing: Routing,
    pub(crate) misuse: MisuseHook,
    /// The per-thread front end's bins and registry.
    pub(crate) fronts: crate::fronts::Fronts,
    /// Requests of at least this size get a dedicated segment in a general region.
    dedicated: usize,
    /// Whether a free without a layout is probed (`probe_class`, `probe_general`):
    /// in release builds (debug builds check anyway), over a source whose reserved
    /// memory reads.
    probe_frees: bool,
    /// The block's own size.
    pub(crate) block_bytes: usize,
    /// What the commit cache's slot table took from the source.
    pub(crate) table_bytes: usize,
    /// The figures index of the first general region: the number of small classes.
    first_general: usize,
    // Invariant: `generals` points at `general_count` initialised general regions in
    // the block and `class_regions` at `class_count` class regions (the small
    // classes in order, then the medium bins), after `Inner` so that a reference to
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

/// Builds the block for `config`.
pub(crate) fn build<P: PageSource>(
    config: CommonConfig<P>,
) -> Result<NonNull<Inner<P>>, CommonError> {
    config.check_shape()?;
    let large = config.large_space();
    let (small_segment, thread_cache) = (config.small_segment, config.thread_cache);
    let CommonConfig {
        pages,
        classes,
        routing,
        commit_cache,
        retention,
        commit_floor,
        misuse,
        ..
    } = config;
    let (general_count, class_count, first_general) = match routing {
        Routing::BySize => (1, classes.len() + MEDIUM_BINS, classes.len()),
        Routing::Contention { regions } => (regions, 0, 0),
    };
    let cache = CommitCache::with_capacity(Metered::new(pages), commit_cache)?;
    cache.set_retention(retention);
    let source = cache.inner();
    let table_bytes = source.stats().committed;
    // The block: `Inner`, the general regions, the class regions, then the region
    // map's top level.
    let generals_at = size_of::<Inner<P>>().next_multiple_of(align_of::<General<P>>());
    let classes_at = (generals_at + general_count * size_of::<General<P>>())
        .next_multiple_of(align_of::<Class<P>>());
    let map_at =
        (classes_at + class_count * size_of::<Class<P>>()).next_multiple_of(align_of::<usize>());
    let map_bytes = crate::map::TOP * size_of::<usize>();
    let bytes = (map_at + map_bytes).next_multiple_of(source.page_size());
    let block = source.reserve(bytes, Alignment::of::<Inner<P>>())?;
    // SAFETY: the whole of a fresh reservation.
    if let Err(e) = unsafe { source.commit(block, bytes) } {
        // SAFETY: nothing of it is committed.
        unsafe { source.release(block, bytes) };
        return Err(e.into());
    }
    if !source.decommitted_reads_zero() {
        // SAFETY: committed above, ours alone.
        unsafe { block.write_bytes(0, bytes) };
    }
    let probe_frees = !cfg!(debug_assertions) && source.commit_is_implicit();
    let this = block.cast::<Inner<P>>().as_ptr();
    // SAFETY: the top level lies in the block after the regions, aligned for
    // pointers, zeroed, and reached only through the map.
    let map = unsafe { crate::map::RegionMap::new(block.add(map_at).cast()) };
    let mut fronts = crate::fronts::Fronts::new(
        thread_cache && routing == Routing::BySize && crate::tls::AVAILABLE,
        &classes,
    );
    // SAFETY: `this` is aligned and valid for writes of an `Inner` (the block is at
    // least that large). Each field is written once before the block is read.
    unsafe {
        Layer::init(
            &raw mut (*this).layer,
            cache,
            map,
            (4 * small_segment).max(commit_floor),
        );
        (&raw mut (*this).classes).write(classes);
        (&raw mut (*this).routing).write(routing);
        (&raw mut (*this).misuse).write(misuse);
        (&raw mut (*this).dedicated).write(large.segment_threshold);
        (&raw mut (*this).probe_frees).write(probe_frees);
        (&raw mut (*this).block_bytes).write(bytes);
        (&raw mut (*this).table_bytes).write(table_bytes);
        (&raw mut (*this).first_general).write(first_general);
        (&raw mut (*this).general_count).write(0);
        (&raw mut (*this).generals).write(block.add(generals_at).cast());
        (&raw mut (*this).class_count).write(0);
        (&raw mut (*this).class_regions).write(block.add(classes_at).cast());
    }
    // SAFETY: the layer is initialised and lives as long as the block.
    let layer = unsafe { NonNull::new_unchecked(&raw mut (*this).layer) };
    let id = |slot: usize| u8::try_from(slot + 1).expect("at most 65 regions");
    for c in 0..class_count {
        let (block_size, bin) = if c < first_general {
            (classes.size(c), c)
        } else {
            let m = c - first_general;
            (crate::bins::medium_size(m), MAX_CLASSES + m)
        };
        let slot = if c < first_general {
            c
        } else {
            c + general_count
        };
        fronts.route_id(id(slot), bin);
        // SAFETY: the layer outlives the region (torn down after it).
        let pages = unsafe { RegionPages::new(layer, id(slot)) };
        let runs = ClassRuns::new(pages, block_size, small_segment);
        // SAFETY: class region `c` is not made yet; `class_count` follows it.
        unsafe {
            (*this)
                .class_regions
                .add(c)
                .write(Region::new(runs, block_size, id(slot)));
            (*this).class_count = c + 1;
        }
    }
    for g in 0..general_count {
        let slot = first_general + g;
        // SAFETY: the layer outlives the region (torn down after it).
        let pages = unsafe { RegionPages::new(layer, id(slot)) };
        let mut space = match MemorySpace::new(pages, large) {
            Ok(space) => space,
            Err(e) => {
                // SAFETY: the block is whole, with the regions made so far.
                unsafe { tear_down(NonNull::new_unchecked(this)) };
                return Err(e.into());
            }
        };
        space.set_misuse_hook(misuse);
        // SAFETY: general region `g` is not made yet; `general_count` follows it.
        unsafe {
            (*this)
                .generals
                .add(g)
                .write(Region::new(space, 0, id(slot)));
            (*this).general_count = g + 1;
        }
    }
    // SAFETY: written last, before the block is shared.
    unsafe { (&raw mut (*this).fronts).write(fronts) };
    // SAFETY: `this` is the block, non-null.
    Ok(unsafe { NonNull::new_unchecked(this) })
}

/// Drops the regions, gives the map's leaves and the block back, and drops the page
/// layer (which gives its parked pages and spares back, then the source goes).
///
/// # Safety
///
/// `inner` is a block `build` made (whole, or with the regions its counts say),
/// used by nothing else from now on.
pub(crate) unsafe fn tear_down<P: PageSource>(inner: NonNull<Inner<P>>) {
    let this = inner.as_ptr();
    // SAFETY: the caller's contract: the block and its counted regions are live and
    // ours alone. The regions go first (they release their runs and segments
    // through the layer), then the map, then the layer is moved out of the block
    // before the block goes back.
    unsafe {
        for c in 0..(*this).class_count {
            (*this).class_regions.add(c).drop_in_place();
        }
        for g in 0..(*this).general_count {
            (*this).generals.add(g).drop_in_place();
        }
        let layer = &raw mut (*this).layer;
        let leaves = (*layer).leaves.load(crate::sync::Ordering::Relaxed);
        (*layer).map.tear_down((*layer).source(), leaves);
        let bytes = (*this).block_bytes;
        let cache = (&raw const (*layer).cache).read();
        cache.inner().decommit(inner.cast(), bytes);
        cache.inner().release(inner.cast(), bytes);
        drop(cache);
    }
}

/// A region the region map names.
pub(crate) enum Owner<'a, P: PageSource> {
    /// Class region `c` (its index among the class regions).
    Class(usize, &'a Class<P>),
    /// A general region.
    General(&'a General<P>),
}

impl<P: PageSource> Inner<P> {
    /// Class region `c`: the small classes in order, then the medium bins.
    #[inline]
    pub(crate) fn class(&self, c: usize) -> &Class<P> {
        debug_assert!(c < self.class_count);
        // SAFETY: the first `class_count` class regions are initialised (the field's
        // invariant), and every index the routing produces is below it.
        unsafe { self.class_regions.add(c).as_ref() }
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

    /// Every region in the order of the figures (and of the ids, less one): the
    /// small classes, the general regions, then the medium bins.
    pub(crate) fn slots(&self) -> impl Iterator<Item = Owner<'_, P>> {
        (0..self.class_count + self.general_count).map(|slot| self.slot(slot))
    }

    /// The region of figures index `slot`.
    fn slot(&self, slot: usize) -> Owner<'_, P> {
        let first = self.first_general;
        if slot < first {
            Owner::Class(slot, self.class(slot))
        } else if slot < first + self.general_count {
            Owner::General(self.general(slot - first))
        } else {
            let c = slot - self.general_count;
            Owner::Class(c, self.class(c))
        }
    }

    /// The class regions.
    pub(crate) fn class_regions(&self) -> impl Iterator<Item = &Class<P>> {
        (0..self.class_count).map(|c| self.class(c))
    }

    /// The general regions.
    pub(crate) fn generals(&self) -> impl Iterator<Item = &General<P>> {
        (0..self.general_count).map(|g| self.general(g))
    }

    /// The region the region map gives `ptr` to.
    #[inline]
    pub(crate) fn owner(&self, ptr: NonNull<u8>) -> Option<Owner<'_, P>> {
        let id = self.layer.map.owner(ptr.addr().get()) as usize;
        (id != NOBODY as usize && id <= self.class_count + self.general_count)
            .then(|| self.slot(id - 1))
    }

    /// The front end's bin of class region `c`.
    #[inline]
    pub(crate) fn bin_of_class(&self, c: usize) -> usize {
        if c < self.first_general {
            c
        } else {
            MAX_CLASSES + (c - self.first_general)
        }
    }

    /// The class region of the front end's bin `bin`.
    #[inline]
    pub(crate) fn class_of_bin(&self, bin: usize) -> usize {
        if bin < MAX_CLASSES {
            bin
        } else {
            self.first_general + (bin - MAX_CLASSES)
        }
    }

    /// The class region serving a request of `size` bytes (routed, under `BySize`,
    /// aligned to at most `SMALL_ALIGN`): its small class, else its medium bin.
    #[inline]
    fn class_for(&self, size: usize) -> Option<usize> {
        if self.class_count == 0 {
            None
        } else if let Some(class) = self.classes.class_of(size) {
            Some(class)
        } else if is_medium(size) {
            Some(self.first_general + medium_bin(size))
        } else {
            None
        }
    }

    /// The class region `layout` goes to under `BySize`, or `None` for the large
    /// region.
    #[inline]
    fn route(&self, layout: Layout) -> Option<usize> {
        if layout.align() <= SMALL_ALIGN {
            self.class_for(routed_size(layout))
        } else {
            None
        }
    }

    #[inline]
    pub(crate) fn alloc(&self, layout: Layout) -> Result<NonNull<u8>, AllocError> {
        match self.routing {
            Routing::BySize => match self.route(layout) {
                Some(c) => {
                    if self.fronts.enabled
                        && let Some(result) = self.cached_alloc(self.bin_of_class(c))
                    {
                        return result;
                    }
                    self.class(c).lock().take().ok_or(AllocError)
                }
                None => self.large().lock().alloc(layout),
            },
            Routing::Contention { .. } => self.alloc_contended(layout, false).map(|(p, _)| p),
        }
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

    /// # Safety
    ///
    /// As for [`CommonAllocator::dealloc`], with a non-zero size.
    #[inline]
    pub(crate) unsafe fn dealloc(&self, ptr: NonNull<u8>, layout: Layout) {
        let Routing::BySize = self.routing else {
            let Some(Owner::General(region)) = self.owner(ptr) else {
                return report_foreign(self.misuse, ptr);
            };
            // SAFETY: the caller's contract; the map gives the block to `region`.
            return unsafe { region.lock().dealloc(ptr, layout) };
        };
        let Some(c) = self.route(layout) else {
            let large = self.large();
            if cfg!(debug_assertions) && !self.check_owner(ptr, layout, large.id) {
                return;
            }
            // SAFETY: the caller's contract.
            return unsafe { large.lock().dealloc(ptr, layout) };
        };
        let class = self.class(c);
        if cfg!(debug_assertions) && !self.check_owner(ptr, layout, class.id) {
            return;
        }
        // SAFETY: the caller's contract; the size routes it to this class.
        if self.fronts.enabled && unsafe { self.cached_free(self.bin_of_class(c), ptr) } {
            return;
        }
        // SAFETY: as above.
        unsafe { self.free_in_class(class, ptr) }
    }

    /// Frees `ptr` into class region `class` under its lock, probed first in debug
    /// builds and (with `probe_frees`) in release builds; a misuse found is reported
    /// and nothing is freed.
    ///
    /// # Safety
    ///
    /// `ptr` is a live block of `class`, not used afterwards.
    unsafe fn free_in_class(&self, class: &Class<P>, ptr: NonNull<u8>) {
        let mut held = class.lock();
        if (cfg!(debug_assertions) || self.probe_frees)
            && let Err(misuse) = self.probe_class(&held, class, ptr)
        {
            drop(held);
            return report(self.misuse, &misuse);
        }
        // SAFETY: the caller's contract (probed where the build does).
        unsafe { held.give(ptr) }
    }

    /// Whether the region map gives `ptr` to the region of id `id` (debug builds);
    /// reports the misuse otherwise.
    #[cold]
    pub(crate) fn check_owner(&self, ptr: NonNull<u8>, layout: Layout, id: u8) -> bool {
        let owner = self.layer.map.owner(ptr.addr().get());
        if owner == id {
            return true;
        }
        match self.owner(ptr) {
            Some(owner) => {
                let block_size = match owner {
                    Owner::Class(_, class) => class.block,
                    Owner::General(_) => 0,
                };
                (self.misuse)(&Misuse::WrongLayout {
                    ptr,
                    layout,
                    block_size,
                    block_align: SMALL_ALIGN,
                });
            }
            None => report_foreign(self.misuse, ptr),
        }
        false
    }

    /// # Safety
    ///
    /// As for [`CommonAllocator::free`].
    pub(crate) unsafe fn free(&self, ptr: NonNull<u8>) {
        match self.owner(ptr) {
            None => report_foreign(self.misuse, ptr),
            Some(Owner::Class(c, class)) => {
                let bin = self.bin_of_class(c);
                if self.fronts.enabled {
                    let check = self.probe_frees || cfg!(debug_assertions);
                    // SAFETY: the map gives `ptr` to this class region; a block of
                    // it holds at least 16 bytes, readable (`probe_frees`) or ours.
                    if !check || unsafe { self.fronts.plausible(bin, ptr) } {
                        // SAFETY: the caller's contract (checked as the hot path
                        // does); the block goes to its class region's bin marked.
                        unsafe {
                            ptr.cast::<usize>().add(1).write(crate::run::FREED);
                            if self.cached_free(bin, ptr) {
                                return;
                            }
                        }
                    } else if self.held_here(bin, ptr) {
                        return report(self.misuse, &Misuse::DoubleFree { ptr });
                    }
                }
                // SAFETY: as above; probed under the lock.
                unsafe { self.free_in_class(class, ptr) }
            }
            Some(Owner::General(region)) => {
                let held = region.lock();
                if self.probe_frees
                    && let Err(misuse) = self.probe_general(&held, region, ptr)
                {
                    drop(held);
                    return report(self.misuse, &misuse);
                }
                // SAFETY: as above (the space checks in debug builds).
                unsafe { held.free(ptr) }
            }
        }
    }

    /// The checks of `ptr`, freed (or sized) without a layout in class region
    /// `class`, whose lock `held` is: the map still gives `ptr` to it (a free racing
    /// this one may have released its span meanwhile), then its runs' probe.
    fn probe_class(
        &self,
        held: &ClassRuns<P>,
        class: &Class<P>,
        ptr: NonNull<u8>,
    ) -> Result<(), Misuse<'static>> {
        if self.layer.map.owner(ptr.addr().get()) != class.id {
            return Err(Misuse::Foreign { ptr });
        }
        // SAFETY: the map gives `ptr`'s granule to this region, whose lock is held.
        unsafe { held.probe(ptr) }
    }

    /// The release build's checks of `ptr`, freed (or sized) without a layout in
    /// general region `region`, whose lock `held` is: the map still gives `ptr` to
    /// it, then the space's O(1) probe, reading only memory the map gives the
    /// region. The caller reports the misuse found once it has let go of the lock (a
    /// hook may allocate).
    #[inline(always)]
    fn probe_general(
        &self,
        held: &MemorySpace<RegionPages<P>>,
        region: &General<P>,
        ptr: NonNull<u8>,
    ) -> Result<(), Misuse<'static>> {
        let map = &self.layer.map;
        let near = ptr.addr().get();
        // Under the lock no segment of the region comes or goes: an owner read now
        // holds until the probe ends.
        if map.owner(near) != region.id {
            return Err(Misuse::Foreign { ptr });
        }
        // SAFETY: the map gives every address `readable` admits to this region (the
        // granule of `ptr` was checked just above), whose reservations are memory the
        // source reserved (`probe_frees`: reserved memory reads), and reads none
        // outside them.
        unsafe {
            held.probe(ptr, |a| {
                map.same_granule(a, near) || map.owner(a) == region.id
            })
        }
        .map(|_| ())
    }

    /// The bytes a live block can hold; 0 (reported) for a pointer that is not one,
    /// where the build probes.
    ///
    /// # Safety
    ///
    /// As for [`CommonAllocator::usable_size`].
    pub(crate) unsafe fn usable_size(&self, ptr: NonNull<u8>) -> usize {
        match self.owner(ptr) {
            None => {
                report_foreign(self.misuse, ptr);
                0
            }
            Some(Owner::Class(c, class)) => {
                if self.probe_frees || cfg!(debug_assertions) {
                    // SAFETY: a block of a class region holds at least 16 bytes,
                    // readable (`probe_frees`) or the caller's.
                    let marked = unsafe { ptr.cast::<usize>().add(1).read() } == crate::run::FREED;
                    if marked && self.held_here(self.bin_of_class(c), ptr) {
                        report(self.misuse, &Misuse::DoubleFree { ptr });
                        return 0;
                    }
                    let held = class.lock();
                    if let Err(misuse) = self.probe_class(&held, class, ptr) {
                        drop(held);
                        report(self.misuse, &misuse);
                        return 0;
                    }
                }
                class.block
            }
            Some(Owner::General(region)) => {
                let held = region.lock();
                if self.probe_frees
                    && let Err(misuse) = self.probe_general(&held, region, ptr)
                {
                    drop(held);
                    report(self.misuse, &misuse);
                    return 0;
                }
                // SAFETY: the caller's contract (probed in release builds, checked by
                // the space in debug builds); the region owns `ptr`.
                unsafe { held.usable_size(ptr) }
            }
        }
    }

    /// # Safety
    ///
    /// As for [`CommonAllocator::resize`].
    pub(crate) unsafe fn resize(
        &self,
        ptr: NonNull<u8>,
        old: Layout,
        new: Layout,
    ) -> Result<NonNull<u8>, AllocError> {
        // SAFETY: the caller's contract.
        if unsafe { self.resize_in_place(ptr, old, new) } {
            return Ok(ptr);
        }
        let fresh = self.alloc(new)?;
        // SAFETY: `ptr` holds `old.size()` bytes and `fresh` `new.size()`; a fresh
        // block overlaps no live one. Then the old block goes (the caller's contract).
        unsafe {
            core::ptr::copy_nonoverlapping(
                ptr.as_ptr(),
                fresh.as_ptr(),
                old.size().min(new.size()),
            );
            self.dealloc(ptr, old);
        }
        Ok(fresh)
    }

    /// # Safety
    ///
    /// As for [`CommonAllocator::realloc`].
    pub(crate) unsafe fn realloc_unsized(
        &self,
        ptr: NonNull<u8>,
        new: Layout,
    ) -> Result<NonNull<u8>, AllocError> {
        // SAFETY: the caller's contract; 0 is a misuse, reported.
        let usable = unsafe { self.usable_size(ptr) };
        if usable == 0 {
            return Err(AllocError);
        }
        let in_place = match self.owner(ptr) {
            Some(Owner::Class(c, _)) => {
                self.routing == Routing::BySize && self.route(new) == Some(c)
            }
            Some(Owner::General(region)) => {
                (self.routing != Routing::BySize || self.route(new).is_none())
                    && ptr.addr().get().is_multiple_of(new.align())
                    // SAFETY: live in this region (checked above).
                    && unsafe { region.lock().realloc_in_place(ptr, new.size()) }
            }
            None => false,
        };
        if in_place {
            return Ok(ptr);
        }
        let fresh = self.alloc(new)?;
        // SAFETY: `ptr` holds `usable` bytes and `fresh` `new.size()`; a fresh block
        // overlaps no live one. Then the old block goes (the caller's contract).
        unsafe {
            core::ptr::copy_nonoverlapping(ptr.as_ptr(), fresh.as_ptr(), usable.min(new.size()));
            if !self.fast_free_unsized(ptr) {
                self.free(ptr);
            }
        }
        Ok(fresh)
    }

    /// Resizes where the block is, when it stays in its region: the same class, or
    /// a general region's in-place resize. False changes nothing.
    ///
    /// # Safety
    ///
    /// As for [`CommonAllocator::resize`].
    pub(crate) unsafe fn resize_in_place(
        &self,
        ptr: NonNull<u8>,
        old: Layout,
        new: Layout,
    ) -> bool {
        let region = match self.routing {
            Routing::BySize => match (self.route(old), self.route(new)) {
                // The same class: the block already holds `new`, aligned to it.
                (Some(a), Some(b)) => return a == b,
                (None, None) => self.large(),
                _ => return false,
            },
            Routing::Contention { .. } => match self.owner(ptr) {
                Some(Owner::General(region)) => region,
                _ => return false,
            },
        };
        ptr.addr().get().is_multiple_of(new.align())
            // SAFETY: the caller's contract: live in this region.
            && unsafe { region.lock().realloc_in_place(ptr, new.size()) }
    }

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
            for general in self.generals() {
                general.raw_lock().unlock();
            }
            for class in self.class_regions() {
                class.raw_lock().unlock();
            }
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
