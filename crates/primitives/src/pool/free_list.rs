//! The intrusive free list every pool over its own memory shares ([`FreeList`]:
//! `Pool`, `TypedPool` through it, `GrowingPool`), and what the pools' `validate`
//! reports ([`PoolReport`], [`PoolCorruption`]).

use core::cell::Cell;
use core::fmt;
use core::ptr::NonNull;

use bento_pages::{Misuse, MisuseHook, panic_on_misuse};

use crate::pool::geometry::{Geometry, impl_chunk_raw_alloc, panicking, report};
use crate::pool::leaks::{LeakList, Links, sort_list};

/// A free chunk's first word: the next free chunk.
type Link = Option<NonNull<u8>>;

/// What debug builds write over a free chunk after its link.
const FREED: u8 = 0xDD;
/// What debug builds write over a chunk when they hand it out.
#[cfg(debug_assertions)]
const HANDED: u8 = 0xCD;

/// The stats [`Pool::validate`](crate::Pool::validate) (and the other pools'
/// `validate`) recomputes by walking the free list.
///
/// ```
/// use bento_primitives::Pool;
/// use core::alloc::Layout;
/// use core::mem::MaybeUninit;
///
/// let mut buf = [MaybeUninit::uninit(); 1024];
/// let pool = Pool::new(&mut buf, Layout::new::<[u8; 64]>()).unwrap();
/// let a = pool.alloc().unwrap();
/// let b = pool.alloc().unwrap();
/// // SAFETY: `a` is a live chunk of `pool`.
/// unsafe { pool.free(a) };
/// let report = pool.validate().unwrap();
/// assert_eq!((report.in_use, report.free_listed), (1, 1));
/// assert_eq!(report.untouched, pool.capacity() - 2);
/// # unsafe { pool.free(b) };
/// assert_eq!(report.capacity, report.in_use + report.free_listed + report.untouched);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PoolReport {
    /// Chunks the pool can hold.
    pub capacity: usize,
    /// Chunks in use: those handed out and not on the free list (where the pool
    /// counts them, its counter, which the walk confirms).
    pub in_use: usize,
    /// Chunks on the free list, counted by walking it.
    pub free_listed: usize,
    /// Chunks above the high-water mark, never handed out.
    pub untouched: usize,
}

impl PoolReport {
    /// The stats of `capacity` chunks, `touched` of them ever handed out and
    /// `listed` of those on the free list.
    pub(crate) fn new(capacity: usize, touched: usize, listed: usize) -> Self {
        Self {
            capacity,
            in_use: touched - listed,
            free_listed: listed,
            untouched: capacity - touched,
        }
    }
}

