//! The commit cache's table of kept pages (open addressing on the address) and its
//! spare reservations: finding, inserting and removing entries, parking a page, and
//! giving spares back.

use core::ptr::NonNull;

use crate::PageSource;
use crate::cache::{CommitCache, Decommits, EMPTY, GENERATION, SPARES, Spare, State};

impl<P: PageSource> CommitCache<P> {
    /// The slot holding kept page `addr`, if kept.
    ///
    /// # Safety
    ///
    /// The caller must hold the lock.
    pub(super) unsafe fn find(&self, addr: usize) -> Option<usize> {
        if self.slots == 0 {
            return None;
        }
        let mut i = self.home(addr);
        loop {
            // SAFETY: the caller holds the lock; `i < slots`.
            let e = unsafe { self.slot(i) };
            if e.is_null() {
                return None;
            }
            if e.addr() & !GENERATION == addr {
                return Some(i);
            }
            i = (i + 1) & (self.slots - 1);
        }
    }

    /// The slot holding kept page `addr`, if kept and its entry passes `wanted`.
    ///
    /// # Safety
    ///
    /// The caller must hold the lock.
    pub(super) unsafe fn find_if(
        &self,
        addr: usize,
        wanted: impl Fn(*mut u8) -> bool,
    ) -> Option<usize> {
        // SAFETY: the caller holds the lock; a slot `find` returns is below `slots`.
        unsafe { self.find(addr).filter(|&j| wanted(self.slot(j))) }
    }

    /// Adds kept page `p` to the table, of the young generation.
    ///
    /// # Safety
    ///
    /// The caller must hold the lock; `p` is committed in `inner`, inside a live
    /// reservation, unused, not in the table, and there is room (`parked` below
    /// `capacity`, so the table is at most half full).
    pub(super) unsafe fn insert(&self, s: &mut State, p: NonNull<u8>) {
        let mut i = self.home(p.addr().get());
        // SAFETY: the caller holds the lock; `i < slots`; an empty slot exists.
        while !unsafe { self.slot(i) }.is_null() {
            i = (i + 1) & (self.slots - 1);
        }
        let young = s.young;
        // SAFETY: as above.
        unsafe { self.put(i, p.as_ptr().map_addr(|a| a | young)) };
        s.count[young] += 1;
        s.stats.parked += self.page.get();
    }

    /// Empties slot `i` (which holds an entry), shifting the entries after it back so
    /// that no probe path crosses an empty slot.
    ///
    /// # Safety
    ///
    /// The caller must hold the lock and pass `i < slots` holding an entry.
    pub(super) unsafe fn remove(&self, s: &mut State, mut i: usize) {
        let mask = self.slots - 1;
        // SAFETY: the caller's contract.
        let e = unsafe { self.slot(i) };
        s.count[e.addr() & GENERATION] -= 1;
        s.stats.parked -= self.page.get();
        let mut j = i;
        loop {
            j = (j + 1) & mask;
            // SAFETY: the lock is held; `j < slots`.
            let f = unsafe { self.slot(j) };
            if f.is_null() {
                break;
            }
            let home = self.home(f.addr() & !GENERATION);
            // `f` may move to `i` when its home is not in the cyclic range (i, j].
            if (j.wrapping_sub(home) & mask) >= (j.wrapping_sub(i) & mask) {
                // SAFETY: as above.
                unsafe { self.put(i, f) };
                i = j;
            }
        }
        // SAFETY: as above.
        unsafe { self.put(i, EMPTY) };
    }

