//! A direct-mapped cache of committed pages between a consumer and its source, so that
//! eager decommit does not turn into a system call on every free.

use core::ptr::{self, NonNull};

use bento_align::Alignment;

use crate::lock::Locked;
use crate::{PageError, PageSource, check_range};

/// The cache's figures.
///
/// ```
/// use bento_pages::{CommitCache, HeapPages};
///
/// let cache = CommitCache::with_capacity(HeapPages::new(), 16 * 4096).unwrap();
/// let s = cache.stats();
/// assert_eq!((s.capacity, s.limit, s.parked, s.hits), (16 * 4096, 16 * 4096, 0, 0));
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CacheStats {
    /// Pages committed from the cache, with no call to the source.
    pub hits: usize,
    /// Pages the source had to commit.
    pub misses: usize,
    /// Pages parked by a decommit, with no call to the source.
    pub parks: usize,
    /// Parked pages pushed out of their slot by another page and truly decommitted.
    pub evictions: usize,
    /// Bytes parked now (committed in the source, decommitted for the consumer).
    pub parked: usize,
    /// Reservations the consumer released that the cache keeps for its next
    /// `reserve` of the same size (see [`CommitCache`]).
    pub spares: usize,
    /// Bytes of address space those reservations hold (their parked pages are
    /// counted in `parked`).
    pub spare_bytes: usize,
    /// Reservations handed out again from the spares, with no call to the source.
    pub reuses: usize,
    /// Bytes the cache can park.
    pub capacity: usize,
    /// Bytes the cache parks at most now (see [`CommitCache::set_limit`]): at most
    /// `capacity`.
    pub limit: usize,
}

/// How many released reservations the cache keeps at most.
pub(crate) const SPARES: usize = 4;

#[derive(Debug)]
struct State {
    // Invariant: `stats.parked <= stats.limit <= stats.capacity` once `set_limit`
    // returns; a decommit parks a page in an empty slot only below the limit.
    stats: CacheStats,
    // Invariant: each `Some` is a live reservation of `inner` that the consumer has
    // released: every page of it decommitted for the consumer (its pages are either
    // parked or decommitted in `inner`), of at most `capacity` bytes; `stats.spares`
    // and `stats.spare_bytes` count them.
    spares: [Option<(NonNull<u8>, usize)>; SPARES],
}

/// Parked pages on their way back to the source, gathered into runs of adjacent pages
/// so that a run costs one `decommit` where the source allows a call to span
/// reservations ([`PageSource::decommit_may_span`]); elsewhere each page is its own
/// call. Gives the last run back on drop.
struct Decommits<'a, P: PageSource> {
    inner: &'a P,
    page: usize,
    span: bool,
    // Invariant: `None`, or `len` bytes of parked pages from `start`, taken out of
    // their slots, committed in `inner`, inside live reservations, unused.
    run: Option<(NonNull<u8>, usize)>,
}

impl<'a, P: PageSource> Decommits<'a, P> {
    fn new(inner: &'a P, page: usize) -> Self {
        Self {
            inner,
            page,
            span: inner.decommit_may_span(),
            run: None,
        }
    }

    /// Adds page `p` to the run, or starts a new one.
    ///
    /// # Safety
    ///
    /// `p` is a page taken out of its slot: committed in `inner`, inside a live
    /// reservation, unused, and not already gathered.
    unsafe fn push(&mut self, p: NonNull<u8>) {
        if let Some((start, len)) = &mut self.run
            && self.span
            && start.addr().get() + *len == p.addr().get()
        {
            *len += self.page;
            return;
        }
        self.flush();
        self.run = Some((p, self.page));
    }

    fn flush(&mut self) {
        if let Some((start, len)) = self.run.take() {
            // SAFETY: the run's invariant; pages of several reservations only when
            // `inner` allows a decommit to span them.
            unsafe { self.inner.decommit(start, len) };
        }
    }
}

impl<P: PageSource> Drop for Decommits<'_, P> {
    fn drop(&mut self) {
        self.flush();
    }
}

