use core::alloc::Layout;

use allocator_api2::alloc::Allocator;
use bento_align::Alignment;
use bento_primitives::{Bump, with_stack_bump};
use bento_testkit::{
    Api04, Caps, Ops, SizeGen, Stats, Target, cases, forward_to_api02, run, seeded,
};

use crate::Buffer;

/// A `Bump` as a testkit target: allocation through the 0.2 `Allocator`, reset through
/// the inherent method, `validate` as the self-check.
struct BumpTarget<'a, 'buf>(&'a mut Bump<'buf>);

impl Target for BumpTarget<'_, '_> {
    forward_to_api02!(|self, end| &*self.0);

    fn reset(&mut self) {
        self.0.reset();
    }

    fn validate(&mut self) -> Result<Stats, String> {
        self.0
            .validate()
            .map(|_| Stats::default())
            .map_err(|e| e.to_string())
    }
}

fn caps() -> Caps {
    Caps::default()
        .with_ops(Ops::RESET | Ops::HUGE)
        .with_sizes(SizeGen::new(cases(8192, 512)).with_boundaries(&[16, 64, 256]))
        .with_max_align(Alignment::new(8192).unwrap())
        .with_max_live(cases(512, 24))
        .with_validate_every(8)
}

#[test]
fn model_through_api_02_with_resets() {
    // Small, so that programs run out of room between resets.
    let mut buf = Buffer::pages(cases(4, 1));
    let mut bump = Bump::new(buf.bytes());
    let caps = caps();
    let r = seeded(cases(200, 2), |u| {
        bump.reset();
        run(&mut BumpTarget(&mut bump), &caps, u)
    });
    // Not vacuous: blocks were handed out, resized in place and moved, and the buffer
    // ran out (failures) and was reset.
    assert!(r.allocs > 100 * cases(20, 1), "{r:?}");
    assert!(
        r.resizes_in_place > 0 && r.resizes > r.resizes_in_place,
        "{r:?}"
    );
    assert!(r.resets > 0, "{r:?}");
    assert!(r.allocs_failed > 0, "the buffer never ran out: {r:?}");
}

#[test]
fn model_through_api_04() {
    let mut buf = Buffer::pages(64);
    let mut bump = Bump::new(buf.bytes());
    let caps = caps().with_ops(Ops::HUGE);
    let r = seeded(cases(100, 1), |u| {
        bump.reset();
        // `Allocator` is implemented for `&Bump`, so the adaptor holds a `&&Bump`.
        run(&mut Api04::new(&&bump), &caps, u)
    });
    assert!(r.allocs > 0 && r.resizes > 0, "{r:?}");
}

#[test]
fn the_last_block_grows_and_shrinks_in_place() {
    let mut buf = Buffer::pages(1);
    let bump = Bump::new(buf.bytes());
    let a = &bump;
    let l16 = Layout::from_size_align(16, 8).unwrap();
    let p = a.allocate(l16).unwrap().cast::<u8>();
    // SAFETY: `p` is live with `l16`; each resize returns the same block.
    unsafe {
        p.write_bytes(0xAB, 16);
        let g = a
            .grow(p, l16, Layout::from_size_align(1000, 8).unwrap())
            .unwrap();
        assert_eq!(g.cast::<u8>(), p, "grew in place");
        assert_eq!(bump.used(), 1000);
        let s = a
            .shrink(p, Layout::from_size_align(1000, 8).unwrap(), l16)
            .unwrap();
        assert_eq!(s.cast::<u8>(), p);
        assert_eq!(bump.used(), 16, "the tail came back");
        assert_eq!(p.add(15).read(), 0xAB);
        // Freeing the last block gives it back.
        a.deallocate(p, l16);
    }
    assert_eq!(bump.used(), 0);
}

#[test]
fn a_block_below_the_top_moves_when_it_grows() {
    let mut buf = Buffer::pages(1);
    let bump = Bump::new(buf.bytes());
    let a = &bump;
    let l = Layout::from_size_align(8, 8).unwrap();
    let first = a.allocate(l).unwrap().cast::<u8>();
    let _second = a.allocate(l).unwrap();
    // SAFETY: `first` is live with `l`.
    unsafe {
        first.cast::<u64>().write(0x1122_3344_5566_7788);
        let moved = a
            .grow(first, l, Layout::from_size_align(64, 8).unwrap())
            .unwrap()
            .cast::<u8>();
        assert_ne!(moved, first);
        assert_eq!(moved.cast::<u64>().read(), 0x1122_3344_5566_7788);
    }
    let third = a.allocate(l).unwrap().cast::<u8>();
    let _fourth = a.allocate(l).unwrap();
    // SAFETY: `third` is live with `l`.
    let grew = unsafe { bump.try_grow_in_place(third, l, 64) };
    assert!(!grew, "only the last block grows in place");
}

