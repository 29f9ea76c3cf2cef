//! Replaying a trace against a [`ReplayTarget`]: [`replay`] and what it reports.

use std::alloc::Layout;
use std::collections::HashMap;
use std::io::Read;
use std::ptr::NonNull;
use std::time::Instant;

use crate::format::Event;
use crate::reader::{TraceError, TraceReader};
use crate::target::ReplayTarget;

/// A live block of a replay: where it is, its layout and tag.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Live {
    pub(crate) ptr: NonNull<u8>,
    pub(crate) layout: Layout,
    pub(crate) tag: u32,
}

/// Allocates a block and marks it with `key` (see [`mark`]).
///
/// # Safety
///
/// None beyond the target's: the block is fresh.
pub(crate) unsafe fn alloc_marked<T: ReplayTarget + ?Sized>(
    target: &mut T,
    layout: Layout,
    tag: u32,
    key: usize,
) -> Option<Live> {
    let ptr = target.alloc(layout, tag)?;
    // SAFETY: a fresh block of `layout.size() > 0` bytes.
    unsafe { mark(ptr, layout.size(), key) };
    Some(Live { ptr, layout, tag })
}

/// Checks a block's marks, resizes it, checks its head survived and marks it again.
///
/// # Safety
///
/// The caller must pass a live block of `target`, marked with `key`.
pub(crate) unsafe fn realloc_marked<T: ReplayTarget + ?Sized>(
    target: &mut T,
    block: Live,
    new: usize,
    key: usize,
) -> Option<Live> {
    let layout = Layout::from_size_align(new, block.layout.align()).ok()?;
    // SAFETY: the caller's contract.
    unsafe { check(block.ptr, block.layout.size(), key) };
    // SAFETY: as above.
    let ptr = unsafe { target.realloc(block.ptr, block.layout, new, block.tag)? };
    // SAFETY: the block keeps its first `min(old, new)` bytes, at least one, and is
    // `new > 0` bytes now.
    unsafe {
        assert_eq!(
            ptr.as_ptr().read(),
            key as u8,
            "realloc lost the head of block {key}"
        );
        mark(ptr, new, key);
    }
    Some(Live {
        ptr,
        layout,
        tag: block.tag,
    })
}

/// Checks a block's marks and frees it.
///
/// # Safety
///
/// The caller must pass a live block of `target`, marked with `key`.
pub(crate) unsafe fn free_marked<T: ReplayTarget + ?Sized>(
    target: &mut T,
    block: Live,
    key: usize,
) {
    // SAFETY: the caller's contract.
    unsafe {
        check(block.ptr, block.layout.size(), key);
        target.free(block.ptr, block.layout, block.tag);
    }
}

/// Writes the first and last bytes of a block from `key` (the first only, when they
/// are the same byte), and a byte in every 4 KiB
/// between, as a program filling the block would (so that every page of it is
/// resident when the footprint is measured as the process's resident set).
///
/// # Safety
///
/// The caller must pass a block of `size > 0` writable bytes.
unsafe fn mark(p: NonNull<u8>, size: usize, key: usize) {
    // SAFETY: the caller's contract.
    unsafe {
        for at in (4096..size).step_by(4096) {
            p.as_ptr().add(at).write(0);
        }
        p.as_ptr().add(size - 1).write(!(key as u8));
        // A one-byte block holds only the head.
        p.as_ptr().write(key as u8);
    }
}

/// Checks what [`mark`] wrote.
///
/// # Safety
///
/// As for [`mark`], on a block marked with `key`.
unsafe fn check(p: NonNull<u8>, size: usize, key: usize) {
    // SAFETY: the caller's contract.
    let (head, tail) = unsafe { (p.as_ptr().read(), p.as_ptr().add(size - 1).read()) };
    assert!(
        head == key as u8 && (size == 1 || tail == !(key as u8)),
        "block {key} at {p:p} ({size} bytes) was overwritten: {head:#04x} .. {tail:#04x}"
    );
}

/// A moment of a replay at which [`replay`] calls its observer: after a frame, a
/// phase, or every [`ReplayOptions::sample_every`] records.
///
/// ```
/// use bento_trace::Moment;
///
/// let m = Moment { seq: 10, live: 4096, live_blocks: 3, frames: 1, phase: None, nanos: 5000 };
/// assert!(m.phase.is_none());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Moment<'a> {
    /// The sequence number of the last record run.
    pub seq: u64,
    /// Bytes live (as asked).
    pub live: u64,
    /// Blocks live.
    pub live_blocks: u64,
    /// Frames ended so far.
    pub frames: u64,
    /// The phase that began at this record, if one did.
    pub phase: Option<&'a str>,
    /// Nanoseconds spent in the allocator so far (with the marks the replay writes).
    pub nanos: u64,
}

