//! `cargo xtask test`: tier 0, every unit, property, model and doc test.

use crate::step::{Outcome, Step, cargo, status};

pub(crate) const STEP: Step = Step { name: "test", run };

fn run() -> Outcome {
    let mut cmd = cargo();
    cmd.args(["test", "--workspace"]);
    status(cmd)
}
