//! The bytes on the page: chunk tags, their flag bits, and the segment header.
//!
//! A chunk at address `c` (16-aligned) is laid out as in dlmalloc:
//!
//! ```text
//!  c + 0   prev_foot   the previous chunk's size when that chunk is free (its footer);
//!                      otherwise the last bytes of the previous chunk's payload
//!  c + 8   head        size | flags
//!  c + 16  payload     (in use) ... up to c + size + 8, over the next chunk's prev_foot
//!          fd, bk      (free) the links of its index list
//! ```
//!
//! So an in-use chunk costs one word (the head) and a free chunk carries its size at
//! both ends, which is what lets `free` merge with a free neighbour on either side.

use core::ptr::NonNull;

/// The flag bits in the low four bits of a chunk's head (sizes are multiples of 16).
/// Plain constants: the hot path masks and ors them into raw head words, which a
/// flags type would only wrap and unwrap.
pub(crate) mod flags {
    /// The chunk is handed out (or is a segment's end fence).
    pub(crate) const IN_USE: usize = 1;
    /// The chunk before this one is in use, so `prev_foot` holds no size. Always set
    /// on a segment's first chunk, so nothing before it is ever read.
    pub(crate) const PREV_IN_USE: usize = 2;
    /// The chunk is the only one of a dedicated segment; its `prev_foot` holds its
    /// offset from the segment's base. On an in-use chunk of any other segment it is
    /// [`CACHED`]. Never set on a free chunk, except as the validation walk's
    /// temporary mark.
    pub(crate) const DEDICATED: usize = 4;
    /// On an in-use chunk of an ordinary or base segment: the chunk is in the block
    /// cache. It shares `DEDICATED`'s bit, which such a chunk never carries otherwise,
    /// so a cached chunk is told from a block in use by its tag alone, without
    /// reading its payload (which may hold anything, initialised or not).
    pub(crate) const CACHED: usize = DEDICATED;
    /// The chunk lies in the caller's base segment (`with_base`), found through the
    /// space rather than by masking the address.
    pub(crate) const BASE: usize = 8;
}

/// The bits of a head that are flags.
pub(crate) const FLAG_MASK: usize = 15;
/// Chunk sizes and addresses are multiples of this; so is every payload.
pub(crate) const CHUNK_ALIGN: usize = 16;
/// The smallest chunk: head, two links and the footer the next chunk sees.
pub(crate) const MIN_CHUNK: usize = 32;
/// Where the payload starts in a chunk.
pub(crate) const PAYLOAD: usize = 16;
/// Bytes an in-use chunk costs beyond its payload (its head; the `prev_foot` word of
/// the next chunk is payload).
pub(crate) const IN_USE_OVERHEAD: usize = 8;
/// The end fence: a `prev_foot` word and a head that reads "in use, size 0".
pub(crate) const FENCE: usize = 16;
/// The largest segment, and so the largest chunk the index can hold (1 GiB on 32-bit
/// targets).
pub(crate) const MAX_SEGMENT: usize = if usize::BITS >= 64 {
    (1u64 << 38) as usize
} else {
    1 << 30
};

/// The header at the base of every segment. The first chunk follows it.
#[repr(C)]
pub(crate) struct Segment {
    /// The next and previous segment of the space's list (null at the ends).
    pub(crate) next: *mut Segment,
    pub(crate) prev: *mut Segment,
    /// Bytes of the reservation (for a base segment, of the caller's memory used).
    pub(crate) size: usize,
    /// Bytes committed from the base.
    pub(crate) committed: usize,
    // Invariant: the number of in-use chunks in this segment (the end fence does not
    // count). When a free brings it to 0 the segment is one free chunk and is released
    // in the same call (unless it is the base segment).
    pub(crate) live: usize,
    // Invariant: how many of the `live` chunks are in the space's block cache. In any
    // segment but the base segment, `cached < live` whenever `cached > 0`: the free
    // that would leave only cached chunks takes them out of the cache first.
    pub(crate) cached: usize,
    /// `Kind` as a number.
    pub(crate) kind: usize,
    /// Bytes from the base to the first chunk: `HEADER`, or more for a dedicated
    /// segment whose payload needed a stricter alignment.
    pub(crate) first: usize,
}

/// Bytes from a segment's base to its first chunk (a multiple of 16).
pub(crate) const HEADER: usize = size_of::<Segment>().next_multiple_of(CHUNK_ALIGN);
/// Bytes of an ordinary segment that are not chunks: the header and the end fence.
pub(crate) const SEGMENT_OVERHEAD: usize = HEADER + FENCE;

const _: () = assert!(HEADER.is_multiple_of(CHUNK_ALIGN) && HEADER <= 64);
const _: () = assert!(MIN_CHUNK >= PAYLOAD + 2 * size_of::<usize>());
const _: () = assert!(size_of::<usize>() <= 8, "two words fit a chunk's header");

/// What a segment is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// `segment_granularity` bytes aligned to it: found from a chunk by masking.
    Normal = 0,
    /// One chunk for one large (or strongly aligned) request.
    Dedicated = 1,
    /// The caller's memory (`with_base`), never released.
    Base = 2,
}

