//! `cargo xtask bench [--icount | --render [--out FILE] | --quick]`: every measurement of bento
//! beside its peers in one run, then `docs/benchmarks.md` and its charts rendered from
//! it (`benches/src/report.rs`, through `benches/report/template.md`). Not part of CI
//! (timing on a shared machine is for people to read, never a pass or a fail), except
//! `--quick`, which only builds the benches and the measuring programs so that they
//! never rot.
//!
//! The run, in order: the criterion suites; the game session's footprint, the churn
//! and `validate()` programs; the scaling of two threads (five rounds); `bench-global`
//! and `bench-malloc` (five rounds each);
//! `bento demo --json`; `bento soak --json` (a hundred hours, every allocator); with
//! `--icount`, callgrind counts of the hot loops. Each writes its stats as JSON to
//! `target/bench-report/NAME.json` (`session`, `churn`, `validate`, `scaling`, `global`,
//! `malloc`, `demo`, `soak`, `icount`, and `meta` for the machine and
//! the commands; criterion to `target/criterion/`), both directories cleared first,
//! so that every table of the report comes from this run; the report formats them.
//! `--render` only renders the last run's stats again (after a change to the
//! template); with `--out FILE`, to FILE and its charts to `img/` beside it, leaving
//! `docs/` alone.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::step::{Outcome, Step, cargo, root, status, succeeds, target_dir};
use crate::{bench_global, bench_malloc};

pub(crate) const STEP: Step = Step { name: "bench", run };

/// CI's step: `bench --quick`.
pub(crate) const QUICK: Step = Step {
    name: "bench-build",
    run: || match quick() {
        Ok(()) => Outcome::Passed,
        Err(e) => Outcome::Failed(e),
    },
};

/// Criterion's settings for the report's run: every group, a second of warm-up and
/// three of measurement per benchmark.
const CRITERION: &[&str] = &["--warm-up-time", "1", "--measurement-time", "3"];

/// Rounds of `bench-global`, `bench-malloc` and the scaling bench.
const ROUNDS: usize = 5;
/// Steps per thread of the scaling bench.
const SCALING_STEPS: usize = 20_000_000;

/// A loop counted under callgrind: `insns <mode> <arg>` runs it; `ops` operations
/// (`arg`, or `arg` frames of 10,000); `collect` is the `--toggle-collect` pattern.
struct Loop {
    mode: &'static str,
    what: &'static str,
    collect: &'static str,
    arg: u64,
    ops: u64,
}

const fn lp(
    mode: &'static str,
    what: &'static str,
    collect: &'static str,
    arg: u64,
    ops: u64,
) -> Loop {
    Loop {
        mode,
        what,
        collect,
        arg,
        ops,
    }
}

const ALL: &str = "bento_benches::*";
const M: u64 = 1_000_000;

/// The hot loops the report counts.
const LOOPS: &[Loop] = &[
    lp("bento", "`Bump::alloc` 16 B", ALL, M, M),
    lp("bumpalo", "`bumpalo::Bump::alloc` 16 B", ALL, M, M),
    lp("bump-layout", "`Bump::alloc_layout` + write", ALL, M, M),
    lp("stack", "`Stack` + write, rollback", ALL, M, M),
    lp("double-lower", "`DoubleStack` lower end", ALL, M, M),
    lp("double-upper", "`DoubleStack` upper end", ALL, M, M),
    lp("arena", "`Arena::alloc` 16 B", ALL, M, 2 * M),
    lp(
        "frame-bump",
        "frame of 10k, `Bump`",
        "bento_benches::frame_*",
        100,
        1_000_000,
    ),
    lp(
        "frame-arena",
        "frame of 10k, `Arena`",
        "bento_benches::frame_*",
        100,
        1_000_000,
    ),
    lp(
        "pool-bare",
        "LIFO, bare free list",
        "bento_benches::lifo_*",
        M,
        M,
    ),
    lp("pool", "LIFO, `Pool`", "bento_benches::lifo_*", M, M),
    lp(
        "pool-cache",
        "LIFO, `SharedPoolCache`",
        "bento_benches::lifo_*",
        M,
        M,
    ),
    lp(
        "pool-shared",
        "LIFO, `SharedPool`",
        "bento_benches::lifo_*",
        M,
        M,
    ),
    lp("pool-slab", "LIFO, slab", "bento_benches::lifo_*", M, M),
    lp(
        "pool-system",
        "LIFO, glibc `Box`",
        "bento_benches::lifo_*",
        M,
        M,
    ),
    lp(
        "pool-mimalloc",
        "LIFO, mimalloc",
        "bento_benches::lifo_*",
        M,
        M,
    ),
    lp(
        "random-bare",
        "random, bare free list",
        "bento_benches::random_bare",
        M,
        M,
    ),
    lp(
        "random-pool",
        "random, `Pool`",
        "bento_benches::random_pool",
        M,
        M,
    ),
];

