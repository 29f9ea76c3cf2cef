//! Seeded model runs through bento-testkit on each page source, `validate()` every few
//! operations, and the space empty (every segment released) after each program.

use core::alloc::Layout;
use core::ptr::NonNull;

use bento_align::Alignment;
use bento_pages::{
    Decay, FaultyPages, FixedPages, HeapPages, LimitedPages, Metered, PageSource, Phase, Retention,
};
use bento_space::{MemorySpace, SpaceConfig};
use bento_testkit::{Api04, Caps, EntryPoints, Ops, SizeGen, Takes, cases, run, seeded};

use crate::{SMALL, check};

/// The configuration of the model runs: `SMALL` natively; under Miri, where every byte
/// the oracle checks costs, the same shape scaled down (64-byte pages, 1 KiB segments,
/// dedicated from 256 bytes).
fn config() -> SpaceConfig {
    if cfg!(miri) {
        SMALL
            .with_page_size(64)
            .with_segment_granularity(1024)
            .with_segment_threshold(256)
    } else {
        SMALL
    }
}

/// A heap-backed source with the page of `config()`.
fn heap() -> HeapPages {
    HeapPages::with_page_size(Alignment::new(config().page_size).unwrap())
}

/// Sizes across the small/large, segment and threshold boundaries.
fn sizes() -> SizeGen {
    let c = config();
    let largest = c.segment_granularity - 64 - 16 - 8; // what one ordinary segment holds
    SizeGen::new(c.segment_granularity + c.segment_granularity / 4)
        .with_page(c.page_size)
        .with_boundaries(&[
            24,
            25,
            240,
            256,
            c.segment_threshold,
            largest,
            largest - c.page_size,
        ])
}

fn caps(ops: Ops) -> Caps {
    Caps::general_purpose(ops, sizes())
        .with_max_align(Alignment::new(cases(65536, 8192)).unwrap())
        // Under Miri each validation re-reads every live byte (the oracle's patterns):
        // fewer, smaller live sets keep a case to seconds.
        .with_max_live(cases(200, 8))
        .with_validate_every(cases(3, 10))
        // Under Miri a debug free walks its segment's chunks: short programs.
        .with_max_steps(cases(2000, 120))
}

/// A space as the interpreter drives it, through every entry point a user has, in
/// turn: allocator-api2 for every call; frees also through `free` (the tag) and
/// `dealloc` (the layout); grows and shrinks also through the space's own `realloc`
/// (which aligns to 16 when it moves, so for alignments up to 16); in-place resizes
/// through `try_grow_in_place` (which succeeds without change for a size the block
/// already holds, so the block's layout becomes the smaller one) and
/// `realloc_in_place`; `trim` for `TRIM`, and `validate()` at each check. A zero-size
/// block is a dangling pointer, not a block of the space: only allocator-api2 takes it.
fn target<P: PageSource>(space: &MemorySpace<P>) -> EntryPoints<'_, MemorySpace<P>> {
    EntryPoints::new(space)
        .with_api02()
        .with_deallocate(Takes::SIZED, |space, ptr, _| {
            // SAFETY: a live block of the space of non-zero size (the interpreter's
            // contract and `Takes::SIZED`).
            unsafe { space.free(ptr) }
        })
        .with_deallocate(Takes::SIZED, |space, ptr, layout| {
            // SAFETY: as above, with a layout that fits it.
            unsafe { space.dealloc(ptr, layout) }
        })
        .with_resize(
            Takes::SIZED.realign().max_align(16),
            |space, ptr, _, new, _| {
                // SAFETY: a live block of non-zero size, to a non-zero size; both
                // alignments divide the 16 `realloc` gives a block it moves.
                let p = unsafe { space.realloc(ptr, new.size()) }.ok()?;
                Some(NonNull::slice_from_raw_parts(p, new.size()))
            },
        )
        .with_in_place(Takes::SIZED, |space, ptr, _, new_size| {
            // SAFETY: a live block of non-zero size (the interpreter's contract and
            // `Takes::SIZED`).
            let done = unsafe { space.try_grow_in_place(ptr, new_size) };
            done.then(|| whole(space, ptr))
        })
        .with_in_place(Takes::SIZED, |space, ptr, _, new_size| {
            // SAFETY: as above.
            let done = unsafe { space.realloc_in_place(ptr, new_size) };
            done.then(|| whole(space, ptr))
        })
        .with_trim(|space| {
            // Trim frees the block cache first, which can park more pages.
            let parked = space.stats().cache.parked;
            assert!(
                space.trim() >= parked,
                "trim gives back at least what the cache parked before"
            );
            assert_eq!(space.stats().cache.parked, 0);
        })
        .with_validate(|space| check(&space))
}

