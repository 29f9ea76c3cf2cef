//! A limit on committed bytes over any source: fixed memory (a console's physical
//! memory, a budget on a PC) over a large address space.

use core::ptr::NonNull;

use bento_align::Alignment;

use crate::sync::{AtomicUsize, Ordering};
use crate::{PageError, PageSource};

/// A snapshot of a [`LimitedPages`] source's stats.
///
/// ```
/// use bento_pages::LimitStats;
///
/// let s = LimitStats::default();
/// assert_eq!((s.limit, s.committed, s.refused), (0, 0, 0));
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LimitStats {
    /// The most that may be committed at once.
    pub limit: usize,
    /// Bytes committed and not decommitted.
    pub committed: usize,
    /// The most `committed` has been.
    pub peak: usize,
    /// Commits refused because they would have gone over the limit.
    pub refused: usize,
    /// Bytes those commits asked for.
    pub refused_bytes: usize,
}

/// Wraps a source and refuses any commit that would take the bytes committed through
/// it past a limit: reserving always goes to the source (address space is plenty),
/// committing is what the fixed memory bounds. A refused commit returns
/// [`PageError::OverLimit`] and leaves the range decommitted, as the contract asks.
///
/// Put a [`CommitCache`](crate::CommitCache) above it and the cache gives its kept
/// pages back before a commit is refused, so memory held for reuse never makes an
/// allocation fail; the cache's stats count what it gave up.
///
/// `LimitedPages` is `Sync` when `P` is; the limit holds under threads (a commit
/// claims its bytes with one compare-and-swap before the source is asked).
///
/// ```
/// use bento_align::Alignment;
/// use bento_pages::{HeapPages, LimitedPages, PageError, PageSource};
///
/// let pages = LimitedPages::new(HeapPages::new(), 2 * 4096);
/// let base = pages.reserve(16 * 4096, Alignment::MIN).unwrap(); // reserving is free
/// // SAFETY: ranges of a live reservation; decommitted before release.
/// unsafe {
///     pages.commit(base, 2 * 4096).unwrap();
///     let third = base.add(2 * 4096);
///     assert!(matches!(pages.commit(third, 4096), Err(PageError::OverLimit { .. })));
///     pages.decommit(base, 4096);
///     pages.commit(third, 4096).unwrap(); // room again
///     pages.decommit(base.add(4096), 2 * 4096);
///     pages.release(base, 16 * 4096);
/// }
/// let s = pages.stats();
/// assert_eq!((s.committed, s.peak, s.refused), (0, 2 * 4096, 1));
/// ```
#[derive(Debug)]
pub struct LimitedPages<P> {
    inner: P,
    // Invariant: `committed <= limit` once every commit in progress has settled, but
    // for a limit lowered below what was committed (then nothing more is committed
    // until it is back under).
    limit: AtomicUsize,
    committed: AtomicUsize,
    peak: AtomicUsize,
    refused: AtomicUsize,
    refused_bytes: AtomicUsize,
}

impl<P: PageSource> LimitedPages<P> {
    /// `inner` with at most `limit` bytes committed at once.
    pub fn new(inner: P, limit: usize) -> Self {
        Self {
            inner,
            limit: AtomicUsize::new(limit),
            committed: AtomicUsize::new(0),
            peak: AtomicUsize::new(0),
            refused: AtomicUsize::new(0),
            refused_bytes: AtomicUsize::new(0),
        }
    }

    /// Sets the limit from now on. Lowering it below what is committed refuses every
    /// commit until enough is decommitted; nothing committed is taken away.
    ///
    /// ```
    /// use bento_pages::{HeapPages, LimitedPages};
    ///
    /// let pages = LimitedPages::new(HeapPages::new(), 1 << 20);
    /// pages.set_limit(64 << 20);
    /// assert_eq!(pages.stats().limit, 64 << 20);
    /// ```
    pub fn set_limit(&self, limit: usize) {
        self.limit.store(limit, Ordering::Relaxed);
    }

    /// The stats now.
    pub fn stats(&self) -> LimitStats {
        let load = |a: &AtomicUsize| a.load(Ordering::Relaxed);
        LimitStats {
            limit: load(&self.limit),
            committed: load(&self.committed),
            peak: load(&self.peak),
            refused: load(&self.refused),
            refused_bytes: load(&self.refused_bytes),
        }
    }

    /// Starts the stats' high-water mark and refusal counts afresh (the limit and
    /// what is committed stay).
    ///
    /// ```
    /// use bento_pages::{HeapPages, LimitedPages};
    ///
    /// let pages = LimitedPages::new(HeapPages::new(), 4096);
    /// pages.reset_peak();
    /// assert_eq!(pages.stats().peak, 0);
    /// ```
    pub fn reset_peak(&self) {
        let now = self.committed.load(Ordering::Relaxed);
        self.peak.store(now, Ordering::Relaxed);
        self.refused.store(0, Ordering::Relaxed);
        self.refused_bytes.store(0, Ordering::Relaxed);
    }

    /// The wrapped source.
    pub fn inner(&self) -> &P {
        &self.inner
    }

    /// Claims `size` bytes under the limit, or says how far it is.
    fn claim(&self, size: usize) -> Result<(), PageError> {
        let limit = self.limit.load(Ordering::Relaxed);
        let mut now = self.committed.load(Ordering::Relaxed);
        loop {
            let next = match now.checked_add(size) {
                Some(next) if next <= limit => next,
                _ => {
                    self.refused.fetch_add(1, Ordering::Relaxed);
                    self.refused_bytes.fetch_add(size, Ordering::Relaxed);
                    return Err(PageError::OverLimit { size, limit });
                }
            };
            // Relaxed suffices: the count orders nothing else; each claim is one
            // read-modify-write, so claims never add up past the limit.
            match self.committed.compare_exchange_weak(
                now,
                next,
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => {
                    self.peak.fetch_max(next, Ordering::Relaxed);
                    return Ok(());
                }
                Err(seen) => now = seen,
            }
        }
    }
}

// SAFETY: every method forwards to `P` unchanged, and `commit` may fail before
// calling it (the range then stays decommitted, as it was); the counters only
// observe.
unsafe impl<P: PageSource> PageSource for LimitedPages<P> {
    unsafe fn commit(&self, ptr: NonNull<u8>, size: usize) -> Result<(), PageError> {
        self.claim(size)?;
        // SAFETY: the caller upholds `commit`'s contract.
        let done = unsafe { self.inner.commit(ptr, size) };
        if done.is_err() {
            self.committed.fetch_sub(size, Ordering::Relaxed);
        }
        done
    }

    unsafe fn decommit(&self, ptr: NonNull<u8>, size: usize) {
        // SAFETY: the caller upholds `decommit`'s contract.
        unsafe { self.inner.decommit(ptr, size) };
        let old = self.committed.fetch_sub(size, Ordering::Relaxed);
        debug_assert!(
            old >= size,
            "LimitedPages: more bytes decommitted ({size}) than committed ({old})"
        );
    }

    crate::forward_page_source!(|s| s.inner; page_size reserve release properties);
}