/// The space's workloads under callgrind: (workload, loop function, peers).
const SPACE_LOOPS: &[(&str, &str, &[&str])] = &[
    (
        "mixed",
        "mixed_replace",
        &[
            "bento",
            "glibc",
            "mimalloc",
            "jemalloc",
            "talc",
            "rlsf",
            "dlmalloc",
            "common",
            "heap",
            "commonapi",
            "heapcommon",
        ],
    ),
    (
        "small",
        "replace_with",
        &[
            "bento",
            "heap",
            "common",
            "commonapi",
            "heapcommon",
            "mimalloc",
            "jemalloc",
        ],
    ),
    (
        "lifo",
        "lifo_batches",
        &["bento", "glibc", "mimalloc", "jemalloc", "talc"],
    ),
    ("pinned", "lifo_batches", &["bento", "glibc", "talc"]),
    (
        "frame",
        "frame_free_all",
        &["bento", "glibc", "mimalloc", "jemalloc", "talc"],
    ),
];

fn run() -> Outcome {
    let args: Vec<String> = std::env::args().skip(2).collect();
    let flags: Vec<&str> = args.iter().map(String::as_str).collect();
    let result = match flags[..] {
        [] => measure(false).and_then(|()| render(None)),
        ["--icount"] => measure(true).and_then(|()| render(None)),
        ["--render"] => render(None),
        ["--render", "--out", file] => render(Some(file)),
        ["--quick"] => quick(),
        _ => Err(format!(
            "usage: cargo xtask bench [--icount | --render [--out FILE] | --quick], not `{}`",
            args.join(" ")
        )),
    };
    match result {
        Ok(()) => Outcome::Passed,
        Err(e) => Outcome::Failed(e),
    }
}

/// The benches and the measuring programs build (in the test profile's artifacts).
fn quick() -> Result<(), String> {
    let mut cmd = cargo();
    cmd.args([
        "bench",
        "-p",
        "bento-benches",
        "--no-run",
        "--profile",
        "dev",
    ]);
    ok(status(cmd))?;
    let mut bins = cargo();
    bins.args(["build", "-p", "bento-benches", "--bins"]);
    ok(status(bins))
}

/// Renders the report: to `docs/benchmarks.md`, or to `out`.
fn render(out: Option<&str>) -> Result<(), String> {
    let mut cmd = cargo();
    cmd.args(["run", "--release", "-p", "bento-benches", "--bin", "report"]);
    if let Some(out) = out {
        // Relative to where the command was typed, not to cargo's directory.
        let out = std::env::current_dir().map_or_else(|_| out.into(), |d| d.join(out));
        cmd.arg("--").arg("--out").arg(out);
    }
    ok(status(cmd))
}

fn ok(outcome: Outcome) -> Result<(), String> {
    match outcome {
        Outcome::Failed(e) => Err(e),
        _ => Ok(()),
    }
}