/// A direct-mapped cache of committed pages.
///
/// A `decommit` does not reach the source: each page is **parked**, still committed,
/// in the slot its address maps to (a page already in that slot is truly decommitted
/// first: an eviction). A `commit` of a parked page takes it out of its slot and costs
/// no call to the source; the other pages of the range are committed by the source in
/// as few calls as there are runs of them. Ranges longer than the cache are
/// decommitted directly except for their last `capacity` bytes.
///
/// A `release` of a reservation of at most `capacity` bytes keeps it as a **spare**
/// (up to four), whole, with its parked pages, and the next `reserve` of the same
/// size and alignment takes it back with no call to the source: a consumer that
/// gives its last segment back at once, and fills again a moment later, then costs
/// no system call. A reserve the source refuses while spares are kept gives them
/// back and asks once more (a source of fixed size may need their room).
/// [`trim`](Self::trim) truly decommits every parked page and releases the spares,
/// for memory pressure.
///
/// A parked page keeps its contents, so memory committed through the cache does not
/// read as zero ([`decommitted_reads_zero`](PageSource::decommitted_reads_zero) is
/// false). The slot table (a pointer per slot) is reserved and committed from the
/// source itself: the cache never calls the global allocator.
///
/// ```
/// use bento_align::Alignment;
/// use bento_pages::{CommitCache, HeapPages, Metered, PageSource};
///
/// let pages = CommitCache::with_capacity(Metered::new(HeapPages::new()), 64 * 4096).unwrap();
/// let base = pages.reserve(16 * 4096, Alignment::MIN).unwrap();
/// // SAFETY: ranges of a live reservation; everything is decommitted before release.
/// unsafe {
///     pages.commit(base, 4 * 4096).unwrap();
///     let before = pages.inner().stats().commits;
///     pages.decommit(base, 4 * 4096); // parked, no call to the source
///     pages.commit(base, 4 * 4096).unwrap(); // four hits, no call to the source
///     assert_eq!(pages.inner().stats().commits, before);
///     assert_eq!(pages.stats().hits, 4);
///     pages.decommit(base, 4 * 4096);
///     assert_eq!(pages.trim(), 4 * 4096);
///     pages.release(base, 16 * 4096);
/// }
/// ```
#[derive(Debug)]
pub struct CommitCache<P: PageSource> {
    inner: P,
    page: Alignment,
    // Invariant: `slots` pointers, each null (empty) or a parked page: page-aligned,
    // committed in `inner`, inside a live reservation, decommitted for the consumer.
    // A page is parked in slot `(addr / page) % slots` only. Reached under `state`.
    table: NonNull<*mut u8>,
    slots: usize,
    // The table's own reservation, released on drop (0 bytes when `slots == 0`).
    table_bytes: usize,
    state: Locked<State>,
}

// SAFETY: the table and the spares hold pointers into reservations of `inner`, which
// moves with the cache; they are only read or written under `state`'s lock.
unsafe impl<P: PageSource + Send> Send for CommitCache<P> {}
// SAFETY: as above; every access to the table holds the lock, and `inner` is `Sync`.
unsafe impl<P: PageSource + Sync> Sync for CommitCache<P> {}

impl<P: PageSource> CommitCache<P> {
    /// The capacity of [`CommitCache::new`]: 32 MiB.
    pub const DEFAULT_CAPACITY: usize = 32 << 20;

    /// A cache of [`DEFAULT_CAPACITY`](Self::DEFAULT_CAPACITY) bytes over `inner`.
    ///
    /// # Errors
    ///
    /// When `inner` cannot reserve or commit the slot table.
    pub fn new(inner: P) -> Result<Self, PageError> {
        Self::with_capacity(inner, Self::DEFAULT_CAPACITY)
    }

