#![doc = include_str!("../README.md")]

mod allocators;
mod arena;
mod chart;
mod child;
mod demo;
mod diff;
mod inspect;
mod latency;
mod leaks;
mod limit;
mod map;
mod output;
mod pprof;
mod record;
mod run;
mod setup;
mod soak;

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::builder::RangedU64ValueParser;
use clap::{Parser, Subcommand, ValueEnum};

use crate::demo::Profile;

/// `println!` that ends the program quietly when stdout is closed (`bento … | head`)
/// instead of panicking.
macro_rules! out {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        if writeln!(std::io::stdout(), $($arg)*).is_err() {
            std::process::exit(0);
        }
    }};
}
pub(crate) use out;

/// Allocation traces and bento's allocators, as tables and charts.
///
/// Every file a command writes goes to its `-o, --output`: `gen`, `record` and `map`,
/// whose product is a file, write to a default name in the working directory when it
/// is left out; `demo` writes its trace and charts into a directory (the working
/// directory by default); `replay` writes its chart only when asked. Each says what it
/// wrote. `--json` prints a command's stats for scripts instead of tables.
#[derive(Debug, Parser)]
#[command(name = "bento", version, about, arg_required_else_help = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// A game session on bento's allocators beside the system allocator, mimalloc and
    /// jemalloc: a table per allocator, the subsystem heaps' report, and two SVG
    /// charts.
    #[command(after_help = setup::ABOUT)]
    Demo {
        /// Levels the session plays: 1 to 1000 (a trace of at most about 125 MiB,
        /// replayed once per allocator).
        #[arg(
            long,
            default_value_t = bento_trace::workload::SessionConfig::DEMO.levels,
            value_parser = RangedU64ValueParser::<usize>::new().range(1..=demo::MAX_DEMO_LEVELS)
        )]
        levels: usize,
        /// The seed of the session's choices.
        #[arg(long, default_value_t = bento_trace::workload::SessionConfig::DEMO.seed)]
        seed: u64,
        /// The directory the trace (`demo.trace`) and the charts (`demo-memory.svg`,
        /// `demo-heapmap.svg`) go to.
        #[arg(short, long, default_value = ".")]
        output: PathBuf,
        /// Print the stats as JSON instead of tables.
        #[arg(long)]
        json: bool,
    },
    /// Generate a workload's trace.
    Gen {
        /// The workload.
        #[arg(long, value_enum, default_value_t = Profile::Game)]
        profile: Profile,
        /// The workload's size as a multiple of the profile's default: 0.01 to 100 (a
        /// trace of at most about 300 MiB). The default game is 24 levels, the world 40
        /// cells, mixed 200,000 operations, lifo 2,000 batches and long 8 hours (12.5
        /// for `soak`'s hundred).
        #[arg(long, default_value_t = 1.0, value_parser = demo::parse_scale)]
        scale: f64,
        /// The seed of the workload's choices; the profile's default when left out.
        #[arg(long)]
        seed: Option<u64>,
        /// The trace file to write; `PROFILE.trace` when left out.
        #[arg(short, long)]
        output: Option<PathBuf>,
    },
    /// Run a program with bento-malloc recording its allocations (every thread's, in
    /// the order they took effect), then show what it recorded.
    #[command(after_help = record::ABOUT)]
    Record {
        /// The trace file to write.
        #[arg(short, long, default_value = "bento.trace")]
        output: PathBuf,
        /// bento-malloc's shared library; by default `$BENTO_MALLOC`, or
        /// `libbento_malloc.so` beside this program or in its target directory's
        /// `release`.
        #[arg(long)]
        library: Option<PathBuf>,
        /// Print what was recorded as JSON.
        #[arg(long)]
        json: bool,
        /// The program and its arguments, after `--`.
        #[arg(last = true, required = true, value_name = "PROGRAM ARGS")]
        program: Vec<OsString>,
    },
    /// Replay a trace on allocators, each in a fresh process: time, per-operation
    /// latency, page faults, OS calls and memory in a table, and a chart of memory
    /// over time.
    #[command(after_help = setup::ABOUT)]
    Replay {
        /// The trace.
        trace: PathBuf,
        /// The allocators to replay on, comma-separated; all but `bento` when left
        /// out.
        #[arg(long, value_enum, value_delimiter = ',')]
        allocators: Vec<AllocatorName>,
        /// Write the chart of memory over time here (SVG).
        #[arg(short, long)]
        output: Option<PathBuf>,
        /// Print the stats as JSON instead of a table.
        #[arg(long)]
        json: bool,
        /// Leave out the second replay that times each operation (the latency
        /// columns then read n/a).
        #[arg(long)]
        no_latency: bool,
        /// Exit 0 even when an allocator refused allocations or resizes (the table's
        /// `refused` column counts them); without it, a refusal is an error (exit 1)
        /// after the table.
        #[arg(long)]
        allow_failures: bool,
        /// The most bytes the trace may hold live at once: a number of bytes, or of
        /// K, M, G, T, P or E (binary: 1.5G, 512MiB), from 1 byte to 16 EiB less one,
        /// or `none` for no bound. By default the memory available (MemAvailable in
        /// /proc/meminfo; no bound where the system does not tell it). A trace whose
        /// peak live is over it is refused before any replay, and each replay stops
        /// before a record that would pass it.
        #[arg(long, value_name = "SIZE", value_parser = limit::parse_max_live)]
        max_live: Option<limit::LiveBound>,
    },
    /// A trace's sizes, lifetimes and tags, as histograms.
    Inspect {
        /// The trace.
        trace: PathBuf,
        /// Print the stats as JSON instead of tables.
        #[arg(long)]
        json: bool,
        /// Leaks: the blocks allocated in these frames (`A..B`, both included, or
        /// one frame `A`; the first frame is 0, each ends at a frame mark) that are
        /// still live at `--live-at`, by tag and size.
        #[arg(long, value_name = "FRAMES", conflicts_with = "phase")]
        born: Option<String>,
        /// Leaks: the blocks allocated during the phase of this name (every time
        /// the trace enters it) that are still live at `--live-at`.
        #[arg(long, value_name = "NAME")]
        phase: Option<String>,
        /// With `--born` or `--phase`: the frame at whose end the blocks are looked
        /// at (by default the end of the trace).
        #[arg(long, value_name = "FRAME")]
        live_at: Option<u64>,
        /// With `--born` or `--phase`: a chart of the live bytes by tag (SVG).
        #[arg(short, long, value_name = "SVG")]
        output: Option<PathBuf>,
        /// With `--born` or `--phase`: the live blocks as a heap profile in pprof's
        /// format (uncompressed; `go tool pprof` reads it), a sample per tag and
        /// size.
        #[arg(long, value_name = "FILE")]
        pprof: Option<PathBuf>,
    },
    /// What grew between two heap profiles in pprof's format (bento's dumps:
    /// `Profiler::write_pprof`, `BENTO_PROF`): live bytes and blocks by stack, the
    /// largest growth first — what a level left behind.
    Diff {
        /// The profile before.
        old: PathBuf,
        /// The profile after.
        new: PathBuf,
        /// The rows of the table: 1 to 10000.
        #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u32).range(1..=10_000))]
        top: u32,
        /// Print every change as JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// A picture of a memory space part-way through a replay: one row per segment,
    /// live, free and decommitted bytes in their own colours.
    Map {
        /// The trace.
        trace: PathBuf,
        /// The record after which to draw the space: a sequence number no greater
        /// than the trace's last, `peak` (the moment the most bytes are live) or `end`
        /// (before the trace's last frees).
        #[arg(long, default_value = "peak")]
        at: String,
        /// The SVG file to write.
        #[arg(short, long, default_value = "map.svg")]
        output: PathBuf,
        /// The most bytes the replay may hold live, as `replay --max-live` takes it
        /// (a size, or `none`); by default the memory available (MemAvailable in
        /// /proc/meminfo). The replay stops before a record that would pass it.
        #[arg(long, value_name = "SIZE", value_parser = limit::parse_max_live)]
        max_live: Option<limit::LiveBound>,
    },
    /// A long session (three levels an hour, with state that outlives levels, a
    /// streamed-asset cache and an AI cache that grows) on each allocator: the least
    /// fixed memory in which the first hour and the whole session play with no
    /// refused request, for those that can be bounded (bento's over a commit limit,
    /// talc, rlsf and dlmalloc-rs over an arena), and what each holds hour by hour.
    Soak {
        /// Hours of play: 1 to 1000.
        #[arg(
            long,
            default_value_t = bento_trace::workload::LongConfig::HUNDRED_HOURS.hours,
            value_parser = RangedU64ValueParser::<usize>::new().range(1..=1000)
        )]
        hours: usize,
        /// Frames a level runs (the hour compressed): 1 to 10000.
        #[arg(
            long,
            default_value_t = bento_trace::workload::LongConfig::HUNDRED_HOURS.frames_per_level,
            value_parser = RangedU64ValueParser::<usize>::new().range(1..=10_000)
        )]
        frames: usize,
        /// Soak a recorded trace instead of the long session: played `--loops` times
        /// in a row, each loop an hour of the stats, what it never frees freed at the
        /// end of each loop.
        #[arg(long, conflicts_with_all = ["hours", "frames"])]
        trace: Option<PathBuf>,
        /// With `--trace`: how many times it plays, 1 to 1000.
        #[arg(
            long,
            default_value_t = 10,
            requires = "trace",
            value_parser = RangedU64ValueParser::<usize>::new().range(1..=1000)
        )]
        loops: usize,
        /// With `--trace`: the most bytes it may hold live, as `replay --max-live`
        /// takes it (a size, or `none`); by default the memory available.
        #[arg(long, value_name = "SIZE", requires = "trace", value_parser = limit::parse_max_live)]
        max_live: Option<limit::LiveBound>,
        /// The allocators, comma-separated: bento, common, space, talc, rlsf,
        /// dlmalloc, system, mimalloc, jemalloc; all when left out.
        #[arg(long, value_delimiter = ',', value_parser = soak::parse_name)]
        allocators: Vec<String>,
        /// Write the chart of memory hour by hour here (SVG).
        #[arg(short, long)]
        output: Option<PathBuf>,
        /// Print the stats as JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Runs one soak of an allocator that cannot be bounded, in a child process.
    #[command(name = "__soak-child", hide = true)]
    SoakChild {
        #[arg(long)]
        allocator: String,
        #[arg(long, default_value_t = 1)]
        hours: usize,
        #[arg(long, default_value_t = 1)]
        frames: usize,
        #[arg(long)]
        trace: Option<PathBuf>,
        #[arg(long, default_value_t = 1)]
        loops: usize,
        #[arg(long, default_value_t = u64::MAX)]
        max_live: u64,
        #[arg(long)]
        result: PathBuf,
    },
    /// Runs one replay for `demo` and `replay`, in a child process.
    #[command(name = "__child", hide = true)]
    Child {
        trace: PathBuf,
        #[arg(long)]
        allocator: String,
        #[arg(long)]
        result: PathBuf,
        #[arg(long, default_value_t = 0)]
        sample_every: u64,
        #[arg(long)]
        latency: bool,
        #[arg(long)]
        max_live: Option<u64>,
    },
}

