//! Replay: a generated trace replays to the counts its generator knows, on any
//! allocator; a trace that names a block that is not live, or an unreadable one, is
//! an error and leaves nothing allocated; a target that overlaps blocks is caught.

use std::alloc::{Layout, System};
use std::cell::Cell;
use std::ptr::NonNull;

use allocator_api2::alloc::Global;
use bento_trace::workload::{
    LifoBatches, LifoConfig, Mixed, MixedConfig, OpenWorld, Recorded, Session, SessionConfig,
    Workload, WorldConfig, play, record, tags,
};
use bento_trace::{
    ApiTarget, Event, GlobalTarget, ReplayError, ReplayOptions, ReplayReport, ReplayTarget,
    TraceReader, TraceWriter, Wrapper, replay,
};

fn trace(workload: impl Workload) -> (Vec<u8>, Recorded) {
    let mut w = TraceWriter::new(Vec::new()).unwrap();
    let counts = record(workload, &mut w).unwrap();
    (w.finish().unwrap(), counts)
}

/// A trace of `ops` operations of [`Mixed`] around `live` blocks.
fn mixed(ops: usize, live: usize) -> (Vec<u8>, Recorded) {
    trace(Mixed::new(MixedConfig {
        ops,
        live,
        ..MixedConfig::DEFAULT
    }))
}

/// The system allocator, counting its live blocks, with the phases it was told (each
/// with the frames ended and the blocks live then).
#[derive(Default)]
struct Counting {
    live: Cell<i64>,
    frames: u64,
    tags: Vec<u32>,
    phases: Vec<(String, u64, i64)>,
}

impl ReplayTarget for Counting {
    fn alloc(&mut self, layout: Layout, tag: u32) -> Option<NonNull<u8>> {
        if !self.tags.contains(&tag) {
            self.tags.push(tag);
        }
        let block = GlobalTarget(System).alloc(layout, tag)?;
        self.live.set(self.live.get() + 1);
        Some(block)
    }

    unsafe fn realloc(
        &mut self,
        ptr: NonNull<u8>,
        old: Layout,
        new: usize,
        tag: u32,
    ) -> Option<NonNull<u8>> {
        // SAFETY: the caller's contract.
        unsafe { GlobalTarget(System).realloc(ptr, old, new, tag) }
    }

    unsafe fn free(&mut self, ptr: NonNull<u8>, layout: Layout, tag: u32) {
        self.live.set(self.live.get() - 1);
        // SAFETY: the caller's contract.
        unsafe { GlobalTarget(System).free(ptr, layout, tag) }
    }

    fn frame(&mut self) -> Result<(), String> {
        self.frames += 1;
        Ok(())
    }

    fn phase(&mut self, name: &str) {
        self.phases
            .push((name.to_owned(), self.frames, self.live.get()));
    }
}

/// Replays `bytes` on `target` with `options`, observing nothing.
fn replay_on<T: ReplayTarget>(
    target: &mut T,
    bytes: &[u8],
    options: ReplayOptions,
) -> Result<ReplayReport, ReplayError> {
    replay(target, TraceReader::new(bytes).unwrap(), options, |_, _| {})
}

/// Options that stop after the record `seq`.
fn stop_after(seq: u64) -> ReplayOptions {
    ReplayOptions {
        stop_after: seq,
        ..ReplayOptions::default()
    }
}

fn check_counts(report: &ReplayReport, counts: &Recorded) {
    assert_eq!(report.records, counts.records);
    assert_eq!(report.allocs, counts.allocs);
    assert_eq!(report.frees, counts.frees);
    assert_eq!(report.reallocs, counts.reallocs);
    assert_eq!(report.frames, counts.frames);
    assert_eq!(report.phases, counts.phases);
    assert_eq!(report.peak_live, counts.peak_live);
    assert_eq!(report.peak_blocks, counts.peak_blocks);
    assert_eq!(report.live_at_end, counts.live_at_end);
    assert_eq!(report.failures, 0);
}

