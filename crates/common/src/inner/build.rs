//! Building the allocator's block ([`build`]) and tearing it down ([`tear_down`]).

use core::ptr::NonNull;

use bento_align::Alignment;
use bento_pages::{CommitCache, Metered, PageSource};
use bento_space::MemorySpace;

use crate::config::{CommonConfig, CommonError, Routing};
use crate::front::Front;
use crate::front::bins::{Bin, MEDIUM_BINS, medium_size};
use crate::front::tls;
use crate::inner::Inner;
use crate::inner::guard_pool::{make_pool, make_profiler};
use crate::layer::map::{RegionId, RegionMap, TOP};
use crate::layer::{Layer, RegionPages};
use crate::region::{Class, ClassRuns, General, Region};
use crate::sync::Ordering;

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
        guard,
        profile,
        ..
    } = config;
    let guard = make_pool(guard)?;
    let profiler = make_profiler(profile)?;
    let (general_count, class_count, smalls) = match routing {
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
    let map_bytes = TOP * size_of::<usize>();
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
    let map = unsafe { RegionMap::new(block.add(map_at).cast()) };
    let mut front = Front::new(
        thread_cache && routing == Routing::BySize && tls::AVAILABLE,
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
        (&raw mut (*this).guard).write(guard);
        (&raw mut (*this).profiler).write(profiler);
        (&raw mut (*this).sampling).write(guard.is_some() || profiler.is_some());
        let (lo, len) = guard.map_or((0, 0), |pool| pool.range());
        (&raw mut (*this).guard_lo).write(lo);
        (&raw mut (*this).guard_len).write(len);
        (&raw mut (*this).block_bytes).write(bytes);
        (&raw mut (*this).table_bytes).write(table_bytes);
        (&raw mut (*this).smalls).write(smalls);
        (&raw mut (*this).general_count).write(0);
        (&raw mut (*this).generals).write(block.add(generals_at).cast());
        (&raw mut (*this).class_count).write(0);
        (&raw mut (*this).class_regions).write(block.add(classes_at).cast());
    }
    // SAFETY: the layer is initialised and lives as long as the block.
    let layer = unsafe { NonNull::new_unchecked(&raw mut (*this).layer) };
    for c in 0..class_count {
        let bin = Bin::new(c);
        let (block_size, slot) = if c < smalls {
            (classes.size(c), c)
        } else {
            (medium_size(c - smalls), c + general_count)
        };
        let id = RegionId::of_slot(slot);
        front.route_id(id, bin);
        // SAFETY: the layer outlives the region (torn down after it).
        let pages = unsafe { RegionPages::new(layer, id) };
        let runs = ClassRuns::new(pages, block_size, small_segment);
        // SAFETY: class region `c` is not made yet; `class_count` follows it.
        unsafe {
            (*this)
                .class_regions
                .add(c)
                .write(Region::new(runs, block_size, id));
            (*this).class_count = c + 1;
        }
    }
    for g in 0..general_count {
        let id = RegionId::of_slot(smalls + g);
        // SAFETY: the layer outlives the region (torn down after it).
        let pages = unsafe { RegionPages::new(layer, id) };
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
            (*this).generals.add(g).write(Region::new(space, 0, id));
            (*this).general_count = g + 1;
        }
    }
    // SAFETY: written last, before the block is shared.
    unsafe { (&raw mut (*this).front).write(front) };
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
        let leaves = (*layer).leaves.load(Ordering::Relaxed);
        (*layer).map.tear_down((*layer).source(), leaves);
        let bytes = (*this).block_bytes;
        let cache = (&raw const (*layer).cache).read();
        cache.inner().decommit(inner.cast(), bytes);
        cache.inner().release(inner.cast(), bytes);
        drop(cache);
    }
}
