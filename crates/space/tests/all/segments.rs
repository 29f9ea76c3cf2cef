//! Segments come and go with their blocks; stats, walking and resizing.

use core::alloc::Layout;
use core::ptr::NonNull;

use bento_pages::{HeapPages, Metered};
use bento_space::{Block, ChunkInfo, ChunkState, MemorySpace, SegmentKind, SpaceConfig};

use crate::{BY_FRAMES, SMALL, table_bytes};

fn layout(size: usize) -> Layout {
    Layout::from_size_align(size, 8).unwrap()
}

#[test]
fn the_free_that_empties_a_segment_releases_it_at_once() {
    let pages = Metered::new(HeapPages::new());
    let space = MemorySpace::new(&pages, SMALL).unwrap();
    let blocks: Vec<_> = (0..100)
        .map(|_| space.alloc(layout(1000)).unwrap())
        .collect();
    // 100 blocks of 1008-byte chunks need two 64 KiB segments.
    assert_eq!(space.stats().segments, 2);
    assert_eq!(pages.stats().reserved, 128 << 10);
    for (i, p) in blocks.iter().enumerate() {
        // SAFETY: each block is live and freed once.
        unsafe { space.free(*p) };
        // Under Miri every validation re-reads both segments: every eighth free.
        if !cfg!(miri) || i % 8 == 7 {
            space.validate().unwrap();
        }
        if i == 63 {
            // The first segment held 64 blocks; its last free gave it back.
            assert_eq!(space.stats().segments, 1, "after {} frees", i + 1);
            assert_eq!(pages.stats().releases, 1);
        }
    }
    let s = space.stats();
    assert_eq!(
        (
            s.segments,
            s.reserved,
            s.committed,
            s.live_blocks,
            s.free_bytes
        ),
        (0, 0, 0, 0, 0)
    );
    assert_eq!(pages.stats().reserved, 0);
    assert_eq!(pages.stats().committed, 0);
    // The second segment's 36 blocks end at 64 + 36 * 1008 = 36352 bytes in: it
    // committed the 9 pages up to the free rest's interior and the end fence's page.
    assert_eq!(
        (s.max_reserved, s.max_committed),
        (128 << 10, (64 << 10) + (9 + 1) * 4096)
    );
}

#[test]
fn requests_at_the_threshold_get_a_segment_of_their_own() {
    let pages = Metered::new(HeapPages::new());
    let space = MemorySpace::new(&pages, SMALL).unwrap();
    let below = space.alloc(layout((16 << 10) - 1)).unwrap();
    assert_eq!(space.stats().segments, 1);
    let at = space.alloc(layout(16 << 10)).unwrap();
    assert_eq!(space.stats().segments, 2);
    // Header, chunk (request + tag, rounded) and fence, rounded to the page.
    assert_eq!(pages.stats().reserved, (64 << 10) + (20 << 10));
    // SAFETY: live blocks, each freed once.
    unsafe {
        assert!(space.usable_size(at) >= 16 << 10);
        at.as_ptr().write_bytes(1, 16 << 10);
        space.free(at);
        assert_eq!(space.stats().segments, 1, "the dedicated segment went back");
        space.free(below);
    }
    assert_eq!(pages.stats().reserved, 0);
}

#[test]
fn initial_capacity_is_reserved_up_front_and_released_like_any_segment() {
    let pages = Metered::new(HeapPages::new());
    let space = MemorySpace::new(&pages, SMALL.with_initial_capacity(100 << 10)).unwrap();
    assert_eq!(space.stats().segments, 2);
    assert_eq!(pages.stats().reserved, 128 << 10);
    space.validate().unwrap();
    let p = space.alloc(layout(100)).unwrap();
    assert_eq!(
        pages.stats().reserves,
        2,
        "served from the initial capacity"
    );
    // SAFETY: live.
    unsafe { space.free(p) };
    assert_eq!(space.stats().segments, 1);
    assert_eq!(space.destroy(), 64 << 10);
    assert_eq!(pages.stats().reserved, 0);
}

