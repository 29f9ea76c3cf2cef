//! The one page layer every region shares: a commit cache (with its spare
//! reservations) over the metered source, the region map, and [`RegionPages`], the
//! page source each region's memory space is given.

pub(crate) mod map;

use core::ptr::NonNull;
use core::sync::atomic::AtomicBool;

use bento_align::Alignment;
use bento_pages::lock::RawSpinLock;
use bento_pages::{CommitCache, Metered, PageError, PageSource};

use crate::config::GRANULE;
use crate::layer::map::{RegionId, RegionMap};
use crate::sync::{AtomicU32, AtomicUsize, Ordering};

/// Under `Retention::Eager` the commit cache keeps at most this share of the bytes the
/// regions reserve (as a shift: 1/32) and [`EAGER_MOST`], within the configured
/// capacity; under a decay this is the least it may keep whatever the peak.
const COMMIT_SHARE_SHIFT: u32 = 5;
/// The most `Retention::Eager` keeps beyond the floor.
const EAGER_MOST: usize = 8 << 20;

/// What the regions share. It sits in the allocator's block, at a fixed address for
/// the allocator's life, which is what each [`RegionPages`] points at.
pub(crate) struct Layer<P: PageSource> {
    pub(crate) cache: CommitCache<Metered<P>>,
    /// Guards the map's writes (the map is read without it).
    lock: RawSpinLock,
    pub(crate) map: RegionMap,
    /// Bytes the regions hold reserved (in granules), which sizes the commit cache.
    reserved: AtomicUsize,
    /// The least the commit cache may park.
    floor: usize,
    /// Leaves the map has made.
    pub(crate) leaves: AtomicUsize,
    /// Bit `id` (of 128): region `id` has reserved memory at some time, so `trim`
    /// and a decay step visit only such regions (and take no lock of the others).
    /// 32-bit words, which every target has atomics of.
    touched: [AtomicU32; 4],
}

impl<P: PageSource> Layer<P> {
    /// Writes a layer over `cache` at `this`, its map empty.
    ///
    /// # Safety
    ///
    /// `this` is valid for writes of a `Layer<P>` and aligned.
    pub(crate) unsafe fn init(
        this: *mut Self,
        cache: CommitCache<Metered<P>>,
        map: RegionMap,
        floor: usize,
    ) {
        cache.set_limit(floor);
        // SAFETY: the caller's contract: each field is written once, in place.
        unsafe {
            (&raw mut (*this).cache).write(cache);
            (&raw mut (*this).map).write(map);
            (&raw mut (*this).lock).write(RawSpinLock::new());
            (&raw mut (*this).reserved).write(AtomicUsize::new(0));
            (&raw mut (*this).floor).write(floor);
            (&raw mut (*this).leaves).write(AtomicUsize::new(0));
            (&raw mut (*this).touched).write(core::array::from_fn(|_| AtomicU32::new(0)));
        }
    }

    /// The metered source below the cache (where the map's leaves come from).
    pub(crate) fn source(&self) -> &Metered<P> {
        self.cache.inner()
    }

    /// Sizes the commit cache to `reserved` bytes of regions.
    fn refit(&self, reserved: usize) {
        self.cache.set_limit(
            (reserved >> COMMIT_SHARE_SHIFT)
                .min(EAGER_MOST)
                .max(self.floor),
        );
    }

    /// Records that region `id` reserved memory.
    fn touch(&self, id: RegionId) {
        let (word, bit) = (id.index() / 32, 1u32 << (id.index() % 32));
        if self.touched[word].load(Ordering::Relaxed) & bit == 0 {
            self.touched[word].fetch_or(bit, Ordering::Relaxed);
        }
    }

    /// Whether region `id` has reserved memory at some time.
    pub(crate) fn touched(&self, id: RegionId) -> bool {
        let (word, bit) = (id.index() / 32, 1u32 << (id.index() % 32));
        self.touched[word].load(Ordering::Relaxed) & bit != 0
    }

    /// The map's lock, for the fork guard (`CommonAllocator::lock_all`).
    pub(crate) fn raw_lock(&self) -> &RawSpinLock {
        &self.lock
    }

    /// Runs `f` with the map's lock held.
    fn locked<R>(&self, f: impl FnOnce() -> R) -> R {
        self.lock.lock();
        let r = f();
        // SAFETY: taken just above by this thread.
        unsafe { self.lock.unlock() };
        r
    }
}

/// The page source of one region's memory space: the shared layer, with every
/// reservation rounded to whole granules and recorded in the region map as `id`'s.
pub(crate) struct RegionPages<P: PageSource> {
    // Invariant: points at the allocator's layer, which outlives every region.
    layer: NonNull<Layer<P>>,
    id: RegionId,
    /// Set by a `reserve` whose memory came from the source itself (no spare), on a
    /// source whose new pages read as zero; cleared by `take_fresh`.
    fresh: AtomicBool,
}

