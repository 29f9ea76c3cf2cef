//! The memory space under libFuzzer: each input is a testkit program (allocate, free,
//! grow, shrink, refused reserves and commits, huge requests; pages decommitted and
//! recommitted through a small commit cache) checked against the
//! live-block model, with `validate()` every three operations and every segment
//! released at the end. `cargo +nightly fuzz run space` from the repository root.

#![no_main]

use bento_align::Alignment;
use bento_pages::{FaultyPages, HeapPages};
use bento_space::{MemorySpace, SpaceConfig};
use bento_testkit::{Api02, Caps, Ops, SizeGen, Stats, Unstructured, run};

/// Small segments so that short inputs cross the segment and threshold boundaries.
const CONFIG: SpaceConfig = SpaceConfig::DEFAULT
    .with_page_size(4096)
    .with_segment_granularity(64 << 10)
    .with_segment_threshold(16 << 10)
    .with_commit_cache(16 * 4096);

fn check(space: &&MemorySpace<FaultyPages<HeapPages>>) -> Result<Stats, String> {
    let report = space.validate().map_err(|c| c.to_string())?;
    if report.live_bytes + report.free_bytes + report.overhead != report.reserved
        || report.reserved - report.decommitted != report.committed
    {
        return Err(format!("the walk does not add up: {report:?}"));
    }
    let stats = space.stats();
    Ok(Stats {
        live_blocks: Some(stats.live_blocks),
        live_bytes: Some(stats.live_bytes),
    })
}

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let space = MemorySpace::new(FaultyPages::new(HeapPages::new()), CONFIG).unwrap();
    let caps = Caps::default()
        .with_ops(Ops::HUGE)
        .with_sizes(SizeGen::new(80 << 10).with_boundaries(&[16 << 10, (64 << 10) - 88]))
        .with_max_align(Alignment::new(65536).unwrap())
        .with_validate_every(3);
    if let Some((&first, rest)) = data.split_first() {
        // The first byte arms one refused reserve or commit somewhere in the program.
        let pages = space.pages().unwrap();
        if first & 1 == 0 {
            pages.fail_reserve(usize::from(first >> 1));
        } else {
            pages.fail_commit(usize::from(first >> 1));
        }
        let mut u = Unstructured::new(rest);
        if let Err(failure) = run(&mut Api02::with_validate(&&space, check), &caps, &mut u) {
            panic!("{failure}");
        }
        assert_eq!(space.stats().segments, 0, "an emptied space keeps no segment");
    }
});