/// What [`Pool::validate`](crate::Pool::validate) (and the other pools' `validate`)
/// found broken.
///
/// ```
/// use bento_primitives::PoolCorruption;
/// use core::ptr::NonNull;
///
/// let c = PoolCorruption::Count { listed: 3, expected: 4 };
/// assert_eq!(c.to_string(), "the free list holds 3 chunks where 4 are free");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PoolCorruption {
    /// A free-list entry is not a chunk of the pool, or not one it handed out.
    #[error("free-list entry {position} ({ptr:p}) is not a chunk the pool handed out")]
    NotAChunk {
        /// Its position in the list (0 is the head).
        position: usize,
        /// The entry.
        ptr: NonNull<u8>,
    },
    /// The list is longer than the number of free chunks: a cycle, which a double free
    /// makes.
    #[error(
        "the free list runs past {expected} entries, all it can hold: a cycle (a double \
         free?) or a lost count"
    )]
    Cycle {
        /// The most entries the list can hold: the free chunks the counter implies where
        /// the pool counts, else every chunk ever handed out.
        expected: usize,
    },
    /// The list ends with fewer chunks than are free: chunks lost. Found only where
    /// the pool counts its chunks in use (debug builds, the `counters` feature).
    #[error("the free list holds {listed} chunks where {expected} are free")]
    Count {
        /// Chunks the walk found.
        listed: usize,
        /// The free chunks the counter implies.
        expected: usize,
    },
    /// A free chunk's poison fill was changed (checked in debug builds).
    #[error("the free chunk at {ptr:p} was written after free, at offset {offset}")]
    Poison {
        /// The chunk.
        ptr: NonNull<u8>,
        /// The first byte changed.
        offset: usize,
    },
    /// The pool's own bounds disagree (high-water mark, committed part, counter).
    #[error("the pool's bounds disagree: {0}")]
    Bounds(&'static str),
    /// A pool cache ([`SharedPoolCache`](crate::SharedPoolCache)) disagrees with
    /// itself or with its pool.
    #[error("a pool cache is inconsistent: {0}")]
    Cache(&'static str),
}

/// Chunks in use, counted on every allocation and free in debug builds and with the
/// `counters` feature; elsewhere a zero-size placeholder, and the stat comes from a
/// walk of the free list instead (see [`FreeList::in_use`]).
///
/// The count is one read-modify-write per operation, and it is what keeps `Pool` from
/// the speed of a bare free list: on `pool/random_10k_live` it makes a pair up to 1.34×
/// the bare list's time instead of about 1.0× (`cargo bench -p bento-benches --bench
/// pool`, with and without `--features bento-primitives/counters`).
#[derive(Default)]
struct Count {
    #[cfg(any(debug_assertions, feature = "counters"))]
    n: Cell<usize>,
}

impl Count {
    /// One more chunk in use.
    #[inline(always)]
    fn up(&self) {
        #[cfg(any(debug_assertions, feature = "counters"))]
        self.n.set(self.n.get() + 1);
    }

    /// One chunk fewer in use.
    #[inline(always)]
    fn down(&self) {
        #[cfg(any(debug_assertions, feature = "counters"))]
        self.n.set(self.n.get() - 1);
    }

    /// The count, where it is kept.
    #[inline]
    fn get(&self) -> Option<usize> {
        #[cfg(any(debug_assertions, feature = "counters"))]
        return Some(self.n.get());
        #[cfg(not(any(debug_assertions, feature = "counters")))]
        None
    }
}

/// The intrusive free list over a [`Geometry`]: the state `Pool`, `TypedPool` and
/// `GrowingPool` share.
pub(crate) struct FreeList {
    // Invariant: the last chunk freed, `None` when the list is empty. Each free chunk's
    // first word is a `Link` to the next; every listed chunk lies below `fresh`.
    head: Cell<Link>,
    // Invariant: a chunk boundary, `base <= fresh <= limit`; chunks from `fresh` up
    // were never handed out (the high-water mark).
    fresh: Cell<NonNull<u8>>,
    // Invariant: a chunk boundary, `fresh <= limit <= chunk(capacity)`; chunks below
    // it are usable memory (a `GrowingPool` moves it as it commits).
    limit: Cell<NonNull<u8>>,
    // Invariant (where counted): chunks handed out and not freed, so
    // `touched == in_use + listed`.
    in_use: Count,
    pub(crate) geo: Geometry,
    pub(crate) hook: MisuseHook,
}

impl FreeList {
    /// A list with no chunk handed out, `usable` chunks usable from the start.
    pub(crate) fn new(geo: Geometry, usable: usize) -> Self {
        Self {
            head: Cell::new(None),
            fresh: Cell::new(geo.base),
            limit: Cell::new(geo.chunk(usable)),
            in_use: Count::default(),
            geo,
            hook: panic_on_misuse,
        }
    }

    /// Takes a chunk: the last one freed, else the next one never used; `None` when
    /// neither is left below the limit.
    #[inline]
    pub(crate) fn alloc(&self) -> Option<NonNull<u8>> {
        match self.head.get() {
            Some(chunk) => self.pop(chunk),
            None => self.take_fresh(),
        }
    }

    /// Pops `chunk`, the head.
    #[inline]
    fn pop(&self, chunk: NonNull<u8>) -> Option<NonNull<u8>> {
        #[cfg(debug_assertions)]
        if !self.check_head(chunk) {
            // The list was dropped from `chunk` on; fall back on fresh chunks.
            return self.take_fresh();
        }
        // SAFETY: `chunk` is the head of the free list, so a free chunk below `fresh`
        // whose first word holds a `Link` (written by `push`; chunks are aligned for
        // it).
        let next = unsafe { chunk.cast::<Link>().read() };
        self.head.set(next);
        self.in_use.up();
        #[cfg(debug_assertions)]
        self.fill(chunk, 0, HANDED);
        Some(chunk)
    }

    /// Takes the chunk at the high-water mark, if it is below the limit.
    #[inline]
    pub(crate) fn take_fresh(&self) -> Option<NonNull<u8>> {
        let chunk = self.fresh.get();
        if chunk >= self.limit.get() {
            return None;
        }
        // SAFETY: `chunk < limit <= chunk(capacity)`, so one stride on is at most the
        // end of the chunks, inside the memory `base` points to.
        self.fresh.set(unsafe { chunk.add(self.geo.stride) });
        self.in_use.up();
        #[cfg(debug_assertions)]
        self.fill(chunk, 0, HANDED);
        Some(chunk)
    }

    /// Returns `chunk` to the list.
    ///
    /// # Safety
    ///
    /// The caller must ensure that `chunk` was handed out by this list and is not
    /// free. Debug builds check it and report a violation to the hook instead.
    #[inline]
    pub(crate) unsafe fn free(&self, chunk: NonNull<u8>) {
        // The caller's pointer may reach only the bytes it asked for (a `Box` of 8 bytes
        // in a 64-byte chunk); the pool's own pointer reaches the whole chunk.
        let chunk = self.geo.base.with_addr(chunk.addr());
        #[cfg(debug_assertions)]
        if !self.check_free(chunk) {
            return;
        }
        #[cfg(debug_assertions)]
        self.fill(chunk, size_of::<Link>(), FREED);
        // SAFETY: the caller guarantees `chunk` is a chunk in use, so ours to write;
        // chunks are aligned for a `Link` and at least that large.
        unsafe { chunk.cast::<Link>().write(self.head.get()) };
        self.head.set(Some(chunk));
        self.in_use.down();
    }

    /// How many chunks the list can hold.
    pub(crate) fn capacity(&self) -> usize {
        self.geo.capacity
    }

    /// How many chunks are free (listed or never handed out); see
    /// [`in_use`](Self::in_use) for the cost.
    pub(crate) fn available(&self) -> usize {
        self.geo.capacity - self.in_use()
    }

    /// Chunks in use: the counter where there is one (O(1)), else every chunk ever
    /// handed out less the free list's length (O(free)).
    #[inline]
    pub(crate) fn in_use(&self) -> usize {
        self.in_use.get().unwrap_or_else(|| self.walked_in_use())
    }

    /// Chunks in use by walking the free list: every chunk ever handed out less the
    /// list's length. The walk stops after as many entries as there are such chunks
    /// (a cycle), and at an entry that is not a chunk the pool handed out (a link
    /// overwritten), so a corrupt list neither holds it up nor leads it outside the
    /// pool; the stat is then wrong, and `validate` says what is broken.
    pub(crate) fn walked_in_use(&self) -> usize {
        let touched = self.touched();
        let mut listed = 0;
        let mut at = self.head.get();
        while let Some(chunk) = at
            && listed < touched
            && self.geo.locate(chunk, touched).is_ok()
        {
            listed += 1;
            // SAFETY: `chunk` is on the free list and was just found to be a chunk the
            // pool handed out, so a free chunk whose first word is its `Link`.
            at = unsafe { chunk.cast::<Link>().read() };
        }
        touched - listed
    }

    /// Chunks ever handed out: those below the high-water mark.
    pub(crate) fn touched(&self) -> usize {
        self.geo.index_of(self.fresh.get())
    }

    /// Chunks below the limit.
    pub(crate) fn usable(&self) -> usize {
        self.geo.index_of(self.limit.get())
    }

    /// Raises or lowers the limit to `usable` chunks; never below the high-water mark.
    pub(crate) fn set_usable(&self, usable: usize) {
        let limit = self.geo.chunk(usable);
        debug_assert!(
            limit >= self.fresh.get(),
            "the limit would pass chunks in use"
        );
        self.limit.set(limit);
    }

    /// Whether `ptr` lies inside the chunks (in any chunk, at any offset).
    pub(crate) fn contains(&self, ptr: NonNull<u8>) -> bool {
        let offset = ptr.addr().get().wrapping_sub(self.geo.base.addr().get());
        ptr.addr() >= self.geo.base.addr() && offset < self.geo.capacity * self.geo.stride
    }

    /// Walks the free list and recomputes the stats; `touched == in_use + listed`,
    /// every entry a chunk below the high-water mark, no cycle (debug builds: every
    /// free chunk's poison intact).
    pub(crate) fn validate(&self) -> Result<PoolReport, PoolCorruption> {
        self.validate_against(self.in_use.get())
    }

    /// [`validate`](Self::validate) against `count`, the chunks in use as counted
    /// (`None`: not counted, as in release builds without the `counters` feature;
    /// tests pass it to check that path in debug builds).
    pub(crate) fn validate_against(
        &self,
        count: Option<usize>,
    ) -> Result<PoolReport, PoolCorruption> {
        let touched = self.touched();
        if self.fresh.get() > self.limit.get() || self.usable() > self.geo.capacity {
            return Err(PoolCorruption::Bounds(
                "the high-water mark is above the limit, or the limit above the capacity",
            ));
        }
        // The list's length: known where the pool counts, else at most every chunk
        // ever handed out (a longer walk is a cycle).
        let counted = match count {
            Some(in_use) => Some(touched.checked_sub(in_use).ok_or(PoolCorruption::Bounds(
                "more chunks in use than ever handed out",
            ))?),
            None => None,
        };
        let expected = counted.unwrap_or(touched);
        let mut listed = 0usize;
        let mut at = self.head.get();
        while let Some(chunk) = at {
            if self.geo.locate(chunk, touched).is_err() {
                return Err(PoolCorruption::NotAChunk {
                    position: listed,
                    ptr: chunk,
                });
            }
            if listed == expected {
                return Err(PoolCorruption::Cycle { expected });
            }
            if cfg!(debug_assertions)
                && let Some(offset) = self.poison_broken(chunk)
            {
                return Err(PoolCorruption::Poison { ptr: chunk, offset });
            }
            listed += 1;
            // SAFETY: `chunk` was just found to be a chunk below the high-water mark,
            // and it is on the free list, so its first word is a `Link`.
            at = unsafe { chunk.cast::<Link>().read() };
        }
        if counted.is_some_and(|expected| listed != expected) {
            return Err(PoolCorruption::Count { listed, expected });
        }
        Ok(PoolReport::new(self.geo.capacity, touched, listed))
    }

    /// Sorts the free list by address (so the lowest free chunk goes out first) and
    /// returns the chunks in use. O(free log free), no memory besides the chunks.
    pub(crate) fn live_chunks(&self) -> LeakList<'_> {
        let head = self.head.get().map(|c| self.geo.index_of(c));
        let sorted = sort_list(self, head);
        self.head.set(sorted.map(|i| self.geo.chunk(i)));
        LeakList::new(self, sorted, self.touched(), self.in_use())
    }

    /// Sorts the free list by address and takes the free chunks just below the
    /// high-water mark off it, lowering the mark to just above the highest chunk in
    /// use. Returns the new mark (in chunks). O(free log free).
    pub(crate) fn lower_high_water(&self) -> usize {
        let head = self.head.get().map(|c| self.geo.index_of(c));
        let mut head = sort_list(self, head);
        let touched = self.touched();
        // The run of consecutive chunks at the tail of the sorted list, and the entry
        // before it.
        let (mut run_start, mut before_run, mut last) = (None, None, None::<usize>);
        let mut at = head;
        while let Some(i) = at {
            if last.is_none_or(|l| l + 1 != i) {
                run_start = Some(i);
                before_run = last;
            }
            last = Some(i);
            at = Links::next(self, i);
        }
        let keep = match (run_start, last) {
            (Some(start), Some(last)) if last + 1 == touched => start,
            _ => touched,
        };
        if keep < touched {
            match before_run {
                Some(b) => self.set_next(b, None),
                None => head = None,
            }
            self.fresh.set(self.geo.chunk(keep));
        }
        self.head.set(head.map(|i| self.geo.chunk(i)));
        keep
    }

    /// Reports the leak list to the hook when chunks are still in use (debug builds
    /// with `std`). Says nothing while the thread unwinds (known only with `std`, so
    /// without it there is no report: a second panic during unwinding would abort), or
    /// when the list is corrupt (the leak list cannot be known then; `validate` says
    /// what is wrong).
    pub(crate) fn report_leaks(&self) {
        if cfg!(all(debug_assertions, feature = "std"))
            && self.in_use() > 0
            && !panicking()
            && self.validate().is_ok()
        {
            report(self.hook, &Misuse::Leaked(&self.live_chunks()));
        }
    }

    /// Where the free chunk's poison fill (after its link) was changed, if it was.
    fn poison_broken(&self, chunk: NonNull<u8>) -> Option<usize> {
        (size_of::<Link>()..self.geo.stride).find(|&i| {
            // SAFETY: `i < stride`, inside the chunk, which lies in our memory. The chunk
            // is free (callers check free chunks only), and its bytes after the link
            // were written by the debug fill when it was freed.
            unsafe { chunk.add(i).read() != FREED }
        })
    }

    /// Writes `byte` over the chunk from `from` on.
    #[cfg(debug_assertions)]
    fn fill(&self, chunk: NonNull<u8>, from: usize, byte: u8) {
        // SAFETY: `chunk` is a chunk of ours being handed out or freed, `stride` bytes
        // long, not shared with anyone at this moment.
        unsafe { chunk.add(from).write_bytes(byte, self.geo.stride - from) };
    }

    /// Debug check of a chunk about to be handed out from the head: its link must be
    /// a chunk of ours (else the list from here on is dropped) and its poison intact
    /// (else a write after free is reported). False when the list was dropped.
    #[cfg(debug_assertions)]
    fn check_head(&self, chunk: NonNull<u8>) -> bool {
        // SAFETY: `chunk` is the head, a free chunk; reading its first word as an
        // address looks at the link without using it.
        let link = unsafe { chunk.cast::<usize>().read() };
        if link != 0
            && self
                .geo
                .locate(
                    chunk.with_addr(link.try_into().expect("non-zero")),
                    self.touched(),
                )
                .is_err()
        {
            report(self.hook, &Misuse::BrokenLink { ptr: chunk });
            self.head.set(None);
            return false;
        }
        if let Some(offset) = self.poison_broken(chunk) {
            report(self.hook, &Misuse::WriteAfterFree { ptr: chunk, offset });
        }
        true
    }

    /// Debug check of a chunk about to be freed: a chunk boundary of ours, handed out,
    /// and not on the free list. False after reporting misuse: the free must not happen.
    ///
    /// The double-free test walks the free list (bounded by the free count) rather
    /// than looking inside the chunk: a chunk in use holds the caller's bytes, which
    /// may be uninitialised (padding, `MaybeUninit`) and must not be read.
    #[cfg(debug_assertions)]
    fn check_free(&self, chunk: NonNull<u8>) -> bool {
        let touched = self.touched();
        if let Err(misuse) = self.geo.locate(chunk, touched) {
            report(self.hook, &misuse);
            return false;
        }
        if self.is_listed(chunk) {
            report(self.hook, &Misuse::DoubleFree { ptr: chunk });
            return false;
        }
        true
    }

    /// Whether `chunk` is on the free list (a walk, bounded by the free count).
    #[cfg(debug_assertions)]
    fn is_listed(&self, chunk: NonNull<u8>) -> bool {
        let free = self.touched() - self.in_use();
        let mut at = self.head.get();
        for _ in 0..free {
            match at {
                Some(c) if c == chunk => return true,
                // SAFETY: `c` is on the free list; its first word is its `Link`.
                Some(c) => at = unsafe { c.cast::<Link>().read() },
                None => return false,
            }
        }
        false
    }
}

