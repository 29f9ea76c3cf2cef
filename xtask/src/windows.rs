//! `cargo xtask windows`: the Windows code paths type-check.

use crate::step::{Outcome, STABLE, Step, cargo, ensure_target, status};

/// The crates with `cfg(windows)` code.
const WINDOWS_CRATES: &[&str] = &["bento-pages"];

const TARGET: &str = "x86_64-pc-windows-gnu";

pub(crate) const STEP: Step = Step {
    name: "windows",
    run,
};

fn run() -> Outcome {
    if WINDOWS_CRATES.is_empty() {
        return Outcome::Empty("no crate lists it yet");
    }
    if let Err(why) = ensure_target(STABLE, TARGET) {
        return Outcome::Skipped(format!("WINDOWS SKIPPED: {why}"));
    }
    let mut cmd = cargo();
    cmd.args(["check", "--target", TARGET]);
    for krate in WINDOWS_CRATES {
        cmd.args(["-p", krate]);
    }
    status(cmd)
}
