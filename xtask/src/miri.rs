//! `cargo xtask miri [--full]`: tier 1. The Miri crates' tests under `cargo +nightly
//! miri test` with strict provenance and symbolic alignment, then the crates Stacked
//! Borrows cannot run under Tree Borrows, then the threaded stress under another
//! schedule.
//!
//! CI runs the quick form: every test once (`bento_testkit::cases` sizes them for
//! Miri), the crates Stacked Borrows passes not again under Tree Borrows, the stress
//! under one more seed. `--full` also runs bento-align and bento-pages under Tree
//! Borrows and the stress under three more seeds.
//!
//! Under `cargo xtask ci` the quick run starts beside the other steps, at the lowest
//! CPU priority, and takes the time their builds and tests leave a core idle.
//!
//! Miri interprets a test binary on one core, so the runs go in two lanes at once,
//! each a list of `cargo miri test` calls taken in turn, balanced by how long each
//! crate's suite takes; a lane's output is printed when it ends. Both lanes share
//! the target directory: cargo holds its lock while it builds, not while the tests
//! run.

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Instant;

use crate::step::{Outcome, Step, cargo_nightly, describe, succeeds, target_dir};

/// One `cargo miri test` call: crates, Tree Borrows or not, and for a threaded test
/// its `--test` target, name filter and seed.
#[derive(Clone, Copy)]
struct Run {
    crates: &'static [&'static str],
    tree_borrows: bool,
    threaded: Option<(&'static str, &'static str, u32)>,
}

const fn suites(crates: &'static [&'static str], tree_borrows: bool) -> Run {
    Run {
        crates,
        tree_borrows,
        threaded: None,
    }
}

/// The threaded stress once more under Miri seed `seed`: the seed picks the
/// interleaving (and the weak-memory outcomes) it explores.
const fn stress(seed: u32) -> Run {
    Run {
        crates: &["bento-primitives"],
        tree_borrows: false,
        threaded: Some(("all", "shared_pool_stress", seed)),
    }
}

/// The first lane: bento-primitives under Stacked Borrows (it passes them and is not
/// run twice), the stress, then bento-common under Tree Borrows only: a boundary-tag
/// `free` reads the tag in front of a block through the pointer it is given, which
/// Stacked Borrows forbids when that pointer came from a reference to the block (see
/// docs/decisions.md, "Across the crates").
const LANE_A: &[Run] = &[
    suites(&["bento-primitives"], false),
    stress(1),
    suites(&["bento-common"], true),
];

/// The second lane: the other Stacked Borrows crates, then bento-space and
/// bento-heap under Tree Borrows (as bento-common, for the same reason). The lanes
/// are balanced by the suites' times under Miri, measured one suite at a time on a
/// quiet machine (primitives 240 s, common 480, space 390, heap 250, align, testkit
/// and pages together 220).
const LANE_B: &[Run] = &[
    suites(&["bento-align", "bento-testkit", "bento-pages"], false),
    suites(&["bento-space", "bento-heap"], true),
];

/// Added to the first lane with `--full`: bento-align and bento-pages under Tree
/// Borrows as well, and the stress under more seeds.
const FULL: &[Run] = &[
    suites(&["bento-align", "bento-pages"], true),
    stress(2),
    stress(3),
];

/// Miri's checks, and its provenance garbage collection every 1000 basic blocks
/// rather than 10,000: the borrow trees of the allocators' large buffers stay small,
/// which halves the time of a Tree Borrows model test (common `model_by_size`: 74 s
/// at the default, 38 s at 1000, 47 s at 200, 561 s at 100,000).
const FLAGS: &str =
    "-Zmiri-strict-provenance -Zmiri-symbolic-alignment-check -Zmiri-provenance-gc=1000";

pub(crate) const STEP: Step = Step { name: "miri", run };

/// The run [`start_beside`] started, which [`STEP`] waits for.
static BESIDE: Mutex<Option<Beside>> = Mutex::new(None);

/// Set to stop the lanes: no further `cargo miri` call starts.
static CANCELLED: AtomicBool = AtomicBool::new(false);

/// The `cargo miri` calls running now.
static RUNNING: Mutex<Vec<u32>> = Mutex::new(Vec::new());

/// A run of the lanes on a thread of its own.
struct Beside {
    thread: JoinHandle<(Outcome, String)>,
    started: Instant,
}