#[test]
fn destroy_and_drop_give_everything_back() {
    let pages = Metered::new(HeapPages::new());
    let space = MemorySpace::new(&pages, SMALL).unwrap();
    for size in [10, 1000, 20_000, 40_000] {
        space.alloc(layout(size)).unwrap();
    }
    let reserved = space.stats().reserved;
    assert_eq!(space.destroy(), reserved);
    assert_eq!(pages.stats().reserved, 0);
    assert_eq!(pages.stats().committed, 0);

    let space = MemorySpace::new(&pages, SMALL).unwrap();
    space.alloc(layout(100)).unwrap();
    drop(space);
    assert_eq!(pages.stats().reserved, 0);
}

#[test]
fn walking_finds_every_block_and_every_free_chunk() {
    let mut space = MemorySpace::new(HeapPages::new(), SMALL).unwrap();
    let blocks: Vec<_> = (1..40)
        .map(|i| space.alloc(layout(i * 50)).unwrap())
        .collect();
    for p in blocks.iter().step_by(3) {
        // SAFETY: live, freed once.
        unsafe { space.free(*p) };
    }
    let mut live: Vec<Block> = space.allocations().collect();
    live.sort_by_key(|b| b.ptr);
    let mut expected: Vec<NonNull<u8>> = blocks.iter().skip(1).copied().collect();
    expected.retain(|p| !blocks.iter().step_by(3).any(|q| q == p));
    expected.sort();
    assert_eq!(live.iter().map(|b| b.ptr).collect::<Vec<_>>(), expected);
    let stats = space.stats();
    assert_eq!(live.iter().map(|b| b.size).sum::<usize>(), stats.live_bytes);
    let free: Vec<Block> = space.free_blocks().collect();
    assert_eq!(free.iter().map(|b| b.size).sum::<usize>(), stats.free_bytes);
    // Free chunks never overlap live blocks.
    for f in &free {
        for l in &live {
            let (fs, fe) = (f.ptr.addr().get(), f.ptr.addr().get() + f.size);
            assert!(
                l.ptr.addr().get() + l.size <= fs + 8 || l.ptr.addr().get() >= fe,
                "{f:?} overlaps {l:?}"
            );
        }
    }
    let report = space.validate().unwrap();
    assert_eq!(report.free_blocks, free.len());
    assert_eq!(report.live_blocks, live.len());
    for b in live {
        // SAFETY: the live blocks, each freed once.
        unsafe { space.free(b.ptr) };
    }
    assert_eq!(space.stats().segments, 0);
}

#[test]
fn the_chunk_map_tiles_every_segment_and_matches_the_figures() {
    let mut space = MemorySpace::new(HeapPages::new(), SMALL).unwrap();
    let mut blocks: Vec<_> = (1..if cfg!(miri) { 80 } else { 200 })
        .map(|i| space.alloc(layout((i * 397) % 30_000 + 1)).unwrap())
        .collect();
    // A large block gets a segment of its own.
    blocks.push(space.alloc(layout(SMALL.segment_threshold + 1)).unwrap());
    for p in blocks.iter().step_by(2) {
        // SAFETY: live, freed once.
        unsafe { space.free(*p) };
    }
    let stats = space.stats();
    let chunks: Vec<ChunkInfo> = space.chunks().collect();
    // The chunks of each segment follow one another from its header to its fence.
    let mut segments = 0;
    let mut overhead = 0;
    for (i, c) in chunks.iter().enumerate() {
        let first = i == 0 || chunks[i - 1].segment != c.segment;
        if first {
            segments += 1;
            overhead += c.segment_size;
        } else {
            let prev = &chunks[i - 1];
            assert_eq!(prev.ptr.addr().get() + prev.size, c.ptr.addr().get());
        }
        overhead -= c.size;
        assert!(c.ptr.addr().get() + c.size <= c.segment.addr().get() + c.segment_size);
        assert!(c.decommitted.end <= c.size);
        if c.state == ChunkState::Live {
            assert!(c.decommitted.is_empty());
        }
    }
    assert_eq!(segments, stats.segments);
    // Large blocks have segments of their own: one chunk each.
    let dedicated: Vec<_> = chunks
        .iter()
        .filter(|c| c.kind == SegmentKind::Dedicated)
        .collect();
    assert!(!dedicated.is_empty());
    for c in &dedicated {
        assert_eq!(c.state, ChunkState::Live);
        assert_eq!(chunks.iter().filter(|d| d.segment == c.segment).count(), 1);
    }
    let sum = |state| -> usize {
        chunks
            .iter()
            .filter(|c| c.state == state)
            .map(|c| c.size)
            .sum()
    };
    let live_chunks = chunks
        .iter()
        .filter(|c| c.state == ChunkState::Live)
        .count();
    assert_eq!(live_chunks, stats.live_blocks);
    // A live chunk's head is its overhead; the rest is the block.
    assert_eq!(sum(ChunkState::Live) - 8 * live_chunks, stats.live_bytes);
    assert_eq!(
        sum(ChunkState::Free) + sum(ChunkState::Cached),
        stats.free_bytes
    );
    let decommitted: usize = chunks.iter().map(|c| c.decommitted.len()).sum();
    assert_eq!(stats.reserved - decommitted, stats.committed);
    let report = space.validate().unwrap();
    assert_eq!(overhead, report.overhead - 8 * live_chunks);
    for p in blocks.iter().skip(1).step_by(2) {
        // SAFETY: the blocks still live, each freed once.
        unsafe { space.free(*p) };
    }
    assert_eq!(space.chunks().count(), 0);
}

