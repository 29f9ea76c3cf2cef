//! Seeded model runs through bento-testkit, through every entry point a user has,
//! with `validate()` every few operations and the allocator empty after each program.

use core::alloc::{GlobalAlloc, Layout};
use core::ptr::NonNull;

use bento_align::Alignment;
use bento_common::{CommonAllocator, PageSource, RawAlloc, Routing, SizeClasses};
use bento_pages::{FaultyPages, HeapPages};
use bento_testkit::{Api02, Api04, Caps, End, Figures, Ops, SizeGen, Target, cases, run, seeded};

use crate::{LARGE_SEGMENT, check, heap, shape};

/// The classes of the model runs: the 20 of the default table, or under Miri, where
/// each check walks every region, three.
fn classes() -> SizeClasses {
    if cfg!(miri) {
        SizeClasses::new(&[16, 64, 256])
    } else {
        SizeClasses::DEFAULT
    }
}

/// An allocator of the model runs' shape over a heap source with `routing`.
fn on_heap(routing: Routing) -> CommonAllocator<HeapPages> {
    CommonAllocator::with_config(
        shape()
            .with_classes(classes())
            .with_routing(routing)
            .with_pages(heap()),
    )
}

/// Every class boundary, one below and one above (the generator adds the ±1), and
/// the large region's threshold and segment.
fn sizes() -> SizeGen {
    let classes = classes();
    let mut edges: Vec<usize> = (0..classes.len()).map(|c| classes.size(c)).collect();
    edges.extend([LARGE_SEGMENT / 4, LARGE_SEGMENT - 128]);
    // Under Miri every live byte the oracle checks costs: sizes stop past the
    // threshold of a dedicated segment.
    let max = if cfg!(miri) {
        LARGE_SEGMENT / 3
    } else {
        LARGE_SEGMENT + LARGE_SEGMENT / 8
    };
    SizeGen::new(max).with_boundaries(&edges)
}

fn caps(ops: Ops) -> Caps {
    Caps::default()
        .with_ops(ops | Ops::HUGE | Ops::IN_PLACE)
        .with_sizes(sizes())
        .with_max_align(Alignment::new(cases(4096, 256)).unwrap())
        .with_max_live(cases(300, 8))
        .with_validate_every(cases(4, 12))
        // Under Miri a step of a common allocator costs milliseconds (21 regions'
        // walks at each check): short programs.
        .with_max_steps(cases(2000, 60))
}

/// The allocator as the interpreter drives it, taking turns between its entry points:
/// allocator-api2 0.2, `GlobalAlloc`, and its own `alloc`, `free` (no size),
/// `dealloc`, `resize` and the in-place resize of `RawAlloc`.
struct CommonTarget<'a, P: PageSource> {
    common: &'a CommonAllocator<P>,
    fail: Option<fn(&P, u32)>,
    turn: usize,
}

impl<'a, P: PageSource> CommonTarget<'a, P> {
    fn new(common: &'a CommonAllocator<P>) -> Self {
        Self {
            common,
            fail: None,
            turn: 0,
        }
    }

    fn turn(&mut self, n: usize) -> usize {
        self.turn = self.turn.wrapping_add(1);
        self.turn % n
    }
}

