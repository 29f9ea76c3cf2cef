//! What bad input gets: errors with nothing changed, and misuse
//! caught by the debug checks and by `validate()`.

use core::alloc::Layout;

use bento_pages::{FaultyPages, HeapPages, Metered};
#[cfg(debug_assertions)]
use bento_space::Misuse;
use bento_space::{MemorySpace, Rule, SpaceStats};
use bento_testkit::cases;

use crate::SMALL;
#[cfg(debug_assertions)]
use crate::{record, seen};

#[test]
fn zero_size_huge_and_overflowing_requests() {
    let pages = Metered::new(HeapPages::new());
    let space = MemorySpace::new(&pages, SMALL).unwrap();
    let z = space
        .alloc(Layout::from_size_align(0, 4096).unwrap())
        .unwrap();
    assert_eq!(z.addr().get(), 4096);
    assert_eq!(pages.stats().reserves, 0, "a zero-size block costs nothing");
    for size in [isize::MAX as usize - 4095, isize::MAX as usize / 2, 1 << 40] {
        assert!(
            space
                .alloc(Layout::from_size_align(size, 4096).unwrap())
                .is_err(),
            "{size}"
        );
        assert!(
            space
                .alloc(Layout::from_size_align(size, 16).unwrap())
                .is_err(),
            "{size}"
        );
    }
    assert_eq!(space.stats(), Default::default());
    // `realloc` of a live block to a huge size fails, keeping it.
    let p = space.alloc(Layout::new::<[u8; 64]>()).unwrap();
    // SAFETY: `p` is a live block of 64 bytes, freed once at the end.
    unsafe {
        p.as_ptr().write_bytes(3, 64);
        assert!(space.realloc(p, isize::MAX as usize).is_err());
        assert!(!space.realloc_in_place(p, usize::MAX));
        assert_eq!(p.as_ptr().add(63).read(), 3);
        space.free(p);
    }
}

#[test]
fn alignment_beyond_a_segment_gets_a_dedicated_segment() {
    let pages = Metered::new(HeapPages::new());
    let space = MemorySpace::new(&pages, SMALL).unwrap();
    let layout = Layout::from_size_align(100, 1 << 20).unwrap();
    let p = space.alloc(layout).unwrap();
    assert_eq!(p.addr().get() % (1 << 20), 0);
    assert_eq!(space.stats().segments, 1);
    // SAFETY: live.
    unsafe { space.free(p) };
    assert_eq!(pages.stats().reserved, 0);
}

#[test]
fn a_refused_reserve_or_commit_changes_nothing() {
    let space = MemorySpace::new(FaultyPages::new(HeapPages::new()), SMALL).unwrap();
    let keep = space.alloc(Layout::new::<[u8; 60_000]>()).unwrap();
    // SAFETY: live.
    unsafe { keep.as_ptr().write_bytes(9, 60_000) };
    let before = space.stats();
    // The space's own stats, and the bytes the source holds for it; the source's
    // call counts do change (a reserve made and given back, a refused call).
    let stats = |s: SpaceStats| {
        (
            SpaceStats {
                source: Default::default(),
                ..s
            },
            s.source.reserved,
            s.source.committed,
        )
    };
    let pages = space.pages().unwrap();
    for fail in 0..2 {
        if fail == 0 {
            pages.fail_reserve(0);
        } else {
            pages.fail_commit(0);
        }
        // An ordinary segment, then a dedicated one: both refused.
        assert!(space.alloc(Layout::new::<[u8; 10_000]>()).is_err());
        assert_eq!(stats(space.stats()), stats(before));
        if fail == 0 {
            pages.fail_reserve(0);
        } else {
            pages.fail_commit(0);
        }
        assert!(space.alloc(Layout::new::<[u8; 100_000]>()).is_err());
        assert_eq!(stats(space.stats()), stats(before));
        space.validate().unwrap();
    }
    assert_eq!(pages.injected(), 4);
    // SAFETY: live, then freed.
    unsafe {
        // Every byte natively; a sample under Miri, where each read costs.
        assert!(
            (0..60_000)
                .step_by(bento_testkit::cases(1, 97))
                .all(|i| keep.as_ptr().add(i).read() == 9)
        );
        space.free(keep);
    }
    assert_eq!(pages.inner().reserved(), 0, "no reservation leaked");
}

#[test]
#[cfg(debug_assertions)]
fn double_free_foreign_and_interior_pointers_are_caught() {
    let mut space = MemorySpace::new(HeapPages::new(), SMALL).unwrap();
    space.set_misuse_hook(record);
    let a = space.alloc(Layout::new::<[u8; 100]>()).unwrap();
    let b = space.alloc(Layout::new::<[u8; 100]>()).unwrap();
    let c = space.alloc(Layout::new::<[u8; 100]>()).unwrap();
    // SAFETY: `c` is live with 100 bytes; the pattern makes its bytes read as an
    // implausible tag when a pointer inside it is freed.
    unsafe { c.as_ptr().write_bytes(0xFF, 100) };
    let mut foreign = [0u64; 8];
    let foreign = core::ptr::NonNull::from(&mut foreign).cast::<u8>();
    // SAFETY: each call is a misuse the debug checks refuse before touching anything.
    unsafe {
        space.free(b);
        space.free(b); // a plain double free
        space.free(a);
        space.free(b); // `b` was merged into `a`'s chunk
        space.free(foreign.add(16));
        space.free(c.add(16)); // inside `c`
        assert_eq!(space.usable_size(c.add(32)), 0);
        assert!(!space.realloc_in_place(c.add(48), 10));
        assert!(space.realloc(c.add(64), 10).is_err());
    }
    let seen = seen();
    assert_eq!(seen.len(), 7, "{seen:?}");
    assert!(matches!(seen[0], Misuse::DoubleFree { ptr } if ptr == b));
    assert!(matches!(seen[1], Misuse::DoubleFree { ptr } if ptr == b));
    assert!(matches!(seen[2], Misuse::Foreign { .. }));
    assert!(
        seen[3..]
            .iter()
            .all(|m| matches!(m, Misuse::Interior { block: None, .. })),
        "{seen:?}"
    );
    space.validate().unwrap();
    // SAFETY: live, freed once.
    unsafe { space.free(c) };
    // A double free after the segment went back: the pointer is in no segment.
    // SAFETY: refused by the debug check before anything is read.
    unsafe { space.free(c) };
    assert!(matches!(seen_one(), Misuse::Foreign { .. }));
}

