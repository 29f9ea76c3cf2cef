//! `bento inspect --born A..B | --phase NAME [--live-at C]`: the blocks a window of
//! frames (or a phase) allocated that are still live at the end of a later frame,
//! by tag and by size: what a level left behind, read from its trace.
//!
//! Frames are numbered from 0: frame `k` holds the records after the `k`-th frame
//! mark (`Frame` record) up to and including the next one; the records before the
//! first mark are frame 0. A phase lasts from its `Phase` record to the next one;
//! `--phase NAME` takes every stretch of the trace named NAME.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use bento_trace::Event;
use bento_trace::workload::tags;
use serde::Serialize;

use crate::child::open;
use crate::out;
use crate::run::{bytes, table};

/// Which allocations a query asks about.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Born {
    /// Those made in frames `first..=last`.
    Frames(u64, u64),
    /// Those made while the phase of this name was the trace's.
    Phase(String),
}

impl Born {
    /// Parses `--born`'s value: `A..B` (both included) or one frame `A`.
    pub(crate) fn frames(text: &str) -> Result<Self, String> {
        let number = |s: &str| {
            s.trim().parse::<u64>().map_err(|_| {
                format!(
                    "--born {text}: `{s}` is not a frame number (0 to {})",
                    u64::MAX
                )
            })
        };
        let (first, last) = match text.split_once("..") {
            Some((a, b)) => (number(a)?, number(b)?),
            None => {
                let a = number(text)?;
                (a, a)
            }
        };
        if first > last {
            return Err(format!(
                "--born {text}: the window ends (frame {last}) before it starts (frame {first})"
            ));
        }
        Ok(Self::Frames(first, last))
    }

    fn describe(&self) -> String {
        match self {
            Self::Frames(a, b) if a == b => format!("frame {a}"),
            Self::Frames(a, b) => format!("frames {a}..{b}"),
            Self::Phase(name) => format!("phase \"{name}\""),
        }
    }
}

/// Blocks and bytes.
#[derive(Clone, Copy, Debug, Default, Serialize, PartialEq, Eq)]
pub(crate) struct Count {
    pub(crate) blocks: u64,
    pub(crate) bytes: u128,
}

impl Count {
    fn add(&mut self, size: u64) {
        self.blocks += 1;
        self.bytes += u128::from(size);
    }
}

/// What a query found.
#[derive(Clone, Debug, Default, Serialize)]
pub(crate) struct Leaks {
    /// The window, in words.
    pub(crate) born: String,
    /// The frame at whose end the blocks were still live (`None`: the trace's end).
    pub(crate) live_at: Option<u64>,
    /// Frame marks read: up to the end of frame `live_at`, or all the trace's.
    pub(crate) frames: u64,
    /// The window's allocations, and those of them still live.
    pub(crate) allocated: Count,
    pub(crate) live: Count,
    /// The live ones by tag name, and by power-of-two size (`"1 KiB"`: 1 KiB to just
    /// under 2 KiB).
    pub(crate) by_tag: BTreeMap<String, Count>,
    pub(crate) by_size: BTreeMap<u64, Count>,
    /// By tag and size together: the heap profile's samples.
    #[serde(skip)]
    pub(crate) by_tag_size: BTreeMap<(String, u64), Count>,
}

/// Reads `trace` and answers the query: the blocks `born` allocated still live at the
/// end of frame `live_at` (the end of the trace for `None`).
pub(crate) fn leaks(trace: &Path, born: &Born, live_at: Option<u64>) -> Result<Leaks, String> {
    if let (Born::Frames(_, last), Some(at)) = (born, live_at)
        && at < *last
    {
        return Err(format!(
            "--live-at {at}: before the window ends (frame {last}); a block cannot be \
             live before it is made"
        ));
    }
    let mut reader = open(trace)?;
    // Live blocks of the window: id → (size, tag).
    let mut live: HashMap<u64, (u64, u32)> = HashMap::new();
    let mut frame = 0u64;
    let mut phase: Option<String> = None;
    let mut allocated = Count::default();
    let mut stopped = false;
    while let Some(record) = reader
        .next_record()
        .map_err(|e| format!("{}: {e}", trace.display()))?
    {
        match record.event {
            Event::Alloc { id, size, tag, .. } => {
                let inside = match born {
                    Born::Frames(a, b) => (*a..=*b).contains(&frame),
                    Born::Phase(name) => phase.as_deref() == Some(name.as_str()),
                };
                // An id allocated again while live: the trace's writer lost a free;
                // the new block replaces the old, as a replay treats it.
                live.remove(&id);
                if inside {
                    allocated.add(size);
                    live.insert(id, (size, tag));
                }
            }
            Event::Free { id } => {
                live.remove(&id);
            }
            Event::Realloc { id, new_size } => {
                if let Some((size, _)) = live.get_mut(&id) {
                    *size = new_size;
                }
            }
            Event::Frame => {
                if live_at == Some(frame) {
                    stopped = true;
                    break;
                }
                frame += 1;
            }
            Event::Phase(name) => phase = Some(name),
        }
    }
    // The trace's last frame may end without a mark: its end is the trace's.
    if let Some(at) = live_at
        && !stopped
        && at > frame
    {
        return Err(format!(
            "--live-at {at}: {} holds {frame} frame marks (frames 0 to {frame})",
            trace.display()
        ));
    }
    let mut found = Leaks {
        born: born.describe(),
        live_at,
        frames: frame,
        allocated,
        ..Leaks::default()
    };
    for &(size, tag) in live.values() {
        found.live.add(size);
        found
            .by_tag
            .entry(tags::name(tag).into_owned())
            .or_default()
            .add(size);
        let bucket = if size == 0 { 0 } else { 1 << size.ilog2() };
        found.by_size.entry(bucket).or_default().add(size);
        found
            .by_tag_size
            .entry((tags::name(tag).into_owned(), bucket))
            .or_default()
            .add(size);
    }
    Ok(found)
}

