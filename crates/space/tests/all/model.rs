//! Seeded model runs through bento-testkit on each page source, `validate()` every few
//! operations, and the space empty (every segment released) after each program.

use core::alloc::Layout;
use core::ptr::NonNull;

use bento_align::Alignment;
use bento_pages::{FaultyPages, FixedPages, HeapPages, Metered, PageSource};
use bento_space::MemorySpace;
use bento_testkit::{Api02, Api04, Caps, End, Figures, Ops, SizeGen, Target, cases, run, seeded};

use crate::{SMALL, check};

/// Sizes across the small/large, segment and threshold boundaries.
fn sizes() -> SizeGen {
    SizeGen::new(cases(80 << 10, 40 << 10)).with_boundaries(&[
        24,
        25,
        240,
        256,
        4096,
        16 << 10,               // the threshold
        (64 << 10) - 64 - 8,    // the largest request an ordinary segment holds
        (64 << 10) - 64 - 8 - 4096,
    ])
}

fn caps(ops: Ops) -> Caps {
    Caps::default()
        .with_ops(ops | Ops::HUGE)
        .with_sizes(sizes())
        .with_max_align(Alignment::new(65536).unwrap())
        .with_max_live(cases(200, 24))
        .with_validate_every(3)
}

/// A space over failure-injecting pages, with `FAIL_NEXT` arming a refused reserve or
/// commit.
struct Faulty<'a> {
    space: &'a MemorySpace<FaultyPages<HeapPages>>,
}

impl Target for Faulty<'_> {
    fn allocate(&mut self, end: End, layout: Layout, zeroed: bool) -> Option<NonNull<[u8]>> {
        Api02::new(&self.space).allocate(end, layout, zeroed)
    }

    unsafe fn deallocate(&mut self, end: End, ptr: NonNull<u8>, layout: Layout) {
        // SAFETY: the interpreter upholds `Target::deallocate`'s contract.
        unsafe { Api02::new(&self.space).deallocate(end, ptr, layout) }
    }

    unsafe fn grow(
        &mut self,
        end: End,
        ptr: NonNull<u8>,
        old: Layout,
        new: Layout,
        zeroed: bool,
    ) -> Option<NonNull<[u8]>> {
        // SAFETY: the interpreter upholds `Target::grow`'s contract.
        unsafe { Api02::new(&self.space).grow(end, ptr, old, new, zeroed) }
    }

    unsafe fn shrink(
        &mut self,
        end: End,
        ptr: NonNull<u8>,
        old: Layout,
        new: Layout,
    ) -> Option<NonNull<[u8]>> {
        // SAFETY: the interpreter upholds `Target::shrink`'s contract.
        unsafe { Api02::new(&self.space).shrink(end, ptr, old, new) }
    }

    fn fail_next(&mut self, k: u32) {
        let pages = self.space.pages().unwrap();
        if k % 2 == 0 {
            pages.fail_reserve(k as usize / 2);
        } else {
            pages.fail_commit(k as usize / 2);
        }
    }

    fn validate(&mut self) -> Result<Figures, String> {
        check(&self.space)
    }
}

#[test]
fn model_on_heap_pages() {
    let pages = Metered::new(HeapPages::new());
    let space = MemorySpace::new(&pages, SMALL).unwrap();
    let caps = caps(Ops::empty());
    let r = seeded(cases(150, 2), |u| {
        let r = run(&mut Api02::with_validate(&&space, check), &caps, u);
        assert_eq!(space.stats().segments, 0, "an empty space holds no segment");
        assert_eq!(pages.stats().reserved, 0, "every reservation went back");
        r
    });
    if !cfg!(miri) {
        assert!(r.resizes_in_place > 0 && r.resizes > r.resizes_in_place, "{r:?}");
        assert!(pages.stats().reserves > 100, "{:?}", pages.stats());
    }
}

#[test]
fn model_through_allocator_api2_04() {
    let space = MemorySpace::new(HeapPages::new(), SMALL).unwrap();
    let caps = caps(Ops::empty());
    seeded(cases(40, 1), |u| run(&mut Api04::with_validate(&&space, check), &caps, u));
    assert_eq!(space.stats().segments, 0);
}

