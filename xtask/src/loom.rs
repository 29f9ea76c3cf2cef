//! `cargo xtask loom`: tier 2. Each loom crate's `tests/loom.rs` under
//! `--cfg bento_loom` with the forwarded `loom` feature, in release, in its own target
//! directory (the cfg changes every crate's build).

use crate::step::{Outcome, Step, cargo, root, status};

/// The crates with loom models (`tests/loom.rs` and a `loom` feature), each with the
/// features it is built with: its own `loom`, and that of every dev-dependency with
/// loom models of its own (the cfg reaches them too).
const LOOM_CRATES: &[(&str, &str)] = &[
    ("bento-pages", "loom"),
    ("bento-primitives", "loom"),
    ("bento-common", "loom"),
    ("bento-heap", "loom,bento-primitives/loom,bento-common/loom"),
];

pub(crate) const STEP: Step = Step { name: "loom", run };

fn run() -> Outcome {
    if LOOM_CRATES.is_empty() {
        return Outcome::Empty("no crate lists it yet");
    }
    for (krate, features) in LOOM_CRATES {
        let mut cmd = cargo();
        cmd.args([
            "test",
            "--release",
            "-p",
            krate,
            "--features",
            features,
            "--test",
            "loom",
        ])
        .env("RUSTFLAGS", "--cfg bento_loom")
        .env("LOOM_MAX_PREEMPTIONS", "2")
        .env("CARGO_TARGET_DIR", root().join("target").join("loom"));
        if let failed @ Outcome::Failed(_) = status(cmd) {
            return failed;
        }
    }
    Outcome::Passed
}
