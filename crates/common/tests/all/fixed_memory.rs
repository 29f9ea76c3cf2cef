//! The common allocator in fixed memory (`LimitedPages`): what it keeps for reuse —
//! empty runs, the large region's cached blocks, kept pages, a thread's cache — never
//! makes a request fail, so a level that fits in a fresh allocator still fits after
//! other levels came and went.

use core::alloc::Layout;
use core::ptr::NonNull;

use bento_common::{CommonAllocator, CommonConfig};
use bento_pages::{Decay, HeapPages, LimitedPages, Retention};

use crate::{heap, shape};

/// The fixed memory of these tests.
const LIMIT: usize = if cfg!(miri) { 4 << 20 } else { 12 << 20 };

type Fixed = LimitedPages<HeapPages>;

/// An allocator of the tests' shape over `pages`, with a commit cache and a block
/// cache that keep what they can, and the per-thread front end when `front`.
fn over(pages: &Fixed, retention: Retention, front: bool) -> CommonAllocator<&Fixed> {
    let config: CommonConfig<&Fixed> = shape()
        .with_pages(pages)
        .with_commit_cache(8 << 20)
        .with_block_cache(256 << 10)
        .with_retention(retention)
        .with_thread_cache(front);
    CommonAllocator::with_config(config)
}

/// Allocates blocks of `sizes` (cycled) until one is refused; returns them.
fn fill(common: &CommonAllocator<&Fixed>, sizes: &[usize]) -> Vec<(NonNull<u8>, Layout)> {
    let mut blocks = Vec::new();
    for i in 0.. {
        let layout = Layout::from_size_align(sizes[i % sizes.len()], 8).unwrap();
        let Ok(p) = common.alloc(layout) else { break };
        // SAFETY: a fresh block of `layout.size()` bytes.
        unsafe { p.write_bytes(i as u8, layout.size()) };
        blocks.push((p, layout));
    }
    blocks
}

/// Frees `blocks`, checking their contents.
fn free_all(common: &CommonAllocator<&Fixed>, blocks: Vec<(NonNull<u8>, Layout)>) {
    for (i, (p, layout)) in blocks.into_iter().enumerate() {
        // SAFETY: a live block of the allocator, written by `fill` with `i`.
        unsafe {
            assert_eq!(p.add(layout.size() - 1).read(), i as u8);
            common.dealloc(p, layout);
        }
    }
}

/// The blocks of `sizes` a fresh allocator seats, and the bytes of its tables then.
fn fresh_capacity(retention: Retention, front: bool, sizes: &[usize]) -> (usize, usize) {
    let pages = LimitedPages::new(heap(), LIMIT);
    let common = over(&pages, retention, front);
    let blocks = fill(&common, sizes);
    let seated = (blocks.len(), common.stats().tables);
    free_all(&common, blocks);
    seated
}

/// The blocks of `sizes` that `bytes` more of the allocator's tables cost: the
/// region map's leaves (64 KiB, one per 4 GiB of address space the source's
/// reservations reach) come from the fixed memory too, and their number follows the
/// addresses the source hands out, not what the allocator did before.
fn blocks_of(bytes: usize, sizes: &[usize]) -> usize {
    let mean = sizes.iter().sum::<usize>() / sizes.len();
    bytes.div_ceil(mean)
}

/// Levels of different sizes fill the fixed memory in turn, each freed whole before
/// the next, with and without the thread cache, the second time round each after a
/// `prepare`: each seats as many blocks as in a fresh allocator.
#[test]
#[cfg_attr(miri, ignore = "megabytes of blocks a level: minutes under Miri")]
fn every_level_fits_as_it_did_in_a_fresh_allocator() {
    let levels: [&[usize]; 4] = [
        &[24, 200, 1500],
        &[100_000, 64],
        &[16, 16, 3000, 40],
        &[600_000, 8],
    ];
    let retentions = [
        Retention::Eager,
        Retention::Decay(Decay::frames(600).with_peak_percent(150)),
    ];
    for retention in retentions {
        for front in [false, true] {
            let fresh: Vec<(usize, usize)> = levels
                .iter()
                .map(|l| fresh_capacity(retention, front, l))
                .collect();
            let pages = LimitedPages::new(heap(), LIMIT);
            let common = over(&pages, retention, front);
            let rounds = if cfg!(miri) { 1 } else { 2 };
            for round in 0..rounds {
                for (k, level) in levels.iter().enumerate() {
                    if round == 1 {
                        // Memory readied ahead is given back before a request fails.
                        common.prepare(1 << 20);
                    }
                    let blocks = fill(&common, level);
                    let (fresh_blocks, fresh_tables) = fresh[k];
                    let tables = common.stats().tables;
                    let leeway = blocks_of(tables.saturating_sub(fresh_tables), level);
                    assert!(
                        blocks.len() + leeway >= fresh_blocks,
                        "{retention:?}, front {front}, round {round}: level {k} seats {} \
                         blocks, {fresh_blocks} when fresh (tables {tables} B, {fresh_tables} B \
                         when fresh): {:?}",
                        blocks.len(),
                        common.stats().cache
                    );
                    free_all(&common, blocks);
                    common.validate().unwrap();
                }
            }
            common.trim();
        }
    }
}

/// An allocator over `pages` routing by `routing`, whose large region caches up to
/// 1 MiB of freed blocks.
fn cached(pages: &Fixed, routing: bento_common::Routing) -> CommonAllocator<&Fixed> {
    let config: CommonConfig<&Fixed> = shape()
        .with_pages(pages)
        .with_routing(routing)
        .with_commit_cache(8 << 20)
        .with_block_cache(1 << 20)
        .with_retention(Retention::Decay(Decay::frames(600).with_peak_percent(150)));
    CommonAllocator::with_config(config)
}

/// Blocks the large region caches (freed blocks of a few KiB) make way for small
/// blocks once the runs are full: the small level seats what it does in a fresh
/// allocator, under `Routing::Contention` too (general regions only).
#[test]
#[cfg_attr(miri, ignore = "megabytes of blocks a level: minutes under Miri")]
fn cached_large_blocks_make_way_for_small_ones() {
    for routing in [
        bento_common::Routing::BySize,
        bento_common::Routing::Contention { regions: 2 },
    ] {
        let small: &[usize] = &[48];
        let fresh = {
            let pages = LimitedPages::new(heap(), LIMIT);
            let common = cached(&pages, routing);
            let blocks = fill(&common, small);
            let n = blocks.len();
            free_all(&common, blocks);
            n
        };
        let pages = LimitedPages::new(heap(), LIMIT);
        let common = cached(&pages, routing);
        let large = fill(&common, &[6000, 7000]);
        free_all(&common, large);
        let blocks = fill(&common, small);
        assert!(
            blocks.len() >= fresh,
            "{routing:?}: {} small blocks after large ones, {fresh} when fresh",
            blocks.len()
        );
        free_all(&common, blocks);
        common.validate().unwrap();
    }
}
