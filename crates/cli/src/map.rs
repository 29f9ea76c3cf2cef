//! `bento map`: a memory space drawn part-way through a replay.

use std::path::Path;

use bento_pages::SystemPages;
use bento_space::{ChunkState, MemorySpace, SegmentKind};
use bento_trace::{ApiTarget, ReplayError, ReplayOptions, replay};

use crate::child::open;
use crate::inspect::scan;
use crate::limit::LiveBound;
use crate::run::bytes;

/// What a byte of a segment is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Category {
    /// In a live block (its chunk's tag included).
    Live,
    /// In a free or cached chunk, on a committed page.
    FreeCommitted,
    /// In a free chunk, on a page given back to the OS.
    Decommitted,
    /// The segment's header and end fence.
    Overhead,
}

impl Category {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::Live => "live",
            Self::FreeCommitted => "free, committed",
            Self::Decommitted => "decommitted",
            Self::Overhead => "overhead",
        }
    }

    const ALL: [Self; 4] = [
        Self::Live,
        Self::FreeCommitted,
        Self::Decommitted,
        Self::Overhead,
    ];
}

/// One segment: its kind, size and its bytes as runs of categories, in offsets from
/// its base.
#[derive(Clone, Debug)]
pub(crate) struct SegmentRow {
    pub(crate) kind: &'static str,
    pub(crate) size: usize,
    pub(crate) spans: Vec<(usize, usize, Category)>,
}

impl SegmentRow {
    /// The row drawn `width` pixels wide: each pixel takes the category most of its
    /// bytes are in, and neighbouring pixels of one category merge into a run
    /// `(first pixel, end pixel, category)`.
    pub(crate) fn runs(&self, width: usize) -> Vec<(usize, usize, Category)> {
        let mut bins = vec![[0usize; 4]; width];
        let scale = width as f64 / self.size.max(1) as f64;
        for &(start, end, c) in &self.spans {
            let k = Category::ALL.iter().position(|&x| x == c).unwrap_or(0);
            let (p0, p1) = ((start as f64 * scale), (end as f64 * scale));
            let first = (p0 as usize).min(width - 1);
            let last = ((p1.ceil() as usize).max(first + 1)).min(width);
            for (px, bin) in bins.iter_mut().enumerate().take(last).skip(first) {
                // The bytes of the span inside this pixel.
                let lo = (px as f64).max(p0);
                let hi = ((px + 1) as f64).min(p1);
                bin[k] += ((hi - lo).max(0.0) / scale) as usize + 1;
            }
        }
        let mut runs: Vec<(usize, usize, Category)> = Vec::new();
        for (px, bin) in bins.iter().enumerate() {
            let k = (0..4).max_by_key(|&k| bin[k]).unwrap_or(0);
            let c = Category::ALL[k];
            match runs.last_mut() {
                Some(last) if last.2 == c && last.1 == px => last.1 = px + 1,
                _ => runs.push((px, px + 1, c)),
            }
        }
        runs
    }

    /// Bytes of category `c`.
    pub(crate) fn total(&self, c: Category) -> usize {
        self.spans
            .iter()
            .filter(|s| s.2 == c)
            .map(|s| s.1 - s.0)
            .sum()
    }
}

/// The rows of every segment of `space`, in the order it walks them.
pub(crate) fn rows(space: &mut MemorySpace<SystemPages>) -> Vec<SegmentRow> {
    let mut rows: Vec<SegmentRow> = Vec::new();
    let mut current = None;
    for c in space.chunks() {
        let base = c.segment.addr().get();
        let at = c.ptr.addr().get() - base;
        if current != Some(base) {
            if let Some(row) = rows.last_mut() {
                close(row);
            }
            current = Some(base);
            rows.push(SegmentRow {
                kind: match c.kind {
                    SegmentKind::Ordinary => "segment",
                    SegmentKind::Dedicated => "dedicated",
                    SegmentKind::Base => "base",
                },
                size: c.segment_size,
                spans: vec![(0, at, Category::Overhead)],
            });
        }
        let row = rows.last_mut().expect("a row was just pushed");
        match c.state {
            ChunkState::Live => row.spans.push((at, at + c.size, Category::Live)),
            ChunkState::Cached => row.spans.push((at, at + c.size, Category::FreeCommitted)),
            ChunkState::Free => {
                let d = c.decommitted.clone();
                if d.is_empty() {
                    row.spans.push((at, at + c.size, Category::FreeCommitted));
                } else {
                    row.spans.push((at, at + d.start, Category::FreeCommitted));
                    row.spans
                        .push((at + d.start, at + d.end, Category::Decommitted));
                    row.spans
                        .push((at + d.end, at + c.size, Category::FreeCommitted));
                }
            }
        }
    }
    if let Some(row) = rows.last_mut() {
        close(row);
    }
    rows
}

