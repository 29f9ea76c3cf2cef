//! The harness proves itself: correct allocators pass, and each kind of broken
//! allocator is caught with the failure that names its bug.

use super::*;
use alloc::boxed::Box;
use alloc::collections::BTreeMap;
use alloc::string::String;
use alloc::vec::Vec;
use bento_align::Alignment;
use core::alloc::{GlobalAlloc, Layout};
use core::cell::Cell;
use core::ptr::NonNull;

#[test]
fn global_passes_on_both_api_versions() {
    // Miri aborts on a request near `isize::MAX` instead of failing it.
    let huge = if cfg!(miri) { Ops::empty() } else { Ops::HUGE };
    let caps = Caps::default()
        .with_ops(huge)
        .with_sizes(SizeGen::new(cases(8192, 300)).with_boundaries(&[64, 256, 4096]))
        .with_max_align(Alignment::new(8192).unwrap())
        .with_max_live(cases(512, 32));
    let n = cases(64, 1);
    let r02 = seeded(n, |u| {
        run(&mut Api02::new(&allocator_api2::alloc::Global), &caps, u)
    });
    let r04 = seeded(n, |u| {
        run(&mut Api04::new(&allocator_api2_04::alloc::Global), &caps, u)
    });
    for r in [r02, r04] {
        // Not vacuous: the programs allocated, resized and freed.
        assert!(r.allocs > 10 * n, "{r:?}");
        assert!(r.resizes > n, "{r:?}");
        assert_eq!(r.allocs_failed, 0, "{r:?}");
        assert!(r.frees > 10 * n, "{r:?}");
        assert!(r.validations > n, "{r:?}");
    }
}

#[test]
#[cfg_attr(
    miri,
    ignore = "safe code: the generators hold no unsafe for Miri to check"
)]
fn size_generator_hits_every_edge() {
    let sizes = SizeGen::new(100_000).with_boundaries(&[256, 65536]);
    let seen: alloc::collections::BTreeSet<usize> = (0..cases(100_000, 3000) as u32)
        .map(|raw| sizes.pick(raw, 16))
        .collect();
    for edge in [
        0, 1, 15, 16, 17, 4095, 4096, 4097, 255, 256, 257, 65535, 65536, 65537,
    ] {
        assert!(seen.contains(&edge), "edge {edge} never generated");
    }
    assert!(seen.iter().all(|&s| s <= 100_000));
    assert!(
        seen.len() > cases(1000, 100),
        "log-uniform part too narrow: {}",
        seen.len()
    );
}

#[test]
#[cfg_attr(
    miri,
    ignore = "safe code: the generators hold no unsafe for Miri to check"
)]
fn align_generator_covers_its_range() {
    let aligns = AlignGen::new(Alignment::new(8192).unwrap());
    let seen: alloc::collections::BTreeSet<usize> =
        (0..=255u8).map(|r| aligns.pick(r).get()).collect();
    assert_eq!(seen.len(), 14, "{seen:?}"); // 1, 2, 4, ..., 8192
}

#[test]
#[cfg_attr(
    miri,
    ignore = "safe code: the generators hold no unsafe for Miri to check"
)]
fn draw_respects_caps() {
    let caps = Caps::default().without_resize();
    let bytes = seeded_bytes(1, cases(1 << 16, 1 << 12));
    let mut u = Unstructured::new(&bytes);
    let mut drawn = 0;
    while let Some(op) = caps.draw(&mut u) {
        assert!(caps.allows(&op), "{op:?} drawn but not allowed");
        assert!(!matches!(
            op,
            Op::Grow { .. } | Op::Shrink { .. } | Op::Reset | Op::Marker { .. }
        ));
        drawn += 1;
    }
    assert!(drawn > cases(1000, 50));
}

/// A bump allocator with markers and resets, correct unless told to misbehave.
struct ToyBump {
    /// Owned (from `Box::into_raw`); a raw pointer so that handing out blocks never
    /// re-borrows the whole buffer.
    buf: NonNull<Buf>,
    top: usize,
    live: BTreeMap<usize, usize>,
    markers: Vec<(usize, usize)>,
    next_marker: usize,
    last: Option<NonNull<u8>>,
    bug: Option<Bug>,
}

