//! `cargo xtask nightly`: bento's `nightly` feature (`core::alloc::Allocator` on every
//! allocator) on the nightly toolchain, through the standard library's own `Vec` and
//! `Box` (`crates/bento/tests/nightly.rs`).

use crate::step::{Outcome, Step, cargo_nightly, status};

pub(crate) const STEP: Step = Step {
    name: "nightly",
    run,
};

fn run() -> Outcome {
    let mut cmd = cargo_nightly();
    cmd.args([
        "test",
        "-p",
        "bento",
        "--features",
        "nightly",
        "--test",
        "nightly",
    ]);
    status(cmd)
}
