use core::alloc::Layout;

use allocator_api2::alloc::Allocator;
use bento_align::Alignment;
use bento_pages::{FaultyPages, HeapPages};
use bento_primitives::{
    AllocError, ArenaConfig, DoubleArena, DoubleStack, LinearCorruption, Marker, MarkerError,
    StackEnd, StackReport,
};
use bento_testkit::{Caps, End, Ops, SizeGen, Stats, Target, cases, forward_to_api02, run, seeded};

use crate::Buffer;

/// What the model test needs of a double-ended allocator.
pub(crate) trait Double {
    fn end(&self, end: End) -> StackEnd<'_>;
    fn rollback(&mut self, marker: Marker) -> Result<(), MarkerError>;
    fn reset(&mut self);
    fn validate(&self) -> Result<StackReport, LinearCorruption>;
    fn fail_next(&mut self, _k: u32) {}
}

impl Double for DoubleStack<'_> {
    fn end(&self, end: End) -> StackEnd<'_> {
        match end {
            End::Low => self.lower(),
            End::High => self.upper(),
        }
    }

    fn rollback(&mut self, marker: Marker) -> Result<(), MarkerError> {
        DoubleStack::rollback(self, marker)
    }

    fn reset(&mut self) {
        DoubleStack::reset(self);
    }

    fn validate(&self) -> Result<StackReport, LinearCorruption> {
        DoubleStack::validate(self)
    }
}

impl Double for DoubleArena<FaultyPages<HeapPages>> {
    fn end(&self, end: End) -> StackEnd<'_> {
        match end {
            End::Low => self.lower(),
            End::High => self.upper(),
        }
    }

    fn rollback(&mut self, marker: Marker) -> Result<(), MarkerError> {
        DoubleArena::rollback(self, marker)
    }

    fn reset(&mut self) {
        // Alternate between the O(1) reset and the one that gives pages back.
        if self.committed().is_multiple_of(8192) {
            self.reset_and_decommit();
        } else {
            DoubleArena::reset(self);
        }
    }

    fn validate(&self) -> Result<StackReport, LinearCorruption> {
        DoubleArena::validate(self)
    }

    fn fail_next(&mut self, k: u32) {
        self.source().fail_commit(k as usize);
    }
}

/// A double-ended allocator as a testkit target with two ends.
pub(crate) struct DoubleTarget<'a, D> {
    pub(crate) double: &'a mut D,
    pub(crate) markers: Vec<Marker>,
}

impl<D: Double> Target for DoubleTarget<'_, D> {
    forward_to_api02!(|self, end| self.double.end(end));

    fn reset(&mut self) {
        self.double.reset();
    }

    fn marker(&mut self, end: End) -> usize {
        self.markers.push(self.double.end(end).marker());
        self.markers.len() - 1
    }

    fn rollback(&mut self, end: End, marker: usize) -> Result<(), String> {
        let m = self.markers[marker];
        let other = match end {
            End::Low => End::High,
            End::High => End::Low,
        };
        let other_used = self.double.end(other).used();
        self.double.rollback(m).map_err(|e| e.to_string())?;
        // The end is where the marker says (or lower, when blocks beneath it had
        // been freed out of order); the other end did not move.
        assert!(
            self.double.end(end).used() <= m.used(),
            "used() after a rollback"
        );
        assert_eq!(
            self.double.end(other).used(),
            other_used,
            "the other end moved"
        );
        Ok(())
    }

    fn fail_next(&mut self, k: u32) {
        self.double.fail_next(k);
    }

    fn validate(&mut self) -> Result<Stats, String> {
        let r = self.double.validate().map_err(|e| e.to_string())?;
        Ok(Stats {
            live_blocks: Some(r.live_blocks),
            live_bytes: Some(r.live_bytes),
        })
    }
}