    /// A cache that parks up to `bytes` (rounded down to pages) over `inner`; 0 makes
    /// it a plain pass-through.
    ///
    /// # Errors
    ///
    /// When `inner` cannot reserve or commit the slot table.
    pub fn with_capacity(inner: P, bytes: usize) -> Result<Self, PageError> {
        let page = inner.page_alignment();
        let slots = bytes >> page.log2();
        let (table, table_bytes) = if slots == 0 {
            (NonNull::dangling(), 0)
        } else {
            let want = slots * size_of::<*mut u8>();
            let table_bytes = bento_align::align_up(want, page)
                .ok_or(PageError::OutOfAddressSpace { size: want })?;
            let base = inner.reserve(table_bytes, Alignment::of::<*mut u8>())?;
            // SAFETY: the whole of a reservation just made.
            if let Err(e) = unsafe { inner.commit(base, table_bytes) } {
                // SAFETY: the reservation just made; its commit failed, so nothing of it
                // is committed.
                unsafe { inner.release(base, table_bytes) };
                return Err(e);
            }
            let table = base.cast::<*mut u8>();
            for i in 0..slots {
                // SAFETY: `i < slots` and the table holds `slots` pointers; the memory
                // is committed and aligned for pointers.
                unsafe { table.add(i).write(ptr::null_mut()) };
            }
            (table, table_bytes)
        };
        Ok(Self {
            inner,
            page,
            table,
            slots,
            table_bytes,
            state: Locked::new(State {
                stats: CacheStats {
                    capacity: slots << page.log2(),
                    limit: slots << page.log2(),
                    ..CacheStats::default()
                },
                spares: [None; SPARES],
            }),
        })
    }

    /// The source behind the cache.
    pub fn inner(&self) -> &P {
        &self.inner
    }

    /// Takes the cache's lock and keeps it until [`release_lock`](Self::release_lock): for a
    /// `pthread_atfork` prepare handler, so that a child process never inherits the
    /// lock held by a thread it does not have. Every call that reaches the cache
    /// waits meanwhile.
    ///
    /// ```
    /// use bento_pages::{CommitCache, HeapPages};
    ///
    /// let cache = CommitCache::new(HeapPages::new()).unwrap();
    /// cache.hold_lock();
    /// // SAFETY: held just above, by this thread.
    /// unsafe { cache.release_lock() };
    /// assert_eq!(cache.trim(), 0);
    /// ```
    pub fn hold_lock(&self) {
        self.state.raw().lock();
    }

    /// Gives back the lock [`hold_lock`](Self::hold_lock) took.
    ///
    /// # Safety
    ///
    /// The caller must hold the lock through `hold_lock`: this thread, or, in a child
    /// process forked while it was held, the child's only thread.
    pub unsafe fn release_lock(&self) {
        // SAFETY: the caller's contract: the lock is held and is this caller's.
        unsafe { self.state.raw().unlock() }
    }

    /// The source behind the cache, given back after what [`Drop`] does: every
    /// parked page decommitted, the spares and the slot table released.
    ///
    /// ```
    /// use bento_pages::{CommitCache, HeapPages, Metered};
    ///
    /// let cache = CommitCache::with_capacity(Metered::new(HeapPages::new()), 16 * 4096).unwrap();
    /// let metered = cache.into_inner();
    /// assert_eq!(metered.stats().reserved, 0); // the slot table went back
    /// ```
    pub fn into_inner(self) -> P {
        let mut this = core::mem::ManuallyDrop::new(self);
        this.release_all();
        // SAFETY: `this` is never used or dropped again, so `inner` is moved out once;
        // the other fields own nothing (the table went back in `release_all`, and the
        // state holds plain values).
        unsafe { core::ptr::read(&raw const this.inner) }
    }

    /// Decommits every parked page and releases the spares and the slot table.
    fn release_all(&mut self) {
        self.trim();
        if self.table_bytes > 0 {
            let base = self.table.cast::<u8>();
            // SAFETY: the table's own reservation, committed in `with_capacity`, no
            // longer used.
            unsafe {
                self.inner.decommit(base, self.table_bytes);
                self.inner.release(base, self.table_bytes);
            }
            self.table_bytes = 0;
        }
    }

    /// The cache's figures now.
    pub fn stats(&self) -> CacheStats {
        self.state.with(|s| s.stats)
    }

