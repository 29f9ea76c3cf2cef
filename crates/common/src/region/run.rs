//! Runs: the memory of a class region. A run is one 64 KiB granule of blocks of one
//! size, with no header or tag per block, found from any block by masking its
//! address, so a free needs no search and no size. A span is a reservation of runs:
//! a region's first holds one run, each next one twice as many as the region has
//! spans, up to `CommonConfig::small_segment` bytes, so that a class a program barely
//! uses holds 64 KiB of address space and a busy one few reservations.
//!
//! ```text
//!  span (granule-aligned)
//!  ┌───────────────────────────────────┬─────────────────────┬──────┐
//!  │ run 0: [Run][Span] block block …  │ run 1: [Run] block … │  …   │
//!  └───────────────────────────────────┴─────────────────────┴──────┘
//!    a run's blocks start FIRST bytes in; run 0's header also holds the span's
//! ```
//!
//! A run in use is on one of its region's lists: `partial` (a free block or room
//! never carved), `full`, or `empty` (no block out, kept committed for the next
//! refill: at most [`EMPTY_KEPT`]). Otherwise it is idle: its header's `list` zeroed
//! (so that a pointer into it reads as freed, whether the pages come back as zero
//! or the commit cache kept them), decommitted through the region's page source (the
//! commit cache keeps its pages for reuse under the retention policy), its bit set in
//! its span's `idle`. A span whose runs are all idle stays reserved (its runs are
//! taken again first, their pages from the commit cache) until a trim or a decay
//! step releases it: threads that come and go, freeing everything as they end, would
//! otherwise release and reserve their spans again each time. Blocks are carved from a run's `bump` only when its free list is
//! empty, so a run touches its pages as it fills.
//!
//! Everything here is reached under the region's lock.

use core::ptr::{self, NonNull};

use bento_align::Alignment;
use bento_pages::PageSource;

use crate::config::{GRANULE, MAX_SPAN_RUNS};
use crate::region::list::{Links, List, Node};

pub(crate) mod check;

/// What a block on a run's free list (and one in a thread's cache, in debug builds)
/// holds in its second word, so that a second free of it is caught.
pub(crate) const FREED: usize = 0x_f7ee_b10c_f7ee_b10c_u64 as usize;

/// The bytes of a run: one granule of the region map.
pub(crate) const RUN: usize = GRANULE;
/// Where a run's first block starts: after its header (and, in run 0, its span's).
pub(crate) const FIRST: usize = 128;
/// Runs a region keeps committed with no block out.
pub(crate) const EMPTY_KEPT: usize = 2;

/// The lists a run in use is on; an idle run's header reads `IDLE` (zero, as a
/// decommitted page does).
const IDLE: u8 = 0;
const PARTIAL: u8 = 1;
const FULL: u8 = 2;
const EMPTY: u8 = 3;

/// A run's header, at its start.
#[repr(C)]
pub(crate) struct Run {
    links: Links<Run>,
    // Invariant: a list of `listed` blocks of this run, linked through their first
    // word, each holding `FREED` in its second word.
    free: *mut u8,
    /// The next block never handed out: blocks below it have been carved.
    bump: *mut u8,
    /// The end of the last whole block.
    end: *mut u8,
    /// Blocks out: with users or in threads' caches.
    used: u32,
    /// Blocks on `free`.
    listed: u32,
    /// The block stride.
    stride: u32,
    /// The list the run is on (`IDLE` once it is idle).
    list: u8,
    /// Its span's header.
    span: *mut Span,
}

/// A span's header, in its run 0 after the run's.
#[repr(C)]
struct Span {
    links: Links<Span>,
    /// Bit `i`: run `i` is idle (decommitted, or never committed).
    idle: u64,
    /// Its runs: 1 to `MAX_SPAN_RUNS`.
    runs: u8,
    /// Whether the span is on `open` (some run idle) rather than `closed`.
    open: bool,
}