pub(crate) fn double_caps(ops: Ops) -> Caps {
    Caps::default()
        .with_ops(ops)
        .with_sizes(SizeGen::new(cases(4096, 256)).with_boundaries(&[16, 64]))
        .with_max_align(Alignment::new(4096).unwrap())
        .with_max_live(cases(256, 24))
        .with_validate_every(4)
}

#[test]
fn model_with_two_ends_markers_and_resets() {
    let mut buf = Buffer::pages(cases(3, 1));
    let mut double = DoubleStack::new(buf.bytes());
    let caps = double_caps(Ops::TWO_ENDS | Ops::MARKERS | Ops::RESET | Ops::HUGE);
    let r = seeded(cases(300, 1), |u| {
        double.reset();
        run(
            &mut DoubleTarget {
                double: &mut double,
                markers: Vec::new(),
            },
            &caps,
            u,
        )
    });
    // Coverage is the native runs' job; under Miri one case looks for UB.
    if !cfg!(miri) {
        assert!(r.rollbacks > 0 && r.stale_rollbacks_refused > 0, "{r:?}");
        assert!(r.resizes_in_place > 0 && r.allocs_failed > 0, "{r:?}");
    }
}

#[test]
fn model_of_the_double_arena_with_commit_failures() {
    let config = ArenaConfig {
        reserve: cases(64 << 10, 16 << 10),
        commit_step: 4096,
        ..ArenaConfig::default()
    };
    let mut arena = DoubleArena::with_source(FaultyPages::new(HeapPages::new()), config).unwrap();
    let caps = double_caps(Ops::TWO_ENDS | Ops::MARKERS | Ops::RESET | Ops::FAIL_NEXT);
    let r = seeded(cases(200, 1), |u| {
        arena.source().heal();
        arena.reset();
        run(
            &mut DoubleTarget {
                double: &mut arena,
                markers: Vec::new(),
            },
            &caps,
            u,
        )
    });
    // Coverage is the native runs' job; under Miri one case looks for UB.
    if !cfg!(miri) {
        assert!(r.rollbacks > 0 && r.allocs_failed > 0, "{r:?}");
        assert!(
            arena.source().injected() > 0,
            "no commit failure was injected"
        );
    }
}

#[test]
fn the_ends_fail_cleanly_where_they_meet() {
    let mut buf = Buffer::pages(1);
    let stack = DoubleStack::new(buf.bytes());
    let l = Layout::from_size_align(100, 8).unwrap();
    let mut lows = 0;
    while stack.lower().alloc_layout(l).is_ok() {
        lows += 1;
        assert!(stack.upper().alloc_layout(l).is_ok() || stack.free_between() < 16 + 104);
    }
    assert!(lows > 10);
    let (between, lower, upper) = (
        stack.free_between(),
        stack.lower().used(),
        stack.upper().used(),
    );
    assert!(between < 16 + 104, "{between} bytes left unused");
    assert_eq!(stack.upper().alloc_layout(l), Err(AllocError));
    assert_eq!(stack.lower().alloc_layout(l), Err(AllocError));
    // A failed request changes nothing.
    assert_eq!(
        (
            stack.free_between(),
            stack.lower().used(),
            stack.upper().used()
        ),
        (between, lower, upper)
    );
    assert_eq!(lower + upper + between, stack.capacity());
    stack.validate().unwrap();
}

#[test]
fn one_end_rolls_back_while_the_other_is_borrowed() {
    let mut buf = Buffer::pages(4);
    let mut stack = DoubleStack::new(buf.bytes());
    let (level, mut frame) = stack.split();
    let n = cases(500, 50) as u32;
    let mut meshes = allocator_api2::vec::Vec::new_in(&level);
    meshes.extend((0..n).map(|i| i * 3));
    let start = frame.marker();
    for f in 0..cases(50, 3) as u32 {
        let mut scratch = allocator_api2::vec::Vec::new_in(&frame);
        scratch.extend(meshes.iter().map(|m| m + f));
        assert_eq!(scratch[n as usize - 1], 3 * (n - 1) + f);
        drop(scratch);
        frame.rollback(start).unwrap();
        assert_eq!(frame.used(), 0);
    }
    // Markers of one end are foreign to the other.
    assert_eq!(frame.rollback(level.marker()), Err(MarkerError::Foreign));
    assert_eq!(meshes.iter().sum::<u32>(), 3 * (n - 1) * n / 2);
    drop(meshes);
    stack.validate().unwrap();
}

