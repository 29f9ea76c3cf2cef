//! `cargo xtask bench`: the criterion benchmarks, bento beside its peers (not in CI:
//! timing on a shared machine is for people to read, never for a pass/fail).

use crate::step::{Outcome, Step, cargo, status};

pub(crate) const STEP: Step = Step { name: "bench", run };

fn run() -> Outcome {
    let mut cmd = cargo();
    cmd.args(["bench", "-p", "bento-benches"]);
    status(cmd)
}
