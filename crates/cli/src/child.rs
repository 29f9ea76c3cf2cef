//! Each allocator replays in a fresh child process (this program, run with the hidden
//! `__child` command), so that one allocator's memory never counts against
//! another's resident set. The child writes its [`Run`] as JSON to a file the parent
//! names, and its progress to stderr as `progress <records>` lines.

use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};

use bento_trace::{Footprint, GlobalTarget, ReplayOptions, ReplayTarget, TraceReader, replay};
use indicatif::ProgressBar;

use crate::latency::Timed;
use crate::run::{FrameCall, FrameCalls, KeptFigures, Run, Sample, rss};
use crate::setup::{self, Bento, Linear, Measured, Parts, Report};

/// Frames ticked after the session: twice the default decay time.
pub(crate) const IDLE_FRAMES: u32 = 2 * bento_pages::Decay::DEFAULT.frames;

/// How often the child reports progress, in records.
const PROGRESS_EVERY: u64 = 20_000;

/// The child's side: replays `trace` on `allocator` and writes the run to `result`;
/// with `latency`, each operation is timed (see [`crate::latency`]); with
/// `max_live`, the replay stops before a record that would hold more bytes live.
pub(crate) fn child(
    trace: &Path,
    allocator: &str,
    result: &Path,
    sample_every: u64,
    latency: bool,
    max_live: Option<u64>,
) -> Result<(), String> {
    setup::check_name(allocator)?;
    let go = Go {
        allocator,
        trace,
        options: ReplayOptions {
            sample_every,
            max_live: max_live.unwrap_or(u64::MAX),
            ..ReplayOptions::default()
        },
        latency,
    };
    let run = match allocator {
        "system" => go.run(&mut GlobalTarget(std::alloc::System))?,
        #[cfg(feature = "mimalloc")]
        "mimalloc" => go.run(&mut GlobalTarget(mimalloc::MiMalloc))?,
        #[cfg(all(feature = "jemalloc", unix))]
        "jemalloc" => go.run(&mut GlobalTarget(tikv_jemallocator::Jemalloc))?,
        "space" => {
            let space = setup::new_space()?;
            let handle = &space;
            go.run(&mut Measured::new(&handle, &space, || {
                setup::space_figures(&space)
            }))?
        }
        "common" => {
            let common = bento_common::CommonAllocator::new();
            let handle = &common;
            go.run(&mut Measured::new(&handle, &common, || {
                setup::common_figures(&common)
            }))?
        }
        _ => {
            let parts = match allocator {
                "bento-huge" => Parts::huge()?,
                "bento-guard" => Parts::guarded(),
                "bento-prof" => Parts::profiled()?,
                _ => Parts::new(),
            };
            let linear = Linear::new(&parts)?;
            let run = go.run(&mut Bento::new(&parts, &linear)?)?;
            // The profile at the busiest moment, beside the result (`bento-prof`).
            let profile = parts.profile_snapshot.take();
            if !profile.is_empty() {
                crate::output::write_bytes(&result.with_extension("pprof"), &profile)?;
            }
            run
        }
    };
    let json = serde_json::to_vec(&run).map_err(|e| e.to_string())?;
    crate::output::write_bytes(result, &json)
}

/// One replay's settings.
struct Go<'a> {
    allocator: &'a str,
    trace: &'a Path,
    options: ReplayOptions,
    latency: bool,
}

impl Go<'_> {
    /// Replays on `target`, timing each operation when asked.
    fn run<T: ReplayTarget + Report>(&self, target: &mut T) -> Result<Run, String> {
        if !self.latency {
            return measure(self.allocator, self.trace, self.options, target);
        }
        let mut timed = Timed::new(target);
        let mut run = measure(self.allocator, self.trace, self.options, &mut timed)?;
        run.latency = Some(timed.latency());
        Ok(run)
    }
}