    /// Parks at most `bytes` (rounded down to pages, and at most the capacity) from
    /// now on, truly decommitting parked pages until that holds: a consumer whose
    /// memory shrinks keeps its cache in proportion. A page decommitted while the
    /// cache is at its limit goes straight to the source unless its slot holds a page
    /// to evict (the slot table does not shrink).
    ///
    /// ```
    /// use bento_align::Alignment;
    /// use bento_pages::{CommitCache, HeapPages, PageSource};
    ///
    /// let pages = CommitCache::with_capacity(HeapPages::new(), 64 * 4096).unwrap();
    /// let base = pages.reserve(16 * 4096, Alignment::MIN).unwrap();
    /// // SAFETY: ranges of a live reservation; everything is decommitted before release.
    /// unsafe {
    ///     pages.commit(base, 8 * 4096).unwrap();
    ///     pages.decommit(base, 8 * 4096);
    ///     assert_eq!(pages.stats().parked, 8 * 4096);
    ///     pages.set_limit(2 * 4096);
    ///     assert_eq!(pages.stats().parked, 2 * 4096);
    ///     pages.trim();
    ///     pages.release(base, 16 * 4096);
    /// }
    /// ```
    pub fn set_limit(&self, bytes: usize) {
        let limit = bytes.min(self.slots << self.page.log2()) & !self.page.mask();
        self.state.with(|s| {
            s.stats.limit = limit;
            let mut out = Decommits::new(&self.inner, self.page.get());
            let mut i = 0;
            while s.stats.parked > limit && i < self.slots {
                // SAFETY: the lock is held and `i < slots`.
                let p = unsafe { self.take_slot(i) };
                if let Some(p) = NonNull::new(p) {
                    // SAFETY: a parked page, now out of its slot.
                    unsafe { out.push(p) };
                    s.stats.parked -= self.page.get();
                    s.stats.evictions += 1;
                }
                i += 1;
            }
        });
    }

    /// Truly decommits every parked page and releases the spare reservations to the
    /// source; returns the bytes of memory given back: the manual prompt for memory
    /// pressure.
    pub fn trim(&self) -> usize {
        self.state.with(|s| {
            let mut freed = 0;
            let mut out = Decommits::new(&self.inner, self.page.get());
            for i in 0..self.slots {
                // SAFETY: the lock is held and `i < slots`.
                let p = unsafe { self.take_slot(i) };
                if let Some(p) = NonNull::new(p) {
                    // SAFETY: a parked page, now out of its slot.
                    unsafe { out.push(p) };
                    freed += self.page.get();
                }
            }
            // The parked pages go back before any spare is released.
            drop(out);
            s.stats.parked -= freed;
            for spare in &mut s.spares {
                if let Some((base, size)) = spare.take() {
                    // SAFETY: a spare is a live reservation of `inner` that the
                    // consumer released, all of it decommitted (its parked pages just
                    // were).
                    unsafe { self.inner.release(base, size) };
                    s.stats.spares -= 1;
                    s.stats.spare_bytes -= size;
                }
            }
            freed
        })
    }

    /// Releases every spare reservation to the source (after its parked pages);
    /// true when there was one.
    fn release_spares(&self) -> bool {
        let spares = self.state.with(|s| {
            let taken = s.spares;
            s.spares = [None; SPARES];
            s.stats.spares = 0;
            s.stats.spare_bytes = 0;
            taken
        });
        let mut any = false;
        for (base, size) in spares.into_iter().flatten() {
            any = true;
            // SAFETY: a spare is a live reservation of `inner`, released by the
            // consumer, so all of it is decommitted for the consumer.
            unsafe { self.give_back(base, size) };
        }
        any
    }

    /// Truly decommits the pages of `[base, base + size)` that are parked, then
    /// releases the reservation to the source.
    ///
    /// # Safety
    ///
    /// `base` and `size` are exactly a live reservation of `inner`, every page of it
    /// decommitted for the consumer (parked or decommitted in `inner`), and nothing
    /// uses it again.
    unsafe fn give_back(&self, base: NonNull<u8>, size: usize) {
        let start = base.addr().get();
        let in_range = |p: *mut u8| !p.is_null() && p.addr().wrapping_sub(start) < size;
        self.state.with(|s| {
            let pages = size >> self.page.log2();
            let mut out = Decommits::new(&self.inner, self.page.get());
            // Visit the slots the range maps to, or all of them if fewer.
            let mut visit = |i: usize, s: &mut State| {
                // SAFETY: the lock is held and `i < slots`.
                let p = unsafe { self.slot(i) };
                if in_range(p) {
                    // SAFETY: as above; then a parked page out of its slot, given
                    // back to `inner` so that its release contract holds.
                    unsafe {
                        self.take_slot(i);
                        out.push(NonNull::new_unchecked(p));
                    }
                    s.stats.parked -= self.page.get();
                }
            };
            if pages < self.slots {
                for k in 0..pages {
                    visit(self.slot_of(start + (k << self.page.log2())), s);
                }
            } else {
                for i in 0..self.slots {
                    visit(i, s);
                }
            }
        });
        // SAFETY: the caller passes a live reservation with everything decommitted (for
        // the consumer); the pages parked inside it were just decommitted in `inner`.
        unsafe { self.inner.release(base, size) }
    }

