use super::*;

#[test]
fn small_sizes_map_linearly_and_large_ones_by_power_of_two() {
    assert_eq!(list_of(32), (0, 2));
    assert_eq!(list_of(240), (0, 15));
    assert_eq!(list_of(256), (1, 0));
    assert_eq!(list_of(256 + 16), (1, 1));
    assert_eq!(list_of(511), (1, 15));
    assert_eq!(list_of(512), (2, 0));
    assert_eq!(list_of(1 << 20), (13, 0));
}

#[test]
fn every_chunk_of_the_list_found_fits_the_request() {
    // For every request size, every size that maps to the list `list_at_least` gives
    // (its smallest member is the list's lower bound) is at least the request.
    let mut size = 32;
    while size < 1 << 24 {
        let (fl, sl) = list_at_least(size);
        let lower = if fl == 0 {
            sl << 4
        } else {
            let log2 = fl as u32 + LINEAR_LOG2 - 1;
            (1 << log2) + (sl << (log2 - SL_BITS))
        };
        assert_eq!(list_of(lower), (fl, sl), "lower bound of ({fl}, {sl})");
        assert!(
            lower >= size,
            "request {size} -> list ({fl}, {sl}) from {lower}"
        );
        // The rounding wastes less than 1/16 of the request.
        assert!(
            lower - size < size / 16 + 16,
            "request {size} rounds to {lower}"
        );
        size += 16 + size / 37 / 16 * 16;
    }
}

#[test]
fn first_list_walks_up_both_levels() {
    let mut index = Index::new();
    index.sl_bitmap[3] = 0b1000_0000;
    index.fl_bitmap = 1 << 3;
    assert_eq!(index.first_list(3, 2), Some((3, 7)));
    assert_eq!(index.first_list(3, 8), None);
    assert_eq!(index.first_list(1, 9), Some((3, 7)));
    index.sl_bitmap[31] = 1;
    index.fl_bitmap |= 1 << 31;
    assert_eq!(index.first_list(3, 8), Some((31, 0)));
    assert_eq!(index.first_list(31, 1), None);
    assert_eq!(index.first_list(32, 0), None);
}

#[test]
#[cfg_attr(miri, ignore = "safe arithmetic: nothing for Miri to check")]
fn same_list_agrees_with_list_of() {
    // Every small size, and around each list boundary of the larger ones.
    let sizes = || {
        (2..600).map(|i| i * 16).chain((9..40).flat_map(|log2| {
            let p = 1usize << log2;
            [p - 16, p, p + 16, p + p / 16 - 16, p + p / 16, p + p / 2]
        }))
    };
    for a in sizes() {
        for b in sizes() {
            assert_eq!(
                same_list(a, b),
                list_of(a) == list_of(b),
                "sizes {a} and {b}"
            );
        }
    }
}