/// Adds the end fence (whatever follows the last chunk) as overhead.
fn close(row: &mut SegmentRow) {
    let end = row.spans.last().map_or(0, |s| s.1);
    if end < row.size {
        row.spans.push((end, row.size, Category::Overhead));
    }
}

/// Replays `trace` on a fresh memory space up to record `seq` and returns its rows;
/// a record that would hold more bytes live than `bound` stops it with an error.
pub(crate) fn map_at(trace: &Path, seq: u64, bound: LiveBound) -> Result<Vec<SegmentRow>, String> {
    let mut space = crate::setup::new_space()?;
    let options = ReplayOptions {
        stop_after: seq,
        max_live: bound.bytes().unwrap_or(u64::MAX),
        ..ReplayOptions::default()
    };
    replay(&mut ApiTarget(&&space), open(trace)?, options, |_, _| {}).map_err(|e| match e {
        ReplayError::LiveLimit { seq, live, .. } => bound.refusal(
            trace,
            &format!("the {} that record {seq} would make live", bytes(live)),
        ),
        e => format!("{}: {e}", trace.display()),
    })?;
    space
        .validate()
        .map_err(|e| format!("the space is corrupt: {e}"))?;
    let rows = rows(&mut space);
    // Dropping the space gives every segment back, the blocks left live with them.
    drop(space);
    Ok(rows)
}

/// Resolves `--at`: a sequence number (at most the trace's last), `peak` or `end`.
/// A trace of no records has nothing to draw: an error.
pub(crate) fn resolve_at(trace: &Path, at: &str) -> Result<u64, String> {
    let wanted = match at {
        "peak" | "end" => None,
        n => Some(n.parse::<u64>().map_err(|_| {
            format!("bad --at `{n}`: expected a record's sequence number, `peak` or `end`")
        })?),
    };
    let s = scan(trace)?;
    if s.records == 0 {
        return Err(format!(
            "{}: an empty trace: it holds no records to draw",
            trace.display()
        ));
    }
    match wanted {
        None if at == "peak" => Ok(s.peak_seq),
        None => Ok(s.before_final_frees),
        Some(n) if n > s.last_seq => Err(format!(
            "--at {n} is past the trace's last record, {}",
            s.last_seq
        )),
        Some(n) => Ok(n),
    }
}

/// One line of totals for a map.
pub(crate) fn summary(rows: &[SegmentRow]) -> String {
    let sum = |c| rows.iter().map(|r| r.total(c)).sum::<usize>() as u64;
    format!(
        "{} segments: {} live, {} free and committed, {} decommitted, {} overhead",
        rows.len(),
        bytes(sum(Category::Live)),
        bytes(sum(Category::FreeCommitted)),
        bytes(sum(Category::Decommitted)),
        bytes(sum(Category::Overhead)),
    )
}

/// `bento map`'s rows: the space after the record `at` names (see [`resolve_at`]),
/// with that record's sequence number, its replay held within `bound`. The caller
/// draws them.
pub(crate) fn rows_at(
    trace: &Path,
    at: &str,
    bound: LiveBound,
) -> Result<(u64, Vec<SegmentRow>), String> {
    let seq = resolve_at(trace, at)?;
    Ok((seq, map_at(trace, seq, bound)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_row_is_coloured_by_what_most_of_each_pixel_holds() {
        let row = SegmentRow {
            kind: "segment",
            size: 1000,
            spans: vec![
                (0, 10, Category::Overhead),
                (10, 500, Category::Live),
                (500, 900, Category::Decommitted),
                (900, 1000, Category::FreeCommitted),
            ],
        };
        let runs = row.runs(10);
        assert_eq!(
            runs,
            [
                (0, 5, Category::Live),
                (5, 9, Category::Decommitted),
                (9, 10, Category::FreeCommitted)
            ]
        );
        assert_eq!(row.total(Category::Live), 490);
    }
}
