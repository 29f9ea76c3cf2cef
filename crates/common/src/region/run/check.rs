//! What a class region's runs are checked by: the probe of a free without a layout
//! ([`Runs::probe`], in O(1)) and the walk behind `validate` ([`Runs::validate`]),
//! which recomputes every count from the runs' lists and headers.

use core::ptr::NonNull;

use bento_pages::{Misuse, PageSource};

use crate::region::run::{EMPTY, FIRST, FREED, FULL, IDLE, PARTIAL, RUN, Run, Runs, Span, run_of};

/// What [`Runs::validate`] recomputed.
pub(crate) struct RunWalk {
    /// Blocks out.
    pub(crate) used: usize,
    /// Blocks on the runs' free lists.
    pub(crate) listed: usize,
    /// Runs in use.
    pub(crate) runs: usize,
    /// Spans.
    pub(crate) spans: usize,
}

impl Runs {
    /// Checks a pointer about to be freed: in a run in use, at a block's start below
    /// the carved end, and not on its run's free list.
    ///
    /// # Safety
    ///
    /// The region map gives `ptr`'s granule to this region, whose lock is held: its
    /// span is live, with its header committed.
    pub(crate) unsafe fn probe(&self, ptr: NonNull<u8>) -> Result<(), Misuse<'static>> {
        let p = self.adopt(ptr.as_ptr());
        let run = run_of(p);
        // SAFETY: the caller's contract: the run lies in a live span of this region,
        // whose memory reads (an idle run's header reads `IDLE`, whether its pages
        // were given back, reading zero, or kept).
        if unsafe { (*run).list } == IDLE {
            // Its run was given back: the block was freed (with its run) before.
            return Err(Misuse::DoubleFree { ptr });
        }
        // SAFETY: a run in use: its header is valid.
        let bump = unsafe { (*run).bump };
        let first = run.cast::<u8>().wrapping_add(FIRST);
        if p.addr() < first.addr()
            || p.addr() >= bump.addr()
            || !(p.addr() - first.addr()).is_multiple_of(self.stride)
        {
            return Err(Misuse::Interior { ptr, block: None });
        }
        // SAFETY: a carved block of at least 16 bytes.
        let marked = unsafe { p.cast::<usize>().add(1).read() } == FREED;
        // SAFETY: as above.
        if marked && unsafe { Self::listed(run) }.any(|b| b == p) {
            return Err(Misuse::DoubleFree { ptr });
        }
        Ok(())
    }

    /// The blocks on `run`'s free list.
    ///
    /// # Safety
    ///
    /// `run` is a run in use; the iterator is dropped before it changes.
    unsafe fn listed(run: *mut Run) -> impl Iterator<Item = *mut u8> {
        // SAFETY: the caller's contract.
        let (mut p, n) = unsafe { ((*run).free, (*run).listed) };
        (0..n).map_while(move |_| {
            let b = NonNull::new(p)?;
            // SAFETY: a listed block holds its link in its first word.
            p = unsafe { b.cast::<*mut u8>().read() };
            Some(b.as_ptr())
        })
    }

    /// Walks every span and run: headers, lists and free lists against each other
    /// and the stats, each free block owned by this region (`owned`). Returns what
    /// it counted, or the address where it went wrong.
    pub(crate) fn validate(
        &self,
        pages: &impl PageSource,
        owned: impl Fn(usize) -> bool,
    ) -> Result<RunWalk, usize> {
        let mut walk = RunWalk {
            used: 0,
            listed: 0,
            runs: 0,
            spans: 0,
        };
        let head = Self::head(pages);
        let (mut committed, mut reserved) = (0, 0);
        let mut on_lists = [0usize; 4];
        for (list, open) in [(&self.open, true), (&self.closed, false)] {
            for span in list.iter() {
                let base = Span::base(span);
                // SAFETY: a live span of this region: its header is valid.
                let (idle, is_open, runs) =
                    unsafe { ((*span).idle, (*span).open, usize::from((*span).runs)) };
                if !(1..=self.max_runs).contains(&runs)
                    || is_open != open
                    || (idle == 0) == open
                    || idle & !Span::all_idle(runs) != 0
                    || !owned(base.addr())
                {
                    return Err(span.addr());
                }
                walk.spans += 1;
                committed += head;
                reserved += runs * RUN;
                for index in (0..runs).filter(|i| idle & (1 << i) == 0) {
                    let run = base.wrapping_add(index * RUN).cast::<Run>();
                    committed += Self::body(index, head).1;
                    // SAFETY: a run in use: its header is valid.
                    if unsafe { (*run).span } != span {
                        return Err(run.addr());
                    }
                    // SAFETY: as above.
                    let used = unsafe { self.check_run(run, &owned) }?;
                    walk.runs += 1;
                    walk.used += used.0;
                    walk.listed += used.1;
                    // SAFETY: as above.
                    on_lists[usize::from(unsafe { (*run).list })] += 1;
                }
            }
        }
        let lists = [&self.partial, &self.full, &self.empty];
        let kinds = [PARTIAL, FULL, EMPTY];
        for (list, kind) in lists.into_iter().zip(kinds) {
            let want = on_lists[usize::from(kind)];
            let kinds = list.iter().filter(|&r| {
                // SAFETY: runs on a list are in use (the walk above found `want`
                // of this kind among the runs in use).
                unsafe { (*r).list == kind }
            });
            if kinds.count() != want || list.len != want {
                return Err(list.head.addr());
            }
        }
        if walk.used != self.used
            || committed != self.committed
            || reserved != self.reserved
            || self.open.iter().count() != self.open.len
            || self.closed.iter().count() != self.closed.len
        {
            return Err(0);
        }
        Ok(walk)
    }

    /// Checks one run in use; returns its blocks out and listed.
    ///
    /// # Safety
    ///
    /// `run` is a run in use of these spans.
    unsafe fn check_run(
        &self,
        run: *mut Run,
        owned: &impl Fn(usize) -> bool,
    ) -> Result<(usize, usize), usize> {
        let first = run.cast::<u8>().wrapping_add(FIRST);
        // SAFETY: the caller's contract.
        let r = unsafe { &*run };
        let carved_bytes = r.bump.addr().wrapping_sub(first.addr());
        let whole = (RUN - FIRST) / self.stride * self.stride;
        if r.stride as usize != self.stride
            || r.end.addr() != first.addr() + whole
            || carved_bytes > whole
            || !carved_bytes.is_multiple_of(self.stride)
            || !(PARTIAL..=EMPTY).contains(&r.list)
        {
            return Err(run.addr());
        }
        let carved = carved_bytes / self.stride;
        let mut listed = 0;
        // SAFETY: the run is in use.
        for b in unsafe { Self::listed(run) } {
            let off = b.addr().wrapping_sub(first.addr());
            if off >= carved_bytes || !off.is_multiple_of(self.stride) || !owned(b.addr()) {
                return Err(b.addr());
            }
            // SAFETY: `b` is a carved block of the run (checked above), of 16 bytes
            // or more.
            if unsafe { b.cast::<usize>().add(1).read() } != FREED {
                return Err(b.addr());
            }
            listed += 1;
        }
        let full = r.free.is_null() && r.bump == r.end;
        let fits = match r.list {
            PARTIAL => !full,
            FULL => full,
            _ => r.used == 0 && carved == 0,
        };
        if listed != r.listed as usize || listed + r.used as usize != carved || !fits {
            return Err(run.addr());
        }
        Ok((r.used as usize, listed))
    }
}
