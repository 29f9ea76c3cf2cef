//! The block cache: freed small blocks kept whole for the next request of their class,
//! within their limits, and never at the cost of a segment's release.

use core::alloc::Layout;
use core::ptr::NonNull;

use bento_pages::{HeapPages, Metered};
use bento_space::{Block, MemorySpace, Rule};

use crate::SMALL;

fn layout(size: usize) -> Layout {
    Layout::from_size_align(size, 8).unwrap()
}

/// The chunk of the block at `p` (its tag is 16 bytes before the payload).
fn chunk(p: NonNull<u8>) -> NonNull<u8> {
    // SAFETY: every payload lies 16 bytes into its chunk.
    unsafe { p.sub(16) }
}

#[test]
fn a_freed_block_is_handed_out_whole_to_the_next_request_of_its_class() {
    let mut space = MemorySpace::new(HeapPages::new(), SMALL).unwrap();
    let a = space.alloc(layout(100)).unwrap();
    let b = space.alloc(layout(100)).unwrap();
    // SAFETY: `a` is live, freed once.
    unsafe { space.free(a) };
    let s = space.stats();
    assert_eq!((s.cached_blocks, s.cached_bytes), (1, 112));
    assert_eq!((s.live_blocks, s.live_bytes), (1, 104));
    let report = space.validate().unwrap();
    assert_eq!((report.cached_blocks, report.cached_bytes), (1, 112));
    assert_eq!((report.live_blocks, report.live_bytes), (1, 104));
    assert_eq!(report.free_bytes, s.free_bytes);
    // The walkers call the cached block free, not live.
    let live: Vec<Block> = space.allocations().collect();
    assert_eq!(live, [Block { ptr: b, size: 104 }]);
    assert!(space.free_blocks().any(|f| f
        == Block {
            ptr: chunk(a),
            size: 112
        }));
    // A request of the same class (97 to 104 bytes) takes it back as it was.
    assert_eq!(space.alloc(layout(97)).unwrap(), a);
    assert_eq!(space.stats().cached_blocks, 0);
    space.validate().unwrap();
    // SAFETY: live blocks, each freed once.
    unsafe {
        space.dealloc(a, layout(97));
        space.dealloc(b, layout(100));
    }
    assert_eq!(space.stats().segments, 0);
}

#[test]
fn a_class_may_take_the_whole_cache_up_to_its_byte_limit() {
    // The 40 blocks of 112 bytes fit the cache's floor of 64 KiB; a limit of 1000
    // bytes keeps 8 of them.
    for (limit, kept) in [(SMALL.block_cache, 40), (1000, 8), (0, 0)] {
        let space = MemorySpace::new(HeapPages::new(), SMALL.with_block_cache(limit)).unwrap();
        let anchor = space.alloc(layout(100)).unwrap();
        let blocks: Vec<_> = (0..40).map(|_| space.alloc(layout(100)).unwrap()).collect();
        for p in &blocks {
            // SAFETY: each block is live and freed once.
            unsafe { space.dealloc(*p, layout(100)) };
        }
        let s = space.stats();
        assert_eq!(s.cached_blocks, kept, "limit {limit}");
        assert_eq!(s.cached_bytes, kept * 112, "limit {limit}");
        assert_eq!(s.live_blocks, 1);
        space.validate().unwrap();
        // SAFETY: live.
        unsafe { space.free(anchor) };
        assert_eq!(space.stats().segments, 0, "limit {limit}");
    }
}

#[test]
fn the_last_block_of_a_segment_takes_its_cached_blocks_with_it() {
    let pages = Metered::new(HeapPages::new());
    let space = MemorySpace::new(&pages, SMALL).unwrap();
    let small: Vec<_> = (0..12)
        .map(|i| space.alloc(layout(24 + 40 * i)).unwrap())
        .collect();
    let last = space.alloc(layout(3000)).unwrap();
    for (i, p) in small.iter().enumerate() {
        // SAFETY: each block is live and freed once, with its layout.
        unsafe { space.dealloc(*p, layout(24 + 40 * i)) };
    }
    assert_eq!(space.stats().cached_blocks, 12);
    assert_eq!(pages.stats().reserved, 64 << 10);
    // The segment's one block in use goes: the cached blocks leave the cache and
    // the segment goes back to the source in the same call.
    // SAFETY: live.
    unsafe { space.dealloc(last, layout(3000)) };
    let s = space.stats();
    assert_eq!((s.segments, s.cached_blocks, s.reserved), (0, 0, 0));
    assert_eq!(pages.stats().reserved, 0);
    space.validate().unwrap();
}

#[test]
fn trim_empties_the_block_cache_and_the_freed_chunks_merge() {
    let mut space = MemorySpace::new(HeapPages::new(), SMALL).unwrap();
    let blocks: Vec<_> = (0..8).map(|_| space.alloc(layout(200)).unwrap()).collect();
    let keep = space.alloc(layout(200)).unwrap();
    for p in &blocks {
        // SAFETY: each block is live and freed once.
        unsafe { space.free(*p) };
    }
    assert_eq!(space.stats().cached_blocks, 8);
    space.trim();
    let s = space.stats();
    assert_eq!((s.cached_blocks, s.cached_bytes, s.live_blocks), (0, 0, 1));
    // The eight freed blocks became one free chunk before `keep`, and one after.
    let free: Vec<Block> = space.free_blocks().collect();
    assert_eq!(free.len(), 2, "{free:?}");
    assert_eq!(free[0].size, 8 * 208);
    space.validate().unwrap();
    // SAFETY: live.
    unsafe { space.free(keep) };
    assert_eq!(space.stats().segments, 0);
}

