use core::mem::MaybeUninit;
use core::ptr::NonNull;

use bento_align::Alignment;
use bento_pages::{FixedPages, PageError, PageSource};
use bento_testkit::{Unstructured, cases, seeded_bytes};

use crate::common::{disjoint, round_trip};

const PAGE: usize = 4096;

#[repr(C, align(4096))]
struct Page([MaybeUninit<u8>; PAGE]);

/// Runs `f` on a `FixedPages` over a heap buffer of `pages` pages and one more for
/// the source's start table (starting `skip` bytes in), freed afterwards (the
/// `'static` constructor would leak, which Miri reports).
pub(crate) fn with_fixed(pages: usize, skip: usize, f: impl FnOnce(&FixedPages)) {
    let pages = pages + 1;
    let mut buf: Vec<Page> = (0..pages)
        .map(|_| Page([MaybeUninit::uninit(); PAGE]))
        .collect();
    let base = NonNull::new(buf.as_mut_ptr().cast::<u8>()).unwrap();
    // SAFETY: `buf` outlives the source (declared before it, so dropped after) and is not touched
    // while the source lives; `skip` is less than its length.
    let source =
        unsafe { FixedPages::from_raw(base.add(skip), pages * PAGE - skip, Alignment::PAGE_4K) };
    f(&source);
    // `source` is dropped before `buf`: locals drop in reverse order.
}

#[test]
fn round_trips() {
    // 64-page alignment needs room to slide: 8 pages + 63.
    with_fixed(80, 0, |pages| {
        round_trip(pages);
        disjoint(pages);
        assert_eq!(pages.available(), pages.capacity());
    });
}

#[test]
fn unaligned_buffers_use_their_aligned_part() {
    with_fixed(4, 1, |pages| {
        assert_eq!(pages.capacity(), 3 * PAGE);
        let p = pages.reserve(3 * PAGE, Alignment::MIN).unwrap();
        assert_eq!(p.addr().get() % PAGE, 0);
    });
}

#[test]
fn exhaustion_fails_cleanly_and_release_makes_room() {
    with_fixed(8, 0, exhaustion);
}

fn exhaustion(pages: &FixedPages) {
    let mut held: Vec<_> = (0..8)
        .map(|_| pages.reserve(PAGE, Alignment::MIN).unwrap())
        .collect();
    assert_eq!(pages.available(), 0);
    assert_eq!(
        pages.reserve(PAGE, Alignment::MIN),
        Err(PageError::OutOfAddressSpace { size: PAGE })
    );
    // Free pages 2 and 3: a two-page reservation fits there again, nothing larger.
    let third = held.remove(3);
    let second = held.remove(2);
    // SAFETY: live reservations of one page, never committed.
    unsafe {
        pages.release(third, PAGE);
        pages.release(second, PAGE);
    }
    assert!(pages.reserve(3 * PAGE, Alignment::MIN).is_err());
    let both = pages.reserve(2 * PAGE, Alignment::MIN).unwrap();
    assert_eq!(both, second, "released neighbours merge");
}

#[test]
fn released_ranges_merge_in_any_order() {
    for order in [[0, 1, 2, 3], [3, 2, 1, 0], [1, 3, 0, 2], [2, 0, 3, 1]] {
        with_fixed(4, 0, |pages| {
            let held: Vec<_> = (0..4)
                .map(|_| pages.reserve(PAGE, Alignment::MIN).unwrap())
                .collect();
            for i in order {
                // SAFETY: each is a live one-page reservation, released once.
                unsafe { pages.release(held[i], PAGE) };
            }
            // Everything merged back into one range.
            let all = pages
                .reserve(4 * PAGE, Alignment::MIN)
                .expect("one range again");
            assert_eq!(all, held[0]);
        });
    }
}

#[test]
fn random_programs_never_overlap_and_account_exactly() {
    let capacity_pages = 64;
    for case in 0..cases(200, 3) {
        with_fixed(capacity_pages, 0, |pages| random_program(pages, case));
    }
}

