//! `bento record -- PROGRAM ARGS…`: a program run on bento-malloc with `BENTO_TRACE`,
//! its trace kept whole or not at all, and a line of what it holds.

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::inspect::scan;
use crate::out;
use crate::output::Staged;
use crate::run::{bytes, count};

/// How `record` works, for its `--help`.
pub(crate) const ABOUT: &str = "\
The program runs with bento-malloc in LD_PRELOAD and BENTO_TRACE naming a file beside
the output, which replaces the output once the program has ended (for a device or a
FIFO, a file in the temporary directory, copied into it then). Every thread's
allocations, resizes and frees are recorded, in the order they took effect. A child
the program forks stops recording; a program it starts (exec) is not recorded; a
program that ends without exit (killed, _exit) loses its last 64 KiB of records.
Static and setuid programs ignore LD_PRELOAD and record nothing. Linux only.

Build the library once: cargo build --release -p bento-malloc
Then: bento replay FILE (on every allocator), bento inspect FILE (sizes, lifetimes).";

/// The library's file name.
const LIBRARY: &str = "libbento_malloc.so";

/// Runs `program` (its name, then its arguments) recording into `output`.
pub(crate) fn record(
    program: &[OsString],
    output: &Path,
    library: Option<&Path>,
    json: bool,
) -> Result<(), String> {
    if !cfg!(target_os = "linux") {
        return Err("record runs on Linux only (bento-malloc goes in through LD_PRELOAD)".into());
    }
    let (name, args) = program
        .split_first()
        .ok_or("name the program to record after `--`")?;
    let library = find_library(library)?;
    let staged = Staged::new(output)?;
    // bento-malloc replaces `%p` in the name by the process id.
    if staged.path().to_string_lossy().contains('%') {
        return Err(format!(
            "cannot record into {}: its path holds a `%`",
            output.display()
        ));
    }
    let mut preload = library.clone().into_os_string();
    if let Some(old) = std::env::var_os("LD_PRELOAD").filter(|old| !old.is_empty()) {
        preload.push(":");
        preload.push(old);
    }
    let status = Command::new(name)
        .args(args)
        .env("LD_PRELOAD", &preload)
        .env("BENTO_TRACE", staged.path())
        .status()
        .map_err(|e| format!("cannot run {}: {e}", name.to_string_lossy()))?;
    if !staged.path().exists() {
        return Err(format!(
            "{} left no trace: it did not load {} (static and setuid programs ignore \
             LD_PRELOAD)",
            name.to_string_lossy(),
            library.display()
        ));
    }
    let s = scan(staged.path()).map_err(|e| {
        format!(
            "{} left a trace that does not read: {e}",
            name.to_string_lossy()
        )
    })?;
    staged.commit()?;
    if json {
        let doc = serde_json::json!({
            "program": name.to_string_lossy(),
            "exit": status.code(),
            "trace": output,
            "records": s.records,
            "allocs": s.allocs,
            "frees": s.frees,
            "reallocs": s.reallocs,
            "peak_live": s.peak_live,
            "peak_blocks": s.peak_blocks,
            "never_freed": s.never_freed,
            "never_freed_bytes": s.never_freed_bytes,
        });
        out!(
            "{}",
            serde_json::to_string_pretty(&doc).map_err(|e| e.to_string())?
        );
    } else {
        out!(
            "recorded {}: {} records ({} allocations, {} resizes, {} frees), peak live {} in \
             {} blocks, {} blocks ({}) never freed\nwrote {}; next: bento replay {}",
            name.to_string_lossy(),
            s.records,
            count(s.allocs as f64),
            count(s.reallocs as f64),
            count(s.frees as f64),
            bytes(s.peak_live),
            s.peak_blocks,
            s.never_freed,
            bytes(s.never_freed_bytes),
            output.display(),
            output.display()
        );
    }
    if status.success() {
        Ok(())
    } else {
        Err(format!(
            "{} ended with {status}; the trace holds what it did until then",
            name.to_string_lossy()
        ))
    }
}

/// The library: `named`, else `$BENTO_MALLOC`, else the first of
/// [`library_candidates`] that exists.
fn find_library(named: Option<&Path>) -> Result<PathBuf, String> {
    let named = named
        .map(Path::to_path_buf)
        .or_else(|| std::env::var_os("BENTO_MALLOC").map(PathBuf::from));
    if let Some(path) = named {
        return if path.is_file() {
            // LD_PRELOAD takes a name without a slash as a library to search for.
            Ok(std::path::absolute(&path).unwrap_or(path))
        } else {
            Err(format!("no bento-malloc library at {}", path.display()))
        };
    }
    let me = std::env::current_exe().map_err(|e| format!("cannot find this program: {e}"))?;
    let candidates = library_candidates(&me);
    candidates
        .iter()
        .find(|p| p.is_file())
        .cloned()
        .ok_or_else(|| {
            format!(
                "cannot find {LIBRARY} (looked in {}): build it with `cargo build --release -p \
             bento-malloc`, or name it with --library or BENTO_MALLOC",
                candidates
                    .iter()
                    .filter_map(|p| p.parent().map(Path::display))
                    .map(|d| d.to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        })
}

/// Where the library may be for this program at `exe`: beside it (an install, or one
/// cargo profile), one directory up (a test's `deps`), and in `release` beside its
/// directory (a debug build of this program beside a release build of the library).
fn library_candidates(exe: &Path) -> Vec<PathBuf> {
    let Some(dir) = exe.parent() else {
        return Vec::new();
    };
    let mut out = vec![dir.join(LIBRARY)];
    if let Some(up) = dir.parent() {
        out.push(up.join(LIBRARY));
        if dir.file_name() != Some(OsStr::new("release")) {
            out.push(up.join("release").join(LIBRARY));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_library_is_sought_beside_the_program_then_in_release() {
        let c = library_candidates(Path::new("/t/debug/bento"));
        assert_eq!(
            c,
            [
                PathBuf::from("/t/debug/libbento_malloc.so"),
                PathBuf::from("/t/libbento_malloc.so"),
                PathBuf::from("/t/release/libbento_malloc.so"),
            ]
        );
        assert_eq!(library_candidates(Path::new("/t/release/bento")).len(), 2);
    }
}
