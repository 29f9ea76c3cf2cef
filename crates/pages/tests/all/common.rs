//! Checks every source must pass.

use bento_align::Alignment;
use bento_pages::PageSource;

/// Reserve, commit, write, decommit, recommit, read, release; with alignments from 1
/// to 64 pages. Returns the reserved base of the last round, for address checks.
pub(crate) fn round_trip<P: PageSource>(pages: &P) {
    let page = pages.page_size();
    assert!(page.is_power_of_two());
    for align_pages in [1, 2, 16, 64] {
        let align = Alignment::new(align_pages * page).unwrap();
        let size = 8 * page;
        let base = pages.reserve(size, align).expect("reserve");
        assert_eq!(
            base.addr().get() % align.get(),
            0,
            "reserve ignored the alignment"
        );
        // SAFETY: ranges inside the live reservation; everything committed is
        // decommitted before release.
        unsafe {
            pages.commit(base, size).expect("commit");
            for i in 0..8 {
                let p = base.add(i * page);
                p.write(i as u8 + 1);
                p.add(page - 1).write(0xEE);
            }
            for i in 0..8 {
                assert_eq!(base.add(i * page).read(), i as u8 + 1);
            }
            // Decommit the middle pages, recommit them.
            pages.decommit(base.add(2 * page), 4 * page);
            pages
                .commit(base.add(2 * page), 4 * page)
                .expect("recommit");
            if pages.decommitted_reads_zero() {
                for i in 2..6 {
                    assert_eq!(
                        base.add(i * page).read(),
                        0,
                        "page {i} not zero after recommit"
                    );
                    assert_eq!(base.add(i * page + page - 1).read(), 0);
                }
            }
            // The pages around them are untouched.
            assert_eq!(base.add(page).read(), 2);
            assert_eq!(base.add(6 * page).read(), 7);
            base.add(3 * page).write(9);
            assert_eq!(base.add(3 * page).read(), 9);
            pages.decommit(base, size);
            pages.release(base, size);
        }
    }
}

/// Two live reservations never overlap.
pub(crate) fn disjoint<P: PageSource>(pages: &P) {
    let page = pages.page_size();
    let a = pages.reserve(4 * page, Alignment::MIN).unwrap();
    let b = pages.reserve(4 * page, Alignment::MIN).unwrap();
    let (a0, b0) = (a.addr().get(), b.addr().get());
    assert!(
        a0 + 4 * page <= b0 || b0 + 4 * page <= a0,
        "reservations overlap"
    );
    // SAFETY: both are live reservations, never committed.
    unsafe {
        pages.release(a, 4 * page);
        pages.release(b, 4 * page);
    }
}
