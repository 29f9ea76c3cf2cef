//! `bento inspect`: what a trace asks for, without replaying it.

use crate::out;
use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use bento_trace::Event;
use bento_trace::workload::tags;
use serde::Serialize;

use crate::child::open;
use crate::run::{bytes, count, table};

/// Power-of-two buckets: bucket `k` counts values in `[2^k, 2^(k+1))` (0 in bucket 0).
#[derive(Clone, Debug, Default, Serialize)]
pub(crate) struct Histogram {
    /// (bucket, count, sum of the values). A sum is a `u128`: 2^64 values of at most
    /// 2^64 - 1 each cannot overflow it.
    buckets: BTreeMap<u32, (u64, u128)>,
}

impl Histogram {
    fn add(&mut self, v: u64) {
        let k = if v == 0 { 0 } else { v.ilog2() };
        let e = self.buckets.entry(k).or_default();
        e.0 += 1;
        e.1 += u128::from(v);
    }
}

/// Per tag: allocations and bytes asked. Sums of sizes are `u128`s, which the sizes a
/// trace can hold (below 2^64 each, fewer than 2^64 of them) cannot overflow.
#[derive(Clone, Debug, Default, Serialize)]
struct TagFigures {
    allocs: u64,
    bytes: u128,
    peak_live: u128,
    live: u128,
}

/// A trace's stats, read in one pass.
#[derive(Clone, Debug, Default, Serialize)]
pub(crate) struct Scan {
    pub(crate) records: u64,
    pub(crate) allocs: u64,
    pub(crate) frees: u64,
    pub(crate) reallocs: u64,
    pub(crate) frames: u64,
    pub(crate) phases: u64,
    /// Allocations and resizes no `Layout` can hold (over `isize::MAX` bytes with
    /// their alignment), which a replay counts as refused: such an allocation counts
    /// in the sizes asked but is never live; such a resize leaves its block as it was.
    pub(crate) impossible: u64,
    pub(crate) peak_live: u128,
    /// The record at which `peak_live` was first reached.
    pub(crate) peak_seq: u64,
    pub(crate) peak_blocks: u64,
    /// The last record's sequence number.
    pub(crate) last_seq: u64,
    /// The last record before the frees that end the trace: the moment `map --at
    /// end` draws.
    pub(crate) before_final_frees: u64,
    /// Blocks the trace never frees, and their bytes.
    pub(crate) never_freed: u64,
    pub(crate) never_freed_bytes: u128,
    sizes: Histogram,
    /// Records from a block's allocation to its free.
    lifetimes: Histogram,
    tags: BTreeMap<u32, TagFigures>,
}

/// Reads the whole trace into a [`Scan`]. Its stats of live blocks are those a
/// replay finds on an allocator that refuses nothing it can give.
pub(crate) fn scan(trace: &Path) -> Result<Scan, String> {
    let mut reader = open(trace)?;
    let mut s = Scan::default();
    // Live blocks: (size, align, tag, seq of the allocation).
    let mut live: HashMap<u64, (u64, u64, u32, u64)> = HashMap::new();
    let (mut live_bytes, mut in_final_frees) = (0u128, false);
    while let Some(record) = reader
        .next_record()
        .map_err(|e| format!("{}: {e}", trace.display()))?
    {
        s.records += 1;
        s.last_seq = record.seq;
        let is_free = matches!(record.event, Event::Free { .. });
        if !is_free {
            in_final_frees = false;
        } else if !in_final_frees {
            in_final_frees = true;
            s.before_final_frees = record.seq.saturating_sub(1);
        }
        match record.event {
            Event::Alloc {
                id,
                size,
                align,
                tag,
            } => {
                s.allocs += 1;
                s.sizes.add(size);
                let t = s.tags.entry(tag).or_default();
                t.allocs += 1;
                t.bytes += u128::from(size);
                if Event::layout(size, align).is_none() {
                    s.impossible += 1;
                } else {
                    t.live += u128::from(size);
                    t.peak_live = t.peak_live.max(t.live);
                    live_bytes += u128::from(size);
                    if let Some((old, _, old_tag, _)) =
                        live.insert(id, (size, align, tag, record.seq))
                    {
                        // A duplicate id: the replayer refuses it; count the block once.
                        live_bytes -= u128::from(old);
                        if let Some(t) = s.tags.get_mut(&old_tag) {
                            t.live -= u128::from(old);
                        }
                    }
                }
            }
            Event::Free { id } => {
                s.frees += 1;
                if let Some((size, _, tag, born)) = live.remove(&id) {
                    live_bytes -= u128::from(size);
                    // Sequence numbers increase through a trace.
                    s.lifetimes.add(record.seq - born);
                    if let Some(t) = s.tags.get_mut(&tag) {
                        t.live -= u128::from(size);
                    }
                }
            }
            Event::Realloc { id, new_size } => {
                s.reallocs += 1;
                if let Some((size, align, tag, _)) = live.get_mut(&id) {
                    if Event::layout(new_size, *align).is_none() {
                        s.impossible += 1;
                    } else {
                        live_bytes = live_bytes - u128::from(*size) + u128::from(new_size);
                        if let Some(t) = s.tags.get_mut(tag) {
                            t.live = t.live - u128::from(*size) + u128::from(new_size);
                            t.peak_live = t.peak_live.max(t.live);
                        }
                        *size = new_size;
                    }
                }
            }
            Event::Frame => s.frames += 1,
            Event::Phase(_) => s.phases += 1,
        }
        if live_bytes > s.peak_live {
            s.peak_live = live_bytes;
            s.peak_seq = record.seq;
        }
        s.peak_blocks = s.peak_blocks.max(live.len() as u64);
    }
    if !in_final_frees {
        s.before_final_frees = s.last_seq;
    }
    s.never_freed = live.len() as u64;
    s.never_freed_bytes = live.values().map(|v| u128::from(v.0)).sum();
    Ok(s)
}

