use core::alloc::Layout;

use allocator_api2::alloc::Allocator;
use bento_align::Alignment;
use bento_primitives::{LifoCheck, Marker, MarkerError, Stack};
use bento_testkit::{Caps, End, Ops, SizeGen, Stats, Target, cases, forward_to_api02, run, seeded};

use crate::Buffer;

/// A `Stack` as a testkit target, with markers and resets.
struct StackTarget<'a, 'buf> {
    stack: &'a mut Stack<'buf>,
    markers: Vec<Marker>,
}

impl Target for StackTarget<'_, '_> {
    forward_to_api02!(|self, end| &*self.stack);

    fn reset(&mut self) {
        self.stack.reset();
    }

    fn marker(&mut self, _: End) -> usize {
        self.markers.push(self.stack.marker());
        self.markers.len() - 1
    }

    fn rollback(&mut self, _: End, marker: usize) -> Result<(), String> {
        let m = self.markers[marker];
        let before = self.stack.used();
        match self.stack.rollback(m) {
            Ok(()) => {
                // After a rollback the stack is where the marker says, or lower when
                // blocks beneath it had been freed out of order.
                assert!(self.stack.used() <= m.used(), "used() after a rollback");
                assert!(m.used() <= before, "a rollback raised the top");
                Ok(())
            }
            Err(e) => Err(e.to_string()),
        }
    }

    fn validate(&mut self) -> Result<Stats, String> {
        let r = self.stack.validate().map_err(|e| e.to_string())?;
        Ok(Stats {
            live_blocks: Some(r.live_blocks),
            live_bytes: Some(r.live_bytes),
        })
    }
}

#[test]
fn model_with_markers_rollbacks_and_resets() {
    // Small, so that programs run out of room between resets.
    let mut buf = Buffer::pages(cases(2, 1));
    let mut stack = Stack::new(buf.bytes());
    let caps = Caps::default()
        .with_ops(Ops::MARKERS | Ops::RESET | Ops::HUGE)
        .with_sizes(SizeGen::new(cases(4096, 256)).with_boundaries(&[16, 64]))
        .with_max_align(Alignment::new(4096).unwrap())
        .with_max_live(cases(256, 24))
        .with_validate_every(4);
    let r = seeded(cases(300, 2), |u| {
        stack.reset();
        run(
            &mut StackTarget {
                stack: &mut stack,
                markers: Vec::new(),
            },
            &caps,
            u,
        )
    });
    assert!(r.rollbacks > 0 && r.stale_rollbacks_refused > 0, "{r:?}");
    assert!(
        r.resizes_in_place > 0 && r.resets > 0 && r.allocs_failed > 0,
        "{r:?}"
    );
}

#[test]
fn out_of_order_frees_are_reclaimed_when_the_top_goes() {
    let mut buf = Buffer::pages(1);
    let stack = Stack::new(buf.bytes());
    let l = Layout::from_size_align(32, 8).unwrap();
    let a = stack.alloc_layout(l).unwrap();
    let b = stack.alloc_layout(l).unwrap();
    let c = stack.alloc_layout(l).unwrap();
    // SAFETY: each block is live with `l` and freed once.
    unsafe {
        (&stack).deallocate(b, l); // out of order: marked
        assert_eq!(stack.live_blocks(), 2);
        let used = stack.used();
        assert_eq!(stack.validate().unwrap().deferred_blocks, 1);
        (&stack).deallocate(c, l); // pops c, then b
        assert!(stack.used() < used);
        assert_eq!(stack.validate().unwrap().deferred_blocks, 0);
        (&stack).deallocate(a, l);
    }
    assert_eq!(stack.used(), 0);
    assert_eq!(stack.validate().unwrap().live_blocks, 0);
}

#[test]
fn a_rollback_reclaims_blocks_freed_out_of_order_beneath_its_marker() {
    let mut buf = Buffer::pages(1);
    let mut stack = Stack::new(buf.bytes());
    let l = Layout::from_size_align(64, 8).unwrap();
    let a = stack.alloc_layout(l).unwrap();
    let b = stack.alloc_layout(l).unwrap();
    let m = stack.marker();
    let c = stack.alloc_layout(l).unwrap();
    // SAFETY: `b` is live with `l`; freed out of order, it is only marked.
    unsafe { (&stack).deallocate(b, l) };
    let _ = c; // freed by the rollback
    stack.rollback(m).unwrap();
    // The top went past `b`, which nothing above holds any more.
    assert_eq!(stack.validate().unwrap().deferred_blocks, 0);
    assert_eq!(stack.live_blocks(), 1);
    // SAFETY: `a` is live with `l`; now the newest block, it pops.
    unsafe { (&stack).deallocate(a, l) };
    assert_eq!((stack.used(), stack.live_blocks()), (0, 0));
    // Frames after it keep nothing.
    for _ in 0..100 {
        let f = stack.marker();
        stack.alloc_layout(l).unwrap();
        stack.rollback(f).unwrap();
    }
    assert_eq!(stack.used(), 0);
    let r = stack.validate().unwrap();
    assert_eq!((r.live_blocks, r.deferred_blocks), (0, 0));
}