fn measure(icount: bool) -> Result<(), String> {
    let target = target_dir();
    let out = target.join("bench-report");
    for dir in [target.join("criterion"), out.clone()] {
        if dir.exists() {
            std::fs::remove_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        }
    }
    std::fs::create_dir_all(&out).map_err(|e| e.to_string())?;
    let mut meta = Meta::new();

    let mut cmd = cargo();
    cmd.args(["bench", "-p", "bento-benches", "--bench", "*", "--"])
        .args(CRITERION);
    meta.cargo(&cmd);
    ok(status(cmd))?;

    let mut build = cargo();
    build.args(["build", "--release", "-p", "bento-benches", "--bins"]);
    build.args(["-p", "bento-alloc-cli"]);
    ok(status(build))?;
    let release = target.join("release");
    for bin in ["session", "churn", "validate"] {
        meta.command(&format!("cargo run --release -p bento-benches --bin {bin}"));
        let text = capture(Command::new(release.join(bin)))?;
        write(&out.join(format!("{bin}.json")), &text)?;
    }
    meta.command(&format!(
        "SCALING_JSON=1 cargo run --release -p bento-benches --bin scaling {ROUNDS} {SCALING_STEPS}"
    ));
    let mut scaling = Command::new(release.join("scaling"));
    scaling
        .arg(ROUNDS.to_string())
        .arg(SCALING_STEPS.to_string())
        .env("SCALING_JSON", "1");
    write(&out.join("scaling.json"), &capture(scaling)?)?;

    meta.command(&format!("cargo xtask bench-global {ROUNDS}"));
    write(&out.join("global.json"), &bench_global::measure(ROUNDS)?)?;
    meta.command(&format!("cargo xtask bench-malloc {ROUNDS}"));
    write(&out.join("malloc.json"), &bench_malloc::measure(ROUNDS)?)?;

    meta.command("cargo run --release -p bento-alloc-cli -- demo --json");
    let demo_dir = out.join("demo");
    let mut demo = Command::new(release.join("bento"));
    demo.arg("demo").arg("--json").arg("-o").arg(&demo_dir);
    write(&out.join("demo.json"), &capture(demo)?)?;
    for svg in ["demo-memory.svg", "demo-heapmap.svg"] {
        let to = root().join("docs").join("img").join(svg);
        std::fs::copy(demo_dir.join(svg), &to).map_err(|e| format!("{svg}: {e}"))?;
    }

    meta.command("cargo run --release -p bento-alloc-cli -- soak --json");
    let soak_svg = out.join("soak-memory.svg");
    let mut soak = Command::new(release.join("bento"));
    soak.arg("soak").arg("--json").arg("-o").arg(&soak_svg);
    write(&out.join("soak.json"), &capture(soak)?)?;
    let to = root().join("docs").join("img").join("soak-memory.svg");
    std::fs::copy(&soak_svg, &to).map_err(|e| format!("soak-memory.svg: {e}"))?;

    if icount {
        meta.command(
            "valgrind --tool=callgrind --toggle-collect=<collect> target/release/insns <mode> <n>",
        );
        write(
            &out.join("icount.json"),
            &count_all(&release.join("insns"))?,
        )?;
    }
    write(&out.join("meta.json"), &meta.finish())
}