#[test]
fn model_with_refused_reserves_and_commits() {
    let space = MemorySpace::new(FaultyPages::new(HeapPages::new()), SMALL).unwrap();
    let caps = caps(Ops::FAIL_NEXT);
    let r = seeded(cases(100, 1), |u| {
        space.pages().unwrap().heal();
        run(&mut Faulty { space: &space }, &caps, u)
    });
    assert_eq!(space.stats().segments, 0);
    if !cfg!(miri) {
        assert!(space.pages().unwrap().injected() > 0, "no failure was injected");
        assert!(r.allocs_failed > 0, "{r:?}");
    }
}

#[test]
#[cfg_attr(miri, ignore = "mmap is not supported under Miri")]
fn model_on_system_pages() {
    let pages = Metered::new(bento_pages::SystemPages::new());
    let space = MemorySpace::new(&pages, SMALL).unwrap();
    seeded(60, |u| run(&mut Api02::with_validate(&&space, check), &caps(Ops::empty()), u));
    assert_eq!(pages.stats().reserved, 0);
}

#[test]
#[cfg_attr(miri, ignore = "FixedPages needs a leaked static buffer")]
fn model_on_fixed_pages() {
    let layout = Layout::from_size_align(256 << 10, 4096).unwrap();
    // SAFETY: a non-zero size; the memory is leaked on purpose, as `FixedPages` wants
    // a `'static` buffer.
    let buf: &'static mut [core::mem::MaybeUninit<u8>] = unsafe {
        let base = std::alloc::alloc(layout);
        assert!(!base.is_null());
        core::slice::from_raw_parts_mut(base.cast(), layout.size())
    };
    let pages = FixedPages::new(buf, Alignment::new(4096).unwrap());
    let space = MemorySpace::new(&pages, SMALL).unwrap();
    // 256 KiB hold few segments, so programs run the source dry too.
    let r = seeded(60, |u| run(&mut Api02::with_validate(&&space, check), &caps(Ops::empty()), u));
    assert!(r.allocs_failed > 0, "{r:?}");
    assert_eq!(pages.available(), pages.capacity(), "every segment went back");
}

#[test]
fn model_on_a_base_segment_without_a_source() {
    #[repr(C, align(16))]
    struct Buf([u8; 48 << 10]);
    let mut buf = Box::new(Buf([0; 48 << 10]));
    let base = NonNull::new(buf.0.as_mut_ptr()).unwrap();
    // SAFETY: `buf` outlives the space and is reached only through it.
    let space = unsafe { MemorySpace::<HeapPages>::with_base(base, buf.0.len(), None, SMALL) }.unwrap();
    let r = seeded(cases(60, 1), |u| {
        let r = run(&mut Api02::with_validate(&&space, check), &caps(Ops::empty()), u);
        assert_eq!(space.stats().segments, 1, "the base segment stays");
        r
    });
    if !cfg!(miri) {
        assert!(r.allocs_failed > 0, "{r:?}");
    }
    drop(space);
    drop(buf);
}

#[test]
fn model_on_a_base_segment_that_grows() {
    let mut buf = vec![0u64; 1024];
    let base = NonNull::new(buf.as_mut_ptr().cast::<u8>()).unwrap();
    let pages = Metered::new(HeapPages::new());
    // SAFETY: `buf` outlives the space and is reached only through it.
    let space = unsafe { MemorySpace::with_base(base, 8192, Some(&pages), SMALL) }.unwrap();
    seeded(cases(40, 1), |u| run(&mut Api02::with_validate(&&space, check), &caps(Ops::empty()), u));
    assert_eq!(space.stats().segments, 1);
    assert_eq!(pages.stats().reserved, 0);
    assert!(pages.stats().max_reserved > 0);
    drop(space);
    drop(buf);
}

#[test]
fn page_source_page_size_is_respected() {
    // 16 KiB source pages: dedicated segments round to them.
    let pages = HeapPages::with_page_size(Alignment::new(16 << 10).unwrap());
    let space = MemorySpace::new(&pages, SMALL.with_page_size(16 << 10)).unwrap();
    let p = space.alloc(Layout::new::<[u8; 20_000]>()).unwrap();
    assert_eq!(space.stats().reserved % (16 << 10), 0);
    assert_eq!(space.stats().reserved, 32 << 10);
    // SAFETY: live.
    unsafe { space.free(p) };
    assert_eq!(pages.page_size(), 16 << 10);
}