impl Span {
    /// The span's base: its run 0.
    fn base(this: *mut Span) -> *mut u8 {
        this.cast::<u8>().wrapping_sub(SPAN_AT)
    }

    /// The `idle` bits of a span of `runs` runs all idle.
    fn all_idle(runs: usize) -> u64 {
        u64::MAX >> (MAX_SPAN_RUNS - runs)
    }
}

/// Where a span's header lies in its run 0.
const SPAN_AT: usize = size_of::<Run>().next_multiple_of(16);
const _: () = assert!(SPAN_AT + size_of::<Span>() <= FIRST && FIRST.is_multiple_of(16));

impl Node for Run {}
impl Node for Span {}

/// The run holding `ptr` (its granule's start).
#[inline(always)]
fn run_of(ptr: *mut u8) -> *mut Run {
    ptr.map_addr(|a| a & !(RUN - 1)).cast()
}

/// A class region's runs and spans, and their stats.
pub(crate) struct Runs {
    /// The stride of the region's blocks: its class size, at least 16 (a free block
    /// holds its link and the freed mark).
    stride: usize,
    /// The most runs a span holds: 1 to `MAX_SPAN_RUNS`.
    max_runs: usize,
    partial: List<Run>,
    full: List<Run>,
    empty: List<Run>,
    /// Spans with an idle run.
    open: List<Span>,
    /// Spans with every run in use.
    closed: List<Span>,
    /// Blocks out of all runs (users' and threads' caches').
    pub(crate) used: usize,
    /// Bytes of the spans committed through the page source.
    pub(crate) committed: usize,
    pub(crate) max_committed: usize,
    /// Bytes of the spans.
    pub(crate) reserved: usize,
    pub(crate) max_reserved: usize,
}

impl Runs {
    /// No runs, for blocks of `block` bytes in spans of at most `span` bytes (`RUN`
    /// to `MAX_SPAN_RUNS * RUN`: the config's check).
    pub(crate) fn new(block: usize, span: usize) -> Self {
        Self {
            stride: block.max(16),
            max_runs: span / RUN,
            partial: List::new(),
            full: List::new(),
            empty: List::new(),
            open: List::new(),
            closed: List::new(),
            used: 0,
            committed: 0,
            max_committed: 0,
            reserved: 0,
            max_reserved: 0,
        }
    }

    /// The bytes at the start of run 0 that stay committed while its span lives
    /// (the span's header): a page, or the whole run on a source of larger pages.
    fn head(pages: &impl PageSource) -> usize {
        pages.page_size().clamp(FIRST, RUN)
    }

    /// Takes a block: the first partial run's free list, else its room, else a run
    /// made ready (`None` when the page source refuses one).
    #[inline]
    pub(crate) fn take(&mut self, pages: &impl PageSource) -> Option<NonNull<u8>> {
        let mut run = self.partial.head;
        if run.is_null() {
            run = self.ready(pages)?;
        }
        // SAFETY: a run on `partial` is in use, with a free block or room (the lists'
        // invariant); its blocks lie inside it. No reference to it is held across the
        // list calls.
        unsafe {
            let b = (*run).free;
            let block = if b.is_null() {
                let b = (*run).bump;
                (*run).bump = b.add(self.stride);
                b
            } else {
                (*run).free = b.cast::<*mut u8>().read();
                (*run).listed -= 1;
                b
            };
            // No freed mark (a carved block may hold one from an earlier life of its
            // run), so that a free's check of the live block finds none.
            block.cast::<usize>().add(1).write(0);
            (*run).used += 1;
            self.used += 1;
            if (*run).free.is_null() && (*run).bump == (*run).end {
                self.partial.remove(run);
                (*run).list = FULL;
                self.full.push(run);
            }
            Some(NonNull::new_unchecked(block))
        }
    }

