//! [`MemorySpace::validate`], which recomputes every stat from the tags and checks
//! every rule a space keeps ([`Rule`]), naming the first broken one ([`SpaceCorruption`]).

use crate::chunk::flags::{BASE, CACHED, DEDICATED, IN_USE, PREV_IN_USE};
use crate::chunk::{FENCE, HEADER, IN_USE_OVERHEAD, Kind, MIN_CHUNK, Segment, raw};
use crate::engine::Core;
use crate::index::{self, list_of};
use crate::memory_space::MemorySpace;
use bento_pages::PageSource;
use core::ptr::NonNull;

mod cached;

/// On a free chunk, the validation walk's mark "seen in a list" (the bit is otherwise
/// only set on in-use chunks of dedicated segments).
const MARK: usize = DEDICATED;

/// The stats [`MemorySpace::validate`] counted by walking the segments.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ValidateReport {
    /// Segments walked.
    pub segments: usize,
    /// In-use chunks.
    pub live_blocks: usize,
    /// Their usable bytes.
    pub live_bytes: usize,
    /// Free chunks, the cached ones included.
    pub free_blocks: usize,
    /// Their bytes.
    pub free_bytes: usize,
    /// Chunks in the block cache (tagged in use, counted as free above).
    pub cached_blocks: usize,
    /// Their bytes.
    pub cached_bytes: usize,
    /// Segment headers, end fences and the tag of each in-use chunk that is not
    /// cached.
    pub overhead: usize,
    /// Bytes committed in the segments walked: `reserved - decommitted`.
    pub committed: usize,
    /// Bytes decommitted in the segments walked: the whole pages inside free chunks
    /// (past their links, before their footers) of ordinary segments.
    pub decommitted: usize,
    /// Bytes reserved by the segments walked.
    pub reserved: usize,
}

/// The rule a corrupted space breaks, as [`MemorySpace::validate`] names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Rule {
    /// A chunk's size is below the minimum or runs past the segment's end fence.
    #[error("a chunk's size is below the minimum or runs past the end fence")]
    Overrun,
    /// The walk does not end on an end fence at the segment's end.
    #[error("the walk does not end on the end fence")]
    Fence,
    /// A chunk's PREV_IN_USE bit disagrees with the chunk before it.
    #[error("PREV_IN_USE disagrees with the previous chunk")]
    PrevInUse,
    /// Two free chunks are adjacent (they should have merged).
    #[error("two free chunks are adjacent")]
    AdjacentFree,
    /// A free chunk's footer does not repeat its size.
    #[error("a free chunk's footer does not match its size")]
    Footer,
    /// A chunk's kind bits (dedicated, base) disagree with its segment.
    #[error("a chunk's kind bits disagree with its segment")]
    KindFlag,
    /// A free chunk is in no free list.
    #[error("a free chunk is in no free list")]
    Unlisted,
    /// A list holds something that is not a free chunk of this space of the list's
    /// size class, or its back link is wrong.
    #[error(
        "list ({fl}, {sl}) holds an entry that is not a free chunk of its class, or a wrong back link"
    )]
    ListEntry {
        /// First level of the list.
        fl: usize,
        /// Second level.
        sl: usize,
    },
    /// The designated chunk (where small blocks are cut from) is not a free chunk of
    /// its recorded size in a segment, or is also in a list.
    #[error("the designated chunk is not a free chunk of its recorded size, or is also listed")]
    Designated,
    /// A list holds a chunk twice (a cycle).
    #[error("list ({fl}, {sl}) holds a chunk twice")]
    ListCycle {
        /// First level of the list.
        fl: usize,
        /// Second level.
        sl: usize,
    },
    /// A bitmap bit disagrees with its list.
    #[error("the bitmaps disagree with list ({fl}, {sl})")]
    Bitmap {
        /// First level of the list.
        fl: usize,
        /// Second level.
        sl: usize,
    },
    /// A segment's occupancy count disagrees with its in-use chunks.
    #[error("the segment's occupancy count is {recorded} but it holds {counted} in-use chunks")]
    Occupancy {
        /// In-use chunks found.
        counted: usize,
        /// The segment's count.
        recorded: usize,
    },
    /// A segment's count of cached chunks disagrees with the chunks the block cache
    /// holds there.
    #[error(
        "the segment's cached count is {recorded} but the block cache holds {counted} of its chunks"
    )]
    Cached {
        /// Cached chunks found in the segment.
        counted: usize,
        /// The segment's count.
        recorded: usize,
    },
    /// A segment that can be released holds cached chunks and no other block in use:
    /// it should have been emptied and released.
    #[error("the segment holds only cached blocks")]
    OnlyCached,
    /// The block cache holds an entry that is not a cached chunk of its class.
    #[error(
        "class {class} of the block cache holds an entry that is not a cached chunk of at least its size"
    )]
    CacheEntry {
        /// The class.
        class: usize,
    },
    /// The block cache's counts or bytes disagree with its lists.
    #[error("the block cache's {name} is {recorded} but its lists hold {counted}")]
    CacheCount {
        /// Which count.
        name: &'static str,
        /// What the lists hold.
        counted: usize,
        /// What the cache recorded.
        recorded: usize,
    },
    /// A stat kept as a counter disagrees with the walk.
    #[error("{name} is {recorded} but the walk counts {counted}")]
    Stat {
        /// Which stat.
        name: &'static str,
        /// What the walk counted.
        counted: usize,
        /// What the counter says.
        recorded: usize,
    },
    /// The commit cache between the space and its source is inconsistent.
    #[error("the commit cache: {0}")]
    CommitCache(bento_pages::CacheCorruption),
}

