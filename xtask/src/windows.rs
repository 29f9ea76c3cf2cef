//! `cargo xtask windows`: the crates with Windows code run their tests for
//! x86_64-pc-windows-gnu under Wine. What that needs is set up on the first run and
//! found again on the next: the rustup target, Debian's `wine64` and mingw-w64 (with
//! apt-get), a 64-bit Wine prefix in `target/wine-prefix`, and a stand-in
//! `bcryptprimitives.dll` (see `xtask/wine/bcryptprimitives.c`). When a part of that
//! fails the step is skipped, with the reason, rather than failed.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::step::{Outcome, STABLE, Step, cargo, ensure_target, root, status, succeeds};

/// The crates whose unit and integration tests run under Wine.
const WINDOWS_CRATES: &[&str] = &[
    "bento-pages",
    "bento-primitives",
    "bento-space",
    "bento-common",
];

const TARGET: &str = "x86_64-pc-windows-gnu";

/// mingw-w64's C compiler: Rust's linker for [`TARGET`], and the stand-in DLL's compiler.
const MINGW_GCC: &str = "x86_64-w64-mingw32-gcc";

/// The Debian packages that bring Wine and [`MINGW_GCC`].
const APT_PACKAGES: &[&str] = &["wine64", "gcc-mingw-w64-x86-64"];

/// Where Debian's `wine64` package puts Wine when its wrappers on `PATH` (the `wine`
/// package, only recommended) are not installed.
const WINE_LIB_DIR: &str = "/usr/lib/wine";

/// Wine's settings for every command run under it: a 64-bit prefix, no debug output,
/// and no offer to install Mono or Gecko (`WINEPREFIX` is set apart).
const WINE_ENV: &[(&str, &str)] = &[
    ("WINEARCH", "win64"),
    ("WINEDEBUG", "-all"),
    ("WINEDLLOVERRIDES", "mscoree,mshtml="),
];

/// The DLL Rust's std needs and Wine 8.0 lacks, and its stand-in's source.
const PRNG_DLL: &str = "bcryptprimitives.dll";
const PRNG_SOURCE: &str = "xtask/wine/bcryptprimitives.c";

pub(crate) const STEP: Step = Step {
    name: "windows",
    run,
};

/// A Wine ready to run the tests.
struct Wine {
    /// `wine` or `wine64`.
    program: PathBuf,
    /// `wineserver`, to wait for when the prefix is made; not needed otherwise.
    server: Option<PathBuf>,
    /// The Wine prefix (`WINEPREFIX`).
    prefix: PathBuf,
}

impl Wine {
    /// A command for `program` (or `self.program` when `None`) with Wine's settings.
    fn command(&self, program: Option<&Path>) -> Command {
        let mut cmd = Command::new(program.unwrap_or(&self.program));
        self.set_env(&mut cmd);
        cmd
    }

    /// Gives `cmd` Wine's settings and this prefix.
    fn set_env(&self, cmd: &mut Command) {
        cmd.env("WINEPREFIX", &self.prefix);
        for (var, value) in WINE_ENV {
            cmd.env(var, value);
        }
    }
}

/// The prefetch's part: the target's standard library, Wine and MinGW.
pub(crate) fn prepare() -> Result<(), String> {
    ensure_target(STABLE, TARGET)?;
    ensure_tools().map(|_| ())
}

/// Sets up Wine (or says why it cannot) and runs the crates' tests under it.
fn run() -> Outcome {
    crate::prefetch::wait();
    if WINDOWS_CRATES.is_empty() {
        return Outcome::Empty("no crate lists it yet");
    }
    let wine = match setup() {
        Ok(wine) => wine,
        Err(why) => return Outcome::Skipped(format!("WINDOWS SKIPPED: {why}")),
    };
    let mut cmd = cargo();
    // Since cargo 1.89 a cross `cargo test` runs the doc examples too, under the runner.
    cmd.args(["test", "--target", TARGET])
        .env("CARGO_TARGET_X86_64_PC_WINDOWS_GNU_RUNNER", &wine.program);
    wine.set_env(&mut cmd);
    for krate in WINDOWS_CRATES {
        cmd.args(["-p", krate]);
    }
    status(cmd)
}

