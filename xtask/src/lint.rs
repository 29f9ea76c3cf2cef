//! `cargo xtask lint`: clippy on every target with warnings denied.

use crate::step::{Outcome, Step, cargo, status};

pub(crate) const STEP: Step = Step { name: "lint", run };

fn run() -> Outcome {
    let mut cmd = cargo();
    cmd.args([
        "clippy",
        "--workspace",
        "--all-targets",
        "--",
        "-D",
        "warnings",
    ]);
    status(cmd)
}
