//! The long-session test: a synthetic game session of 100 level cycles (bento-testkit's
//! `session` workload) on a memory space. The footprint must not creep, and once the
//! session is over the space must hold nothing.

use core::alloc::Layout;
use core::ptr::NonNull;

use bento_pages::PageSource;
use bento_space::{MemorySpace, SpaceConfig};
use bento_testkit::session::{Session, SessionConfig, SessionHeap, play};

/// A memory space as the session's heap.
pub(crate) struct SpaceHeap<'a, P: PageSource>(pub(crate) &'a MemorySpace<P>);

impl<P: PageSource> SessionHeap for SpaceHeap<'_, P> {
    fn alloc(&mut self, size: usize, align: usize) -> Option<NonNull<u8>> {
        self.0
            .alloc(Layout::from_size_align(size, align).ok()?)
            .ok()
    }

    unsafe fn realloc(
        &mut self,
        ptr: NonNull<u8>,
        old: usize,
        align: usize,
        new: usize,
    ) -> Option<NonNull<u8>> {
        // SAFETY: `ptr` is a live block of the space (the caller's contract).
        unsafe {
            if align <= 16 {
                return self.0.realloc(ptr, new).ok();
            }
            let q = self.alloc(new, align)?;
            core::ptr::copy_nonoverlapping(ptr.as_ptr(), q.as_ptr(), old.min(new));
            self.0.free(ptr);
            Some(q)
        }
    }

    unsafe fn free(&mut self, ptr: NonNull<u8>, _: usize, _: usize) {
        // SAFETY: the caller's contract.
        unsafe { self.0.free(ptr) }
    }
}

/// The peak committed bytes of each level, sampled at its checkpoints, and the
/// session's peak live bytes.
fn session<P: PageSource>(space: &MemorySpace<P>, config: SessionConfig) -> (Vec<usize>, usize) {
    let mut peaks = vec![0; config.levels];
    let mut last_level = 0;
    let report = play(&mut SpaceHeap(space), Session::new(config), |at, _| {
        peaks[at.level] = peaks[at.level].max(space.stats().committed);
        if at.level != last_level {
            // Once per level: the whole structure checks out.
            last_level = at.level;
            space.validate().unwrap();
        }
    });
    assert_eq!(report.failures, 0, "{report:?}");
    (peaks, report.peak_live)
}

#[test]
#[cfg_attr(miri, ignore = "a hundred levels are hours under Miri")]
fn a_hundred_levels_do_not_creep_and_leave_nothing_behind() {
    let pages = bento_pages::Metered::new(bento_pages::HeapPages::new());
    let config = SpaceConfig::DEFAULT.with_page_size(4096);
    let space = MemorySpace::new(&pages, config).unwrap();
    let (peaks, peak_live) = session(&space, SessionConfig::GAME);
    let first = peaks[..10].iter().max().unwrap();
    let last = peaks[peaks.len() - 10..].iter().max().unwrap();
    assert!(
        *last * 100 <= *first * 105,
        "the footprint crept: peak committed {first} in the first 10 levels, {last} in the last 10"
    );
    let s = space.stats();
    let frag = s.max_committed as f64 / peak_live as f64;
    assert!(
        frag <= 1.10,
        "peak committed {} / peak live {peak_live} = {frag:.3}",
        s.max_committed
    );
    assert_eq!(
        (s.committed, s.reserved, s.segments, s.live_blocks),
        (0, 0, 0, 0)
    );
    space.validate().unwrap();
    assert_eq!(space.trim(), s.cache.parked);
    drop(space);
    assert_eq!(pages.stats().reserved, 0, "every reservation went back");
    assert_eq!(pages.stats().committed, 0);
}
