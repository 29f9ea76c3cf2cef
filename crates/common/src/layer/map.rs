//! The region map: which region owns a pointer, in O(1), for frees without a size
//! and for contention routing.
//!
//! Every segment of every region covers whole 64 KiB granules (the shared page layer
//! rounds reservations to them), so one byte per granule names its owner: a two-level
//! table, a top level of leaf pointers inside the allocator's own block and leaves of
//! 64 Ki entries (4 GiB of address space each) made from the page source on demand.
//! Entries are written under the layer's lock when a segment is reserved or released,
//! and read without a lock: a thread that frees a block got its pointer from the
//! allocation, which happened after the entry was written.

// The map's atomics are core's even under loom: its protocol is a publication under
// a lock, and a loom atomic per entry would make a model of 64 Ki entries.
use core::ptr::NonNull;
use core::sync::atomic::{AtomicPtr, AtomicU8, Ordering};

use bento_align::Alignment;
use bento_pages::PageSource;

use crate::config::GRANULE;
use crate::sync::{AtomicUsize, Ordering as LeafOrdering};

/// `log2(GRANULE)`.
const GRANULE_SHIFT: u32 = GRANULE.trailing_zeros();
/// Entries per leaf, as a shift.
const LEAF_SHIFT: u32 = 16;
/// Bytes of a leaf: one per entry.
pub(crate) const LEAF_BYTES: usize = 1 << LEAF_SHIFT;
/// The address bits the map covers: user space of the 64-bit targets bento runs on
/// (x86-64 and AArch64 with 48-bit virtual addresses), or the whole of a narrower one.
const ADDR_BITS: u32 = if usize::BITS >= 64 { 48 } else { usize::BITS };
/// Top-level entries.
pub(crate) const TOP: usize = 1 << (ADDR_BITS - GRANULE_SHIFT - LEAF_SHIFT);

/// A region's name in the region map: its index in the stats plus one (0 is
/// [`NOBODY`]). The stats list the small classes, the general regions, then the
/// medium bins.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[repr(transparent)]
pub(crate) struct RegionId(u8);

/// The owner of a granule no region holds.
pub(crate) const NOBODY: RegionId = RegionId(0);

impl RegionId {
    /// The id of the region at stats index `slot` (at most 65 regions: far below
    /// the 255 an id holds).
    pub(crate) fn of_slot(slot: usize) -> Self {
        Self(u8::try_from(slot + 1).expect("at most 255 regions"))
    }

    /// The region's stats index; `None` for `NOBODY`.
    #[inline]
    pub(crate) fn slot(self) -> Option<usize> {
        usize::from(self.0).checked_sub(1)
    }

    /// The id as the map stores it.
    pub(crate) fn get(self) -> u8 {
        self.0
    }

    /// The id as an index (for the layer's bit set and the front end's table).
    #[inline(always)]
    pub(crate) fn index(self) -> usize {
        usize::from(self.0)
    }
}

/// The two-level table. Its top level is `TOP` pointers in the allocator's block,
/// after `Inner` (reached through a pointer, so that a reference to `Inner` does not
/// span half a megabyte of atomics); the block is zeroed, so every entry starts null.
pub(crate) struct RegionMap {
    // Invariant: points at `TOP` initialised `AtomicPtr`s, valid for the map's life;
    // each non-null entry is a leaf of `LEAF_BYTES` bytes, reserved and committed from
    // the layer's source, readable and writable until the map is torn down; entries
    // only go from null to a leaf, under the layer's lock.
    top: NonNull<AtomicPtr<u8>>,
    // The top-level indices of the first `MADE` leaves, in order (written under the
    // layer's lock, with the leaf count), so that tearing down visits only them.
    made: [core::sync::atomic::AtomicUsize; MADE],
}

/// Leaves whose index the map keeps; with more, tearing down scans the top level.
const MADE: usize = 64;

// SAFETY: the entries are atomics, written under the layer's lock.
unsafe impl Send for RegionMap {}
// SAFETY: as above.
unsafe impl Sync for RegionMap {}

impl RegionMap {
    /// A map whose top level is the `TOP` zeroed pointers at `top`.
    ///
    /// # Safety
    ///
    /// `top` is valid for reads and writes of `TOP` pointers, aligned, zeroed, and
    /// reached only through this map for its life.
    pub(crate) unsafe fn new(top: NonNull<AtomicPtr<u8>>) -> Self {
        Self {
            top,
            made: [const { core::sync::atomic::AtomicUsize::new(0) }; MADE],
        }
    }

    /// The top-level entry `i`, if the map covers it.
    #[inline]
    fn slot(&self, i: usize) -> Option<&AtomicPtr<u8>> {
        // SAFETY: `i < TOP`, inside the top level (the field's invariant).
        (i < TOP).then(|| unsafe { self.top.add(i).as_ref() })
    }

    /// Whether `a` and `b` lie in one granule (and so have one owner).
    #[inline]
    pub(crate) fn same_granule(&self, a: usize, b: usize) -> bool {
        (a ^ b) >> GRANULE_SHIFT == 0
    }

    /// The owner of the granule holding `addr`: a region id, or [`NOBODY`].
    #[inline]
    pub(crate) fn owner(&self, addr: usize) -> RegionId {
        let granule = addr >> GRANULE_SHIFT;
        let Some(slot) = self.slot(granule >> LEAF_SHIFT) else {
            return NOBODY;
        };
        let leaf = slot.load(Ordering::Acquire);
        if leaf.is_null() {
            return NOBODY;
        }
        // SAFETY: a non-null entry is a live leaf of `LEAF_BYTES` bytes (the field's
        // invariant); the index is below `LEAF_BYTES`. A leaf's bytes are only
        // written through atomic stores (`set`).
        RegionId(unsafe { leaf_entry(leaf, granule) }.load(Ordering::Relaxed))
    }

