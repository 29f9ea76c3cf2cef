//! The allocator logic that does not depend on the page source, a file per operation:
//! [`alloc`] (carving chunks out of the index), [`free`] (freeing and merging them),
//! [`resize`] (in place), [`commit`] (the pages of ordinary segments) and [`probe`]
//! (checking a pointer a caller frees); here, the state they share and the stats.

mod alloc;
mod commit;
mod free;
mod probe;
mod resize;

use core::ptr::{self, NonNull};

use crate::block_cache::{self, Cache};
use crate::chunk::{FENCE, HEADER, IN_USE_OVERHEAD, Kind, MIN_CHUNK, PAYLOAD, Segment, raw};
use crate::index::Index;
use crate::stats::SpaceStats;
use crate::{Misuse, MisuseHook};

use crate::chunk::flags::{BASE, DEDICATED};
/// The flags that name a chunk's segment kind.
const KIND_MASK: usize = DEDICATED | BASE;

/// The space's stats, kept on the hot path.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Counters {
    pub(crate) reserved: usize,
    pub(crate) max_reserved: usize,
    pub(crate) committed: usize,
    pub(crate) max_committed: usize,
    pub(crate) live_bytes: usize,
    pub(crate) live_blocks: usize,
    pub(crate) segments: usize,
    /// Bytes of live segments outside their chunks: each one's header (up to its first
    /// chunk) and end fence. With the other stats it gives the free bytes, so the
    /// index keeps no count of its own on the hot path.
    pub(crate) overhead: usize,
}

impl Counters {
    /// Bytes in free chunks: what is reserved less the segments' overhead and the
    /// in-use chunks (each block's bytes and its head).
    pub(crate) const fn free_bytes(&self) -> usize {
        // Wrapping, so that `validate` reports counters that disagree rather than
        // overflowing.
        self.reserved
            .wrapping_sub(self.overhead)
            .wrapping_sub(self.live_bytes)
            .wrapping_sub(self.live_blocks.wrapping_mul(IN_USE_OVERHEAD))
    }
}

/// What a free leaves to the page-source side to do.
pub(crate) enum Freed {
    /// Nothing: the chunk went back to the index.
    Kept,
    /// The segment is empty and out of the space's list: decommit what `Left` says
    /// is still committed of it, and release it.
    Release(NonNull<Segment>, Left),
}

/// What an emptied segment still has committed, for its release to decommit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Left {
    /// Its committed runs outside its free chunk's interior (see
    /// [`Core::committed_runs`]), and the addresses `[lo, hi)` inside that interior
    /// (`lo >= hi`: none) which the free left committed rather than decommit them
    /// through the cache only to give them back at once.
    Runs {
        /// `(lo, hi)`.
        pending: (usize, usize),
    },
    /// Only its first `bytes` (the run holding its header, which the release still
    /// reads): the emptying walk gave the rest back as it went.
    HeadRun(usize),
}

impl Left {
    /// Its committed runs alone.
    pub(crate) const RUNS: Self = Self::Runs { pending: (0, 0) };
}

/// The page calls the core makes inside ordinary segments: the space implements it
/// over its page source.
pub(crate) trait PageOps {
    /// Gives back segment `seg`, which a free just unlinked from `core`, of which
    /// `left` is still committed (see [`Freed::Release`]).
    ///
    /// # Safety
    ///
    /// `seg` and `left` are a `Freed::Release` that `core` returned, not yet given
    /// back.
    unsafe fn release(&self, core: &Core, seg: NonNull<Segment>, left: Left);

    /// Commits `[ptr, ptr + len)`; false (nothing committed) when the source refuses.
    ///
    /// # Safety
    ///
    /// The range is page-aligned, inside a live ordinary segment, and decommitted.
    unsafe fn commit(&self, ptr: NonNull<u8>, len: usize) -> bool;

    /// Decommits `[ptr, ptr + len)`.
    ///
    /// # Safety
    ///
    /// The range is page-aligned, inside a live ordinary segment, committed, and
    /// holds nothing that is read before it is committed again.
    unsafe fn decommit(&self, ptr: NonNull<u8>, len: usize);
}