/// Where a space is corrupt and which rule is broken: the segment's base address (0
/// when the rule concerns the whole space or a list entry outside every segment) and
/// the byte offset in it (or the address of the entry).
///
/// ```
/// use bento_space::{SpaceCorruption, Rule};
///
/// let c = SpaceCorruption { segment: 0x10000, offset: 64, rule: Rule::AdjacentFree };
/// assert_eq!(c.to_string(), "segment 0x10000, offset 64: two free chunks are adjacent");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("segment {segment:#x}, offset {offset}: {rule}")]
pub struct SpaceCorruption {
    /// The base address of the segment.
    pub segment: usize,
    /// The byte offset of the chunk in the segment.
    pub offset: usize,
    /// The rule broken.
    pub rule: Rule,
}

impl<P: PageSource> MemorySpace<P> {
    /// Walks every segment's boundary tags and every free list and checks that they
    /// agree: each walk ends on its segment's end fence, PREV_IN_USE bits are right,
    /// no two free chunks are adjacent, footers match, every free chunk is in exactly
    /// one list (the one its size maps to) but the designated one (a fresh segment's
    /// free space, which small blocks are cut from), the lists hold nothing else, the
    /// bitmaps match the lists, each segment's occupancy count matches its in-use
    /// chunks, every counter of [`stats`](Self::stats) equals what the walk counts
    /// (`reserved == live + free + overhead`, each counted by the walk), each
    /// segment's committed bytes are exactly its pages outside free chunks'
    /// interiors (no committed page lies wholly inside free space, and every page a
    /// live block touches is committed), and the page source, counted below the
    /// commit cache, holds exactly those bytes committed plus what the cache parks.
    ///
    /// It reads the tags only (and flips a mark bit in free and cached chunks' tags,
    /// which it restores), so a space corrupted by a stray write is reported, not
    /// repaired.
    ///
    /// It costs O(chunks + segments · log segments): each list entry's segment is
    /// found by a binary search in a table of the segments sorted by address (8
    /// bytes a segment, reserved and committed in the page source for the call and
    /// given back before it returns; with 32 segments or fewer, or when the source
    /// refuses, the segment list is walked instead). About 20 ms for a 1 GiB heap of
    /// 4,000 segments and 500k free chunks.
    ///
    /// # Errors
    ///
    /// [`SpaceCorruption`]: the segment, offset and rule of the first problem found.
    ///
    /// ```
    /// use core::alloc::Layout;
    /// use bento_pages::HeapPages;
    /// use bento_space::{MemorySpace, SpaceConfig};
    ///
    /// let space = MemorySpace::new(HeapPages::new(), SpaceConfig::DEFAULT.with_page_size(4096)).unwrap();
    /// let p = space.alloc(Layout::new::<[u8; 100]>()).unwrap();
    /// let report = space.validate().unwrap();
    /// assert_eq!(report.live_bytes + report.free_bytes + report.overhead, report.reserved);
    /// assert_eq!(report.reserved - report.decommitted, report.committed);
    /// assert_eq!(report.committed, space.stats().committed);
    /// // SAFETY: live.
    /// unsafe { space.free(p) };
    /// ```
    pub fn validate(&self) -> Result<ValidateReport, SpaceCorruption> {
        let mut entered = self.entered();
        let core = &mut entered.core;
        // No list can be longer than the chunks the segments could hold.
        let limit = core.counters().reserved / MIN_CHUNK + 1;
        let finder = Finder::new(core, self.pages());
        // SAFETY: `validate` reads only inside live segments (each entry is located
        // in one before it is read) and writes only mark bits it clears again.
        unsafe {
            let result = check_lists(core, &finder, limit).and_then(|listed| {
                let report = walk_segments(core, listed)?;
                finder.check_cache(core, report.cached_blocks)?;
                Ok(report)
            });
            if result.is_err() {
                unmark_lists(core, &finder, limit);
            }
            drop(finder);
            let report = result?;
            if let Some(pages) = self.source_cache()
                && let Err(e) = pages.validate()
            {
                return Err(SpaceCorruption {
                    segment: 0,
                    offset: 0,
                    rule: Rule::CommitCache(e),
                });
            }
            if let Some((counted, recorded)) = self.source_committed(&entered)
                && counted != recorded
            {
                return Err(SpaceCorruption {
                    segment: 0,
                    offset: 0,
                    rule: Rule::Stat {
                        name: "bytes committed in the page source",
                        counted,
                        recorded,
                    },
                });
            }
            Ok(report)
        }
    }
}