/// Runs `cmd` with stderr shown and returns its stdout.
fn capture(mut cmd: Command) -> Result<String, String> {
    println!("$ {cmd:?}");
    let out = cmd
        .stderr(Stdio::inherit())
        .output()
        .map_err(|e| format!("{cmd:?}: {e}"))?;
    if !out.status.success() {
        return Err(format!("{cmd:?} exited with {}", out.status));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn write(path: &Path, text: &str) -> Result<(), String> {
    std::fs::write(path, text).map_err(|e| format!("{}: {e}", path.display()))
}

/// Every loop of [`LOOPS`] and [`SPACE_LOOPS`] under callgrind, as JSON:
/// `{"rows": [{"mode": MODE, "what": TEXT, "collect": PATTERN, "arg": N,
/// "operations": N, "instructions": N}…]}`.
fn count_all(insns: &Path) -> Result<String, String> {
    let mut valgrind = Command::new("valgrind");
    valgrind.arg("--version");
    if !succeeds(valgrind) {
        return Err("--icount needs valgrind (apt-get install valgrind)".into());
    }
    let mut loops: Vec<(String, String, String, u64, u64)> = LOOPS
        .iter()
        .map(|l| (l.mode.into(), l.what.into(), l.collect.into(), l.arg, l.ops))
        .collect();
    for (workload, function, peers) in SPACE_LOOPS {
        let n = if *workload == "frame" {
            100_000
        } else {
            200_000
        };
        for peer in *peers {
            loops.push((
                format!("space-{workload}-{peer}"),
                format!("{workload}, {peer}"),
                format!("bento_benches::heap::{function}*"),
                n,
                n,
            ));
        }
    }
    let mut rows = Vec::new();
    for (mode, what, collect, arg, ops) in loops {
        let total = callgrind(insns, &mode, &collect, arg)?;
        println!(
            "icount: {mode:28} {:10.1} instructions / operation",
            total as f64 / ops as f64
        );
        rows.push(serde_json::json!({
            "mode": mode,
            "what": what,
            "collect": collect,
            "arg": arg,
            "operations": ops,
            "instructions": total,
        }));
    }
    serde_json::to_string_pretty(&serde_json::json!({ "rows": rows })).map_err(|e| e.to_string())
}

/// The instructions callgrind counts in `collect` while `insns mode arg` runs.
fn callgrind(insns: &Path, mode: &str, collect: &str, arg: u64) -> Result<u64, String> {
    let file: PathBuf = root()
        .join("target")
        .join("bench-report")
        .join("callgrind.out");
    let out = Command::new("valgrind")
        .args(["--tool=callgrind", "-q"])
        .arg(format!("--callgrind-out-file={}", file.display()))
        .arg(format!("--toggle-collect={collect}"))
        .arg(insns)
        .args([mode, &arg.to_string()])
        .stdout(Stdio::null())
        .output()
        .map_err(|e| format!("valgrind: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "callgrind of `insns {mode}` failed: {}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    let text = std::fs::read_to_string(&file).map_err(|e| e.to_string())?;
    let _ = std::fs::remove_file(&file);
    text.lines()
        .find_map(|l| {
            l.strip_prefix("totals:")
                .or_else(|| l.strip_prefix("summary:"))
        })
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .ok_or(format!(
            "no totals in callgrind's output for `insns {mode}`"
        ))
}

/// The machine, the date and the commands of the run, as JSON: `{"date_utc": TEXT,
/// "cpu": TEXT, "logical_cpus": N, "kernel": TEXT, "rustc": TEXT, "profile": TEXT,
/// "commands": [TEXT…]}`.
struct Meta {
    doc: serde_json::Value,
    commands: Vec<String>,
}

impl Meta {
    fn new() -> Self {
        let sh = |cmd: &str, args: &[&str]| {
            Command::new(cmd)
                .args(args)
                .output()
                .ok()
                .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
                .unwrap_or_default()
        };
        let cpu = std::fs::read_to_string("/proc/cpuinfo")
            .ok()
            .and_then(|t| {
                t.lines()
                    .find_map(|l| l.strip_prefix("model name"))
                    .map(|l| l.trim_start_matches([' ', '\t', ':']).to_owned())
            })
            .unwrap_or_else(|| "unknown".into());
        let doc = serde_json::json!({
            "date_utc": sh("date", &["-u", "+%Y-%m-%d %H:%M"]),
            "cpu": cpu,
            "logical_cpus": std::thread::available_parallelism().map_or(0, |n| n.get()),
            "kernel": sh("uname", &["-r"]),
            "rustc": sh("rustc", &["-V"]),
            "profile": "release",
        });
        Self {
            doc,
            commands: Vec::new(),
        }
    }

    /// Records a cargo command of the run.
    fn cargo(&mut self, cmd: &Command) {
        let args: Vec<String> = cmd
            .get_args()
            .map(|a| a.to_string_lossy().into_owned())
            .map(|a| if a.contains('*') { format!("'{a}'") } else { a })
            .collect();
        self.command(&format!("cargo {}", args.join(" ")));
    }

    /// Records a command of the run, as a person would type it.
    fn command(&mut self, command: &str) {
        self.commands.push(command.to_owned());
    }

    fn finish(mut self) -> String {
        self.doc["commands"] = self.commands.into();
        serde_json::to_string_pretty(&self.doc).expect("JSON of text")
    }
}
