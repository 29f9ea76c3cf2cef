//! `bento demo`, `bento gen` and `bento replay`.

use crate::out;
use std::path::Path;

use bento_trace::TraceWriter;
use bento_trace::workload::{
    LifoBatches, LifoConfig, LongConfig, LongSession, Mixed, MixedConfig, OpenWorld, Recorded,
    Session, SessionConfig, Workload, WorldConfig, record,
};
use clap::ValueEnum;

use crate::child::replay_all;
use crate::inspect::scan;
use crate::limit::LiveBound;
use crate::output::{Staged, write_file};
use crate::run::{Run, bytes, latency_table, refusals, runs_table};
use crate::setup::{self, ALLOCATORS};

/// The workloads `gen` writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub(crate) enum Profile {
    /// Levels with resident data, frames of temporaries, streaming, particles.
    Game,
    /// An open world streaming cells of small blocks.
    World,
    /// Log-uniform sizes freed in random order around a live set.
    Mixed,
    /// Batches freed in reverse order.
    Lifo,
    /// The long session of `bento soak`: three levels an hour with state that
    /// outlives them, a streamed-asset cache and an AI cache that grows.
    Long,
}

/// The hours `gen --profile long` writes at scale 1 (a trace of the size of the
/// other profiles'; `--scale 12.5` gives `bento soak`'s hundred hours).
pub(crate) const LONG_HOURS: usize = 8;

/// The most levels `demo` plays: a trace of about 125 MiB (some 23 million records),
/// replayed on every allocator.
pub(crate) const MAX_DEMO_LEVELS: u64 = 1000;

/// The range of `gen --scale`: up to a trace of about 300 MiB (each profile's
/// default is 2.4 to 3 MiB).
pub(crate) const SCALE: std::ops::RangeInclusive<f64> = 0.01..=100.0;

/// Parses `--scale`: a number in [`SCALE`].
pub(crate) fn parse_scale(text: &str) -> Result<f64, String> {
    let v: f64 = text
        .parse()
        .map_err(|_| format!("`{text}` is not a number"))?;
    if SCALE.contains(&v) {
        Ok(v)
    } else {
        Err(format!(
            "{text} is not from {} to {}",
            SCALE.start(),
            SCALE.end()
        ))
    }
}

/// Writes a workload's trace to `output`, whole or not at all: the profile's default
/// size times `scale`.
pub(crate) fn generate(
    profile: Profile,
    scale: f64,
    seed: Option<u64>,
    output: &Path,
) -> Result<Recorded, String> {
    // Clap keeps `--scale` in range; the products below then stay under 10^8.
    if !SCALE.contains(&scale) {
        return Err(format!(
            "--scale must be from {} to {}",
            SCALE.start(),
            SCALE.end()
        ));
    }
    // `default` times the scale, at least 1.
    let times = |default: usize| ((default as f64 * scale).round() as usize).max(1);
    match profile {
        Profile::Game => {
            let d = SessionConfig::DEMO;
            session(times(d.levels), seed.unwrap_or(d.seed), output)
        }
        Profile::World => {
            let d = WorldConfig::WORLD;
            write(
                OpenWorld::new(WorldConfig {
                    cells: times(d.cells),
                    seed: seed.unwrap_or(d.seed),
                    ..d
                }),
                output,
            )
        }
        Profile::Mixed => {
            let d = MixedConfig::DEFAULT;
            write(
                Mixed::new(MixedConfig {
                    ops: times(d.ops),
                    seed: seed.unwrap_or(d.seed),
                    ..d
                }),
                output,
            )
        }
        Profile::Long => {
            let d = LongConfig::HUNDRED_HOURS;
            write(
                LongSession::new(LongConfig {
                    hours: times(LONG_HOURS),
                    seed: seed.unwrap_or(d.seed),
                    ..d
                }),
                output,
            )
        }
        Profile::Lifo => {
            let d = LifoConfig::DEFAULT;
            write(
                LifoBatches::new(LifoConfig {
                    batches: times(d.batches),
                    seed: seed.unwrap_or(d.seed),
                    ..d
                }),
                output,
            )
        }
    }
}

/// Writes the demo's game session of `levels` levels to `output`.
fn session(levels: usize, seed: u64, output: &Path) -> Result<Recorded, String> {
    write(
        Session::new(SessionConfig {
            levels,
            seed,
            ..SessionConfig::DEMO
        }),
        output,
    )
}

/// Records `workload` as the trace `output`, whole or not at all.
fn write(workload: impl Workload, output: &Path) -> Result<Recorded, String> {
    write_file(output, |out| {
        let mut writer = TraceWriter::new(out)?;
        let counts = record(workload, &mut writer)?;
        writer.finish()?;
        Ok(counts)
    })
}