/// The toy's memory: smaller under Miri, which interprets every byte written.
const TOY_BYTES: usize = cases(1 << 18, 1 << 14);

#[repr(C, align(4096))]
struct Buf([u8; TOY_BYTES]);

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Bug {
    Overlap,
    Misalign,
    ShortBlock,
    ScribbleOnFree,
    GrowLosesPrefix,
    DirtyZeroed,
    MiscountFigures,
    KeepsStaleMarkers,
    HugeSucceeds,
    InPlaceMoves,
    ShrinkIgnoresAlignment,
}

impl ToyBump {
    fn new(bug: Option<Bug>) -> Self {
        Self {
            buf: NonNull::from(Box::leak(Box::new(Buf([0xAA; TOY_BYTES])))),
            top: 0,
            live: BTreeMap::new(),
            markers: Vec::new(),
            next_marker: 0,
            last: None,
            bug,
        }
    }

    fn base(&self) -> *mut u8 {
        self.buf.as_ptr().cast()
    }

    fn bump(&mut self, layout: Layout) -> Option<NonNull<[u8]>> {
        let align = Alignment::from_layout(&layout);
        if layout.size() == 0 {
            let dangling = NonNull::new(core::ptr::without_provenance_mut::<u8>(align.get()))?;
            return Some(NonNull::slice_from_raw_parts(dangling, 0));
        }
        let mut start = bento_align::align_up(self.top, align)?;
        if self.bug == Some(Bug::Overlap)
            && let Some((&prev, &size)) = self.live.iter().next_back()
        {
            // An aligned start inside the newest live block, where it has one: an
            // overlap and nothing else wrong.
            let inside = (prev + size.max(1) - 1) & !(align.get() - 1);
            if inside >= prev {
                start = inside;
            }
        }
        if self.bug == Some(Bug::Misalign) && align.get() > 1 {
            start += 1;
        }
        let end = start.checked_add(layout.size())?;
        if end > size_of::<Buf>() {
            return None;
        }
        self.top = self.top.max(end);
        self.live.insert(start, layout.size());
        let ptr = NonNull::new(self.base().wrapping_add(start))?;
        self.last = Some(ptr);
        let len = if self.bug == Some(Bug::ShortBlock) {
            layout.size() - 1
        } else {
            layout.size()
        };
        Some(NonNull::slice_from_raw_parts(ptr, len))
    }

    fn offset(&self, ptr: NonNull<u8>) -> usize {
        ptr.addr().get() - self.base().addr()
    }
}

impl Drop for ToyBump {
    fn drop(&mut self) {
        // SAFETY: `buf` came from `Box::leak` in `new` and is dropped only here.
        drop(unsafe { Box::from_raw(self.buf.as_ptr()) });
    }
}

impl Target for ToyBump {
    fn allocate(&mut self, _: End, layout: Layout, zeroed: bool) -> Option<NonNull<[u8]>> {
        if layout.size() > isize::MAX as usize / 2 && self.bug == Some(Bug::HugeSucceeds) {
            return self.bump(Layout::from_size_align(16, 1).unwrap());
        }
        let block = self.bump(layout)?;
        if zeroed && self.bug != Some(Bug::DirtyZeroed) {
            // SAFETY: `block` is inside the buffer and owned by the caller now.
            unsafe { block.cast::<u8>().write_bytes(0, block.len()) };
        }
        Some(block)
    }

    unsafe fn deallocate(&mut self, _: End, ptr: NonNull<u8>, layout: Layout) {
        if layout.size() == 0 {
            return;
        }
        if self.bug == Some(Bug::ScribbleOnFree)
            && let Some(last) = self.last.filter(|&l| l != ptr)
        {
            let off = self.offset(last);
            if self.live.contains_key(&off) {
                // SAFETY: `last` is a live block of the buffer (the bug is writing it).
                unsafe { last.write(!last.read()) };
            }
        }
        let off = self.offset(ptr);
        let was_live = self.live.remove(&off).is_some();
        // Overlapping blocks may share an offset, one entry for both: the bug, for the
        // oracle to report, not the toy.
        assert!(
            was_live || self.bug == Some(Bug::Overlap),
            "toy: free of a dead block"
        );
    }

