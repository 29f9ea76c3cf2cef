//! `warm`: the pages the free space at each segment's end will give next are
//! committed ahead, kept by the commit cache, and the blocks cut from there call the
//! source no more; in fixed memory a warm the limit refuses changes nothing.

use core::alloc::Layout;
use core::ptr::NonNull;

use bento_pages::{Decay, HeapPages, LimitedPages, Metered, Retention};
use bento_space::{MemorySpace, SpaceConfig};

use crate::check;

/// 4 KiB pages, 1 MiB segments, a commit cache that keeps what it is given.
const KEPT: SpaceConfig = SpaceConfig::DEFAULT
    .with_page_size(4096)
    .with_segment_granularity(1 << 20)
    .with_segment_threshold(512 << 10)
    .with_commit_cache(4 << 20)
    .with_retention(Retention::Decay(Decay::KEEP));

/// Allocates `n` blocks of 10–70 KiB, their ends written; returns them.
fn blocks<P: bento_pages::PageSource>(
    space: &MemorySpace<P>,
    n: usize,
) -> Vec<(NonNull<u8>, Layout)> {
    (0..n)
        .map(|i| {
            let layout = Layout::from_size_align((10 + 20 * (i % 4)) << 10, 16).unwrap();
            let p = space.alloc(layout).expect("memory to spare");
            // SAFETY: a fresh block of `layout.size()` bytes: its ends.
            unsafe {
                p.write(i as u8);
                p.add(layout.size() - 1).write(i as u8);
            }
            (p, layout)
        })
        .collect()
}

fn free_all<P: bento_pages::PageSource>(
    space: &MemorySpace<P>,
    blocks: Vec<(NonNull<u8>, Layout)>,
) {
    for (i, (p, layout)) in blocks.into_iter().enumerate() {
        // SAFETY: a live block of the space, written with `i`.
        unsafe {
            assert_eq!(
                (p.read(), p.add(layout.size() - 1).read()),
                (i as u8, i as u8)
            );
            space.dealloc(p, layout);
        }
    }
}

/// The source's commits while `n` blocks are cut after a warm of `warm` bytes.
fn commits_after_warm(warm: usize, n: usize) -> usize {
    let pages = Metered::new(HeapPages::new());
    let space = MemorySpace::new(&pages, KEPT).unwrap();
    let first = blocks(&space, 1);
    let warmed = space.warm(warm);
    assert_eq!(warmed, warm, "a warm inside the fresh free space");
    check(&&space).unwrap();
    let before = pages.stats().commits;
    let more = blocks(&space, n);
    let calls = pages.stats().commits - before;
    check(&&space).unwrap();
    free_all(&space, more);
    free_all(&space, first);
    check(&&space).unwrap();
    assert_eq!(space.stats().live_blocks, 0);
    calls
}

#[test]
fn blocks_cut_after_a_warm_call_the_source_no_more() {
    // 8 blocks of 10-70 KiB: 320 KiB, inside a warm of 512 KiB.
    assert_eq!(commits_after_warm(512 << 10, 8), 0);
    // The same blocks with nothing warmed call it (so the check above can fail).
    assert!(commits_after_warm(0, 8) > 0);
}

#[test]
fn a_warm_is_bounded_by_the_fresh_free_space() {
    let pages = Metered::new(HeapPages::new());
    let space = MemorySpace::new(&pages, KEPT).unwrap();
    // No segment yet: nothing to warm.
    assert_eq!(space.warm(1 << 20), 0);
    let first = blocks(&space, 1);
    // Any size a caller can type: at most the segment's free interior.
    let warmed = space.warm(usize::MAX);
    assert!(warmed > 0 && warmed < 1 << 20, "{warmed}");
    assert_eq!(warmed % 4096, 0);
    // A second warm of what is kept already passes it through once more, and the
    // stats still add up.
    assert_eq!(space.warm(usize::MAX), warmed);
    check(&&space).unwrap();
    assert_eq!(
        space.stats().committed,
        pages.stats().committed - space.stats().cache.parked - crate::table_bytes(4 << 20, 4096)
    );
    free_all(&space, first);
    check(&&space).unwrap();
}

#[test]
fn a_warm_fixed_memory_refuses_changes_nothing() {
    let limited = LimitedPages::new(Metered::new(HeapPages::new()), 256 << 10);
    let space = MemorySpace::new(&limited, KEPT).unwrap();
    let first = blocks(&space, 1);
    let committed = limited.stats().committed;
    let stats = space.stats();
    // More than the limit leaves: refused, nothing committed, nothing lost.
    assert_eq!(space.warm(1 << 20), 0);
    assert_eq!(limited.stats().committed, committed);
    assert_eq!(space.stats().committed, stats.committed);
    check(&&space).unwrap();
    // What the limit allows is warmed and kept.
    assert!(committed + (64 << 10) <= 256 << 10, "{committed}");
    assert_eq!(space.warm(64 << 10), 64 << 10);
    assert_eq!(limited.stats().committed, committed + (64 << 10));
    check(&&space).unwrap();
    free_all(&space, first);
    check(&&space).unwrap();
}

/// A block that does not fit what is left of a segment's free space takes a new
/// segment; what was left is listed, its pages never committed. A warm reaches it
/// too, so the block best fit puts there calls the source no more.
#[test]
fn the_free_space_a_new_segment_left_behind_is_warmed_too() {
    for warm in [true, false] {
        let pages = Metered::new(HeapPages::new());
        let space = MemorySpace::new(&pages, KEPT).unwrap();
        let big = Layout::from_size_align(300 << 10, 16).unwrap();
        let mut live: Vec<_> = (0..4).map(|_| space.alloc(big).unwrap()).collect();
        assert_eq!(space.stats().segments, 2);
        if warm {
            assert!(space.warm(usize::MAX) > 100 << 10);
        }
        let before = pages.stats().commits;
        live.push(
            space
                .alloc(Layout::from_size_align(80 << 10, 16).unwrap())
                .unwrap(),
        );
        let calls = pages.stats().commits - before;
        assert_eq!(calls == 0, warm, "warm {warm}: {calls} commits");
        check(&&space).unwrap();
        for p in live {
            // SAFETY: live blocks of the space, each freed once.
            unsafe { space.free(p) };
        }
        check(&&space).unwrap();
        assert_eq!(space.stats().live_blocks, 0);
    }
}