    /// Takes up to `want` blocks as a chain linked through their first words (the
    /// last linking to null), from the free lists and room of the partial runs in
    /// turn: a thread's refill. Their second words may hold the freed mark (the
    /// thread's cache clears it as it hands each block out). Returns its first block and its length, 0 only when
    /// the page source refuses a run.
    pub(crate) fn take_chain(&mut self, pages: &impl PageSource, want: usize) -> (*mut u8, usize) {
        let mut head: *mut u8 = ptr::null_mut();
        let mut n = 0;
        while n < want {
            let run = match NonNull::new(self.partial.head) {
                Some(run) => run.as_ptr(),
                None => match self.ready(pages) {
                    Some(run) => run,
                    None => break,
                },
            };
            // SAFETY: a run on `partial` is in use: its free list holds `listed` of its
            // blocks, and its room lies between `bump` and `end`, inside it. Blocks
            // taken go to the chain, out of the run; no reference to the run is held
            // across the list calls.
            unsafe {
                let mut taken = 0;
                let mut b = (*run).free;
                while !b.is_null() && n + taken < want {
                    let next = b.cast::<*mut u8>().read();
                    b.cast::<*mut u8>().write(head);
                    head = b;
                    b = next;
                    taken += 1;
                }
                (*run).free = b;
                (*run).listed -= taken as u32;
                let bump = (*run).bump;
                let room = ((*run).end.addr() - bump.addr()) / self.stride;
                let carve = room.min(want - n - taken);
                if carve > 0 {
                    // Ascending addresses, the last linking to what was taken above.
                    for i in 0..carve - 1 {
                        let c = bump.add(i * self.stride);
                        c.cast::<*mut u8>().write(c.add(self.stride));
                    }
                    bump.add((carve - 1) * self.stride)
                        .cast::<*mut u8>()
                        .write(head);
                    head = bump;
                    (*run).bump = bump.add(carve * self.stride);
                }
                taken += carve;
                (*run).used += taken as u32;
                n += taken;
                if (*run).free.is_null() && (*run).bump == (*run).end {
                    self.partial.remove(run);
                    (*run).list = FULL;
                    self.full.push(run);
                }
            }
        }
        self.used += n;
        (head, n)
    }

    /// `ptr`, a pointer into one of these spans, as a pointer the region may keep
    /// and use for run headers and free lists.
    ///
    /// In a build it is `ptr`. Under Miri it is derived from the region's own pointer
    /// to the span that holds it (found by walking the spans), because a caller's
    /// pointer carries the caller's borrow: Tree Borrows forbids reading a run header
    /// through it once the region has written the header through its own pointers
    /// (which it does whenever a neighbour is taken or given). The memory space
    /// adopts its chunks the same way.
    #[inline(always)]
    fn adopt(&self, ptr: *mut u8) -> *mut u8 {
        #[cfg(miri)]
        for list in [&self.open, &self.closed] {
            for span in list.iter() {
                let base = Span::base(span);
                // SAFETY: a live span of this region: its header is valid.
                let runs = usize::from(unsafe { (*span).runs });
                if ptr.addr().wrapping_sub(base.addr()) < runs * RUN {
                    return base.with_addr(ptr.addr());
                }
            }
        }
        ptr
    }

    /// Gives back a block `take` handed out.
    ///
    /// # Safety
    ///
    /// `ptr` is a block out of one of these runs, given back once, not used
    /// afterwards.
    #[inline]
    pub(crate) unsafe fn give(&mut self, ptr: NonNull<u8>, pages: &impl PageSource) {
        let p = self.adopt(ptr.as_ptr());
        // SAFETY: the caller's contract: `p` is a block out of a run in use, at least
        // 16 bytes, marked here and given back alone.
        unsafe {
            p.cast::<usize>().add(1).write(FREED);
            self.splice(run_of(p), p, p, 1, pages);
        }
    }