/// Finds the segment an address lies in, for `validate`: by a binary search of the
/// segments sorted by address when the space has more than a few of them and its page
/// source lends the memory for the table, else by walking the segment list. Either
/// way it reads only live segment headers, so a corrupt pointer is never followed.
///
/// The table (8 bytes a segment) is reserved and committed directly in the source
/// the space was given, under its commit cache and its metering, and given back when
/// the finder is dropped: the space's stats never see it.
struct Finder<'a, P: PageSource> {
    // Invariant: `len` committed pointers at `ptr`, the headers of the space's live
    // segments sorted by address, in a reservation of `bytes` bytes of `pages`.
    table: Option<(NonNull<*mut Segment>, usize, usize, &'a P)>,
}

/// Below this many segments a walk of the list is as quick as building the table.
const LINEAR_SEGMENTS: usize = 32;

impl<'a, P: PageSource> Finder<'a, P> {
    fn new(core: &Core, pages: Option<&'a P>) -> Self {
        let n = core.counters().segments;
        let table = pages
            .filter(|_| n > LINEAR_SEGMENTS)
            .and_then(|pages| Self::build(core, pages, n));
        Self { table }
    }

    /// The sorted table of `core`'s `n` segments, in memory from `pages`; `None` when
    /// the source has none to lend or the list does not hold `n` segments.
    fn build(
        core: &Core,
        pages: &'a P,
        n: usize,
    ) -> Option<(NonNull<*mut Segment>, usize, usize, &'a P)> {
        let bytes = n
            .checked_mul(size_of::<*mut Segment>())?
            .checked_next_multiple_of(pages.page_size())?;
        let ptr = pages.reserve(bytes, bento_align::Alignment::MIN).ok()?;
        // SAFETY: the whole of the reservation just made, decommitted.
        if unsafe { pages.commit(ptr, bytes) }.is_err() {
            // SAFETY: the reservation just made, nothing of it committed.
            unsafe { pages.release(ptr, bytes) };
            return None;
        }
        let table = ptr.cast::<*mut Segment>();
        let mut len = 0;
        let mut seg = core.first_segment();
        while !seg.is_null() && len < n {
            // SAFETY: `len < n` slots fit the committed table (page-aligned, so
            // aligned for pointers); `seg` is a live segment header (the list's
            // invariant).
            unsafe {
                table.add(len).write(seg);
                seg = (*seg).next;
            }
            len += 1;
        }
        // SAFETY: the first `len` slots were just written.
        let slice = unsafe { core::slice::from_raw_parts_mut(table.as_ptr(), len) };
        slice.sort_unstable_by_key(|s| s.addr());
        Some((table, len, bytes, pages))
    }

