//! `cargo xtask miri [--full]`: tier 1. The Miri crates' tests under `cargo +nightly
//! miri test` with strict provenance and symbolic alignment, and the crates Stacked
//! Borrows cannot run under Tree Borrows.
//!
//! CI runs the quick form: every test once (`bento_testkit::cases` sizes them for
//! Miri), the crates Stacked Borrows passes not again under Tree Borrows. `--full`
//! also runs bento-align and bento-pages under Tree Borrows and the threaded stress
//! under three more seeds.
//!
//! Miri interprets a test binary on one core, so the runs go in two lanes at once,
//! each a list of `cargo miri test` calls taken in turn, balanced by how long each
//! crate's suite takes; a lane's output is printed when it ends. Both lanes share
//! the target directory: cargo holds its lock while it builds, not while the tests
//! run.

use std::process::Command;

use crate::step::{Outcome, Step, cargo_nightly, succeeds, two_lanes};

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

/// The first lane: bento-align, the testkit and bento-pages under Stacked Borrows
/// (they pass them and are not run twice), then bento-common under Tree Borrows
/// only: a boundary-tag `free` reads the tag in front of a block through
/// the pointer it is given, which Stacked Borrows forbids when that pointer came from
/// a reference to the block (see docs/decisions.md, "Across the crates").
const LANE_A: &[Run] = &[
    suites(&["bento-align", "bento-testkit", "bento-pages"], false),
    suites(&["bento-common"], true),
];

/// The second lane: bento-primitives under Stacked Borrows, then bento-space and
/// bento-heap under Tree Borrows (as bento-common, for the same reason; with
/// bento-heap in the first lane the lanes took 479 s and 329 s). The lanes are balanced by the
/// suites' times under Miri's clock (which counts the work interpreted, whatever the
/// machine does; `--report-time` prints each test's).
const LANE_B: &[Run] = &[
    suites(&["bento-primitives"], false),
    suites(&["bento-space", "bento-heap"], true),
];

/// Added to the first lane with `--full`: bento-align and bento-pages under Tree
/// Borrows as well, and the stress under more seeds.
const FULL: &[Run] = &[
    suites(&["bento-align", "bento-pages"], true),
    stress(1),
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

/// The prefetch's part: the nightly toolchain with Miri, and Miri's sysroot.
pub(crate) fn prepare() -> Result<(), String> {
    ensure_miri()
}

fn run() -> Outcome {
    crate::prefetch::wait();
    if let Err(why) = ensure_miri() {
        return Outcome::Skipped(format!("MIRI SKIPPED: {why}"));
    }
    let full = std::env::args().any(|a| a == "--full");
    let mut lane_a = LANE_A.to_vec();
    if full {
        lane_a.extend_from_slice(FULL);
    }
    let a = lane_a.iter().map(command).collect();
    let b = LANE_B.iter().map(command).collect();
    two_lanes("miri", a, b)
}

/// The `cargo miri test` call for `run`.
fn command(run: &Run) -> Command {
    let mut cmd = cargo_nightly();
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
