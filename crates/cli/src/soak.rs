//! `bento soak`: a long session on each allocator. For those that can be bounded —
//! bento's over fixed memory (`LimitedPages`), talc, rlsf and dlmalloc-rs over a fixed
//! arena — the least memory in which the first hour plays, and the whole session,
//! with no refused request (a bisection); for the system allocator, mimalloc and
//! jemalloc, which cannot be bounded, the resident set hour by hour, each in a fresh
//! process. Every row has its stats hour by hour from a run with memory to spare:
//! what it held ÷ what was live, and its OS calls inside gameplay frames. A recorded
//! trace can be soaked in place of the long session: played in a loop, each loop an
//! hour of the stats.

use std::path::{Path, PathBuf};
use std::process::Command;

use bento_common::CommonAllocator;
use bento_pages::{LimitedPages, SystemPages};
use bento_space::{MemorySpace, SpaceConfig};
use bento_trace::workload::LongConfig;
use bento_trace::{
    Footprint, GlobalTarget, ReplayOptions, ReplayTarget, SoakRun, TraceError, TraceReader,
    Wrapper, least_memory, soak, soak_trace,
};
use serde::{Deserialize, Serialize};

use crate::arena::{self, PEERS};
use crate::chart::SoakLine;
use crate::run::{NO_RATIO, bytes, rss, table};
use crate::setup::{self, Bento, Linear, Measured, Parts};

/// The allocators `soak` runs, in the order its table lists them.
pub(crate) const SOAK_ALLOCATORS: &[&str] = &[
    "bento",
    "common",
    "space",
    "talc",
    "rlsf",
    "dlmalloc",
    "system",
    #[cfg(feature = "mimalloc")]
    "mimalloc",
    #[cfg(all(feature = "jemalloc", unix))]
    "jemalloc",
];

/// Parses an allocator of `--allocators`: one of [`SOAK_ALLOCATORS`].
pub(crate) fn parse_name(name: &str) -> Result<String, String> {
    if SOAK_ALLOCATORS.contains(&name) {
        Ok(name.to_owned())
    } else {
        setup::check_name(name)?;
        Err(format!(
            "`{name}` is not one `soak` runs: expected one of {}",
            SOAK_ALLOCATORS.join(", ")
        ))
    }
}

/// Whether `name` can be bounded: run over fixed memory, its least memory bisected.
fn bounded(name: &str) -> bool {
    matches!(name, "bento" | "common" | "space") || PEERS.contains(&name)
}

/// The session `soak` plays.
pub(crate) fn session(hours: usize, frames: usize) -> LongConfig {
    LongConfig {
        hours,
        frames_per_level: frames,
        ..LongConfig::HUNDRED_HOURS
    }
}

/// What a soak plays: the long session, or a recorded trace in a loop.
#[derive(Clone, Debug)]
pub(crate) enum Play {
    /// [`LongConfig`]'s session.
    Long(LongConfig),
    /// A trace played `loops` times, each loop an hour, holding at most `max_live`
    /// bytes live (`u64::MAX`: no bound).
    Trace {
        path: PathBuf,
        loops: usize,
        max_live: u64,
    },
}

impl Play {
    /// Its hours: the session's, or the loops.
    fn hours(&self) -> usize {
        match self {
            Self::Long(c) => c.hours,
            Self::Trace { loops, .. } => *loops,
        }
    }

    /// Its first hour alone.
    fn first(&self) -> Self {
        match self {
            Self::Long(c) => Self::Long(LongConfig { hours: 1, ..*c }),
            Self::Trace { path, max_live, .. } => Self::Trace {
                path: path.clone(),
                loops: 1,
                max_live: *max_live,
            },
        }
    }

    /// Plays it on `target`.
    fn run<T: ReplayTarget + ?Sized>(&self, target: &mut T) -> Result<SoakRun, String> {
        match self {
            Self::Long(c) => Ok(soak(target, *c)),
            Self::Trace {
                path,
                loops,
                max_live,
            } => {
                let open = || {
                    let file = std::fs::File::open(path)
                        .map_err(|source| TraceError::Io { offset: 0, source })?;
                    TraceReader::new(file)
                };
                let options = ReplayOptions {
                    max_live: *max_live,
                    ..ReplayOptions::default()
                };
                soak_trace(target, open, *loops, options)
                    .map_err(|e| format!("{}: {e}", path.display()))
            }
        }
    }

