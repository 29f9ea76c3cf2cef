#![cfg(not(miri))]
//! `MemorySpace::probe`: the O(1) check of a pointer freed without its layout passes
//! every block in use, and fails a block freed already, however it was freed, and a
//! pointer inside a block.

use core::alloc::Layout;
use core::mem::MaybeUninit;
use core::ptr::NonNull;

use bento_align::Alignment;
use bento_pages::FixedPages;
use bento_space::{MemorySpace, Misuse, SpaceConfig};

/// A space over a buffer of `FixedPages`, which keep their bytes when decommitted
/// and when a segment is released (as parked pages of the OS do), and the test that
/// an address lies in that buffer (all of it readable).
fn fixed() -> (MemorySpace<FixedPages>, impl Fn(usize) -> bool + Copy) {
    let buf: &'static mut [MaybeUninit<u8>] =
        Box::leak(vec![MaybeUninit::uninit(); 8 << 20].into_boxed_slice());
    let range = buf.as_ptr_range();
    let (lo, hi) = (range.start.addr(), range.end.addr());
    let pages = FixedPages::new(buf, Alignment::new(4096).unwrap());
    let config = SpaceConfig::DEFAULT
        .with_page_size(4096)
        .with_segment_granularity(256 << 10)
        .with_segment_threshold(64 << 10);
    let space = MemorySpace::new(pages, config).unwrap();
    (space, move |a: usize| (lo..hi).contains(&a))
}

#[test]
fn every_block_in_use_passes_and_a_pointer_inside_one_fails() {
    let (space, readable) = fixed();
    let mut live: Vec<(NonNull<u8>, usize)> = Vec::new();
    for align in [8, 16, 64, 4096, 32 << 10] {
        for size in [1, 24, 100, 1000, 5000, 100 << 10] {
            let p = space
                .alloc(Layout::from_size_align(size, align).unwrap())
                .unwrap();
            // SAFETY: the block's own bytes.
            unsafe { p.write_bytes(0x41, size) };
            live.push((p, size));
        }
    }
    // Some freed between them: neighbours free, merged and cached.
    for (p, _) in live.iter().skip(1).step_by(3) {
        // SAFETY: live, freed once.
        unsafe { space.free(*p) };
    }
    for (i, &(p, size)) in live.iter().enumerate() {
        // SAFETY: `readable` holds for the space's buffer only, all of it readable.
        let probed = unsafe { space.probe(p, readable) };
        if i % 3 == 1 {
            assert!(probed.is_err(), "{p:p}, freed, passed");
            continue;
        }
        assert!(
            probed.is_ok_and(|usable| usable >= size),
            "{p:p}: {probed:?}"
        );
        if size >= 32 {
            // SAFETY: as above.
            let inside = unsafe { space.probe(p.add(16), readable) };
            assert!(matches!(inside, Err(Misuse::Interior { .. })), "{inside:?}");
        }
    }
    for (p, _) in live.iter().step_by(3).chain(live.iter().skip(2).step_by(3)) {
        // SAFETY: live, freed once.
        unsafe { space.free(*p) };
    }
    space.validate().unwrap();
}

#[test]
fn a_block_freed_last_in_its_segment_never_reads_as_in_use() {
    let (space, readable) = fixed();
    // Bytes in use elsewhere (a dedicated segment), so that the block cache has room.
    let big = Layout::from_size_align(2 << 20, 8).unwrap();
    let keep = space.alloc(big).unwrap();
    let layout = Layout::from_size_align(1000, 8).unwrap();
    let blocks: Vec<_> = (0..100).map(|_| space.alloc(layout).unwrap()).collect();
    let target = blocks[50];
    // Every other block, then the target's neighbours (into the block cache), then
    // the target: the free that empties the segment walks it and releases it.
    let order = blocks
        .iter()
        .copied()
        .filter(|&p| p != target && p != blocks[49] && p != blocks[51])
        .chain([blocks[49], blocks[51], target]);
    for p in order {
        // SAFETY: live, freed once.
        unsafe { space.free(p) };
    }
    assert_eq!(space.stats().segments, 1, "the segment went back");
    // Its bytes are still there (the buffer keeps them): the freed block's tag says
    // free, so a second free of it fails the probe.
    // SAFETY: the word before the block lies in the buffer.
    let head = unsafe { target.cast::<usize>().sub(1).read() };
    assert_eq!(
        head & 1,
        0,
        "the tag of a freed block says in use: {head:#x}"
    );
    // SAFETY: `readable` holds for the buffer only.
    assert!(unsafe { space.probe(target, readable) }.is_err());
    // SAFETY: live, with its layout.
    unsafe { space.dealloc(keep, big) };
}
