//! Committing and decommitting the pages of ordinary segments: the ranges a carve
//! needs, the ranges a free leaves inside a chunk's interior, and the runs an empty
//! segment still holds when it is given back.

use core::ptr::NonNull;

use crate::chunk::flags::IN_USE;
use crate::chunk::{Kind, Segment, raw};
use crate::engine::{Core, PageOps};

impl Core {
    /// Commits the addresses `[lo, hi)` of ordinary segment `seg` and counts them.
    ///
    /// # Safety
    ///
    /// As for [`PageOps::commit`], with `lo < hi` addresses in `seg`.
    #[cold]
    #[inline(never)]
    pub(super) unsafe fn commit_range(
        &mut self,
        pages: &impl PageOps,
        seg: *mut Segment,
        lo: usize,
        hi: usize,
    ) -> bool {
        debug_assert!(
            lo < hi && (lo | hi) & self.page_mask == 0,
            "commit [{lo:#x}, {hi:#x})"
        );
        let len = hi - lo;
        // SAFETY: `[lo, hi)` lies in `seg` (the caller's contract), so the offset
        // keeps the pointer inside the segment's provenance.
        let ptr = unsafe {
            NonNull::new_unchecked(seg)
                .cast::<u8>()
                .add(lo - seg.addr())
        };
        // SAFETY: the caller's contract.
        if !unsafe { pages.commit(ptr, len) } {
            return false;
        }
        // SAFETY: `seg` is a live segment header.
        unsafe { (*seg).committed += len };
        let c = &mut self.counters;
        c.committed += len;
        c.max_committed = c.max_committed.max(c.committed);
        true
    }

    /// Decommits the addresses `[lo, hi)` of ordinary segment `seg` and counts them.
    ///
    /// # Safety
    ///
    /// As for [`PageOps::decommit`], with `lo < hi` addresses in `seg`.
    #[cold]
    #[inline(never)]
    pub(super) unsafe fn decommit_range(
        &mut self,
        pages: &impl PageOps,
        seg: *mut Segment,
        lo: usize,
        hi: usize,
    ) {
        debug_assert!(
            lo < hi && (lo | hi) & self.page_mask == 0,
            "decommit [{lo:#x}, {hi:#x})"
        );
        let len = hi - lo;
        // SAFETY: as in `commit_range`.
        unsafe {
            let ptr = NonNull::new_unchecked(seg)
                .cast::<u8>()
                .add(lo - seg.addr());
            pages.decommit(ptr, len);
            (*seg).committed -= len;
        }
        self.counters.committed -= len;
    }

    /// Calls `f` with each committed run of segment `seg` as offsets `[lo, hi)`: all
    /// of a dedicated or base segment; of an ordinary one, what lies outside every
    /// free chunk's interior. Walks the segment's chunks, never reading a run again
    /// once it has been given to `f` (which may decommit it).
    ///
    /// # Safety
    ///
    /// The caller must ensure `seg` is a live segment of this space (or one just
    /// unlinked by [`free_chunk`](Self::free_chunk)) with intact tags.
    pub(crate) unsafe fn committed_runs(
        &self,
        seg: NonNull<Segment>,
        mut f: impl FnMut(usize, usize),
    ) {
        // SAFETY: the caller's contract: the header and every chunk tag of the
        // segment are readable, and the walk stops at the end fence.
        unsafe {
            let Segment {
                size: seg_size,
                kind,
                first,
                ..
            } = *seg.as_ptr();
            if kind != Kind::Normal as usize {
                f(0, seg_size);
                return;
            }
            let base = seg.addr().get();
            let mut c = seg.cast::<u8>().add(first);
            let mut from = 0;
            loop {
                let head = raw::head(c);
                let size = raw::size(head);
                if size == 0 {
                    break;
                }
                if head & IN_USE == 0 {
                    let (lo, hi) = self.interior(c.addr().get(), size);
                    if lo < hi {
                        if from < lo - base {
                            f(from, lo - base);
                        }
                        from = hi - base;
                    }
                }
                c = c.add(size);
            }
            if from < seg_size {
                f(from, seg_size);
            }
        }
    }
}