    /// The most bytes live in each hour, as asked.
    fn live_by_hour(&self) -> Result<Vec<u64>, String> {
        match self {
            Self::Long(c) => Ok(live_by_hour(*c)),
            Self::Trace { path, loops, .. } => {
                let peak = crate::inspect::scan(path)?.peak_live;
                Ok(vec![u64::try_from(peak).unwrap_or(u64::MAX); *loops])
            }
        }
    }

    /// What it plays, for the table's note and the chart's title.
    fn describe(&self) -> String {
        match self {
            Self::Long(c) => format!(
                "{} hours of {} levels of {} frames",
                c.hours, c.levels_per_hour, c.frames_per_level
            ),
            Self::Trace { path, loops, .. } => {
                format!("{} played {loops} times, each an hour", path.display())
            }
        }
    }
}

/// One hour of a row.
#[derive(Clone, Copy, Debug, Serialize, Deserialize)]
pub(crate) struct Hour {
    pub(crate) hour: usize,
    pub(crate) peak_live: u64,
    /// The most it held at a checkpoint: committed for the bounded, the growth of the
    /// resident set for the others.
    pub(crate) peak_held: u64,
    pub(crate) refused: u64,
    pub(crate) frame_os_calls: u64,
    /// The largest free block after each level loaded, the least of the hour (bento's
    /// rows; `None` for the others, which do not tell).
    pub(crate) largest_free: Option<u64>,
}

/// One allocator's soak.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct Row {
    pub(crate) allocator: String,
    /// Whether it ran over fixed memory (else: by its resident set).
    pub(crate) bounded: bool,
    /// The most bytes live in the first hour, and in the session.
    pub(crate) first_hour_live: u64,
    pub(crate) session_live: u64,
    /// The least fixed memory in which the first hour, and the session, play with no
    /// refused request (bounded allocators only; `None` when the search's ceiling
    /// was not enough).
    pub(crate) first_hour_least: Option<u64>,
    pub(crate) session_least: Option<u64>,
    /// Hour by hour, from a run with memory to spare.
    pub(crate) hours: Vec<Hour>,
}

impl Row {
    /// The least memory of the session as a multiple of its peak live, over the same
    /// multiple for the first hour: 1.0 is flat (memory grows only as the live
    /// bytes do).
    pub(crate) fn flatness(&self) -> Option<f64> {
        let first = self.first_hour_least? as f64 / self.first_hour_live.max(1) as f64;
        let whole = self.session_least? as f64 / self.session_live.max(1) as f64;
        Some(whole / first)
    }

    /// The most it held in any hour.
    pub(crate) fn peak_held(&self) -> u64 {
        self.hours.iter().map(|h| h.peak_held).max().unwrap_or(0)
    }

    /// OS calls inside gameplay frames after the first hour.
    pub(crate) fn frame_os_calls_after_first_hour(&self) -> u64 {
        self.hours.iter().skip(1).map(|h| h.frame_os_calls).sum()
    }

    /// The row as `--json` prints it: its fields and the stats made of them.
    fn summary(&self) -> serde_json::Value {
        let mut v = serde_json::to_value(self).unwrap_or_default();
        v["flatness"] = self.flatness().into();
        v["peak_held"] = self.peak_held().into();
        v["frame_os_calls_after_first_hour"] = if self.bounded {
            self.frame_os_calls_after_first_hour().into()
        } else {
            serde_json::Value::Null
        };
        v
    }
}

fn hours_of(run: &SoakRun) -> Vec<Hour> {
    run.hours
        .iter()
        .map(|h| Hour {
            hour: h.hour,
            peak_live: h.peak_live as u64,
            peak_held: h.peak_committed as u64,
            refused: h.refused as u64,
            frame_os_calls: h.frame_os_calls,
            largest_free: h.largest_free.map(|l| l as u64),
        })
        .collect()
}

