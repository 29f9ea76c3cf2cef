//! Giving memory back: the pages inside free chunks are decommitted (and really leave
//! the process on Linux), committed again only as far as a block needs, and the commit
//! cache turns that churn into no call to the OS.

use core::alloc::Layout;
use core::ptr::NonNull;

use bento_pages::{HeapPages, Metered};
use bento_space::{MemorySpace, SpaceConfig};

use crate::table_bytes;

/// 4 KiB pages in 1 MiB segments, so that a 100 KB block lives in an ordinary one.
const PAGED: SpaceConfig = SpaceConfig::DEFAULT
    .with_page_size(4096)
    .with_commit_cache(0);

fn layout(size: usize) -> Layout {
    Layout::from_size_align(size, 8).unwrap()
}

/// The chunk of a block: 16 bytes before its payload.
fn chunk(p: NonNull<u8>) -> usize {
    p.addr().get() - 16
}

/// The pages wholly inside a free chunk at `c` of `size` bytes, past its 32-byte
/// header and before the page of its footer.
fn interior(c: usize, size: usize) -> (usize, usize) {
    ((c + 32).next_multiple_of(4096), (c + size) & !4095)
}

/// A space holding blocks `a`, `b` (100 000 bytes) and `c` at the start of a segment.
/// Once `b` is free, a request of 90 000 bytes takes `b`'s chunk: the index's good fit
/// looks from the list above 90 000 up, and `b`'s list comes before the rest's.
fn sandwich<P: bento_pages::PageSource>(space: &MemorySpace<P>) -> [NonNull<u8>; 3] {
    let a = space.alloc(layout(1000)).unwrap();
    let b = space.alloc(layout(100_000)).unwrap();
    let c = space.alloc(layout(1000)).unwrap();
    assert_eq!(space.stats().segments, 1);
    [a, b, c]
}

/// Frees `blocks`, each once.
fn free_all<P: bento_pages::PageSource>(space: &MemorySpace<P>, blocks: &[NonNull<u8>]) {
    for &p in blocks {
        // SAFETY: live blocks of `space`, each freed once.
        unsafe { space.free(p) };
    }
}

#[test]
fn a_freed_block_gives_back_exactly_its_inner_pages_and_takes_back_what_reuse_needs() {
    let pages = Metered::new(HeapPages::new());
    let space = MemorySpace::new(&pages, PAGED).unwrap();
    let [a, b, c] = sandwich(&space);
    let csize = 100_016; // 100 000 + the tag, rounded to 16
    let (lo, hi) = interior(chunk(b), csize);
    assert!(hi - lo >= 20 * 4096);
    let before = space.stats();
    // SAFETY: live.
    unsafe { space.free(b) };
    let after = space.stats();
    assert_eq!(before.committed - after.committed, hi - lo);
    assert_eq!(
        pages.stats().committed,
        after.committed,
        "the source agrees"
    );
    space.validate().unwrap();

    // A smaller block takes `b`'s chunk and commits only what it covers.
    let b2 = space.alloc(layout(90_000)).unwrap();
    assert_eq!(b2, b, "the good fit");
    let rest_start = chunk(b2) + 90_016;
    let (rest_lo, _) = interior(rest_start, csize - 90_016);
    assert_eq!(space.stats().committed - after.committed, rest_lo - lo);
    space.validate().unwrap();
    free_all(&space, &[a, b2, c]);
    assert_eq!(pages.stats().committed, 0);
}

#[test]
fn realloc_in_place_commits_growth_and_decommits_a_shrunk_tail() {
    let pages = Metered::new(HeapPages::new());
    let space = MemorySpace::new(&pages, PAGED).unwrap();
    let anchor = space.alloc(layout(100)).unwrap();
    let p = space.alloc(layout(1000)).unwrap();
    let base = space.stats().committed;
    // SAFETY: `p` is live; a free chunk (the segment's rest) follows it.
    unsafe {
        assert!(space.try_grow_in_place(p, 200_000));
        p.as_ptr().write_bytes(0x5a, 200_000);
        let grown = space.stats().committed;
        assert!(grown - base >= 200_000 - 2 * 4096, "{base} -> {grown}");
        space.validate().unwrap();
        assert!(space.realloc_in_place(p, 1000));
        assert_eq!(space.stats().committed, base, "the tail's pages went back");
        assert!((0..1000).all(|i| p.as_ptr().add(i).read() == 0x5a));
        space.validate().unwrap();
        // The next chunk is the free rest, so a shrink to almost nothing splits it.
        assert!(space.realloc_in_place(p, 10));
        assert!(
            !space.realloc_in_place(anchor, 1 << 20),
            "anchor is followed by p"
        );
    }
    free_all(&space, &[anchor, p]);
    assert_eq!(pages.stats().committed, 0);
}

