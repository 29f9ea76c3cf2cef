//! Programs that close or take over descriptors they did not open, then open files
//! of their own: the trace and the statistics report never land in those files. The
//! trace carries on (opened again by its path) or stops with one line on stderr.

use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::Output;

use bento_trace::{ReplayOptions, replay};

use crate::{compile, preloaded, run_ok, scratch};

/// What `closefds` writes to its data file.
fn expected_data() -> Vec<u8> {
    (0..100_000u64)
        .map(|i| ((i * 131 + 7) % 251) as u8)
        .collect()
}

/// The start of the statistics report.
const REPORT: &str = "bento-malloc: the common allocator at exit\n";

/// The soft limits on descriptors the programs run under: the usual 1024, where
/// bento's descriptors sit just below it (from 960), in reach of a loop that closes
/// 3 to 1023; and 4096, where they sit from 1024, out of its reach (when the hard
/// limit allows).
const SOFT_LIMITS: [u64; 2] = [1024, 4096];

/// The soft limit a program asking for `soft` gets: at most the hard limit.
fn effective(soft: u64) -> u64 {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `limit` is a live `rlimit` for the kernel to write.
    let read = unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &raw mut limit) };
    assert_eq!(read, 0, "getrlimit");
    soft.min(limit.rlim_max)
}

/// Whether `close(3..1023)` reaches bento's descriptors under the soft limit `soft`
/// (they start 64 below it, or at 1024 when that is lower).
fn in_reach_of_the_loop(soft: u64) -> bool {
    effective(soft).saturating_sub(64) < 1024
}

/// Runs `closefds MODE DATA` with the soft limit on descriptors at `soft` (at most
/// the hard limit) and `env`; checks that it exited 0 and that the data file holds
/// exactly what it wrote; returns its output and the mallocs it made.
fn closefds(
    program: &Path,
    mode: &str,
    data: &Path,
    soft: u64,
    env: &[(&str, &Path)],
) -> (Output, u64) {
    let mut cmd = preloaded(program);
    cmd.arg(mode).arg(data);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let soft = effective(soft);
    // SAFETY: between fork and exec the closure makes two system calls, which
    // allocate nothing and take no lock.
    unsafe {
        cmd.pre_exec(move || {
            let mut limit = libc::rlimit {
                rlim_cur: 0,
                rlim_max: 0,
            };
            if libc::getrlimit(libc::RLIMIT_NOFILE, &raw mut limit) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            limit.rlim_cur = soft;
            if libc::setrlimit(libc::RLIMIT_NOFILE, &raw const limit) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        })
    };
    let o = run_ok(&mut cmd);
    let what = format!("`closefds {mode}` (soft limit {soft}, {env:?})");
    let written = std::fs::read(data).unwrap();
    assert!(
        written == expected_data(),
        "{what}: the data file holds {} bytes, not the 100000 the program wrote{}\nstderr: {}",
        written.len(),
        if written.windows(8).any(|w| w == b"BENTOTRC") {
            " (a trace is in it)"
        } else if String::from_utf8_lossy(&written).contains("bento-malloc") {
            " (bento's report is in it)"
        } else {
            ""
        },
        String::from_utf8_lossy(&o.stderr)
    );
    let mallocs = String::from_utf8_lossy(&o.stdout).trim().parse().unwrap();
    (o, mallocs)
}

/// Checks that `trace` is a whole trace holding at least `mallocs` allocations (the
/// program's own, besides the C runtime's): its records continue wherever it was
/// opened again.
fn assert_whole_trace(trace: &Path, mallocs: u64, what: &str) {
    let reader = bento_trace::TraceReader::new(std::fs::File::open(trace).unwrap())
        .unwrap_or_else(|e| panic!("{what}: the trace's header: {e}"));
    let report = replay(
        &mut bento_trace::GlobalTarget(std::alloc::System),
        reader,
        ReplayOptions::default(),
        |_, _| {},
    )
    .unwrap_or_else(|e| panic!("{what}: the trace does not replay: {e}"));
    assert_eq!(report.failures, 0, "{what}");
    assert!(
        report.allocs >= mallocs && report.frees >= mallocs,
        "{what}: {} allocations and {} frees traced of the program's {mallocs}",
        report.allocs,
        report.frees
    );
}

