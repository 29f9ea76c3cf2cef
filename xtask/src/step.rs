//! Running steps, timing them, and the summary line CI reads.

use std::process::{Command, ExitCode};
use std::time::Instant;

/// How a step ended.
pub(crate) enum Outcome {
    Passed,
    /// The step has nothing to check yet (no crate needs it); not counted.
    Empty(&'static str),
    /// The step could not run here (a tool could not be installed); not a pass.
    Skipped(String),
    Failed(String),
}

/// One named check.
pub(crate) struct Step {
    pub(crate) name: &'static str,
    pub(crate) run: fn() -> Outcome,
}

/// Runs `steps` in order, stops at the first failure, and prints the summary last:
/// `xtask <command>: N passed, F failed[, K skipped]`.
pub(crate) fn run_all(command: &str, steps: &[Step]) -> ExitCode {
    let start = Instant::now();
    let (mut passed, mut failed, mut skipped) = (0, 0, 0);
    for step in steps {
        println!("\n==> xtask {}: {}", command, step.name);
        let t = Instant::now();
        let outcome = (step.run)();
        let secs = t.elapsed().as_secs_f64();
        match outcome {
            Outcome::Passed => {
                passed += 1;
                println!("==> {}: passed in {secs:.1} s", step.name);
            }
            Outcome::Empty(why) => {
                println!("==> {}: nothing to check ({why}); not counted", step.name);
            }
            Outcome::Skipped(why) => {
                skipped += 1;
                println!("==> {}: SKIPPED in {secs:.1} s: {why}", step.name);
            }
            Outcome::Failed(why) => {
                failed += 1;
                println!("==> {}: FAILED in {secs:.1} s: {why}", step.name);
                break;
            }
        }
    }
    println!(
        "\nxtask {command}: total {:.1} s",
        start.elapsed().as_secs_f64()
    );
    let mut summary = format!("xtask {command}: {passed} passed, {failed} failed");
    if skipped > 0 {
        summary.push_str(&format!(", {skipped} skipped"));
    }
    println!("{summary}");
    if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// `cargo` (rustup's proxy, so that `+toolchain` works) with the workspace root as its
/// directory.
pub(crate) fn cargo() -> Command {
    let mut cmd = Command::new("cargo");
    cmd.current_dir(root());
    cmd
}

/// `cargo +nightly`, without the variables the stable `cargo run` that started xtask
/// set for it (they would pin the stable toolchain).
pub(crate) fn cargo_nightly() -> Command {
    let mut cmd = cargo();
    cmd.arg("+nightly");
    for var in ["RUSTUP_TOOLCHAIN", "CARGO", "RUSTC", "RUSTDOC"] {
        cmd.env_remove(var);
    }
    cmd
}

/// The workspace root (the parent of this crate's directory).
pub(crate) fn root() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask lives in the workspace root")
        .to_path_buf()
}

/// The optional `ROUNDS` argument of a benchmark command (default 5).
pub(crate) fn rounds_arg() -> usize {
    std::env::args()
        .nth(2)
        .and_then(|s| s.parse().ok())
        .unwrap_or(5)
}

/// Prints a measured table, or fails with what went wrong.
pub(crate) fn print_table(measured: Result<String, String>) -> Outcome {
    match measured {
        Ok(table) => {
            println!("\n{table}");
            Outcome::Passed
        }
        Err(e) => Outcome::Failed(e),
    }
}

/// Where cargo puts its builds: `CARGO_TARGET_DIR`, or `target/` in the root.
pub(crate) fn target_dir() -> std::path::PathBuf {
    std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| root().join("target"), Into::into)
}

/// Runs `cmd` with its output shown and turns its exit status into an outcome.
pub(crate) fn status(mut cmd: Command) -> Outcome {
    println!("$ {}", describe(&cmd));
    match cmd.status() {
        Ok(s) if s.success() => Outcome::Passed,
        Ok(s) => Outcome::Failed(format!("`{}` exited with {s}", describe(&cmd))),
        Err(e) => Outcome::Failed(format!("could not start `{}`: {e}", describe(&cmd))),
    }
}

