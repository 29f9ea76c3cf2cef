//! The long session: deterministic, within its id bound, everything freed at the end,
//! the streamed assets and the AI cache within their budgets, lasting state growing
//! level after level, and levels of varied size.

use bento_trace::workload::{LongConfig, LongSession, Step, tags};

/// A short session of the long shape: four hours of few frames.
const SHORT: LongConfig = LongConfig {
    hours: 4,
    frames_per_level: 20,
    ..LongConfig::HUNDRED_HOURS
};

/// What a walk over a session found.
#[derive(Debug, Default)]
struct Walk {
    steps: usize,
    /// Bytes live at the end.
    live_at_end: usize,
    /// Per level: bytes of level data at its checkpoint, lasting bytes then.
    levels: Vec<(usize, usize)>,
    peak_stream: usize,
    peak_cache: usize,
}

fn walk(config: LongConfig) -> Walk {
    let w = LongSession::new(config);
    let bound = w.ids();
    let mut blocks: Vec<Option<(usize, u32)>> = vec![None; bound];
    let mut by_tag = [0usize; 16];
    let mut out = Walk::default();
    for step in w {
        out.steps += 1;
        match step {
            Step::Alloc {
                id,
                size,
                tag,
                align,
            } => {
                assert!(id < bound, "id {id} beyond the bound {bound}");
                assert!(align.is_power_of_two());
                assert!(blocks[id].is_none(), "id {id} reused while live");
                blocks[id] = Some((size, tag));
                by_tag[tag as usize] += size;
            }
            Step::Realloc { id, size } => {
                let (old, tag) = blocks[id].expect("resize of a live block");
                by_tag[tag as usize] = by_tag[tag as usize] - old + size;
                blocks[id] = Some((size, tag));
            }
            Step::Free { id } => {
                let (size, tag) = blocks[id].take().expect("free of a live block");
                by_tag[tag as usize] -= size;
            }
            Step::Checkpoint(c) if c.frame.is_none() => {
                out.levels
                    .push((by_tag[tags::LEVEL as usize], by_tag[tags::LASTING as usize]));
            }
            _ => {}
        }
        out.peak_stream = out.peak_stream.max(by_tag[tags::STREAM as usize]);
        out.peak_cache = out.peak_cache.max(by_tag[tags::CACHE as usize]);
    }
    out.live_at_end = blocks.iter().flatten().map(|b| b.0).sum();
    out
}

#[test]
fn a_long_session_is_deterministic_and_ends_empty() {
    let a: Vec<Step> = LongSession::new(SHORT).collect();
    let b: Vec<Step> = LongSession::new(SHORT).collect();
    assert_eq!(a, b, "the same seed makes the same session");
    let other: Vec<Step> = LongSession::new(LongConfig { seed: 7, ..SHORT }).collect();
    assert_ne!(a, other, "another seed another session");
    let w = walk(SHORT);
    assert_eq!(w.live_at_end, 0);
    assert_eq!(w.levels.len(), SHORT.levels());
    assert!(w.steps > 30_000, "{w:?}");
}

#[test]
fn streams_and_the_ai_cache_stay_within_their_budgets() {
    let w = walk(SHORT);
    assert!(w.peak_stream <= SHORT.stream_budget, "{w:?}");
    assert!(
        w.peak_stream > SHORT.stream_budget / 2,
        "the stream cache fills: {w:?}"
    );
    assert!(
        w.peak_cache <= SHORT.ai_cache * 54 / 50 + (8 << 10),
        "{w:?}"
    );
    assert!(
        w.peak_cache >= SHORT.ai_cache / 2,
        "the AI cache fills: {w:?}"
    );
}

#[test]
fn lasting_state_grows_and_levels_vary_in_size() {
    let w = walk(SHORT);
    let lasting: Vec<usize> = w.levels.iter().map(|l| l.1).collect();
    // Lasting blocks only grow; the saves come and go around them, bounded.
    let first = lasting[0];
    let last = *lasting.last().unwrap();
    assert!(last > first, "lasting state grows: {lasting:?}");
    let level: Vec<usize> = w.levels.iter().map(|l| l.0).collect();
    let (small, big) = (level.iter().min().unwrap(), level.iter().max().unwrap());
    assert!(big * 2 > small * 3, "levels of varied size: {level:?}");
}

#[test]
fn hours_count_levels() {
    let c = LongConfig {
        hours: 2,
        levels_per_hour: 4,
        ..SHORT
    };
    assert_eq!(c.levels(), 8);
    assert_eq!((c.hour_of(3), c.hour_of(4)), (0, 1));
    let zero = LongConfig { hours: 0, ..SHORT };
    assert_eq!(LongSession::new(zero).count(), 0);
}

/// The first hours of a longer session are those of a shorter one: a soak of the
/// first hour plays exactly what the whole session starts with.
#[test]
fn a_shorter_session_is_the_start_of_a_longer_one() {
    let one = LongConfig { hours: 1, ..SHORT };
    let short: Vec<Step> = LongSession::new(one).collect();
    let long: Vec<Step> = LongSession::new(SHORT).collect();
    // Up to the last level's unload, where the shorter one finishes.
    let unload = short
        .iter()
        .rposition(|s| matches!(s, Step::Phase(_)))
        .expect("phases");
    assert_eq!(short[..unload], long[..unload]);
}
