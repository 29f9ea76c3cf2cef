//! Soaks: stats hour by hour, and the least fixed memory found by bisection, on a
//! memory space over `LimitedPages` (a bounded allocator) and on the global allocator.

use std::alloc::Layout;
use std::cell::Cell;
use std::ptr::NonNull;

use allocator_api2::alloc::Global;
use bento_pages::{HeapPages, LimitedPages};
use bento_space::{MemorySpace, SpaceConfig};
use bento_trace::workload::LongConfig;
use bento_trace::{
    ApiTarget, Footprint, ReplayOptions, ReplayTarget, TraceReader, TraceWriter, least_memory,
    soak, soak_trace,
};

/// Two hours of few frames.
const SHORT: LongConfig = LongConfig {
    hours: 2,
    frames_per_level: 6,
    ..LongConfig::HUNDRED_HOURS
};

/// A memory space over `limit` bytes of fixed memory, reporting what it commits.
struct Bounded {
    space: MemorySpace<LimitedPages<HeapPages>>,
}

impl Bounded {
    fn new(limit: usize) -> Self {
        let pages = LimitedPages::new(HeapPages::new(), limit);
        let config = SpaceConfig::DEFAULT.with_page_size(4096);
        Self {
            space: MemorySpace::new(pages, config).unwrap(),
        }
    }
}

impl ReplayTarget for Bounded {
    fn alloc(&mut self, layout: Layout, _: u32) -> Option<NonNull<u8>> {
        self.space.alloc(layout).ok()
    }

    unsafe fn realloc(
        &mut self,
        p: NonNull<u8>,
        old: Layout,
        new: usize,
        _: u32,
    ) -> Option<NonNull<u8>> {
        let new = Layout::from_size_align(new, old.align()).ok()?;
        // SAFETY: the caller's contract: live in the space with `old`.
        unsafe { bento_pages::RawAlloc::resize_raw(&self.space, p, old, new) }.ok()
    }

    unsafe fn free(&mut self, p: NonNull<u8>, layout: Layout, _: u32) {
        // SAFETY: the caller's contract.
        unsafe { self.space.dealloc(p, layout) }
    }

    fn footprint(&self) -> Option<Footprint> {
        let limited = self.space.pages()?.stats();
        let calls = self.space.stats().source;
        Some(Footprint {
            committed: limited.committed,
            peak_committed: limited.peak,
            reserved: calls.reserved,
            os_calls: (calls.reserves + calls.releases + calls.commits + calls.decommits) as u64,
        })
    }

    fn largest_free(&self) -> Option<usize> {
        Some(self.space.largest_free())
    }
}

#[test]
fn a_soak_reports_each_hour() {
    let mut bounded = Bounded::new(usize::MAX);
    let run = soak(&mut bounded, SHORT);
    assert_eq!(run.hours.len(), 2);
    assert_eq!(run.refused(), 0);
    for h in &run.hours {
        assert!(h.peak_live > 1 << 20, "{h:?}");
        assert!(
            h.peak_committed >= h.peak_live && h.ratio() < 3.0,
            "the space holds the live bytes and some: {h:?}"
        );
    }
    assert!(run.peak_committed() >= run.peak_live());
    assert_eq!(bounded.space.stats().live_blocks, 0, "everything was freed");
    // Sampled as each level loaded: some free block, less than a segment.
    for h in &run.hours {
        let free = h.largest_free.expect("the space tells");
        assert!(
            free > 0 && free < SpaceConfig::DEFAULT.segment_granularity,
            "{h:?}"
        );
    }
    // A target that does not tell has none.
    let global = soak(&mut ApiTarget(&Global), LongConfig { hours: 1, ..SHORT });
    assert_eq!(global.hours[0].largest_free, None);
}

#[test]
fn too_little_fixed_memory_refuses_and_is_counted_in_its_hour() {
    let mut bounded = Bounded::new(8 << 20);
    let run = soak(&mut bounded, SHORT);
    assert!(run.refused() > 0, "{run:?}");
    assert!(
        run.hours[0].refused > 0,
        "the first hour already needs more: {run:?}"
    );
}

#[test]
fn the_least_memory_plays_and_a_granule_less_does_not() {
    let granule = 1 << 20;
    let tries = Cell::new(0);
    let config = LongConfig { hours: 1, ..SHORT };
    let plays = |limit| {
        tries.set(tries.get() + 1);
        soak(&mut Bounded::new(limit), config).refused() == 0
    };
    let least = least_memory(plays, (1 << 20)..(256 << 20), granule).expect("256 MiB is enough");
    assert!(tries.get() <= 10, "a bisection: {} tries", tries.get());
    let plays = |limit| soak(&mut Bounded::new(limit), config).refused() == 0;
    assert!(plays(least), "the least memory plays");
    assert!(!plays(least - granule), "a granule less does not");
    // Not bounded: the least of the range.
    let global = |_| soak(&mut ApiTarget(&Global), config).refused() == 0;
    assert_eq!(
        least_memory(global, (1 << 20)..(2 << 20), granule),
        Some(1 << 20)
    );
    // Bounded below the range's end: none.
    assert_eq!(least_memory(plays, (1 << 20)..(4 << 20), granule), None);
}

/// A recorded session soaked in a loop: each loop an hour with the trace's peak live,
/// the same allocator throughout, nothing live between loops; a trace that names a
/// block that is not live stops the soak with the replay's error.
#[test]
fn a_trace_soaks_in_a_loop_on_one_allocator() {
    use bento_trace::workload::{Session, SessionConfig, record};
    let config = SessionConfig {
        levels: 2,
        frames_per_level: 4,
        ..SessionConfig::DEMO
    };
    let mut w = TraceWriter::new(Vec::new()).unwrap();
    let counts = record(Session::new(config), &mut w).unwrap();
    let bytes = w.finish().unwrap();
    let mut bounded = Bounded::new(usize::MAX);
    let mut opened = 0;
    let open = || {
        opened += 1;
        TraceReader::new(&bytes[..])
    };
    let run = soak_trace(&mut bounded, open, 4, ReplayOptions::default()).unwrap();
    assert_eq!(opened, 4);
    assert_eq!(run.hours.len(), 4);
    for (i, h) in run.hours.iter().enumerate() {
        assert_eq!(h.hour, i);
        assert_eq!(h.peak_live as u64, counts.peak_live, "{h:?}");
        assert!(h.peak_committed >= h.peak_live, "{h:?}");
        assert!(h.largest_free.is_some(), "the session's levels load: {h:?}");
    }
    assert_eq!(run.refused(), 0);
    assert_eq!(bounded.space.stats().live_blocks, 0);
    // Too little memory: refused requests, counted in their loop.
    let run = soak_trace(
        &mut Bounded::new(1 << 20),
        || TraceReader::new(&bytes[..]),
        2,
        ReplayOptions::default(),
    )
    .unwrap();
    assert!(run.hours.iter().all(|h| h.refused > 0), "{run:?}");
    // A broken trace: the replay's error.
    let mut w = TraceWriter::new(Vec::new()).unwrap();
    w.free(7).unwrap();
    let broken = w.finish().unwrap();
    let err = soak_trace(
        &mut Bounded::new(usize::MAX),
        || TraceReader::new(&broken[..]),
        3,
        ReplayOptions::default(),
    )
    .unwrap_err();
    assert!(err.to_string().contains("not live"), "{err}");
}
