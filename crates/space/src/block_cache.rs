//! The block cache: small chunks freed recently, kept whole for the next request of
//! their size class.
//!
//! A chunk freed into the cache keeps its `IN_USE` tag, so its neighbours do not
//! merge with it and nothing else in the space sees a change; only the stats call
//! it free. Its head gains the `CACHED` flag, which is how the walkers and the debug
//! checks tell a cached chunk from a block in use without reading a payload (a
//! block's bytes may be anything, uninitialised ones included). Its first payload
//! word links it to the next cached chunk of its class, its second to the previous
//! one: the lists are doubly linked, so a chunk leaves its list in O(1) from anywhere
//! in it.
//!
//! This is what glibc's tcache and mimalloc's per-page free lists do for speed: a
//! free and the allocation after it touch the chunk and the cache's slot, not the
//! neighbours and their lists. Two things keep the space's promises:
//! - each segment counts its cached chunks (`Segment::cached`), so the free that
//!   leaves a segment with no block in use is known at once; it walks that segment's
//!   chunks, takes each cached one out of its list (and each free one out of the
//!   index), and the segment goes back to the source in the same call, with no merge;
//! - the cache holds in all `SpaceConfig::block_cache` bytes or 1/128 of the space's
//!   bytes in use (at least [`FLOOR`], or half a segment in a space of at most two
//!   segments), whichever is less, counting each chunk as its class's smallest size. A class may take all of it: a burst of frees of one size
//!   is what the cache is for.
//!
//! Classes are the index's lists for chunks below [`LIMIT`] bytes, so a chunk is
//! cached under the list it would be filed in (`list_of`, rounding down) and a
//! request looks in the list whose every chunk fits (`list_at_least`, rounding up):
//! the same good fit as the index, no scan.

use core::ptr::{self, NonNull};

use crate::chunk::flags::CACHED;
use crate::chunk::raw;
use crate::index::{SL_COUNT, list_of, list_start};

/// Chunks of this many bytes and more are never cached.
pub(crate) const LIMIT: usize = 8192;
/// Classes: the index's lists below `LIMIT` (levels 0 to 5).
pub(crate) const CLASSES: usize = (list_of(LIMIT).0) * SL_COUNT;
/// The cache holds at most this share of the space's bytes in use (as a shift: 1/128),
/// so that a small heap does not keep a fixed megabyte of free blocks.
pub(crate) const SHARE_SHIFT: u32 = 7;
/// ... but always room for this many bytes (within `SpaceConfig::block_cache`).
pub(crate) const FLOOR: usize = 64 << 10;

const _: () = assert!(list_of(LIMIT).1 == 0, "LIMIT starts a first level");

/// The class chunks of `size` bytes are cached in, if any.
#[inline]
pub(crate) const fn class_of(size: usize) -> Option<usize> {
    if size >= LIMIT {
        return None;
    }
    let (fl, sl) = list_of(size);
    Some(fl * SL_COUNT + sl)
}

/// The smallest chunk size of each class, looked up rather than computed on the hot
/// path.
const CLASS_BYTES: [usize; CLASSES] = {
    let mut table = [0; CLASSES];
    let mut k = 0;
    while k < CLASSES {
        table[k] = list_start(k / SL_COUNT, k % SL_COUNT);
        k += 1;
    }
    table
};

/// The smallest chunk size of class `k`: what the cache counts a chunk of it as.
#[inline]
pub(crate) const fn class_bytes(k: usize) -> usize {
    CLASS_BYTES[k]
}

/// The class of the index's list `(fl, sl)`, if the cache has one.
#[inline]
pub(crate) const fn class_at(fl: usize, sl: usize) -> Option<usize> {
    let k = fl * SL_COUNT + sl;
    if k < CLASSES { Some(k) } else { None }
}

/// The cached chunks, one singly linked list per class.
pub(crate) struct Cache {
    // Invariant: null or the first of a doubly linked list (each chunk's first
    // payload word the next, its second the previous; null-terminated both ways) of
    // `counts[k]` chunks of a live ordinary or base segment, each tagged in use and
    // `CACHED`, counted in its segment's `cached`, of
    // at least `class_bytes(k)` bytes, in no other list. Cached chunks count as in
    // use in the space's counters.
    pub(crate) heads: [*mut u8; CLASSES],
    pub(crate) counts: [u32; CLASSES],
    // Invariant: the sum of `class_bytes(k)` over the cached chunks, at most `limit`.
    pub(crate) bytes: usize,
    /// `SpaceConfig::block_cache`.
    pub(crate) limit: usize,
    /// The least room the cache has, whatever the bytes in use: [`FLOOR`], or half a
    /// segment in a space of at most two segments (see [`Cache::fit`]).
    pub(crate) floor: usize,
    /// What the cache may hold: `limit`, or `live / 2^SHARE_SHIFT` (but at least
    /// `floor`), whichever is less, for the bytes in use `live` when it was last
    /// [`refit`](Cache::refit). Cached frees and allocations leave the bytes in use
    /// as they are (the counters hold cached chunks as in use), so only the space's
    /// other paths refit it, once a call.
    pub(crate) room: usize,
}

