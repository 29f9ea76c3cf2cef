//! The allocator logic that does not depend on the page source: carving chunks out of
//! the index, freeing and merging them, resizing in place, and the figures.

use core::ptr::{self, NonNull};

use crate::chunk::{
    CHUNK_ALIGN, FENCE, FLAG_MASK, Flags, HEADER, IN_USE_OVERHEAD, Kind, MIN_CHUNK, PAYLOAD,
    Segment, chunk_size_for, kind_flag, raw,
};
use crate::index::Index;
use crate::{Misuse, MisuseHook, SpaceStats};

const IN_USE: usize = Flags::IN_USE.bits();
const PREV_IN_USE: usize = Flags::PREV_IN_USE.bits();
const DEDICATED: usize = Flags::DEDICATED.bits();
const BASE: usize = Flags::BASE.bits();
/// The flags that name a chunk's segment kind.
const KIND_MASK: usize = DEDICATED | BASE;

/// The space's figures, kept on the hot path.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Counters {
    pub(crate) reserved: usize,
    pub(crate) max_reserved: usize,
    pub(crate) committed: usize,
    pub(crate) max_committed: usize,
    pub(crate) live_bytes: usize,
    pub(crate) live_blocks: usize,
    pub(crate) segments: usize,
}

/// What a free leaves to the page-source side to do.
pub(crate) enum Freed {
    /// Nothing: the chunk went back to the index.
    Kept,
    /// The segment is empty and out of the space's list: decommit and release it.
    Release(NonNull<Segment>),
}

/// The page-source-independent state of a memory space.
pub(crate) struct Core {
    pub(crate) index: Index,
    // Invariant: null or the first of a doubly linked list (`next`/`prev`) of the
    // headers of every live segment of this space, each at its segment's base.
    pub(crate) segments: *mut Segment,
    // Invariant: null or the base segment's header (also in `segments`).
    pub(crate) base: *mut Segment,
    pub(crate) counters: Counters,
    /// `segment_granularity - 1`: masks a chunk address of an ordinary segment down to
    /// its header.
    pub(crate) granularity_mask: usize,
    /// The largest chunk an ordinary segment holds.
    pub(crate) max_chunk: usize,
    pub(crate) threshold: usize,
    pub(crate) hook: MisuseHook,
}

impl Core {
    pub(crate) const fn new(granularity: usize, threshold: usize, hook: MisuseHook) -> Self {
        Self {
            index: Index::new(),
            segments: ptr::null_mut(),
            base: ptr::null_mut(),
            counters: Counters {
                reserved: 0,
                max_reserved: 0,
                committed: 0,
                max_committed: 0,
                live_bytes: 0,
                live_blocks: 0,
                segments: 0,
            },
            granularity_mask: granularity - 1,
            max_chunk: granularity - HEADER - FENCE,
            threshold,
            hook,
        }
    }

    /// Whether a request of `size` bytes needing a chunk of `need` bytes goes to a
    /// dedicated segment.
    #[inline]
    pub(crate) fn wants_dedicated(&self, size: usize, need: usize) -> bool {
        size >= self.threshold || need > self.max_chunk
    }

    /// Takes a chunk of at least `need` bytes from the index.
    #[inline]
    pub(crate) fn take(&mut self, need: usize) -> Option<(NonNull<u8>, usize)> {
        // SAFETY: the index's invariants hold between calls.
        unsafe { self.index.take(need) }
    }