#[test]
fn bad_inputs_fail_cleanly() {
    let mut buf = Buffer::pages(1);
    let bump = Bump::new(buf.bytes());
    // Zero-size: dangling, aligned, free.
    let z = bump
        .alloc_layout(Layout::from_size_align(0, 4096).unwrap())
        .unwrap();
    assert_eq!(z.addr().get() % 4096, 0);
    assert_eq!(bump.used(), 0);
    // Larger than the buffer, and near `isize::MAX`: errors, nothing changes.
    bump.alloc(1u8).unwrap();
    let used = bump.used();
    assert!(
        bump.alloc_layout(Layout::from_size_align(4097, 1).unwrap())
            .is_err()
    );
    assert!(
        bump.alloc_layout(Layout::from_size_align(isize::MAX as usize - 7, 8).unwrap())
            .is_err()
    );
    // An alignment the buffer cannot give while something is allocated.
    assert!(
        bump.alloc_layout(Layout::from_size_align(1, 1 << 20).unwrap())
            .is_err()
    );
    // The offset form with an overflowing offset.
    assert!(
        bump.alloc_layout_at_offset(Layout::from_size_align(8, 8).unwrap(), usize::MAX)
            .is_err()
    );
    assert_eq!(bump.used(), used);
    assert_eq!(bump.validate().map(|r| r.used_bytes), Ok(used));
}

#[test]
fn alignments_up_to_the_page_and_beyond() {
    let mut buf = Buffer::pages(8);
    let mut bump = Bump::new(buf.bytes());
    for log in 0..=13 {
        bump.reset();
        bump.alloc(1u8).unwrap(); // start off the buffer's own alignment
        let align = 1usize << log;
        match bump.alloc_layout(Layout::from_size_align(24, align).unwrap()) {
            Ok(p) => assert_eq!(p.addr().get() % align, 0, "align {align}"),
            Err(_) => panic!("align {align} fits an 8-page buffer"),
        }
    }
}

#[test]
fn offset_allocation_aligns_the_payload() {
    let mut buf = Buffer::pages(1);
    let bump = Bump::new(buf.bytes());
    bump.alloc(1u8).unwrap();
    for (offset, align) in [(4, 16), (12, 64), (100, 128), (0, 32)] {
        let p = bump
            .alloc_layout_at_offset(Layout::from_size_align(offset + 8, align).unwrap(), offset)
            .unwrap();
        assert_eq!(
            (p.addr().get() + offset) % align,
            0,
            "offset {offset}, align {align}"
        );
    }
}

#[test]
fn collections_live_in_it() {
    let mut buf = Buffer::pages(16);
    let bump = Bump::new(buf.bytes());
    let mut v = allocator_api2::vec::Vec::new_in(&bump);
    for i in 0..1000u32 {
        v.push(i);
    }
    assert_eq!(v.iter().map(|&x| u64::from(x)).sum::<u64>(), 499_500);
    let b = allocator_api2::boxed::Box::new_in([7u64; 16], &bump);
    assert_eq!(b.iter().sum::<u64>(), 112);
    let mut map = hashbrown::HashMap::new_in(&bump);
    for i in 0..200u32 {
        map.insert(i, i * 2);
    }
    assert_eq!(map.get(&150), Some(&300));
    assert_eq!(map.len(), 200);
}

#[test]
fn stack_bump_is_scoped_scratch() {
    let n = with_stack_bump::<512, _>(|bump| {
        let s = bump.alloc_str("scratch").unwrap();
        let xs = bump.alloc_slice_copy(&[3u64, 4, 5]).unwrap();
        assert!(bump.alloc([0u8; 1024]).is_err());
        s.len() + xs.len()
    });
    assert_eq!(n, 10);
}

#[test]
fn freeing_an_offset_block_keeps_the_top_aligned() {
    let mut buf = Buffer::pages(1);
    let bump = Bump::new(buf.bytes());
    let a = &bump;
    let first = a
        .allocate(Layout::from_size_align(8, 8).unwrap())
        .unwrap()
        .cast::<u8>();
    // SAFETY: `first` is a live 8-byte block.
    unsafe { first.cast::<u64>().write(0xFEED) };
    // A block whose start is 4 bytes before a 16-aligned address: not 8-aligned.
    let layout = Layout::from_size_align(20, 16).unwrap();
    let odd = bump.alloc_layout_at_offset(layout, 4).unwrap();
    assert_eq!((odd.addr().get() + 4) % 16, 0);
    assert_ne!(odd.addr().get() % 8, 0);
    // SAFETY: `odd` is the last block, live with `layout`.
    unsafe { a.deallocate(odd, layout) };
    assert_eq!(bump.validate().map(|r| r.used_bytes), Ok(bump.used()));
    assert_eq!(bump.used() % 8, 0);
    // The next block does not reach below the first one's end.
    let next = a
        .allocate(Layout::from_size_align(8, 8).unwrap())
        .unwrap()
        .cast::<u8>();
    assert!(next.addr().get() >= first.addr().get() + 8);
    // SAFETY: `first` is still live.
    assert_eq!(unsafe { first.cast::<u64>().read() }, 0xFEED);
}