#[test]
fn an_upper_marker_is_stale_when_its_block_was_replaced() {
    let mut buf = Buffer::pages(1);
    let mut stack = DoubleStack::new(buf.bytes());
    let l = Layout::from_size_align(32, 8).unwrap();
    // Pop the block under a marker of the upper end and place the same block again:
    // the top and the newest block's offset come back, the block does not.
    let a = stack.upper().alloc_layout(l).unwrap();
    let over_a = stack.upper().marker();
    // SAFETY: `a` is the upper end's newest live block of layout `l`.
    unsafe { stack.upper().deallocate(a, l) };
    assert_eq!(stack.upper().alloc_layout(l).unwrap(), a);
    assert_eq!(stack.rollback(over_a), Err(MarkerError::Stale));

    // Nested markers on the upper end: after the inner rollback the outer marker is
    // checked by the walk down (towards higher offsets) and is still valid.
    let outer = stack.upper().marker();
    stack.upper().alloc_layout(l).unwrap();
    let inner = stack.upper().marker();
    stack.upper().alloc_layout(l).unwrap();
    stack.rollback(inner).unwrap();
    stack.upper().alloc_layout(l).unwrap();
    stack.rollback(outer).unwrap();
    assert_eq!(stack.upper().used(), outer.used());
    assert_eq!(stack.validate().unwrap().live_blocks, 1);
}

#[test]
fn the_upper_end_resizes_within_its_slack_and_moves_beyond() {
    let mut buf = Buffer::pages(1);
    let stack = DoubleStack::new(buf.bytes());
    let upper = stack.upper();
    let small = Layout::from_size_align(20, 8).unwrap(); // 4 bytes of slack
    let p = upper.allocate(small).unwrap().cast::<u8>();
    // SAFETY: `p` is live with each layout in turn.
    unsafe {
        p.write_bytes(0xA5, 20);
        let in_slack = Layout::from_size_align(24, 8).unwrap();
        assert_eq!(upper.grow(p, small, in_slack).unwrap().cast::<u8>(), p);
        let big = Layout::from_size_align(200, 8).unwrap();
        let q = upper.grow(p, in_slack, big).unwrap().cast::<u8>();
        assert_ne!(q, p, "the upper end's block cannot grow down in place");
        assert_eq!(q.add(19).read(), 0xA5);
        assert_eq!(upper.shrink(q, big, small).unwrap().cast::<u8>(), q);
        upper.deallocate(q, small);
    }
    assert_eq!(stack.validate().unwrap().live_blocks, 0);
    assert_eq!(stack.upper().used(), 0);
}

#[test]
fn collections_live_at_both_ends() {
    let mut buf = Buffer::pages(16);
    let stack = DoubleStack::new(buf.bytes());
    let mut names = hashbrown::HashMap::new_in(stack.lower());
    let mut v = allocator_api2::vec::Vec::new_in(stack.upper());
    for i in 0..200u32 {
        names.insert(i, i * i);
        v.push(u64::from(i));
    }
    assert_eq!(names[&199], 199 * 199);
    assert_eq!(v.iter().sum::<u64>(), 199 * 200 / 2);
    drop((names, v));
    let r = stack.validate().unwrap();
    assert_eq!((r.live_blocks, r.deferred_blocks), (0, 0));
}