/// Runs `cmd` quietly and says whether it succeeded.
pub(crate) fn succeeds(mut cmd: Command) -> bool {
    cmd.stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Makes sure rustup has `target` for `toolchain`, adding it when missing.
pub(crate) fn ensure_target(toolchain: &str, target: &str) -> Result<(), String> {
    let mut list = Command::new("rustup");
    list.args(["target", "list", "--installed", "--toolchain", toolchain]);
    let installed = list
        .output()
        .map(|o| {
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .any(|l| l.trim() == target)
        })
        .unwrap_or(false);
    if installed {
        return Ok(());
    }
    println!("xtask: adding target {target} to {toolchain} with rustup");
    let mut add = Command::new("rustup");
    add.args(["target", "add", "--toolchain", toolchain, target]);
    if succeeds(add) {
        Ok(())
    } else {
        Err(format!(
            "`rustup target add --toolchain {toolchain} {target}` failed"
        ))
    }
}

/// The toolchain that `cargo` in the workspace uses (rust-toolchain.toml's channel).
pub(crate) const STABLE: &str = "stable";

fn describe(cmd: &Command) -> String {
    let mut s = String::new();
    for (k, v) in cmd.get_envs() {
        if let Some(v) = v {
            s.push_str(&format!("{}={} ", k.to_string_lossy(), v.to_string_lossy()));
        }
    }
    s.push_str(&cmd.get_program().to_string_lossy());
    for a in cmd.get_args() {
        s.push(' ');
        s.push_str(&a.to_string_lossy());
    }
    s
}

/// Runs two lists of commands at once, each in turn in its own lane (a thread),
/// stopping a lane at its first failure; each lane's output goes to a log under
/// `target/<name>-lanes/`, printed when the lane ends. For work that leaves a core
/// idle alone (a test binary with one long test, a Miri interpreter): cargo holds
/// its lock while it builds, not while tests run, so two lanes over one target
/// directory build in turn and run at once.
pub(crate) fn two_lanes(name: &str, a: Vec<Command>, b: Vec<Command>) -> Outcome {
    let logs = target_dir().join(format!("{name}-lanes"));
    if let Err(e) = std::fs::create_dir_all(&logs) {
        return Outcome::Failed(format!("cannot create {}: {e}", logs.display()));
    }
    let (a, b) = std::thread::scope(|s| {
        let a = s.spawn(|| lane(&format!("{name} lane a"), a, logs.join("a.log")));
        let b = s.spawn(|| lane(&format!("{name} lane b"), b, logs.join("b.log")));
        (a.join(), b.join())
    });
    for outcome in [a, b] {
        match outcome {
            Ok(Ok(())) => {}
            Ok(Err(why)) => return Outcome::Failed(why),
            Err(_) => return Outcome::Failed(format!("a {name} lane panicked")),
        }
    }
    Outcome::Passed
}

/// Runs `cmds` in turn with their output in `log`, stopping at the first failure,
/// and prints the log when done.
fn lane(what: &str, cmds: Vec<Command>, log: std::path::PathBuf) -> Result<(), String> {
    let start = Instant::now();
    let _ = std::fs::remove_file(&log);
    let result = cmds.into_iter().try_for_each(|mut cmd| {
        let file = std::fs::File::options()
            .create(true)
            .append(true)
            .open(&log)
            .map_err(|e| format!("cannot open {}: {e}", log.display()))?;
        let err = file
            .try_clone()
            .map_err(|e| format!("cannot open {}: {e}", log.display()))?;
        {
            use std::io::Write as _;
            let mut header = &file;
            let _ = writeln!(header, "$ {}", describe(&cmd));
        }
        cmd.stdout(std::process::Stdio::from(file))
            .stderr(std::process::Stdio::from(err));
        match cmd.status() {
            Ok(s) if s.success() => Ok(()),
            Ok(s) => Err(format!("`{}` exited with {s}", describe(&cmd))),
            Err(e) => Err(format!("could not start `{}`: {e}", describe(&cmd))),
        }
    });
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    println!(
        "\n---- {what} ({:.1} s) ----\n{text}",
        start.elapsed().as_secs_f64()
    );
    let _ = std::fs::remove_file(&log);
    result
}
