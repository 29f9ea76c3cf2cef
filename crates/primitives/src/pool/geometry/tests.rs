use super::*;

#[test]
fn geometry_divides_exactly_by_any_stride() {
    let base = NonNull::<u8>::dangling();
    for stride in [8usize, 16, 24, 40, 48, 56, 64, 72, 96, 1000, 4096, 4104] {
        let geo = Geometry::new(base, stride, Alignment::new(8).unwrap(), 1 << 20);
        for index in [0usize, 1, 2, 3, 1000, (1 << 20) - 1, 1 << 20] {
            // SAFETY: only the address is used.
            let ptr = base.map_addr(|a| a.checked_add(index * stride).unwrap());
            assert_eq!(geo.index_of(ptr), index, "stride {stride}");
        }
    }
}

#[test]
fn stride_rounds_to_a_pointer_and_the_alignment() {
    let word = size_of::<usize>();
    let s =
        |size, align| Geometry::stride(Layout::from_size_align(size, align).unwrap(), word, word);
    assert_eq!(s(1, 1).unwrap().0, word);
    assert_eq!(s(0, 1).unwrap().0, word);
    assert_eq!(s(24, 8).unwrap().0, 24);
    assert_eq!(s(24, 16).unwrap(), (32, Alignment::new(16).unwrap()));
    assert_eq!(s(100, 64).unwrap().0, 128);
    assert!(matches!(
        s(isize::MAX as usize, 1),
        Err(PoolError::ChunkTooLarge { .. })
    ));
}