    /// The segment whose chunk area holds a minimum chunk at `c`.
    fn holding<'c>(&self, core: &'c Core, c: NonNull<u8>) -> Option<&'c Segment> {
        let addr = c.addr().get();
        let inside = |s: &Segment| {
            let base = core::ptr::from_ref(s).addr();
            let fits = addr
                .checked_add(MIN_CHUNK)
                .is_some_and(|end| end <= base + s.size - FENCE);
            addr >= base + s.first && fits
        };
        match self.table {
            Some((table, len, _, _)) => {
                // SAFETY: `len` pointers written by `build`, not changed since.
                let sorted = unsafe { core::slice::from_raw_parts(table.as_ptr(), len) };
                let i = sorted.partition_point(|s| s.addr() <= addr);
                // SAFETY: a live segment's header (the table holds only those).
                let s = unsafe { sorted.get(i.checked_sub(1)?)?.as_ref()? };
                inside(s).then_some(s)
            }
            None => {
                let mut seg = core.first_segment();
                // SAFETY: every header on the list is a live segment's.
                while let Some(s) = unsafe { seg.as_ref() } {
                    if inside(s) {
                        return Some(s);
                    }
                    seg = s.next;
                }
                None
            }
        }
    }
}

impl<P: PageSource> Drop for Finder<'_, P> {
    fn drop(&mut self) {
        if let Some((table, _, bytes, pages)) = self.table {
            // SAFETY: the table's reservation, committed whole and read no more.
            unsafe {
                pages.decommit(table.cast(), bytes);
                pages.release(table.cast(), bytes);
            }
        }
    }
}