#[test]
#[should_panic(expected = "is not the start of a block of this stack")]
fn a_free_of_an_interior_pointer_is_refused() {
    let mut buf = Buffer::pages(1);
    let stack = Stack::new(buf.bytes());
    let l = Layout::from_size_align(64, 8).unwrap();
    let a = stack.alloc_layout(l).unwrap();
    let _b = stack.alloc_layout(l).unwrap();
    // SAFETY: the misuse under test: a pointer 16 bytes into live block `a`, whose
    // bytes there look like no header. Refused before anything is written.
    unsafe {
        a.as_ptr().write_bytes(0, 64);
        (&stack).deallocate(a.add(16), l);
    }
}

#[test]
fn an_interior_pointer_leaves_the_stack_intact() {
    let mut buf = Buffer::pages(1);
    let stack = Stack::new(buf.bytes());
    let l = Layout::from_size_align(64, 8).unwrap();
    let a = stack.alloc_layout(l).unwrap();
    let b = stack.alloc_layout(l).unwrap();
    // SAFETY: `a` is a live block of 64 bytes.
    unsafe { a.as_ptr().write_bytes(0x11, 64) };
    let refused = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        // SAFETY: the misuse under test, refused before anything is written.
        unsafe { (&stack).deallocate(a.add(24), l) }
    }));
    assert!(refused.is_err());
    // SAFETY: reads of the live block `a`.
    let untouched = (0..64).all(|i| unsafe { a.as_ptr().add(i).read() } == 0x11);
    assert!(untouched, "the refused free wrote into the block");
    let r = stack.validate().unwrap();
    assert_eq!((r.live_blocks, r.deferred_blocks), (2, 0));
    // SAFETY: live blocks with `l`, freed once each.
    unsafe {
        (&stack).deallocate(b, l);
        (&stack).deallocate(a, l);
    }
    assert_eq!(stack.used(), 0);
}

#[test]
#[should_panic(expected = "freed while block #2 is on top")]
fn strict_mode_names_both_blocks() {
    let mut buf = Buffer::pages(1);
    let stack = Stack::with_check(buf.bytes(), LifoCheck::Strict);
    let l = Layout::from_size_align(8, 8).unwrap();
    let a = stack.alloc_layout(l).unwrap();
    let _b = stack.alloc_layout(l).unwrap();
    // SAFETY: `a` is live; freeing it out of order is the misuse under test.
    unsafe { (&stack).deallocate(a, l) };
}

#[test]
#[should_panic(expected = "double free of block #1")]
fn a_double_free_is_caught() {
    let mut buf = Buffer::pages(1);
    let stack = Stack::new(buf.bytes());
    let l = Layout::from_size_align(8, 8).unwrap();
    let a = stack.alloc_layout(l).unwrap();
    let _b = stack.alloc_layout(l).unwrap();
    // SAFETY: the first free is right (deferred); the second is the misuse under test.
    unsafe {
        (&stack).deallocate(a, l);
        (&stack).deallocate(a, l);
    }
}

#[test]
fn markers_are_checked() {
    let mut buf = Buffer::pages(1);
    let mut other_buf = Buffer::pages(1);
    let mut stack = Stack::new(buf.bytes());
    let other = Stack::new(other_buf.bytes());
    let l = Layout::from_size_align(24, 8).unwrap();

    let empty = stack.marker();
    stack.alloc_layout(l).unwrap();
    let one = stack.marker();
    let used_at_one = stack.used();
    let p = stack.alloc_layout(l).unwrap();
    let two = stack.marker();

    // Foreign.
    assert_eq!(stack.rollback(other.marker()), Err(MarkerError::Foreign));
    // Back to `one`: the next block lands where `p` was, and `used` is the marker's.
    stack.rollback(one).unwrap();
    assert_eq!(stack.used(), used_at_one);
    assert_eq!(stack.alloc_layout(l).unwrap(), p);
    // `two` was taken after `one`, over the block the rollback freed: stale now, even
    // though the top is back above it.
    stack.alloc_layout(l).unwrap();
    assert_eq!(stack.rollback(two), Err(MarkerError::Stale));
    // `one` twice is fine; `empty` frees everything.
    stack.rollback(one).unwrap();
    stack.rollback(one).unwrap();
    stack.rollback(empty).unwrap();
    assert_eq!(stack.used(), 0);
    // Above the top.
    assert_eq!(stack.rollback(one), Err(MarkerError::AboveTop));
    assert_eq!(stack.validate().unwrap().live_blocks, 0);
}