/// How the lanes' commands run.
#[derive(Clone, Copy)]
struct Mode {
    /// At the lowest CPU priority, in their own target directory: beside the other
    /// steps of `cargo xtask ci`.
    beside: bool,
}

/// Starts the quick run beside the other steps of `cargo xtask ci`, whose builds and
/// tests leave a core idle much of the time: each lane's `cargo miri` calls run at the
/// lowest CPU priority (`nice -n 19`), so the other steps take the cores first, and
/// in a target directory of their own, so neither waits on the other's build lock.
/// [`STEP`] then waits for it and reports it. Where Miri cannot be installed, or on a
/// system without `nice`, nothing starts and [`STEP`] runs as usual.
pub(crate) fn start_beside() {
    if !cfg!(unix) || std::env::args().any(|a| a == "--full") || ensure_miri().is_err() {
        return;
    }
    println!("xtask: miri starts beside the other steps (nice -n 19)");
    let thread = std::thread::spawn(|| run_lanes(Mode { beside: true }));
    *BESIDE.lock().expect("not poisoned") = Some(Beside {
        thread,
        started: Instant::now(),
    });
}

/// Stops a run [`start_beside`] started and not yet waited for: its `cargo miri`
/// calls are killed with the processes they started, and no other starts.
pub(crate) fn stop_beside() {
    let Some(beside) = BESIDE.lock().expect("not poisoned").take() else {
        return;
    };
    CANCELLED.store(true, Ordering::SeqCst);
    for &pid in RUNNING.lock().expect("not poisoned").iter() {
        kill_tree(pid);
    }
    let _ = beside.thread.join();
}

/// Sends SIGTERM to `pid` and every process below it (found with `pgrep -P`), the
/// lowest first, so that none is left running on its own. The calls stay in xtask's
/// process group, where a Ctrl-C reaches them.
fn kill_tree(pid: u32) {
    let below = Command::new("pgrep")
        .args(["-P", &pid.to_string()])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default();
    for child in below.lines().filter_map(|l| l.trim().parse().ok()) {
        kill_tree(child);
    }
    let mut kill = Command::new("kill");
    kill.args(["-TERM", &pid.to_string()]);
    let _ = succeeds(kill);
}

fn run() -> Outcome {
    if let Some(beside) = BESIDE.lock().expect("not poisoned").take() {
        let (outcome, logs) = beside.thread.join().unwrap_or_else(|_| {
            (
                Outcome::Failed("the Miri thread panicked".into()),
                String::new(),
            )
        });
        println!(
            "{logs}\nxtask: miri ran beside the other steps for {:.1} s",
            beside.started.elapsed().as_secs_f64()
        );
        return outcome;
    }
    if let Err(why) = ensure_miri() {
        return Outcome::Skipped(format!("MIRI SKIPPED: {why}"));
    }
    let (outcome, logs) = run_lanes(Mode { beside: false });
    println!("{logs}");
    outcome
}

/// Runs the two lanes at once; returns the outcome and their logs.
fn run_lanes(mode: Mode) -> (Outcome, String) {
    let full = std::env::args().any(|a| a == "--full");
    let mut lane_a = LANE_A.to_vec();
    if full {
        lane_a.extend_from_slice(FULL);
    }
    let logs = target_dir().join("miri-lanes");
    if let Err(e) = std::fs::create_dir_all(&logs) {
        let why = format!("cannot create {}: {e}", logs.display());
        return (Outcome::Failed(why), String::new());
    }
    let (a, b) = std::thread::scope(|s| {
        let a = s.spawn(|| lane("a", &lane_a, logs.join("a.log"), mode));
        let b = s.spawn(|| lane("b", LANE_B, logs.join("b.log"), mode));
        (a.join(), b.join())
    });
    let mut text = String::new();
    let mut outcome = Outcome::Passed;
    for lane in [a, b] {
        match lane {
            Ok((result, log)) => {
                text.push_str(&log);
                if let (Outcome::Passed, Err(why)) = (&outcome, result) {
                    outcome = Outcome::Failed(why);
                }
            }
            Err(_) => outcome = Outcome::Failed("a Miri lane panicked".into()),
        }
    }
    (outcome, text)
}