    /// Puts the stretch `first` to `last` of `k` blocks of `run`, linked through their
    /// first words and marked, on the run's free list; the run becomes partial, and
    /// empties when they were its last blocks out.
    ///
    /// # Safety
    ///
    /// The stretch's blocks are out of `run`, a run in use (on `partial` or `full`:
    /// it has blocks out), given back once.
    #[inline(always)]
    unsafe fn splice(
        &mut self,
        run: *mut Run,
        first: *mut u8,
        last: *mut u8,
        k: u32,
        pages: &impl PageSource,
    ) {
        // SAFETY: the caller's contract: the run's header is valid, and `last` is a
        // block the caller gives up.
        unsafe {
            last.cast::<*mut u8>().write((*run).free);
            (*run).free = first;
            (*run).listed += k;
            (*run).used -= k;
            self.used -= k as usize;
            if (*run).list == FULL {
                self.full.remove(run);
                (*run).list = PARTIAL;
                self.partial.push(run);
            }
            if (*run).used == 0 {
                self.emptied(run, pages);
            }
        }
    }

    /// Gives back a chain of `n` blocks linked through their first words (a
    /// thread's flush): each stretch of blocks of one run joins its free list at once.
    ///
    /// # Safety
    ///
    /// `head` starts a chain of at least `n` blocks out of these runs, given back
    /// once, not used afterwards.
    pub(crate) unsafe fn give_chain(&mut self, head: *mut u8, n: usize, pages: &impl PageSource) {
        let mut p = self.adopt(head);
        let mut left = n;
        while left > 0 {
            let run = run_of(p);
            let first = p;
            let mut last;
            let mut k = 0u32;
            // SAFETY: the caller's contract: the chain's blocks are out of runs in
            // use (whose headers are valid), 16 bytes or more; the run is on
            // `partial` or `full` while a block of it is out.
            unsafe {
                loop {
                    last = p;
                    p = self.adopt(p.cast::<*mut u8>().read());
                    last.cast::<usize>().add(1).write(FREED);
                    k += 1;
                    left -= 1;
                    if left == 0 || run_of(p) != run {
                        break;
                    }
                    if cfg!(miri) {
                        // The link, adopted too, for the walks of the free list.
                        last.cast::<*mut u8>().write(p);
                    }
                }
                self.splice(run, first, last, k, pages);
            }
        }
    }

    /// A partial run with no block out: kept empty, or made idle.
    ///
    /// # Safety
    ///
    /// `run` is on `partial` with no block out.
    #[cold]
    unsafe fn emptied(&mut self, run: *mut Run, pages: &impl PageSource) {
        // SAFETY: the caller's contract.
        unsafe {
            self.partial.remove(run);
            if self.empty.len < EMPTY_KEPT {
                let first = run.cast::<u8>().add(FIRST);
                (*run).free = ptr::null_mut();
                (*run).listed = 0;
                (*run).bump = first;
                (*run).list = EMPTY;
                self.empty.push(run);
            } else {
                self.idle(run, pages);
            }
        }
    }

    /// Decommits a run on no list and marks it idle (its span stays, for `trim` to
    /// release once all its runs are idle).
    ///
    /// # Safety
    ///
    /// `run` is a run of these spans, in use, on no list, with no block out.
    unsafe fn idle(&mut self, run: *mut Run, pages: &impl PageSource) {
        // SAFETY: the run is in use: its header is valid, and names its span.
        let span = unsafe { (*run).span };
        let base = Span::base(span);
        let index = (run.addr() - base.addr()) / RUN;
        let head = Self::head(pages);
        let (at, bytes) = Self::body(index, head);
        // SAFETY: the run is in use: committed, and nothing reads it from now on
        // (the caller's contract) but a probe, which finds it idle; run 0 keeps its
        // span's header.
        unsafe {
            (*run).list = IDLE;
            if bytes > 0 {
                pages.decommit(NonNull::new_unchecked(base.add(at)), bytes);
                self.committed -= bytes;
            }
            (*span).idle |= 1 << index;
            if !(*span).open {
                self.closed.remove(span);
                (*span).open = true;
                self.open.push(span);
            }
        }
    }

