//! `cargo xtask fuzz [--time S]`: every cargo-fuzz target in `fuzz/` for S seconds
//! each (default 60), on the nightly toolchain, installing cargo-fuzz when it is
//! missing. Not part of CI, which replays the seeded cases instead (`cargo xtask test`
//! runs the testkit's replays; `fuzz-build` keeps the targets compiling).
//!
//! A crash leaves its input in `fuzz/artifacts/<target>/`; replay it with
//! `cargo +nightly fuzz run <target> fuzz/artifacts/<target>/<file>`.

use std::process::Command;

use crate::step::{Outcome, Step, cargo_nightly, root, status, succeeds};

pub(crate) const STEP: Step = Step { name: "fuzz", run };

fn run() -> Outcome {
    let secs = match seconds(std::env::args().skip(2)) {
        Ok(secs) => secs,
        Err(e) => return Outcome::Failed(e),
    };
    if let Err(e) = ensure_cargo_fuzz() {
        return Outcome::Skipped(e);
    }
    let targets = match targets() {
        Ok(t) if !t.is_empty() => t,
        Ok(_) => return Outcome::Failed("fuzz/fuzz_targets holds no target".into()),
        Err(e) => return Outcome::Failed(e),
    };
    for target in &targets {
        println!("xtask: fuzzing `{target}` for {secs} s");
        let mut cmd = cargo_nightly();
        cmd.current_dir(root().join("fuzz")).args([
            "fuzz",
            "run",
            target,
            "--",
            &format!("-max_total_time={secs}"),
        ]);
        if let failed @ Outcome::Failed(_) = status(cmd) {
            return failed;
        }
    }
    Outcome::Passed
}

/// Parses `[--time S]`.
fn seconds(mut args: impl Iterator<Item = String>) -> Result<u64, String> {
    let usage = "usage: cargo xtask fuzz [--time S]";
    let parsed = match (args.next().as_deref(), args.next()) {
        (None, _) => Ok(60),
        (Some("--time"), Some(s)) => match s.parse() {
            Ok(n) if n > 0 => Ok(n),
            _ => Err(format!("--time takes a whole number of seconds, not `{s}`")),
        },
        (Some(other), _) => Err(format!("{usage}, not `{other}`")),
    };
    match args.next() {
        Some(extra) => Err(format!("{usage}; `{extra}` is one argument too many")),
        None => parsed,
    }
}

/// The targets, by file name in `fuzz/fuzz_targets/`, sorted.
fn targets() -> Result<Vec<String>, String> {
    let dir = root().join("fuzz").join("fuzz_targets");
    let entries = std::fs::read_dir(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let mut names: Vec<String> = entries
        .filter_map(|e| {
            let path = e.ok()?.path();
            (path.extension()? == "rs").then(|| path.file_stem()?.to_str().map(String::from))?
        })
        .collect();
    names.sort();
    Ok(names)
}

fn ensure_cargo_fuzz() -> Result<(), String> {
    let mut probe = cargo_nightly();
    probe.args(["fuzz", "--version"]);
    if succeeds(probe) {
        return Ok(());
    }
    println!("xtask: installing cargo-fuzz with cargo install");
    let mut install = Command::new("cargo");
    install.args(["install", "--locked", "cargo-fuzz"]);
    if let Outcome::Failed(e) = status(install) {
        return Err(format!(
            "cargo-fuzz is missing and could not be installed: {e}"
        ));
    }
    Ok(())
}