    fn slot_of(&self, addr: usize) -> usize {
        (addr >> self.page.log2()) % self.slots
    }

    /// Empties slot `i` and returns what it held (null when empty).
    ///
    /// # Safety
    ///
    /// The caller must hold the lock and pass `i < slots`.
    unsafe fn take_slot(&self, i: usize) -> *mut u8 {
        // SAFETY: the caller's contract; the table is committed memory of `slots`
        // pointers.
        unsafe { self.table.add(i).replace(ptr::null_mut()) }
    }

    /// # Safety
    ///
    /// The caller must hold the lock and pass `i < slots`.
    unsafe fn slot(&self, i: usize) -> *mut u8 {
        // SAFETY: the caller's contract.
        unsafe { self.table.add(i).read() }
    }

    /// Parks the `pages` pages from `ptr`, evicting what their slots held.
    ///
    /// # Safety
    ///
    /// The caller must hold the lock (`state` is its guarded value), and the pages must
    /// be committed in `inner`, inside a live reservation, and no longer used.
    unsafe fn park(&self, state: &mut State, ptr: NonNull<u8>, pages: usize) {
        let page = self.page.get();
        // Pages `[from, k)` that go straight to the source (the cache at its limit),
        // decommitted in one call per run.
        let mut direct: Option<usize> = None;
        let flush = |from: usize, to: usize| {
            // SAFETY: pages of the caller's range, committed and unused.
            unsafe {
                self.inner
                    .decommit(ptr.add(from * page), (to - from) * page)
            }
        };
        let mut evicted = Decommits::new(&self.inner, page);
        for k in 0..pages {
            // SAFETY: `k < pages`, inside the caller's range.
            let p = unsafe { ptr.add(k * page) };
            let i = self.slot_of(p.addr().get());
            // SAFETY: the lock is held and `i < slots`.
            let old = unsafe { self.slot(i) };
            debug_assert!(
                old != p.as_ptr(),
                "CommitCache: page {p:p} decommitted twice"
            );
            if old.is_null() && state.stats.parked + page > state.stats.limit {
                direct.get_or_insert(k);
                continue;
            }
            if let Some(from) = direct.take() {
                flush(from, k);
            }
            if let Some(old) = NonNull::new(old) {
                // SAFETY: a parked page, out of its slot once the write below replaces
                // it.
                unsafe { evicted.push(old) };
                state.stats.evictions += 1;
                state.stats.parked -= page;
            }
            // SAFETY: the lock is held and `i < slots`.
            unsafe { self.table.add(i).write(p.as_ptr()) };
            state.stats.parks += 1;
            state.stats.parked += page;
        }
        if let Some(from) = direct {
            flush(from, pages);
        }
    }
}

impl<P: PageSource> Drop for CommitCache<P> {
    fn drop(&mut self) {
        self.release_all();
    }
}

// SAFETY: reservations, releases and page contents are `inner`'s; the cache only delays
// decommits, so a committed range is always committed in `inner`. A parked page keeps
// its contents, hence `decommitted_reads_zero` is false. Nothing allocates.
unsafe impl<P: PageSource> PageSource for CommitCache<P> {
    fn page_size(&self) -> usize {
        self.page.get()
    }