fn random_program(pages: &FixedPages, case: usize) {
    let bytes = seeded_bytes(case, 512);
    let mut u = Unstructured::new(&bytes);
    let mut live: Vec<(usize, usize)> = Vec::new();
    let mut ptrs = Vec::new();
    while !u.is_empty() {
        let op = u.int_in_range(0u8..=9).unwrap();
        if op < 6 {
            let n = u.int_in_range(1usize..=12).unwrap_or(1);
            let align = Alignment::new(PAGE << u.int_in_range(0u32..=3).unwrap_or(0)).unwrap();
            match pages.reserve(n * PAGE, align) {
                Ok(p) => {
                    let (s, e) = (p.addr().get(), p.addr().get() + n * PAGE);
                    assert_eq!(s % align.get(), 0);
                    assert!(live.iter().all(|&(a, b)| e <= a || b <= s), "overlap");
                    live.push((s, e));
                    ptrs.push((p, n * PAGE));
                }
                Err(e) => assert_eq!(e, PageError::OutOfAddressSpace { size: n * PAGE }),
            }
        } else if !live.is_empty() {
            let i = u.choose_index(live.len()).unwrap_or(0);
            live.swap_remove(i);
            let (p, size) = ptrs.swap_remove(i);
            // SAFETY: a live reservation, released once.
            unsafe { pages.release(p, size) };
        }
        let held: usize = live.iter().map(|(a, b)| b - a).sum();
        assert_eq!(pages.available() + held, pages.capacity());
    }
}

#[test]
#[should_panic(expected = "not exactly a live reservation of this source")]
fn double_release_panics() {
    with_fixed(4, 0, |pages| {
        let p = pages.reserve(PAGE, Alignment::MIN).unwrap();
        // SAFETY: the first release is right; the second is the misuse under test.
        unsafe {
            pages.release(p, PAGE);
            pages.release(p, PAGE);
        }
    });
}

#[test]
#[should_panic(expected = "not exactly a live reservation of this source")]
fn releasing_part_of_a_reservation_panics() {
    with_fixed(4, 0, |pages| {
        let p = pages.reserve(3 * PAGE, Alignment::MIN).unwrap();
        // SAFETY: the misuse under test: the first two pages of a three-page
        // reservation.
        unsafe { pages.release(p, 2 * PAGE) };
    });
}

#[test]
#[should_panic(expected = "not exactly a live reservation of this source")]
fn releasing_the_tail_of_a_reservation_panics() {
    with_fixed(4, 0, |pages| {
        let p = pages.reserve(3 * PAGE, Alignment::MIN).unwrap();
        // SAFETY: the misuse under test: the last page of a three-page reservation.
        unsafe { pages.release(p.add(2 * PAGE), PAGE) };
    });
}

#[test]
#[should_panic(expected = "not exactly a live reservation of this source")]
fn releasing_two_reservations_at_once_panics() {
    with_fixed(4, 0, |pages| {
        let p = pages.reserve(PAGE, Alignment::MIN).unwrap();
        let q = pages.reserve(PAGE, Alignment::MIN).unwrap();
        assert_eq!(q.addr().get(), p.addr().get() + PAGE);
        // SAFETY: the misuse under test: two adjacent reservations as one.
        unsafe { pages.release(p, 2 * PAGE) };
    });
}

#[test]
fn a_reservation_released_whole_beside_others_is_accepted() {
    with_fixed(4, 0, |pages| {
        let p = pages.reserve(PAGE, Alignment::MIN).unwrap();
        let q = pages.reserve(2 * PAGE, Alignment::MIN).unwrap();
        let r = pages.reserve(PAGE, Alignment::MIN).unwrap();
        // SAFETY: live reservations, each released whole and once.
        unsafe {
            pages.release(q, 2 * PAGE);
            pages.release(r, PAGE);
            pages.release(p, PAGE);
        }
        assert_eq!(pages.available(), pages.capacity());
    });
}
