//! One allocator's replay, as the child process reports it, and the table of them.

use serde::{Deserialize, Serialize};

use crate::latency::Latency;

/// A moment of a replay.
#[derive(Clone, Copy, Debug, Serialize, Deserialize)]
pub(crate) struct Sample {
    /// The record's sequence number.
    pub(crate) seq: u64,
    /// Bytes live, as asked.
    pub(crate) live: u64,
    /// The allocator's committed bytes by its own stats, or the growth of the
    /// process's resident set when it keeps none.
    pub(crate) committed: u64,
    /// The growth of the process's resident set since the replay began.
    pub(crate) rss: u64,
    /// Bytes of freed pages the allocator keeps committed for reuse (part of
    /// `committed`), by its own stats; 0 where it keeps none.
    #[serde(default)]
    pub(crate) kept: u64,
}

/// The OS calls of a replay's frames, for an allocator that counts its calls. A
/// frame's calls are those from the end of the frame before it, or the phase since
/// then (a level loaded), to its own end, that end included: so a level's loading
/// and unloading count in no frame. Warm-up is the first level; every stat but
/// `frames` and `warm_up_frames` counts the frames after it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct FrameCalls {
    /// Frames replayed.
    pub(crate) frames: u64,
    /// Frames of the warm-up: those before the second level finished loading.
    pub(crate) warm_up_frames: u64,
    /// Frames that made any OS call.
    pub(crate) frames_with_calls: u64,
    /// The most calls one frame made.
    pub(crate) max: u64,
    /// Calls the frames made: `inside_frames + at_frame_ends`.
    pub(crate) total: u64,
    /// Calls made while a frame ran: its allocations and frees.
    pub(crate) inside_frames: u64,
    /// Calls made as a frame ended: the retention giving back pages whose time is
    /// up, a frame arena's turn.
    pub(crate) at_frame_ends: u64,
}

/// What an allocator's retention of freed pages kept over a replay.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct KeptFigures {
    /// The most bytes it kept committed for reuse at a moment sampled.
    pub(crate) peak: u64,
    /// Bytes of kept pages it gave back to the OS over the replay.
    pub(crate) given_back: u64,
}

/// One frame's OS calls, as the replay saw them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct FrameCall {
    /// The frame record's sequence number.
    pub(crate) seq: u64,
    /// Calls made while the frame ran.
    pub(crate) inside: u64,
    /// Calls made as it ended.
    pub(crate) at_end: u64,
}

impl FrameCalls {
    /// The stats of `frames`, warm-up told by `phases` (see [`warm_up_end`]).
    pub(crate) fn new(frames: &[FrameCall], phases: &[(u64, String)]) -> Self {
        let end = warm_up_end(phases);
        let mut f = Self {
            frames: frames.len() as u64,
            ..Self::default()
        };
        for frame in frames {
            if end.is_some_and(|end| frame.seq <= end) {
                f.warm_up_frames += 1;
                continue;
            }
            let calls = frame.inside + frame.at_end;
            f.frames_with_calls += u64::from(calls > 0);
            f.max = f.max.max(calls);
            f.total += calls;
            f.inside_frames += frame.inside;
            f.at_frame_ends += frame.at_end;
        }
        f
    }
}

/// The sequence number where a replay's warm-up ends: the second phase named "…
/// loaded" ("level 1 loaded" in bento's sessions, whose levels count from 0). `None`
/// for a trace with no such phase (no warm-up); `u64::MAX` for a trace with one (a
/// single level, all warm-up).
pub(crate) fn warm_up_end(phases: &[(u64, String)]) -> Option<u64> {
    let mut loaded = phases.iter().filter(|(_, name)| name.ends_with("loaded"));
    match (loaded.next(), loaded.next()) {
        (None, _) => None,
        (Some(_), None) => Some(u64::MAX),
        (Some(_), Some((seq, _))) => Some(*seq),
    }
}

