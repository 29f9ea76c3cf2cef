//! What the command's tests share: running `bento`, a scratch directory a test, and
//! checking a run.

use std::path::PathBuf;
use std::process::{Command, Output};

/// The `bento` binary with `args`, backtraces on and no `BENTO_MALLOC` from the
/// environment.
pub(crate) fn command(args: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_bento"));
    cmd.args(args)
        .env("RUST_BACKTRACE", "1")
        .env_remove("BENTO_MALLOC");
    cmd
}

/// Runs the `bento` binary with `args`, as [`command`] makes it.
pub(crate) fn bento(args: &[&str]) -> Output {
    command(args).output().expect("the bento binary runs")
}

/// A fresh directory for one test.
pub(crate) fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("bento-alloc-cli-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

pub(crate) fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

pub(crate) fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// A run's exit and output, for a failed check's message.
pub(crate) fn text(o: &Output) -> String {
    format!(
        "exit {:?}\nstdout:\n{}\nstderr:\n{}",
        o.status,
        stdout(o),
        stderr(o)
    )
}

/// Checks a run succeeded, showing its output when it did not; returns its stdout.
pub(crate) fn ok(o: &Output) -> String {
    assert!(o.status.success(), "{}", text(o));
    stdout(o)
}
