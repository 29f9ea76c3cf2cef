//! The long-session test: a synthetic game session of 100 level cycles (bento-testkit's
//! `session` workload) on a memory space. The footprint must not creep, and once the
//! session is over the space must hold nothing.

use bento_pages::PageSource;
use bento_space::{MemorySpace, SpaceConfig};
use bento_testkit::session::{ApiHeap, Session, SessionConfig, play};

/// The peak committed bytes of each level, sampled at its checkpoints, and the
/// session's peak live bytes.
fn session<P: PageSource>(space: &MemorySpace<P>, config: SessionConfig) -> (Vec<usize>, usize) {
    let mut peaks = vec![0; config.levels];
    let mut last_level = 0;
    let report = play(&mut ApiHeap(&space), Session::new(config), |at, _| {
        peaks[at.level] = peaks[at.level].max(space.stats().committed);
        if at.level != last_level {
            // Once per level: the whole structure checks out.
            last_level = at.level;
            space.validate().unwrap();
        }
    });
    assert_eq!(report.failures, 0, "{report:?}");
    (peaks, report.peak_live)
}

#[test]
#[cfg_attr(miri, ignore = "a hundred levels are hours under Miri")]
fn a_hundred_levels_do_not_creep_and_leave_nothing_behind() {
    let pages = bento_pages::Metered::new(bento_pages::HeapPages::new());
    let config = SpaceConfig::DEFAULT.with_page_size(4096);
    let space = MemorySpace::new(&pages, config).unwrap();
    let (peaks, peak_live) = session(&space, SessionConfig::GAME);
    let first = peaks[..10].iter().max().unwrap();
    let last = peaks[peaks.len() - 10..].iter().max().unwrap();
    assert!(
        *last * 100 <= *first * 105,
        "the footprint crept: peak committed {first} in the first 10 levels, {last} in the last 10"
    );
    let s = space.stats();
    let frag = s.max_committed as f64 / peak_live as f64;
    assert!(
        frag <= 1.10,
        "peak committed {} / peak live {peak_live} = {frag:.3}",
        s.max_committed
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