/// What one allocator did with a trace.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct Run {
    pub(crate) allocator: String,
    pub(crate) records: u64,
    /// Allocations, resizes and frees.
    pub(crate) ops: u64,
    /// Allocations and resizes: the requests an allocator may refuse.
    pub(crate) requests: u64,
    /// The requests refused (including those no allocator can give).
    pub(crate) failures: u64,
    /// Nanoseconds running the records.
    pub(crate) nanos: u64,
    pub(crate) peak_live: u64,
    /// The allocator's own peak of committed bytes, where it keeps stats.
    pub(crate) peak_committed: Option<u64>,
    /// The most the process's resident set grew over the replay, where `/proc`
    /// tells.
    pub(crate) peak_rss: Option<u64>,
    /// Calls to the OS, where the allocator counts them.
    pub(crate) os_calls: Option<u64>,
    /// Minor page faults of the process over the replay (where `/proc` tells).
    #[serde(default)]
    pub(crate) faults: Option<u64>,
    /// What the allocator holds by its own stats once the session is over and
    /// [`IDLE_FRAMES`](crate::child::IDLE_FRAMES) frames have passed.
    #[serde(default)]
    pub(crate) held_after_idle: Option<u64>,
    /// The OS calls of the frames, where the allocator counts its calls.
    #[serde(default)]
    pub(crate) frame_calls: Option<FrameCalls>,
    /// What the allocator's retention of freed pages kept, where it keeps stats.
    #[serde(default)]
    pub(crate) kept: Option<KeptFigures>,
    pub(crate) samples: Vec<Sample>,
    /// Phases, as (sequence number, name).
    pub(crate) phases: Vec<(u64, String)>,
    /// The subsystem heaps' report, for the bento set-up.
    pub(crate) heaps: Option<String>,
    /// Each operation's latency, from a timed replay of its own.
    #[serde(default)]
    pub(crate) latency: Option<Latency>,
    /// The sampled profile at the busiest moment, in pprof's format (`bento-prof`).
    #[serde(skip)]
    pub(crate) profile: Option<Vec<u8>>,
}

impl Run {
    /// Peak committed bytes: the allocator's own stat, or the resident set's growth
    /// (`None` where neither is known).
    pub(crate) fn footprint(&self) -> Option<u64> {
        self.peak_committed.or(self.peak_rss)
    }

    /// Committed bytes averaged over the replay (each sample weighted by the records
    /// since the one before): what the allocator held on average; the one sample's
    /// stat when every sample is of the first record.
    pub(crate) fn avg_committed(&self) -> u64 {
        let (mut sum, mut last) = (0u128, 0u64);
        for s in &self.samples {
            sum += u128::from(s.committed) * u128::from(s.seq.saturating_sub(last));
            last = last.max(s.seq);
        }
        if last == 0 {
            return self.samples.last().map_or(0, |s| s.committed);
        }
        u64::try_from(sum / u128::from(last)).unwrap_or(u64::MAX)
    }

    /// Footprint ÷ live bytes at their peaks: `None` where the footprint is not
    /// known, or nothing was live (see [`NO_RATIO`]).
    pub(crate) fn fragmentation(&self) -> Option<f64> {
        let footprint = self.footprint()?;
        (self.peak_live > 0).then(|| footprint as f64 / self.peak_live as f64)
    }

    /// Operations a second: `None` when the replay took no time it could measure.
    pub(crate) fn ops_per_sec(&self) -> Option<f64> {
        (self.nanos > 0).then(|| self.ops as f64 / (self.nanos as f64 / 1e9))
    }

    /// The stats a script reads (`--json`), without the samples.
    pub(crate) fn summary(&self) -> serde_json::Value {
        serde_json::json!({
            "allocator": self.allocator,
            "records": self.records,
            "ops": self.ops,
            "requests": self.requests,
            "failures": self.failures,
            "seconds": self.nanos as f64 / 1e9,
            "ops_per_sec": self.ops_per_sec(),
            "peak_live": self.peak_live,
            "peak_committed": self.peak_committed,
            "avg_committed": self.avg_committed(),
            "peak_rss_growth": self.peak_rss,
            "fragmentation": self.fragmentation(),
            "os_calls": self.os_calls,
            "os_calls_per_frame": self.frame_calls,
            "kept_for_reuse": self.kept,
            "page_faults": self.faults,
            "held_after_idle": self.held_after_idle,
            // Percentiles of no operations are none.
            "latency_ns": self.latency.map(|l| if l.ops == 0 {
                serde_json::json!({
                    "ops": 0, "p50": null, "p99": null, "p999": null, "p9999": null, "max": null,
                })
            } else {
                serde_json::json!(l)
            }),
        })
    }
}