    unsafe fn grow(
        &mut self,
        end: End,
        ptr: NonNull<u8>,
        old: Layout,
        new: Layout,
        zeroed: bool,
    ) -> Option<NonNull<[u8]>> {
        let block = self.allocate(end, new, zeroed)?;
        if self.bug != Some(Bug::GrowLosesPrefix) {
            // SAFETY: both blocks are live in the toy's buffer, `old.size()` bytes from
            // `ptr` and at least that many at `block`; under `Bug::Overlap` they may
            // overlap, so the copy is a `memmove`.
            unsafe { core::ptr::copy(ptr.as_ptr(), block.cast::<u8>().as_ptr(), old.size()) };
        }
        // SAFETY: `ptr` is live with `old`, as the caller promised.
        unsafe { self.deallocate(end, ptr, old) };
        Some(block)
    }

    unsafe fn shrink(
        &mut self,
        end: End,
        ptr: NonNull<u8>,
        old: Layout,
        new: Layout,
    ) -> Option<NonNull<[u8]>> {
        if new.size() == 0 {
            // SAFETY: `ptr` is live with `old`.
            unsafe { self.deallocate(end, ptr, old) };
            return self.allocate(end, new, false);
        }
        let aligned = ptr.addr().get().is_multiple_of(new.align());
        if !aligned && self.bug != Some(Bug::ShrinkIgnoresAlignment) {
            // The new alignment is stricter than the block meets: move it.
            let block = self.allocate(end, new, false)?;
            // SAFETY: both blocks are live and distinct (a bump never reuses memory);
            // then `ptr` is freed with `old`, as the caller gave it up.
            unsafe {
                core::ptr::copy_nonoverlapping(
                    ptr.as_ptr(),
                    block.cast::<u8>().as_ptr(),
                    new.size(),
                );
                self.deallocate(end, ptr, old);
            }
            return Some(block);
        }
        let off = self.offset(ptr);
        self.live.insert(off, new.size());
        Some(NonNull::slice_from_raw_parts(ptr, new.size()))
    }

    unsafe fn resize_in_place(
        &mut self,
        end: End,
        ptr: NonNull<u8>,
        old: Layout,
        new_size: usize,
    ) -> Option<NonNull<[u8]>> {
        let new = Layout::from_size_align(new_size, old.align()).ok()?;
        if old.size() == 0 {
            return None; // a zero-size block lies outside the buffer
        }
        if self.bug == Some(Bug::InPlaceMoves) && new_size > old.size() {
            // SAFETY: the caller's contract is `grow`'s.
            return unsafe { self.grow(end, ptr, old, new, false) };
        }
        let off = self.offset(ptr);
        // Shrinks stay in place (not to zero: a zero-size block is no block); grows
        // only at the top, within the buffer.
        let fits = if new_size > old.size() {
            off + old.size() == self.top && off + new_size <= size_of::<Buf>()
        } else {
            new_size > 0
        };
        if !fits {
            return None;
        }
        if new_size > old.size() {
            self.top = off + new_size;
        }
        self.live.insert(off, new_size);
        Some(NonNull::slice_from_raw_parts(ptr, new_size))
    }

    fn reset(&mut self) {
        self.top = 0;
        self.live.clear();
        self.markers.clear();
        self.last = None;
    }

    fn marker(&mut self, _: End) -> usize {
        self.next_marker += 1;
        self.markers.push((self.next_marker, self.top));
        self.next_marker
    }

    fn rollback(&mut self, _: End, marker: usize) -> Result<(), String> {
        let Some(i) = self.markers.iter().position(|&(id, _)| id == marker) else {
            if self.bug == Some(Bug::KeepsStaleMarkers) {
                return Ok(());
            }
            return Err(String::from("stale marker"));
        };
        let top = self.markers[i].1;
        self.markers.truncate(i + 1);
        self.top = top;
        self.live.retain(|&off, _| off < top);
        self.last = None;
        Ok(())
    }

    fn validate(&mut self) -> Result<Stats, String> {
        let extra = usize::from(self.bug == Some(Bug::MiscountFigures));
        Ok(Stats {
            live_blocks: Some(self.live.len() + extra),
            live_bytes: Some(self.live.values().sum()),
        })
    }
}

