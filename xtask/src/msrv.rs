//! `cargo xtask msrv`: the workspace's libraries, binaries and examples build, and
//! its allocator crates' unit tests pass, on the lowest Rust it declares
//! (`rust-version` in the root `Cargo.toml`), installed with rustup when missing. Its
//! own target directory keeps it from rebuilding the stable toolchain's work.

use std::process::Command;

use crate::step::{Outcome, Step, cargo, root, status, succeeds, target_dir};

pub(crate) const STEP: Step = Step { name: "msrv", run };

/// The allocator crates whose unit tests run on the declared toolchain.
const TESTED: &[&str] = &[
    "bento-align",
    "bento-pages",
    "bento-primitives",
    "bento-space",
    "bento-common",
    "bento-heap",
];

/// The prefetch's part: the declared toolchain.
pub(crate) fn prepare() -> Result<(), String> {
    install(&declared()?)
}

/// Installs Rust `version` with rustup when it is missing.
fn install(version: &str) -> Result<(), String> {
    if !succeeds(rustc(&format!("+{version}"))) {
        println!("xtask: installing Rust {version} with rustup");
        let mut add = Command::new("rustup");
        add.args(["toolchain", "install", version, "--profile", "minimal"]);
        if !succeeds(add) {
            return Err(format!("`rustup toolchain install {version}` failed"));
        }
    }
    Ok(())
}

fn run() -> Outcome {
    crate::prefetch::wait();
    let version = match declared() {
        Ok(v) => v,
        Err(why) => return Outcome::Failed(why),
    };
    let toolchain = format!("+{version}");
    if let Err(why) = install(&version) {
        return Outcome::Skipped(why);
    }
    let dir = target_dir().join("msrv");
    // What a user on that toolchain builds: every crate's library, binaries and
    // examples, but the benchmarks (which build C peers and are not published) and
    // xtask. The tests are the developers', who build with the stable toolchain
    // `rust-toolchain.toml` names.
    let mut check = pinned(&toolchain);
    check
        .args([
            "check",
            "--workspace",
            "--lib",
            "--bins",
            "--examples",
            "--locked",
        ])
        .args(["--exclude", "bento-benches", "--exclude", "xtask"])
        .args(["--exclude", "bento-alloc-cli"])
        .arg("--target-dir")
        .arg(&dir);
    match status(check) {
        Outcome::Passed => {}
        other => return other,
    }
    // The CLI without its `jemalloc` feature: jemalloc's C build would take most of
    // the step, and the two lines it adds are checked on stable.
    let mut cli = pinned(&toolchain);
    cli.args(["check", "-p", "bento-alloc-cli", "--bins", "--locked"])
        .args(["--no-default-features", "--features", "mimalloc"])
        .arg("--target-dir")
        .arg(&dir);
    match status(cli) {
        Outcome::Passed => {}
        other => return other,
    }
    let mut test = pinned(&toolchain);
    test.args(["test", "--lib", "--locked"])
        .arg("--target-dir")
        .arg(&dir);
    for krate in TESTED {
        test.args(["-p", krate]);
    }
    status(test)
}

/// `cargo +VERSION`, without what the stable `cargo run` that started xtask set.
fn pinned(toolchain: &str) -> Command {
    let mut cmd = cargo();
    cmd.arg(toolchain);
    for var in ["RUSTUP_TOOLCHAIN", "CARGO", "RUSTC", "RUSTDOC"] {
        cmd.env_remove(var);
    }
    cmd
}

fn rustc(toolchain: &str) -> Command {
    let mut cmd = Command::new("rustc");
    cmd.args([toolchain, "--version"]);
    cmd.env_remove("RUSTUP_TOOLCHAIN").env_remove("RUSTC");
    cmd
}

/// `rust-version` of the root `Cargo.toml`'s `[workspace.package]`.
pub(crate) fn declared() -> Result<String, String> {
    let path = root().join("Cargo.toml");
    let text = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    text.lines()
        .filter_map(|l| l.trim().strip_prefix("rust-version"))
        .filter_map(|rest| rest.trim().strip_prefix('='))
        .map(|v| v.trim().trim_matches('"').to_owned())
        .next()
        .ok_or_else(|| format!("{} declares no rust-version", path.display()))
}