/// The page-source-independent state of a memory space.
pub(crate) struct Core {
    index: Index,
    cache: Cache,
    // Invariant: null or the first of a doubly linked list (`next`/`prev`) of the
    // headers of every live segment of this space, each at its segment's base.
    segments: *mut Segment,
    // Invariant: null or the base segment's header (also in `segments`).
    base: *mut Segment,
    /// The base segment's address and size (`(0, 0)` without one): what
    /// `segment_at` tests before masking.
    base_range: (usize, usize),
    counters: Counters,
    /// `segment_granularity - 1`: masks a chunk address of an ordinary segment down to
    /// its header.
    granularity_mask: usize,
    /// The largest chunk an ordinary segment holds.
    max_chunk: usize,
    threshold: usize,
    /// `page_size - 1` of the configuration: the unit ordinary segments commit in.
    page_mask: usize,
    /// `page_size + MIN_CHUNK`: free chunks smaller than this have no interior.
    span_min: usize,
    /// The source's page: a dedicated block that would leave this much or more of its
    /// segment unused does not shrink in place (it moves, and its segment goes back).
    source_page: usize,
    hook: MisuseHook,
    // Invariant: null, or the designated chunk: a free chunk of `dv_size` bytes (its
    // head and footer written) in a live segment of this space, in no index list.
    // Every other free chunk is listed. It is a fresh segment's free space (dlmalloc's
    // top): a request that no listed chunk fits is cut from its front, so a run of
    // them costs no list operation, and a block freed next to it merges into it.
    dv: *mut u8,
    dv_size: usize,
}

impl Core {
    pub(crate) const fn new(
        granularity: usize,
        threshold: usize,
        page: usize,
        source_page: usize,
        block_cache: usize,
        hook: MisuseHook,
    ) -> Self {
        Self {
            index: Index::new(),
            cache: Cache::new(block_cache),
            segments: ptr::null_mut(),
            base: ptr::null_mut(),
            base_range: (0, 0),
            counters: Counters {
                reserved: 0,
                max_reserved: 0,
                committed: 0,
                max_committed: 0,
                live_bytes: 0,
                live_blocks: 0,
                segments: 0,
                overhead: 0,
            },
            granularity_mask: granularity - 1,
            max_chunk: granularity - HEADER - FENCE,
            threshold,
            page_mask: page - 1,
            span_min: page + MIN_CHUNK,
            source_page,
            hook,
            dv: ptr::null_mut(),
            dv_size: 0,
        }
    }

    /// The pages strictly inside the free chunk at address `c` of `size` bytes, as
    /// addresses `[lo, hi)`: past its head and links, before the page that holds its
    /// footer. Empty (`lo >= hi`) when no whole page fits.
    ///
    /// In an ordinary segment these pages, and only these, are decommitted: a page
    /// is committed exactly when it lies in no free chunk's interior.
    #[inline]
    pub(crate) const fn interior(&self, c: usize, size: usize) -> (usize, usize) {
        let m = self.page_mask;
        ((c + MIN_CHUNK + m) & !m, (c + size) & !m)
    }

    /// Whether a free chunk of `size` bytes can have a page in its interior.
    #[inline]
    const fn may_span_page(&self, size: usize) -> bool {
        size >= self.span_min
    }

    /// The interior of the one free chunk of a fresh ordinary segment at `base` of
    /// `size` bytes, as offsets: what need not be committed when it is reserved.
    pub(crate) const fn fresh_interior(&self, base: usize, size: usize) -> (usize, usize) {
        let (lo, hi) = self.interior(base + HEADER, size - HEADER - FENCE);
        if lo < hi {
            (lo - base, hi - base)
        } else {
            (0, 0)
        }
    }

    /// Reports `misuse` through the hook.
    #[cold]
    pub(crate) fn report(&self, misuse: &Misuse<'_>) {
        (self.hook)(misuse);
    }

    /// The cached chunks and their bytes (a walk of the cache, reading each tag).
    pub(crate) fn cached(&self) -> (usize, usize) {
        let (mut n, mut bytes) = (0, 0);
        // `stats` calls this: an empty cache costs one comparison, and a plain loop
        // over the counts visits the classes with chunks only (Miri interprets every
        // call an iterator chain would make).
        if self.cache.bytes == 0 {
            return (0, 0);
        }
        let mut k = 0;
        while k < block_cache::CLASSES {
            if self.cache.counts[k] != 0 {
                for c in self.cache.class(k) {
                    n += 1;
                    // SAFETY: a cached chunk is an in-use chunk of a live segment.
                    bytes += raw::size(unsafe { raw::head(c) });
                }
            }
            k += 1;
        }
        (n, bytes)
    }

    /// The stats, as counted (the counters hold cached chunks as in use; the
    /// stats call them free).
    pub(crate) fn stats(&self) -> SpaceStats {
        let c = &self.counters;
        let (cached_blocks, cached_bytes) = self.cached();
        SpaceStats {
            reserved: c.reserved,
            max_reserved: c.max_reserved,
            committed: c.committed,
            max_committed: c.max_committed,
            live_bytes: c.live_bytes - (cached_bytes - cached_blocks * IN_USE_OVERHEAD),
            live_blocks: c.live_blocks - cached_blocks,
            free_bytes: c.free_bytes() + cached_bytes,
            cached_bytes,
            cached_blocks,
            segments: c.segments,
            ..SpaceStats::default()
        }
    }
}