/// The fixed memory of a bento row: the OS's pages with a limit on what is committed.
type Fixed = LimitedPages<SystemPages>;

/// Plays `play` on the bounded allocator `name` over `limit` bytes (`usize::MAX`:
/// memory to spare).
fn bounded_run(name: &str, limit: usize, play: &Play) -> Result<SoakRun, String> {
    match name {
        "space" => {
            let pages = LimitedPages::new(SystemPages::new(), limit);
            let space = MemorySpace::new(&pages, SpaceConfig::DEFAULT)
                .map_err(|e| format!("cannot make a memory space: {e}"))?;
            let handle = &space;
            let mut target = Measured::new(&handle, &space, || setup::space_figures(&space));
            play.run(&mut target)
        }
        "common" => {
            let pages: Fixed = LimitedPages::new(SystemPages::new(), limit);
            let common = CommonAllocator::with_config(
                bento_common::CommonConfig::DEFAULT.with_pages(&pages),
            );
            let handle = &common;
            let mut target = Measured::new(&handle, &common, || setup::common_figures(&common));
            play.run(&mut target)
        }
        "bento" => {
            let pages: Fixed = LimitedPages::new(SystemPages::new(), limit);
            let parts = Parts::over(&pages);
            let linear = Linear::new(&parts)?;
            let mut target = Bento::new(&parts, &linear)?;
            play.run(&mut target)
        }
        peer => {
            let mut target = arena::peer(peer, limit.min(isize::MAX as usize / 2))?;
            play.run(&mut *target)
        }
    }
}

/// The least memory in which `play` plays on `name`, searched from `live` (the
/// session's peak live) up to `ceiling`, to a 1024th of the peak live (at least 64 KiB).
fn least(name: &str, play: &Play, live: u64, ceiling: u64) -> Option<u64> {
    let granule = (live as usize / 1024).max(64 << 10);
    let plays = |limit| bounded_run(name, limit, play).is_ok_and(|run| run.refused() == 0);
    least_memory(plays, live as usize..ceiling as usize, granule).map(|l| l as u64)
}

/// The most bytes live in each hour of `config`, from the session itself (no
/// allocator: the sizes it asks for).
fn live_by_hour(config: LongConfig) -> Vec<u64> {
    use bento_trace::workload::{LevelPhase, LongSession, Step};
    let session = LongSession::new(config);
    let mut sizes = vec![0u64; session.ids()];
    let mut peaks = vec![0u64; config.hours];
    let (mut live, mut hour) = (0u64, 0);
    for step in session {
        match step {
            Step::Alloc { id, size, .. } => {
                sizes[id] = size as u64;
                live += size as u64;
            }
            Step::Realloc { id, size } => {
                live = live - sizes[id] + size as u64;
                sizes[id] = size as u64;
            }
            Step::Free { id } => live -= std::mem::take(&mut sizes[id]),
            // A level's hour begins as it begins to load, as `soak` counts it.
            Step::Phase(LevelPhase::Loading(level)) => hour = config.hour_of(level),
            _ => {}
        }
        if let Some(peak) = peaks.get_mut(hour) {
            *peak = (*peak).max(live);
        }
    }
    peaks
}