impl<P: PageSource + Send + Sync> Target for CommonTarget<'_, P> {
    fn allocate(&mut self, end: End, layout: Layout, zeroed: bool) -> Option<NonNull<[u8]>> {
        if layout.size() == 0 || self.turn(2) == 0 {
            return Api02::new(&self.common).allocate(end, layout, zeroed);
        }
        // SAFETY: a non-zero size.
        let p = unsafe {
            if zeroed {
                GlobalAlloc::alloc_zeroed(self.common, layout)
            } else {
                GlobalAlloc::alloc(self.common, layout)
            }
        };
        NonNull::new(p).map(|p| NonNull::slice_from_raw_parts(p, layout.size()))
    }

    unsafe fn deallocate(&mut self, end: End, ptr: NonNull<u8>, layout: Layout) {
        if layout.size() == 0 {
            return;
        }
        // SAFETY: a live, non-zero-size block (the interpreter's contract).
        unsafe {
            match self.turn(4) {
                0 => self.common.free(ptr),
                1 => self.common.dealloc(ptr, layout),
                2 => GlobalAlloc::dealloc(self.common, ptr.as_ptr(), layout),
                _ => Api02::new(&self.common).deallocate(end, ptr, layout),
            }
        }
    }

    unsafe fn grow(
        &mut self,
        end: End,
        ptr: NonNull<u8>,
        old: Layout,
        new: Layout,
        zeroed: bool,
    ) -> Option<NonNull<[u8]>> {
        if zeroed || old.size() == 0 {
            // SAFETY: the interpreter upholds `Target::grow`'s contract.
            return unsafe { Api02::new(&self.common).grow(end, ptr, old, new, zeroed) };
        }
        // SAFETY: as above: a live block of `old`, both sizes non-zero.
        unsafe { self.resize(end, ptr, old, new) }
    }

    unsafe fn shrink(
        &mut self,
        end: End,
        ptr: NonNull<u8>,
        old: Layout,
        new: Layout,
    ) -> Option<NonNull<[u8]>> {
        if new.size() == 0 {
            // SAFETY: the interpreter upholds `Target::shrink`'s contract.
            return unsafe { Api02::new(&self.common).shrink(end, ptr, old, new) };
        }
        // SAFETY: as above.
        unsafe { self.resize(end, ptr, old, new) }
    }

    unsafe fn resize_in_place(
        &mut self,
        _: End,
        ptr: NonNull<u8>,
        old: Layout,
        new_size: usize,
    ) -> Option<NonNull<[u8]>> {
        if old.size() == 0 || new_size == 0 {
            return None;
        }
        // SAFETY: a live block of `old` (the interpreter's contract).
        let done = unsafe { RawAlloc::resize_in_place(self.common, ptr, old, new_size) };
        done.then(|| NonNull::slice_from_raw_parts(ptr, new_size))
    }

    fn trim(&mut self) {
        self.common.trim();
        let s = self.common.stats();
        assert_eq!(s.cache.parked, 0, "trim leaves nothing parked");
        assert_eq!(s.cache.spares, 0, "trim leaves no spare segment");
        assert!(
            s.regions()
                .iter()
                .filter(|r| r.block != 0)
                .all(|r| r.cached_blocks == 0),
            "trim empties the free lists"
        );
    }

    fn fail_next(&mut self, k: u32) {
        let fail = self
            .fail
            .expect("FAIL_NEXT is enabled over FaultyPages only");
        fail(self.common.pages().expect("started"), k);
    }

    fn validate(&mut self) -> Result<Figures, String> {
        check(&self.common)
    }
}

impl<P: PageSource + Send + Sync> CommonTarget<'_, P> {
    /// A resize through `resize`, `GlobalAlloc::realloc` (same alignment) or
    /// allocator-api2, in turn.
    ///
    /// # Safety
    ///
    /// `ptr` is a live block of `old`; both sizes are non-zero.
    unsafe fn resize(
        &mut self,
        end: End,
        ptr: NonNull<u8>,
        old: Layout,
        new: Layout,
    ) -> Option<NonNull<[u8]>> {
        let p = match self.turn(3) {
            // SAFETY: the caller's contract.
            0 => unsafe { self.common.resize(ptr, old, new) }.ok()?,
            1 if old.align() == new.align() => {
                // SAFETY: as above, with the block's own alignment.
                let p = unsafe { GlobalAlloc::realloc(self.common, ptr.as_ptr(), old, new.size()) };
                NonNull::new(p)?
            }
            _ => {
                // SAFETY: as above.
                return unsafe {
                    if new.size() >= old.size() {
                        Api02::new(&self.common).grow(end, ptr, old, new, false)
                    } else {
                        Api02::new(&self.common).shrink(end, ptr, old, new)
                    }
                };
            }
        };
        Some(NonNull::slice_from_raw_parts(p, new.size()))
    }
}