fn histogram_table(h: &Histogram, what: &str, unit: impl Fn(u64) -> String) -> String {
    let total: u64 = h.buckets.values().map(|v| v.0).sum();
    let rows: Vec<Vec<String>> = h
        .buckets
        .iter()
        .map(|(&k, &(n, _))| {
            // Bucket `k` (at most 63) holds `[2^k, 2^(k+1) - 1]`.
            let lo = if k == 0 { 0 } else { 1u64 << k };
            let hi = u64::MAX >> (63 - k);
            let share = n as f64 / total.max(1) as f64;
            vec![
                format!("{} – {}", unit(lo), unit(hi)),
                n.to_string(),
                format!("{:.1}%", 100.0 * share),
                "#".repeat((share * 40.0).ceil() as usize),
            ]
        })
        .collect();
    table(&[what, "count", "share", ""], &rows)
}

/// `bento inspect`.
pub(crate) fn inspect(trace: &Path, json: bool) -> Result<(), String> {
    let s = scan(trace)?;
    if s.records == 0 && !json {
        // A 0-byte file is a trace whose recorder stopped before writing its header.
        let note = match std::fs::metadata(trace) {
            Ok(m) if m.len() == 0 => " (an empty file: its recorder wrote no header)",
            _ => "",
        };
        out!(
            "{}: an empty trace: it holds no records{note}",
            trace.display()
        );
        return Ok(());
    }
    if json {
        out!(
            "{}",
            serde_json::to_string_pretty(&s).map_err(|e| e.to_string())?
        );
        return Ok(());
    }
    out!("{}", trace.display());
    out!(
        "{} records: {} allocations, {} frees, {} resizes, {} frames, {} phases",
        s.records,
        s.allocs,
        s.frees,
        s.reallocs,
        s.frames,
        s.phases
    );
    if s.impossible > 0 {
        out!(
            "impossible: {} requests ask for more than isize::MAX bytes, which no \
             allocator can give; a replay counts them as refused",
            s.impossible
        );
    }
    out!(
        "peak live: {} in {} blocks (at record {}); never freed: {} blocks, {}\n",
        bytes(s.peak_live),
        count(s.peak_blocks as f64),
        s.peak_seq,
        s.never_freed,
        bytes(s.never_freed_bytes)
    );
    out!("{}\n", histogram_table(&s.sizes, "size", bytes));
    out!(
        "{}\n",
        histogram_table(&s.lifetimes, "lifetime (records)", |v| v.to_string())
    );
    let rows: Vec<Vec<String>> = s
        .tags
        .iter()
        .map(|(&tag, t)| {
            vec![
                tags::name(tag).into_owned(),
                t.allocs.to_string(),
                bytes(t.bytes),
                bytes(t.peak_live),
            ]
        })
        .collect();
    out!(
        "{}",
        table(&["tag", "allocations", "bytes asked", "peak live"], &rows)
    );
    Ok(())
}