#[test]
fn a_refused_commit_on_reuse_or_growth_changes_nothing() {
    let space = MemorySpace::new(bento_pages::FaultyPages::new(HeapPages::new()), PAGED).unwrap();
    let [a, b, c] = sandwich(&space);
    // SAFETY: live.
    unsafe { space.free(b) };
    let before = space.stats();
    space.pages().unwrap().fail_commit(0);
    assert!(
        space.alloc(layout(90_000)).is_err(),
        "its pages cannot be had"
    );
    assert_eq!(space.stats().committed, before.committed);
    assert_eq!(space.stats().free_bytes, before.free_bytes);
    space.validate().unwrap();
    // Growth into a decommitted successor is refused the same way.
    space.pages().unwrap().fail_commit(0);
    // SAFETY: `a` is live, and `b`'s free chunk follows it.
    unsafe { assert!(!space.realloc_in_place(a, 50_000)) };
    assert_eq!(space.stats().committed, before.committed);
    space.validate().unwrap();
    // Healed, both work.
    space.pages().unwrap().heal();
    // SAFETY: as above.
    unsafe { assert!(space.realloc_in_place(a, 50_000)) };
    space.validate().unwrap();
    free_all(&space, &[a, c]);
    assert_eq!(space.stats().segments, 0);
}

#[test]
fn a_refused_commit_in_a_new_segment_changes_no_figure() {
    let space = MemorySpace::new(
        bento_pages::FaultyPages::new(HeapPages::new()),
        crate::SMALL,
    )
    .unwrap();
    // Calls 0 and 1 commit the new segment's header and fence pages; call 2, the
    // block's pages, is refused after the segment was linked.
    space.pages().unwrap().fail_commit(2);
    assert!(space.alloc(layout(10_000)).is_err());
    let s = space.stats();
    assert_eq!(
        (
            s.reserved,
            s.max_reserved,
            s.committed,
            s.max_committed,
            s.segments
        ),
        (0, 0, 0, 0, 0)
    );
    assert_eq!(
        space.pages().unwrap().inner().reserved(),
        0,
        "the segment went back"
    );
}

#[test]
fn with_the_commit_cache_churn_makes_no_commit_call() {
    let pages = Metered::new(HeapPages::new());
    let config = PAGED
        .with_commit_cache(1 << 20)
        .with_retention(crate::BY_FRAMES.retention);
    let space = MemorySpace::new(&pages, config).unwrap();
    let [a, b, c] = sandwich(&space);
    // SAFETY: live.
    unsafe { space.free(b) };
    let before = space.stats();
    assert!(before.cache.parked >= 20 * 4096, "{:?}", before.cache);
    for round in 0..100u8 {
        let p = space.alloc(layout(90_000)).unwrap();
        assert_eq!(p, b, "the good fit");
        // SAFETY: a live block of 90 000 bytes.
        unsafe {
            p.as_ptr().write_bytes(round, 90_000);
            assert_eq!(p.as_ptr().add(89_999).read(), round);
            space.free(p);
        }
    }
    let after = space.stats();
    assert_eq!(
        after.source.commits, before.source.commits,
        "no commit reached the source"
    );
    assert_eq!(after.source.decommits, before.source.decommits);
    assert!(after.cache.hits >= before.cache.hits + 100 * 20);
    assert_eq!(after.committed, before.committed);
    space.validate().unwrap();
    // `trim` gives the parked pages back.
    let parked = after.cache.parked;
    assert_eq!(space.trim(), parked);
    assert_eq!(
        pages.stats().committed,
        space.stats().committed + table_bytes(1 << 20, 4096)
    );
    free_all(&space, &[a, c]);
}

#[cfg(target_os = "linux")]
mod linux {
    use super::*;
    use bento_pages::{PageSource, SystemPages};

    /// How many pages of `[lo, hi)` are resident, from `mincore`.
    fn resident(lo: usize, hi: usize) -> usize {
        let mut vec = vec![0u8; (hi - lo) / 4096];
        let ptr = core::ptr::without_provenance_mut::<libc::c_void>(lo);
        // SAFETY: `[lo, hi)` is page-aligned and mapped (a live segment's); `vec` has
        // a byte per page. mincore only reads the page tables.
        let rc = unsafe { libc::mincore(ptr, hi - lo, vec.as_mut_ptr()) };
        assert_eq!(rc, 0, "mincore: {}", std::io::Error::last_os_error());
        vec.iter().filter(|&&b| b & 1 != 0).count()
    }

    /// The process's kernel mappings, from `/proc/self/maps`.
    fn mappings() -> usize {
        std::fs::read_to_string("/proc/self/maps")
            .unwrap()
            .lines()
            .count()
    }

