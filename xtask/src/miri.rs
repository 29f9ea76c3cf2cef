//! `cargo xtask miri [--full]`: tier 1. The Miri crates' tests under `cargo +nightly
//! miri test` with strict provenance and symbolic alignment, then the crates Stacked
//! Borrows cannot run under Tree Borrows, then the threaded stress under another
//! schedule.
//!
//! CI runs the quick form: every test once (`bento_testkit::cases` sizes them for
//! Miri), the crates Stacked Borrows passes not again under Tree Borrows, the stress
//! under one more seed. `--full` also runs bento-align and bento-pages under Tree
//! Borrows and the stress under three more seeds.

use std::process::Command;

use crate::step::{Outcome, Step, cargo_nightly, status, succeeds};

/// The crates whose whole test suites run under Miri (Stacked Borrows).
const MIRI_CRATES: &[&str] = &[
    "bento-align",
    "bento-testkit",
    "bento-pages",
    "bento-primitives",
];

/// The crates run under Tree Borrows. bento-space (and bento-common, over it) run
/// under Tree Borrows only: a boundary-tag `free` reads the tag in front of a block
/// through the pointer it is given, which Stacked Borrows forbids when that pointer
/// came from a reference to the block (see docs/decisions.md, "Across the crates").
/// bento-primitives passes under Stacked Borrows above and is not run twice: its
/// suite is the longest under Miri.
const TREE_BORROWS_CRATES: &[&str] = &["bento-space", "bento-common", "bento-heap"];

/// Run under Tree Borrows as well with `--full` (they pass Stacked Borrows above).
const TREE_BORROWS_FULL: &[&str] = &["bento-align", "bento-pages"];

/// Threaded tests (crate, test-name filter) run again with each of [`SEEDS`].
const THREADED: &[(&str, &str)] = &[("bento-primitives", "shared_pool_stress")];

/// The extra `-Zmiri-seed` values for [`THREADED`]: the first in CI, all with `--full`.
const SEEDS: &[u32] = &[1, 2, 3];

const FLAGS: &str = "-Zmiri-strict-provenance -Zmiri-symbolic-alignment-check";

pub(crate) const STEP: Step = Step { name: "miri", run };

fn run() -> Outcome {
    if let Err(why) = ensure_miri() {
        return Outcome::Skipped(format!("MIRI SKIPPED: {why}"));
    }
    let full = std::env::args().any(|a| a == "--full");
    let tree: Vec<&str> = if full {
        TREE_BORROWS_FULL
            .iter()
            .chain(TREE_BORROWS_CRATES)
            .copied()
            .collect()
    } else {
        TREE_BORROWS_CRATES.to_vec()
    };
    for (crates, extra) in [(MIRI_CRATES, ""), (&tree[..], " -Zmiri-tree-borrows")] {
        let mut cmd = cargo_nightly();
        // Doc examples are left to tier 0: under Miri each one is a separate build.
        cmd.args(["miri", "test", "--lib", "--tests"])
            .env("MIRIFLAGS", format!("{FLAGS}{extra}"));
        for krate in crates {
            cmd.args(["-p", krate]);
        }
        if let failed @ Outcome::Failed(_) = status(cmd) {
            return failed;
        }
    }
    // The threaded tests once more under other schedules: Miri's seed picks the
    // interleaving (and the weak-memory outcomes) it explores.
    let seeds = if full { SEEDS } else { &SEEDS[..1] };
    for (krate, filter) in THREADED {
        for seed in seeds {
            let mut cmd = cargo_nightly();
            cmd.args(["miri", "test", "-p", krate, "--test", "all", filter])
                .env("MIRIFLAGS", format!("{FLAGS} -Zmiri-seed={seed}"));
            if let failed @ Outcome::Failed(_) = status(cmd) {
                return failed;
            }
        }
    }
    Outcome::Passed
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