/// Runs `runs` in turn with their output in `log`, stopping at the first failure;
/// returns the result and the log.
fn lane(name: &str, runs: &[Run], log: PathBuf, mode: Mode) -> (Result<(), String>, String) {
    let start = Instant::now();
    let result = runs.iter().try_for_each(|run| {
        if CANCELLED.load(Ordering::SeqCst) {
            return Err("stopped: another step failed".to_owned());
        }
        let file = std::fs::File::options()
            .create(true)
            .append(true)
            .open(&log)
            .map_err(|e| format!("cannot open {}: {e}", log.display()))?;
        let err = file
            .try_clone()
            .map_err(|e| format!("cannot open {}: {e}", log.display()))?;
        let mut cmd = command(run, mode);
        cmd.stdout(Stdio::from(file)).stderr(Stdio::from(err));
        run_tracked(cmd)
    });
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    let _ = std::fs::remove_file(&log);
    let text = format!(
        "\n---- miri lane {name} ({:.1} s) ----\n{text}",
        start.elapsed().as_secs_f64()
    );
    (result, text)
}

/// Runs `cmd`, listed in [`RUNNING`] while it runs.
fn run_tracked(mut cmd: Command) -> Result<(), String> {
    println!("$ {}", describe(&cmd));
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("could not start `{}`: {e}", describe(&cmd)))?;
    RUNNING.lock().expect("not poisoned").push(child.id());
    let status = child.wait();
    RUNNING
        .lock()
        .expect("not poisoned")
        .retain(|&pid| pid != child.id());
    match status {
        Ok(s) if s.success() => Ok(()),
        Ok(s) => Err(format!("`{}` exited with {s}", describe(&cmd))),
        Err(e) => Err(format!("`{}`: {e}", describe(&cmd))),
    }
}

fn command(run: &Run, mode: Mode) -> Command {
    let mut cmd = cargo_nightly();
    if mode.beside {
        cmd = niced(cmd);
        cmd.env("CARGO_TARGET_DIR", target_dir().join("miri-beside"));
    }
    let mut flags = FLAGS.to_owned();
    if run.tree_borrows {
        flags.push_str(" -Zmiri-tree-borrows");
    }
    cmd.args(["miri", "test"]);
    for krate in run.crates {
        cmd.args(["-p", krate]);
    }
    match run.threaded {
        Some((test, filter, seed)) => {
            flags.push_str(&format!(" -Zmiri-seed={seed}"));
            cmd.args(["--test", test, filter]);
        }
        // Doc examples are left to tier 0: under Miri each one is a separate build.
        None => {
            cmd.args(["--lib", "--tests"]);
        }
    }
    // Each test's time in the log, to balance the lanes and find the slow ones.
    cmd.args(["--", "-Zunstable-options", "--report-time"]);
    cmd.env("MIRIFLAGS", flags);
    cmd
}

/// Installs the nightly toolchain's `miri` and `rust-src` components when missing, and
/// prepares Miri's sysroot.
fn ensure_miri() -> Result<(), String> {
    let mut probe = cargo_nightly();
    probe.args(["miri", "--version"]);
    if !succeeds(probe) {
        println!("xtask: installing nightly miri and rust-src with rustup");
        let mut add = Command::new("rustup");
        add.args([
            "toolchain",
            "install",
            "nightly",
            "--profile",
            "minimal",
            "--component",
            "miri",
            "--component",
            "rust-src",
        ]);
        if !succeeds(add) {
            return Err(
                "`rustup toolchain install nightly --component miri --component rust-src` failed"
                    .into(),
            );
        }
    }
    let mut setup = cargo_nightly();
    setup.args(["miri", "setup"]);
    if succeeds(setup) {
        Ok(())
    } else {
        Err("`cargo +nightly miri setup` failed".into())
    }
}

/// `cmd` under `nice -n 19`: the same program, arguments, environment and folder.
fn niced(cmd: Command) -> Command {
    let mut niced = Command::new("nice");
    niced
        .args(["-n", "19"])
        .arg(cmd.get_program())
        .args(cmd.get_args());
    for (key, value) in cmd.get_envs() {
        match value {
            Some(value) => niced.env(key, value),
            None => niced.env_remove(key),
        };
    }
    if let Some(dir) = cmd.get_current_dir() {
        niced.current_dir(dir);
    }
    niced
}