/// The free list threaded by index, for the sort and the leak list. Used inside one
/// call on the pool (the pools with a `FreeList` are not `Sync`), which nothing can
/// interleave with; the list is assumed well formed (`validate` checks that).
impl Links for FreeList {
    fn next(&self, index: usize) -> Option<usize> {
        // SAFETY: `index` is on the free list; its first word is its `Link`.
        let link = unsafe { self.geo.chunk(index).cast::<Link>().read() };
        link.map(|c| self.geo.index_of(c))
    }

    fn set_next(&self, index: usize, next: Option<usize>) {
        let link = next.map(|i| self.geo.chunk(i));
        // SAFETY: `index` is a free chunk, ours to write.
        unsafe { self.geo.chunk(index).cast::<Link>().write(link) };
    }

    fn chunk(&self, index: usize) -> NonNull<u8> {
        self.geo.chunk(index)
    }
}

impl fmt::Debug for FreeList {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FreeList")
            .field("chunk_size", &self.geo.stride)
            .field("chunk_align", &self.geo.align.get())
            .field("capacity", &self.geo.capacity)
            .field("in_use", &self.in_use())
            .field("touched", &self.touched())
            .finish_non_exhaustive()
    }
}

impl_chunk_raw_alloc!(impl[] for FreeList);

/// The accessors `Pool` and `GrowingPool` share, each forwarding to the pool's
/// [`FreeList`] in its field `list`: their bodies are written once here, and each pool's
/// invocation gives them its own docs and examples.
macro_rules! free_list_accessors {
    (
        $(#[$capacity:meta])* fn capacity;
        $(#[$available:meta])* fn available;
        $(#[$in_use:meta])* fn in_use;
        $(#[$chunk_layout:meta])* fn chunk_layout;
    ) => {
        $(#[$capacity])*
        #[must_use]
        pub fn capacity(&self) -> usize {
            self.list.capacity()
        }

        $(#[$available])*
        #[must_use]
        pub fn available(&self) -> usize {
            self.list.available()
        }

        $(#[$in_use])*
        #[must_use]
        pub fn in_use(&self) -> usize {
            self.list.in_use()
        }

        $(#[$chunk_layout])*
        #[must_use]
        pub fn chunk_layout(&self) -> core::alloc::Layout {
            self.list.geo.layout()
        }
    };
}

pub(crate) use free_list_accessors;

#[cfg(test)]
mod tests;
