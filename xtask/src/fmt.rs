//! `cargo xtask fmt`: formatting is checked, never rewritten, in CI.

use crate::step::{Outcome, Step, cargo, status};

pub(crate) const STEP: Step = Step { name: "fmt", run };

fn run() -> Outcome {
    let mut cmd = cargo();
    cmd.args(["fmt", "--all", "--check"]);
    status(cmd)
}
