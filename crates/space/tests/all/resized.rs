//! Blocks resized in place and then freed with the layout they were resized to: the
//! free must find the block's real size and segment, whatever the layout says (a
//! block dedicated by its alignment or size can be freed with a small layout of
//! alignment 16 or less). Each test is a sequence of public calls that lost memory or
//! crashed when the layout was trusted.

use core::alloc::Layout;
use core::mem::MaybeUninit;
use core::ptr::NonNull;

use allocator_api2::alloc::Allocator;
use bento_align::Alignment;
use bento_pages::{FixedPages, HeapPages, Metered, PageSource};
use bento_space::{MemorySpace, SpaceConfig};

use crate::SMALL;

fn layout(size: usize, align: usize) -> Layout {
    Layout::from_size_align(size, align).unwrap()
}

/// A heap-backed source with 64 KiB pages (the default configuration's), counted.
fn heap_64k() -> Metered<HeapPages> {
    Metered::new(HeapPages::with_page_size(Alignment::new(64 << 10).unwrap()))
}

/// Checks that `space` is empty, valid, and holds nothing of `pages` but the commit
/// cache's slot table (what `pages` had reserved when the space was made).
fn assert_all_back<P: PageSource>(
    space: &MemorySpace<P>,
    pages: &Metered<impl PageSource>,
    table: usize,
) {
    space.validate().unwrap();
    space.trim();
    space.validate().unwrap();
    let s = space.stats();
    assert_eq!((s.live_blocks, s.segments, s.reserved), (0, 0, 0), "{s:?}");
    assert_eq!(pages.stats().reserved, table, "every reservation went back");
}

#[test]
fn a_block_dedicated_by_its_alignment_shrunk_in_place_frees_with_the_small_layout() {
    let pages = heap_64k();
    let space = MemorySpace::new(&pages, SpaceConfig::DEFAULT).unwrap();
    let table = pages.stats().reserved;
    let a = &space;
    let p = a.allocate(layout(16, 1 << 20)).unwrap().cast::<u8>();
    // SAFETY: `p` is live with the layout it was allocated with, then with the one
    // it was shrunk to.
    unsafe {
        let q = a
            .shrink(p, layout(16, 1 << 20), layout(16, 16))
            .unwrap()
            .cast::<u8>();
        assert_eq!(q, p, "shrunk in place");
        a.deallocate(q, layout(16, 16));
    }
    assert_all_back(&space, &pages, table);
}

#[test]
#[cfg_attr(miri, ignore = "FixedPages needs a leaked static buffer")]
fn a_block_dedicated_by_its_alignment_grown_in_place_over_fixed_pages_goes_back() {
    // Memory that is not zeroed: each word holds its own index, so a word read as
    // a segment header's count of blocks in use exceeds the next (its cached ones).
    let buf: Vec<MaybeUninit<u8>> = (0..(4usize << 20) / 8)
        .flat_map(|i| i.to_ne_bytes())
        .map(MaybeUninit::new)
        .collect();
    let pages = Metered::new(FixedPages::new(
        Box::leak(buf.into_boxed_slice()),
        Alignment::new(4096).unwrap(),
    ));
    let space = MemorySpace::new(&pages, SMALL).unwrap();
    let table = pages.stats().reserved;
    let keep = space.alloc(layout(64, 8)).unwrap();
    let a = &space;
    let p = a.allocate(layout(16, 128 << 10)).unwrap().cast::<u8>();
    // SAFETY: as above.
    unsafe {
        let q = a
            .grow(p, layout(16, 128 << 10), layout(32, 8))
            .unwrap()
            .cast::<u8>();
        assert_eq!(q, p, "grown in place");
        a.deallocate(q, layout(32, 8));
    }
    space.validate().unwrap();
    assert_eq!(space.stats().segments, 1, "the dedicated segment went back");
    // SAFETY: live.
    unsafe { space.free(keep) };
    assert_all_back(&space, &pages, table);
}

#[test]
fn a_block_aligned_at_an_offset_reallocated_in_place_frees_with_its_size() {
    // 64 KiB segments: the alignment gives the block a dedicated segment, and its
    // chunk lies on a multiple of the granularity.
    let pages = Metered::new(HeapPages::new());
    let space = MemorySpace::new(&pages, SMALL).unwrap();
    let table = pages.stats().reserved;
    let p = space.alloc_at_offset(layout(48, 64 << 10), 65520).unwrap();
    // SAFETY: `p` is live, 48 bytes; resized in place, then freed with its size.
    unsafe {
        let q = space.realloc(p, 48).unwrap();
        assert_eq!(q, p);
        // User data that would read as a segment header if the payload were taken
        // for one.
        q.cast::<[u64; 4]>().as_ptr().write_unaligned([1, 2, 5, 0]);
        space.dealloc(q, layout(48, 16));
    }
    assert_all_back(&space, &pages, table);
}

