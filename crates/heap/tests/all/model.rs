//! Seeded model runs through bento-testkit: heaps with every combination of guards,
//! tracking, fill and a sink, over a memory space and over a bump, through the heap's
//! own methods and both allocator-api2 versions, `validate()` every few operations, and
//! nothing live at the end.

use core::ptr::NonNull;
use std::sync::Arc;

use allocator_api2::alloc::Allocator;
use bento_align::Alignment;
use bento_heap::{
    Canaries, EventSink, FillPattern, Guards, Heap, HeapBuilder, HeapEvent, NoGuards, Track,
    Tracking,
};
use bento_primitives::Bump;
use bento_testkit::{Caps, EntryPoints, SizeGen, Stats, Takes, cases, run, seeded};

/// A heap as the interpreter drives it, taking turns between `alloc`/`free` and the
/// allocator-api2 0.2 and 0.4 traits, with `validate()` at each check.
fn target<A: Allocator, G: Guards, T: Tracking>(
    heap: &Heap<A, G, T>,
) -> EntryPoints<'_, Heap<A, G, T>> {
    EntryPoints::new(heap)
        .with_allocate(Takes::ANY, |heap, layout, zeroed| {
            let p = heap.alloc(layout).ok()?;
            if zeroed {
                // SAFETY: a fresh block of `layout.size()` bytes.
                unsafe { p.write_bytes(0, layout.size()) };
            }
            Some(NonNull::slice_from_raw_parts(p, layout.size()))
        })
        .with_deallocate(Takes::ANY, |heap, ptr, layout| {
            // SAFETY: a live block with its layout (the interpreter's contract; the
            // heap returns exactly the size asked, so `layout` is the block's).
            unsafe { heap.free(ptr, layout) }
        })
        .with_api02()
        .with_api04()
        .with_validate(|heap| {
            let s = heap.validate().map_err(|e| e.to_string())?;
            Ok(Stats {
                live_blocks: Some(s.live_blocks),
                live_bytes: Some(s.live_bytes),
            })
        })
}

fn caps() -> Caps {
    Caps::default()
        .with_sizes(SizeGen::new(cases(48 << 10, 6 << 10)).with_page(4096))
        .with_max_align(Alignment::new(cases(4096, 512)).unwrap())
        .with_max_live(cases(100, 8))
        .with_validate_every(cases(3, 8))
        .with_max_steps(cases(1500, 40))
}

/// A sink that counts events.
#[derive(Default)]
struct Count(std::sync::atomic::AtomicUsize);

impl EventSink for Count {
    fn event(&self, _: &HeapEvent) {
        self.0.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }
}

/// Runs the model on `heap`, then checks it holds nothing.
fn model<A: Allocator, G: Guards, T: Tracking>(heap: &Heap<A, G, T>) {
    let report = seeded(cases(12, 1), |u| run(&mut target(heap), &caps(), u));
    assert!(report.allocs > 0, "{report:?}");
    let s = heap.validate().unwrap();
    assert_eq!((s.live_bytes, s.live_blocks), (0, 0), "{s:?}");
    assert_eq!(s.total_allocs, s.total_frees);
}

/// Every policy combination over `inner` (under Miri, the heap without policies and
/// the one with all of them: each step is slow there).
fn every_policy<A: Allocator + Copy>(inner: A) {
    let sink = Arc::new(Count::default());
    model(&HeapBuilder::new("model-plain").register(false).build(inner));
    if !cfg!(miri) {
        some_policies(inner, &sink);
    }
    model(
        &HeapBuilder::new("model-all")
            .register(false)
            .budget(cases(256 << 10, 32 << 10))
            .guards(Canaries::<8>)
            .fill(FillPattern::DEBUG)
            .tracking(Track::Sites)
            .sink(sink.clone())
            .build(inner),
    );
    assert!(sink.0.load(std::sync::atomic::Ordering::Relaxed) > 0);
}

/// The policies one at a time over `inner`.
fn some_policies<A: Allocator + Copy>(inner: A, sink: &Arc<Count>) {
    model(
        &HeapBuilder::new("model-budget")
            .register(false)
            .budget(cases(96 << 10, 16 << 10))
            .build(inner),
    );
    model(
        &HeapBuilder::new("model-guards")
            .register(false)
            .guards(Canaries::<16>)
            .build(inner),
    );
    model(
        &HeapBuilder::new("model-tracked")
            .register(false)
            .tracking(Track::Sites)
            .build(inner),
    );
    // Every other block on guard pages, behind canaries and tracked: the pool's
    // blocks through every entry point, resizes moving them out.
    model(
        &HeapBuilder::new("model-guard-pages")
            .register(false)
            .guards(Canaries::<8>)
            .tracking(Track::Sites)
            .guard_pages(bento_pages::GuardConfig::DEFAULT.every(2).slots(32))
            .build(inner),
    );
    model(
        &HeapBuilder::new("model-guard-plain")
            .register(false)
            .guard_pages(bento_pages::GuardConfig::DEFAULT.every(3).slots(32))
            .build(inner),
    );
    model(
        &HeapBuilder::new("model-fill")
            .register(false)
            .guards(NoGuards)
            .fill(FillPattern::DEBUG)
            .sink(sink.clone())
            .build(inner),
    );
}

#[test]
fn every_policy_over_a_memory_space() {
    let space = crate::space();
    every_policy(&space);
    space.validate().unwrap();
    assert_eq!(space.stats().live_blocks, 0);
}

#[test]
fn every_policy_over_a_bump() {
    // Not `vec![uninit; n]`, whose element loop Miri interprets byte by byte.
    let mut buf = Box::<[u8]>::new_uninit_slice(cases(4 << 20, 256 << 10));
    let bump = Bump::new(&mut buf);
    every_policy(&bump);
}

#[test]
fn a_child_heap_under_the_model_keeps_its_parent_exact() {
    let space = crate::space();
    let parent = HeapBuilder::new("model-parent")
        .register(false)
        .tracking(Track::Sites)
        .build(&space);
    let child = HeapBuilder::new("model-child")
        .register(false)
        .parent(&parent)
        .guards(Canaries::<16>)
        .build(&space);
    model(&child);
    let s = parent.validate().unwrap();
    assert_eq!(s.live_blocks, 0);
    assert_eq!(s.total_allocs, child.stats().total_allocs);
}