/// A bounded allocator's row: its hours with memory to spare, then the least memory
/// of the first hour and of the session.
fn bounded_row(name: &str, play: &Play, live: &[u64]) -> Result<Row, String> {
    let session_live = live.iter().copied().max().unwrap_or(0);
    let first_hour_live = live.first().copied().unwrap_or(0);
    // Memory to spare: no limit for bento's, an arena four times the peak live for
    // the peers.
    let spare = if PEERS.contains(&name) {
        (session_live as usize).saturating_mul(4).max(64 << 20)
    } else {
        usize::MAX
    };
    let run = bounded_run(name, spare, play)?;
    if run.refused() > 0 {
        return Err(format!(
            "{name} refused {} requests with memory to spare",
            run.refused()
        ));
    }
    let hours = hours_of(&run);
    // The ceiling of each search: what it held with memory to spare, and a quarter
    // more (a bounded run gives kept memory up, so it needs no more than that).
    let ceiling = |held: u64, live: u64| held.max(live).saturating_mul(5) / 4 + (1 << 20);
    let first = play.first();
    let first_held = hours.first().map_or(0, |h| h.peak_held);
    let first_hour_least = least(
        name,
        &first,
        first_hour_live,
        ceiling(first_held, first_hour_live),
    )
    .or_else(|| {
        least(
            name,
            &first,
            first_hour_live,
            4 * ceiling(first_held, first_hour_live),
        )
    });
    let held = run.peak_committed() as u64;
    let session_least = least(name, play, session_live, ceiling(held, session_live))
        .or_else(|| least(name, play, session_live, 4 * ceiling(held, session_live)));
    Ok(Row {
        allocator: name.to_owned(),
        bounded: true,
        first_hour_live,
        session_live,
        first_hour_least,
        session_least,
        hours,
    })
}

/// The system allocator, mimalloc or jemalloc, with its footprint the growth of this
/// process's resident set.
struct Resident<T> {
    inner: T,
    base: u64,
}

impl<T: ReplayTarget> Wrapper for Resident<T> {
    type Inner = T;

    fn inner(&mut self) -> &mut T {
        &mut self.inner
    }

    fn inner_ref(&self) -> &T {
        &self.inner
    }

    fn report_footprint(&self) -> Option<Footprint> {
        let grown = rss()?.saturating_sub(self.base) as usize;
        Some(Footprint {
            committed: grown,
            peak_committed: grown,
            reserved: 0,
            os_calls: 0,
        })
    }
}

/// The child's side of an unbounded row: plays `play` on `allocator` in this
/// process and writes the row as JSON to `result`.
pub(crate) fn child(allocator: &str, play: &Play, result: &Path) -> Result<(), String> {
    let live = play.live_by_hour()?;
    let base = rss().ok_or("soak: this system does not tell the resident set")?;
    let run = match allocator {
        "system" => play.run(&mut Resident {
            inner: GlobalTarget(std::alloc::System),
            base,
        })?,
        #[cfg(feature = "mimalloc")]
        "mimalloc" => play.run(&mut Resident {
            inner: GlobalTarget(mimalloc::MiMalloc),
            base,
        })?,
        #[cfg(all(feature = "jemalloc", unix))]
        "jemalloc" => play.run(&mut Resident {
            inner: GlobalTarget(tikv_jemallocator::Jemalloc),
            base,
        })?,
        other => return Err(format!("soak: `{other}` is not an unbounded allocator")),
    };
    let row = Row {
        allocator: allocator.to_owned(),
        bounded: false,
        first_hour_live: live.first().copied().unwrap_or(0),
        session_live: live.iter().copied().max().unwrap_or(0),
        first_hour_least: None,
        session_least: None,
        hours: hours_of(&run),
    };
    let json = serde_json::to_vec(&row).map_err(|e| e.to_string())?;
    crate::output::write_bytes(result, &json)
}

/// An unbounded row, from a fresh child process.
fn unbounded_row(name: &str, play: &Play) -> Result<Row, String> {
    // The child's result, where no one else can put a link.
    let dir = crate::output::PrivateDir::new(&std::env::temp_dir())?;
    let result = dir.join(&format!("{name}.json"));
    let exe = std::env::current_exe().map_err(|e| format!("cannot find this program: {e}"))?;
    let mut child = Command::new(exe);
    child.args(["__soak-child", "--allocator", name]);
    match play {
        Play::Long(c) => child
            .args(["--hours", &c.hours.to_string()])
            .args(["--frames", &c.frames_per_level.to_string()]),
        Play::Trace {
            path,
            loops,
            max_live,
        } => child
            .arg("--trace")
            .arg(path)
            .args(["--loops", &loops.to_string()])
            .args(["--max-live", &max_live.to_string()]),
    };
    let status = child
        .arg("--result")
        .arg(&result)
        .status()
        .map_err(|e| format!("cannot start the soak of {name}: {e}"))?;
    let text = std::fs::read(&result);
    drop(dir);
    if !status.success() {
        return Err(format!("the soak of {name} failed ({status})"));
    }
    let text = text.map_err(|e| format!("the soak of {name} wrote no result: {e}"))?;
    serde_json::from_slice(&text).map_err(|e| format!("the soak of {name}: {e}"))
}