fn toy_caps() -> Caps {
    Caps::default()
        .with_ops(Ops::RESET | Ops::MARKERS | Ops::HUGE | Ops::IN_PLACE)
        .with_sizes(SizeGen::new(cases(4096, 512)).with_boundaries(&[64]))
        .with_max_align(Alignment::new(256).unwrap())
        .with_validate_every(8)
        .with_max_live(cases(512, 16))
}

#[test]
fn a_correct_toy_passes_with_markers_and_resets() {
    let caps = toy_caps();
    let r = seeded(cases(64, 2), |u| run(&mut ToyBump::new(None), &caps, u));
    assert!(r.rollbacks > 0 && r.resets > 0 && r.allocs > 0, "{r:?}");
    assert!(
        r.stale_rollbacks_refused > 0,
        "stale markers never exercised: {r:?}"
    );
}

/// Runs the toy with `bug` over seeded programs and returns the first failure.
fn catch(bug: Bug) -> Failure {
    let caps = toy_caps();
    for case in 0..cases(64, 4) {
        let bytes = seeded_bytes(case, cases(16 << 10, 2 << 10));
        if let Err(f) = run(
            &mut ToyBump::new(Some(bug)),
            &caps,
            &mut Unstructured::new(&bytes),
        ) {
            return f;
        }
    }
    panic!("the oracle did not catch {bug:?}");
}

/// One test per bug: the toy with the bug fails with the kind of failure that names
/// it, in the operation given after `in`.
macro_rules! catches {
    ($($name:ident: $bug:ident => $kind:pat $(in $op:pat)?,)*) => {$(
        #[test]
        fn $name() {
            let f = catch(Bug::$bug);
            assert!(matches!(f.kind, $kind), "{f}");
            $(assert!(matches!(f.op, Some($op)), "{f}");)?
        }
    )*};
}

catches! {
    catches_overlap: Overlap => FailureKind::Overlap { .. },
    catches_misalignment: Misalign => FailureKind::Misaligned { .. },
    catches_short_blocks: ShortBlock => FailureKind::TooShort { .. },
    catches_a_write_into_a_live_block: ScribbleOnFree => FailureKind::Corrupted { offset: 0, .. },
    catches_a_grow_that_loses_contents:
        GrowLosesPrefix => FailureKind::Corrupted { .. } in Op::Grow { .. },
    catches_a_shrink_that_ignores_a_new_alignment:
        ShrinkIgnoresAlignment => FailureKind::Misaligned { .. } in Op::Shrink { .. },
    catches_an_in_place_resize_that_moves:
        InPlaceMoves => FailureKind::MovedInPlace { .. } in Op::ResizeInPlace { .. },
    catches_memory_not_zeroed: DirtyZeroed => FailureKind::NotZeroed { .. },
    catches_wrong_figures: MiscountFigures => FailureKind::Stats { what: "live blocks", .. },
    catches_a_stale_marker_accepted: KeepsStaleMarkers => FailureKind::StaleMarkerAccepted,
    catches_a_huge_request_that_succeeds: HugeSucceeds => FailureKind::HugeSucceeded { .. },
}

#[test]
fn catches_a_failing_validate() {
    let mut corrupt = Api02::with_validate(&allocator_api2::alloc::Global, |_| {
        Err(String::from("free list loops at chunk 3"))
    });
    let err = run_ops(&mut corrupt, &Caps::default(), &[Op::Validate]).unwrap_err();
    assert_eq!(
        err.kind,
        FailureKind::Invalid(String::from("free list loops at chunk 3"))
    );
    assert_eq!(err.step, 0);
    assert!(err.to_string().contains("free list loops"), "{err}");
}

#[test]
#[should_panic(expected = "rerun alone with BENTO_CASE=")]
fn seeded_names_the_failing_case() {
    let caps = toy_caps();
    seeded(cases(16, 2), |u| {
        run(&mut ToyBump::new(Some(Bug::Overlap)), &caps, u)
    });
}