/// Replays `trace` on `target` as `options` say, sampling its stats and the
/// resident set.
fn measure<T: ReplayTarget + Report>(
    allocator: &str,
    trace: &Path,
    options: ReplayOptions,
    target: &mut T,
) -> Result<Run, String> {
    let reader = open(trace)?;
    // The resident set's growth over the replay, where `/proc` tells.
    let base = rss();
    let grown = move || rss().zip(base).map(|(now, base)| now.saturating_sub(base));
    let faults_before = crate::run::minor_faults();
    let mut samples = Vec::new();
    let mut phases = Vec::new();
    // Each frame's OS calls: the count at the last frame end or phase, and the frames
    // seen so far.
    let mut frame_calls = Vec::new();
    let (mut calls_since, mut frames_seen) = (target.footprint().map_or(0, |f| f.os_calls), 0);
    let mut peak_kept = 0;
    // Given back before the replay (none for a fresh allocator).
    let given_before = target.kept().map_or(0, |k| k.given_back);
    let mut peak_rss = grown();
    let mut last_progress = 0;
    // The heaps' report at the busiest moment sampled.
    let (mut heaps, mut busiest) = (None, 0);
    let report = replay(target, reader, options, |m, t| {
        let grown = grown();
        peak_rss = peak_rss.max(grown);
        let own = t.footprint();
        let kept = t.kept();
        samples.push(Sample {
            seq: m.seq,
            live: m.live,
            committed: own.map_or(grown.unwrap_or(0), |f: Footprint| f.committed as u64),
            rss: grown.unwrap_or(0),
            kept: kept.map_or(0, |k| k.now),
        });
        if let Some(k) = kept {
            peak_kept = peak_kept.max(k.now);
        }
        if let Some(name) = m.phase {
            phases.push((m.seq, name.to_owned()));
        }
        if let Some(calls) = own.map(|f| f.os_calls) {
            if m.frames > frames_seen {
                // A frame ended at this record: the calls since the last frame end
                // or phase are this frame's, those of its end among them.
                let at_end = t.frame_end_calls();
                let all = calls.saturating_sub(calls_since);
                frame_calls.push(FrameCall {
                    seq: m.seq,
                    inside: all.saturating_sub(at_end),
                    at_end: at_end.min(all),
                });
                calls_since = calls;
            } else if m.phase.is_some() {
                calls_since = calls;
            }
        }
        frames_seen = m.frames;
        if m.live > busiest {
            busiest = m.live;
            heaps = t.heap_report();
        }
        if m.seq - last_progress >= PROGRESS_EVERY {
            last_progress = m.seq;
            eprintln!("progress {}", m.seq + 1);
        }
    })
    .map_err(|e| format!("{}: {e}", trace.display()))?;
    peak_rss = peak_rss.max(grown());
    let faults = crate::run::minor_faults()
        .zip(faults_before)
        .map(|(after, before)| after.saturating_sub(before));
    let footprint = target.footprint();
    // The session is over (the replay freed what it left live): the game plays on in
    // its menu for some idle frames, then what the allocator still holds by its own
    // stats.
    target.phase("menu loaded");
    for _ in 0..IDLE_FRAMES {
        target
            .frame()
            .map_err(|e| format!("{}: an idle frame: {e}", trace.display()))?;
    }
    let held_after_idle = target.footprint().map(|f| f.committed as u64);
    Ok(Run {
        allocator: allocator.to_owned(),
        records: report.records,
        ops: report.allocs + report.frees + report.reallocs,
        requests: report.allocs + report.reallocs,
        failures: report.failures,
        nanos: report.nanos,
        peak_live: report.peak_live,
        peak_committed: footprint.map(|f| f.peak_committed as u64),
        peak_rss,
        os_calls: footprint.map(|f| f.os_calls),
        frame_calls: footprint.map(|_| FrameCalls::new(&frame_calls, &phases)),
        kept: target.kept().map(|k| KeptFigures {
            peak: peak_kept.max(k.now),
            given_back: k.given_back.saturating_sub(given_before),
        }),
        faults,
        held_after_idle,
        samples,
        phases,
        heaps,
        profile: None,
        latency: None,
    })
}

/// Opens a trace, with a one-line error naming the file.
pub(crate) fn open(trace: &Path) -> Result<TraceReader<File>, String> {
    let file = File::open(trace).map_err(|e| format!("cannot open {}: {e}", trace.display()))?;
    TraceReader::new(file).map_err(|e| format!("{}: {e}", trace.display()))
}

