//! `cargo xtask nostd`: the `no_std` crates build for a target without `std`.

use crate::step::{Outcome, STABLE, Step, cargo, ensure_target, status};

/// The crates that must build without `std`.
const NO_STD_CRATES: &[&str] = &[
    "bento-align",
    "bento-pages",
    "bento-primitives",
    "bento-space",
    "bento-common",
    "bento-heap",
    "bento-alloc",
];

const TARGET: &str = "thumbv7em-none-eabihf";

pub(crate) const STEP: Step = Step { name: "nostd", run };

/// The prefetch's part: the target's standard library.
pub(crate) fn prepare() -> Result<(), String> {
    ensure_target(STABLE, TARGET)
}

fn run() -> Outcome {
    crate::prefetch::wait();
    if let Err(why) = ensure_target(STABLE, TARGET) {
        return Outcome::Skipped(format!("NOSTD SKIPPED: {why}"));
    }
    let mut cmd = cargo();
    cmd.args(["check", "--no-default-features", "--target", TARGET]);
    for krate in NO_STD_CRATES {
        cmd.args(["-p", krate]);
    }
    status(cmd)
}