    /// Releases span `span`, whose runs are all idle.
    ///
    /// # Safety
    ///
    /// `span` is on `open` with every run idle.
    unsafe fn release(&mut self, span: *mut Span, pages: &impl PageSource) {
        let base = Span::base(span);
        let head = Self::head(pages);
        // SAFETY: the caller's contract: only its header is committed, and nothing
        // reads the span once it is off the list.
        unsafe {
            let runs = usize::from((*span).runs);
            self.open.remove(span);
            pages.decommit(NonNull::new_unchecked(base), head);
            pages.release(NonNull::new_unchecked(base), runs * RUN);
            self.committed -= head;
            self.reserved -= runs * RUN;
        }
    }

    /// The part of run `index` that is committed only while it is in use: all of it
    /// but run 0's `head`. As (offset in the span, bytes).
    fn body(index: usize, head: usize) -> (usize, usize) {
        if index == 0 {
            (head, RUN - head)
        } else {
            (index * RUN, RUN)
        }
    }

    /// A run ready to carve, put on `partial`: an empty one, an idle one of an open
    /// span (committed), or run 0 of a new span.
    #[cold]
    fn ready(&mut self, pages: &impl PageSource) -> Option<*mut Run> {
        let run = if let Some(run) = NonNull::new(self.empty.head) {
            // SAFETY: a run on `empty`.
            unsafe { self.empty.remove(run.as_ptr()) };
            run.as_ptr()
        } else if let Some(span) = NonNull::new(self.open.head) {
            let span = span.as_ptr();
            // SAFETY: a span on `open` is live with an idle run; its base is where its
            // header says (the header lies at `SPAN_AT` of its base).
            unsafe {
                let base = span.cast::<u8>().sub(SPAN_AT);
                let index = (*span).idle.trailing_zeros() as usize;
                let (at, bytes) = Self::body(index, Self::head(pages));
                if bytes > 0 {
                    pages
                        .commit(NonNull::new_unchecked(base.add(at)), bytes)
                        .ok()?;
                    self.grew(bytes, 0);
                }
                (*span).idle &= !(1 << index);
                if (*span).idle == 0 {
                    self.open.remove(span);
                    (*span).open = false;
                    self.closed.push(span);
                }
                self.init(base.add(index * RUN).cast(), span)
            }
        } else {
            // One run for a region's first span, then twice as many as it has.
            let runs = (1 << self.spans().min(6)).min(self.max_runs);
            let align = Alignment::new(RUN).expect("a power of two");
            let base = pages.reserve(runs * RUN, align).ok()?;
            // SAFETY: the first run of a fresh reservation.
            if unsafe { pages.commit(base, RUN) }.is_err() {
                // SAFETY: just reserved, nothing committed.
                unsafe { pages.release(base, runs * RUN) };
                return None;
            }
            self.grew(RUN, runs * RUN);
            let idle = Span::all_idle(runs) & !1;
            let span = base.as_ptr().wrapping_add(SPAN_AT).cast::<Span>();
            // SAFETY: run 0 is committed and ours: its header and the span's are
            // written before anything reads them.
            unsafe {
                span.write(Span {
                    links: Links {
                        next: ptr::null_mut(),
                        prev: ptr::null_mut(),
                    },
                    idle,
                    runs: runs as u8,
                    open: idle != 0,
                });
                if idle == 0 {
                    self.closed.push(span);
                } else {
                    self.open.push(span);
                }
                self.init(base.as_ptr().cast(), span)
            }
        };
        // SAFETY: a run in use on no list.
        unsafe {
            (*run).list = PARTIAL;
            self.partial.push(run);
        }
        Some(run)
    }

    /// Readies a run ahead for a region in use that has no empty one: taken as a
    /// refill would take it (an idle run committed, or a new span), it waits on
    /// `empty`, so that the next refill past the partial runs calls the source no
    /// more. Returns the bytes it committed (0: none needed, or the source refused).
    #[cold]
    pub(crate) fn spare(&mut self, pages: &impl PageSource) -> usize {
        if self.used == 0 || self.empty.len > 0 {
            return 0;
        }
        let before = self.committed;
        let Some(run) = self.ready(pages) else {
            return 0;
        };
        // SAFETY: `ready` put the fresh run, nothing carved, on `partial`.
        unsafe {
            self.partial.remove(run);
            (*run).list = EMPTY;
            self.empty.push(run);
        }
        self.committed - before
    }

