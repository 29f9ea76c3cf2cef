//! `cargo xtask test`: tier 0, every unit, property, model and doc test; then every
//! allocator crate's, the trace's and the CLI's unit and integration tests once more
//! in a release build, where the debug checks are off and the release-only paths run
//! (the pools keep no count of chunks in use, the stacks' and the space's figures and
//! `validate` take other paths, a free without a layout is probed, arithmetic wraps
//! where it is not checked); and bento-heap's Tracy test with the `tracy` feature.
//!
//! The CLI's release build leaves out its `jemalloc` feature: jemalloc's C build is
//! the longest unit of a release build (about 100 s of a 2-core machine, three CPU
//! minutes), the debug build has already run every test with it, and none of the
//! release-only paths is jemalloc's.

use crate::step::{Outcome, Step, cargo, status};

pub(crate) const STEP: Step = Step { name: "test", run };

/// The crates whose tests run again in a release build (and the CLI, without jemalloc).
const RELEASE: &[&str] = &[
    "bento-pages",
    "bento-primitives",
    "bento-space",
    "bento-common",
    "bento-heap",
    "bento-trace",
];

/// The examples of docs/guide.md (crates/bento/examples).
const EXAMPLES: &[&str] = &[
    "level_loading",
    "frame_memory",
    "particles",
    "subsystem_heaps",
    "global_allocator",
    "hashmap_in_a_space",
    "custom_page_source",
];

fn run() -> Outcome {
    let mut cmd = cargo();
    cmd.args(["test", "--workspace"]);
    match status(cmd) {
        Outcome::Passed => {}
        other => return other,
    }
    let mut cmd = cargo();
    cmd.args(["test", "--release", "--lib", "--tests"]);
    for krate in RELEASE {
        cmd.args(["-p", krate]);
    }
    match status(cmd) {
        Outcome::Passed => {}
        other => return other,
    }
    let mut cmd = cargo();
    cmd.args([
        "test",
        "--release",
        "-p",
        "bento-alloc-cli",
        "--no-default-features",
        "--features",
        "mimalloc",
        "--tests",
    ]);
    match status(cmd) {
        Outcome::Passed => {}
        other => return other,
    }
    // The guide's examples, each run to the end (they assert what they show).
    for example in EXAMPLES {
        let mut cmd = cargo();
        cmd.args(["run", "-q", "-p", "bento-alloc", "--example", example]);
        if let failed @ Outcome::Failed(_) = status(cmd) {
            return failed;
        }
    }
    // The heaps with the Tracy client built in and started.
    let mut cmd = cargo();
    cmd.args([
        "test",
        "-p",
        "bento-heap",
        "--features",
        "tracy",
        "--test",
        "tracy",
    ]);
    status(cmd)
}