/// The global allocator behind `GlobalAlloc` and both allocator-api2 versions, which
/// all reach the same heap, counting the calls through each; `GlobalAlloc` checks it is
/// given only what it takes.
#[derive(Default)]
struct Counted {
    global: Cell<usize>,
    api02: Cell<usize>,
    api04: Cell<usize>,
}

// SAFETY: forwards to the global allocator (`std::alloc::alloc` and its kin), with
// the same arguments: the one `Global` of both allocator-api2 versions calls, so a
// block may be freed through another entry point than the one that allocated it.
unsafe impl GlobalAlloc for Counted {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        assert_ne!(layout.size(), 0, "GlobalAlloc takes no zero size");
        self.global.set(self.global.get() + 1);
        // SAFETY: the caller's contract, which is the global allocator's.
        unsafe { std::alloc::alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        assert_ne!(layout.size(), 0, "GlobalAlloc takes no zero size");
        self.global.set(self.global.get() + 1);
        // SAFETY: the caller's contract, which is the global allocator's.
        unsafe { std::alloc::alloc_zeroed(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        assert_ne!(layout.size(), 0, "GlobalAlloc takes no zero size");
        self.global.set(self.global.get() + 1);
        // SAFETY: the caller's contract, which is the global allocator's.
        unsafe { std::alloc::dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        assert!(
            layout.size() != 0 && new_size != 0,
            "GlobalAlloc takes no zero size"
        );
        self.global.set(self.global.get() + 1);
        // SAFETY: the caller's contract, which is the global allocator's.
        unsafe { std::alloc::realloc(ptr, layout, new_size) }
    }
}

/// The two allocator-api2 versions' impls for [`Counted`], through each version's
/// `Global`.
macro_rules! counted_api {
    ($api:ident, $count:ident) => {
        // SAFETY: forwards to the version's `Global` (the global allocator), with the
        // same arguments.
        unsafe impl $api::alloc::Allocator for &Counted {
            fn allocate(&self, layout: Layout) -> Result<NonNull<[u8]>, $api::alloc::AllocError> {
                self.$count.set(self.$count.get() + 1);
                $api::alloc::Global.allocate(layout)
            }

            unsafe fn deallocate(&self, ptr: NonNull<u8>, layout: Layout) {
                self.$count.set(self.$count.get() + 1);
                // SAFETY: the caller's contract, which is `Global`'s.
                unsafe { $api::alloc::Global.deallocate(ptr, layout) }
            }
        }
    };
}

counted_api!(allocator_api2, api02);
counted_api!(allocator_api2_04, api04);

#[test]
fn entry_points_take_turns_within_what_each_takes() {
    let counted = Counted::default();
    let caps = Caps::default()
        .with_sizes(SizeGen::new(cases(8192, 300)).with_boundaries(&[64]))
        .with_max_live(cases(512, 32));
    let r = seeded(cases(16, 1), |u| {
        let mut target = EntryPoints::new(&counted)
            .with_api02()
            .with_api04()
            .with_global_alloc();
        run(&mut target, &caps, u)
    });
    assert!(r.allocs > 0 && r.resizes > 0 && r.frees > 0, "{r:?}");
    for (through, calls) in [
        ("GlobalAlloc", &counted.global),
        ("allocator-api2 0.2", &counted.api02),
        ("allocator-api2 0.4", &counted.api04),
    ] {
        assert!(calls.get() > 0, "no call through {through}");
    }
}

#[test]
fn entry_points_refuse_an_in_place_resize_no_entry_point_takes() {
    let counted = Counted::default();
    let mut target = EntryPoints::new(&counted)
        .with_global_alloc()
        .with_in_place(Takes::SIZED, |_, ptr, _, new_size| {
            Some(NonNull::slice_from_raw_parts(ptr, new_size))
        });
    let layout = Layout::new::<u64>();
    let block = target.allocate(End::Low, layout, false).unwrap();
    // SAFETY: `block` is live with `layout`; the in-place resize to 0 bytes is refused
    // (nothing takes it) and the block is then freed once.
    unsafe {
        assert!(
            target
                .resize_in_place(End::Low, block.cast(), layout, 0)
                .is_none()
        );
        target.deallocate(End::Low, block.cast(), layout);
    }
}