/// Walks every list, checks each entry and marks it; returns how many are listed.
///
/// # Safety
///
/// The segment list is intact.
unsafe fn check_lists<P: PageSource>(
    core: &mut Core,
    finder: &Finder<'_, P>,
    limit: usize,
) -> Result<usize, SpaceCorruption> {
    let whole = |rule| SpaceCorruption {
        segment: 0,
        offset: 0,
        rule,
    };
    let mut listed = 0;
    for fl in 0..index::FL_COUNT {
        if !core.index().first_level_agrees(fl) {
            return Err(whole(Rule::Bitmap { fl, sl: 0 }));
        }
    }
    for (fl, sl) in nonempty_lists(core) {
        let first = core.index().head_of(fl, sl);
        if core.index().marked(fl, sl) == first.is_null() {
            return Err(whole(Rule::Bitmap { fl, sl }));
        }
        let mut prev: *mut u8 = core::ptr::null_mut();
        let mut cur = first;
        let mut steps = 0;
        while let Some(c) = NonNull::new(cur) {
            let at = |rule| SpaceCorruption {
                segment: 0,
                offset: c.addr().get(),
                rule,
            };
            steps += 1;
            if steps > limit {
                return Err(at(Rule::ListCycle { fl, sl }));
            }
            let Some(seg) = finder.holding(core, c) else {
                return Err(at(Rule::ListEntry { fl, sl }));
            };
            let end = core::ptr::from_ref(seg).addr() + seg.size - FENCE;
            // SAFETY: `c` lies in the chunk area of a live segment, at least a minimum
            // chunk before its end fence, so its head and links are readable.
            unsafe {
                let head = raw::head(c);
                if head & MARK != 0 && head & IN_USE == 0 {
                    return Err(at(Rule::ListCycle { fl, sl }));
                }
                let size = raw::size(head);
                if !c.addr().get().is_multiple_of(16)
                    || head & IN_USE != 0
                    || size < MIN_CHUNK
                    || c.addr().get() + size > end
                    || list_of(size) != (fl, sl)
                    || raw::link(c, 1) != prev
                {
                    return Err(at(Rule::ListEntry { fl, sl }));
                }
                raw::set_head(c, head | MARK);
                prev = c.as_ptr();
                cur = raw::link(c, 0);
            }
            listed += 1;
        }
    }
    let (dv, dv_size) = core.designated();
    if let Some(c) = NonNull::new(dv) {
        let bad = SpaceCorruption {
            segment: 0,
            offset: c.addr().get(),
            rule: Rule::Designated,
        };
        let Some(seg) = finder.holding(core, c) else {
            return Err(bad);
        };
        let end = core::ptr::from_ref(seg).addr() + seg.size - FENCE;
        // SAFETY: `c` lies in the chunk area of a live segment, at least a minimum
        // chunk before its end fence, so its head is readable.
        unsafe {
            let head = raw::head(c);
            if !c.addr().get().is_multiple_of(16)
                || head & (IN_USE | MARK) != 0
                || raw::size(head) != dv_size
                || c.addr().get() + dv_size > end
            {
                return Err(bad);
            }
            // Marked as a listed chunk is, so the walk finds every free chunk placed.
            raw::set_head(c, head | MARK);
        }
        listed += 1;
    }
    Ok(listed)
}

/// The lists whose head is non-null or whose bitmap bit is set, in `(fl, sl)` order:
/// every other list is empty and unmarked, as it should be, with nothing to walk.
fn nonempty_lists(core: &Core) -> NonEmptyLists<'_> {
    NonEmptyLists {
        index: core.index(),
        fl: 0,
        rest: 0,
        started: false,
    }
}

/// [`nonempty_lists`]: the level it is at and the lists of it still to visit, as
/// second-level bits. A plain loop rather than an iterator chain, as
/// `Index::row`, for Miri's sake.
struct NonEmptyLists<'a> {
    index: &'a index::Index,
    fl: usize,
    rest: u16,
    started: bool,
}

impl Iterator for NonEmptyLists<'_> {
    type Item = (usize, usize);

    fn next(&mut self) -> Option<(usize, usize)> {
        while self.rest == 0 {
            if self.started {
                self.fl += 1;
            }
            self.started = true;
            if self.fl >= index::FL_COUNT {
                return None;
            }
            let (held, marked) = self.index.row(self.fl);
            self.rest = held | marked;
        }
        let sl = self.rest.trailing_zeros() as usize;
        self.rest &= self.rest - 1;
        Some((self.fl, sl))
    }
}

/// Clears the marks `check_lists` may have left after it or the walk found a problem.
///
/// # Safety
///
/// The segment list is intact.
unsafe fn unmark_lists<P: PageSource>(core: &mut Core, finder: &Finder<'_, P>, limit: usize) {
    if let Some(c) = NonNull::new(core.designated().0)
        && finder.holding(core, c).is_some()
        && c.addr().get().is_multiple_of(16)
    {
        // SAFETY: `c` lies in the chunk area of a live segment (checked).
        unsafe {
            let head = raw::head(c);
            if head & IN_USE == 0 {
                raw::set_head(c, head & !MARK);
            }
        }
    }
    for (fl, sl) in nonempty_lists(core) {
        let mut cur = core.index().head_of(fl, sl);
        let mut steps = 0;
        while let Some(c) = NonNull::new(cur) {
            steps += 1;
            if steps > limit
                || finder.holding(core, c).is_none()
                || !c.addr().get().is_multiple_of(16)
            {
                break;
            }
            // SAFETY: `c` lies in the chunk area of a live segment (checked).
            unsafe {
                let head = raw::head(c);
                if head & IN_USE == 0 {
                    raw::set_head(c, head & !MARK);
                }
                cur = raw::link(c, 0);
            }
        }
    }
}

