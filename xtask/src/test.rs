//! `cargo xtask test`: tier 0, every unit, property, model and doc test; then the
//! primitives' unit and integration tests once more in a release build, where the
//! pools keep no count of chunks in use and have no debug checks (their figures and
//! `validate` take another path there).

use crate::step::{Outcome, Step, cargo, status};

pub(crate) const STEP: Step = Step { name: "test", run };

fn run() -> Outcome {
    let mut cmd = cargo();
    cmd.args(["test", "--workspace"]);
    match status(cmd) {
        Outcome::Passed => {}
        other => return other,
    }
    let mut cmd = cargo();
    cmd.args([
        "test",
        "--release",
        "-p",
        "bento-primitives",
        "--lib",
        "--tests",
    ]);
    status(cmd)
}