/// How [`replay`] runs.
///
/// ```
/// use bento_trace::ReplayOptions;
///
/// let o = ReplayOptions { sample_every: 1000, ..ReplayOptions::default() };
/// assert_eq!(o.sample_every, 1000);
/// assert_eq!(o.max_live, u64::MAX); // no bound unless asked
/// ```
///
/// A bound on the bytes live stops a replay before the record that would pass it,
/// with nothing left allocated:
///
/// ```
/// use allocator_api2::alloc::Global;
/// use bento_trace::{replay, ApiTarget, ReplayError, ReplayOptions, TraceReader, TraceWriter};
///
/// let mut w = TraceWriter::new(Vec::new()).unwrap();
/// w.alloc(1, 4096, 8, 0).unwrap();
/// w.alloc(2, 1 << 62, 8, 0).unwrap(); // 4 EiB: a corrupt size
/// let bytes = w.finish().unwrap();
/// let options = ReplayOptions { max_live: 1 << 30, ..ReplayOptions::default() };
/// let reader = TraceReader::new(&bytes[..]).unwrap();
/// let err = replay(&mut ApiTarget(&Global), reader, options, |_, _| {}).unwrap_err();
/// assert!(matches!(
///     err,
///     ReplayError::LiveLimit { seq: 1, live, limit: 1073741824 } if live == 4096 + (1 << 62)
/// ));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReplayOptions {
    /// Call the observer every this many records too (0: only at frames and phases).
    pub sample_every: u64,
    /// The most records decoded ahead of a timed run of them.
    pub batch: usize,
    /// Stop after the record with this sequence number (`u64::MAX`: at the end).
    /// Blocks live then are left allocated and listed in [`ReplayReport::left`].
    pub stop_after: u64,
    /// The most bytes live at once, as asked: an allocation or resize that would
    /// pass it is not made, and the replay stops with [`ReplayError::LiveLimit`].
    /// `u64::MAX` (the default): no bound, as a replay on an allocator that is not
    /// the machine's memory (a buffer, a budgeted heap) needs none; set it to the
    /// memory a replay on the operating system's pages may take.
    pub max_live: u64,
}

impl Default for ReplayOptions {
    fn default() -> Self {
        Self {
            sample_every: 0,
            batch: 4096,
            stop_after: u64::MAX,
            max_live: u64::MAX,
        }
    }
}

/// What [`replay`] did.
///
/// ```
/// use allocator_api2::alloc::Global;
/// use bento_trace::{replay, ApiTarget, ReplayOptions, TraceReader, TraceWriter};
///
/// let mut w = TraceWriter::new(Vec::new()).unwrap();
/// w.alloc(1, 100, 8, 0).unwrap();
/// w.alloc(2, 50, 8, 0).unwrap();
/// w.free(1).unwrap();
/// let bytes = w.finish().unwrap();
/// let reader = TraceReader::new(&bytes[..]).unwrap();
/// let r = replay(&mut ApiTarget(&Global), reader, ReplayOptions::default(), |_, _| {}).unwrap();
/// assert_eq!((r.peak_live, r.peak_seq, r.live_at_end, r.blocks_at_end), (150, 1, 50, 1));
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ReplayReport {
    /// Records read.
    pub records: u64,
    /// Allocations run (the failed ones included).
    pub allocs: u64,
    /// Frees run.
    pub frees: u64,
    /// Resizes run (the failed ones included).
    pub reallocs: u64,
    /// Frame records.
    pub frames: u64,
    /// Phase records.
    pub phases: u64,
    /// Allocations and resizes the target refused.
    pub failures: u64,
    /// The most bytes live at once, as asked.
    pub peak_live: u64,
    /// The sequence number at which `peak_live` was first reached.
    pub peak_seq: u64,
    /// The most blocks live at once.
    pub peak_blocks: u64,
    /// Bytes live at the end of the trace (freed by the replay afterwards).
    pub live_at_end: u64,
    /// Blocks live at the end of the trace.
    pub blocks_at_end: u64,
    /// Nanoseconds spent running the records (allocator calls, frame ends, phases and
    /// the replay's marks), not reading them or observing.
    pub nanos: u64,
    /// With [`ReplayOptions::stop_after`]: the blocks left live, as (address, bytes).
    pub left: Vec<(usize, usize)>,
}