#[cfg(debug_assertions)]
fn seen_one() -> Misuse<'static> {
    let seen = seen();
    assert_eq!(seen.len(), 1, "{seen:?}");
    seen[0]
}

#[test]
#[cfg(debug_assertions)]
#[should_panic(expected = "double free")]
fn the_default_hook_panics() {
    let space = MemorySpace::new(HeapPages::new(), SMALL).unwrap();
    let a = space.alloc(Layout::new::<[u8; 100]>()).unwrap();
    let _b = space.alloc(Layout::new::<[u8; 100]>()).unwrap();
    // SAFETY: the second free is refused by the debug check (and panics).
    unsafe {
        space.free(a);
        space.free(a);
    }
}

/// Overwrites the word at `at` and expects `validate()` to name `rule`.
fn corrupt(at: usize, value: usize, rule: fn(&Rule) -> bool) {
    // No block cache: the freed block must become a free chunk.
    let space = MemorySpace::new(HeapPages::new(), SMALL.with_block_cache(0)).unwrap();
    let blocks: Vec<_> = (0..6)
        .map(|_| space.alloc(Layout::new::<[u8; 200]>()).unwrap())
        .collect();
    // SAFETY: frees `blocks[2]` (live) to make a free chunk between two live ones.
    unsafe { space.free(blocks[2]) };
    space.validate().unwrap();
    // Word `at` counted from `blocks[1]`'s payload (its chunk is 208 bytes).
    let word = blocks[1].as_ptr().cast::<usize>().wrapping_add(at);
    // SAFETY: inside the segment, which stays allocated; the write simulates a stray
    // write by the program.
    let old = unsafe { word.replace(value) };
    let err = space.validate().unwrap_err();
    assert!(rule(&err.rule), "{err}");
    assert!(err.to_string().contains("offset"), "{err}");
    // SAFETY: restores the word; the space is whole again.
    unsafe { word.write(old) };
    space.validate().unwrap();
}

#[test]
fn validate_names_the_rule_a_stray_write_breaks() {
    // blocks[1]'s payload is at word 0 (its chunk 2 words before); `blocks[2]`'s free
    // chunk begins 208 bytes after that chunk: prev_foot at word 24, head at 25, and
    // its footer (the next chunk's prev_foot) at 50.
    let free_size = 208;
    corrupt(25, free_size | 1 | 2, |r| {
        matches!(r, Rule::ListEntry { .. })
    }); // marked in use
    corrupt(25, (free_size + 16) | 2, |r| {
        matches!(r, Rule::ListEntry { .. })
    });
    corrupt(50, 999, |r| matches!(r, Rule::Footer));
    corrupt(25, 16 | 2, |r| matches!(r, Rule::ListEntry { .. }));
    corrupt(-1isize as usize, 208 | 1, |r| {
        matches!(r, Rule::PrevInUse | Rule::KindFlag)
    }); // blocks[1]'s head loses PREV_IN_USE
}

#[test]
fn validate_checks_list_entries_among_many_segments() {
    // Past the segments a walk of the list serves, `validate` finds a list entry's
    // segment in a sorted table: a link to memory of no segment is named, never
    // followed, and the table goes back to the source.
    let pages = Metered::new(HeapPages::new());
    let space = MemorySpace::new(&pages, SMALL.with_block_cache(0)).unwrap();
    // Five blocks a segment; the middle one of each freed: a free chunk between two
    // live ones in every segment.
    let blocks: Vec<_> = (0..5 * cases(100, 40))
        .map(|_| space.alloc(Layout::new::<[u8; 12_000]>()).unwrap())
        .collect();
    for b in blocks.iter().skip(2).step_by(5) {
        // SAFETY: live, freed once.
        unsafe { space.free(*b) };
    }
    assert!(space.stats().segments > 32);
    let reserved = pages.stats().reserved;
    let report = space.validate().unwrap();
    assert!(report.free_blocks >= cases(100, 40), "{report:?}");
    assert_eq!(pages.stats().reserved, reserved, "the table went back");
    let foreign = Box::new([0usize; 8]);
    // The free chunk's forward link is its payload's first word.
    let link = blocks[2].as_ptr().cast::<*const usize>();
    // SAFETY: a word of a free chunk, which stays in its segment; the write simulates
    // a stray write by the program, undone below.
    let old = unsafe { link.replace(foreign.as_ptr()) };
    let err = space.validate().unwrap_err();
    assert!(matches!(err.rule, Rule::ListEntry { .. }), "{err}");
    // SAFETY: restores the word.
    unsafe { link.write(old) };
    space.validate().unwrap();
    for b in blocks.iter().enumerate().filter(|(i, _)| i % 5 != 2) {
        // SAFETY: live, freed once.
        unsafe { space.free(*b.1) };
    }
    assert_eq!(space.stats().segments, 0);
}