#[test]
fn double_arena_commits_from_both_sides_and_gives_back() {
    let pages = bento_pages::Metered::new(HeapPages::new());
    let config = ArenaConfig {
        reserve: 1 << 20,
        commit_step: 16 << 10,
        retain_on_reset: 4096,
        ..ArenaConfig::default()
    };
    {
        let mut arena = DoubleArena::with_source(&pages, config).unwrap();
        arena.lower().alloc_layout(Layout::new::<u8>()).unwrap();
        assert_eq!(arena.committed(), 16 << 10);
        arena
            .upper()
            .alloc_layout(Layout::new::<[u8; 40_000]>())
            .unwrap();
        assert_eq!(arena.committed(), (16 << 10) + (40 << 10));
        assert_eq!(pages.stats().committed, arena.committed());
        arena.reset_and_decommit();
        assert_eq!(arena.committed(), 2 * 4096);
        assert_eq!(pages.stats().committed, 2 * 4096);
        arena.validate().unwrap();
    }
    crate::assert_all_given_back(&pages);
}

#[test]
fn double_arena_commit_failure_changes_nothing() {
    let config = ArenaConfig {
        reserve: 1 << 20,
        commit_step: 4096,
        ..ArenaConfig::default()
    };
    let arena = DoubleArena::with_source(FaultyPages::new(HeapPages::new()), config).unwrap();
    let keep = arena.upper().alloc_layout(Layout::new::<u64>()).unwrap();
    // SAFETY: `keep` is a live block for a `u64`.
    unsafe { keep.cast::<u64>().write(77) };
    let before = (arena.upper().used(), arena.committed());
    arena.source().fail_commits_from(0);
    let big = Layout::from_size_align(10_000, 8).unwrap();
    assert_eq!(arena.upper().alloc_layout(big), Err(AllocError));
    assert_eq!(arena.lower().alloc_layout(big), Err(AllocError));
    assert_eq!((arena.upper().used(), arena.committed()), before);
    // SAFETY: as above.
    assert_eq!(unsafe { keep.cast::<u64>().read() }, 77);
    arena.source().heal();
    assert!(arena.upper().alloc_layout(big).is_ok());
    arena.validate().unwrap();
}

#[test]
fn the_retained_part_stays_on_page_boundaries() {
    // Three pages: half the reservation is not a page boundary.
    let config = ArenaConfig {
        reserve: 3 * 4096,
        commit_step: 4096,
        retain_on_reset: 8192,
        ..ArenaConfig::default()
    };
    let mut arena = DoubleArena::with_source(HeapPages::new(), config).unwrap();
    arena
        .lower()
        .alloc_layout(Layout::new::<[u8; 10_000]>())
        .unwrap();
    assert_eq!(arena.committed(), 3 * 4096);
    arena.reset_and_decommit();
    // Each side keeps at most half the reservation, rounded down to a page: 4096 of
    // the 8192 asked for, at the lower side (the upper side had nothing committed).
    assert_eq!(arena.committed(), 4096);
    arena.validate().unwrap();
    arena
        .upper()
        .alloc_layout(Layout::new::<[u8; 10_000]>())
        .unwrap();
    arena.validate().unwrap();
}

#[test]
fn a_caught_strict_panic_leaves_the_count_right() {
    let mut buf = Buffer::pages(1);
    let stack =
        bento_primitives::Stack::with_check(buf.bytes(), bento_primitives::LifoCheck::Strict);
    let l = Layout::new::<u64>();
    let a = stack.alloc_layout(l).unwrap();
    let _b = stack.alloc_layout(l).unwrap();
    let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        // SAFETY: `a` is live; the out-of-order free is the misuse under test.
        unsafe { (&stack).deallocate(a, l) }
    }));
    assert!(caught.is_err());
    assert_eq!(stack.live_blocks(), 2);
    stack.validate().unwrap();
}