#[test]
fn a_base_segment_caches_its_last_block_too() {
    let mut buf = vec![0u8; 16 << 10];
    let base = NonNull::new(buf.as_mut_ptr()).unwrap();
    // SAFETY: `buf` outlives the space and is used only through it.
    let space =
        unsafe { MemorySpace::<HeapPages>::with_base(base, buf.len(), None, SMALL) }.unwrap();
    let p = space.alloc(layout(64)).unwrap();
    // SAFETY: live, freed once with its layout.
    unsafe { space.dealloc(p, layout(64)) };
    // The base segment is never released, so its last block may stay cached.
    let s = space.stats();
    assert_eq!((s.segments, s.cached_blocks, s.live_blocks), (1, 1, 0));
    space.validate().unwrap();
    assert_eq!(space.alloc(layout(64)).unwrap(), p);
    // SAFETY: live.
    unsafe { space.free(p) };
    space.trim();
    assert_eq!(
        space.stats().free_bytes,
        space.validate().unwrap().free_bytes
    );
    drop(space);
}

#[test]
fn validate_names_a_broken_cache_entry() {
    let space = MemorySpace::new(HeapPages::new(), SMALL).unwrap();
    let a = space.alloc(layout(100)).unwrap();
    let b = space.alloc(layout(100)).unwrap();
    // SAFETY: `a` is live, freed once.
    unsafe { space.free(a) };
    // A write after free over the cached block's back link (its second word):
    // validate says which class holds a bad entry, and leaves no mark behind.
    let link = a.as_ptr().cast::<usize>().wrapping_add(1);
    // SAFETY: inside the cached chunk, which stays in the space; the write simulates
    // a stray write by the program.
    let old = unsafe { link.replace(0x5a5a_5a50) };
    let err = space.validate().unwrap_err();
    assert!(matches!(err.rule, Rule::CacheEntry { .. }), "{err}");
    // SAFETY: restores the word.
    unsafe { link.write(old) };
    space.validate().unwrap();
    // SAFETY: live blocks, each freed once.
    unsafe { space.free(b) };
    assert_eq!(space.stats().segments, 0);
}

#[cfg(debug_assertions)]
mod misuse {
    use super::*;

    #[test]
    fn a_double_free_of_a_cached_block_is_reported() {
        let mut space = MemorySpace::new(HeapPages::new(), SMALL).unwrap();
        space.set_misuse_hook(crate::record);
        let a = space.alloc(layout(100)).unwrap();
        let b = space.alloc(layout(100)).unwrap();
        // SAFETY: `a` is live the first time; the second free and the `dealloc`
        // are the misuse under test, which the debug checks refuse.
        unsafe {
            space.free(a);
            space.free(a);
            space.dealloc(a, layout(100));
        }
        crate::assert_double_frees(2);
        assert_eq!(space.stats().cached_blocks, 1);
        space.validate().unwrap();
        // SAFETY: live.
        unsafe { space.free(b) };
        assert_eq!(space.stats().segments, 0);
    }
}

#[test]
#[cfg_attr(
    miri,
    ignore = "8 MB of blocks; a policy stat, its code paths run in the other cache tests"
)]
fn the_cache_holds_a_share_of_the_bytes_in_use() {
    // 1 MiB allowed by the configuration, but a heap of about 8 MiB in use keeps at
    // most 1/128 of it (64 KiB) cached, and a small one 64 KiB.
    let space = MemorySpace::new(HeapPages::new(), bento_space::SpaceConfig::DEFAULT).unwrap();
    let blocks: Vec<_> = (0..4000)
        .map(|_| space.alloc(layout(2000)).unwrap())
        .collect();
    for b in blocks.iter().step_by(2) {
        // SAFETY: live, freed once.
        unsafe { space.free(*b) };
    }
    let s = space.stats();
    let live = s.live_bytes + s.cached_bytes;
    assert!(s.cached_blocks > 0);
    assert!(
        s.cached_bytes <= (live / 128).max(64 << 10) + 2048,
        "{} cached of {live} in use",
        s.cached_bytes
    );
    space.validate().unwrap();
    for b in blocks.iter().skip(1).step_by(2) {
        // SAFETY: live, freed once.
        unsafe { space.free(*b) };
    }
    assert_eq!(space.stats().segments, 0);
}

#[test]
fn blocks_never_written_are_told_from_cached_ones_by_their_tags() {
    // Blocks whose bytes were never written (uninitialised to Miri), freed beside
    // cached ones: the debug checks of `free`, the walkers and `validate` tell them
    // apart by the tags alone, never reading a payload.
    let mut space = MemorySpace::new(HeapPages::new(), SMALL).unwrap();
    let blocks: Vec<_> = (0..12)
        .map(|i| space.alloc(layout(24 + 40 * i)).unwrap())
        .collect();
    for p in blocks.iter().step_by(2) {
        // SAFETY: each block is live and freed once.
        unsafe { space.free(*p) };
    }
    let s = space.stats();
    assert_eq!((s.cached_blocks, s.live_blocks), (6, 6));
    let live: Vec<Block> = space.allocations().collect();
    assert_eq!(
        live.iter().map(|b| b.ptr).collect::<Vec<_>>(),
        blocks
            .iter()
            .skip(1)
            .step_by(2)
            .copied()
            .collect::<Vec<_>>()
    );
    assert_eq!(space.free_blocks().filter(|f| f.size < 1024).count(), 6);
    let report = space.validate().unwrap();
    assert_eq!((report.cached_blocks, report.live_blocks), (6, 6));
    for p in blocks.iter().skip(1).step_by(2) {
        // SAFETY: the blocks still live, each freed once.
        unsafe { space.free(*p) };
        space.validate().unwrap();
    }
    assert_eq!(space.stats().segments, 0);
}
