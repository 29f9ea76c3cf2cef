//! `cargo xtask fuzz-build`: the fuzz crate (its own workspace, which `--workspace`
//! does not reach) still builds, so its targets never rot between fuzzing runs.

use crate::step::{Outcome, Step, cargo, status};

pub(crate) const STEP: Step = Step {
    name: "fuzz-build",
    run,
};

fn run() -> Outcome {
    let mut cmd = cargo();
    // The root's target directory, so that the testkit and the allocators it builds
    // are shared with the other steps.
    cmd.args([
        "check",
        "--manifest-path",
        "fuzz/Cargo.toml",
        "--target-dir",
        "target/fuzz",
        "--bins",
    ]);
    status(cmd)
}
