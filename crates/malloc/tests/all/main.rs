//! bento-malloc as C programs see it: the library is built (release, on its own, so
//! that no other crate's features reach it), then C programs compiled with `cc` and
//! everyday tools run with it in `LD_PRELOAD`.

mod c_programs;
mod descriptors;
mod library;
mod real_programs;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub(crate) use crate::library::library;

/// A scratch directory for one test.
pub(crate) fn scratch(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("malloc-{name}"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Compiles `tests/c/<name>.c` into `dir`, optimised, with no allocation call
/// folded away (GCC removes a `free(malloc(n))` it can see).
pub(crate) fn compile(name: &str, dir: &Path) -> PathBuf {
    compile_with(name, dir, &["-O2", "-fno-builtin"])
}

/// Compiles `tests/c/<name>.c` into `dir` with `flags`.
pub(crate) fn compile_with(name: &str, dir: &Path, flags: &[&str]) -> PathBuf {
    let src = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/c")
        .join(format!("{name}.c"));
    let out = dir.join(name);
    let o = Command::new("cc")
        .args(flags)
        .args(["-pthread", "-o"])
        .arg(&out)
        .arg(&src)
        .arg("-ldl")
        .output()
        .expect("cc runs");
    assert!(
        o.status.success(),
        "cc {}: {}",
        src.display(),
        String::from_utf8_lossy(&o.stderr)
    );
    out
}

/// `cmd` with the library preloaded.
pub(crate) fn preloaded(program: impl AsRef<std::ffi::OsStr>) -> Command {
    let mut cmd = Command::new(program);
    cmd.env("LD_PRELOAD", library());
    cmd
}

/// Runs `cmd`, checks it exited 0, and returns its output.
pub(crate) fn run_ok(cmd: &mut Command) -> Output {
    let o = cmd.output().expect("the program runs");
    assert!(
        o.status.success(),
        "{cmd:?} ended with {}\nstdout:\n{}\nstderr:\n{}",
        o.status,
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    o
}

#[test]
fn the_library_exports_every_entry_point() {
    let o = run_ok(
        Command::new("nm")
            .args(["-D", "--defined-only"])
            .arg(library()),
    );
    let symbols = String::from_utf8_lossy(&o.stdout);
    for name in [
        "malloc",
        "free",
        "calloc",
        "realloc",
        "reallocarray",
        "posix_memalign",
        "aligned_alloc",
        "memalign",
        "valloc",
        "pvalloc",
        "malloc_usable_size",
        "malloc_trim",
        "cfree",
        "free_sized",
        "free_aligned_sized",
        "mallinfo2",
        "bento_prof_dump",
        "bento_prof_mark",
        "mallinfo",
        "__libc_malloc",
        "__libc_free",
        "__libc_calloc",
        "__libc_realloc",
        "__libc_memalign",
        "__libc_valloc",
        "__libc_pvalloc",
        "__posix_memalign",
    ] {
        assert!(
            symbols.lines().any(|l| l.ends_with(&format!(" T {name}"))),
            "{name} is not exported:\n{symbols}"
        );
    }
}

#[test]
fn the_dynamic_linker_binds_malloc_and_free_to_bento() {
    let o = run_ok(
        preloaded("/bin/true")
            .env("LD_DEBUG", "bindings")
            .env("LD_BIND_NOW", "1"),
    );
    let log = String::from_utf8_lossy(&o.stderr);
    // "binding file <user> [0] to <library> [0]: normal symbol `malloc' ..."
    let so = format!(" to {} ", library().display());
    for symbol in ["malloc", "free"] {
        assert!(
            log.lines()
                .any(|l| l.contains(&so) && l.contains(&format!("`{symbol}'"))),
            "no binding of {symbol} to{so}:\n{}",
            log.lines().take(40).collect::<Vec<_>>().join("\n")
        );
    }
}