/// The parent's side: runs each allocator's replay of `trace` (of `records` records)
/// in a child, one after the other, with a progress bar; with `latency`, a second
/// child per allocator times each operation (so that the timer's cost stays out of
/// the first one's stats). With `max_live`, each replay stops before a record
/// that would hold more bytes live.
pub(crate) fn replay_all(
    trace: &Path,
    allocators: &[String],
    records: u64,
    scratch: &Path,
    latency: bool,
    max_live: Option<u64>,
) -> Result<Vec<Run>, String> {
    let passes = if latency { 2 } else { 1 };
    let bar = ProgressBar::new(records.saturating_mul(allocators.len() as u64 * passes));
    bar.set_style(
        indicatif::ProgressStyle::with_template("{msg:>10} [{bar:40}] {percent:>3}% {elapsed}")
            .expect("a valid template")
            .progress_chars("=> "),
    );
    // Samples for the chart: about 1,000 a run, besides each frame and phase.
    let sample_every = (records / 1000).max(1);
    let mut runs = Vec::new();
    let mut done = 0;
    // The children's results, where no one else can put a link.
    let results = crate::output::PrivateDir::new(scratch)?;
    for name in allocators {
        bar.set_message(name.clone());
        let child = Child {
            trace,
            name,
            results: &results,
            max_live,
            bar: &bar,
        };
        let mut run = child.run(done, &["--sample-every", &sample_every.to_string()])?;
        done = done.saturating_add(records);
        if latency {
            bar.set_message(format!("{name} (timed)"));
            run.latency = child.run(done, &["--latency"])?.latency;
            done = done.saturating_add(records);
        }
        runs.push(run);
    }
    bar.finish_and_clear();
    Ok(runs)
}

/// One child process's replay.
struct Child<'a> {
    trace: &'a Path,
    name: &'a str,
    results: &'a crate::output::PrivateDir,
    max_live: Option<u64>,
    bar: &'a ProgressBar,
}

impl Child<'_> {
    /// Runs the child with `args`, its progress shown past `done` records.
    fn run(&self, done: u64, args: &[&str]) -> Result<Run, String> {
        let me = std::env::current_exe().map_err(|e| format!("cannot find this program: {e}"))?;
        let name = self.name;
        let result = self.results.join(&format!("{name}.json"));
        self.bar.set_position(done);
        let mut child = Command::new(&me)
            .arg("__child")
            .arg(self.trace)
            .args(["--allocator", name])
            .arg("--result")
            .arg(&result)
            .args(args)
            .args(
                self.max_live
                    .iter()
                    .flat_map(|n| ["--max-live".to_owned(), n.to_string()]),
            )
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("cannot start a replay: {e}"))?;
        let mut last = String::new();
        if let Some(err) = child.stderr.take() {
            for line in BufReader::new(err).lines().map_while(Result::ok) {
                match line
                    .strip_prefix("progress ")
                    .and_then(|n| n.parse::<u64>().ok())
                {
                    Some(n) => self.bar.set_position(done.saturating_add(n)),
                    None => {
                        self.bar.suspend(|| {
                            let _ = writeln!(std::io::stderr(), "{line}");
                        });
                        last = line;
                    }
                }
            }
        }
        let status = child.wait().map_err(|e| e.to_string())?;
        let run = std::fs::read(&result);
        let _ = std::fs::remove_file(&result);
        let profile_at = result.with_extension("pprof");
        let profile = std::fs::read(&profile_at).ok();
        let _ = std::fs::remove_file(&profile_at);
        if !status.success() {
            self.bar.abandon();
            let why = last.trim_start_matches("bento: ");
            return Err(format!("the replay on {name} failed: {why}"));
        }
        let mut run: Run = serde_json::from_slice(&run.map_err(|e| e.to_string())?)
            .map_err(|e| format!("the replay on {name} reported nonsense: {e}"))?;
        run.profile = profile;
        Ok(run)
    }
}
