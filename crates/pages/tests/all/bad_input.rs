//! Every bad argument gets a `PageError`, never a crash.

use bento_align::Alignment;
use bento_pages::{HeapPages, Invalid, PageError, PageSource};

fn reserve_refuses_bad_sizes<P: PageSource>(pages: &P) {
    let page = pages.page_size();
    assert_eq!(
        pages.reserve(0, Alignment::MIN),
        Err(PageError::Invalid(Invalid::ZeroSize))
    );
    assert_eq!(
        pages.reserve(page + 1, Alignment::MIN),
        Err(PageError::Invalid(Invalid::NotPageMultiple {
            size: page + 1,
            page
        }))
    );
    // The largest page multiple: far beyond any address space.
    let huge = usize::MAX & !(page - 1);
    assert!(matches!(
        pages.reserve(huge, Alignment::MIN),
        Err(PageError::OutOfAddressSpace { .. })
    ));
    assert!(matches!(
        pages.reserve(page, Alignment::MAX),
        Err(PageError::OutOfAddressSpace { .. })
    ));
}

fn commit_refuses_bad_ranges<P: PageSource>(pages: &P, checks_reservations: bool) {
    let page = pages.page_size();
    let base = pages.reserve(4 * page, Alignment::MIN).unwrap();
    // SAFETY: deliberately bad arguments: the source must refuse them before touching
    // memory. The good calls stay inside the live reservation.
    unsafe {
        assert_eq!(
            pages.commit(base, 0),
            Err(PageError::Invalid(Invalid::ZeroSize))
        );
        assert_eq!(
            pages.commit(base, page - 1),
            Err(PageError::Invalid(Invalid::NotPageMultiple {
                size: page - 1,
                page
            }))
        );
        let odd = base.add(1);
        assert_eq!(
            pages.commit(odd, page),
            Err(PageError::Invalid(Invalid::Misaligned {
                addr: odd.addr().get(),
                page
            }))
        );
        if checks_reservations {
            let past = base.add(4 * page);
            assert_eq!(
                pages.commit(past, page),
                Err(PageError::Invalid(Invalid::OutsideReservation {
                    addr: past.addr().get(),
                    size: page
                }))
            );
            assert!(matches!(
                pages.commit(base, 5 * page),
                Err(PageError::Invalid(Invalid::OutsideReservation { .. }))
            ));
        }
        pages.release(base, 4 * page);
    }
}

#[test]
fn heap_pages() {
    let pages = HeapPages::new();
    reserve_refuses_bad_sizes(&pages);
    commit_refuses_bad_ranges(&pages, true);
}

#[test]
fn fixed_pages() {
    crate::fixed::with_fixed(8, 0, |pages| {
        reserve_refuses_bad_sizes(pages);
        commit_refuses_bad_ranges(pages, true);
    });
}

#[cfg(all(any(unix, windows), not(miri)))]
#[test]
fn system_pages() {
    let pages = bento_pages::SystemPages::new();
    reserve_refuses_bad_sizes(&pages);
    commit_refuses_bad_ranges(&pages, false);
}