/// After a program: nothing live, and after `trim` nothing reserved.
fn assert_empty<P: PageSource>(common: &CommonAllocator<P>) {
    assert_eq!(common.stats().live_blocks, 0, "{}", common.report());
    common.trim();
    let s = common.stats();
    assert_eq!((s.reserved, s.committed), (0, 0), "{}", common.report());
}

#[test]
fn model_by_size() {
    let common = on_heap(Routing::BySize);
    let r = seeded(cases(60, 1), |u| {
        let r = run(&mut CommonTarget::new(&common), &caps(Ops::TRIM), u);
        assert_eq!(common.stats().live_blocks, 0, "{}", common.report());
        r
    });
    assert_empty(&common);
    if !cfg!(miri) {
        assert!(
            r.resizes_in_place > 0 && r.resizes > r.resizes_in_place,
            "{r:?}"
        );
        let s = common.stats();
        assert!(s.source.reserves > 20, "{:?}", s.source);
    }
}

#[test]
#[cfg_attr(
    miri,
    ignore = "minutes under Miri; model_by_size and the front tests cover the paths"
)]
fn model_with_the_front_end() {
    let common = CommonAllocator::with_config(
        shape()
            .with_classes(classes())
            .with_thread_cache(true)
            .with_pages(heap()),
    );
    seeded(cases(60, 1), |u| {
        run(&mut CommonTarget::new(&common), &caps(Ops::TRIM), u)
    });
    assert_empty(&common);
}

#[test]
fn model_by_contention() {
    let common = on_heap(Routing::Contention { regions: 3 });
    seeded(cases(80, 1), |u| {
        run(&mut CommonTarget::new(&common), &caps(Ops::TRIM), u)
    });
    assert_empty(&common);
}

#[test]
#[cfg_attr(
    miri,
    ignore = "minutes under Miri; model_by_size and the front tests cover the paths"
)]
fn model_through_allocator_api2_04() {
    let common = on_heap(Routing::BySize);
    let caps = caps(Ops::empty()).with_ops(Ops::HUGE);
    seeded(cases(25, 1), |u| {
        run(&mut Api04::with_validate(&&common, check), &caps, u)
    });
    assert_empty(&common);
}

#[test]
#[cfg_attr(
    miri,
    ignore = "minutes under Miri; model_by_size and the front tests cover the paths"
)]
fn model_with_refused_reserves_and_commits() {
    let c = shape();
    let common = CommonAllocator::with_config(
        c.with_classes(classes())
            .with_pages(FaultyPages::new(heap())),
    );
    common.init().unwrap();
    let r = seeded(cases(50, 1), |u| {
        common.pages().unwrap().heal();
        let mut target = CommonTarget::new(&common);
        target.fail = Some(|pages: &FaultyPages<HeapPages>, k| {
            if k.is_multiple_of(2) {
                pages.fail_reserve(k as usize / 2);
            } else {
                pages.fail_commit(k as usize / 2);
            }
        });
        run(&mut target, &caps(Ops::FAIL_NEXT | Ops::TRIM), u)
    });
    common.pages().unwrap().heal();
    assert_empty(&common);
    if !cfg!(miri) {
        assert!(
            common.pages().unwrap().injected() > 0,
            "no failure was injected"
        );
        assert!(r.allocs_failed > 0, "{r:?}");
    }
}

#[test]
#[cfg_attr(miri, ignore = "mmap is not supported under Miri")]
fn model_on_system_pages() {
    let common = crate::common(bento_pages::SystemPages::new(), Routing::BySize);
    seeded(60, |u| {
        run(&mut CommonTarget::new(&common), &caps(Ops::TRIM), u)
    });
    assert_empty(&common);
}