#[test]
fn every_workload_replays_to_the_counts_its_generator_knows() {
    let small = if cfg!(miri) { 1 } else { 3 };
    let traces = [
        trace(Session::new(SessionConfig {
            levels: small,
            frames_per_level: 8,
            resident_blocks: 200,
            ..SessionConfig::DEMO
        })),
        trace(OpenWorld::new(WorldConfig {
            cells: small + 1,
            frames_per_cell: 6,
            cell_blocks: 300,
            ..WorldConfig::WORLD
        })),
        mixed(3000, 200),
        trace(LifoBatches::new(LifoConfig {
            batches: 30,
            ..LifoConfig::DEFAULT
        })),
    ];
    for (bytes, counts) in &traces {
        assert!(counts.allocs > 0 && counts.allocs == counts.frees);
        let mut target = Counting::default();
        let mut last = None;
        let report = replay(
            &mut target,
            TraceReader::new(&bytes[..]).unwrap(),
            ReplayOptions::default(),
            |m, t| {
                assert_eq!(m.live_blocks as i64, t.live.get());
                last = Some((m.seq, m.frames));
            },
        )
        .unwrap();
        check_counts(&report, counts);
        assert_eq!(target.live.get(), 0, "every block is given back");
        assert_eq!(target.frames, counts.frames);
        if counts.frames > 0 {
            assert_eq!(last.unwrap().1, counts.frames);
        }
        // The same trace through the allocator-api2 adaptor.
        let again = replay_on(&mut ApiTarget(&Global), bytes, ReplayOptions::default()).unwrap();
        check_counts(&again, counts);
    }
    // The session's tags reach the target.
    let mut target = Counting::default();
    replay_on(&mut target, &traces[0].0, ReplayOptions::default()).unwrap();
    for tag in [
        tags::LEVEL,
        tags::FRAME,
        tags::PARTICLE,
        tags::GROWER,
        tags::GLOBAL,
    ] {
        assert!(target.tags.contains(&tag), "tag {}", tags::name(tag));
    }
}

#[test]
fn the_target_hears_each_level_load_play_and_unload_in_order() {
    let config = SessionConfig {
        levels: 3,
        frames_per_level: 4,
        resident_blocks: 100,
        ..SessionConfig::DEMO
    };
    let (bytes, counts) = trace(Session::new(config));
    assert_eq!(counts.phases, 9);
    let mut target = Counting::default();
    let mut observed = Vec::new();
    let report = replay(
        &mut target,
        TraceReader::new(&bytes[..]).unwrap(),
        ReplayOptions::default(),
        |m, t| {
            if let Some(name) = m.phase {
                // The target heard the phase before the observer sees it.
                assert_eq!(t.phases.last().map(|p| p.0.as_str()), Some(name));
                observed.push(name.to_owned());
            }
        },
    )
    .unwrap();
    check_counts(&report, &counts);
    let names: Vec<&str> = target.phases.iter().map(|p| p.0.as_str()).collect();
    let expected: Vec<String> = (0..3)
        .flat_map(|n| ["loading", "loaded", "unloading"].map(|what| format!("level {n} {what}")))
        .collect();
    assert_eq!(names, expected);
    assert_eq!(observed, expected);
    for (n, level) in target.phases.chunks(3).enumerate() {
        let [(_, f0, loading), (_, f1, loaded), (_, f2, unloading)] = level else {
            unreachable!("three phases a level")
        };
        // A level loads between its first two phases, and plays its frames after.
        assert_eq!(
            (*f0, *f1, *f2),
            (4 * n as u64, 4 * n as u64, 4 * n as u64 + 4)
        );
        assert!(
            loaded - loading >= 50,
            "level {n} loaded {} blocks",
            loaded - loading
        );
        assert!(
            *unloading >= loaded - 10,
            "level {n}: {loaded} then {unloading}"
        );
    }
    // Unloading frees the level before the next one loads.
    for pair in target.phases.windows(2) {
        if pair[0].0.ends_with("unloading") {
            assert!(pair[1].2 + 50 <= pair[0].2, "{pair:?}");
        }
    }
    // Played without a trace, the session tells the target the same phases.
    let mut played = Counting::default();
    play(&mut played, Session::new(config), |_, _| {});
    assert_eq!(played.phases, target.phases);
}