impl Cache {
    pub(crate) const fn new(limit: usize) -> Self {
        Self {
            heads: [ptr::null_mut(); CLASSES],
            counts: [0; CLASSES],
            bytes: 0,
            limit,
            floor: FLOOR,
            room: if limit < FLOOR { limit } else { FLOOR },
        }
    }

    /// Sets the floor for a space that now holds `reserved` bytes in segments of
    /// `granularity`: a small space (at most two segments, so its bytes in use are
    /// below the footprint target's concern) may keep half a segment of freed
    /// blocks, so that a frame of small blocks freed all at once goes into the
    /// cache whole, and leaves with its segment.
    #[inline]
    pub(crate) fn fit(&mut self, reserved: usize, granularity: usize) {
        self.floor = crate::config::cache_floor(reserved, granularity, FLOOR);
    }

    /// Sets the room for a space with `live` bytes in use: the cache holds in all
    /// `limit` bytes or `live / 2^SHARE_SHIFT` (but at least `floor`), whichever is
    /// less.
    #[inline]
    pub(crate) fn refit(&mut self, live: usize) {
        self.room = self.limit.min((live >> SHARE_SHIFT).max(self.floor));
    }

    /// Whether class `k` has room for one more chunk (see [`refit`](Self::refit)).
    #[inline]
    pub(crate) fn has_room(&self, k: usize) -> bool {
        self.bytes + class_bytes(k) <= self.room
    }

    /// How many chunks the cache holds.
    pub(crate) fn chunk_count(&self) -> usize {
        self.counts.iter().map(|&n| n as usize).sum()
    }

    /// Forgets every cached chunk at once: for the caller that releases the one
    /// segment they all lie in (their words are never read again).
    pub(crate) fn clear(&mut self) {
        self.heads = [ptr::null_mut(); CLASSES];
        self.counts = [0; CLASSES];
        self.bytes = 0;
    }

    /// Puts in-use chunk `c`, whose head is `head`, at the front of class `k`,
    /// writing its link words through `own` (see `Core::adopt`).
    ///
    /// # Safety
    ///
    /// The caller must ensure `c` is an in-use chunk of at least `class_bytes(k)`
    /// bytes of a live ordinary or base segment, not cached, its head `head`, whose
    /// segment counts it in `cached` once this returns, and `own` a pointer to it
    /// that may write its payload.
    #[inline]
    pub(crate) unsafe fn push(&mut self, k: usize, c: NonNull<u8>, own: NonNull<u8>, head: usize) {
        let first = self.heads[k];
        // SAFETY: `c` is at least a minimum chunk in use, so its head and first two
        // payload words are its own; `first`, when non-null, is a cached chunk.
        unsafe {
            raw::set_head(c, head | CACHED);
            raw::set_link(own, 0, first);
            raw::set_link(own, 1, ptr::null_mut());
            if let Some(first) = NonNull::new(first) {
                raw::set_link(first, 1, c.as_ptr());
            }
        }
        self.heads[k] = c.as_ptr();
        self.counts[k] += 1;
        self.bytes += class_bytes(k);
    }

    /// Takes the first chunk of class `k` out of the cache, if any; it is an in-use
    /// chunk again (its `CACHED` flag cleared), still counted in its segment's
    /// `cached`.
    #[inline]
    pub(crate) fn pop(&mut self, k: usize) -> Option<NonNull<u8>> {
        let c = NonNull::new(self.heads[k])?;
        // SAFETY: `c` heads class `k`, so it is a cached chunk (the invariant of
        // `heads`): its link words are readable and its successor is cached too.
        unsafe {
            let next = raw::link(c, 0);
            self.heads[k] = next;
            if let Some(next) = NonNull::new(next) {
                raw::set_link(next, 1, ptr::null_mut());
            }
            raw::set_head(c, raw::head(c) & !CACHED);
        }
        self.counts[k] -= 1;
        self.bytes -= class_bytes(k);
        Some(c)
    }

    /// Takes cached chunk `c` of class `k` out of its list, wherever it is in it.
    ///
    /// # Safety
    ///
    /// The caller must ensure `c` is a cached chunk of class `k`.
    pub(crate) unsafe fn unlink(&mut self, k: usize, c: NonNull<u8>) {
        // SAFETY: `c` is cached (the caller's contract), so its links are its list
        // neighbours, cached chunks themselves, or null.
        unsafe {
            let next = raw::link(c, 0);
            let prev = raw::link(c, 1);
            if let Some(next) = NonNull::new(next) {
                raw::set_link(next, 1, prev);
            }
            match NonNull::new(prev) {
                Some(prev) => raw::set_link(prev, 0, next),
                None => self.heads[k] = next,
            }
            raw::set_head(c, raw::head(c) & !CACHED);
        }
        self.counts[k] -= 1;
        self.bytes -= class_bytes(k);
    }

    /// The chunks of class `k`, first to last.
    pub(crate) fn class(&self, k: usize) -> impl Iterator<Item = NonNull<u8>> + '_ {
        let mut at = self.heads[k];
        core::iter::from_fn(move || {
            let p = NonNull::new(at)?;
            // SAFETY: `p` is a cached chunk (the list's invariant): its first payload
            // word is the link.
            at = unsafe { raw::link(p, 0) };
            Some(p)
        })
    }
}