/// What the space's page side, [`walk`](crate::walk) and [`validate`](crate::validate)
/// read of the core, and the few changes the page side makes to it; everything else
/// goes through the operations of this module's files.
impl Core {
    /// The stats, as the hot path keeps them.
    #[inline]
    pub(crate) const fn counters(&self) -> &Counters {
        &self.counters
    }

    /// The peaks of reserved and committed bytes.
    pub(crate) const fn peaks(&self) -> (usize, usize) {
        (self.counters.max_reserved, self.counters.max_committed)
    }

    /// Puts back the peaks [`peaks`](Self::peaks) read: a failed allocation changes
    /// no stat.
    pub(crate) fn restore_peaks(&mut self, (reserved, committed): (usize, usize)) {
        self.counters.max_reserved = reserved;
        self.counters.max_committed = committed;
    }

    /// The index of free chunks.
    pub(crate) const fn index(&self) -> &Index {
        &self.index
    }

    /// The block cache.
    pub(crate) const fn cache(&self) -> &Cache {
        &self.cache
    }

    /// The header of the first live segment, or null.
    pub(crate) const fn first_segment(&self) -> *mut Segment {
        self.segments
    }

    /// The base segment's header, or null.
    pub(crate) const fn base(&self) -> *mut Segment {
        self.base
    }

    /// The designated chunk and its size; null without one.
    pub(crate) const fn designated(&self) -> (*mut u8, usize) {
        (self.dv, self.dv_size)
    }

    /// `page_size - 1` of the configuration.
    pub(crate) const fn page_mask(&self) -> usize {
        self.page_mask
    }

    /// The segment granularity.
    pub(crate) const fn granularity(&self) -> usize {
        self.granularity_mask + 1
    }

    /// Sets the hook misuse is reported to.
    pub(crate) fn set_hook(&mut self, hook: MisuseHook) {
        self.hook = hook;
    }

    /// Lists free chunk `c` of `size` bytes in the index.
    ///
    /// # Safety
    ///
    /// The caller must ensure what [`Index::insert`] requires: `c` is a free chunk of
    /// `size` bytes (its head written) in committed memory of a live segment of this
    /// space, in no list and not the designated chunk.
    pub(crate) unsafe fn list(&mut self, c: NonNull<u8>, size: usize) {
        // SAFETY: the caller's contract.
        unsafe { self.index.insert(c, size) };
    }

    /// Makes `[start, start + len)` the base segment and lists its one free chunk.
    ///
    /// # Safety
    ///
    /// The caller must ensure what [`link_segment`](Self::link_segment) requires of
    /// `start` and `len` (16-aligned, `len` a multiple of 16 that holds a header, a
    /// minimum chunk and a fence, readable and writable for the space's life), and
    /// that the space has no base segment yet.
    pub(crate) unsafe fn adopt_base(&mut self, start: NonNull<u8>, len: usize) {
        debug_assert!(self.base.is_null(), "a space has one base segment");
        // SAFETY: the caller's contract; `init_area` gets the fresh segment, whose one
        // free chunk is then in no list.
        unsafe {
            let seg = self.link_segment(start, len, len, Kind::Base);
            self.base = seg.as_ptr();
            self.base_range = (seg.addr().get(), len);
            let (c, size) = self.init_area(seg);
            self.index.insert(c, size);
        }
    }

    /// Leaves the base segment (if any) alone on the list, with no designated chunk
    /// and an empty cache, once every other segment has been released.
    ///
    /// # Safety
    ///
    /// The caller must ensure every segment but the base one has been given back;
    /// the space must not allocate again (the base segment's chunks keep their tags).
    pub(crate) unsafe fn keep_only_base(&mut self) {
        self.segments = self.base;
        self.dv = ptr::null_mut();
        // The cached chunks of the base segment stay tagged in use; nothing reads them
        // again once the space goes.
        self.cache = Cache::new(self.cache.limit);
        if let Some(base) = NonNull::new(self.base) {
            // SAFETY: the base segment stays (the caller's contract); it is now alone
            // on the list.
            unsafe {
                (*base.as_ptr()).next = ptr::null_mut();
                (*base.as_ptr()).prev = ptr::null_mut();
            }
        }
    }
}

/// What [`Core::probe`] found wrong with a pointer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Fault {
    /// The tag says free or cached: a second free.
    DoubleFree,
    /// No block in use starts there.
    Interior,
}

/// `c` moved to address `addr` (with `c`'s provenance); `c` itself for 0.
fn at(c: NonNull<u8>, addr: usize) -> NonNull<u8> {
    c.with_addr(core::num::NonZeroUsize::new(addr).unwrap_or(c.addr()))
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