/// Walks every segment's tags, clearing the marks of listed free chunks (and of the
/// designated one), and compares the counts with the counters.
///
/// # Safety
///
/// The segment list is intact.
unsafe fn walk_segments(core: &mut Core, listed: usize) -> Result<ValidateReport, SpaceCorruption> {
    let mut r = ValidateReport::default();
    let mut seg = core.first_segment();
    let mut guard = core.counters().segments + 1;
    while let Some(sp) = NonNull::new(seg) {
        // SAFETY: every header on the list is a live segment's.
        let s = unsafe { sp.as_ref() };
        guard = guard.checked_sub(1).ok_or(SpaceCorruption {
            segment: 0,
            offset: 0,
            rule: Rule::Stat {
                name: "segments",
                counted: core.counters().segments + 1,
                recorded: core.counters().segments,
            },
        })?;
        // SAFETY: the segment is live (the caller's contract).
        let (live, cached) = unsafe { walk_segment(core, sp, &mut r)? };
        let here = |rule| SpaceCorruption {
            segment: core::ptr::from_ref(s).addr(),
            offset: 0,
            rule,
        };
        if cached != s.cached {
            return Err(here(Rule::Cached {
                counted: cached,
                recorded: s.cached,
            }));
        }
        if cached > 0 && live == cached && s.kind != Kind::Base as usize {
            return Err(here(Rule::OnlyCached));
        }
        if live != s.live {
            return Err(SpaceCorruption {
                segment: core::ptr::from_ref(s).addr(),
                offset: 0,
                rule: Rule::Occupancy {
                    counted: live,
                    recorded: s.live,
                },
            });
        }
        seg = s.next;
    }
    let c = &core.counters();
    let whole = |name, counted, recorded| {
        if counted == recorded {
            Ok(())
        } else {
            Err(SpaceCorruption {
                segment: 0,
                offset: 0,
                rule: Rule::Stat {
                    name,
                    counted,
                    recorded,
                },
            })
        }
    };
    whole("listed free chunks", r.free_blocks, listed)?;
    whole("free_bytes", r.free_bytes, c.free_bytes())?;
    whole(
        "overhead",
        r.overhead,
        c.overhead + c.live_blocks * IN_USE_OVERHEAD,
    )?;
    whole("live_bytes", r.live_bytes, c.live_bytes)?;
    whole("live_blocks", r.live_blocks, c.live_blocks)?;
    whole("segments", r.segments, c.segments)?;
    whole("reserved", r.reserved, c.reserved)?;
    whole("committed", r.committed, c.committed)?;
    whole(
        "max_committed below committed",
        c.max_committed.max(c.committed),
        c.max_committed,
    )?;
    whole(
        "max_reserved below reserved",
        c.max_reserved.max(c.reserved),
        c.max_reserved,
    )?;
    // The counters hold cached chunks as in use, so the walk did too; the report
    // calls them free, as `stats` does.
    r.live_blocks -= r.cached_blocks;
    r.live_bytes -= r.cached_bytes - r.cached_blocks * IN_USE_OVERHEAD;
    r.overhead -= r.cached_blocks * IN_USE_OVERHEAD;
    r.free_blocks += r.cached_blocks;
    r.free_bytes += r.cached_bytes;
    Ok(r)
}