/// Why a replay stopped.
///
/// ```
/// use bento_trace::ReplayError;
///
/// let e = ReplayError::UnknownId { seq: 4, id: 9 };
/// assert_eq!(e.to_string(), "record 4 names block 9, which is not live");
/// let e = ReplayError::LiveLimit { seq: 7, live: 1 << 40, limit: 1 << 30 };
/// assert_eq!(
///     e.to_string(),
///     "record 7 would make 1099511627776 bytes live, over the replay's bound of 1073741824"
/// );
/// ```
#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    /// The trace is unreadable.
    #[error(transparent)]
    Trace(#[from] TraceError),
    /// A free or resize names a block that is not live.
    #[error("record {seq} names block {id}, which is not live")]
    UnknownId {
        /// The record.
        seq: u64,
        /// The id.
        id: u64,
    },
    /// An allocation reuses the id of a live block.
    #[error("record {seq} allocates block {id}, which is already live")]
    DuplicateId {
        /// The record.
        seq: u64,
        /// The id.
        id: u64,
    },
    /// The target refused a frame end.
    #[error("record {seq}: {why}")]
    Frame {
        /// The record.
        seq: u64,
        /// The target's sentence.
        why: String,
    },
    /// An allocation or resize would hold more bytes live than
    /// [`ReplayOptions::max_live`]; it was not made.
    #[error("record {seq} would make {live} bytes live, over the replay's bound of {limit}")]
    LiveLimit {
        /// The record.
        seq: u64,
        /// The bytes that would be live after it (at most `u64::MAX`).
        live: u64,
        /// The bound, [`ReplayOptions::max_live`].
        limit: u64,
    },
}

/// A decoded record, with its block named by a slot of the replay's table.
#[derive(Clone, Copy, Debug)]
enum Op {
    /// `layout` is `None` when no allocator can give it.
    Alloc {
        seq: u64,
        slot: usize,
        layout: Option<Layout>,
        tag: u32,
    },
    Realloc {
        seq: u64,
        slot: usize,
        new: u64,
    },
    Free {
        slot: usize,
    },
}

/// Why a batch ended.
#[derive(Debug)]
enum Stop {
    Full,
    End,
    Frame,
    Phase(String),
    Sample,
    Limit,
    Failed(ReplayError),
}

/// The replay's table of blocks: a slot for each live trace id (slots are reused
/// once freed), so that running a record indexes a vector rather than hashing.
#[derive(Debug, Default)]
struct Table {
    by_id: HashMap<u64, usize>,
    free: Vec<usize>,
    blocks: Vec<Option<Live>>,
}

impl Table {
    fn open(&mut self, id: u64, seq: u64) -> Result<usize, ReplayError> {
        if self.by_id.contains_key(&id) {
            return Err(ReplayError::DuplicateId { seq, id });
        }
        let slot = self.free.pop().unwrap_or_else(|| {
            self.blocks.push(None);
            self.blocks.len() - 1
        });
        self.by_id.insert(id, slot);
        Ok(slot)
    }

    fn find(&self, id: u64, seq: u64) -> Result<usize, ReplayError> {
        self.by_id
            .get(&id)
            .copied()
            .ok_or(ReplayError::UnknownId { seq, id })
    }

    fn close(&mut self, id: u64, seq: u64) -> Result<usize, ReplayError> {
        let slot = self
            .by_id
            .remove(&id)
            .ok_or(ReplayError::UnknownId { seq, id })?;
        self.free.push(slot);
        Ok(slot)
    }
}

