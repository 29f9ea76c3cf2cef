//! `cargo xtask nightly`: bento's `nightly` feature (`core::alloc::Allocator` on every
//! allocator) on the nightly toolchain, through the standard library's own `Vec` and
//! `Box` (`crates/bento/tests/nightly.rs`); then the documentation as docs.rs builds it
//! (each crate's `[package.metadata.docs.rs]` features, `--cfg docsrs`), with every
//! crate that has features showing their badges. The toolchain is installed when
//! missing and updated when older than 1.100, which lacks the trait.

use std::process::Command;

use crate::step::{Outcome, Step, cargo_nightly, root, status, succeeds, target_dir};

pub(crate) const STEP: Step = Step {
    name: "nightly",
    run,
};

/// The first Rust with `core::alloc::Allocator`, `Vec::new_in` and `Box::new_in` stable.
const MINOR: u32 = 100;

fn run() -> Outcome {
    crate::prefetch::wait();
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
    match status(cmd) {
        Outcome::Passed => docs_rs(),
        other => other,
    }
}

/// The crates as docs.rs documents them: each with the features its
/// `[package.metadata.docs.rs]` names, and `--cfg docsrs` turning on `doc_cfg`.
fn docs_rs() -> Outcome {
    let crates = match docs_rs_crates() {
        Ok(c) => c,
        Err(why) => return Outcome::Failed(why),
    };
    let dir = target_dir().join("docsrs");
    let mut cmd = cargo_nightly();
    cmd.args(["doc", "--no-deps", "--target-dir"])
        .arg(&dir)
        .env("RUSTDOCFLAGS", "--cfg docsrs");
    let mut features = Vec::new();
    for (name, list) in &crates {
        cmd.args(["-p", name]);
        features.extend(list.iter().map(|f| format!("{name}/{f}")));
    }
    cmd.args(["--features", &features.join(",")]);
    match status(cmd) {
        Outcome::Passed => {}
        other => return other,
    }
    // A badge: "Available on crate feature … only" on each gated item.
    for (name, _) in &crates {
        let docs = dir.join("doc").join(name.replace('-', "_"));
        let badges = count_in_html(&docs, "crate feature");
        if badges == 0 {
            return Outcome::Failed(format!(
                "{} shows no feature badge: is `#![cfg_attr(docsrs, feature(doc_cfg))]` there?",
                docs.display()
            ));
        }
        println!("xtask: {name}: {badges} pages with feature badges");
    }
    Outcome::Passed
}

/// Each crate with a `[package.metadata.docs.rs]` table, and its features.
fn docs_rs_crates() -> Result<Vec<(String, Vec<String>)>, String> {
    let mut out = Vec::new();
    let crates = root().join("crates");
    let dirs = std::fs::read_dir(&crates).map_err(|e| format!("{}: {e}", crates.display()))?;
    let mut manifests: Vec<_> = dirs
        .filter_map(Result::ok)
        .map(|d| d.path().join("Cargo.toml"))
        .filter(|p| p.is_file())
        .collect();
    manifests.sort();
    for manifest in manifests {
        let text = std::fs::read_to_string(&manifest)
            .map_err(|e| format!("{}: {e}", manifest.display()))?;
        let Some(table) = text.split("[package.metadata.docs.rs]").nth(1) else {
            continue;
        };
        let name = text
            .lines()
            .find_map(|l| l.strip_prefix("name = "))
            .map(|n| n.trim_matches('"').to_owned())
            .ok_or_else(|| format!("{} has no name", manifest.display()))?;
        let features = table
            .lines()
            .take_while(|l| !l.starts_with('['))
            .find_map(|l| l.strip_prefix("features = "))
            .map(|list| {
                list.trim_matches(|c| c == '[' || c == ']')
                    .split(',')
                    .map(|f| f.trim().trim_matches('"').to_owned())
                    .filter(|f| !f.is_empty())
                    .collect()
            })
            .unwrap_or_default();
        out.push((name, features));
    }
    Ok(out)
}

/// How many HTML files under `dir` hold `needle`.
fn count_in_html(dir: &std::path::Path, needle: &str) -> usize {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .map(|p| {
            if p.is_dir() {
                count_in_html(&p, needle)
            } else if p.extension().is_some_and(|x| x == "html") {
                std::fs::read_to_string(&p).map_or(0, |t| usize::from(t.contains(needle)))
            } else {
                0
            }
        })
        .sum()
}

fn ensure_nightly() -> Result<(), String> {
    if minor().is_none_or(|m| m < MINOR) {
        println!("xtask: installing or updating the nightly toolchain with rustup");
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