#[test]
fn a_block_dedicated_by_its_size_freed_with_the_size_it_was_grown_to() {
    let pages = heap_64k();
    let space = MemorySpace::new(&pages, SpaceConfig::DEFAULT).unwrap();
    let table = pages.stats().reserved;
    let p = space.alloc(layout(1 << 20, 8)).unwrap();
    // SAFETY: `p` is live; it holds 8 bytes already, so the grow changes nothing and
    // its layout is now {8, 8}.
    unsafe {
        assert!(space.try_grow_in_place(p, 8));
        space.dealloc(p, layout(8, 8));
    }
    assert_all_back(&space, &pages, table);
}

#[test]
fn the_block_cache_files_a_block_by_its_real_size() {
    let pages = heap_64k();
    let config = SpaceConfig::DEFAULT.with_segment_threshold(512 << 10);
    let space = MemorySpace::new(&pages, config).unwrap();
    let table = pages.stats().reserved;
    // Two 400 KB blocks per segment; one small block keeps each segment in use.
    let bigs: Vec<NonNull<u8>> = (0..16)
        .map(|_| space.alloc(layout(400_000, 8)).unwrap())
        .collect();
    let keep = space.alloc(layout(8, 8)).unwrap();
    for &big in &bigs {
        // SAFETY: live; the grow changes nothing, so the layout is {1, 1}.
        unsafe {
            assert!(space.try_grow_in_place(big, 1));
            space.dealloc(big, layout(1, 1));
        }
    }
    let s = space.stats();
    assert!(
        s.cached_bytes <= config.block_cache,
        "the cache holds {} bytes against its {}",
        s.cached_bytes,
        config.block_cache
    );
    space.validate().unwrap();
    let small = space.alloc(layout(1, 1)).unwrap();
    // SAFETY: live.
    unsafe {
        assert!(
            space.usable_size(small) < 64,
            "a small request got a big block"
        );
        space.free(small);
        space.free(keep);
    }
    assert_all_back(&space, &pages, table);
}

#[test]
fn trim_gives_back_a_segment_it_empties() {
    // A segment whose blocks are all cached but one, then that one freed: the free
    // drains the segment's cached blocks and the segment goes back; trim afterwards
    // finds nothing of it.
    let pages = heap_64k();
    let space = MemorySpace::new(&pages, SpaceConfig::DEFAULT).unwrap();
    let table = pages.stats().reserved;
    let blocks: Vec<NonNull<u8>> = (0..8)
        .map(|_| space.alloc(layout(100, 8)).unwrap())
        .collect();
    for &b in &blocks[1..] {
        // SAFETY: live.
        unsafe { space.dealloc(b, layout(100, 8)) };
    }
    assert_eq!(space.stats().cached_blocks, 7);
    space.trim();
    space.validate().unwrap();
    assert_eq!(space.stats().cached_blocks, 0);
    // SAFETY: live.
    unsafe { space.dealloc(blocks[0], layout(100, 8)) };
    assert_all_back(&space, &pages, table);
}

#[test]
#[cfg(debug_assertions)]
fn a_layout_larger_than_the_block_is_reported() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static SEEN: AtomicUsize = AtomicUsize::new(0);
    let mut space =
        MemorySpace::new(HeapPages::new(), SpaceConfig::DEFAULT.with_page_size(4096)).unwrap();
    space.set_misuse_hook(|m| {
        assert!(matches!(m, bento_space::Misuse::WrongLayout { .. }), "{m}");
        assert!(m.to_string().contains("cannot have"), "{m}");
        SEEN.fetch_add(1, Ordering::Relaxed);
    });
    let p = space.alloc(layout(100, 8)).unwrap();
    // SAFETY: live; the two bad frees are refused and the block stays live.
    unsafe {
        space.dealloc(p, layout(4096, 8));
        space.dealloc(p, layout(100, 4096));
        assert_eq!(SEEN.load(Ordering::Relaxed), 2);
        assert_eq!(space.stats().live_blocks, 1);
        space.dealloc(p, layout(100, 8));
    }
    assert_eq!(space.stats().live_blocks, 0);
}
