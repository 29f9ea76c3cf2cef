//! What a pointer is, asked without its layout: whether this thread's bin holds
//! it, the checks of a free (or size) without a layout under the region's lock
//! ([`Inner::probe_class`], [`Inner::probe_general`]), and the usable size.

use core::ptr::{self, NonNull};

use bento_pages::{Misuse, PageSource};
use bento_space::MemorySpace;

use crate::front::bins::Bin;
use crate::front::tls::with_cache;
use crate::inner::{Inner, Owner, report, report_foreign};
use crate::layer::RegionPages;
use crate::region::run::FREED;
use crate::region::{Class, ClassRuns, General};

impl<P: PageSource> Inner<P> {
    /// Whether `ptr` is in this thread's cache, in `bin` (a cold walk of at most
    /// its capacity), when the cache is this allocator's.
    #[cold]
    pub(crate) fn held_here(&self, bin: Bin, ptr: NonNull<u8>) -> bool {
        let me = ptr::from_ref(self).cast::<()>();
        self.front.enabled() && with_cache(|cache| cache.owned_by(me) && cache.holds(bin, ptr))
    }

    /// The checks of `ptr`, freed (or sized) without a layout in class region
    /// `class`, whose lock `held` is: the map still gives `ptr` to it (a free racing
    /// this one may have released its span meanwhile), then its runs' probe.
    pub(crate) fn probe_class(
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
    pub(crate) fn probe_general(
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
        if self.guarded(ptr) {
            return self.guarded_size(ptr);
        }
        match self.owner(ptr) {
            None => {
                report_foreign(self.misuse, ptr);
                0
            }
            Some(Owner::Class(bin, class)) => {
                if self.probe_frees || cfg!(debug_assertions) {
                    // SAFETY: a block of a class region holds at least 16 bytes,
                    // readable (`probe_frees`) or the caller's.
                    let marked = unsafe { ptr.cast::<usize>().add(1).read() } == FREED;
                    if marked && self.held_here(bin, ptr) {
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
}
