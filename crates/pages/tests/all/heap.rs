use bento_align::Alignment;
use bento_pages::{HeapPages, PageSource};

use crate::common::{disjoint, round_trip};

#[test]
fn round_trips() {
    let pages = HeapPages::new();
    round_trip(&pages);
    disjoint(&pages);
    assert_eq!(pages.reserved(), 0);
    round_trip(&HeapPages::with_page_size(
        Alignment::new(64 << 10).unwrap(),
    ));
}

#[test]
fn decommit_zero_fills_and_commit_is_implicit() {
    let pages = HeapPages::new();
    assert!(pages.commit_is_implicit() && pages.decommitted_reads_zero());
    let base = pages.reserve(8192, Alignment::MIN).unwrap();
    // SAFETY: inside the live reservation; commit is implicit, so it is usable at once.
    unsafe {
        assert_eq!(base.read(), 0, "fresh reservations are zeroed");
        base.add(4096).write_bytes(0xAB, 4096);
        pages.decommit(base.add(4096), 4096);
        assert!((0..4096).all(|i| base.add(4096 + i).read() == 0));
        pages.release(base, 8192);
    }
}

#[test]
fn drop_frees_what_is_still_reserved() {
    // Under Miri a leak here fails the test run.
    let pages = HeapPages::new();
    let _ = pages.reserve(3 * 4096, Alignment::PAGE_4K).unwrap();
    assert_eq!(pages.reserved(), 3 * 4096);
}

#[test]
#[should_panic(expected = "not a live reservation of this source")]
fn release_of_a_foreign_range_panics() {
    let pages = HeapPages::new();
    let other = HeapPages::new();
    let base = other.reserve(4096, Alignment::MIN).unwrap();
    // SAFETY: deliberately wrong: the range belongs to `other`; HeapPages checks.
    unsafe { pages.release(base, 4096) };
}
