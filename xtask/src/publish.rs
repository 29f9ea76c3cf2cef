//! `cargo xtask publish`: every crate meant for users packages as crates.io would take
//! it (metadata, README, licence files, versions on every dependency between our
//! crates, in an order that publishes each before the crates that need it). Nothing is
//! uploaded.

use crate::step::{Outcome, Step, cargo, status};

pub(crate) const STEP: Step = Step {
    name: "publish",
    run,
};

fn run() -> Outcome {
    let mut cmd = cargo();
    // `--no-verify`: the packages' own builds are the other steps' work. `--allow-dirty`
    // lets a developer check before committing.
    cmd.args([
        "publish",
        "--workspace",
        "--dry-run",
        "--no-verify",
        "--allow-dirty",
    ]);
    status(cmd)
}