#[test]
fn a_marker_is_stale_even_when_the_stack_regrows_to_its_state() {
    let mut buf = Buffer::pages(1);
    let mut stack = Stack::new(buf.bytes());
    let l = Layout::from_size_align(32, 8).unwrap();

    // A rollback below the marker, then the same blocks again: the top and the newest
    // block's offset are the marker's, but its ground was freed in between.
    let level = stack.marker();
    stack.alloc_layout(l).unwrap();
    let frame = stack.marker();
    stack.alloc_layout(l).unwrap();
    stack.rollback(level).unwrap();
    stack.alloc_layout(l).unwrap();
    assert_eq!(stack.used(), frame.used());
    assert_eq!(stack.rollback(frame), Err(MarkerError::Stale));

    // A pop below the marker, then the same block again.
    let a = stack.alloc_layout(l).unwrap();
    let over_a = stack.marker();
    // SAFETY: `a` is the newest live block of layout `l`.
    unsafe { (&stack).deallocate(a, l) };
    assert_eq!(stack.alloc_layout(l).unwrap(), a);
    assert_eq!(stack.rollback(over_a), Err(MarkerError::Stale));

    // Growing the block under a marker in place moves the ground too.
    let g = stack.marker();
    let b = stack.alloc_layout(l).unwrap();
    let over_b = stack.marker();
    // SAFETY: `b` is the newest live block of layout `l`.
    let grown = unsafe { (&stack).grow(b, l, Layout::from_size_align(64, 8).unwrap()) }.unwrap();
    assert_eq!(grown.cast::<u8>(), b, "the newest block grows in place");
    stack.alloc_layout(l).unwrap();
    assert_eq!(stack.rollback(over_b), Err(MarkerError::Stale));
    stack.rollback(g).unwrap();

    // Nested markers: the inner rollback moves the epoch on, and the outer marker is
    // then checked by the walk, and still valid.
    let live = stack.live_blocks();
    let outer = stack.marker();
    stack.alloc_layout(l).unwrap();
    let inner = stack.marker();
    stack.alloc_layout(l).unwrap();
    stack.rollback(inner).unwrap();
    stack.alloc_layout(l).unwrap();
    stack.rollback(outer).unwrap();
    assert_eq!(stack.used(), outer.used());
    assert_eq!(stack.validate().unwrap().live_blocks, live);
}

#[test]
fn markers_on_the_same_block_share_its_mark() {
    let mut buf = Buffer::pages(1);
    let mut stack = Stack::new(buf.bytes());
    let l = Layout::from_size_align(24, 8).unwrap();
    stack.alloc_layout(l).unwrap();
    // Two markers over the same newest block: the second takes the first's mark, so
    // a rollback to either (after the epoch moved on) still finds it.
    let first = stack.marker();
    let second = stack.marker();
    stack.alloc_layout(l).unwrap();
    stack.rollback(second).unwrap();
    stack.alloc_layout(l).unwrap();
    stack.rollback(first).unwrap();
    stack.rollback(second).unwrap();
    assert_eq!((stack.used(), stack.live_blocks()), (first.used(), 1));
    stack.validate().unwrap();
}

#[test]
fn validate_reports_a_broken_mark() {
    let mut buf = Buffer::pages(1);
    let stack = Stack::new(buf.bytes());
    let l = Layout::from_size_align(16, 8).unwrap();
    let p = stack.alloc_layout(l).unwrap();
    let _ = stack.marker();
    stack.validate().unwrap();
    // SAFETY: the block's 16-byte header lies just below it, inside the buffer; its
    // second word is the mark. Overwriting it with an identity never given is the
    // corruption under test (the stack is not used again but by `validate`).
    unsafe { p.sub(8).cast::<u64>().write(1 << 40) };
    assert_eq!(
        stack.validate().map_err(|e| e.what()),
        Err("a block's mark is not below the next mark or the mark of a newer block")
    );
}