/// The answer as text: a line, then tables by tag and by size.
pub(crate) fn report(trace: &Path, l: &Leaks) -> String {
    let at = match l.live_at {
        Some(f) => format!("at the end of frame {f}"),
        None => "at the end of the trace".to_owned(),
    };
    let mut s = format!(
        "{}: of the {} blocks ({}) allocated in {}, {} ({}) are still live {at}\n",
        trace.display(),
        l.allocated.blocks,
        bytes(l.allocated.bytes),
        l.born,
        l.live.blocks,
        bytes(l.live.bytes),
    );
    if l.live.blocks == 0 {
        s.pop();
        return s;
    }
    let row = |name: String, c: &Count| vec![name, c.blocks.to_string(), bytes(c.bytes)];
    let tags: Vec<Vec<String>> = l.by_tag.iter().map(|(t, c)| row(t.clone(), c)).collect();
    s.push('\n');
    s.push_str(&table(&["tag", "blocks", "bytes"], &tags));
    let sizes: Vec<Vec<String>> = l.by_size.iter().map(|(&b, c)| row(bytes(b), c)).collect();
    s.push('\n');
    s.push_str(&table(&["size from", "blocks", "bytes"], &sizes));
    s
}

/// The live blocks of `l` as a pprof heap profile: a sample per tag and size, under
/// a two-frame stack (the size's power of two, then the tag), labelled with the tag.
pub(crate) fn profile(l: &Leaks) -> Vec<u8> {
    let mut p = crate::pprof::Profile::new();
    for ((tag, bucket), c) in &l.by_tag_size {
        let size = format!("blocks from {}", bytes(*bucket));
        let owner = format!("tag {tag}");
        p.sample(&[&size, &owner], c.blocks, c.bytes, &[("tag", tag)]);
    }
    p.encode()
}

/// Where `bento inspect --born | --phase` puts what it found: a chart, a profile.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Outputs<'a> {
    pub(crate) chart: Option<&'a Path>,
    pub(crate) pprof: Option<&'a Path>,
}

/// `bento inspect --born | --phase`: the answer as tables (or JSON), and its chart
/// and heap profile when asked for.
pub(crate) fn query(
    trace: &Path,
    born: &Born,
    live_at: Option<u64>,
    json: bool,
    outputs: Outputs<'_>,
) -> Result<(), String> {
    let found = leaks(trace, born, live_at)?;
    let chart = outputs.chart;
    if let Some(pb) = outputs.pprof {
        crate::output::write_bytes(pb, &profile(&found))?;
    }
    if let Some(svg) = chart {
        let title = format!(
            "{}: allocated in {}, live at {}",
            trace
                .file_name()
                .map_or("trace".into(), |n| n.to_string_lossy()),
            found.born,
            live_at.map_or("the end".to_owned(), |f| format!("frame {f}'s end")),
        );
        let rows: Vec<(&str, u64, u128)> = found
            .by_tag
            .iter()
            .map(|(tag, c)| (tag.as_str(), c.blocks, c.bytes))
            .collect();
        let summary = format!(
            "{} of {} blocks still live, {} of {}",
            found.live.blocks,
            found.allocated.blocks,
            bytes(found.live.bytes),
            bytes(found.allocated.bytes)
        );
        crate::chart::leak_chart(&rows, &summary, &title, svg)?;
    }
    if json {
        out!(
            "{}",
            serde_json::to_string_pretty(&found).map_err(|e| e.to_string())?
        );
    } else {
        out!("{}", report(trace, &found));
        for written in [chart, outputs.pprof].into_iter().flatten() {
            out!("wrote {}", written.display());
        }
    }
    Ok(())
}
