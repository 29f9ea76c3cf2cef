#![doc = include_str!("../README.md")]

mod chart;
mod child;
mod demo;
mod inspect;
mod map;
mod output;
mod run;
mod setup;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::builder::RangedU64ValueParser;
use clap::{Parser, Subcommand, ValueEnum};

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
#[derive(Debug, Parser)]
#[command(name = "bento", version, about, long_about = None)]
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
        /// Where the trace and the charts go.
        #[arg(long, default_value = ".")]
        out: PathBuf,
        /// Print the figures as JSON instead of tables.
        #[arg(long)]
        json: bool,
    },
    /// Generate a workload's trace.
    Gen {
        /// The workload.
        #[arg(long, value_enum, default_value_t = Profile::Game)]
        profile: Profile,
        /// Levels (game), cells (world), thousands of operations (mixed) or hundreds
        /// of batches (lifo): 1 to 10000 (a trace of at most about 1.2 GiB); the
        /// profile's default when left out.
        #[arg(
            long,
            value_parser = RangedU64ValueParser::<usize>::new().range(1..=demo::MAX_GEN_LEVELS)
        )]
        levels: Option<usize>,
        /// The seed of the workload's choices; the profile's default when left out.
        #[arg(long)]
        seed: Option<u64>,
        /// The trace file to write.
        #[arg(short, long)]
        output: PathBuf,
    },
    /// Replay a trace on allocators, each in a fresh process: a table, and a chart
    /// of their memory over time.
    #[command(after_help = setup::ABOUT)]
    Replay {
        /// The trace.
        trace: PathBuf,
        /// Comma-separated allocators to replay on.
        #[arg(long, value_delimiter = ',', default_values = setup::REPLAY_DEFAULT)]
        allocators: Vec<String>,
        /// Write the memory chart here.
        #[arg(long)]
        svg: Option<PathBuf>,
        /// Print the figures as JSON instead of a table.
        #[arg(long)]
        json: bool,
        /// Exit 0 even when an allocator refused allocations or resizes (the table's
        /// `refused` column counts them); without it, a refusal is an error (exit 1)
        /// after the table.
        #[arg(long)]
        allow_failures: bool,
    },
    /// A trace's sizes, lifetimes and tags, as histograms.
    Inspect {
        /// The trace.
        trace: PathBuf,
        /// Print the figures as JSON instead of tables.
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
    },
    /// Runs one replay for `demo` and `replay`, in a child process.
    #[command(name = "__replay-child", hide = true)]
    Child {
        trace: PathBuf,
        #[arg(long)]
        allocator: String,
        #[arg(long)]
        result: PathBuf,
        #[arg(long, default_value_t = 0)]
        sample_every: u64,
    },
}

/// The workloads `gen` writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Profile {
    /// Levels with resident data, frames of temporaries, streaming, particles.
    Game,
    /// An open world streaming cells of small blocks.
    World,
    /// Log-uniform sizes freed in random order around a live set.
    Mixed,
    /// Batches freed in reverse order.
    Lifo,
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            use clap::error::ErrorKind;
            if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) {
                print!("{e}");
                return ExitCode::SUCCESS;
            }
            // One line: clap's first, without its usage block.
            let text = e.render().to_string();
            let line = text.lines().next().unwrap_or("bad arguments");
            eprintln!("bento: {}", line.trim_start_matches("error: "));
            eprintln!("bento: see `bento --help`");
            return ExitCode::from(2);
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
            out,
            json,
        } => demo::demo(levels, seed, &out, json),
        Command::Gen {
            profile,
            levels,
            seed,
            output,
        } => demo::generate(profile, levels, seed, &output).map(|counts| {
            out!(
                "wrote {}: {} records ({} allocations, {} frames, {} phases), peak live {}",
                output.display(),
                counts.records,
                counts.allocs,
                counts.frames,
                counts.phases,
                run::bytes(counts.peak_live)
            );
        }),
        Command::Replay {
            trace,
            allocators,
            svg,
            json,
            allow_failures,
        } => demo::replay_command(&trace, &allocators, svg.as_deref(), json, allow_failures),
        Command::Inspect { trace, json } => inspect::inspect(&trace, json),
        Command::Map { trace, at, output } => map::map_command(&trace, &at, &output),
        Command::Child {
            trace,
            allocator,
            result,
            sample_every,
        } => child::child(&trace, &allocator, &result, sample_every),
    }
}