/// `bento replay`: an error when the trace's peak live is over `bound` (before any
/// replay), or when an allocator refused requests, unless `allow_failures`, after
/// the table (or JSON) and the chart.
pub(crate) fn replay_command(
    trace: &Path,
    allocators: &[String],
    svg: Option<&Path>,
    json: bool,
    latency: bool,
    allow_failures: bool,
    bound: LiveBound,
) -> Result<(), String> {
    for name in allocators {
        setup::check_name(name)?;
    }
    let s = scan(trace)?;
    if s.records == 0 {
        return Err(format!(
            "{}: an empty trace: it holds no records to replay",
            trace.display()
        ));
    }
    bound.check(trace, s.peak_live)?;
    let runs = replay_all(
        trace,
        allocators,
        s.records,
        &std::env::temp_dir(),
        latency,
        bound.bytes(),
    )?;
    if json {
        let summaries: Vec<_> = runs.iter().map(Run::summary).collect();
        out!(
            "{}",
            serde_json::to_string_pretty(&summaries).map_err(|e| e.to_string())?
        );
    } else {
        out!("{}", runs_table(&runs));
        if let Some(latency) = latency_table(&runs) {
            out!("\n{latency}");
        }
    }
    if let Some(svg) = svg {
        let title = format!(
            "{}: memory over time",
            trace
                .file_name()
                .map_or("trace".into(), |n| n.to_string_lossy())
        );
        crate::chart::memory_chart(&runs, &title, svg)?;
        if !json {
            out!("wrote {}", svg.display());
        }
    }
    match refusals(&runs) {
        Some(why) if !allow_failures => {
            Err(format!("{why} (--allow-failures accepts refused requests)"))
        }
        _ => Ok(()),
    }
}

/// `bento demo`: the main job.
pub(crate) fn demo(levels: usize, seed: u64, out: &Path, json: bool) -> Result<(), String> {
    if !(1..=MAX_DEMO_LEVELS).contains(&(levels as u64)) {
        return Err(format!("--levels must be from 1 to {MAX_DEMO_LEVELS}"));
    }
    std::fs::create_dir_all(out).map_err(|e| format!("cannot make {}: {e}", out.display()))?;
    let trace_out = out.join("demo.trace");
    // The replays read the trace back: from the output, or from a copy where the
    // output keeps no bytes (a link to /dev/null, a FIFO).
    let staged = Staged::new(&trace_out)?;
    let counts = session(levels, seed, staged.path())?;
    let written = staged.publish()?;
    let trace = written.path();
    if !json {
        out!(
            "A game session: {levels} levels of {} frames ({} records, {} allocations, peak \
             live {}), replayed on each allocator in a fresh process.\n",
            SessionConfig::DEMO.frames_per_level,
            counts.records,
            counts.allocs,
            bytes(counts.peak_live)
        );
    }
    let allocators: Vec<String> = ALLOCATORS.iter().map(|s| s.to_string()).collect();
    let runs = replay_all(trace, &allocators, counts.records, out, true, None)?;
    // The session fits every allocator: a refusal is a defect, never accepted.
    if let Some(why) = refusals(&runs) {
        return Err(format!("{why} of the session"));
    }
    let memory_svg = out.join("demo-memory.svg");
    crate::chart::memory_chart(
        &runs,
        &format!("A game session of {levels} levels: memory held over time"),
        &memory_svg,
    )?;
    let peak = scan(trace)?.peak_seq;
    let rows = crate::map::map_at(trace, peak, LiveBound::Unbounded)?;
    let map_svg = out.join("demo-heapmap.svg");
    crate::chart::map_chart(
        &rows,
        &format!("The memory space at the session's peak (record {peak})"),
        &map_svg,
    )?;
    let heaps = runs
        .iter()
        .find_map(|r| r.heaps.clone())
        .unwrap_or_default();
    // `bento-prof`'s profile at its busiest moment, beside the trace.
    let profile_pb = out.join("demo-profile.pb");
    if let Some(bytes) = runs.iter().find_map(|r| r.profile.as_deref()) {
        crate::output::write_bytes(&profile_pb, bytes)?;
    }
    // `bento-prof`'s estimate of each heap's live bytes at its busiest moment.
    let profile: Vec<String> = runs
        .iter()
        .filter(|r| r.allocator == "bento-prof")
        .filter_map(|r| r.heaps.as_deref())
        .flat_map(|h| {
            h.lines()
                .filter(|l| l.starts_with("profile: "))
                .map(str::to_owned)
        })
        .collect();
    if json {
        let doc = serde_json::json!({
            "levels": levels,
            "seed": seed,
            "records": counts.records,
            "allocations": counts.allocs,
            "peak_live": counts.peak_live,
            "runs": runs.iter().map(Run::summary).collect::<Vec<_>>(),
            "heaps": heaps,
            "profile": profile,
            "profile_pb": profile_pb.exists().then_some(&profile_pb),
            "memory_svg": memory_svg,
            "heapmap_svg": map_svg,
        });
        out!(
            "{}",
            serde_json::to_string_pretty(&doc).map_err(|e| e.to_string())?
        );
        return Ok(());
    }
    out!("{}\n", runs_table(&runs));
    if let Some(latency) = latency_table(&runs) {
        out!("{latency}\n");
    }
    let held: Vec<String> = runs
        .iter()
        .filter_map(|r| Some(format!("{} {}", r.allocator, bytes(r.held_after_idle?))))
        .collect();
    if !held.is_empty() {
        out!(
            "Held by their own stats once the session is over and {} frames have passed \
             (tables included): {}.\n",
            crate::child::IDLE_FRAMES,
            held.join(", ")
        );
    }
    out!("The bento set-up's subsystem heaps at the session's busiest moment:\n{heaps}");
    if !profile.is_empty() {
        out!(
            "bento-prof's sampled profile at its busiest moment, beside each heap's own \
             count:\n{}\n",
            profile.join("\n")
        );
    }
    out!(
        "The memory space at the peak: {}",
        crate::map::summary(&rows)
    );
    out!(
        "\nwrote {}, {} and {}",
        trace_out.display(),
        memory_svg.display(),
        map_svg.display()
    );
    if profile_pb.exists() {
        out!(
            "and {}, bento-prof's heap profile at its busiest moment (`go tool pprof`, \
             `bento diff`)",
            profile_pb.display()
        );
    }
    Ok(())
}