// SAFETY: the layer is shared by design: the cache and the metered source are `Sync`
// when `P` is, and the map is written under the layer's lock.
unsafe impl<P: PageSource + Send + Sync> Send for RegionPages<P> {}
// SAFETY: as above.
unsafe impl<P: PageSource + Send + Sync> Sync for RegionPages<P> {}

impl<P: PageSource> RegionPages<P> {
    /// The source of region `id` over `layer`.
    ///
    /// # Safety
    ///
    /// `layer` is initialised and outlives the returned source and every space made
    /// over it.
    pub(crate) unsafe fn new(layer: NonNull<Layer<P>>, id: RegionId) -> Self {
        Self {
            layer,
            id,
            fresh: AtomicBool::new(false),
        }
    }

    /// Whether a reservation since the last call came fresh from a zeroing source.
    pub(crate) fn take_fresh(&self) -> bool {
        self.fresh
            .swap(false, core::sync::atomic::Ordering::Relaxed)
    }

    #[inline]
    fn layer(&self) -> &Layer<P> {
        // SAFETY: the field's invariant.
        unsafe { self.layer.as_ref() }
    }
}

/// The size a reservation of `size` bytes takes: whole granules.
fn rounded(size: usize) -> Option<usize> {
    size.checked_next_multiple_of(GRANULE)
}

// SAFETY: every call goes to the commit cache over the caller's source, which keeps
// the contract; `reserve` asks it for more (whole granules, granule-aligned) and
// `release` gives back exactly what `reserve` took for that base and size, so each
// reservation the space sees lies inside one of the cache's and belongs to no other.
unsafe impl<P: PageSource> PageSource for RegionPages<P> {
    #[inline]
    fn page_size(&self) -> usize {
        self.layer().cache.page_size()
    }

    fn reserve(&self, size: usize, align: Alignment) -> Result<NonNull<u8>, PageError> {
        let layer = self.layer();
        let Some(full) = rounded(size) else {
            return Err(PageError::OutOfAddressSpace { size });
        };
        let align = align.max_with(Alignment::new(GRANULE).expect("a power of two"));
        // Under the lock, so that the count of the source's reserves moves only for
        // this call: a change says the memory came from the source, not a spare.
        let base = layer.locked(|| {
            let before = layer.source().stats().reserves;
            let base = layer.cache.reserve(full, align)?;
            let fresh = layer.source().stats().reserves != before;
            // SAFETY: the layer's lock is held; the leaves come from the layer's source.
            if !unsafe {
                layer
                    .map
                    .set(layer.source(), base, full, self.id, &layer.leaves)
            } {
                // SAFETY: just reserved, nothing committed.
                unsafe { layer.cache.release(base, full) };
                return Err(PageError::OutOfAddressSpace { size });
            }
            if fresh && layer.source().decommitted_reads_zero() {
                self.fresh
                    .store(true, core::sync::atomic::Ordering::Relaxed);
            }
            Ok(base)
        })?;
        let reserved = layer.reserved.fetch_add(full, Ordering::Relaxed) + full;
        layer.refit(reserved);
        layer.touch(self.id);
        Ok(base)
    }

    unsafe fn release(&self, base: NonNull<u8>, size: usize) {
        let layer = self.layer();
        let full = rounded(size).expect("a size reserve took");
        // SAFETY: the leaves of this range exist (made by `reserve`); lock held.
        layer.locked(|| unsafe {
            layer.map.set(
                layer.source(),
                base,
                full,
                crate::layer::map::NOBODY,
                &layer.leaves,
            )
        });
        // SAFETY: the caller's contract, for the reservation `reserve` made of `full`.
        unsafe { layer.cache.release(base, full) };
        let reserved = layer.reserved.fetch_sub(full, Ordering::Relaxed) - full;
        layer.refit(reserved);
    }

    #[inline]
    unsafe fn commit(&self, ptr: NonNull<u8>, size: usize) -> Result<(), PageError> {
        // SAFETY: the caller's contract, inside a reservation of the cache.
        unsafe { self.layer().cache.commit(ptr, size) }
    }

    #[inline]
    unsafe fn decommit(&self, ptr: NonNull<u8>, size: usize) {
        // SAFETY: the caller's contract, inside a reservation of the cache.
        unsafe { self.layer().cache.decommit(ptr, size) }
    }

    fn commit_is_implicit(&self) -> bool {
        self.layer().cache.commit_is_implicit()
    }

    fn decommitted_reads_zero(&self) -> bool {
        self.layer().cache.decommitted_reads_zero()
    }

    fn decommit_may_span(&self) -> bool {
        self.layer().cache.decommit_may_span()
    }
}
