//! `cargo xtask doc`: rustdoc with warnings (broken links, missing docs) denied.

use crate::step::{Outcome, Step, cargo, status};

pub(crate) const STEP: Step = Step { name: "doc", run };

fn run() -> Outcome {
    let mut cmd = cargo();
    cmd.args(["doc", "--workspace", "--no-deps"])
        .env("RUSTDOCFLAGS", "-D warnings");
    status(cmd)
}
