//! Stats for any source: bytes reserved and committed, their peaks, and call counts.

use core::ptr::NonNull;

use bento_align::Alignment;

use crate::sync::{AtomicUsize, Ordering};
use crate::{PageError, PageSource};

/// A snapshot of a [`Metered`] source's stats.
///
/// `committed` counts bytes committed through the source and not yet decommitted;
/// with an implicit-commit source (where callers still call `commit`) it is what the
/// callers asked to have usable.
///
/// ```
/// use bento_pages::PageStats;
///
/// let s = PageStats::default();
/// assert_eq!((s.reserved, s.committed, s.failures), (0, 0, 0));
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PageStats {
    /// Bytes in live reservations.
    pub reserved: usize,
    /// The most `reserved` has been.
    pub max_reserved: usize,
    /// Bytes committed and not decommitted.
    pub committed: usize,
    /// The most `committed` has been.
    pub max_committed: usize,
    /// Successful `reserve` calls.
    pub reserves: usize,
    /// `release` calls.
    pub releases: usize,
    /// Successful `commit` calls.
    pub commits: usize,
    /// `decommit` calls.
    pub decommits: usize,
    /// `reserve` and `commit` calls that failed.
    pub failures: usize,
}

/// A stat and its high-water mark.
#[derive(Debug)]
struct Gauge {
    now: AtomicUsize,
    peak: AtomicUsize,
}

impl Gauge {
    fn new() -> Self {
        Self {
            now: AtomicUsize::new(0),
            peak: AtomicUsize::new(0),
        }
    }

    fn add(&self, n: usize) {
        // Relaxed suffices: each stat is independent, read as a snapshot. The peak
        // is raised to every value `now` takes, so it is never below it once both
        // updates of a call are done.
        let now = self.now.fetch_add(n, Ordering::Relaxed) + n;
        self.peak.fetch_max(now, Ordering::Relaxed);
    }

    fn sub(&self, n: usize) {
        let old = self.now.fetch_sub(n, Ordering::Relaxed);
        debug_assert!(
            old >= n,
            "Metered: more bytes given back ({n}) than taken ({old})"
        );
    }
}

/// Wraps a source and counts what passes through it: reserved and committed bytes,
/// their peaks, and the number of calls of each kind.
///
/// `Metered` is `Sync` when `P` is; the stats are atomics updated with relaxed
/// ordering, so a snapshot taken while other threads call the source is a consistent
/// stat for each field, not across fields.
///
/// ```
/// use bento_align::Alignment;
/// use bento_pages::{HeapPages, Metered, PageSource};
///
/// let pages = Metered::new(HeapPages::new());
/// let page = pages.page_size();
/// let base = pages.reserve(4 * page, Alignment::MIN).unwrap();
/// // SAFETY: two pages of a live reservation, decommitted before it is released.
/// unsafe {
///     pages.commit(base, 2 * page).unwrap();
///     pages.decommit(base, 2 * page);
///     pages.release(base, 4 * page);
/// }
/// let s = pages.stats();
/// assert_eq!((s.reserved, s.max_reserved), (0, 4 * page));
/// assert_eq!((s.committed, s.max_committed), (0, 2 * page));
/// assert_eq!((s.reserves, s.releases, s.commits, s.decommits), (1, 1, 1, 1));
/// ```
#[derive(Debug)]
pub struct Metered<P> {
    inner: P,
    reserved: Gauge,
    committed: Gauge,
    reserves: AtomicUsize,
    releases: AtomicUsize,
    commits: AtomicUsize,
    decommits: AtomicUsize,
    failures: AtomicUsize,
}

impl<P: PageSource> Metered<P> {
    /// Counts the calls made to `inner`.
    pub fn new(inner: P) -> Self {
        Self {
            inner,
            reserved: Gauge::new(),
            committed: Gauge::new(),
            reserves: AtomicUsize::new(0),
            releases: AtomicUsize::new(0),
            commits: AtomicUsize::new(0),
            decommits: AtomicUsize::new(0),
            failures: AtomicUsize::new(0),
        }
    }

    /// The stats now.
    pub fn stats(&self) -> PageStats {
        let load = |a: &AtomicUsize| a.load(Ordering::Relaxed);
        PageStats {
            reserved: load(&self.reserved.now),
            max_reserved: load(&self.reserved.peak),
            committed: load(&self.committed.now),
            max_committed: load(&self.committed.peak),
            reserves: load(&self.reserves),
            releases: load(&self.releases),
            commits: load(&self.commits),
            decommits: load(&self.decommits),
            failures: load(&self.failures),
        }
    }

    /// The wrapped source.
    pub fn inner(&self) -> &P {
        &self.inner
    }

    /// The wrapped source, given back; the stats are dropped.
    ///
    /// ```
    /// use bento_pages::{HeapPages, Metered, PageSource};
    ///
    /// let metered = Metered::new(HeapPages::new());
    /// assert_eq!(metered.into_inner().page_size(), 4096);
    /// ```
    pub fn into_inner(self) -> P {
        self.inner
    }
}

impl<P> Metered<P> {
    /// Counts the outcome of a `reserve` or `commit` of `size` bytes: on success one
    /// more of `calls` and `size` more bytes in `gauge`, else one more failure.
    fn count<T>(
        &self,
        outcome: Result<T, PageError>,
        calls: &AtomicUsize,
        gauge: &Gauge,
        size: usize,
    ) -> Result<T, PageError> {
        match outcome {
            Ok(_) => {
                calls.fetch_add(1, Ordering::Relaxed);
                gauge.add(size);
            }
            Err(_) => {
                self.failures.fetch_add(1, Ordering::Relaxed);
            }
        }
        outcome
    }
}

// SAFETY: every method forwards to `P` unchanged; the counters only observe.
unsafe impl<P: PageSource> PageSource for Metered<P> {
    fn reserve(&self, size: usize, align: Alignment) -> Result<NonNull<u8>, PageError> {
        let got = self.inner.reserve(size, align);
        self.count(got, &self.reserves, &self.reserved, size)
    }

    unsafe fn release(&self, base: NonNull<u8>, size: usize) {
        // SAFETY: the caller upholds `release`'s contract.
        unsafe { self.inner.release(base, size) };
        self.releases.fetch_add(1, Ordering::Relaxed);
        self.reserved.sub(size);
    }

    unsafe fn commit(&self, ptr: NonNull<u8>, size: usize) -> Result<(), PageError> {
        // SAFETY: the caller upholds `commit`'s contract.
        let done = unsafe { self.inner.commit(ptr, size) };
        self.count(done, &self.commits, &self.committed, size)
    }

    unsafe fn decommit(&self, ptr: NonNull<u8>, size: usize) {
        // SAFETY: the caller upholds `decommit`'s contract.
        unsafe { self.inner.decommit(ptr, size) };
        self.decommits.fetch_add(1, Ordering::Relaxed);
        self.committed.sub(size);
    }

    crate::forward_page_source!(|s| s.inner; page_size properties);
}
