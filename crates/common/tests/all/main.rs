//! bento-common's integration tests: one binary, a module per concern. The
//! `#[global_allocator]` tests are binaries of their own (`tests/global_*.rs`).

mod bad_input;
mod fixed_memory;
mod front;
#[cfg(all(unix, not(miri)))]
mod guard;
mod model;
mod prepare;
#[cfg(not(miri))]
mod profile;
mod retention;
mod runs;
mod stats;

use std::cell::RefCell;

use bento_align::Alignment;
use bento_common::LargeConfig;
use bento_common::{CommonAllocator, CommonConfig, Misuse, PageSource, Routing};
use bento_pages::HeapPages;
use bento_testkit::Stats;

std::thread_local! {
    /// The misuse reported to [`record`] on this thread.
    static SEEN: RefCell<Vec<Misuse<'static>>> = const { RefCell::new(Vec::new()) };
}

/// A misuse hook that records each report, for [`seen`].
pub(crate) fn record(m: &Misuse<'_>) {
    SEEN.with(|s| {
        s.borrow_mut()
            .push(m.detach().expect("no leak reports here"))
    });
}

/// The misuse [`record`] saw on this thread since the last call.
pub(crate) fn seen() -> Vec<Misuse<'static>> {
    SEEN.with(RefCell::take)
}

/// The shape of the tests: the default classes and medium bins in runs of spans of
/// `SPAN` (two or four runs, so that spans fill and empty); a large region of
/// `LARGE_SEGMENT`s in 4 KiB pages with dedicated segments from a quarter of one, so that
/// programs cross every kind of boundary; a small commit cache and block cache so
/// that both fill up; misuse recorded, not fatal; no per-thread front end (the
/// `front` tests turn it on).
pub(crate) fn shape() -> CommonConfig<()> {
    CommonConfig::DEFAULT
        .with_pages(())
        .with_large(
            LargeConfig::DEFAULT
                .with_page_size(4096)
                .with_segment_granularity(LARGE_SEGMENT)
                .with_segment_threshold(LARGE_SEGMENT / 4),
        )
        .with_small_segment(SPAN)
        .with_commit_cache(256 << 10)
        .with_block_cache(64 << 10)
        .with_misuse_hook(record)
        .with_thread_cache(false)
}

/// The class regions' spans: 256 KiB, or 128 KiB under Miri.
pub(crate) const SPAN: usize = if cfg!(miri) { 128 << 10 } else { 256 << 10 };

/// The large region's segments: 256 KiB, or under Miri the least the region map
/// allows (64 KiB), so that every byte the oracle checks costs less.
pub(crate) const LARGE_SEGMENT: usize = if cfg!(miri) { 64 << 10 } else { 256 << 10 };

/// A heap-backed source with 4 KiB pages.
pub(crate) fn heap() -> HeapPages {
    HeapPages::with_page_size(Alignment::new(4096).unwrap())
}

/// An allocator of [`shape`] over `pages` with `routing`.
pub(crate) fn common<P: PageSource + Copy>(pages: P, routing: Routing) -> CommonAllocator<P> {
    CommonAllocator::with_config(shape().with_pages(pages).with_routing(routing))
}

/// An allocator of [`shape`] over a heap source with `routing`.
pub(crate) fn on_heap(routing: Routing) -> CommonAllocator<HeapPages> {
    let c = shape().with_routing(routing);
    CommonAllocator::with_config(c.with_pages(heap()))
}

/// `validate()` as the testkit's self-check, with the stats the model compares,
/// and the totals checked against the regions'.
pub(crate) fn check<P: PageSource>(common: &&CommonAllocator<P>) -> Result<Stats, String> {
    let walked = common.validate().map_err(|c| c.to_string())?;
    let counted = common.stats();
    if (walked.live_blocks, walked.live_bytes) != (counted.live_blocks, counted.live_bytes) {
        return Err(format!(
            "the walk finds {} blocks of {} bytes, the counters {} of {}",
            walked.live_blocks, walked.live_bytes, counted.live_blocks, counted.live_bytes
        ));
    }
    if counted.resident < counted.committed {
        return Err(format!(
            "resident {} below committed {}",
            counted.resident, counted.committed
        ));
    }
    Ok(Stats {
        live_blocks: Some(walked.live_blocks),
        live_bytes: Some(walked.live_bytes),
    })
}