/// Everything the test run needs, each part made only when missing.
fn setup() -> Result<Wine, String> {
    ensure_target(STABLE, TARGET)?;
    let (program, server) = ensure_tools()?;
    let wine = Wine {
        program,
        server,
        prefix: root().join("target").join("wine-prefix"),
    };
    ensure_prefix(&wine)?;
    ensure_prng(&wine)?;
    Ok(wine)
}

/// Finds Wine and [`MINGW_GCC`], installing [`APT_PACKAGES`] when one is missing;
/// returns Wine's program and server.
fn ensure_tools() -> Result<(PathBuf, Option<PathBuf>), String> {
    if let (Some(wine), Some(_)) = (find_wine(), which(MINGW_GCC)) {
        return Ok((wine, find_wineserver()));
    }
    apt_install(APT_PACKAGES)?;
    let wine = find_wine().ok_or("apt-get installed wine64 but no `wine` was found")?;
    which(MINGW_GCC).ok_or(format!(
        "apt-get installed gcc-mingw-w64-x86-64 but no `{MINGW_GCC}` was found"
    ))?;
    Ok((wine, find_wineserver()))
}

/// `wine` or `wine64` on `PATH`, else Debian's `wine64` in [`WINE_LIB_DIR`].
fn find_wine() -> Option<PathBuf> {
    which("wine")
        .or_else(|| which("wine64"))
        .or_else(|| executable(Path::new(WINE_LIB_DIR).join("wine64")))
}

/// `wineserver` on `PATH`, else in [`WINE_LIB_DIR`].
fn find_wineserver() -> Option<PathBuf> {
    which("wineserver").or_else(|| executable(Path::new(WINE_LIB_DIR).join("wineserver")))
}

/// The first executable file called `name` in a directory of `PATH`.
fn which(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path).find_map(|dir| executable(dir.join(name)))
}

/// `path` when it is a file with an execute bit.
fn executable(path: PathBuf) -> Option<PathBuf> {
    let meta = std::fs::metadata(&path).ok()?;
    #[cfg(unix)]
    let runs = std::os::unix::fs::PermissionsExt::mode(&meta.permissions()) & 0o111 != 0;
    #[cfg(not(unix))]
    let runs = true;
    (meta.is_file() && runs).then_some(path)
}

/// `apt-get install`s `packages` (through `sudo -n` when not root), after an
/// `apt-get update` when the first try fails.
fn apt_install(packages: &[&str]) -> Result<(), String> {
    let Some(apt) = which("apt-get") else {
        return Err(format!(
            "Wine or {MINGW_GCC} is missing and there is no apt-get to install {}",
            packages.join(" ")
        ));
    };
    let sudo = if is_root() {
        None
    } else {
        Some(which("sudo").ok_or(format!(
            "Wine or {MINGW_GCC} is missing, and installing {} needs root or sudo",
            packages.join(" ")
        ))?)
    };
    let apt_get = |args: &[&str]| {
        let mut cmd = match &sudo {
            Some(sudo) => {
                let mut cmd = Command::new(sudo);
                cmd.args(["-n", "env", "DEBIAN_FRONTEND=noninteractive"])
                    .arg(&apt);
                cmd
            }
            None => {
                let mut cmd = Command::new(&apt);
                cmd.env("DEBIAN_FRONTEND", "noninteractive");
                cmd
            }
        };
        cmd.args(args);
        matches!(status(cmd), Outcome::Passed)
    };
    let install: Vec<&str> = ["install", "-y", "--no-install-recommends"]
        .iter()
        .chain(packages)
        .copied()
        .collect();
    println!("xtask: installing {} with apt-get", packages.join(" "));
    if apt_get(&install) {
        return Ok(());
    }
    if apt_get(&["update"]) && apt_get(&install) {
        Ok(())
    } else {
        Err(format!(
            "`apt-get install {}` failed, also after `apt-get update`",
            packages.join(" ")
        ))
    }
}

