//! The commit cache as a [`PageSource`]: a reserve served from the spares, a
//! release kept as one, a commit of kept pages without a call to the source (and,
//! when the source refuses, the kept pages given up first), a decommit kept.

use core::ptr::NonNull;

use bento_align::Alignment;

use super::{CommitCache, Decommits, EAGER_SPARES, EVICT_BATCH, LEND_FACTOR, SPARES, Spare, State};
use crate::{PageError, PageSource, check_range};

// SAFETY: reservations, releases and page contents are `inner`'s; the cache only delays
// decommits, so a committed range is always committed in `inner`. A kept page keeps
// its contents, hence `decommitted_reads_zero` is false. Nothing allocates.
unsafe impl<P: PageSource> PageSource for CommitCache<P> {
    fn page_size(&self) -> usize {
        self.page.get()
    }

    fn reserve(&self, size: usize, align: Alignment) -> Result<NonNull<u8>, PageError> {
        if self.slots > 0 {
            let align = align.get().max(self.page.get());
            let spare = self.locked(|s, out| {
                self.poll(s, out);
                let fits = |sp: &Spare| sp.base.addr().get().is_multiple_of(align);
                let spares = || (0..SPARES).filter_map(|i| Some((i, s.spares[i]?)));
                // The latest released of the size: its pages are likeliest kept.
                let exact = spares()
                    .filter(|(_, sp)| sp.size == size && fits(sp))
                    .max_by_key(|(_, sp)| sp.released)
                    .map(|(i, _)| i);
                // Under a decay, a spare up to a quarter larger serves too: the
                // consumer holds its first `size` bytes, the cache remembers the rest.
                let lent = s.lent.iter().position(Option::is_none);
                let i = exact.or_else(|| {
                    let _ = lent.filter(|_| !s.retention.is_eager())?;
                    let most = size.saturating_mul(LEND_FACTOR);
                    spares()
                        .filter(|(_, sp)| sp.size > size && sp.size <= most && fits(sp))
                        .min_by_key(|(_, sp)| (sp.size, u64::MAX - sp.released))
                        .map(|(i, _)| i)
                })?;
                let sp = s.spares[i].take()?;
                s.stats.spares -= 1;
                s.stats.spare_bytes -= sp.size;
                s.stats.reuses += 1;
                if sp.size != size
                    && let Some(slot) = lent
                {
                    s.lent[slot] = Some((sp.base, sp.size));
                }
                Some(sp.base)
            });
            if let Some(base) = spare {
                return Ok(base);
            }
        }
        // Under a decay a large reservation is rounded up to a size class (two per
        // octave), so that once released it serves the next one of its class or a
        // little smaller: the consumer holds its first `size` bytes.
        if let Some(class) = self.class_of(size)
            && let Ok(base) = self.inner.reserve(class, align)
        {
            let lent = self.locked(|s, _| {
                let slot = s.lent.iter_mut().find(|l| l.is_none())?;
                *slot = Some((base, class));
                Some(())
            });
            if lent.is_some() {
                return Ok(base);
            }
            // SAFETY: just reserved, nothing committed.
            unsafe { self.inner.release(base, class) };
        }
        match self.inner.reserve(size, align) {
            // The spares may hold what a source of fixed size (a `FixedPages` buffer)
            // needs: give them back and ask once more.
            Err(e) => {
                if self.release_spares(|_| true) {
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
        self.locked(|s, out| {
            self.poll(s, out);
            // A spare lent for a smaller reserve comes back whole.
            let size = match s
                .lent
                .iter_mut()
                .find(|l| l.is_some_and(|(b, _)| b == base))
            {
                Some(slot) => slot.take().map_or(size, |(_, real)| real),
                None => size,
            };
            // Keep it whole, with its kept pages, for the next reserve of its size.
            let room = if s.retention.is_eager() {
                EAGER_SPARES
            } else {
                SPARES
            };
            if size <= s.stats.capacity
                && let Some(free) = s.spares[..room].iter_mut().find(|sp| sp.is_none())
            {
                *free = Some(Spare {
                    base,
                    size,
                    generation: s.young,
                    released: s.releases,
                });
                s.last_kept = s.seen;
                s.releases += 1;
                s.stats.spares += 1;
                s.stats.spare_bytes += size;
                return;
            }
            // SAFETY: the caller passes a live reservation with everything decommitted
            // for the consumer; the lock is held.
            unsafe { self.give_back_locked(s, out, base, size) };
        });
    }

    unsafe fn commit(&self, ptr: NonNull<u8>, size: usize) -> Result<(), PageError> {
        check_range(ptr, size, self.page.get())?;
        if self.slots == 0 {
            // SAFETY: the caller upholds `commit`'s contract.
            return unsafe { self.inner.commit(ptr, size) };
        }
        let page = self.page.get();
        let pages = size >> self.page.log2();
        self.locked(|s, out| {
            if !s.retention.is_eager() {
                // Make room under the cap before the source commits anything, so that
                // what it holds never goes over, even for a moment; the range's own
                // kept pages stay for the hits below.
                let mut kept_here = 0;
                for k in 0..pages {
                    // SAFETY: the lock is held; `k < pages`.
                    if unsafe { self.find(ptr.addr().get() + k * page) }.is_some() {
                        kept_here += page;
                    }
                }
                let committed = s.stats.committed + size;
                let limit = self.limit_for(s, committed, s.stats.peak.max(committed));
                if s.stats.parked - kept_here > limit {
                    let target =
                        (limit + kept_here).saturating_sub(EVICT_BATCH << self.page.log2());
                    let keep = (ptr.addr().get(), ptr.addr().get() + size);
                    // SAFETY: the lock is held.
                    unsafe { self.evict(s, out, target, keep) };
                    out.flush();
                }
            }
            // Commits pages `[from, to)` of the range through `inner`; when the source
            // refuses, gives every other kept page back (fixed memory: what the cache
            // holds must not make a commit fail) and asks once more; on failure keeps
            // pages `[0, from)`, already committed, in the cache again.
            let commit_run = |s: &mut State, out: &mut Decommits<'_, P>, from: usize, to: usize| {
                // SAFETY: a sub-range of the caller's range, whose pages are neither
                // committed nor kept.
                let run = unsafe { ptr.add(from * page) };
                let bytes = (to - from) * page;
                // SAFETY: the caller upholds `commit`'s contract for the whole range.
                let mut result = unsafe { self.inner.commit(run, bytes) };
                if result.is_err() && s.stats.parked > 0 {
                    let before = s.stats.purged;
                    let keep = (ptr.addr().get(), ptr.addr().get() + size);
                    // SAFETY: the lock is held.
                    unsafe { self.evict(s, out, 0, keep) };
                    // The pages reach the source before it is asked again.
                    out.flush();
                    s.stats.given_up += s.stats.purged - before;
                    if s.stats.purged != before {
                        // SAFETY: as above; the range is still neither committed nor
                        // kept.
                        result = unsafe { self.inner.commit(run, bytes) };
                    }
                }
                if result.is_err() {
                    s.stats.refused += 1;
                    // SAFETY: pages `[0, from)` were committed (by `inner` or taken
                    // from the cache) in this call and are unused; the lock is held.
                    unsafe { self.park(s, out, ptr, from) };
                }
                result
            };
            let mut run: Option<usize> = None;
            for k in 0..pages {
                // SAFETY: `k < pages`, inside the caller's range.
                let p = unsafe { ptr.add(k * page) };
                // SAFETY: the lock is held.
                if let Some(mut i) = unsafe { self.find(p.addr().get()) } {
                    // Commit the pending run first: if it fails, this page stays kept.
                    if let Some(from) = run.take() {
                        commit_run(s, out, from, k)?;
                        // Pages it gave up to the source shifted the table: this one
                        // (kept, as the range's own) may sit elsewhere now.
                        // SAFETY: the lock is held.
                        match unsafe { self.find(p.addr().get()) } {
                            Some(j) => i = j,
                            // Never so (the range's pages stay); a page gone is
                            // committed like a miss.
                            None => {
                                s.stats.misses += 1;
                                run = Some(k);
                                continue;
                            }
                        }
                    }
                    // SAFETY: the lock is held and `i` holds the page.
                    unsafe { self.remove(s, i) };
                    s.stats.hits += 1;
                } else {
                    s.stats.misses += 1;
                    run.get_or_insert(k);
                }
            }
            if let Some(from) = run {
                commit_run(s, out, from, pages)?;
            }
            s.stats.committed += size;
            s.stats.peak = s.stats.peak.max(s.stats.committed);
            s.cycle_held = s.cycle_held.max(s.stats.committed + s.stats.parked);
            s.cycle_used = s.cycle_used.max(s.stats.committed);
            if !s.retention.is_eager() {
                // What is committed, in use and kept, stays within the cap.
                self.fit_growing(s, out);
            }
            Ok(())
        })
    }

    unsafe fn decommit(&self, ptr: NonNull<u8>, size: usize) {
        let pages = size >> self.page.log2();
        if self.slots == 0 {
            // SAFETY: the caller's contract.
            return unsafe { self.inner.decommit(ptr, size) };
        }
        self.locked(|s, out| {
            self.poll(s, out);
            s.stats.committed = s.stats.committed.saturating_sub(size);
            s.stats.limit = self.limit_of(s);
            // SAFETY: the caller's range, committed and unused; the lock is held.
            unsafe { self.park(s, out, ptr, pages) };
        });
    }

    fn commit_is_implicit(&self) -> bool {
        self.inner.commit_is_implicit()
    }

    fn decommitted_reads_zero(&self) -> bool {
        false
    }
}