    /// Records `owner` for every granule of `[base, base + len)` (granule-aligned),
    /// making leaves from `pages` as needed (counted in `leaves`).
    ///
    /// # Safety
    ///
    /// The caller holds the layer's lock, and `pages` is the source the map's leaves
    /// come from (the one [`tear_down`](Self::tear_down) is given).
    pub(crate) unsafe fn set<P: PageSource>(
        &self,
        pages: &P,
        base: NonNull<u8>,
        len: usize,
        owner: RegionId,
        leaves: &AtomicUsize,
    ) -> bool {
        let first = base.addr().get() >> GRANULE_SHIFT;
        let last = (base.addr().get() + len - 1) >> GRANULE_SHIFT;
        if last >> LEAF_SHIFT >= TOP {
            return false;
        }
        // Make every leaf first, so that a failure changes no entry.
        for top in first >> LEAF_SHIFT..=last >> LEAF_SHIFT {
            let slot = self.slot(top).expect("checked against TOP above");
            if slot.load(Ordering::Relaxed).is_null() {
                let Some(leaf) = new_leaf(pages) else {
                    return false;
                };
                slot.store(leaf.as_ptr(), Ordering::Release);
                let n = leaves.fetch_add(1, LeafOrdering::Relaxed);
                if let Some(made) = self.made.get(n) {
                    made.store(top, Ordering::Relaxed);
                }
            }
        }
        // Leaf by leaf: one load of the top level per leaf, then its entries.
        let mut granule = first;
        while granule <= last {
            let top = granule >> LEAF_SHIFT;
            let leaf = self
                .slot(top)
                .expect("checked against TOP above")
                .load(Ordering::Relaxed);
            let end = last.min(((top + 1) << LEAF_SHIFT) - 1);
            let start = granule & (LEAF_BYTES - 1);
            // SAFETY: the leaf was made above (or before) under the lock the caller
            // holds, `LEAF_BYTES` bytes; `[start, start + end - granule]` is inside it
            // (`end` is in the same leaf as `granule`). `AtomicU8` has the size and
            // alignment of `u8`, and every access to a leaf's bytes is atomic.
            let entries = unsafe {
                core::slice::from_raw_parts(
                    leaf.add(start).cast::<AtomicU8>().cast_const(),
                    end - granule + 1,
                )
            };
            for entry in entries {
                entry.store(owner.0, Ordering::Relaxed);
            }
            granule = end + 1;
        }
        true
    }

    /// Gives every leaf back to `pages`.
    ///
    /// # Safety
    ///
    /// `pages` is the source the leaves came from, and nothing reads the map
    /// afterwards.
    pub(crate) unsafe fn tear_down<P: PageSource>(&mut self, pages: &P, leaves: usize) {
        let size = leaf_reservation(pages);
        let listed = self
            .made
            .iter()
            .take(leaves)
            .map(|m| m.load(Ordering::Relaxed));
        let indices: &mut dyn Iterator<Item = usize> = if leaves <= MADE {
            &mut { listed }
        } else {
            &mut (0..TOP)
        };
        for i in indices {
            let slot = self.slot(i).expect("below TOP");
            let leaf = slot.swap(core::ptr::null_mut(), Ordering::Relaxed);
            if let Some(leaf) = NonNull::new(leaf) {
                // SAFETY: a leaf is a whole reservation of `size` bytes from `pages`,
                // committed in `new_leaf`, no longer read.
                unsafe {
                    pages.decommit(leaf, size);
                    pages.release(leaf, size);
                }
            }
        }
    }
}

/// The bytes a leaf takes from `pages`: `LEAF_BYTES` in whole pages.
pub(crate) fn leaf_reservation<P: PageSource>(pages: &P) -> usize {
    LEAF_BYTES.next_multiple_of(pages.page_size())
}

/// A zeroed leaf from `pages`, or `None` when it refuses.
fn new_leaf<P: PageSource>(pages: &P) -> Option<NonNull<u8>> {
    let size = leaf_reservation(pages);
    let leaf = pages.reserve(size, Alignment::MIN).ok()?;
    // SAFETY: the whole of a fresh reservation.
    if unsafe { pages.commit(leaf, size) }.is_err() {
        // SAFETY: nothing of it is committed or used.
        unsafe { pages.release(leaf, size) };
        return None;
    }
    if !pages.decommitted_reads_zero() {
        // SAFETY: committed above, `size` bytes, ours alone.
        unsafe { leaf.write_bytes(0, size) };
    }
    Some(leaf)
}

/// The entry of `granule` in `leaf`.
///
/// # Safety
///
/// `leaf` is a live leaf (`LEAF_BYTES` readable and writable bytes, only accessed
/// atomically), and the returned reference is not used after it is torn down.
#[inline]
unsafe fn leaf_entry<'a>(leaf: *mut u8, granule: usize) -> &'a AtomicU8 {
    // SAFETY: the index is below `LEAF_BYTES`, inside the leaf; `AtomicU8` has the
    // size and alignment of `u8` and the caller ensures every access is atomic.
    unsafe { AtomicU8::from_ptr(leaf.add(granule & (LEAF_BYTES - 1))) }
}