#[test]
fn the_upper_end_stops_at_the_lower_ends_waiting_header() {
    let mut buf = Buffer::pages(1);
    let stack = DoubleStack::new(&mut buf.bytes()[..256]);
    let small = Layout::new::<u64>();
    // The lower end's block ends at 24; its next header waits at 24..40.
    let low = stack.lower().alloc_layout(small).unwrap();
    assert!(
        stack
            .upper()
            .alloc_layout(Layout::from_size_align(208, 8).unwrap())
            .is_err()
    );
    // 200 bytes put the upper header at 40: the ends meet exactly.
    let high = stack
        .upper()
        .alloc_layout(Layout::from_size_align(200, 8).unwrap())
        .unwrap();
    assert_eq!(stack.free_between(), 16);
    assert_eq!(
        stack.lower().alloc_layout(Layout::new::<u8>()),
        Err(AllocError)
    );
    assert_eq!(
        stack.upper().alloc_layout(Layout::new::<u8>()),
        Err(AllocError)
    );
    stack.validate().unwrap();
    // Empty again, the lower end still keeps its waiting header at its origin (so its
    // fast path works there): the upper end may go down to 16, not 0.
    // SAFETY: `low` is the lower end's only block, live.
    unsafe { stack.lower().deallocate(low, small) };
    assert_eq!(stack.free_between(), 40);
    assert_eq!(
        stack.upper().alloc_layout(Layout::new::<[u8; 24]>()),
        Err(AllocError)
    );
    let more = stack
        .upper()
        .alloc_layout(Layout::new::<[u8; 8]>())
        .unwrap();
    assert_eq!(stack.free_between(), 16);
    stack.validate().unwrap();
    // SAFETY: both are the upper end's blocks, newest first.
    unsafe {
        stack.upper().deallocate(more, Layout::new::<[u8; 8]>());
        stack
            .upper()
            .deallocate(high, Layout::from_size_align(200, 8).unwrap());
    }
    assert_eq!(stack.free_between(), stack.capacity());
}

#[test]
fn a_walk_down_the_upper_end_over_an_overwritten_header_ends() {
    let mut buf = Buffer::pages(1);
    let mut stack = DoubleStack::new(buf.bytes());
    let l = Layout::new::<[u8; 16]>();
    let m = stack.upper().marker();
    let a = stack.upper().alloc_layout(l).unwrap();
    let b = stack.upper().alloc_layout(l).unwrap();
    // SAFETY: `b` is the upper end's newest block. Popping it moves the epoch on, so
    // the rollback below checks its marker by walking the chain.
    unsafe { stack.upper().deallocate(b, l) };
    let c = stack.upper().alloc_layout(l).unwrap();
    // `c` ends where `a`'s header starts (the upper end grows down).
    assert_eq!(c.addr().get() + 32, a.addr().get());
    // SAFETY: `a`'s header lies right after `c`'s 16 bytes, inside the buffer;
    // overrunning `c` into it (a record pointing at `a`'s own header) is the bug under
    // test.
    unsafe { c.add(16).cast::<u64>().write(0) };
    let walked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| stack.rollback(m)));
    if bento_primitives::DEBUG_CHECKS {
        let panic = walked.expect_err("debug builds panic");
        let message = panic.downcast_ref::<String>().unwrap();
        assert!(message.contains("was overwritten"), "{message}");
    } else {
        assert_eq!(walked.ok(), Some(Err(MarkerError::Stale)));
    }
}

#[test]
fn a_double_arena_lower_end_back_at_its_origin_writes_a_fresh_header() {
    let config = ArenaConfig {
        reserve: 1 << 20,
        commit_step: 4096,
        ..ArenaConfig::default()
    };
    let arena = DoubleArena::with_source(HeapPages::new(), config).unwrap();
    let l = Layout::new::<u64>();
    let lower = arena.lower();
    let a = lower.alloc_layout(l).unwrap();
    let b = lower.alloc_layout(l).unwrap();
    // SAFETY: both are live blocks of the lower end: `a` freed out of order is marked
    // in its header at the origin; freeing `b` then reclaims it, back to the origin,
    // where this lazy end keeps no waiting header, so the stale one stays there.
    unsafe {
        lower.deallocate(a, l);
        lower.deallocate(b, l);
    }
    assert_eq!(lower.used(), 0);
    // The next block from the origin must take the slow path, which writes its header
    // afresh: one that reused the stale, freed-marked header would not count as live.
    let c = lower.alloc_layout(l).unwrap();
    assert_eq!(c, a);
    assert_eq!(lower.live_blocks(), 1);
    assert_eq!(arena.validate().unwrap().live_blocks, 1);
}