#[test]
fn realloc_shrinks_and_grows_in_place_and_moves_when_it_must() {
    // No block cache: a freed block must merge with the free space after it.
    let space = MemorySpace::new(HeapPages::new(), SMALL.with_block_cache(0)).unwrap();
    let a = space.alloc(layout(1000)).unwrap();
    let b = space.alloc(layout(1000)).unwrap();
    // SAFETY: `a` and `b` are live; each pointer is replaced by what realloc returns.
    unsafe {
        a.as_ptr().write_bytes(0xA5, 1000);
        // Shrinking splits off a tail that the next grow takes back.
        assert!(space.realloc_in_place(a, 100));
        assert_eq!(space.usable_size(a), 104);
        space.validate().unwrap();
        assert!(space.realloc_in_place(a, 1000));
        assert!(!space.realloc_in_place(a, 2000), "`b` is in the way");
        let moved = space.realloc(a, 2000).unwrap();
        assert_ne!(moved, a);
        // The bytes beyond 100 went with the tail the shrink gave back.
        assert!((0..100).all(|i| moved.as_ptr().add(i).read() == 0xA5));
        // `b` is the last block: it can grow into the rest of the segment.
        space.free(moved);
        assert!(space.realloc_in_place(b, 30_000));
        space.validate().unwrap();
        // Beyond the segment, realloc moves it to a dedicated one.
        b.as_ptr().write(7);
        let big = space.realloc(b, 100_000).unwrap();
        assert_eq!(big.as_ptr().read(), 7);
        assert_eq!(space.stats().segments, 1, "the ordinary segment emptied");
        assert!(
            space.realloc_in_place(big, 99_000),
            "a dedicated block resizes in place within a page"
        );
        assert!(
            !space.realloc_in_place(big, 50_000),
            "a real shrink of a dedicated block must move"
        );
        let reserved = space.stats().reserved;
        let half = space.realloc(big, 50_000).unwrap();
        assert_eq!(half.as_ptr().read(), 7);
        assert!(
            space.stats().reserved < reserved,
            "the big segment went back"
        );
        space.validate().unwrap();
        space.free(half);
    }
    assert_eq!(space.stats().segments, 0);
}

#[test]
fn aligned_and_offset_blocks_land_where_asked() {
    let space = MemorySpace::new(HeapPages::new(), SMALL).unwrap();
    let mut live = Vec::new();
    for align in [32, 64, 256, 4096, 8192, 65536, 1 << 17] {
        for size in [1, 100, 5000] {
            let p = space
                .alloc(Layout::from_size_align(size, align).unwrap())
                .unwrap();
            assert_eq!(p.addr().get() % align, 0, "size {size} align {align}");
            live.push(p);
            let q = space
                .alloc_at_offset(Layout::from_size_align(size, align).unwrap(), 48)
                .unwrap();
            assert_eq!(
                (q.addr().get() + 48) % align,
                0,
                "size {size} align {align} offset 48"
            );
            live.push(q);
            space.validate().unwrap();
        }
    }
    // An offset no 16-aligned block can meet is refused.
    assert!(
        space
            .alloc_at_offset(Layout::from_size_align(8, 64).unwrap(), 8)
            .is_err()
    );
    // A zero-size block at an offset is dangling and aligned there.
    let z = space
        .alloc_at_offset(Layout::from_size_align(0, 64).unwrap(), 16)
        .unwrap();
    assert_eq!((z.addr().get() + 16) % 64, 0);
    for p in live {
        // SAFETY: live, freed once.
        unsafe { space.free(p) };
    }
    space.validate().unwrap();
    assert_eq!(space.stats().segments, 0);
}