/// The chunk flag that says which kind of segment a chunk lies in.
#[inline]
pub(crate) const fn kind_flag(kind: Kind) -> usize {
    match kind {
        Kind::Normal => 0,
        Kind::Dedicated => flags::DEDICATED,
        Kind::Base => flags::BASE,
    }
}

/// The chunk size for a request of `size` bytes: payload plus the head, rounded to 16,
/// at least [`MIN_CHUNK`]. `None` when it would overflow.
#[inline]
pub(crate) const fn chunk_size_for(size: usize) -> Option<usize> {
    if size > MAX_SEGMENT {
        return None;
    }
    let c = (size + IN_USE_OVERHEAD + CHUNK_ALIGN - 1) & !(CHUNK_ALIGN - 1);
    Some(if c < MIN_CHUNK { MIN_CHUNK } else { c })
}

/// Raw access to the words of a chunk. Every function requires the chunk's words
/// named to lie in committed memory of one live segment.
pub(crate) mod raw {
    use super::{FLAG_MASK, NonNull, PAYLOAD};

    /// The chunk whose payload starts at `payload`.
    #[inline]
    pub(crate) fn chunk_of(payload: NonNull<u8>) -> NonNull<u8> {
        // A pointer below 16 is no block; keep it non-null (the checks then reject it).
        payload
            .map_addr(|a| core::num::NonZeroUsize::new(a.get().wrapping_sub(PAYLOAD)).unwrap_or(a))
    }

    /// The chunk of the block whose payload is `payload`.
    ///
    /// # Safety
    ///
    /// The caller must ensure `payload` is the payload of a chunk (its head and
    /// `prev_foot` lie in the same segment, before it).
    #[inline]
    pub(crate) unsafe fn block_chunk(payload: NonNull<u8>) -> NonNull<u8> {
        // SAFETY: the caller's contract: the chunk starts 16 bytes before, in the
        // segment the payload lies in.
        unsafe { payload.sub(PAYLOAD) }
    }

    /// The payload of chunk `c`.
    ///
    /// # Safety
    ///
    /// The caller must ensure `c` is a chunk of a segment (its payload lies in it).
    #[inline]
    pub(crate) unsafe fn payload(c: NonNull<u8>) -> NonNull<u8> {
        // SAFETY: the caller's contract: a chunk's payload starts 16 bytes in, in the
        // same segment.
        unsafe { c.add(PAYLOAD) }
    }

    /// # Safety
    ///
    /// The caller must ensure `c + 8 .. c + 16` is committed memory of a live segment.
    #[inline]
    pub(crate) unsafe fn head(c: NonNull<u8>) -> usize {
        // SAFETY: the caller's contract; chunks are 16-aligned so the word is aligned.
        unsafe { c.add(8).cast::<usize>().read() }
    }

    /// # Safety
    ///
    /// As for [`head`].
    #[inline]
    pub(crate) unsafe fn set_head(c: NonNull<u8>, value: usize) {
        // SAFETY: the caller's contract.
        unsafe { c.add(8).cast::<usize>().write(value) }
    }

    /// The size bits of a head.
    #[inline]
    pub(crate) const fn size(head: usize) -> usize {
        head & !FLAG_MASK
    }

    /// `prev_foot` of chunk `c`: the previous chunk's size when it is free.
    ///
    /// # Safety
    ///
    /// The caller must ensure `c .. c + 8` is committed memory of a live segment.
    #[inline]
    pub(crate) unsafe fn prev_foot(c: NonNull<u8>) -> usize {
        // SAFETY: the caller's contract.
        unsafe { c.cast::<usize>().read() }
    }

    /// # Safety
    ///
    /// As for [`prev_foot`].
    #[inline]
    pub(crate) unsafe fn set_prev_foot(c: NonNull<u8>, value: usize) {
        // SAFETY: the caller's contract.
        unsafe { c.cast::<usize>().write(value) }
    }

    /// Payload word `which` of chunk `c` as a pointer: the `fd` (0) or `bk` (1) link
    /// of a free chunk; the next (0) or previous (1) link of a cached one.
    ///
    /// # Safety
    ///
    /// The caller must ensure `c` is a free or cached chunk in committed memory and
    /// `which <= 1`.
    #[inline]
    pub(crate) unsafe fn link(c: NonNull<u8>, which: usize) -> *mut u8 {
        // SAFETY: the caller's contract; a chunk is at least 32 bytes.
        unsafe { c.add(PAYLOAD + 8 * which).cast::<*mut u8>().read() }
    }

    /// # Safety
    ///
    /// As for [`link`].
    #[inline]
    pub(crate) unsafe fn set_link(c: NonNull<u8>, which: usize, to: *mut u8) {
        // SAFETY: the caller's contract.
        unsafe { c.add(PAYLOAD + 8 * which).cast::<*mut u8>().write(to) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunk_sizes_round_up_and_keep_the_minimum() {
        assert_eq!(chunk_size_for(0), Some(MIN_CHUNK));
        assert_eq!(chunk_size_for(24), Some(32));
        assert_eq!(chunk_size_for(25), Some(48));
        assert_eq!(chunk_size_for(4096), Some(4112));
        assert_eq!(chunk_size_for(usize::MAX - 4), None);
        assert_eq!(chunk_size_for(MAX_SEGMENT + 1), None);
    }
}