/// Bytes in binary units, three significant stats: [`ByteSize`](bento_pages::ByteSize),
/// the one formatter of every bento report.
pub(crate) fn bytes(n: impl Into<u128>) -> String {
    bento_pages::ByteSize(n.into()).to_string()
}

/// A count with a k/M suffix.
pub(crate) fn count(v: f64) -> String {
    if v >= 1e6 {
        format!("{:.2} M", v / 1e6)
    } else if v >= 1e3 {
        format!("{:.1} k", v / 1e3)
    } else {
        format!("{v:.0}")
    }
}

/// Lays out rows under a header, each column as wide as its widest cell; the first
/// column to the left, the others to the right.
pub(crate) fn table(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |cells: &[String]| {
        let mut s = String::new();
        for (i, (cell, w)) in cells.iter().zip(&widths).enumerate() {
            if i == 0 {
                s.push_str(&format!("{cell:<w$}"));
            } else {
                s.push_str(&format!("  {cell:>w$}"));
            }
        }
        s.trim_end().to_owned()
    };
    let mut out = line(&header.iter().map(|h| h.to_string()).collect::<Vec<_>>());
    out.push('\n');
    out.push_str(&"-".repeat(widths.iter().sum::<usize>() + 2 * (widths.len() - 1)));
    for row in rows {
        out.push('\n');
        out.push_str(&line(row));
    }
    out
}

/// What a table shows for a stat this system does not tell (no `/proc`).
pub(crate) const NA: &str = "n/a";

/// What a table shows for a ratio or a percentile of nothing: committed ÷ live
/// when nothing was live, operations a second over no time, latencies of no
/// operations.
pub(crate) const NO_RATIO: &str = "—";

/// The table of runs `demo` and `replay` print.
pub(crate) fn runs_table(runs: &[Run]) -> String {
    let header = [
        "allocator",
        "refused",
        "time",
        "ops/s",
        "peak live",
        "peak committed",
        "avg committed",
        "peak RSS growth",
        "committed ÷ live",
        "OS calls",
        "OS calls in play",
        "page faults",
    ];
    let rows: Vec<Vec<String>> = runs
        .iter()
        .map(|r| {
            vec![
                r.allocator.clone(),
                match r.failures {
                    0 => "0".to_owned(),
                    n => format!("{n} of {}", r.requests),
                },
                format!("{:.1} ms", r.nanos as f64 / 1e6),
                r.ops_per_sec().map_or(NO_RATIO.to_owned(), count),
                bytes(r.peak_live),
                match (r.peak_committed, r.peak_rss) {
                    (Some(c), _) => bytes(c),
                    (None, Some(rss)) => format!("{} (RSS)", bytes(rss)),
                    (None, None) => NA.to_owned(),
                },
                bytes(r.avg_committed()),
                r.peak_rss.map_or(NA.to_owned(), bytes),
                match (r.footprint(), r.fragmentation()) {
                    (None, _) => NA.to_owned(),
                    (Some(_), None) => NO_RATIO.to_owned(),
                    (Some(_), Some(f)) => format!("{f:.3}"),
                },
                r.os_calls.map_or("-".to_owned(), |c| c.to_string()),
                r.frame_calls
                    .filter(|f| f.frames > 0)
                    .map_or("-".to_owned(), |f| f.inside_frames.to_string()),
                r.faults.map_or(NA.to_owned(), |f| f.to_string()),
            ]
        })
        .collect();
    let mut out = table(&header, &rows);
    out.push_str(
        "\n\nrefused: allocations and resizes the allocator refused (its stats then \
         leave those blocks out); time: in the allocator, writing each block's ends and a \
         byte of each page; \
         peak committed: the allocator's own stat (for `bento`, the sum of its parts' \
         peaks), or the growth of the process's resident set where it keeps none; \
         avg committed: that stat (or the resident set's growth) averaged over the \
         records; \
         OS calls: reserve, commit, decommit and release; OS calls in play: those the \
         allocations and frees inside the frames after the first level made (not the \
         pages given back as a frame ends, nor loading and unloading); page \
         faults: the minor faults of the process over the replay (a page touched for \
         the first time, or again after it was given back); -: the allocator keeps no \
         such stat; n/a: this system does not tell (no /proc); —: a ratio of \
         nothing (committed ÷ live when nothing was live, ops/s over no time).",
    );
    out
}