#[test]
fn samples_come_every_n_records_and_at_each_frame_and_phase() {
    let (bytes, counts) = mixed(1000, 50);
    let mut seqs = Vec::new();
    let options = ReplayOptions {
        sample_every: 100,
        batch: 7,
        ..ReplayOptions::default()
    };
    let report = replay(
        &mut ApiTarget(&Global),
        TraceReader::new(&bytes[..]).unwrap(),
        options,
        |m, _| seqs.push(m.seq),
    )
    .unwrap();
    check_counts(&report, &counts);
    assert_eq!(seqs.len() as u64, counts.records / 100);
    assert!(
        seqs.iter()
            .enumerate()
            .all(|(i, &s)| s == 100 * i as u64 + 99)
    );
}

#[test]
fn stop_after_leaves_the_blocks_live_then() {
    let (bytes, _) = mixed(500, 40);
    let mut target = Counting::default();
    let report = replay_on(&mut target, &bytes, stop_after(299)).unwrap();
    assert_eq!(report.records, 300);
    // A limit on a frame record stops there too.
    let bytes = hand(|w| {
        w.alloc(1, 10, 8, 0).unwrap();
        w.frame().unwrap();
        w.alloc(2, 10, 8, 0).unwrap();
    });
    let mut frames = 0;
    let mut target = Counting::default();
    let report = replay(
        &mut target,
        TraceReader::new(&bytes[..]).unwrap(),
        stop_after(1),
        |m, _| frames = m.frames,
    )
    .unwrap();
    assert_eq!((report.records, report.allocs, frames), (2, 1, 1));
    assert_eq!(report.left.len(), 1);
    // A limit that sequence numbers skip stops before the first record past it.
    let bytes = hand(|w| {
        for (seq, id) in [(0, 1), (10, 2)] {
            let event = Event::Alloc {
                id,
                size: 10,
                align: 8,
                tag: 0,
            };
            w.record(seq, &event).unwrap();
        }
    });
    let mut target = Counting::default();
    let report = replay_on(&mut target, &bytes, stop_after(5)).unwrap();
    assert_eq!(
        (report.records, report.allocs, report.left.len()),
        (1, 1, 1)
    );
    assert_eq!(report.left.len() as u64, report.blocks_at_end);
    assert_eq!(target.live.get(), report.left.len() as i64);
    let bytes_left: usize = report.left.iter().map(|&(_, n)| n).sum();
    assert_eq!(bytes_left as u64, report.live_at_end);
    // The blocks left are the test's to leak: the report keeps no layouts.
}

/// Writes a trace of `events` by hand.
fn hand(f: impl FnOnce(&mut TraceWriter<Vec<u8>>)) -> Vec<u8> {
    let mut w = TraceWriter::new(Vec::new()).unwrap();
    f(&mut w);
    w.finish().unwrap()
}

#[test]
fn bad_ids_are_errors_naming_the_record_and_nothing_is_left() {
    let cases: [(Vec<u8>, &str); 3] = [
        (
            hand(|w| {
                w.alloc(1, 10, 8, 0).unwrap();
                w.free(2).unwrap();
            }),
            "record 1 names block 2, which is not live",
        ),
        (
            hand(|w| {
                w.alloc(1, 10, 8, 0).unwrap();
                w.alloc(1, 10, 8, 0).unwrap();
            }),
            "record 1 allocates block 1, which is already live",
        ),
        (
            hand(|w| {
                w.alloc(1, 10, 8, 0).unwrap();
                w.free(1).unwrap();
                w.realloc(1, 20).unwrap();
            }),
            "record 2 names block 1, which is not live",
        ),
    ];
    for (bytes, message) in cases {
        let mut target = Counting::default();
        let err = replay_on(&mut target, &bytes, ReplayOptions::default()).unwrap_err();
        assert_eq!(err.to_string(), message);
        assert_eq!(target.live.get(), 0);
    }
}