/// Whether this process runs as root (`id -u` says 0).
fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| o.status.success() && o.stdout.trim_ascii() == b"0")
}

/// Makes the Wine prefix with `wineboot` unless a finished one is there (the server
/// writes its `system.reg` when wineboot is done); a half-made one is removed first.
fn ensure_prefix(wine: &Wine) -> Result<(), String> {
    if wine.prefix.join("system.reg").is_file() {
        return Ok(());
    }
    if wine.prefix.exists() {
        std::fs::remove_dir_all(&wine.prefix).map_err(|e| {
            format!(
                "could not remove the unfinished Wine prefix {}: {e}",
                wine.prefix.display()
            )
        })?;
    }
    println!("xtask: making a Wine prefix in {}", wine.prefix.display());
    let mut boot = wine.command(None);
    boot.args(["wineboot", "--init"]);
    if !matches!(status(boot), Outcome::Passed) {
        return Err(format!(
            "`{} wineboot --init` failed: Wine does not start here",
            wine.program.display()
        ));
    }
    // wineboot returns before the server has written the registry to the prefix.
    if let Some(server) = &wine.server {
        let mut wait = wine.command(Some(server));
        wait.arg("-w");
        succeeds(wait);
    }
    if wine.prefix.join("system.reg").is_file() {
        Ok(())
    } else {
        Err(format!(
            "`wineboot --init` left no system.reg in {}",
            wine.prefix.display()
        ))
    }
}

/// Puts the stand-in [`PRNG_DLL`] in the prefix's system32 when Wine has none of its
/// own there, building it into `target/wine` when missing or older than its source.
fn ensure_prng(wine: &Wine) -> Result<(), String> {
    let installed = wine.prefix.join("drive_c/windows/system32").join(PRNG_DLL);
    let source = root().join(PRNG_SOURCE);
    let built = root().join("target/wine").join(PRNG_DLL);
    let newer = |a: &Path, b: &Path| match (modified(a), modified(b)) {
        (Some(a), Some(b)) => a > b,
        _ => true,
    };
    if installed.is_file() && (is_wines(&installed) || !newer(&source, &installed)) {
        return Ok(());
    }
    if newer(&source, &built) {
        std::fs::create_dir_all(root().join("target/wine"))
            .map_err(|e| format!("could not make target/wine: {e}"))?;
        let mut gcc = Command::new(MINGW_GCC);
        gcc.args(["-shared", "-O2", "-s", "-o"])
            .arg(&built)
            .arg(&source)
            .arg("-ladvapi32");
        if !matches!(status(gcc), Outcome::Passed) {
            return Err(format!("`{MINGW_GCC}` could not build {PRNG_DLL}"));
        }
    }
    println!("xtask: installing the stand-in {PRNG_DLL} in the Wine prefix");
    std::fs::copy(&built, &installed)
        .map(drop)
        .map_err(|e| format!("could not copy {PRNG_DLL} into the Wine prefix: {e}"))
}

/// Whether the DLL at `path` is one of Wine's own (they say so in their DOS header).
fn is_wines(path: &Path) -> bool {
    std::fs::read(path).is_ok_and(|dll| {
        let head = &dll[..dll.len().min(0x100)];
        ["Wine builtin DLL", "Wine placeholder DLL"]
            .iter()
            .any(|sig| head.windows(sig.len()).any(|w| w == sig.as_bytes()))
    })
}

/// When `path` was last modified, if it exists.
fn modified(path: &Path) -> Option<std::time::SystemTime> {
    std::fs::metadata(path).and_then(|m| m.modified()).ok()
}
