//! Runs: a class region's blocks fill runs, partial runs take frees back, an emptied
//! run is kept (two a region) or goes idle, a span goes back at a trim once its runs
//! are all idle, and
//! a free without a layout that lands in a run wrongly (inside a block, beyond what
//! was carved, twice, in an idle run or a released span) is reported and changes
//! nothing.

use core::alloc::Layout;

use bento_common::{CommonAllocator, Misuse, RegionStats};
use bento_pages::HeapPages;

use crate::{heap, seen, shape};

/// The block size of the region under test: the 256-byte small class natively, the
/// 2 KiB medium bin under Miri (a run of 31 blocks rather than 255, the same code).
const BLOCK: usize = if cfg!(miri) { 2048 } else { 256 };
/// Blocks in a 64 KiB run (its header takes the first 128 bytes).
const PER_RUN: usize = ((64 << 10) - 128) / BLOCK;

/// An allocator whose spans hold at most two runs: one run, then two, two...
fn two_run_spans() -> CommonAllocator<HeapPages> {
    CommonAllocator::with_config(shape().with_small_segment(128 << 10).with_pages(heap()))
}

fn class(common: &CommonAllocator<HeapPages>) -> RegionStats {
    let s = common.validate().unwrap();
    *s.regions()
        .iter()
        .find(|r| r.block == BLOCK)
        .expect("a region of BLOCK-byte blocks")
}

#[test]
fn runs_fill_take_frees_back_empty_and_are_reused() {
    let common = two_run_spans();
    let layout = Layout::from_size_align(BLOCK, 8).unwrap();
    let n = 5 * PER_RUN + 10;
    let blocks: Vec<_> = (0..n).map(|_| common.alloc(layout).unwrap()).collect();
    let r = class(&common);
    // Spans of 1, 2, 2 and 2 runs, the last with one idle.
    assert_eq!((r.live_blocks, r.runs, r.segments), (n, 6, 4), "{r:?}");
    assert_eq!((r.committed, r.reserved), (6 << 16, 7 << 16), "{r:?}");
    // Every other block: each run partial, none empties.
    for (i, p) in blocks.iter().enumerate().filter(|(i, _)| i % 2 == 0) {
        // SAFETY: live with `layout`, freed once.
        unsafe { common.dealloc(*p, layout) };
        if i % 97 == 0 {
            class(&common);
        }
    }
    let r = class(&common);
    assert_eq!((r.live_blocks, r.runs), (n - n.div_ceil(2), 6));
    // The rest of the first three runs: two are kept empty, the third goes idle.
    for p in blocks.iter().take(3 * PER_RUN).skip(1).step_by(2) {
        // SAFETY: as above.
        unsafe { common.dealloc(*p, layout) };
    }
    let r = class(&common);
    assert_eq!(r.runs, 5, "{r:?}");
    assert!(
        r.committed < r.reserved,
        "the idle run is decommitted: {r:?}"
    );
    // The freed blocks are used again before any new run is made.
    let again: Vec<_> = (0..2 * PER_RUN)
        .map(|_| common.alloc(layout).unwrap())
        .collect();
    let r = class(&common);
    assert!(r.runs <= 6 && r.segments == 4, "{r:?}");
    // The blocks still live: the odd ones of the last runs.
    let odd = blocks
        .iter()
        .enumerate()
        .skip(3 * PER_RUN)
        .filter(|(i, _)| i % 2 == 1);
    for p in odd.map(|(_, p)| p).chain(&again) {
        // SAFETY: the live blocks, each freed once.
        unsafe { common.dealloc(*p, layout) };
    }
    let r = class(&common);
    assert_eq!(r.live_blocks, 0);
    assert!(r.runs <= 2, "two empty runs are kept: {r:?}");
    common.trim();
    let r = class(&common);
    assert_eq!((r.runs, r.segments, r.committed, r.reserved), (0, 0, 0, 0));
}

#[test]
fn a_span_goes_back_with_its_last_run() {
    let common = two_run_spans();
    let layout = Layout::from_size_align(BLOCK, 8).unwrap();
    // Three spans: runs A | B C | D, with one block kept in D.
    let blocks: Vec<_> = (0..3 * PER_RUN + 1)
        .map(|_| common.alloc(layout).unwrap())
        .collect();
    assert_eq!(class(&common).segments, 3);
    // Emptying A, B and C keeps two of them and makes one idle; a trim makes the
    // kept ones idle too: the first two spans go back, the third keeps D.
    for p in &blocks[..3 * PER_RUN] {
        // SAFETY: live with `layout`, freed once.
        unsafe { common.dealloc(*p, layout) };
    }
    common.trim();
    let r = class(&common);
    assert_eq!((r.runs, r.segments, r.live_blocks), (1, 1, 1), "{r:?}");
    // SAFETY: the last live block.
    unsafe { common.dealloc(blocks[3 * PER_RUN], layout) };
    common.trim();
    assert_eq!(class(&common).reserved, 0);
}

#[test]
fn a_free_landing_wrongly_in_a_run_is_reported() {
    let _ = seen();
    let common = two_run_spans();
    let layout = Layout::from_size_align(BLOCK, 8).unwrap();
    // Three runs: A in the first span, B and C in the second.
    let blocks: Vec<_> = (0..2 * PER_RUN + 3)
        .map(|_| common.alloc(layout).unwrap())
        .collect();
    let carved_end = blocks[2 * PER_RUN + 2];
    // SAFETY: each misuse is the point: the probe reports it before any memory is
    // touched; every pointer lies in memory the allocator holds.
    unsafe {
        common.free(blocks[0].add(16));
        assert!(matches!(seen()[..], [Misuse::Interior { .. }]), "inside");
        common.free(carved_end.add(BLOCK));
        assert!(matches!(seen()[..], [Misuse::Interior { .. }]), "uncarved");
        assert_eq!(common.usable_size(blocks[0].add(8)), 0);
        assert_eq!(seen().len(), 1, "usable_size inside a block");
        common.free(blocks[1]);
        assert!(seen().is_empty());
        common.free(blocks[1]);
        assert!(matches!(seen()[..], [Misuse::DoubleFree { .. }]), "twice");
        // Empty A and C (both kept), then B (idle, in a span C keeps): a pointer
        // into B is a block freed before.
        let (a, b, c) = (
            &blocks[..PER_RUN],
            &blocks[PER_RUN..2 * PER_RUN],
            &blocks[2 * PER_RUN..],
        );
        for p in a.iter().chain(c).chain(b) {
            if *p != blocks[1] {
                common.free(*p);
            }
        }
        assert!(seen().is_empty());
        assert_eq!(class(&common).runs, 2, "A and C kept, B idle");
        common.free(b[7]);
        assert!(
            matches!(seen()[..], [Misuse::DoubleFree { .. }]),
            "idle run"
        );
        // A trim releases both spans: the map no longer knows the pointers.
        common.trim();
        assert_eq!(class(&common).reserved, 0);
        common.free(c[0]);
        assert!(
            matches!(seen()[..], [Misuse::Foreign { .. }]),
            "released span"
        );
    }
    common.validate().unwrap();
    assert_eq!(common.stats().live_blocks, 0);
}