#[test]
fn a_corrupt_trace_is_an_error_with_its_offset_and_nothing_is_left() {
    let (mut bytes, _) = mixed(200, 20);
    let at = bytes.len() / 2;
    bytes.truncate(at);
    bytes.push(0x7f); // not a record kind
    let mut target = Counting::default();
    let err = replay_on(&mut target, &bytes, ReplayOptions::default()).unwrap_err();
    let ReplayError::Trace(e) = &err else {
        panic!("{err}");
    };
    let offset = e.offset().unwrap();
    assert!(offset as usize <= at, "{err}");
    assert!(err.to_string().contains(&format!("byte {offset}")), "{err}");
    assert_eq!(target.live.get(), 0);
}

#[test]
fn refused_and_impossible_requests_are_failures_and_their_frees_are_skipped() {
    let bytes = hand(|w| {
        w.alloc(1, u64::MAX, 8, 0).unwrap(); // no allocator can give it
        w.alloc(2, 0, 1 << 40, 0).unwrap(); // nor this alignment here
        w.alloc(3, 0, 8, 0).unwrap(); // zero: one byte
        w.realloc(1, 10).unwrap();
        w.realloc(3, u64::MAX).unwrap();
        w.free(1).unwrap();
        w.free(2).unwrap();
        w.free(3).unwrap();
    });
    let mut target = Counting::default();
    let report = replay_on(&mut target, &bytes, ReplayOptions::default()).unwrap();
    assert_eq!((report.allocs, report.reallocs, report.frees), (3, 2, 3));
    assert_eq!(report.failures, 3);
    assert_eq!((report.peak_live, report.live_at_end), (1, 0));
    assert_eq!(target.live.get(), 0);
}

/// A target that refuses every frame end.
struct Stubborn(Counting);

impl Wrapper for Stubborn {
    type Inner = Counting;

    fn inner(&mut self) -> &mut Counting {
        &mut self.0
    }

    fn inner_ref(&self) -> &Counting {
        &self.0
    }

    fn on_frame(&mut self) -> Result<(), String> {
        Err("frame memory is still live".into())
    }
}

#[test]
fn a_refused_frame_end_stops_the_replay_and_frees_what_is_live() {
    let bytes = hand(|w| {
        w.alloc(1, 100, 8, tags::FRAME).unwrap();
        w.frame().unwrap();
        w.free(1).unwrap();
    });
    let mut target = Stubborn(Counting::default());
    let err = replay_on(&mut target, &bytes, ReplayOptions::default()).unwrap_err();
    assert_eq!(err.to_string(), "record 1: frame memory is still live");
    assert_eq!(target.0.live.get(), 0);
}

/// Hands out the same block twice: the replay must notice.
struct Overlapping {
    block: NonNull<u8>,
}

impl ReplayTarget for Overlapping {
    fn alloc(&mut self, _: Layout, _: u32) -> Option<NonNull<u8>> {
        Some(self.block)
    }

    unsafe fn realloc(
        &mut self,
        p: NonNull<u8>,
        _: Layout,
        _: usize,
        _: u32,
    ) -> Option<NonNull<u8>> {
        Some(p)
    }

    unsafe fn free(&mut self, _: NonNull<u8>, _: Layout, _: u32) {}
}

#[test]
#[should_panic(expected = "was overwritten")]
fn a_target_handing_out_overlapping_blocks_is_caught() {
    let mut buf = [0u8; 256];
    let bytes = hand(|w| {
        w.alloc(1, 64, 8, 0).unwrap();
        w.alloc(2, 64, 8, 0).unwrap();
        w.free(1).unwrap();
        w.free(2).unwrap();
    });
    let mut target = Overlapping {
        block: NonNull::from(&mut buf).cast(),
    };
    let _ = replay_on(&mut target, &bytes, ReplayOptions::default());
}

/// The system allocator, counting its live blocks, with every size asked of it (an
/// allocation's, a resize's new one).
#[derive(Default)]
struct Asked {
    inner: Counting,
    sizes: Vec<usize>,
}

impl ReplayTarget for Asked {
    fn alloc(&mut self, layout: Layout, tag: u32) -> Option<NonNull<u8>> {
        self.sizes.push(layout.size());
        self.inner.alloc(layout, tag)
    }