    /// Hands out `csize` bytes of the free chunk `c` of `found` bytes (out of the
    /// index): splits off the rest as a free chunk when it is big enough, marks the
    /// chunk in use, counts it. Returns the payload.
    ///
    /// # Safety
    ///
    /// The caller must ensure `c` is a free chunk of `found >= csize` bytes with its
    /// head written, in no list, in a live segment, and `csize` a chunk size.
    #[inline]
    pub(crate) unsafe fn carve(
        &mut self,
        c: NonNull<u8>,
        found: usize,
        csize: usize,
    ) -> NonNull<u8> {
        debug_assert!(
            found >= csize && csize >= MIN_CHUNK,
            "carving {csize} from {found}"
        );
        // SAFETY: `c` is a free chunk of `found` bytes in a live segment (the caller's
        // contract): its head, the next chunk's head and, for a split, the words of
        // the remainder lie inside the segment.
        unsafe {
            let head = raw::head(c);
            let keep = head & (PREV_IN_USE | KIND_MASK);
            let rest = found - csize;
            let size = if rest >= MIN_CHUNK {
                let r = c.add(csize);
                raw::set_head(r, rest | PREV_IN_USE | (head & KIND_MASK));
                raw::set_prev_foot(r.add(rest), rest);
                self.index.insert(r, rest);
                csize
            } else {
                let next = c.add(found);
                raw::set_head(next, raw::head(next) | PREV_IN_USE);
                found
            };
            raw::set_head(c, size | IN_USE | keep);
            (*self.segment_of(c, keep)).live += 1;
            self.counters.live_bytes += size - IN_USE_OVERHEAD;
            self.counters.live_blocks += 1;
            raw::payload(c)
        }
    }

    /// Hands out a block of chunk size `csize` whose payload `p` has `p + offset`
    /// aligned to `align`, from the free chunk `c` of `found` bytes (out of the index),
    /// splitting off a free leading chunk when the payload does not start at `c`.
    ///
    /// # Safety
    ///
    /// As for [`carve`](Self::carve), with `found >= csize + align + MIN_CHUNK`,
    /// `align > 16` a power of two and `offset` a multiple of 16.
    pub(crate) unsafe fn carve_aligned(
        &mut self,
        c: NonNull<u8>,
        found: usize,
        csize: usize,
        align: usize,
        offset: usize,
    ) -> NonNull<u8> {
        let p0 = raw::payload(c).addr().get();
        let mut p = (p0 + offset).next_multiple_of(align) - offset;
        if p != p0 && p - p0 < MIN_CHUNK {
            p += align;
        }
        let lead = p - p0;
        debug_assert!(lead.is_multiple_of(CHUNK_ALIGN) && found >= lead + csize);
        if lead == 0 {
            // SAFETY: the caller's contract.
            return unsafe { self.carve(c, found, csize) };
        }
        // SAFETY: `c` is a free chunk of `found > lead + csize` bytes (the caller's
        // contract), so the leading chunk, its footer and the new chunk's head are
        // inside it.
        unsafe {
            let head = raw::head(c);
            let kind = head & KIND_MASK;
            let c2 = c.add(lead);
            raw::set_head(c, lead | (head & (PREV_IN_USE | KIND_MASK)));
            raw::set_prev_foot(c2, lead);
            self.index.insert(c, lead);
            raw::set_head(c2, (found - lead) | kind);
            self.carve(c2, found - lead, csize)
        }
    }

    /// The header of the segment chunk `c` lies in, from the kind bits of its head.
    ///
    /// # Safety
    ///
    /// The caller must ensure `c` is a chunk (in use, or free with its head written)
    /// of a live segment of this space and `kind` its head's kind bits.
    #[inline]
    pub(crate) unsafe fn segment_of(&self, c: NonNull<u8>, kind: usize) -> *mut Segment {
        if kind & BASE != 0 {
            self.base
        } else if kind & DEDICATED != 0 {
            // SAFETY: a dedicated chunk's `prev_foot` holds its offset from its
            // segment's base (written by the caller of `install_dedicated`).
            unsafe { c.sub(raw::prev_foot(c)).cast::<Segment>().as_ptr() }
        } else {
            c.as_ptr().map_addr(|a| a & !self.granularity_mask).cast()
        }
    }

