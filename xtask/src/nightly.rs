//! `cargo xtask nightly`: bento's `nightly` feature (`core::alloc::Allocator` on every
//! allocator) on the nightly toolchain, through the standard library's own `Vec` and
//! `Box` (`crates/bento/tests/nightly.rs`). The toolchain is installed when missing;
//! one older than 1.100, which lacks the stable trait, is reported as skipped.

use std::process::Command;

use crate::step::{Outcome, Step, cargo_nightly, status, succeeds};

pub(crate) const STEP: Step = Step {
    name: "nightly",
    run,
};

/// The first Rust with `core::alloc::Allocator`, `Vec::new_in` and `Box::new_in` stable.
const MINOR: u32 = 100;

fn run() -> Outcome {
    if let Err(why) = ensure_nightly() {
        return Outcome::Skipped(why);
    }
    let mut cmd = cargo_nightly();
    cmd.args([
        "test",
        "-p",
        "bento-alloc",
        "--features",
        "nightly",
        "--test",
        "nightly",
    ]);
    status(cmd)
}

fn ensure_nightly() -> Result<(), String> {
    if minor().is_none() {
        println!("xtask: installing the nightly toolchain with rustup");
        let mut add = Command::new("rustup");
        add.args(["toolchain", "install", "nightly", "--profile", "minimal"]);
        if !succeeds(add) {
            return Err("`rustup toolchain install nightly` failed".into());
        }
    }
    match minor() {
        Some(m) if m >= MINOR => Ok(()),
        Some(m) => Err(format!(
            "the nightly toolchain is 1.{m}; the feature needs 1.{MINOR} or later \
             (`rustup update nightly`)"
        )),
        None => Err("`rustc +nightly --version` does not run".into()),
    }
}

/// The nightly toolchain's minor version (`rustc 1.101.0-nightly (…)` gives 101).
fn minor() -> Option<u32> {
    let out = Command::new("rustc")
        .args(["+nightly", "--version"])
        .env_remove("RUSTUP_TOOLCHAIN")
        .env_remove("RUSTC")
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    text.split_whitespace()
        .nth(1)?
        .split('.')
        .nth(1)?
        .parse()
        .ok()
}
