//! `prepare`: memory readied before a stretch that must not wait for the OS — a run
//! ahead for each size class in use, the large region's fresh free space warmed — so
//! that the blocks of the stretch call the page source no more; with nothing readied
//! the same blocks do call it.

use core::alloc::Layout;
use core::ptr::NonNull;

use bento_common::CommonAllocator;
use bento_pages::{Decay, HeapPages, Metered, Retention};

use crate::{heap, shape};

type Counted = Metered<HeapPages>;

/// An allocator of the tests' shape whose commit cache keeps what it is given.
fn over(pages: &Counted) -> CommonAllocator<&Counted> {
    let config = shape()
        .with_pages(pages)
        .with_commit_cache(1 << 20)
        .with_retention(Retention::Decay(Decay::KEEP));
    CommonAllocator::with_config(config)
}

/// `n` blocks of `size` bytes, their ends written.
fn blocks(common: &CommonAllocator<&Counted>, size: usize, n: usize) -> Vec<(NonNull<u8>, Layout)> {
    (0..n)
        .map(|i| {
            let layout = Layout::from_size_align(size, 8).unwrap();
            let p = common.alloc(layout).expect("memory to spare");
            // SAFETY: a fresh block of `size` bytes: its ends.
            unsafe {
                p.write(i as u8);
                p.add(size - 1).write(i as u8);
            }
            (p, layout)
        })
        .collect()
}

fn free_all(common: &CommonAllocator<&Counted>, blocks: Vec<(NonNull<u8>, Layout)>) {
    for (i, (p, layout)) in blocks.into_iter().enumerate() {
        // SAFETY: a live block, written with `i`.
        unsafe {
            assert_eq!(
                (p.read(), p.add(layout.size() - 1).read()),
                (i as u8, i as u8)
            );
            common.dealloc(p, layout);
        }
    }
}

/// The source's reserves and commits over a stretch that fills two size classes
/// past their first run and takes 80 KiB of large blocks, after `prepare(large)` when
/// `large` is `Some`.
fn calls_in_stretch(large: Option<usize>) -> usize {
    let pages = Metered::new(heap());
    let common = over(&pages);
    let mut live = vec![
        blocks(&common, 48, 1),
        blocks(&common, 200, 1),
        blocks(&common, 8 << 10, 1),
    ];
    if let Some(large) = large {
        let readied = common.prepare(large);
        assert!(readied >= large + 2 * (64 << 10), "{readied}");
        // Each class in use has its run ahead now; nothing more to ready.
        assert_eq!(common.prepare(0), 0);
        common.validate().unwrap();
    }
    let calls = |p: &Counted| p.stats().commits + p.stats().reserves;
    let before = calls(&pages);
    live.push(blocks(&common, 48, 1400));
    live.push(blocks(&common, 200, 330));
    live.push(blocks(&common, 10 << 10, 8));
    let made = calls(&pages) - before;
    common.validate().unwrap();
    for b in live {
        free_all(&common, b);
    }
    common.validate().unwrap();
    assert_eq!(common.stats().live_blocks, 0);
    made
}

#[test]
#[cfg_attr(
    miri,
    ignore = "two thousand blocks twice: slow under Miri (the next test takes the same unsafe paths)"
)]
fn a_prepared_stretch_calls_the_source_no_more() {
    assert_eq!(calls_in_stretch(Some(96 << 10)), 0);
    assert!(
        calls_in_stretch(None) >= 3,
        "the stretch needs two runs and large pages"
    );
}

#[test]
fn prepare_before_anything_readies_nothing() {
    let pages = Metered::new(heap());
    let common = over(&pages);
    assert_eq!(common.prepare(usize::MAX), 0);
    let b = blocks(&common, 48, 1);
    // A size a caller can type: bounded by the fresh free space.
    assert!(common.prepare(usize::MAX) >= 64 << 10);
    common.validate().unwrap();
    free_all(&common, b);
    common.validate().unwrap();
}