    /// Frees the in-use chunk `c`: merges it with free neighbours and puts the result
    /// in the index, or, when that empties the segment, unlinks the segment for the
    /// caller to release.
    ///
    /// # Safety
    ///
    /// The caller must ensure `c` is an in-use chunk of a live segment of this space.
    #[inline]
    pub(crate) unsafe fn free_chunk(&mut self, c: NonNull<u8>) -> Freed {
        // SAFETY: `c` is an in-use chunk (the caller's contract); its neighbours are
        // chunks of the same segment (the first chunk has PREV_IN_USE, the last is
        // followed by the end fence), so every word read or written below lies in
        // the segment.
        unsafe {
            let head = raw::head(c);
            debug_assert!(
                head & IN_USE != 0,
                "freeing chunk {c:p}, which is not in use"
            );
            let size = raw::size(head);
            let kind = head & KIND_MASK;
            self.counters.live_bytes -= size - IN_USE_OVERHEAD;
            self.counters.live_blocks -= 1;
            let seg = self.segment_of(c, kind);
            (*seg).live -= 1;
            if kind & DEDICATED != 0 {
                return self.unlink_segment(seg);
            }
            let mut start = c;
            let mut total = size;
            if head & PREV_IN_USE == 0 {
                let prev_size = raw::prev_foot(c);
                start = c.sub(prev_size);
                self.index.remove(start, prev_size);
                total += prev_size;
                if cfg!(debug_assertions) {
                    // A second free of `c` then reads "not in use" (see `check_free`).
                    raw::set_head(c, 0);
                }
            }
            let next = c.add(size);
            let next_head = raw::head(next);
            if next_head & IN_USE == 0 {
                let next_size = raw::size(next_head);
                self.index.remove(next, next_size);
                total += next_size;
            } else {
                raw::set_head(next, next_head & !PREV_IN_USE);
            }
            if (*seg).live == 0 && kind & BASE == 0 {
                debug_assert_eq!(
                    (start.as_ptr(), total),
                    (seg.cast::<u8>().add(HEADER), (*seg).size - HEADER - FENCE),
                    "segment {seg:p} is empty but its chunks did not merge into one"
                );
                return self.unlink_segment(seg);
            }
            raw::set_head(start, total | PREV_IN_USE | kind);
            raw::set_prev_foot(start.add(total), total);
            self.index.insert(start, total);
            Freed::Kept
        }
    }

    /// Takes `seg` out of the segment list and its bytes out of the figures.
    ///
    /// # Safety
    ///
    /// The caller must ensure `seg` is a live, non-base segment of this space, empty
    /// (no chunk of it in use or in the index), and release it before anything else
    /// touches the space.
    #[cold]
    unsafe fn unlink_segment(&mut self, seg: *mut Segment) -> Freed {
        // SAFETY: `seg` and its list neighbours are live segment headers (the list's
        // invariant).
        unsafe {
            let (next, prev) = ((*seg).next, (*seg).prev);
            if let Some(next) = next.as_mut() {
                next.prev = prev;
            }
            match prev.as_mut() {
                Some(prev) => prev.next = next,
                None => self.segments = next,
            }
            self.counters.reserved -= (*seg).size;
            self.counters.committed -= (*seg).committed;
            self.counters.segments -= 1;
            Freed::Release(NonNull::new_unchecked(seg))
        }
    }

    /// Writes a segment header at `base` for `size` reserved bytes, all committed,
    /// and links it into the list.
    ///
    /// # Safety
    ///
    /// The caller must ensure `base` is the 16-aligned start of `size` committed,
    /// writable bytes that belong to this space from now on, with
    /// `size >= HEADER + MIN_CHUNK + FENCE`.
    pub(crate) unsafe fn link_segment(
        &mut self,
        base: NonNull<u8>,
        size: usize,
        kind: Kind,
    ) -> NonNull<Segment> {
        let seg = base.cast::<Segment>();
        // SAFETY: the caller's contract: the header fits and is ours to write; the old
        // list head is a live segment header.
        unsafe {
            seg.write(Segment {
                next: self.segments,
                prev: ptr::null_mut(),
                size,
                committed: size,
                live: 0,
                kind: kind as usize,
                first: HEADER,
            });
            if let Some(old) = self.segments.as_mut() {
                old.prev = seg.as_ptr();
            }
        }
        self.segments = seg.as_ptr();
        let c = &mut self.counters;
        c.reserved += size;
        c.max_reserved = c.max_reserved.max(c.reserved);
        c.committed += size;
        c.max_committed = c.max_committed.max(c.committed);
        c.segments += 1;
        seg
    }