    /// The slot a page's probe path starts at.
    #[inline]
    pub(super) fn home(&self, addr: usize) -> usize {
        let n = (addr >> self.page.log2()) as u64;
        (n.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - self.slots_log2)) as usize
    }

    /// # Safety
    ///
    /// The caller must hold the lock and pass `i < slots`.
    #[inline]
    pub(super) unsafe fn slot(&self, i: usize) -> *mut u8 {
        // SAFETY: the caller's contract.
        unsafe { self.table.add(i).read() }
    }

    /// Writes `e` (a tagged page, or `EMPTY`) to slot `i` and its occupancy bit.
    ///
    /// # Safety
    ///
    /// The caller must hold the lock and pass `i < slots`.
    #[inline]
    unsafe fn put(&self, i: usize, e: *mut u8) {
        let bit = 1u64 << (i % 64);
        // SAFETY: the caller's contract; word `i / 64` is one of the `slots.div_ceil(64)`
        // occupancy words after the table.
        unsafe {
            self.table.add(i).write(e);
            let word = self.occupied.add(i / 64);
            let w = word.read();
            word.write(if e.is_null() { w & !bit } else { w | bit });
        }
    }

    /// The first slot at or after `from` that holds a page, found a word of 64 slots
    /// at a time; `None` when no slot from `from` to the end does.
    ///
    /// # Safety
    ///
    /// The caller must hold the lock.
    pub(super) unsafe fn next_kept(&self, from: usize) -> Option<usize> {
        if from >= self.slots {
            return None;
        }
        let mut w = from / 64;
        // SAFETY: the lock is held; `w < slots.div_ceil(64)`.
        let mut bits = unsafe { self.occupied.add(w).read() } & (u64::MAX << (from % 64));
        loop {
            if bits != 0 {
                return Some(w * 64 + bits.trailing_zeros() as usize);
            }
            w += 1;
            if w * 64 >= self.slots {
                return None;
            }
            // SAFETY: as above, `w` is still below the word count.
            bits = unsafe { self.occupied.add(w).read() };
        }
    }

    /// Keeps the `pages` pages from `ptr`, or gives them to the source where the
    /// limit leaves no room.
    ///
    /// # Safety
    ///
    /// The caller must hold the lock (`s` is its guarded value), and the pages must be
    /// committed in `inner`, inside a live reservation, and no longer used.
    pub(super) unsafe fn park(
        &self,
        s: &mut State,
        out: &mut Decommits<'_, P>,
        ptr: NonNull<u8>,
        pages: usize,
    ) {
        let page = self.page.get();
        // Pages `[from, k)` that go straight to the source (no room), decommitted in
        // one call per run: they lie in the caller's one reservation.
        let mut direct: Option<usize> = None;
        let flush = |from: usize, to: usize| {
            // SAFETY: pages of the caller's range, committed and unused.
            unsafe {
                self.inner
                    .decommit(ptr.add(from * page), (to - from) * page)
            }
        };
        for k in 0..pages {
            // SAFETY: `k < pages`, inside the caller's range.
            let p = unsafe { ptr.add(k * page) };
            #[cfg(debug_assertions)]
            {
                // SAFETY: the caller holds the lock.
                let kept = unsafe { self.find(p.addr().get()) };
                debug_assert!(kept.is_none(), "CommitCache: page {p:p} decommitted twice");
            }
            if s.stats.parked + page > s.stats.limit {
                direct.get_or_insert(k);
                continue;
            }
            if let Some(from) = direct.take() {
                flush(from, k);
            }
            // SAFETY: the caller's contract; room below the limit.
            unsafe { self.insert(s, p) };
            s.stats.parks += 1;
            s.last_kept = s.seen;
        }
        if let Some(from) = direct {
            flush(from, pages);
        }
        // The pages were the caller's to give: nothing of them is in `out`.
        let _ = out;
    }

    /// Gives back the spares `which` picks (after their kept pages); true when there
    /// was one.
    pub(super) fn release_spares(&self, which: impl Fn(&Spare) -> bool) -> bool {
        // SAFETY: the lock is held inside `locked`.
        self.locked(|s, out| unsafe { self.drop_spares(s, out, which) })
    }

    /// Gives back the spares `which` picks (after their kept pages); true when there
    /// was one.
    ///
    /// # Safety
    ///
    /// The caller must hold the lock.
    pub(super) unsafe fn drop_spares(
        &self,
        s: &mut State,
        out: &mut Decommits<'_, P>,
        which: impl Fn(&Spare) -> bool,
    ) -> bool {
        let mut any = false;
        for i in 0..SPARES {
            if let Some(sp) = s.spares[i]
                && which(&sp)
            {
                s.spares[i] = None;
                any = true;
                s.stats.spares -= 1;
                s.stats.spare_bytes -= sp.size;
                // SAFETY: a spare is a live reservation of `inner`, released by the
                // consumer, so all of it is decommitted for the consumer; the caller
                // holds the lock.
                unsafe { self.give_back_locked(s, out, sp.base, sp.size) };
            }
        }
        any
    }

    /// Gives back the kept pages of `[base, base + size)`, then releases the
    /// reservation to the source.
    ///
    /// # Safety
    ///
    /// The caller must hold the lock; `base` and `size` are exactly a live reservation
    /// of `inner`, every page of it decommitted for the consumer (kept or decommitted
    /// in `inner`), and nothing uses it again.
    pub(super) unsafe fn give_back_locked(
        &self,
        s: &mut State,
        out: &mut Decommits<'_, P>,
        base: NonNull<u8>,
        size: usize,
    ) {
        let page = self.page.get();
        let start = base.addr().get();
        let mut k = 0;
        while k < size {
            // SAFETY: the caller holds the lock.
            if let Some(i) = unsafe { self.find(start + k) } {
                // SAFETY: as above; then a kept page out of the table, given back to
                // `inner` so that its release contract holds.
                unsafe {
                    self.remove(s, i);
                    out.push(base.add(k), page);
                }
                s.stats.purged += page;
            }
            k += page;
        }
        // The decommits reach `inner` before the release.
        out.flush();
        // SAFETY: the caller passes a live reservation with everything decommitted (for
        // the consumer); the pages kept inside it were just decommitted in `inner`.
        unsafe { self.inner.release(base, size) }
    }
}
