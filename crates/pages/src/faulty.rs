//! Failure injection, for bento's own tests (feature `testing`).

use core::ptr::NonNull;

use bento_align::Alignment;

use crate::sync::{AtomicUsize, Ordering};
use crate::{PageError, PageSource};

/// "Never": no failure armed.
const NEVER: usize = usize::MAX;

/// Wraps a source and makes chosen `reserve` or `commit` calls fail, to test that the
/// layers above leave every block intact and their stats unchanged.
///
/// Counts are of calls made from now on: `fail_reserve(0)` fails the next reserve,
/// `fail_commit(2)` lets two commits through and fails the third,
/// `fail_commits_from(0)` fails every commit until [`heal`](Self::heal).
///
/// ```
/// use bento_align::Alignment;
/// use bento_pages::{FaultyPages, HeapPages, PageError, PageSource};
///
/// let pages = FaultyPages::new(HeapPages::new());
/// pages.fail_reserve(1);
/// let a = pages.reserve(4096, Alignment::MIN).unwrap();
/// assert!(matches!(pages.reserve(4096, Alignment::MIN), Err(PageError::OutOfAddressSpace { .. })));
/// let b = pages.reserve(4096, Alignment::MIN).unwrap();
/// pages.fail_commits_from(0);
/// // SAFETY: a page of a live reservation.
/// assert!(unsafe { pages.commit(a, 4096) }.is_err());
/// pages.heal();
/// // SAFETY: as above; released without anything committed.
/// unsafe {
///     assert!(pages.commit(a, 4096).is_ok());
///     pages.decommit(a, 4096);
///     pages.release(a, 4096);
///     pages.release(b, 4096);
/// }
/// ```
#[derive(Debug)]
pub struct FaultyPages<P> {
    inner: P,
    reserves: AtomicUsize,
    commits: AtomicUsize,
    // Each is a call number (counting all calls so far) or `NEVER`.
    fail_reserve_at: AtomicUsize,
    fail_commit_at: AtomicUsize,
    fail_commits_from: AtomicUsize,
    injected: AtomicUsize,
}

impl<P: PageSource> FaultyPages<P> {
    /// `inner` with no failure armed.
    pub fn new(inner: P) -> Self {
        Self {
            inner,
            reserves: AtomicUsize::new(0),
            commits: AtomicUsize::new(0),
            fail_reserve_at: AtomicUsize::new(NEVER),
            fail_commit_at: AtomicUsize::new(NEVER),
            fail_commits_from: AtomicUsize::new(NEVER),
            injected: AtomicUsize::new(0),
        }
    }

    /// Fails the reserve call `n` calls from now (0: the next one).
    pub fn fail_reserve(&self, n: usize) {
        let now = self.reserves.load(Ordering::Relaxed);
        self.fail_reserve_at.store(now + n, Ordering::Relaxed);
    }

    /// Fails the commit call `n` calls from now (0: the next one).
    pub fn fail_commit(&self, n: usize) {
        let now = self.commits.load(Ordering::Relaxed);
        self.fail_commit_at.store(now + n, Ordering::Relaxed);
    }

    /// Fails every commit from `n` calls from now on, until [`heal`](Self::heal).
    pub fn fail_commits_from(&self, n: usize) {
        let now = self.commits.load(Ordering::Relaxed);
        self.fail_commits_from.store(now + n, Ordering::Relaxed);
    }

    /// Disarms every failure.
    pub fn heal(&self) {
        for a in [
            &self.fail_reserve_at,
            &self.fail_commit_at,
            &self.fail_commits_from,
        ] {
            a.store(NEVER, Ordering::Relaxed);
        }
    }

    /// How many failures have been injected.
    pub fn injected(&self) -> usize {
        self.injected.load(Ordering::Relaxed)
    }

    /// The wrapped source.
    pub fn inner(&self) -> &P {
        &self.inner
    }
}

// SAFETY: every method forwards to `P` unchanged, or fails before calling it (a failed
// commit leaves the range decommitted, as it was).
unsafe impl<P: PageSource> PageSource for FaultyPages<P> {
    fn reserve(&self, size: usize, align: Alignment) -> Result<NonNull<u8>, PageError> {
        let call = self.reserves.fetch_add(1, Ordering::Relaxed);
        if call == self.fail_reserve_at.load(Ordering::Relaxed) {
            self.injected.fetch_add(1, Ordering::Relaxed);
            return Err(PageError::OutOfAddressSpace { size });
        }
        self.inner.reserve(size, align)
    }

    unsafe fn commit(&self, ptr: NonNull<u8>, size: usize) -> Result<(), PageError> {
        let call = self.commits.fetch_add(1, Ordering::Relaxed);
        if call == self.fail_commit_at.load(Ordering::Relaxed)
            || call >= self.fail_commits_from.load(Ordering::Relaxed)
        {
            self.injected.fetch_add(1, Ordering::Relaxed);
            return Err(PageError::CommitRefused { size, code: 0 });
        }
        // SAFETY: the caller upholds `commit`'s contract.
        unsafe { self.inner.commit(ptr, size) }
    }

    crate::forward_page_source!(
        |s| s.inner;
        page_size release decommit properties
    );
}
