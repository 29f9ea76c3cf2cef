use bento_align::Alignment;
use bento_pages::{FaultyPages, HeapPages, Metered, PageSource, PageStats};
use bento_testkit::{Unstructured, cases, seeded_bytes};

const PAGE: usize = 4096;

/// Random calls; the stats must equal what the calls add up to.
#[test]
fn figures_equal_the_sum_of_the_calls() {
    for case in 0..cases(50, 2) {
        let pages = Metered::new(FaultyPages::new(HeapPages::new()));
        let bytes = seeded_bytes(case, 400);
        let mut u = Unstructured::new(&bytes);
        let mut expect = PageStats::default();
        // Live reservations: (base, pages, which pages are committed).
        let mut live: Vec<(core::ptr::NonNull<u8>, usize, Vec<bool>)> = Vec::new();
        while !u.is_empty() {
            let op = u.int_in_range(0u8..=5).unwrap();
            match op {
                0 | 1 => {
                    let n = u.int_in_range(1usize..=8).unwrap_or(1);
                    if u.ratio(1, 5).unwrap_or(false) {
                        pages.inner().fail_reserve(0);
                    }
                    match pages.reserve(n * PAGE, Alignment::MIN) {
                        Ok(p) => {
                            expect.reserves += 1;
                            expect.reserved += n * PAGE;
                            live.push((p, n, vec![false; n]));
                        }
                        Err(_) => expect.failures += 1,
                    }
                    pages.inner().heal();
                }
                2 | 3 if !live.is_empty() => {
                    let i = u.choose_index(live.len()).unwrap_or(0);
                    let (p, n, committed) = &mut live[i];
                    let k = u.choose_index(*n).unwrap_or(0);
                    if u.ratio(1, 4).unwrap_or(false) {
                        pages.inner().fail_commit(0);
                    }
                    // SAFETY: one page of a live reservation.
                    let page = unsafe { p.add(k * PAGE) };
                    if committed[k] {
                        // SAFETY: a committed page, unused.
                        unsafe { pages.decommit(page, PAGE) };
                        committed[k] = false;
                        expect.decommits += 1;
                        expect.committed -= PAGE;
                    // SAFETY: a decommitted page of a live reservation.
                    } else if unsafe { pages.commit(page, PAGE) }.is_ok() {
                        committed[k] = true;
                        expect.commits += 1;
                        expect.committed += PAGE;
                    } else {
                        expect.failures += 1;
                    }
                    pages.inner().heal();
                }
                _ if !live.is_empty() => {
                    let i = u.choose_index(live.len()).unwrap_or(0);
                    let (p, n, committed) = live.swap_remove(i);
                    for (k, c) in committed.iter().enumerate() {
                        if *c {
                            // SAFETY: a committed page of the reservation, unused.
                            unsafe { pages.decommit(p.add(k * PAGE), PAGE) };
                            expect.decommits += 1;
                            expect.committed -= PAGE;
                        }
                    }
                    // SAFETY: a live reservation with nothing committed.
                    unsafe { pages.release(p, n * PAGE) };
                    expect.releases += 1;
                    expect.reserved -= n * PAGE;
                }
                _ => {}
            }
            expect.max_reserved = expect.max_reserved.max(expect.reserved);
            expect.max_committed = expect.max_committed.max(expect.committed);
            assert_eq!(pages.stats(), expect);
        }
    }
}