/// Walks one segment's chunks into `r`; returns its in-use chunks.
///
/// # Safety
///
/// `seg` is a live segment header (with the provenance of its whole segment).
unsafe fn walk_segment(
    core: &Core,
    seg: NonNull<Segment>,
    r: &mut ValidateReport,
) -> Result<(usize, usize), SpaceCorruption> {
    // SAFETY: the caller's contract.
    let s = unsafe { seg.as_ref() };
    let base_ptr = seg.cast::<u8>();
    let base = base_ptr.addr().get();
    let fence = base + s.size - FENCE;
    let kind_bits = match s.kind {
        k if k == Kind::Dedicated as usize => MARK,
        k if k == Kind::Base as usize => BASE,
        _ => 0,
    };
    let at = |c: NonNull<u8>, rule| SpaceCorruption {
        segment: base,
        offset: c.addr().get() - base,
        rule,
    };
    if s.first < HEADER || s.first > s.size - FENCE - MIN_CHUNK {
        return Err(SpaceCorruption {
            segment: base,
            offset: 0,
            rule: Rule::Overrun,
        });
    }
    // SAFETY: the segment is live, so its header is readable and its first chunk
    // starts `first` bytes in (checked to lie inside).
    let mut c = unsafe { base_ptr.add(s.first) };
    let mut prev_free = false;
    let mut live = 0;
    let mut cached = 0;
    let mut walked = s.first + FENCE;
    let mut decommitted = 0;
    loop {
        // SAFETY: `c` is at most the end fence (checked each step below), so its head
        // is committed memory of the segment.
        let head = unsafe { raw::head(c) };
        let size = raw::size(head);
        if (head & PREV_IN_USE == 0) != prev_free {
            return Err(at(c, Rule::PrevInUse));
        }
        if size == 0 {
            if c.addr().get() != fence || head & IN_USE == 0 {
                return Err(at(c, Rule::Fence));
            }
            break;
        }
        if size < MIN_CHUNK || c.addr().get() + size > fence {
            return Err(at(c, Rule::Overrun));
        }
        if head & IN_USE != 0 {
            let mut head = head;
            if head & CACHED != 0 && kind_bits & MARK == 0 {
                // A cached chunk: in use to the tags and the counters.
                head &= !CACHED;
                cached += 1;
                r.cached_blocks += 1;
                r.cached_bytes += size;
            }
            if head & (MARK | BASE) != kind_bits {
                return Err(at(c, Rule::KindFlag));
            }
            live += 1;
            r.live_blocks += 1;
            r.live_bytes += size - IN_USE_OVERHEAD;
            r.overhead += IN_USE_OVERHEAD;
            prev_free = false;
        } else {
            if prev_free {
                return Err(at(c, Rule::AdjacentFree));
            }
            if head & BASE != kind_bits & BASE || kind_bits & MARK != 0 {
                return Err(at(c, Rule::KindFlag));
            }
            // SAFETY: `c + size` is at most the fence, inside the segment.
            if unsafe { raw::prev_foot(c.add(size)) } != size {
                return Err(at(c, Rule::Footer));
            }
            if head & MARK == 0 {
                return Err(at(c, Rule::Unlisted));
            }
            // SAFETY: as above; clears the mark `check_lists` set.
            unsafe { raw::set_head(c, head & !MARK) };
            r.free_blocks += 1;
            r.free_bytes += size;
            if kind_bits == 0 {
                let (lo, hi) = core.interior(c.addr().get(), size);
                decommitted += hi.saturating_sub(lo);
            }
            prev_free = true;
        }
        walked += size;
        // SAFETY: `c + size <= fence`, inside the segment.
        c = unsafe { c.add(size) };
    }
    let stat = |name, counted, recorded| {
        if counted == recorded {
            Ok(())
        } else {
            Err(SpaceCorruption {
                segment: base,
                offset: 0,
                rule: Rule::Stat {
                    name,
                    counted,
                    recorded,
                },
            })
        }
    };
    stat("segment size", walked, s.size)?;
    stat("segment committed", s.size - decommitted, s.committed)?;
    r.overhead += s.first + FENCE;
    r.committed += s.committed;
    r.decommitted += decommitted;
    r.reserved += s.size;
    r.segments += 1;
    Ok((live, cached))
}
