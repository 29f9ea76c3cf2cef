//! A memory space in fixed memory (`LimitedPages`): what it keeps for reuse — freed
//! blocks in its block cache, free pages in its commit cache — never makes an
//! allocation fail, so a level that fits in a fresh space still fits after other
//! levels came and went.

use core::alloc::Layout;
use core::ptr::NonNull;

use bento_pages::{HeapPages, LimitedPages, Metered, Retention};
use bento_space::{MemorySpace, SpaceConfig};

use crate::{BY_FRAMES, SMALL, check};

/// The fixed memory of these tests: 4 MiB.
const LIMIT: usize = 4 << 20;

type Fixed = LimitedPages<Metered<HeapPages>>;

/// A space over fixed memory, with a commit cache and a block cache that keep what
/// they can.
fn config(retention: Retention) -> SpaceConfig {
    SMALL
        .with_commit_cache(8 << 20)
        .with_block_cache(256 << 10)
        .with_retention(retention)
}

/// Allocates blocks of `sizes` (cycled) until the space refuses one, up to `most`
/// blocks; returns them.
fn fill(space: &MemorySpace<&Fixed>, sizes: &[usize], most: usize) -> Vec<(NonNull<u8>, Layout)> {
    let mut blocks = Vec::new();
    for i in 0..most {
        let layout = Layout::from_size_align(sizes[i % sizes.len()], 16).unwrap();
        let Ok(p) = space.alloc(layout) else { break };
        // SAFETY: a fresh block of `layout.size()` bytes.
        unsafe { p.write_bytes(i as u8, layout.size()) };
        blocks.push((p, layout));
    }
    blocks
}

/// Frees `blocks`, checking their contents.
fn free_all(space: &MemorySpace<&Fixed>, blocks: Vec<(NonNull<u8>, Layout)>) {
    for (i, (p, layout)) in blocks.into_iter().enumerate() {
        // SAFETY: a live block of the space, written by `fill` with `i`.
        unsafe {
            assert_eq!(p.add(layout.size() - 1).read(), i as u8);
            space.dealloc(p, layout);
        }
    }
}

/// How many blocks of `sizes` a fresh space over the fixed memory seats.
fn fresh_capacity(retention: Retention, sizes: &[usize]) -> usize {
    let pages = LimitedPages::new(Metered::new(HeapPages::new()), LIMIT);
    let space = MemorySpace::new(&pages, config(retention)).unwrap();
    let blocks = fill(&space, sizes, usize::MAX);
    let n = blocks.len();
    free_all(&space, blocks);
    n
}

/// Levels of different shapes fill the fixed memory in turn, each freed whole before
/// the next: every level seats exactly as many blocks as in a fresh space, and the
/// space validates between levels.
#[test]
#[cfg_attr(miri, ignore = "megabytes of blocks a level: minutes under Miri")]
fn every_level_fits_as_it_did_in_a_fresh_space() {
    let levels: [&[usize]; 4] = [
        &[200, 48, 3000],
        &[20_000, 100],
        &[64, 64, 64, 9000],
        &[40_000],
    ];
    for retention in [Retention::Eager, BY_FRAMES.retention] {
        let fresh: Vec<usize> = levels
            .iter()
            .map(|l| fresh_capacity(retention, l))
            .collect();
        let pages = LimitedPages::new(Metered::new(HeapPages::new()), LIMIT);
        let space = MemorySpace::new(&pages, config(retention)).unwrap();
        let rounds = if cfg!(miri) { 1 } else { 3 };
        for round in 0..rounds {
            for (k, level) in levels.iter().enumerate() {
                let blocks = fill(&space, level, usize::MAX);
                assert_eq!(
                    blocks.len(),
                    fresh[k],
                    "{retention:?}, round {round}: level {k} seats {} blocks, {} when fresh: {:?}",
                    blocks.len(),
                    fresh[k],
                    space.stats()
                );
                check(&&space).unwrap();
                free_all(&space, blocks);
                check(&&space).unwrap();
            }
        }
        let s = space.stats();
        assert!(
            s.cache.given_up > 0,
            "the kept pages made way: {:?}",
            s.cache
        );
    }
}

/// A long-lived block between levels pins its segment; the rest of the memory still
/// serves each level as it did with that block alone in a fresh space.
#[test]
#[cfg_attr(miri, ignore = "megabytes of blocks a level: minutes under Miri")]
fn a_level_fits_beside_what_outlives_the_levels_before_it() {
    let level: &[usize] = &[300, 5000, 80];
    let retention = BY_FRAMES.retention;
    let pages = LimitedPages::new(Metered::new(HeapPages::new()), LIMIT);
    let space = MemorySpace::new(&pages, config(retention)).unwrap();
    let keep = Layout::from_size_align(1000, 16).unwrap();
    let kept = space.alloc(keep).unwrap();
    let mut blocks = fill(&space, level, usize::MAX);
    let first = blocks.len();
    let rounds = if cfg!(miri) { 2 } else { 8 };
    for round in 0..rounds {
        free_all(&space, blocks);
        blocks = fill(&space, level, usize::MAX);
        assert!(
            blocks.len() >= first,
            "round {round}: {} blocks seated, {first} in the first level",
            blocks.len()
        );
    }
    free_all(&space, blocks);
    // SAFETY: live, with its layout.
    unsafe { space.dealloc(kept, keep) };
    check(&&space).unwrap();
}