    /// Makes the chunk area of a freshly linked segment one free chunk followed by the
    /// end fence, and returns that chunk (in no list) with its size.
    ///
    /// # Safety
    ///
    /// The caller must ensure `seg` was just linked by `link_segment` with a size of
    /// at least `HEADER + MIN_CHUNK + FENCE`, a multiple of 16.
    pub(crate) unsafe fn init_area(&mut self, seg: NonNull<Segment>) -> (NonNull<u8>, usize) {
        // SAFETY: the segment's bytes are committed and ours (the caller's contract).
        unsafe {
            let kind = match (*seg.as_ptr()).kind {
                k if k == Kind::Base as usize => kind_flag(Kind::Base),
                _ => kind_flag(Kind::Normal),
            };
            let size = (*seg.as_ptr()).size;
            let c = seg.cast::<u8>().add(HEADER);
            let area = size - HEADER - FENCE;
            raw::set_head(c, area | PREV_IN_USE | kind);
            let fence = c.add(area);
            raw::set_prev_foot(fence, area);
            raw::set_head(fence, IN_USE | kind);
            (c, area)
        }
    }

    /// Writes the one chunk of a freshly linked dedicated segment: it starts
    /// `chunk_offset` bytes into the segment and runs to the end fence. Returns the
    /// payload.
    ///
    /// # Safety
    ///
    /// The caller must ensure `seg` was just linked by `link_segment` with
    /// `Kind::Dedicated`, and that `chunk_offset >= HEADER` is a multiple of 16 with
    /// `chunk_offset + MIN_CHUNK + FENCE <= size`.
    pub(crate) unsafe fn install_dedicated(
        &mut self,
        seg: NonNull<Segment>,
        chunk_offset: usize,
    ) -> NonNull<u8> {
        // SAFETY: the segment's bytes are committed and ours (the caller's contract).
        unsafe {
            let size = (*seg.as_ptr()).size;
            let c = seg.cast::<u8>().add(chunk_offset);
            let csize = size - chunk_offset - FENCE;
            raw::set_prev_foot(c, chunk_offset);
            raw::set_head(c, csize | IN_USE | PREV_IN_USE | DEDICATED);
            raw::set_head(c.add(csize), IN_USE | PREV_IN_USE);
            (*seg.as_ptr()).live = 1;
            (*seg.as_ptr()).first = chunk_offset;
            self.counters.live_bytes += csize - IN_USE_OVERHEAD;
            self.counters.live_blocks += 1;
            raw::payload(c)
        }
    }

