//! The long-session tests: two synthetic game sessions (bento-trace's `workload`
//! workloads) on a memory space with its default settings, and with
//! `Retention::Eager`. The footprint must not creep, the committed bytes must stay
//! within 10% of the live bytes at their peak, the resident bytes (committed, and what
//! the commit cache keeps) within 10% too under `Eager` and within the decay's cap
//! otherwise, and once the session is over the space must hold nothing.

use bento_pages::{Decay, HeapPages, Metered, PageSource, Retention};
use bento_space::{MemorySpace, SpaceConfig};
use bento_testkit::workload::{OpenWorld, Session, SessionConfig, Workload, WorldConfig, play};
use bento_trace::ApiTarget;

/// What a session did to a space.
#[derive(Debug)]
struct Footprint {
    /// The peak committed bytes of each level (or cell), sampled at its checkpoints
    /// (the resident bytes add what the retention policy keeps, bounded apart).
    peaks: Vec<usize>,
    /// The most bytes live at once, as asked.
    peak_live: usize,
    /// The most resident bytes at any checkpoint: committed plus parked.
    peak_resident: usize,
}

impl Footprint {
    /// Peak resident bytes over peak live bytes.
    fn ratio(&self) -> f64 {
        self.peak_resident as f64 / self.peak_live as f64
    }
}

fn play_on<P: PageSource>(
    space: &MemorySpace<P>,
    events: impl Workload,
    levels: usize,
) -> Footprint {
    let mut f = Footprint {
        peaks: vec![0; levels],
        peak_live: 0,
        peak_resident: 0,
    };
    let mut last_level = 0;
    let report = play(&mut ApiTarget(&space), events, |at, _| {
        let s = space.stats();
        f.peaks[at.level] = f.peaks[at.level].max(s.committed);
        f.peak_resident = f.peak_resident.max(s.resident);
        if at.level != last_level {
            // Once per level: the whole structure checks out.
            last_level = at.level;
            space.validate().unwrap();
        }
    });
    assert_eq!(report.failures, 0, "{report:?}");
    f.peak_live = report.peak_live;
    f
}

/// Checks what every session must leave: no creep from the first levels to the last,
/// committed bytes within 10% of the live ones, resident bytes within 10% too under
/// `Eager` or within the cap (`peak_percent` of the peak committed) under a decay,
/// and nothing held at the end.
fn check_session(
    pages: &Metered<HeapPages>,
    space: MemorySpace<&Metered<HeapPages>>,
    f: &Footprint,
) {
    let n = f.peaks.len() / 4;
    let first = f.peaks[..n].iter().max().unwrap();
    let last = f.peaks[f.peaks.len() - n..].iter().max().unwrap();
    assert!(
        *last * 100 <= *first * 105,
        "the footprint crept: peak committed {first} in the first levels, {last} in the last"
    );
    let s = space.stats();
    if let Retention::Decay(Decay { peak_percent, .. }) = space.config().retention {
        let cap = s.max_committed as u128 * u128::from(peak_percent) / 100;
        assert!(
            f.peak_resident as u128 <= cap,
            "peak resident {} over the cap {cap} ({s:?})",
            f.peak_resident
        );
    } else {
        assert!(
            f.ratio() <= 1.10,
            "peak resident {} / peak live {} = {:.3} ({s:?})",
            f.peak_resident,
            f.peak_live,
            f.ratio()
        );
    }
    // The committed peak is tracked between checkpoints too.
    let committed = s.max_committed as f64 / f.peak_live as f64;
    assert!(
        committed <= 1.10,
        "peak committed / peak live = {committed:.3}"
    );
    println!(
        "peak resident / peak live = {:.3}, peak committed / peak live = {committed:.3}",
        f.ratio()
    );
    assert_eq!(
        (s.committed, s.reserved, s.segments, s.live_blocks),
        (0, 0, 0, 0)
    );
    space.validate().unwrap();
    assert_eq!(space.trim(), s.cache.parked);
    drop(space);
    assert_eq!(pages.stats().reserved, 0, "every reservation went back");
    assert_eq!(pages.stats().committed, 0);
}

#[test]
#[cfg_attr(miri, ignore = "a hundred levels are hours under Miri")]
fn a_hundred_levels_with_default_settings() {
    for config in [
        SpaceConfig::DEFAULT,
        SpaceConfig::DEFAULT.with_retention(Retention::Eager),
    ] {
        let pages = Metered::new(HeapPages::new());
        let space = MemorySpace::new(&pages, config).unwrap();
        let session = SessionConfig::GAME;
        let f = play_on(&space, Session::new(session), session.levels);
        check_session(&pages, space, &f);
    }
}

#[test]
#[cfg_attr(miri, ignore = "forty cells are hours under Miri")]
fn an_open_world_with_default_settings() {
    for config in [
        SpaceConfig::DEFAULT,
        SpaceConfig::DEFAULT.with_retention(Retention::Eager),
    ] {
        let pages = Metered::new(HeapPages::new());
        let space = MemorySpace::new(&pages, config).unwrap();
        let world = WorldConfig::WORLD;
        let f = play_on(&space, OpenWorld::new(world), world.cells);
        check_session(&pages, space, &f);
    }
}