/// The allocators a trace replays on (see `bento replay --help`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum AllocatorName {
    /// The C library's malloc.
    System,
    /// mimalloc (the default feature `mimalloc`).
    Mimalloc,
    /// jemalloc, on unix (the default feature `jemalloc`).
    Jemalloc,
    /// One bento memory space over the OS pages.
    Space,
    /// bento's common allocator.
    Common,
    /// A game's set-up of bento's allocators: subsystem heaps, a frame arena, a pool.
    Bento,
    /// The same set-up with transparent huge pages (Linux).
    #[cfg(target_os = "linux")]
    BentoHuge,
    /// The same set-up with sampled guard pages in its heaps (Unix).
    #[cfg(unix)]
    BentoGuard,
    /// The same set-up with a sampled allocation profile of its heaps.
    BentoProf,
}

impl AllocatorName {
    /// The name as typed and as the tables show it.
    fn name(self) -> String {
        self.to_possible_value()
            .map_or_else(String::new, |v| v.get_name().to_owned())
    }
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            // clap's own text: what was wrong, its suggestion, the usage (or the help
            // for a bare `bento`); exit 0 for --help and --version, 2 otherwise.
            let _ = e.print();
            return ExitCode::from(u8::try_from(e.exit_code()).unwrap_or(2));
        }
    };
    match run_command(cli.command) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("bento: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run_command(command: Command) -> Result<(), String> {
    match command {
        Command::Demo {
            levels,
            seed,
            output,
            json,
        } => demo::demo(levels, seed, &output, json),
        Command::Gen {
            profile,
            scale,
            seed,
            output,
        } => {
            let output = output.unwrap_or_else(|| {
                let name = profile
                    .to_possible_value()
                    .map_or_else(|| "trace".to_owned(), |v| v.get_name().to_owned());
                PathBuf::from(format!("{name}.trace"))
            });
            demo::generate(profile, scale, seed, &output).map(|counts| {
                out!(
                    "wrote {}: {} records ({} allocations, {} frames, {} phases), peak live {}",
                    output.display(),
                    counts.records,
                    counts.allocs,
                    counts.frames,
                    counts.phases,
                    run::bytes(counts.peak_live)
                );
            })
        }
        Command::Record {
            output,
            library,
            json,
            program,
        } => record::record(&program, &output, library.as_deref(), json),
        Command::Replay {
            trace,
            allocators,
            output,
            json,
            no_latency,
            allow_failures,
            max_live,
        } => {
            let names: Vec<String> = if allocators.is_empty() {
                setup::REPLAY_DEFAULT
                    .iter()
                    .map(|s| s.to_string())
                    .collect()
            } else {
                allocators.iter().map(|a| a.name()).collect()
            };
            demo::replay_command(
                &trace,
                &names,
                output.as_deref(),
                json,
                !no_latency,
                allow_failures,
                limit::LiveBound::new(max_live),
            )
        }
        Command::Diff {
            old,
            new,
            top,
            json,
        } => diff::run(&old, &new, top as usize, json),
        Command::Inspect {
            trace,
            json,
            born,
            phase,
            live_at,
            output,
            pprof,
        } => {
            let born = match (born, phase) {
                (Some(frames), _) => Some(leaks::Born::frames(&frames)?),
                (None, Some(name)) => Some(leaks::Born::Phase(name)),
                (None, None) => None,
            };
            match born {
                Some(born) => {
                    let outputs = leaks::Outputs {
                        chart: output.as_deref(),
                        pprof: pprof.as_deref(),
                    };
                    leaks::query(&trace, &born, live_at, json, outputs)
                }
                None if live_at.is_some() || output.is_some() || pprof.is_some() => Err(
                    "--live-at, --output and --pprof ask about leaks: give --born FRAMES or \
                     --phase NAME"
                        .into(),
                ),
                None => inspect::inspect(&trace, json),
            }
        }
        Command::Map {
            trace,
            at,
            output,
            max_live,
        } => {
            let bound = limit::LiveBound::new(max_live);
            let (seq, rows) = map::rows_at(&trace, &at, bound)?;
            let title = format!(
                "{}: a memory space after record {seq}",
                trace
                    .file_name()
                    .map_or("trace".into(), |n| n.to_string_lossy())
            );
            chart::map_chart(&rows, &title, &output)?;
            out!("{}", map::summary(&rows));
            out!("wrote {}", output.display());
            Ok(())
        }
        Command::Soak {
            hours,
            frames,
            trace,
            loops,
            max_live,
            allocators,
            output,
            json,
        } => {
            let names: Vec<String> = if allocators.is_empty() {
                soak::SOAK_ALLOCATORS
                    .iter()
                    .map(|s| s.to_string())
                    .collect()
            } else {
                allocators
            };
            let play = match trace {
                Some(path) => {
                    let bound = limit::LiveBound::new(max_live);
                    bound.check(&path, inspect::scan(&path)?.peak_live)?;
                    soak::Play::Trace {
                        path,
                        loops,
                        max_live: bound.bytes().unwrap_or(u64::MAX),
                    }
                }
                None => soak::Play::Long(soak::session(hours, frames)),
            };
            soak::soak_command(&names, &play, json, output.as_deref())
        }
        Command::SoakChild {
            allocator,
            hours,
            frames,
            trace,
            loops,
            max_live,
            result,
        } => {
            let play = match trace {
                Some(path) => soak::Play::Trace {
                    path,
                    loops,
                    max_live,
                },
                None => soak::Play::Long(soak::session(hours, frames)),
            };
            soak::child(&allocator, &play, &result)
        }
        Command::Child {
            trace,
            allocator,
            result,
            sample_every,
            latency,
            max_live,
        } => child::child(&trace, &allocator, &result, sample_every, latency, max_live),
    }
}
