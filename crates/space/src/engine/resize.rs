//! Resizing a block in place: growing into a free neighbour or the designated chunk,
//! shrinking and giving the tail back.

use core::ptr::NonNull;

use crate::chunk::flags::{DEDICATED, IN_USE, PREV_IN_USE};
use crate::chunk::{FLAG_MASK, IN_USE_OVERHEAD, MIN_CHUNK, chunk_size_for, raw};
use crate::engine::{Core, KIND_MASK, PageOps};

impl Core {
    /// Resizes in-use chunk `c` to hold `new_size` bytes without moving it: shrinks by
    /// splitting off a free tail (decommitting the pages it wholly covers), grows
    /// into a free successor (committing the pages it needs). False when it cannot,
    /// or when the page source refuses a commit (nothing changes). A dedicated block
    /// resizes in place only within its segment and by less than a source page.
    ///
    /// # Safety
    ///
    /// The caller must ensure `c` is an in-use chunk of a live segment of this space.
    pub(crate) unsafe fn resize_in_place(
        &mut self,
        pages: &impl PageOps,
        c: NonNull<u8>,
        new_size: usize,
    ) -> bool {
        let Some(want) = chunk_size_for(new_size) else {
            return false;
        };
        // SAFETY: `c` is an in-use chunk of a live segment (the caller's contract): its
        // head is readable.
        let head = unsafe { raw::head(c) };
        let size = raw::size(head);
        if head & DEDICATED != 0 {
            // A dedicated block keeps its segment while it fills it to within a page;
            // a real shrink must move, so that the segment goes back.
            return want <= size && size - want < self.source_page;
        }
        let kind = head & KIND_MASK;
        // SAFETY: the chunk after `c` is a chunk of the same segment or its end fence
        // (the fence follows the last chunk), its head committed.
        let (next, next_head) = unsafe {
            let next = c.add(size);
            (next, raw::head(next))
        };
        let next_free = next_head & IN_USE == 0;
        let room = if next_free {
            size + raw::size(next_head)
        } else {
            size
        };
        if want > room {
            return false;
        }
        if want <= size && room - want < MIN_CHUNK {
            return true;
        }
        // The chunk becomes `want` bytes (or all of `room`); the successor, if free,
        // is absorbed and what is left becomes a free tail.
        let rest = room - want;
        // SAFETY: as above, with `kind` its head's kind bits.
        let seg = unsafe { self.segment_of(c, kind) };
        // Decommitted now: the free successor's interior; after: the tail's.
        let none = (usize::MAX, usize::MAX);
        let (old, new) = if kind == 0 && self.may_span_page(room) {
            let at = c.addr().get();
            let old = if next_free {
                self.interior(at + size, room - size)
            } else {
                none
            };
            let new = if rest >= MIN_CHUNK {
                self.interior(at + want, rest)
            } else {
                none
            };
            (old, new)
        } else {
            (none, none)
        };
        let commit_to = old.1.min(new.0);
        // SAFETY: `[old.0, commit_to)` lies in the free successor's interior, in
        // `seg`, decommitted.
        if old.0 < commit_to && !unsafe { self.commit_range(pages, seg, old.0, commit_to) } {
            return false;
        }
        if next_free {
            // SAFETY: a free chunk is listed or designated.
            unsafe { self.unlist(next, room - size) };
        }
        let new_size = if rest >= MIN_CHUNK {
            // SAFETY: the tail `[c + want, c + room)` is at least a minimum chunk
            // inside `c` and its absorbed successor; its head and footer lie outside
            // its interior, on committed pages (the commit above covered the rest);
            // `[new.0, decommit_to)` is in its interior, committed, unused; it is in
            // no list until inserted here. The successor's head, when it stays, is
            // committed.
            unsafe {
                let t = c.add(want);
                raw::set_head(t, rest | PREV_IN_USE | kind);
                raw::set_prev_foot(t.add(rest), rest);
                if !next_free {
                    raw::set_head(next, next_head & !PREV_IN_USE);
                }
                let decommit_to = new.1.min(old.0);
                if new.0 < decommit_to {
                    self.decommit_range(pages, seg, new.0, decommit_to);
                }
                self.index.insert(t, rest);
            }
            want
        } else {
            // SAFETY: the chunk after the grown one is a chunk or the end fence of the
            // segment, its head committed.
            unsafe {
                let after = c.add(room);
                raw::set_head(after, raw::head(after) | PREV_IN_USE);
            }
            room
        };
        // SAFETY: `c`'s head, as read above.
        unsafe { raw::set_head(c, new_size | (head & FLAG_MASK)) };
        self.counters.live_bytes = self.counters.live_bytes + new_size - size;
        true
    }

    /// The payload bytes of in-use chunk `c`.
    ///
    /// # Safety
    ///
    /// The caller must ensure `c` is an in-use chunk of a live segment.
    #[inline]
    pub(crate) unsafe fn usable(c: NonNull<u8>) -> usize {
        // SAFETY: the caller's contract.
        raw::size(unsafe { raw::head(c) }) - IN_USE_OVERHEAD
    }
}