#[test]
fn the_top_block_grows_and_shrinks_in_place() {
    let mut buf = Buffer::pages(1);
    let stack = Stack::new(buf.bytes());
    let a = &stack;
    let small = Layout::from_size_align(16, 8).unwrap();
    let big = Layout::from_size_align(1000, 8).unwrap();
    let p = a.allocate(small).unwrap().cast::<u8>();
    // SAFETY: `p` is live; each resize returns the same block.
    unsafe {
        p.write_bytes(0x5C, 16);
        assert_eq!(a.grow(p, small, big).unwrap().cast::<u8>(), p);
        assert_eq!(stack.used(), 16 + 1000);
        assert_eq!(a.shrink(p, big, small).unwrap().cast::<u8>(), p);
        assert_eq!(stack.used(), 16 + 16);
        assert_eq!(p.add(15).read(), 0x5C);
        a.deallocate(p, small);
    }
    assert_eq!(stack.used(), 0);
}

#[test]
fn collections_live_in_it() {
    let mut buf = Buffer::pages(16);
    let mut stack = Stack::new(buf.bytes());
    let m = stack.marker();
    {
        let mut v = allocator_api2::vec::Vec::new_in(&stack);
        v.extend(0..1000u32);
        let b = allocator_api2::boxed::Box::new_in(5u64, &stack);
        let mut map = hashbrown::HashMap::new_in(&stack);
        for i in 0..100u32 {
            map.insert(i, i + 1);
        }
        assert_eq!(map[&99], 100);
        assert_eq!(*b + u64::from(v[999]), 1004);
    }
    assert_eq!(
        stack.live_blocks(),
        0,
        "everything was freed, out of order or not"
    );
    stack.rollback(m).unwrap();
    assert_eq!(stack.used(), 0);
}

#[test]
fn bad_inputs_fail_cleanly() {
    let mut buf = Buffer::pages(1);
    let stack = Stack::new(buf.bytes());
    let z = stack
        .alloc_layout(Layout::from_size_align(0, 64).unwrap())
        .unwrap();
    assert_eq!(z.addr().get() % 64, 0);
    assert_eq!(stack.used(), 0);
    stack.alloc_layout(Layout::new::<u8>()).unwrap();
    let used = stack.used();
    assert!(
        stack
            .alloc_layout(Layout::from_size_align(4096, 8).unwrap())
            .is_err()
    );
    assert!(
        stack
            .alloc_layout(Layout::from_size_align(isize::MAX as usize - 15, 16).unwrap())
            .is_err()
    );
    assert!(
        stack
            .alloc_layout(Layout::from_size_align(8, 1 << 20).unwrap())
            .is_err()
    );
    assert_eq!(stack.used(), used);
    assert_eq!(stack.validate().unwrap().live_blocks, 1);
}

#[test]
fn the_top_keeps_16_bytes_for_the_waiting_header() {
    let mut buf = Buffer::pages(1);
    let stack = Stack::new(&mut buf.bytes()[..256]);
    assert_eq!(stack.capacity(), 256);
    // Each 8-byte block takes 24 bytes; 16 stay free above the top: 10 blocks fit.
    let l = Layout::new::<u64>();
    let blocks: Vec<_> = (0..10).map(|_| stack.alloc_layout(l).unwrap()).collect();
    assert_eq!(stack.used(), 240);
    assert!(stack.alloc_layout(l).is_err());
    assert_eq!(stack.used(), 240, "a failed request changes nothing");
    stack.validate().unwrap();
    // Pop the newest and the space comes back, through the fast path again.
    // SAFETY: the newest block, live.
    unsafe { (&stack).deallocate(blocks[9], l) };
    assert_eq!(stack.alloc_layout(l).unwrap(), blocks[9]);
    // The slow path (a larger alignment) keeps the same room.
    // SAFETY: the newest block, live.
    unsafe { (&stack).deallocate(blocks[9], l) };
    assert!(
        stack
            .alloc_layout(Layout::from_size_align(8, 16).unwrap())
            .is_err()
    );
    assert_eq!(
        stack
            .alloc_layout(Layout::from_size_align(8, 8).unwrap())
            .unwrap(),
        blocks[9]
    );
    // Growing the top block in place stops 16 bytes short too.
    let a = &stack;
    // SAFETY: `blocks[9]` is the live top block of 8 bytes; the grow leaves it in place
    // or fails without change.
    unsafe {
        assert!(
            a.grow(blocks[9], l, Layout::from_size_align(9, 8).unwrap())
                .is_err()
        );
    }
    stack.validate().unwrap();
}