    /// Resizes in-use chunk `c` to hold `new_size` bytes without moving it: shrinks by
    /// splitting off a free tail, grows into a free successor. False when it cannot
    /// (nothing changes).
    ///
    /// # Safety
    ///
    /// The caller must ensure `c` is an in-use chunk of a live segment of this space.
    pub(crate) unsafe fn resize_in_place(&mut self, c: NonNull<u8>, new_size: usize) -> bool {
        let Some(want) = chunk_size_for(new_size) else {
            return false;
        };
        // SAFETY: `c` is an in-use chunk of a live segment (the caller's contract);
        // its successor is a chunk or the end fence of the same segment, and every
        // chunk written below lies inside `c` or that successor.
        unsafe {
            let head = raw::head(c);
            let size = raw::size(head);
            if head & DEDICATED != 0 {
                return want <= size;
            }
            let kind = head & KIND_MASK;
            let next = c.add(size);
            let next_head = raw::head(next);
            let next_free = next_head & IN_USE == 0;
            let room = if next_free {
                size + raw::size(next_head)
            } else {
                size
            };
            if want > room {
                return false;
            }
            if want > size || room - want >= MIN_CHUNK {
                // The chunk becomes `want` bytes (or all of `room`); the successor,
                // if free, is absorbed and what is left becomes a free tail.
                if next_free {
                    self.index.remove(next, room - size);
                }
                let rest = room - want;
                let new = if rest >= MIN_CHUNK {
                    let t = c.add(want);
                    raw::set_head(t, rest | PREV_IN_USE | kind);
                    raw::set_prev_foot(t.add(rest), rest);
                    if !next_free {
                        raw::set_head(next, next_head & !PREV_IN_USE);
                    }
                    self.index.insert(t, rest);
                    want
                } else {
                    let after = c.add(room);
                    raw::set_head(after, raw::head(after) | PREV_IN_USE);
                    room
                };
                raw::set_head(c, new | (head & FLAG_MASK));
                self.counters.live_bytes = self.counters.live_bytes + new - size;
            }
            true
        }
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

    /// The debug checks of a pointer given to `free`, `realloc` or `usable_size`:
    /// `Ok` when `payload` is an in-use block of this space, else what is wrong. Walks
    /// the segment list (O(segments)); reads no byte outside this space's segments.
    pub(crate) fn check_block(&self, payload: NonNull<u8>) -> Result<(), Misuse> {
        let c = raw::chunk_of(payload);
        let addr = c.addr().get();
        let mut seg = self.segments;
        // SAFETY: every header on the list is a live segment's (the list invariant).
        while let Some(s) = unsafe { seg.as_ref() } {
            let base = ptr::from_ref(s).addr();
            if addr >= base + s.first && addr < base + s.size - FENCE {
                // SAFETY: `c` is 16 bytes or more before the end fence of a live
                // segment, past its header: its words are committed memory.
                return unsafe { Self::check_chunk(s, base, c, payload) };
            }
            seg = s.next;
        }
        Err(Misuse::NotInSpace {
            ptr: payload.as_ptr(),
        })
    }

    /// # Safety
    ///
    /// `c` lies in the chunk area of segment `s` (at `base`), before its end fence.
    unsafe fn check_chunk(
        s: &Segment,
        base: usize,
        c: NonNull<u8>,
        payload: NonNull<u8>,
    ) -> Result<(), Misuse> {
        let ptr = payload.as_ptr();
        if !c.addr().get().is_multiple_of(CHUNK_ALIGN) {
            return Err(Misuse::NotABlock { ptr });
        }
        // SAFETY: the caller's contract.
        let head = unsafe { raw::head(c) };
        if head & IN_USE == 0 {
            return Err(Misuse::DoubleFree { ptr });
        }
        let size = raw::size(head);
        let end = c.addr().get().checked_add(size);
        let expected_kind = match s.kind {
            k if k == Kind::Dedicated as usize => DEDICATED,
            k if k == Kind::Base as usize => BASE,
            _ => 0,
        };
        if size < MIN_CHUNK
            || end.is_none_or(|end| end > base + s.size - FENCE)
            || head & KIND_MASK != expected_kind
        {
            return Err(Misuse::NotABlock { ptr });
        }
        // SAFETY: `c + size` is at most the end fence (checked), so its head is
        // committed memory of the segment; a dedicated chunk's `prev_foot` is its own.
        let plausible = unsafe {
            raw::head(c.add(size)) & PREV_IN_USE != 0
                && (expected_kind != DEDICATED || raw::prev_foot(c) == c.addr().get() - base)
        };
        if plausible {
            Ok(())
        } else {
            Err(Misuse::NotABlock { ptr })
        }
    }

    /// Reports `misuse` through the hook.
    #[cold]
    pub(crate) fn report(&self, misuse: &Misuse) {
        (self.hook)(misuse);
    }

    /// The figures, as counted.
    pub(crate) fn stats(&self) -> SpaceStats {
        let c = &self.counters;
        SpaceStats {
            reserved: c.reserved,
            max_reserved: c.max_reserved,
            committed: c.committed,
            max_committed: c.max_committed,
            live_bytes: c.live_bytes,
            live_blocks: c.live_blocks,
            free_bytes: self.index.bytes,
            segments: c.segments,
        }
    }
}

/// The offset of a dedicated chunk from its segment's base such that its payload `p`
/// has `p + offset` aligned to `align` (the base being aligned to `align`).
pub(crate) fn dedicated_chunk_offset(align: usize, offset: usize) -> Option<usize> {
    let payload = (HEADER + PAYLOAD)
        .checked_add(offset)?
        .checked_next_multiple_of(align)?
        - offset;
    Some(payload - PAYLOAD)
}