    fn reserve(&self, size: usize, align: Alignment) -> Result<NonNull<u8>, PageError> {
        if self.slots > 0 {
            let align = align.get().max(self.page.get());
            let spare = self.state.with(|s| {
                let i = s.spares.iter().position(|spare| {
                    spare.is_some_and(|(base, n)| {
                        n == size && base.addr().get().is_multiple_of(align)
                    })
                })?;
                let (base, _) = s.spares[i].take()?;
                s.stats.spares -= 1;
                s.stats.spare_bytes -= size;
                s.stats.reuses += 1;
                Some(base)
            });
            if let Some(base) = spare {
                return Ok(base);
            }
        }
        match self.inner.reserve(size, align) {
            // The spares may hold what a source of fixed size (a `FixedPages` buffer)
            // needs: give them back and ask once more.
            Err(e) => {
                if self.release_spares() {
                    self.inner.reserve(size, align)
                } else {
                    Err(e)
                }
            }
            ok => ok,
        }
    }

    unsafe fn release(&self, base: NonNull<u8>, size: usize) {
        if self.slots == 0 {
            // SAFETY: the caller passes a live reservation, all of it decommitted.
            return unsafe { self.inner.release(base, size) };
        }
        // Keep it whole, with its parked pages, for the next reserve of its size.
        let kept = self.state.with(|s| {
            if size > s.stats.capacity {
                return false;
            }
            let Some(free) = s.spares.iter_mut().find(|spare| spare.is_none()) else {
                return false;
            };
            *free = Some((base, size));
            s.stats.spares += 1;
            s.stats.spare_bytes += size;
            true
        });
        if kept {
            return;
        }
        // SAFETY: the caller passes a live reservation with everything decommitted for
        // the consumer.
        unsafe { self.give_back(base, size) }
    }

    unsafe fn commit(&self, ptr: NonNull<u8>, size: usize) -> Result<(), PageError> {
        check_range(ptr, size, self.page.get())?;
        if self.slots == 0 {
            // SAFETY: the caller upholds `commit`'s contract.
            return unsafe { self.inner.commit(ptr, size) };
        }
        let page = self.page.get();
        let pages = size >> self.page.log2();
        self.state.with(|s| {
            // Commits pages `[from, to)` of the range through `inner`; on failure puts
            // pages `[0, from)`, already committed, back in the cache.
            let commit_run = |s: &mut State, from: usize, to: usize| {
                // SAFETY: a sub-range of the caller's range, whose pages are neither
                // committed nor parked.
                let run = unsafe { ptr.add(from * page) };
                // SAFETY: the caller upholds `commit`'s contract for the whole range.
                let result = unsafe { self.inner.commit(run, (to - from) * page) };
                if result.is_err() {
                    // SAFETY: pages `[0, from)` were committed (by `inner` or taken
                    // from the cache) in this call and are unused; the lock is held.
                    unsafe { self.park(s, ptr, from) };
                }
                result
            };
            let mut run: Option<usize> = None;
            for k in 0..pages {
                // SAFETY: `k < pages`, inside the caller's range.
                let p = unsafe { ptr.add(k * page) };
                let i = self.slot_of(p.addr().get());
                // SAFETY: the lock is held and `i < slots`.
                if unsafe { self.slot(i) } == p.as_ptr() {
                    // Commit the pending run first: if it fails, this page stays parked.
                    if let Some(from) = run.take() {
                        commit_run(s, from, k)?;
                    }
                    // SAFETY: the lock is held and `i < slots`.
                    unsafe { self.take_slot(i) };
                    s.stats.hits += 1;
                    s.stats.parked -= page;
                } else {
                    s.stats.misses += 1;
                    run.get_or_insert(k);
                }
            }
            match run {
                Some(from) => commit_run(s, from, pages),
                None => Ok(()),
            }
        })
    }

    unsafe fn decommit(&self, ptr: NonNull<u8>, size: usize) {
        let page = self.page.get();
        let pages = size >> self.page.log2();
        let direct = pages.saturating_sub(self.slots);
        if direct > 0 {
            // SAFETY: the head of the caller's range, committed and unused.
            unsafe { self.inner.decommit(ptr, direct * page) };
        }
        if direct < pages {
            // SAFETY: the rest of the caller's range; the lock is held inside `with`.
            self.state
                .with(|s| unsafe { self.park(s, ptr.add(direct * page), pages - direct) });
        }
    }

    fn commit_is_implicit(&self) -> bool {
        self.inner.commit_is_implicit()
    }

    fn decommitted_reads_zero(&self) -> bool {
        false
    }
}