#[test]
fn double_stacks_too_small_for_a_block_refuse_cleanly() {
    let mut buf = Buffer::pages(1);
    for len in [8, 16, 24] {
        let mut stack = DoubleStack::new(&mut buf.bytes()[..len]);
        for end in [stack.lower(), stack.upper()] {
            assert_eq!(end.alloc_layout(Layout::new::<u8>()), Err(AllocError));
            assert_eq!(end.used(), 0);
        }
        // A zero-size block needs no memory.
        assert!(stack.lower().alloc_layout(Layout::new::<()>()).is_ok());
        stack.validate().unwrap();
        stack.reset();
        stack.validate().unwrap();
    }
}

/// `a, b` at `end`, a marker, `c`, `b` freed out of order, a rollback: the rollback
/// takes `b` too, and `a` then pops; frames after it keep nothing.
fn rollback_reclaims_beneath_the_marker(double: &mut impl Double, end: End) {
    let l = Layout::from_size_align(64, 8).unwrap();
    let a = double.end(end).alloc_layout(l).unwrap();
    let b = double.end(end).alloc_layout(l).unwrap();
    let m = double.end(end).marker();
    double.end(end).alloc_layout(l).unwrap();
    // SAFETY: `b` is live with `l`; freed out of order, it is only marked.
    unsafe { double.end(end).deallocate(b, l) };
    double.rollback(m).unwrap();
    assert_eq!(double.validate().unwrap().deferred_blocks, 0, "{end:?}");
    // SAFETY: `a` is live with `l`, now the newest block of its end.
    unsafe { double.end(end).deallocate(a, l) };
    for _ in 0..100 {
        let f = double.end(end).marker();
        double.end(end).alloc_layout(l).unwrap();
        double.rollback(f).unwrap();
    }
    assert_eq!(double.end(end).used(), 0, "{end:?}");
    let r = double.validate().unwrap();
    assert_eq!((r.live_blocks, r.deferred_blocks), (0, 0), "{end:?}");
}

#[test]
fn a_rollback_reclaims_blocks_freed_out_of_order_beneath_its_marker() {
    let mut buf = Buffer::pages(1);
    let mut double = DoubleStack::new(buf.bytes());
    rollback_reclaims_beneath_the_marker(&mut double, End::Low);
    rollback_reclaims_beneath_the_marker(&mut double, End::High);
    let config = ArenaConfig {
        reserve: 64 << 10,
        commit_step: 4096,
        ..ArenaConfig::default()
    };
    let mut arena = DoubleArena::with_source(FaultyPages::new(HeapPages::new()), config).unwrap();
    rollback_reclaims_beneath_the_marker(&mut arena, End::Low);
    rollback_reclaims_beneath_the_marker(&mut arena, End::High);
}

#[test]
fn a_free_of_an_interior_pointer_is_refused_at_either_end() {
    let mut buf = Buffer::pages(1);
    let double = DoubleStack::new(buf.bytes());
    let l = Layout::from_size_align(64, 8).unwrap();
    for end in [double.lower(), double.upper()] {
        let a = end.alloc_layout(l).unwrap();
        let b = end.alloc_layout(l).unwrap();
        let refused = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            // SAFETY: the misuse under test, refused before anything is written.
            unsafe { end.deallocate(a.add(16), l) }
        }));
        assert!(refused.is_err());
        // SAFETY: live blocks with `l`, freed once each, newest first.
        unsafe {
            end.deallocate(b, l);
            end.deallocate(a, l);
        }
        assert_eq!(end.used(), 0);
    }
    assert_eq!(double.validate().unwrap().live_blocks, 0);
}