#[test]
fn a_program_that_closes_descriptors_keeps_its_files_to_itself() {
    let dir = scratch("closefds");
    let program = compile("closefds", &dir);
    let data = dir.join("data");
    let trace = dir.join("closefds.trace");
    for soft in SOFT_LIMITS {
        for mode in ["close", "closefrom", "closeall", "dup2"] {
            let what = format!("`closefds {mode}` (soft limit {soft})");
            // Traced alone: the trace's descriptor is the first bento opens.
            let (o, mallocs) = closefds(&program, mode, &data, soft, &[("BENTO_TRACE", &trace)]);
            assert_whole_trace(&trace, mallocs, &what);
            if mode != "closeall" {
                assert!(
                    o.stderr.is_empty(),
                    "{what}: {}",
                    String::from_utf8_lossy(&o.stderr)
                );
            }
            // The report alone, then both.
            let stats = Path::new("1");
            for env in [
                &[("BENTO_MALLOC_STATS", stats)][..],
                &[("BENTO_MALLOC_STATS", stats), ("BENTO_TRACE", &trace)],
            ] {
                let (o, mallocs) = closefds(&program, mode, &data, soft, env);
                if env.len() == 2 {
                    assert_whole_trace(&trace, mallocs, &what);
                }
                let err = String::from_utf8_lossy(&o.stderr);
                if mode == "closeall" {
                    // Stderr is gone and number 2 is the program's data file (checked
                    // above): the report goes nowhere.
                    assert!(err.is_empty(), "{what}: {err}");
                } else {
                    // Stderr is still the pipe it was: the report is there, once.
                    assert!(err.starts_with(REPORT), "{what}: {err}");
                    assert_eq!(err.matches(REPORT).count(), 1, "{what}: {err}");
                }
            }
        }
    }
}

#[test]
fn a_trace_replaced_under_the_program_stops_with_one_line() {
    let dir = scratch("closefds-replace");
    let program = compile("closefds", &dir);
    let data = dir.join("data");
    let trace = dir.join("replaced.trace");
    for soft in SOFT_LIMITS {
        let what = format!("`closefds replace` (soft limit {soft})");
        let (o, _) = closefds(&program, "replace", &data, soft, &[("BENTO_TRACE", &trace)]);
        // The file now at the trace's path is not the trace: nothing is written to it.
        assert_eq!(std::fs::read(&trace).unwrap(), b"not the trace\n", "{what}");
        // The trace, renamed, is a trace: its header and the records written before
        // it stopped.
        let old = dir.join("replaced.trace.old");
        let reader = bento_trace::TraceReader::new(std::fs::File::open(&old).unwrap()).unwrap();
        assert!(reader.into_iter().all(|r| r.is_ok()), "{what}");
        let err = String::from_utf8_lossy(&o.stderr);
        if in_reach_of_the_loop(soft) {
            // The close reached the trace's descriptor: it could not be opened again.
            assert_eq!(err.lines().count(), 1, "{what}: {err}");
            assert!(
                err.starts_with(&format!(
                    "bento-malloc: BENTO_TRACE: the trace {} was closed",
                    trace.display()
                )) && err.ends_with("; tracing stopped\n"),
                "{what}: {err}"
            );
        } else {
            // Out of the loop's reach, the descriptor still names the renamed trace,
            // which is whole.
            assert!(err.is_empty(), "{what}: {err}");
        }
        std::fs::remove_file(&trace).unwrap();
        std::fs::remove_file(&old).unwrap();
    }
}

/// A shell's `exec 3>file`: bash, with bento preloaded, puts a file of its own on
/// descriptor 3 and writes to it until it exits.
#[test]
fn a_shell_that_redirects_descriptor_3_keeps_its_file() {
    let dir = scratch("exec3");
    let file = dir.join("three");
    let trace = dir.join("bash.trace");
    let script = "exec 3>\"$1\"; i=0; while [ $i -lt 2000 ]; do echo line $i >&3; \
                  i=$((i+1)); done";
    let expected: String = (0..2000).map(|i| format!("line {i}\n")).collect();
    let stats = Path::new("1");
    for env in [
        &[("BENTO_TRACE", trace.as_path())][..],
        &[("BENTO_MALLOC_STATS", stats)],
        &[("BENTO_MALLOC_STATS", stats), ("BENTO_TRACE", &trace)],
    ] {
        let mut cmd = preloaded("bash");
        cmd.args(["-c", script, "bash"]).arg(&file);
        for (k, v) in env {
            cmd.env(k, v);
        }
        let o = run_ok(&mut cmd);
        let written = std::fs::read(&file).unwrap();
        assert!(
            written == expected.as_bytes(),
            "{env:?}: {} bytes in the file, {} written by the shell",
            written.len(),
            expected.len()
        );
        let err = String::from_utf8_lossy(&o.stderr);
        if env.len() == 1 && env[0].0 == "BENTO_TRACE" {
            assert!(err.is_empty(), "{env:?}: {err}");
        } else {
            assert!(err.starts_with(REPORT), "{env:?}: {err}");
        }
        if env.iter().any(|(k, _)| *k == "BENTO_TRACE") {
            let reader =
                bento_trace::TraceReader::new(std::fs::File::open(&trace).unwrap()).unwrap();
            let mut records = 0;
            for r in reader {
                r.unwrap_or_else(|e| panic!("{env:?}: {e}"));
                records += 1;
            }
            assert!(records > 1000, "{env:?}: {records} records");
        }
    }
}
