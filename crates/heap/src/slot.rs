//! Which lane of every heap's stats this thread writes.
//!
//! A thread takes one of [`OWNED`] slots from a global bitmap the first time it uses
//! any heap, and gives it back when it exits (a second thread-local's destructor,
//! registered at the claim, which first points the thread at the shared lane: the
//! slot itself is a plain `const` thread-local, one load on the hot path). Slot `i`
//! has one owner at a time, so lane `i` of every heap is written by one thread only,
//! with plain loads and stores of its atomics: no read-modify-write on the hot path.
//! The release of a slot (`Release`) and its next claim (`Acquire`) hand the lanes'
//! last values to the next owner. A thread that finds every slot taken, that runs
//! while its thread-locals are being destroyed, or a build without `std` (no
//! thread-locals), writes the [`SHARED`] lane with `fetch_add`. Under loom, whose
//! statics end with each execution, a thread takes the shared lane unless its model
//! hands it a slot, and the models drive [`take`] and [`give`] directly.

use crate::sync::{AtomicUsize, Ordering};

/// Slots threads can own.
pub(crate) const OWNED: usize = 15;
/// The lane every thread without a slot writes, with read-modify-writes.
pub(crate) const SHARED: usize = OWNED;
/// Lanes per heap (a power of two, so a lane index needs no bounds check).
pub(crate) const LANES: usize = OWNED + 1;
/// The bytes of one lane (a cache line pair): the hot path keeps a thread's slot
/// as its lane's offset in a heap's lanes, `slot * LANE_BYTES`.
pub(crate) const LANE_BYTES: usize = 128;

const _: () = assert!(LANES.is_power_of_two() && OWNED < usize::BITS as usize);

/// Takes the lowest free slot of the bitmap `bits` (`Acquire`: the last owner's
/// writes to its lanes are visible), or [`SHARED`] when every slot is taken.
#[cfg_attr(not(feature = "std"), allow(dead_code))]
pub(crate) fn take(bits: &AtomicUsize) -> usize {
    let mut taken = bits.load(Ordering::Relaxed);
    loop {
        let free = !taken & ((1 << OWNED) - 1);
        if free == 0 {
            return SHARED;
        }
        let i = free.trailing_zeros() as usize;
        match bits.compare_exchange_weak(
            taken,
            taken | 1 << i,
            Ordering::Acquire,
            Ordering::Relaxed,
        ) {
            Ok(_) => return i,
            Err(now) => taken = now,
        }
    }
}

/// Gives slot `i` back to `bits` (`Release`: the owner's writes to its lanes go to
/// the next owner); the shared lane is nobody's.
#[cfg_attr(not(feature = "std"), allow(dead_code))]
pub(crate) fn give(bits: &AtomicUsize, i: usize) {
    if i < OWNED {
        bits.fetch_and(!(1 << i), Ordering::Release);
    }
}

#[cfg(all(feature = "std", not(bento_loom)))]
mod imp {
    use core::cell::Cell;

    use super::{LANE_BYTES, SHARED, give, take};
    use crate::sync::AtomicUsize;

    /// Not claimed yet.
    const NONE: usize = usize::MAX;

    /// The slots taken.
    static SLOTS: AtomicUsize = AtomicUsize::new(0);

    /// Gives this thread's slot (its copy of it) back when the thread exits.
    struct Release(Cell<usize>);

    impl Drop for Release {
        fn drop(&mut self) {
            // Whatever runs after this on the thread writes the shared lane.
            let _ = SLOT.try_with(|s| s.set(SHARED * LANE_BYTES));
            give(&SLOTS, self.0.get());
        }
    }

    std::thread_local! {
        /// This thread's lane's offset (`slot * LANE_BYTES`): `NONE` before it
        /// claimed one.
        static SLOT: Cell<usize> = const { Cell::new(NONE) };
        static RELEASE: Release = const { Release(Cell::new(NONE)) };
    }

    /// This thread's lane's offset as the fast path sees it: a multiple of
    /// `LANE_BYTES`, `SHARED * LANE_BYTES` or more when the thread owns no slot (the
    /// slow path, through [`current`], claims one).
    #[inline]
    pub(crate) fn fast() -> usize {
        SLOT.with(Cell::get)
    }

    /// This thread's lane index.
    #[inline]
    pub(crate) fn current() -> usize {
        match SLOT.with(Cell::get) {
            NONE => claim(),
            offset => offset / LANE_BYTES,
        }
    }

    /// Takes a slot for this thread (the shared lane when none is free, or when the
    /// thread is exiting: its destructors may no longer run).
    #[cold]
    #[inline(never)]
    fn claim() -> usize {
        // The first access to `RELEASE` registers its destructor, unless the thread's
        // destructors are running already.
        let i = match RELEASE.try_with(|r| {
            let i = take(&SLOTS);
            r.0.set(i);
            i
        }) {
            Ok(i) => i,
            Err(_) => SHARED,
        };
        SLOT.with(|s| s.set(i * LANE_BYTES));
        i
    }
}

#[cfg(all(not(feature = "std"), not(bento_loom)))]
mod imp {
    /// Every thread writes the shared lane (see the module's docs).
    #[inline]
    pub(crate) fn current() -> usize {
        super::SHARED
    }

    /// [`current`]'s lane offset.
    #[inline]
    pub(crate) fn fast() -> usize {
        super::SHARED * super::LANE_BYTES
    }
}

/// Under loom a thread writes the shared lane unless its model makes it the owner of
/// a slot with [`own`] (the models give each slot to one thread at most).
#[cfg(bento_loom)]
mod imp {
    use core::cell::Cell;

    use super::{LANE_BYTES, SHARED};

    loom::thread_local! {
        static SLOT: Cell<usize> = Cell::new(SHARED * LANE_BYTES);
    }

    /// This thread's lane index.
    pub(crate) fn current() -> usize {
        SLOT.with(Cell::get) / LANE_BYTES
    }

    /// [`current`]'s lane offset.
    pub(crate) fn fast() -> usize {
        SLOT.with(Cell::get)
    }

    /// Makes this thread the owner of slot `i < OWNED`.
    pub(crate) fn own(i: usize) {
        assert!(i < super::OWNED);
        SLOT.with(|s| s.set(i * LANE_BYTES));
    }
}

#[cfg(bento_loom)]
pub(crate) use imp::own;
pub(crate) use imp::{current, fast};