#[test]
fn the_configuration_is_checked() {
    use bento_space::SpaceError;
    let pages = HeapPages::new();
    // A power-of-two page below the source's is raised to it.
    let raised = MemorySpace::new(&pages, SpaceConfig::DEFAULT.with_page_size(1024)).unwrap();
    assert_eq!(raised.config().page_size, 4096);
    let bad = [
        SpaceConfig::DEFAULT.with_page_size(5000),
        SpaceConfig::DEFAULT.with_segment_granularity(3 << 20),
        SpaceConfig::DEFAULT.with_segment_granularity(128 << 10),
        SpaceConfig::DEFAULT.with_segment_threshold(0),
        SpaceConfig::DEFAULT.with_segment_threshold(1 << 20),
        SpaceConfig::DEFAULT.with_initial_capacity(usize::MAX),
    ];
    for config in bad {
        let err = MemorySpace::new(&pages, config).unwrap_err();
        assert!(!matches!(err, SpaceError::Pages(_)), "{config:?}: {err}");
    }
    assert!(MemorySpace::new(&pages, SpaceConfig::default()).is_ok());
    let mut tiny = [0u8; 64];
    // SAFETY: `tiny` outlives the attempt (which fails).
    let err = unsafe {
        MemorySpace::<HeapPages>::with_base(
            NonNull::new(tiny.as_mut_ptr()).unwrap(),
            64,
            None,
            SMALL,
        )
    }
    .unwrap_err();
    assert!(matches!(err, SpaceError::BaseSize { .. }));
}

#[test]
fn a_base_segment_stays_and_growth_goes_to_the_source() {
    let mut buf = vec![0u64; 1024];
    let base = NonNull::new(buf.as_mut_ptr().cast::<u8>()).unwrap();
    let pages = Metered::new(HeapPages::new());
    // SAFETY: `buf` outlives the space and is reached only through it.
    let space = unsafe { MemorySpace::with_base(base, 8192, Some(&pages), SMALL) }.unwrap();
    assert_eq!(space.stats().segments, 1);
    let small: Vec<_> = (0..10)
        .map(|i| space.alloc(layout(100 + i * 40)).unwrap())
        .collect();
    assert_eq!(pages.stats().reserves, 0, "the base segment serves these");
    assert!(
        small
            .iter()
            .all(|p| buf.as_ptr_range().contains(&p.as_ptr().cast_const().cast()))
    );
    let big = space.alloc(layout(6000)).unwrap();
    assert_eq!(
        pages.stats().reserves,
        1,
        "no room left in the base: an ordinary segment"
    );
    space.validate().unwrap();
    // SAFETY: live blocks, each freed once.
    unsafe {
        space.free(big);
        for p in small {
            space.free(p);
        }
    }
    assert_eq!((space.stats().segments, pages.stats().reserved), (1, 0));
    // The base's usable bytes (8192, less any padding to 16: Miri's allocations may
    // be only 8-aligned) hold the header, one free chunk and the fence.
    let stats = space.stats();
    assert_eq!(
        stats.free_bytes,
        stats.committed - 64 - 16,
        "the base is one free chunk again"
    );
    space.validate().unwrap();
    drop(space);
    drop(buf);
}