/// A block of the space after an in-place resize: `ptr` and all it holds now.
fn whole<P: PageSource>(space: &MemorySpace<P>, ptr: NonNull<u8>) -> NonNull<[u8]> {
    // SAFETY: `ptr` is a live block of the space (the in-place entry points'
    // callers').
    NonNull::slice_from_raw_parts(ptr, unsafe { space.usable_size(ptr) })
}

/// [`target`] over a failing source: `FAIL_NEXT` arms a refused reserve or commit.
fn failing(
    space: &MemorySpace<FaultyPages<HeapPages>>,
) -> EntryPoints<'_, MemorySpace<FaultyPages<HeapPages>>> {
    target(space).with_fail_next(|space, k| refuse_reserve_or_commit(space.pages().unwrap(), k))
}

#[test]
fn model_on_heap_pages() {
    let pages = Metered::new(heap());
    let space = MemorySpace::new(&pages, config()).unwrap();
    let caps = caps(Ops::empty());
    let r = seeded(cases(150, 1), |u| {
        let r = run(&mut target(&space), &caps, u);
        assert_eq!(space.stats().segments, 0, "an empty space holds no segment");
        assert_eq!(pages.stats().reserved, 0, "every reservation went back");
        r
    });
    if !cfg!(miri) {
        assert!(
            r.resizes_in_place > 0 && r.resizes > r.resizes_in_place,
            "{r:?}"
        );
        assert!(pages.stats().reserves > 100, "{:?}", pages.stats());
    }
}

#[test]
fn model_with_a_commit_cache() {
    let pages = Metered::new(heap());
    let cache = 64 * config().page_size;
    let space = MemorySpace::new(&pages, config().with_commit_cache(cache)).unwrap();
    let caps = caps(Ops::TRIM);
    let r = seeded(cases(100, 1), |u| {
        let r = run(&mut target(&space), &caps, u);
        assert_eq!(space.stats().segments, 0, "an empty space holds no segment");
        r
    });
    let s = space.stats();
    assert_eq!(s.committed, 0);
    // The source holds the cache's slot table and what the cache parks, no more.
    let table = crate::table_bytes(cache, config().page_size);
    assert_eq!(pages.stats().committed, table + s.cache.parked);
    if !cfg!(miri) {
        assert!(s.cache.hits > 0 && s.cache.parks > 0, "{s:?}");
        assert!(r.resizes_in_place > 0, "{r:?}");
    }
    drop(space);
    assert_eq!(pages.stats().reserved, 0, "every reservation went back");
}

#[test]
fn model_through_allocator_api2_04() {
    let space = MemorySpace::new(heap(), config()).unwrap();
    // The allocator-api2 path only: no in-place resizes of the space's own.
    let caps = caps(Ops::empty()).with_ops(Ops::HUGE);
    seeded(cases(40, 1), |u| {
        run(&mut Api04::with_validate(&&space, check), &caps, u)
    });
    assert_eq!(space.stats().segments, 0);
}

/// `FAIL_NEXT k`: refuses the `k / 2`-th reserve (even `k`) or commit (odd `k`).
fn refuse_reserve_or_commit(pages: &FaultyPages<HeapPages>, k: u32) {
    if k.is_multiple_of(2) {
        pages.fail_reserve(k as usize / 2);
    } else {
        pages.fail_commit(k as usize / 2);
    }
}

/// Fixed memory: a limit on committed bytes the programs run into, with a commit
/// cache that keeps pages and a block cache that keeps blocks. A refused request
/// leaves every block as it was (the oracle checks), the limit is never passed, and
/// what the caches keep is given up before a request is refused.
#[test]
fn model_in_fixed_memory() {
    let page = config().page_size;
    let limit = if cfg!(miri) { 24 * page } else { 96 * page };
    let pages = LimitedPages::new(Metered::new(heap()), limit);
    let config = config()
        .with_commit_cache(64 * page)
        .with_block_cache(16 * page)
        .with_retention(Retention::Decay(Decay::frames(3).with_peak_percent(400)));
    let space = MemorySpace::new(&pages, config).unwrap();
    let caps = caps(Ops::TRIM);
    seeded(cases(100, 1), |u| {
        let r = run(&mut target(&space), &caps, u);
        assert_eq!(space.stats().segments, 0, "an empty space holds no segment");
        r
    });
    let s = pages.stats();
    if !cfg!(miri) {
        assert!(s.refused > 0, "the programs ran into the limit: {s:?}");
        assert!(
            space.stats().cache.given_up > 0,
            "{:?}",
            space.stats().cache
        );
    }
    drop(space);
    assert_eq!(
        pages.inner().stats().reserved,
        0,
        "every reservation went back"
    );
}