/// The table of each operation's latency, for the runs that were timed; `None` when
/// none was.
pub(crate) fn latency_table(runs: &[Run]) -> Option<String> {
    let header = [
        "latency (ns)",
        "operations",
        "p50",
        "p99",
        "p99.9",
        "p99.99",
        "max",
    ];
    let rows: Vec<Vec<String>> = runs
        .iter()
        .filter_map(|r| {
            let l = r.latency?;
            // No operations, no percentiles.
            let ns = |v: u64| {
                if l.ops == 0 {
                    NO_RATIO.to_owned()
                } else {
                    v.to_string()
                }
            };
            Some(vec![
                r.allocator.clone(),
                count(l.ops as f64),
                ns(l.p50),
                ns(l.p99),
                ns(l.p999),
                ns(l.p9999),
                ns(l.max),
            ])
        })
        .collect();
    if rows.is_empty() {
        return None;
    }
    let mut out = table(&header, &rows);
    out.push_str(
        "\n\nlatency: each allocation, resize and free timed on its own in a second replay \
         (the clock's own cost taken off), in nanoseconds: the median, the slowest 1 %, \
         0.1 % and 0.01 % start at p99, p99.9 and p99.99 (within a sixteenth), and the \
         slowest one.",
    );
    Some(out)
}

/// One line naming each allocator that refused requests and how many, or `None`
/// when none did: `demo` and `replay` end with it as an error.
pub(crate) fn refusals(runs: &[Run]) -> Option<String> {
    let each: Vec<String> = runs
        .iter()
        .filter(|r| r.failures > 0)
        .map(|r| {
            format!(
                "{} refused {} of {} allocations and resizes",
                r.allocator, r.failures, r.requests
            )
        })
        .collect();
    (!each.is_empty()).then(|| each.join("; "))
}

/// The resident set of this process, in bytes, or `None` where there is no `/proc`.
pub(crate) fn rss() -> Option<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    Some(pages * page_size())
}

/// The process's minor page faults so far (`/proc/self/stat`), or `None` where there
/// is no `/proc`.
pub(crate) fn minor_faults() -> Option<u64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // The fields after the command name, which is in parentheses and may hold spaces:
    // state, ppid, pgrp, session, tty_nr, tpgid, flags, minflt, ...
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(7)?.parse().ok()
}