#[test]
fn a_hole_of_the_size_asked_is_reused_before_fresh_pages() {
    // No caches: every commit reaches the source.
    let pages = Metered::new(HeapPages::new());
    let config = SpaceConfig::DEFAULT
        .with_commit_cache(0)
        .with_block_cache(0);
    let space = MemorySpace::new(&pages, config).unwrap();
    let _keep = space.alloc(layout(64)).unwrap();
    for size in [256 << 10, 100_000, 5000] {
        let a = space.alloc(layout(size)).unwrap();
        let fence = space.alloc(layout(64)).unwrap();
        let peak = space.stats().max_committed;
        // SAFETY: live, freed once: a hole of `a`'s chunk between `_keep` (or the
        // last round's hole, merged) and `fence`, and the segment's free tail above.
        unsafe { space.free(a) };
        let again = space.alloc(layout(size)).unwrap();
        assert_eq!(again, a, "{size}: the hole of the same size was skipped");
        // The hole's own pages are committed again, and nothing beyond them.
        assert_eq!(
            space.stats().max_committed,
            peak,
            "{size}: fresh pages committed"
        );
        space.validate().unwrap();
        // SAFETY: live, freed once.
        unsafe {
            space.free(again);
            space.free(fence);
        }
    }
    assert_eq!(space.stats().segments, 1);
}

/// A space that empties and fills again (LIFO batches of 64-byte blocks, each batch
/// emptying it) gives its segment back at every last free, and after the first
/// batch makes no call to its source: the commit cache parks the pages and keeps the
/// released reservation as a spare for the next segment. `trim` gives both back.
#[test]
fn a_space_that_empties_every_batch_makes_no_source_call_after_warm_up() {
    let pages = Metered::new(HeapPages::new());
    let space = MemorySpace::new(&pages, BY_FRAMES).unwrap();
    let batch = |space: &MemorySpace<&Metered<HeapPages>>| {
        let blocks: Vec<_> = (0..100).map(|_| space.alloc(layout(64)).unwrap()).collect();
        for &p in blocks.iter().rev() {
            // SAFETY: live blocks of this batch, each freed once.
            unsafe { space.free(p) };
        }
        assert_eq!(space.stats().segments, 0, "the empty segment went back");
        space.validate().unwrap();
    };
    batch(&space);
    let warm = source_calls(&pages);
    let rounds = if cfg!(miri) { 1 } else { 100 };
    for _ in 0..rounds {
        batch(&space);
    }
    assert_eq!(
        source_calls(&pages),
        warm,
        "a call to the source after warm-up"
    );
    let s = space.stats();
    assert_eq!((s.reserved, s.committed, s.cache.spares), (0, 0, 1));
    assert!(s.resident <= 64 << 10, "{} bytes held", s.resident);
    // trim gives back the parked pages and the spare: only the cache's table
    // stays with the source.
    space.trim();
    let s = space.stats();
    assert_eq!((s.resident, s.cache.spares), (0, 0));
    assert_eq!(pages.stats().reserved, table_bytes(s.cache.capacity, 4096));
}

/// A frame of 10k 16-byte blocks freed in the order made, repeated: after the first
/// frame the space makes no call to its source, though its one segment goes back
/// at every frame's end (a space of at most two segments may park half a segment).
#[test]
fn frames_that_empty_the_space_make_no_source_call_after_warm_up() {
    let pages = Metered::new(HeapPages::new());
    let space = MemorySpace::new(&pages, BY_FRAMES).unwrap();
    let n = if cfg!(miri) { 100 } else { 10_000 };
    let frame = |space: &MemorySpace<&Metered<HeapPages>>| {
        let blocks: Vec<_> = (0..n).map(|_| space.alloc(layout(16)).unwrap()).collect();
        for &p in &blocks {
            // SAFETY: live blocks of this frame, each freed once.
            unsafe { space.free(p) };
        }
        assert_eq!(space.stats().segments, 0, "the empty segment went back");
    };
    frame(&space);
    let warm = source_calls(&pages);
    // The debug checks walk the segment on every free, so fewer frames there.
    let frames = if cfg!(miri) {
        1
    } else if cfg!(debug_assertions) {
        2
    } else {
        20
    };
    for _ in 0..frames {
        frame(&space);
    }
    space.validate().unwrap();
    assert_eq!(
        source_calls(&pages),
        warm,
        "a call to the source after warm-up"
    );
    assert!(space.stats().resident <= 1 << 20);
}

/// The source's reserve, release, commit and decommit calls so far.
fn source_calls(pages: &Metered<HeapPages>) -> [usize; 4] {
    let s = pages.stats();
    [s.reserves, s.releases, s.commits, s.decommits]
}