#[test]
fn a_stack_too_small_for_a_header_refuses_everything_cleanly() {
    let mut buf = Buffer::pages(1);
    let mut stack = Stack::new(&mut buf.bytes()[..8]);
    assert_eq!(stack.capacity(), 8);
    let m = stack.marker();
    assert!(stack.alloc_layout(Layout::new::<u8>()).is_err());
    assert!(
        stack
            .alloc_layout(Layout::from_size_align(1, 64).unwrap())
            .is_err()
    );
    assert_eq!(stack.used(), 0);
    stack.rollback(m).unwrap();
    stack.reset();
    assert_eq!(stack.validate().unwrap().live_blocks, 0);
}

#[test]
fn validate_catches_a_write_past_the_top_block() {
    let mut buf = Buffer::pages(1);
    let stack = Stack::new(buf.bytes());
    let p = stack.alloc_layout(Layout::new::<[u8; 24]>()).unwrap();
    stack.validate().unwrap();
    // SAFETY: the 16 bytes after the 24-byte block are the header waiting at the top,
    // inside the buffer; overrunning the block into them is the bug under test.
    unsafe { p.add(24 + 8).write(0xEE) };
    assert_eq!(
        stack.validate().map_err(|e| e.what()),
        Err("the header waiting at the top is not blank")
    );
}

#[test]
#[cfg(debug_assertions)]
#[should_panic(expected = "the header waiting at the top (offset 48) was overwritten")]
fn debug_builds_catch_a_write_past_the_top_block_at_the_next_free() {
    let mut buf = Buffer::pages(1);
    let stack = Stack::new(buf.bytes());
    let l = Layout::new::<[u8; 32]>();
    let p = stack.alloc_layout(l).unwrap();
    // SAFETY: the 16 bytes after the 32-byte block are the header waiting at the top,
    // inside the buffer; overrunning the block into them is the bug under test.
    unsafe { p.add(32).cast::<u32>().write(7) };
    // SAFETY: `p` is the live top block.
    unsafe { (&stack).deallocate(p, l) };
}

#[test]
fn a_walk_over_an_overwritten_header_ends() {
    let mut buf = Buffer::pages(1);
    let mut stack = Stack::new(buf.bytes());
    let l = Layout::new::<[u8; 16]>();
    let m = stack.marker();
    let a = stack.alloc_layout(l).unwrap();
    let b = stack.alloc_layout(l).unwrap();
    // SAFETY: `b` is the live top block. Popping it moves the epoch on, so the rollback
    // below checks its marker by walking the chain.
    unsafe { (&stack).deallocate(b, l) };
    let _c = stack.alloc_layout(l).unwrap();
    // SAFETY: `c`'s header follows `a`'s 16 bytes, inside the buffer; overrunning `a`
    // into it (a record pointing at `c` itself) is the bug under test.
    unsafe { a.add(16).cast::<u64>().write(0) };
    let walked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| stack.rollback(m)));
    if bento_primitives::DEBUG_CHECKS {
        // Debug builds name the overwritten header.
        let panic = walked.expect_err("debug builds panic");
        let message = panic.downcast_ref::<String>().unwrap();
        assert!(message.contains("the block header at offset 32 was overwritten"));
    } else {
        // Release builds refuse the marker: the walk ends instead of looping.
        assert_eq!(walked.ok(), Some(Err(MarkerError::Stale)));
    }
}

#[test]
fn freeing_a_block_whose_header_was_overwritten_keeps_the_top() {
    let mut buf = Buffer::pages(1);
    let stack = Stack::new(buf.bytes());
    let l = Layout::new::<[u8; 16]>();
    let a = stack.alloc_layout(l).unwrap();
    let b = stack.alloc_layout(l).unwrap();
    let used = stack.used();
    // SAFETY: `b`'s header follows `a`'s 16 bytes, inside the buffer; overrunning `a`
    // into it (a record pointing at `b`'s own header) is the bug under test.
    unsafe { a.add(16).cast::<u64>().write(0) };
    let freed = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        // SAFETY: `b` is the live top block.
        unsafe { (&stack).deallocate(b, l) }
    }));
    if bento_primitives::DEBUG_CHECKS {
        let panic = freed.expect_err("debug builds panic");
        let message = panic.downcast_ref::<String>().unwrap();
        assert!(message.contains("the block header at offset 32 was overwritten"));
    } else {
        // Release builds cannot pop to a position the header does not give: the block
        // is only marked, and the next block goes above it, over nothing live.
        assert!(freed.is_ok());
        assert_eq!(stack.used(), used);
        // The walk stops at the broken header, before `a`; `validate` names it.
        assert_eq!(stack.live_blocks(), 0);
        assert!(stack.validate().is_err());
        let c = stack.alloc_layout(l).unwrap();
        assert!(c.addr().get() >= b.addr().get() + 16);
    }
}