/// Replays the trace `reader` reads against `target`: each allocation, resize and
/// free in order, with each block's ends (and a byte of each page) written and
/// checked as in [`play`](crate::workload::play); a frame record calls
/// [`ReplayTarget::frame`] and a phase record [`ReplayTarget::phase`]; `observe` is
/// called with the target at each frame and phase (after the target's call), and every
/// [`ReplayOptions::sample_every`] records. Blocks the trace leaves live are freed at
/// the end.
///
/// Sizes of zero are replayed (and counted) as one byte. An allocation or resize the
/// target refuses, or one no allocator can give (no `Layout` holds it: see
/// [`Event::layout`]), counts as a failure, and the frees and resizes of a block
/// never allocated are skipped. Records are decoded in batches of
/// [`ReplayOptions::batch`]; only running them is timed.
///
/// # Errors
///
/// [`ReplayError`]: the trace is unreadable, names a block that is not live, asks
/// for more bytes live than [`ReplayOptions::max_live`] (that request is not made),
/// or the target refused a frame end. The records before the bad one have run, and
/// the blocks live then are freed before it returns.
///
/// # Panics
///
/// When a block's marks were overwritten: the target handed out overlapping memory.
///
/// ```
/// use allocator_api2::alloc::Global;
/// use bento_trace::workload::{record, Session, SessionConfig};
/// use bento_trace::{replay, ApiTarget, ReplayOptions, TraceReader, TraceWriter};
///
/// let config = SessionConfig { levels: 2, frames_per_level: 5, ..SessionConfig::DEMO };
/// let mut w = TraceWriter::new(Vec::new()).unwrap();
/// let counts = record(Session::new(config), &mut w).unwrap();
/// let bytes = w.finish().unwrap();
///
/// let mut frames = 0;
/// let reader = TraceReader::new(&bytes[..]).unwrap();
/// let report = replay(&mut ApiTarget(&Global), reader, ReplayOptions::default(), |m, _| {
///     frames = m.frames;
/// })
/// .unwrap();
/// assert_eq!((report.allocs, report.peak_live), (counts.allocs, counts.peak_live));
/// assert_eq!(frames, 10);
/// ```
pub fn replay<R: Read, T: ReplayTarget + ?Sized>(
    target: &mut T,
    mut reader: TraceReader<R>,
    options: ReplayOptions,
    mut observe: impl FnMut(&Moment<'_>, &T),
) -> Result<ReplayReport, ReplayError> {
    let mut table = Table::default();
    let mut r = ReplayReport::default();
    let cap = options.batch.max(1);
    let mut batch: Vec<Op> = Vec::with_capacity(cap);
    let mut since_sample = 0u64;
    let mut seq = 0u64;
    let mut limited = false;
    let outcome = loop {
        batch.clear();
        let mut stop = Stop::Full;
        while batch.len() < cap {
            let record = match reader.next_record() {
                Ok(Some(record)) => record,
                Ok(None) => {
                    stop = Stop::End;
                    break;
                }
                Err(e) => {
                    stop = Stop::Failed(e.into());
                    break;
                }
            };
            if record.seq > options.stop_after {
                // Past the limit (sequence numbers may skip it): not run.
                stop = Stop::Limit;
                break;
            }
            r.records += 1;
            seq = record.seq;
            let decoded = match record.event {
                Event::Alloc {
                    id,
                    size,
                    align,
                    tag,
                } => table.open(id, seq).map(|slot| {
                    batch.push(Op::Alloc {
                        seq,
                        slot,
                        layout: Event::layout(size, align),
                        tag,
                    });
                    None
                }),
                Event::Realloc { id, new_size } => table.find(id, seq).map(|slot| {
                    batch.push(Op::Realloc {
                        seq,
                        slot,
                        new: new_size,
                    });
                    None
                }),
                Event::Free { id } => table.close(id, seq).map(|slot| {
                    batch.push(Op::Free { slot });
                    None
                }),
                Event::Frame => Ok(Some(Stop::Frame)),
                Event::Phase(name) => Ok(Some(Stop::Phase(name))),
            };
            match decoded {
                Ok(None) => {}
                Ok(Some(moment)) => {
                    stop = moment;
                    break;
                }
                Err(e) => {
                    stop = Stop::Failed(e);
                    break;
                }
            }
            if seq >= options.stop_after {
                stop = Stop::Limit;
                break;
            }
            since_sample += 1;
            if options.sample_every != 0 && since_sample >= options.sample_every {
                stop = Stop::Sample;
                break;
            }
        }
        let start = Instant::now();
        let mut over = None;
        for &op in &batch {
            // SAFETY: the table's blocks are live in `target`, each marked with its
            // slot.
            let ran = unsafe { run_op(target, &mut table.blocks, &mut r, op, &options) };
            if let Err(e) = ran {
                // The records after it in the batch do not run.
                over = Some(e);
                break;
            }
        }
        r.nanos += start.elapsed().as_nanos() as u64;
        if let Some(e) = over {
            break Err(e);
        }
        let phase = match stop {
            Stop::Full => continue,
            Stop::End => break Ok(()),
            Stop::Limit => {
                limited = true;
                break Ok(());
            }
            Stop::Failed(e) => break Err(e),
            Stop::Frame => {
                r.frames += 1;
                // A frame's end is the allocator's work too (a tick may give memory
                // back): timed like the records.
                let start = Instant::now();
                let ended = target.frame();
                r.nanos += start.elapsed().as_nanos() as u64;
                if let Err(why) = ended {
                    break Err(ReplayError::Frame { seq, why });
                }
                None
            }
            Stop::Phase(name) => {
                r.phases += 1;
                let start = Instant::now();
                target.phase(&name);
                r.nanos += start.elapsed().as_nanos() as u64;
                Some(name)
            }
            Stop::Sample => None,
        };
        since_sample = 0;
        let moment = Moment {
            seq,
            live: r.live_at_end,
            live_blocks: r.blocks_at_end,
            frames: r.frames,
            phase: phase.as_deref(),
            nanos: r.nanos,
        };
        observe(&moment, target);
        if seq >= options.stop_after {
            // The limit fell on a frame or a phase.
            break Ok(());
        }
    };
    let stopped = outcome.is_ok() && (seq >= options.stop_after || limited);
    for (slot, block) in table.blocks.iter_mut().enumerate() {
        if let Some(live) = block.take() {
            if stopped {
                r.left.push((live.ptr.addr().get(), live.layout.size()));
            } else {
                // SAFETY: live in `target`, marked with its slot.
                unsafe { free_marked(target, live, slot) };
            }
        }
    }
    outcome.map(|()| r)
}

/// Runs one decoded record, keeping the report's counts; an allocation or resize
/// that would pass [`ReplayOptions::max_live`] is not made and is the error.
///
/// # Safety
///
/// Every block in `blocks` is live in `target` and marked with its slot.
unsafe fn run_op<T: ReplayTarget + ?Sized>(
    target: &mut T,
    blocks: &mut [Option<Live>],
    r: &mut ReplayReport,
    op: Op,
    options: &ReplayOptions,
) -> Result<(), ReplayError> {
    // The bytes live once `add` more are, checked against the bound.
    let within = |live: u64, add: usize, seq: u64| {
        let live = live.saturating_add(add as u64);
        if live > options.max_live {
            Err(ReplayError::LiveLimit {
                seq,
                live,
                limit: options.max_live,
            })
        } else {
            Ok(())
        }
    };
    match op {
        Op::Alloc {
            seq,
            slot,
            layout,
            tag,
        } => {
            if let Some(layout) = layout {
                within(r.live_at_end, layout.size(), seq)?;
            }
            r.allocs += 1;
            // SAFETY: the slot is empty: a fresh block.
            let block =
                layout.and_then(|layout| unsafe { alloc_marked(target, layout, tag, slot) });
            match block {
                Some(block) => {
                    blocks[slot] = Some(block);
                    r.live_at_end += block.layout.size() as u64;
                    r.blocks_at_end += 1;
                    r.peak_blocks = r.peak_blocks.max(r.blocks_at_end);
                    if r.live_at_end > r.peak_live {
                        r.peak_live = r.live_at_end;
                        r.peak_seq = seq;
                    }
                }
                None => r.failures += 1,
            }
        }
        Op::Realloc { seq, slot, new } => {
            let Some(block) = blocks[slot] else {
                r.reallocs += 1;
                return Ok(());
            };
            let new_layout = Event::layout(new, block.layout.align() as u64);
            if let Some(grown) = new_layout.and_then(|l| l.size().checked_sub(block.layout.size()))
            {
                within(r.live_at_end, grown, seq)?;
            }
            r.reallocs += 1;
            let resized = new_layout.and_then(|new| {
                // SAFETY: the caller's contract: `block` is live, marked with `slot`.
                unsafe { realloc_marked(target, block, new.size(), slot) }
            });
            match resized {
                Some(moved) => {
                    blocks[slot] = Some(moved);
                    r.live_at_end =
                        r.live_at_end - block.layout.size() as u64 + moved.layout.size() as u64;
                    if r.live_at_end > r.peak_live {
                        r.peak_live = r.live_at_end;
                        r.peak_seq = seq;
                    }
                }
                None => r.failures += 1,
            }
        }
        Op::Free { slot } => {
            r.frees += 1;
            if let Some(block) = blocks[slot].take() {
                // SAFETY: the caller's contract.
                unsafe { free_marked(target, block, slot) };
                r.live_at_end -= block.layout.size() as u64;
                r.blocks_at_end -= 1;
            }
        }
    }
    Ok(())
}
