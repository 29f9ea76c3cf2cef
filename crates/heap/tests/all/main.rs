//! bento-heap's tests: model runs of every policy over a memory space and a bump, and
//! one file per policy (budget, guards, fill, tracking and leaks, tags, the tree of
//! parents, the registry, threads, the sink and the order of its events).

mod budget;
mod guard_pages;
mod guards;
mod model;
mod profile;
mod sink;
mod threads;
mod tracking;
mod tree;

use core::alloc::Layout;
use core::cell::RefCell;

use bento_heap::{HeapBuilder, Misuse, NoGuards, Track, Tracked};
use bento_pages::HeapPages;
use bento_space::{MemorySpace, SpaceConfig};

std::thread_local! {
    /// The misuse this thread's heaps reported through [`record`].
    static SEEN: RefCell<Vec<String>> = const { RefCell::new(Vec::new()) };
}

/// A misuse hook that records the message, for a test to assert on.
pub(crate) fn record(misuse: &Misuse<'_>) {
    SEEN.with(|s| s.borrow_mut().push(misuse.to_string()));
}

/// The messages [`record`] took on this thread since the last call.
pub(crate) fn seen() -> Vec<String> {
    SEEN.with(|s| s.take())
}

/// A heap named `name`, kept out of the registry that `report` reads (the tests run
/// at once, and the registry's own tests count its heaps).
pub(crate) fn unregistered(name: &'static str) -> HeapBuilder {
    HeapBuilder::new(name).register(false)
}

/// An [`unregistered`] heap that tracks allocation sites and reports misuse to
/// [`record`].
pub(crate) fn watched(name: &'static str) -> HeapBuilder<NoGuards, Tracked> {
    unregistered(name)
        .tracking(Track::Sites)
        .misuse_hook(record)
}

/// `n` bytes, aligned to 1.
pub(crate) fn bytes(n: usize) -> Layout {
    Layout::from_size_align(n, 1).unwrap()
}

/// A memory space on a heap-backed source, small under Miri.
pub(crate) fn space() -> MemorySpace<HeapPages> {
    let config = if cfg!(miri) {
        SpaceConfig::DEFAULT
            .with_page_size(4096)
            .with_segment_granularity(64 << 10)
            .with_segment_threshold(16 << 10)
    } else {
        SpaceConfig::DEFAULT.with_page_size(4096)
    };
    MemorySpace::new(HeapPages::new(), config).unwrap()
}
