//! Canaries and fill patterns: an overwrite on each side is caught on free, on
//! resize and by `validate()`, with the heap's name, the block, its size, the side and
//! the allocation site; the patterns show after allocation and free.

use core::alloc::Layout;
use core::ptr::NonNull;

use allocator_api2::alloc::{Allocator, Global};
use bento_heap::{Canaries, FillPattern};

use crate::{seen, unregistered, watched};

#[test]
fn an_overwrite_on_each_side_is_caught_on_free_with_the_right_message() {
    let heap = watched("guards-free").guards(Canaries::<16>).build(Global);
    let layout = Layout::from_size_align(24, 8).unwrap();
    for (side, at) in [("front", -3_isize), ("back", 24 + 1)] {
        let p = heap.alloc(layout).unwrap();
        let line = line!() - 1;
        assert!(p.addr().get().is_multiple_of(8));
        // SAFETY: inside the block's guards (a deliberate out-of-bounds write).
        unsafe { p.offset(at).write(0) };
        // SAFETY: live, with its layout.
        unsafe { heap.free(p, layout) };
        let got = seen();
        assert_eq!(got.len(), 1, "{got:?}");
        let distance = if side == "front" { 3 } else { 2 };
        let want = format!(
            "heap \"guards-free\": the {side} guard of the block at {p:p} (24 bytes) was \
             overwritten {distance} byte(s)"
        );
        assert!(got[0].starts_with(&want), "{}\nwanted {want}", got[0]);
        assert!(
            got[0].contains(&format!("; allocated at {}:{line}:", file!())),
            "{}",
            got[0]
        );
    }
    // The blocks were freed all the same: nothing is lost.
    assert_eq!(heap.validate().unwrap().live_blocks, 0);
}

#[test]
fn check_finds_a_broken_guard_of_a_live_block_and_a_resize_checks_it_too() {
    let heap = watched("guards-check").guards(Canaries::<8>).build(Global);
    let layout = Layout::from_size_align(100, 16).unwrap();
    let p = heap.alloc(layout).unwrap();
    assert!(p.addr().get().is_multiple_of(16));
    assert!(heap.validate().is_ok());
    // SAFETY: the byte after the block, in its back guard.
    unsafe { p.add(100).write(1) };
    let err = heap.validate().unwrap_err();
    assert!(err.to_string().contains("back guard"), "{err}");
    assert_eq!(seen().len(), 1);
    // A resize reports it too, then moves the block with fresh guards.
    let bigger = Layout::from_size_align(300, 16).unwrap();
    // SAFETY: live with `layout`.
    let q = unsafe { (&heap).grow(p, layout, bigger) }
        .unwrap()
        .cast::<u8>();
    assert_eq!(seen().len(), 1);
    assert!(heap.validate().is_ok());
    // SAFETY: live with `bigger`.
    unsafe { heap.free(q, bigger) };
    assert!(seen().is_empty());
}

#[test]
fn fill_patterns_show_after_alloc_and_after_free() {
    let heap = unregistered("fill").fill(FillPattern::DEBUG).build(Global);
    let layout = Layout::from_size_align(64, 8).unwrap();
    let p = heap.alloc(layout).unwrap();
    // SAFETY: 64 bytes just allocated.
    let fresh = unsafe { core::slice::from_raw_parts(p.as_ptr(), 64) };
    assert!(fresh.iter().all(|&b| b == 0xCD));
    // A grown block's new bytes get the allocation pattern, its old ones stay.
    // SAFETY: writes inside the block; then grows it with its layout.
    let q = unsafe {
        p.write_bytes(1, 64);
        (&heap).grow(p, layout, Layout::from_size_align(128, 8).unwrap())
    }
    .unwrap()
    .cast::<u8>();
    // SAFETY: 128 bytes of the grown block.
    let bytes = unsafe { core::slice::from_raw_parts(q.as_ptr(), 128) };
    assert!(bytes[..64].iter().all(|&b| b == 1) && bytes[64..].iter().all(|&b| b == 0xCD));
    // Freed bytes get the free pattern: watched through a heap whose inner allocator
    // keeps blocks (a bump never reuses them).
    let mut buf = vec![core::mem::MaybeUninit::<u8>::uninit(); 4096];
    let bump = bento_primitives::Bump::new(&mut buf);
    let filled = unregistered("fill-free")
        .fill(FillPattern::DEBUG)
        .build(&bump);
    let a = filled.alloc(layout).unwrap();
    let b = filled.alloc(layout).unwrap();
    // SAFETY: `a` is live with `layout`; a bump keeps the bytes of a block it cannot
    // take back (not its top one), so reading them after the free reads the fill.
    unsafe {
        filled.free(a, layout);
        assert!(
            core::slice::from_raw_parts(a.as_ptr(), 64)
                .iter()
                .all(|&x| x == 0xDD)
        );
        filled.free(b, layout);
        heap.free(q, Layout::from_size_align(128, 8).unwrap());
    }
}

#[test]
fn guarded_blocks_keep_every_alignment() {
    let heap = unregistered("guards-align")
        .guards(Canaries::<16>)
        .build(Global);
    for shift in 0..13 {
        let layout = Layout::from_size_align(1 + shift * 7, 1 << shift).unwrap();
        let p: NonNull<u8> = heap.alloc(layout).unwrap();
        assert!(p.addr().get().is_multiple_of(1 << shift));
        // SAFETY: live, with its layout.
        unsafe { heap.free(p, layout) };
    }
    assert_eq!(heap.validate().unwrap().total_frees, 13);
}

#[test]
fn a_shrink_in_place_fills_the_bytes_it_drops() {
    let space = crate::space();
    let heap = unregistered("fill-shrink")
        .fill(FillPattern::DEBUG)
        .build(&space);
    let old = Layout::from_size_align(1000, 8).unwrap();
    let new = Layout::from_size_align(100, 8).unwrap();
    let p = heap.alloc(old).unwrap();
    // A neighbour, so that the dropped tail stays a chunk of its own.
    let after = heap.alloc(old).unwrap();
    // SAFETY: the block's 1000 bytes.
    unsafe { p.write_bytes(0x11, 1000) };
    // SAFETY: live with `old`; `new` is smaller.
    let q = unsafe { (&heap).shrink(p, old, new) }.unwrap().cast::<u8>();
    assert_eq!(q, p, "the space shrinks in place");
    // SAFETY: the 900 bytes after the shrunk block lie in the space's memory, which
    // stays readable (its tail is a free chunk now).
    let tail = unsafe { core::slice::from_raw_parts(p.as_ptr().add(100), 900) };
    // The space writes the free tail's tags and links into its first 32 bytes.
    let tail = &tail[32..];
    let old_data = tail.iter().filter(|&&b| b == 0x11).count();
    assert_eq!(
        old_data, 0,
        "{old_data} of the 868 dropped bytes checked still hold the old data"
    );
    // SAFETY: the first 100 bytes are the block's.
    let kept = unsafe { core::slice::from_raw_parts(p.as_ptr(), 100) };
    assert!(kept.iter().all(|&b| b == 0x11));
    // SAFETY: live blocks with their layouts.
    unsafe {
        heap.free(q, new);
        heap.free(after, old);
    }
}