    /// A gigabyte of 12 KiB blocks with every other one freed (tens of thousands of
    /// separate decommitted ranges, with 4 KiB pages) keeps the process's mappings
    /// near one per segment, far below Linux's default limit of 65,530: decommitting
    /// keeps a mapping whole. (Over `SystemPages::with_traps` the same program
    /// splits them into about 65,000.)
    #[test]
    #[cfg_attr(
        any(miri, debug_assertions),
        ignore = "mmap is not supported under Miri, and a gigabyte of blocks under the debug checks is slow: runs in the release pass"
    )]
    fn a_fragmented_gigabyte_keeps_the_mappings_few() {
        let before = mappings();
        let space = MemorySpace::new(SystemPages::new(), SpaceConfig::DEFAULT).unwrap();
        let layout = Layout::from_size_align(12 << 10, 8).unwrap();
        let blocks: Vec<_> = (0..(1 << 30) / (12 << 10))
            .map(|_| space.alloc(layout).unwrap())
            .collect();
        for p in blocks.iter().step_by(2) {
            // SAFETY: live blocks, each freed once.
            unsafe { space.dealloc(*p, layout) };
        }
        let s = space.stats();
        assert!(s.segments > 1000, "{} segments", s.segments);
        assert!(
            s.source.decommits > 20_000,
            "{} decommit calls: the free ranges did not reach the source",
            s.source.decommits
        );
        // Other tests run beside this one and map a little of their own: the slack
        // is for them; splitting would add tens of thousands.
        let grown = mappings().saturating_sub(before);
        assert!(
            grown <= s.segments + 512,
            "{grown} new mappings for {} segments",
            s.segments
        );
        for p in blocks.iter().skip(1).step_by(2) {
            // SAFETY: the other half, each freed once.
            unsafe { space.dealloc(*p, layout) };
        }
        assert_eq!(space.stats().segments, 0);
    }

    /// A double free of a block whose pages were decommitted when it merged with its
    /// free neighbour: the debug check reports it, without reading the gone page.
    #[test]
    #[cfg(debug_assertions)]
    #[cfg_attr(miri, ignore = "mmap is not supported under Miri")]
    fn a_double_free_into_decommitted_pages_is_reported_not_faulted() {
        // No block cache: `a` and `b` must merge at once.
        let config = crate::SMALL.with_block_cache(0);
        let mut space = MemorySpace::new(SystemPages::new(), config).unwrap();
        space.set_misuse_hook(crate::record);
        let a = space.alloc(layout(8000)).unwrap();
        let b = space.alloc(layout(8000)).unwrap();
        let g = space.alloc(layout(100)).unwrap();
        // SAFETY: live blocks freed once; then `b` again, which the check refuses.
        unsafe {
            space.free(a);
            space.free(b); // merges with `a`: the page holding b's tag is decommitted
            space.free(b);
            let inside = b.add(5000); // a stale pointer into the middle of free space
            space.free(inside);
        }
        crate::assert_double_frees(2);
        space.validate().unwrap();
        free_all(&space, &[g]);
    }

    #[test]
    #[cfg_attr(miri, ignore = "mmap and mincore are not supported under Miri")]
    fn the_pages_inside_a_freed_block_leave_the_process_and_come_back_intact() {
        assert_eq!(
            SystemPages::new().page_size(),
            4096,
            "the test assumes 4 KiB pages"
        );
        let space = MemorySpace::new(SystemPages::new(), PAGED).unwrap();
        let [a, b, c] = sandwich(&space);
        // SAFETY: a live block of 100 000 bytes.
        unsafe { b.as_ptr().write_bytes(1, 100_000) };
        let (lo, hi) = interior(chunk(b), 100_016);
        assert_eq!(
            resident(lo, hi),
            (hi - lo) / 4096,
            "written pages are resident"
        );
        let before = space.stats().committed;
        // SAFETY: live.
        unsafe { space.free(b) };
        assert_eq!(resident(lo, hi), 0, "decommitted pages are gone");
        assert_eq!(before - space.stats().committed, hi - lo);
        let b2 = space.alloc(layout(90_000)).unwrap();
        assert_eq!(b2, b);
        // SAFETY: a live block of 90 000 bytes.
        unsafe {
            for i in (0..90_000).step_by(997) {
                b2.as_ptr().add(i).write(i as u8);
            }
            assert!(
                (0..90_000)
                    .step_by(997)
                    .all(|i| b2.as_ptr().add(i).read() == i as u8)
            );
        }
        space.validate().unwrap();
        free_all(&space, &[a, b2, c]);
        assert_eq!(space.stats().segments, 0);
    }
}
