use super::*;
use proptest::prelude::*;

/// Any alignment `usize` can hold.
fn alignment() -> impl Strategy<Value = Alignment> {
    (0..usize::BITS).prop_map(|log| Alignment::new(1 << log).unwrap())
}

/// Addresses biased towards both ends of the address space, where overflow lives.
fn address() -> impl Strategy<Value = usize> {
    prop_oneof![
        any::<usize>(),
        0usize..4096,
        (0usize..4096).prop_map(|d| usize::MAX - d),
    ]
}

fn granule() -> impl Strategy<Value = NonZeroUsize> {
    prop_oneof![
        (1usize..200).prop_map(|g| NonZeroUsize::new(g).unwrap()),
        any::<usize>().prop_filter_map("zero", NonZeroUsize::new),
    ]
}

// Fewer cases under Miri: it interprets every instruction.
fn config() -> ProptestConfig {
    ProptestConfig {
        cases: if cfg!(miri) { 16 } else { 2048 },
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn new_accepts_exactly_powers_of_two(v in any::<usize>()) {
        prop_assert_eq!(Alignment::new(v).is_some(), v.is_power_of_two());
        prop_assert_eq!(Alignment::try_from(v).is_ok(), v.is_power_of_two());
    }

    #[test]
    fn accessors_agree(a in alignment()) {
        prop_assert_eq!(1usize << a.log2(), a.get());
        prop_assert_eq!(a.mask() + 1, a.get());
        prop_assert_eq!(usize::from(a), a.get());
        prop_assert_eq!(Alignment::try_from(a.get()), Ok(a));
    }

    #[test]
    #[cfg_attr(miri, ignore = "safe arithmetic: nothing for Miri to check")]
    fn align_up_is_the_least_aligned_bound(addr in address(), a in alignment()) {
        match align_up(addr, a) {
            Some(r) => {
                prop_assert!(is_aligned(r, a));
                prop_assert!(r >= addr);
                // Minimal: the previous multiple is below `addr`.
                prop_assert!(r - addr < a.get());
                prop_assert_eq!(r - addr, padding_for(addr, a));
            }
            None => {
                // `None` exactly when the next multiple exceeds `usize::MAX`.
                let exact = (addr as u128).div_ceil(a.get() as u128) * a.get() as u128;
                prop_assert!(exact > usize::MAX as u128);
            }
        }
    }

    #[test]
    #[cfg_attr(miri, ignore = "safe arithmetic: nothing for Miri to check")]
    fn align_down_is_the_greatest_aligned_bound(addr in address(), a in alignment()) {
        let r = align_down(addr, a);
        prop_assert!(is_aligned(r, a));
        prop_assert!(r <= addr);
        prop_assert!(addr - r < a.get());
        prop_assert_eq!(is_aligned(addr, a), r == addr);
    }

    #[test]
    #[cfg_attr(miri, ignore = "safe arithmetic: nothing for Miri to check")]
    fn padding_is_below_the_alignment(addr in address(), a in alignment()) {
        let pad = padding_for(addr, a);
        prop_assert!(pad < a.get());
        prop_assert!(is_aligned(addr.wrapping_add(pad), a));
    }

    #[test]
    #[cfg_attr(miri, ignore = "safe arithmetic: nothing for Miri to check")]
    fn offset_form_puts_the_block_on_the_boundary(
        addr in address(),
        a in alignment(),
        offset in prop_oneof![0usize..64, any::<usize>()],
    ) {
        match align_up_with_offset(addr, a, offset) {
            Some(r) => {
                prop_assert!(r >= addr);
                let block = r + offset; // must not overflow: `Some` promises it fits
                prop_assert!(is_aligned(block, a));
                // Minimal: one alignment less would start before `addr`.
                prop_assert!(r - addr < a.get());
            }
            None => {
                let fits = addr
                    .checked_add(offset)
                    .and_then(|start| start.checked_add(padding_for(start, a)));
                prop_assert!(fits.is_none());
            }
        }
    }

    #[test]
    #[cfg_attr(miri, ignore = "safe arithmetic: nothing for Miri to check")]
    fn rounding_to_a_granule(size in address(), g in granule()) {
        let down = round_down_to(size, g);
        prop_assert!(down <= size && size - down < g.get());
        prop_assert_eq!(down % g.get(), 0);
        // Reference in 128-bit arithmetic, where nothing overflows.
        let exact = (size as u128).div_ceil(g.get() as u128) * g.get() as u128;
        match round_up_to(size, g) {
            Some(up) => prop_assert_eq!(up as u128, exact),
            None => prop_assert!(exact > usize::MAX as u128),
        }
    }

    #[test]
    #[cfg_attr(miri, ignore = "safe arithmetic: nothing for Miri to check")]
    fn power_of_two_granules_agree_with_align(size in address(), a in alignment()) {
        let g = NonZeroUsize::new(a.get()).unwrap();
        prop_assert_eq!(round_up_to(size, g), align_up(size, a));
        prop_assert_eq!(round_down_to(size, g), align_down(size, a));
    }

    #[test]
    fn pointer_forms_keep_provenance_and_agree(start in 0usize..256, log in 0u32..9) {
        #[repr(C, align(256))]
        struct Buf([u8; 1024]);
        let mut buf = Buf([0; 1024]);
        let base = buf.0.as_mut_ptr();
        let a = Alignment::new(1 << log).unwrap();
        let p = base.wrapping_add(start);

        let up = align_ptr_up(p, a).expect("a 256-aligned buffer can be aligned to 256");
        prop_assert_eq!(Some(up.addr()), align_up(p.addr(), a));
        prop_assert!(is_ptr_aligned(up, a));
        // Provenance is kept: the pointer can be written through.
        // SAFETY: `up` is at most 255 bytes past `p`, inside the 1024-byte buffer.
        unsafe { up.write(7) };

        let down = align_ptr_down(p, a);
        prop_assert_eq!(down.addr(), align_down(p.addr(), a));
        // SAFETY: `down` is between `base` and `p`, inside the buffer.
        unsafe { down.write(9) };
        prop_assert_eq!(is_ptr_aligned(p, a), up == p);
    }
}

#[test]
fn constants() {
    assert_eq!(Alignment::MIN.get(), 1);
    assert_eq!(Alignment::PAGE_4K.get(), 4096);
    assert_eq!(Alignment::MAX.get(), 1 << (usize::BITS - 1));
    assert_eq!(Alignment::of::<u64>().get(), align_of::<u64>());
    assert!(Alignment::MIN < Alignment::PAGE_4K);
}

#[test]
fn edges_of_the_address_space() {
    let a = Alignment::PAGE_4K;
    assert_eq!(align_up(usize::MAX, Alignment::MIN), Some(usize::MAX));
    assert_eq!(align_up(usize::MAX, a), None);
    assert_eq!(align_up(usize::MAX - 4095, a), Some(usize::MAX - 4095));
    assert_eq!(align_up(usize::MAX - 4096, a), Some(usize::MAX - 4095));
    assert_eq!(align_up(1, Alignment::MAX), Some(Alignment::MAX.get()));
    assert_eq!(align_up(Alignment::MAX.get() + 1, Alignment::MAX), None);
    assert_eq!(align_up_with_offset(0, a, usize::MAX), None);
    assert_eq!(align_up_with_offset(0, a, 4096), Some(0));
}

#[test]
fn formatting() {
    extern crate std;
    use std::format;
    let a = Alignment::new(32).unwrap();
    assert_eq!(format!("{a:?}"), "Alignment(32)");
    assert_eq!(format!("{a}"), "32");
    assert_eq!(
        format!("{}", Alignment::try_from(3).unwrap_err()),
        "3 is not a power of two"
    );
}