fn page_size() -> u64 {
    use bento_pages::PageSource;
    bento_pages::SystemPages::new().page_size() as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[cfg(target_os = "linux")]
    fn minor_faults_grow_as_fresh_pages_are_touched() {
        let before = minor_faults().unwrap();
        // 64 MiB: a fresh mapping whatever the allocator keeps, its pages untouched
        // (one fault each, or one per huge page).
        let mut pages = vec![0u8; 64 << 20];
        for page in pages.chunks_mut(4096) {
            page[0] = 1;
        }
        std::hint::black_box(&pages);
        assert!(minor_faults().unwrap() >= before + 16);
    }

    fn phases(names: &[(u64, &str)]) -> Vec<(u64, String)> {
        names.iter().map(|(s, n)| (*s, n.to_string())).collect()
    }

    #[test]
    fn warm_up_is_the_first_level() {
        let session = phases(&[
            (0, "level 0 loading"),
            (10, "level 0 loaded"),
            (50, "level 0 unloading"),
            (60, "level 1 loading"),
            (70, "level 1 loaded"),
        ]);
        assert_eq!(warm_up_end(&session), Some(70));
        assert_eq!(warm_up_end(&session[..4]), Some(u64::MAX));
        assert_eq!(warm_up_end(&phases(&[(5, "menu")])), None);
        assert_eq!(warm_up_end(&[]), None);
    }

    #[test]
    fn frame_calls_count_the_frames_after_warm_up() {
        let session = phases(&[(10, "level 0 loaded"), (70, "level 1 loaded")]);
        let frame = |seq, inside, at_end| FrameCall {
            seq,
            inside,
            at_end,
        };
        let frames = [
            frame(20, 5, 0),
            frame(30, 1, 1),
            frame(80, 0, 0),
            frame(90, 2, 3),
            frame(100, 0, 1),
        ];
        let f = FrameCalls::new(&frames, &session);
        assert_eq!(
            f,
            FrameCalls {
                frames: 5,
                warm_up_frames: 2,
                frames_with_calls: 2,
                max: 5,
                total: 6,
                inside_frames: 2,
                at_frame_ends: 4,
            }
        );
        // Without levels, no warm-up.
        assert_eq!(FrameCalls::new(&frames, &[]).warm_up_frames, 0);
        assert_eq!(FrameCalls::new(&frames, &[]).total, 13);
    }

    fn run(name: &str) -> Run {
        Run {
            allocator: name.into(),
            records: 10,
            ops: 10,
            requests: 5,
            failures: 0,
            nanos: 1000,
            peak_live: 4096,
            peak_committed: None,
            peak_rss: Some(8192),
            os_calls: None,
            faults: Some(3),
            held_after_idle: None,
            frame_calls: None,
            kept: None,
            samples: Vec::new(),
            phases: Vec::new(),
            heaps: None,
            profile: None,
            latency: None,
        }
    }

    #[test]
    fn a_figure_the_system_does_not_tell_reads_n_a() {
        let known = run("known");
        let blind = Run {
            peak_rss: None,
            faults: None,
            ..run("blind")
        };
        let table = runs_table(&[known, blind]);
        let row = |name: &str| table.lines().find(|l| l.starts_with(name)).unwrap();
        // Peak committed, RSS growth, committed ÷ live and page faults.
        assert_eq!(row("blind").matches(" n/a").count(), 4, "{table}");
        assert!(!row("known").contains("n/a"), "{table}");
        assert!(row("known").contains("8.00 KiB (RSS)"), "{table}");
        // No latency measured, no latency table.
        assert!(latency_table(&[run("a")]).is_none());
    }

    #[test]
    fn a_ratio_of_nothing_reads_a_dash_not_a_figure() {
        let empty = Run {
            ops: 0,
            nanos: 0,
            peak_live: 0,
            peak_committed: Some(8_204_288),
            samples: vec![Sample {
                seq: 0,
                live: 0,
                committed: 8_204_288,
                rss: 0,
                kept: 0,
            }],
            ..run("empty")
        };
        assert_eq!((empty.fragmentation(), empty.ops_per_sec()), (None, None));
        // One sample, at the first record: its own stat is the average.
        assert_eq!(empty.avg_committed(), 8_204_288);
        let table = runs_table(std::slice::from_ref(&empty));
        let row = table.lines().find(|l| l.starts_with("empty")).unwrap();
        let cells: Vec<&str> = row.split_whitespace().collect();
        // ops/s, then committed ÷ live: a dash each, and no n/a (every stat is
        // known).
        assert_eq!(cells[4], "—", "{table}");
        assert_eq!(cells.iter().filter(|c| **c == "—").count(), 2, "{table}");
        assert!(!row.contains("n/a") && !row.contains("8204288"), "{table}");
        let json = empty.summary();
        assert!(json["fragmentation"].is_null() && json["ops_per_sec"].is_null());
        // A latency of no operations has no percentiles.
        let timed = Run {
            latency: Some(Latency::default()),
            ..empty
        };
        assert!(timed.summary()["latency_ns"]["p99"].is_null());
        let latency = latency_table(&[timed]).unwrap();
        assert_eq!(latency.matches('—').count(), 5, "{latency}");
    }

    #[test]
    fn a_table_lines_up_its_columns() {
        let t = table(
            &["name", "n"],
            &[
                vec!["a".into(), "100".into()],
                vec!["long".into(), "2".into()],
            ],
        );
        assert_eq!(t, "name    n\n---------\na     100\nlong    2");
    }
}