/// `bento soak`: every allocator of `names` through `play`; the table (or JSON), and
/// the chart when `output` is given.
pub(crate) fn soak_command(
    names: &[String],
    play: &Play,
    json: bool,
    output: Option<&Path>,
) -> Result<(), String> {
    let live = play.live_by_hour()?;
    let mut rows = Vec::new();
    for name in names {
        if !json {
            eprintln!("soak: {name}...");
        }
        let row = if bounded(name) {
            bounded_row(name, play, &live)?
        } else {
            unbounded_row(name, play)?
        };
        rows.push(row);
    }
    if json {
        let mut doc = serde_json::json!({
            "hours": play.hours(),
            "peak_live": live.iter().copied().max().unwrap_or(0),
            "rows": rows.iter().map(Row::summary).collect::<Vec<_>>(),
        });
        match play {
            Play::Long(c) => {
                doc["levels_per_hour"] = c.levels_per_hour.into();
                doc["frames_per_level"] = c.frames_per_level.into();
            }
            Play::Trace { path, .. } => doc["trace"] = path.display().to_string().into(),
        }
        let text = serde_json::to_string_pretty(&doc).map_err(|e| e.to_string())?;
        crate::out!("{text}");
    } else {
        crate::out!("{}", soak_table(&rows, play));
    }
    if let Some(out) = output {
        let title = match play {
            Play::Long(c) => format!("{} hours of play", c.hours),
            Play::Trace { .. } => play.describe(),
        };
        let title = format!("{title}: what each allocator holds, hour by hour");
        let lines: Vec<SoakLine> = rows
            .iter()
            .map(|r| SoakLine {
                allocator: r.allocator.clone(),
                bounded: r.bounded,
                hours: r.hours.iter().map(|h| (h.peak_live, h.peak_held)).collect(),
                least: r.session_least,
            })
            .collect();
        crate::chart::soak_chart(&lines, &title, out)?;
        if !json {
            crate::out!("wrote {}", out.display());
        }
    }
    Ok(())
}

/// `n` bytes and their multiple of `live`.
fn times(n: u64, live: u64) -> String {
    if live == 0 {
        return format!("{} ({NO_RATIO})", bytes(n));
    }
    format!("{} ({:.2}×)", bytes(n), n as f64 / live as f64)
}

/// The soak's table: one row per allocator.
pub(crate) fn soak_table(rows: &[Row], play: &Play) -> String {
    let header = [
        "allocator",
        "least, first hour",
        "least, session",
        "flat",
        "most held",
        "OS calls in frames after hour 1",
    ];
    let cells: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            let least = |l: Option<u64>, live| match l {
                Some(l) => times(l, live),
                None if r.bounded => "over the search".to_owned(),
                None => "cannot be bounded".to_owned(),
            };
            vec![
                r.allocator.clone(),
                least(r.first_hour_least, r.first_hour_live),
                least(r.session_least, r.session_live),
                r.flatness()
                    .map_or_else(|| NO_RATIO.to_owned(), |f| format!("{f:.3}")),
                times(r.peak_held(), r.session_live),
                if r.bounded {
                    r.frame_os_calls_after_first_hour().to_string()
                } else {
                    crate::run::NA.to_owned()
                },
            ]
        })
        .collect();
    let live = rows.first().map_or(0, |r| r.session_live);
    format!(
        "{}\n\n{}; peak live {} (first hour {}). \
         Least: the least fixed memory in which it plays with no refused request \
         (bento's over the OS's pages with a commit limit, the peers over an arena), \
         × the peak live. Flat: the session's multiple over the first hour's. Most \
         held: committed (RSS growth for those that cannot be bounded) with memory to \
         spare.",
        table(&header, &cells),
        play.describe(),
        bytes(live),
        bytes(rows.first().map_or(0, |r| r.first_hour_live)),
    )
}