    unsafe fn realloc(
        &mut self,
        ptr: NonNull<u8>,
        old: Layout,
        new: usize,
        tag: u32,
    ) -> Option<NonNull<u8>> {
        self.sizes.push(new);
        // SAFETY: the caller's contract.
        unsafe { self.inner.realloc(ptr, old, new, tag) }
    }

    unsafe fn free(&mut self, ptr: NonNull<u8>, layout: Layout, tag: u32) {
        // SAFETY: the caller's contract.
        unsafe { self.inner.free(ptr, layout, tag) }
    }
}

/// Options bounding the bytes live at `max_live`, decoding `batch` records at a time.
fn bounded(max_live: u64, batch: usize) -> ReplayOptions {
    ReplayOptions {
        max_live,
        batch,
        ..ReplayOptions::default()
    }
}

#[test]
fn max_live_stops_the_replay_before_the_record_that_would_pass_it() {
    let bytes = hand(|w| {
        w.alloc(1, 100, 8, 0).unwrap(); // 100 live
        w.alloc(2, 200, 8, 0).unwrap(); // 300
        w.free(1).unwrap(); // 200
        w.alloc(3, 150, 8, 0).unwrap(); // 350
        w.realloc(2, 400).unwrap(); // 550
        w.realloc(3, 10).unwrap(); // 410
        // 4 EiB and 410 bytes: past any address space, so that no allocator could
        // touch it were the bound not kept.
        w.alloc(4, 1 << 62, 8, 0).unwrap();
        w.free(2).unwrap();
    });
    // Each batch size: the bound holds whether the record is first, inside or last
    // in its batch.
    for batch in [1, 2, 3, 4096] {
        // (bound, the record that stops, the bytes it would make live, the sizes
        // asked of the allocator)
        let cases: [(u64, u64, u64, &[usize]); 3] = [
            (349, 3, 350, &[100, 200]),
            (549, 4, 550, &[100, 200, 150]),
            (1 << 30, 6, (1 << 62) + 410, &[100, 200, 150, 400, 10]),
        ];
        for (max_live, seq, live, sizes) in cases {
            let mut target = Asked::default();
            let err = replay_on(&mut target, &bytes, bounded(max_live, batch)).unwrap_err();
            let ReplayError::LiveLimit {
                seq: at,
                live: would,
                limit,
            } = err
            else {
                panic!("batch {batch}, bound {max_live}: {err}");
            };
            assert_eq!((at, would, limit), (seq, live, max_live), "batch {batch}");
            assert_eq!(
                err.to_string(),
                format!(
                    "record {seq} would make {live} bytes live, over the replay's bound of \
                     {max_live}"
                )
            );
            // The request that would pass the bound never reached the allocator, and
            // what was live is freed.
            assert_eq!(target.sizes, sizes, "batch {batch}, bound {max_live}");
            assert_eq!(target.inner.live.get(), 0);
        }
    }
    // Reaching the bound exactly is within it; a shrink never passes it.
    let upto = hand(|w| {
        w.alloc(1, 100, 8, 0).unwrap();
        w.alloc(2, 200, 8, 0).unwrap();
        w.realloc(2, 50).unwrap();
    });
    let mut target = Asked::default();
    let report = replay_on(&mut target, &upto, bounded(300, 4096)).unwrap();
    assert_eq!((report.peak_live, report.failures), (300, 0));
    // The default: no bound.
    assert_eq!(ReplayOptions::default().max_live, u64::MAX);
}

#[test]
fn a_request_no_allocator_can_give_is_refused_not_over_the_bound() {
    let bytes = hand(|w| {
        w.alloc(1, 1 << 63, 8, 0).unwrap(); // no `Layout` holds it
        w.alloc(2, 100, 8, 0).unwrap();
        w.free(2).unwrap();
    });
    let mut target = Asked::default();
    let report = replay_on(&mut target, &bytes, bounded(1000, 4096)).unwrap();
    assert_eq!((report.failures, report.peak_live), (1, 100));
    assert_eq!(target.sizes, [100]);
}