#[test]
fn model_with_refused_reserves_and_commits() {
    let space = MemorySpace::new(FaultyPages::new(heap()), config()).unwrap();
    let caps = caps(Ops::FAIL_NEXT);
    let r = seeded(cases(100, 1), |u| {
        space.pages().unwrap().heal();
        run(&mut failing(&space), &caps, u)
    });
    assert_eq!(space.stats().segments, 0);
    r.assert_failures_injected(space.pages().unwrap().injected());
}

/// A decaying commit cache over a source that refuses reserves and commits: the
/// space ticks and changes phase as it goes, and `validate` checks after every few
/// calls that the source holds exactly the space's pages, the kept ones and the
/// cache's table (a refused commit of kept pages loses none of them).
#[test]
fn model_with_a_decaying_cache_over_refused_commits() {
    let config = config()
        .with_commit_cache(64 * config().page_size)
        .with_retention(Retention::Decay(Decay::frames(3)));
    let space = MemorySpace::new(FaultyPages::new(heap()), config).unwrap();
    let caps = caps(Ops::FAIL_NEXT | Ops::TRIM);
    seeded(cases(100, 1), |u| {
        space.pages().unwrap().heal();
        // Every fifth free ticks the space and tells it a phase.
        let mut target = failing(&space).with_before_free(|space, frees| {
            if frees.is_multiple_of(5) {
                space.tick();
                space.phase(match frees / 5 % 7 {
                    0 => Phase::Unload,
                    1 => Phase::Load,
                    _ => Phase::Play,
                });
            }
        });
        run(&mut target, &caps, u)
    });
    let s = space.stats();
    assert_eq!((s.segments, s.committed), (0, 0));
    if !cfg!(miri) {
        assert!(s.cache.hits > 0 && s.cache.purged > 0, "{s:?}");
        assert!(space.pages().unwrap().injected() > 0, "no failure injected");
    }
    for _ in 0..4 {
        space.phase(Phase::Play);
        space.tick();
    }
    let s = space.stats();
    assert_eq!(
        (s.cache.parked, s.cache.spares),
        (0, 0),
        "everything decayed"
    );
}

#[test]
#[cfg_attr(miri, ignore = "mmap is not supported under Miri")]
fn model_on_system_pages() {
    let pages = Metered::new(bento_pages::SystemPages::new());
    let space = MemorySpace::new(&pages, SMALL).unwrap();
    seeded(60, |u| run(&mut target(&space), &caps(Ops::empty()), u));
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
    let r = seeded(60, |u| run(&mut target(&space), &caps(Ops::empty()), u));
    assert!(r.allocs_failed > 0, "{r:?}");
    assert_eq!(
        pages.available(),
        pages.capacity(),
        "every segment went back"
    );
}

#[test]
#[cfg_attr(
    miri,
    ignore = "minutes under Miri; `segments::a_base_segment_stays` covers the path"
)]
fn model_on_a_base_segment_without_a_source() {
    let mut buf = vec![0u64; cases(6 << 10, 1 << 10)];
    let base = NonNull::new(buf.as_mut_ptr().cast::<u8>()).unwrap();
    let len = buf.len() * 8;
    // SAFETY: `buf` outlives the space and is reached only through it.
    let space = unsafe { MemorySpace::<HeapPages>::with_base(base, len, None, config()) }.unwrap();
    let r = seeded(cases(60, 1), |u| {
        let r = run(&mut target(&space), &caps(Ops::empty()), u);
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
#[cfg_attr(
    miri,
    ignore = "minutes under Miri; `segments::a_base_segment_stays` covers the path"
)]
fn model_on_a_base_segment_that_grows() {
    let mut buf = vec![0u64; 1024];
    let base = NonNull::new(buf.as_mut_ptr().cast::<u8>()).unwrap();
    let pages = Metered::new(heap());
    // SAFETY: `buf` outlives the space and is reached only through it.
    let space = unsafe { MemorySpace::with_base(base, 8192, Some(&pages), config()) }.unwrap();
    seeded(cases(40, 1), |u| {
        run(&mut target(&space), &caps(Ops::empty()), u)
    });
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