    /// Counts `committed` and `reserved` bytes more.
    fn grew(&mut self, committed: usize, reserved: usize) {
        self.committed += committed;
        self.max_committed = self.max_committed.max(self.committed);
        self.reserved += reserved;
        self.max_reserved = self.max_reserved.max(self.reserved);
    }

    /// Writes a fresh header at `run` of span `span`, nothing carved, and returns it.
    ///
    /// # Safety
    ///
    /// `run` is a committed run of span `span`, ours alone.
    unsafe fn init(&self, run: *mut Run, span: *mut Span) -> *mut Run {
        // SAFETY: the caller's contract; the blocks end inside the run.
        unsafe {
            let first = run.cast::<u8>().add(FIRST);
            let blocks = (RUN - FIRST) / self.stride;
            run.write(Run {
                links: Links {
                    next: ptr::null_mut(),
                    prev: ptr::null_mut(),
                },
                free: ptr::null_mut(),
                bump: first,
                end: first.add(blocks * self.stride),
                used: 0,
                listed: 0,
                stride: self.stride as u32,
                list: EMPTY,
                span,
            });
        }
        run
    }

    /// Makes every empty run idle and releases every span whose runs are all idle
    /// (a trim or a decay step); returns the bytes of the runs made idle.
    pub(crate) fn trim(&mut self, pages: &impl PageSource) -> usize {
        let mut freed = 0;
        while let Some(run) = NonNull::new(self.empty.head) {
            // SAFETY: a run on `empty`: in use, with no block out.
            unsafe {
                self.empty.remove(run.as_ptr());
                self.idle(run.as_ptr(), pages);
            }
            freed += RUN;
        }
        let mut p = self.open.head;
        while let Some(span) = NonNull::new(p) {
            // SAFETY: a live span on `open`: its header is valid until released,
            // after its successor is read.
            unsafe {
                p = (*span.as_ptr()).links.next;
                let runs = usize::from((*span.as_ptr()).runs);
                if (*span.as_ptr()).idle == Span::all_idle(runs) {
                    self.release(span.as_ptr(), pages);
                }
            }
        }
        freed
    }

    /// Gives every span back, whatever is out (the allocator's teardown).
    ///
    /// # Safety
    ///
    /// No block of these runs is used again.
    pub(crate) unsafe fn release_all(&mut self, pages: &impl PageSource) {
        let spans: [*const List<Span>; 2] = [&raw const self.open, &raw const self.closed];
        let head = Self::head(pages);
        for list in spans {
            // SAFETY: the lists are ours; each span is released after its successor
            // is read.
            let mut p = unsafe { (*list).head };
            while let Some(span) = NonNull::new(p) {
                // SAFETY: a live span of these lists: its header is valid until it is
                // released below, and its runs in use are committed.
                unsafe {
                    p = (*span.as_ptr()).links.next;
                    let base = span.as_ptr().cast::<u8>().sub(SPAN_AT);
                    let idle = (*span.as_ptr()).idle;
                    let runs = usize::from((*span.as_ptr()).runs);
                    for index in 0..runs {
                        let (at, bytes) = Self::body(index, head);
                        if idle & (1 << index) == 0 && bytes > 0 {
                            pages.decommit(NonNull::new_unchecked(base.add(at)), bytes);
                        }
                    }
                    pages.decommit(NonNull::new_unchecked(base), head);
                    pages.release(NonNull::new_unchecked(base), runs * RUN);
                }
            }
        }
        *self = Self::new(self.stride, self.max_runs * RUN);
    }

    /// Runs in use.
    pub(crate) fn runs(&self) -> usize {
        self.partial.len + self.full.len + self.empty.len
    }

    /// Spans.
    pub(crate) fn spans(&self) -> usize {
        self.open.len + self.closed.len
    }
}
