//! Seeded model runs through bento-testkit, through every entry point a user has,
//! with `validate()` every few operations and the allocator empty after each program.

use core::ptr::NonNull;

use bento_align::Alignment;
use bento_common::{CommonAllocator, PageSource, RawAlloc, Routing, SizeClasses};
use bento_pages::{FaultyPages, HeapPages};
use bento_testkit::{Api04, Caps, EntryPoints, Ops, SizeGen, Takes, cases, run, seeded};

use crate::{LARGE_SEGMENT, check, heap, shape};

/// The classes of the model runs: the 20 of the default table, or under Miri, where
/// each check walks every region, three.
pub(crate) fn classes() -> SizeClasses {
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

pub(crate) fn caps(ops: Ops) -> Caps {
    Caps::general_purpose(ops, sizes())
        .with_max_align(Alignment::new(cases(4096, 256)).unwrap())
        .with_max_live(cases(300, 8))
        .with_validate_every(cases(4, 12))
        // Under Miri a step of a common allocator costs milliseconds (21 regions'
        // walks at each check): short programs.
        .with_max_steps(cases(2000, 60))
}

/// The allocator as the interpreter drives it, taking turns between its entry points:
/// allocator-api2 0.2, `GlobalAlloc`, and its own `free` (no size), `dealloc`,
/// `resize` and the in-place resize of `RawAlloc`, for blocks of non-zero size; `trim`
/// for `TRIM` and `validate()` at each check.
pub(crate) fn target<P: PageSource + Send + Sync>(
    common: &CommonAllocator<P>,
) -> EntryPoints<'_, CommonAllocator<P>> {
    EntryPoints::new(common)
        .with_api02()
        .with_global_alloc()
        .with_deallocate(Takes::SIZED, |common, ptr, _| {
            // SAFETY: a live block of non-zero size (the interpreter's contract and
            // `Takes::SIZED`).
            unsafe { common.free(ptr) }
        })
        .with_deallocate(Takes::SIZED, |common, ptr, layout| {
            // SAFETY: as above, with its layout.
            unsafe { common.dealloc(ptr, layout) }
        })
        .with_resize(Takes::SIZED.realign(), |common, ptr, old, new, _| {
            // SAFETY: a live block of `old`; both sizes non-zero (`Takes::SIZED`).
            let p = unsafe { common.resize(ptr, old, new) }.ok()?;
            Some(NonNull::slice_from_raw_parts(p, new.size()))
        })
        .with_in_place(Takes::SIZED, |common, ptr, old, new_size| {
            // SAFETY: a live block of `old`, both sizes non-zero (the interpreter's
            // contract and `Takes::SIZED`).
            let done = unsafe { RawAlloc::resize_in_place(common, ptr, old, new_size) };
            done.then(|| NonNull::slice_from_raw_parts(ptr, new_size))
        })
        .with_trim(|common| {
            common.trim();
            let s = common.stats();
            assert_eq!(s.cache.parked, 0, "trim leaves nothing parked");
            assert_eq!(s.cache.spares, 0, "trim leaves no spare segment");
            assert!(
                s.regions()
                    .iter()
                    .filter(|r| r.block != 0)
                    .all(|r| r.cached_blocks == 0),
                "trim empties the free lists"
            );
        })
        .with_validate(|common| check(&common))
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
        let r = run(&mut target(&common), &caps(Ops::TRIM), u);
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
        run(&mut target(&common), &caps(Ops::TRIM), u)
    });
    assert_empty(&common);
}

#[test]
fn model_by_contention() {
    let common = on_heap(Routing::Contention { regions: 3 });
    seeded(cases(80, 1), |u| {
        run(&mut target(&common), &caps(Ops::TRIM), u)
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
        // `FAIL_NEXT k`: refuses the `k / 2`-th reserve (even `k`) or commit (odd `k`).
        let mut refusing = target(&common).with_fail_next(|common, k| {
            let pages = common.pages().expect("started");
            if k.is_multiple_of(2) {
                pages.fail_reserve(k as usize / 2);
            } else {
                pages.fail_commit(k as usize / 2);
            }
        });
        run(&mut refusing, &caps(Ops::FAIL_NEXT | Ops::TRIM), u)
    });
    common.pages().unwrap().heal();
    assert_empty(&common);
    r.assert_failures_injected(common.pages().unwrap().injected());
}

#[test]
#[cfg_attr(miri, ignore = "mmap is not supported under Miri")]
fn model_on_system_pages() {
    let common = crate::common(bento_pages::SystemPages::new(), Routing::BySize);
    seeded(60, |u| run(&mut target(&common), &caps(Ops::TRIM), u));
    assert_empty(&common);
}
