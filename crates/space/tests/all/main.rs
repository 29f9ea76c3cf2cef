//! bento-space's integration tests: one binary, a module per concern.

mod bad_input;
mod cache;
mod fixed_memory;
mod interop;
mod model;
mod pages;
mod probe;
mod resized;
mod segments;
mod session;
mod warm;

#[cfg(debug_assertions)]
use std::cell::RefCell;

use bento_pages::PageSource;
#[cfg(debug_assertions)]
use bento_space::Misuse;
use bento_space::{MemorySpace, SpaceConfig};
use bento_testkit::Stats;

#[cfg(debug_assertions)]
std::thread_local! {
    /// The misuse reported to [`record`] on this thread.
    static SEEN: RefCell<Vec<Misuse<'static>>> = const { RefCell::new(Vec::new()) };
}

/// The bytes of a commit cache's table of `cache` bytes of capacity over pages of
/// `page` bytes: two slots (rounded up to a power of two) a page, a pointer and a bit
/// each, rounded to pages.
pub(crate) fn table_bytes(cache: usize, page: usize) -> usize {
    let slots = (cache / page * 2).next_power_of_two();
    (slots * 8 + slots.div_ceil(64) * 8).next_multiple_of(page)
}

/// A misuse hook that records each report, for [`seen`].
#[cfg(debug_assertions)]
pub(crate) fn record(m: &Misuse<'_>) {
    SEEN.with(|s| {
        s.borrow_mut()
            .push(m.detach().expect("a space reports no leaks"))
    });
}

/// The misuse [`record`] saw on this thread since the last call.
#[cfg(debug_assertions)]
pub(crate) fn seen() -> Vec<Misuse<'static>> {
    SEEN.with(RefCell::take)
}

/// Checks that the misuse [`record`] saw on this thread since the last call is `n`
/// double frees, and nothing else.
#[cfg(debug_assertions)]
#[track_caller]
pub(crate) fn assert_double_frees(n: usize) {
    let seen = seen();
    assert!(
        seen.len() == n && seen.iter().all(|m| matches!(m, Misuse::DoubleFree { .. })),
        "{seen:?}"
    );
}

/// The default retention with its decay counted in frames only: a test that counts the
/// source's calls runs the same however long it takes (under Miri a second of the
/// clock passes within a test, and a decay step would give pages back mid-way).
pub(crate) const BY_FRAMES: SpaceConfig = SpaceConfig::DEFAULT.with_retention(
    bento_pages::Retention::Decay(bento_pages::Decay::frames(600)),
);

/// Small segments, so that programs cross segment and threshold boundaries and Miri
/// stays quick: 4 KiB pages, 64 KiB segments, dedicated from 16 KiB, and no commit
/// cache, so that the source's stats are the space's own.
pub(crate) const SMALL: SpaceConfig = SpaceConfig::DEFAULT
    .with_page_size(4096)
    .with_segment_granularity(64 << 10)
    .with_segment_threshold(16 << 10)
    .with_commit_cache(0);

/// `validate()` as the testkit's self-check, with the stats the model compares.
pub(crate) fn check<P: PageSource>(space: &&MemorySpace<P>) -> Result<Stats, String> {
    let report = space.validate().map_err(|c| c.to_string())?;
    let stats = space.stats();
    if report.live_bytes + report.free_bytes + report.overhead != report.reserved
        || report.reserved - report.decommitted != report.committed
    {
        return Err(format!("walk does not add up: {report:?}"));
    }
    if stats.reserved < stats.committed {
        return Err(format!("reserved below committed: {stats:?}"));
    }
    Ok(Stats {
        live_blocks: Some(stats.live_blocks),
        live_bytes: Some(stats.live_bytes),
    })
}
