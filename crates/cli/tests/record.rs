//! `bento record -- PROGRAM ARGS…` on real programs, multi-threaded ones included,
//! then `bento replay` of what it recorded on every allocator this build has.
#![cfg(target_os = "linux")]

use std::path::Path;
use std::process::Command;

#[path = "../../malloc/tests/all/library.rs"]
mod library;

mod common;

use common::{bento, command, ok, scratch, text};
use library::library;

/// The allocators of this build: all six, less those whose features are off.
fn allocators() -> Vec<&'static str> {
    let mut all = vec!["system"];
    if cfg!(feature = "mimalloc") {
        all.push("mimalloc");
    } else {
        eprintln!("skipping mimalloc: this build has no `mimalloc` feature");
    }
    if cfg!(feature = "jemalloc") {
        all.push("jemalloc");
    } else {
        eprintln!("skipping jemalloc: this build has no `jemalloc` feature");
    }
    all.extend(["space", "common", "bento"]);
    all
}

/// Records `program` into `trace`; returns `record --json`'s stats.
fn record(trace: &Path, program: &[&str]) -> serde_json::Value {
    let lib = library().to_str().unwrap();
    let mut args = vec!["record", "--json", "--library", lib, "-o"];
    args.push(trace.to_str().unwrap());
    args.push("--");
    args.extend(program);
    let out = ok(&bento(&args));
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"))
}

/// Replays `trace` on every allocator: each run replays every record, refuses
/// nothing, sees the trace's peak and times each operation.
fn replay_everywhere(trace: &Path, recorded: &serde_json::Value) {
    let names = allocators();
    let t = trace.to_str().unwrap();
    let out = ok(&bento(&[
        "replay",
        t,
        "--allocators",
        &names.join(","),
        "--json",
    ]));
    let runs: serde_json::Value = serde_json::from_str(&out).unwrap();
    let runs = runs.as_array().unwrap();
    assert_eq!(runs.len(), names.len());
    let ops = recorded["allocs"].as_u64().unwrap()
        + recorded["frees"].as_u64().unwrap()
        + recorded["reallocs"].as_u64().unwrap();
    // The replay frees what the program left live, timed too.
    let timed = ops + recorded["never_freed"].as_u64().unwrap();
    for (run, name) in runs.iter().zip(&names) {
        assert_eq!(run["allocator"], *name);
        assert_eq!(run["failures"], 0, "{run}");
        assert_eq!(run["records"], recorded["records"], "{run}");
        assert_eq!(run["ops"].as_u64(), Some(ops), "{run}");
        assert_eq!(run["peak_live"], recorded["peak_live"], "{run}");
        let latency = &run["latency_ns"];
        assert_eq!(latency["ops"].as_u64(), Some(timed), "{run}");
        let p = |k: &str| latency[k].as_u64().unwrap();
        assert!(p("p50") <= p("p99") && p("p99") <= p("p999"), "{latency}");
        assert!(
            p("p999") <= p("p9999") && p("p9999") <= p("max"),
            "{latency}"
        );
        assert!(p("max") > 0, "{latency}");
    }
    // The table: a row per allocator, and the latency table under it.
    let table = ok(&bento(&["replay", t, "--allocators", &names.join(",")]));
    assert!(table.contains("p99.99"), "{table}");
    for name in &names {
        assert_eq!(
            table.lines().filter(|l| l.starts_with(name)).count(),
            2,
            "{name}: {table}"
        );
    }
}

/// The Python interpreter itself, not a wrapper script that starts it (a script's
/// shell would be the first process to open the trace).
fn python() -> Option<String> {
    let o = Command::new("python3")
        .args(["-c", "import sys; print(sys.executable)"])
        .output()
        .ok()?;
    let path = String::from_utf8(o.stdout).ok()?.trim().to_owned();
    (o.status.success() && !path.is_empty()).then_some(path)
}

#[test]
fn a_threaded_python_program_records_and_replays_on_every_allocator() {
    let Some(python) = python() else {
        eprintln!("skipping: no python3");
        return;
    };
    let dir = scratch("python");
    let trace = dir.join("py.trace");
    // Four threads building and dropping dicts of strings: malloc from every thread.
    let script = "import threading\n\
        def work(n):\n\
        \x20   for round in range(6):\n\
        \x20       d = {i: bytearray(i % 700 + 600) for i in range(n)}\n\
        \x20       del d\n\
        ts = [threading.Thread(target=work, args=(2000,)) for _ in range(4)]\n\
        [t.start() for t in ts]\n\
        [t.join() for t in ts]\n";
    let recorded = record(&trace, &[&python, "-c", script]);
    assert_eq!(recorded["exit"], 0);
    // 4 threads × 6 rounds × 2000 blocks past pymalloc's 512-byte limit.
    assert!(recorded["allocs"].as_u64().unwrap() >= 48_000, "{recorded}");
    replay_everywhere(&trace, &recorded);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_parallel_sort_records_and_replays_on_every_allocator() {
    let dir = scratch("sort");
    let input = dir.join("lines.txt");
    let lines: String = (0..200_000u64)
        .map(|i| format!("{:016x}\n", i.wrapping_mul(0x9e37_79b9_7f4a_7c15)))
        .collect();
    std::fs::write(&input, lines).unwrap();
    let trace = dir.join("sort.trace");
    let sorted = dir.join("sorted.txt");
    let recorded = record(
        &trace,
        &[
            "sort",
            "--parallel=2",
            "-S",
            "1M",
            "-o",
            sorted.to_str().unwrap(),
            input.to_str().unwrap(),
        ],
    );
    assert!(recorded["records"].as_u64().unwrap() > 0, "{recorded}");
    assert_eq!(std::fs::metadata(&sorted).unwrap().len(), 200_000 * 17);
    replay_everywhere(&trace, &recorded);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn record_says_what_went_wrong() {
    let dir = scratch("mistakes");
    let trace = dir.join("t.trace");
    let t = trace.to_str().unwrap();
    let lib = library().to_str().unwrap();
    // A program that fails: its trace is kept, and the exit is an error. No such
    // program: nothing written.
    for (program, what, kept) in [
        (
            &["sh", "-c", "exit 3"][..],
            "ended with exit status: 3",
            true,
        ),
        (
            &["/no/such/program"][..],
            "cannot run /no/such/program",
            false,
        ),
    ] {
        let mut args = vec!["record", "--library", lib, "-o", t, "--"];
        args.extend(program);
        let o = bento(&args);
        assert_eq!(o.status.code(), Some(1), "{program:?}: {}", text(&o));
        assert!(text(&o).contains(what), "{program:?}: {}", text(&o));
        let left = (trace.exists(), trace.is_file());
        assert_eq!(left, (kept, kept), "{program:?}");
        if kept {
            ok(&bento(&["inspect", t]));
            std::fs::remove_file(&trace).unwrap();
        }
    }
    // No library where named, by flag or by environment.
    let by_flag = bento(&["record", "--library", "/no/lib.so", "-o", t, "--", "true"]);
    let by_environment = command(&["record", "-o", t, "--", "true"])
        .env("BENTO_MALLOC", "/no/lib.so")
        .output()
        .unwrap();
    for (how, o) in [("by flag", by_flag), ("by environment", by_environment)] {
        assert!(
            text(&o).contains("no bento-malloc library at /no/lib.so"),
            "{how}: {}",
            text(&o)
        );
    }
    assert!(!trace.exists());
    // Only a dir and no trace left behind: no temporary files.
    let left: Vec<_> = std::fs::read_dir(&dir).unwrap().collect();
    assert!(left.is_empty(), "{left:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn record_writes_the_file_a_link_names_and_into_a_fifo_in_place() {
    use std::os::unix::fs::{FileTypeExt, symlink};
    let dir = scratch("record-outputs");
    let lib = library().to_str().unwrap();
    let kind = |p: &Path| std::fs::symlink_metadata(p).unwrap().file_type();
    // `ls -l` allocates (a shell's `exit` may not).
    let record_into = |out: &Path| {
        bento(&[
            "record",
            "--library",
            lib,
            "-o",
            out.to_str().unwrap(),
            "--",
            "ls",
            "-l",
            "/",
        ])
    };
    let records = |trace: &Path| {
        let scan: serde_json::Value =
            serde_json::from_str(&ok(&bento(&["inspect", trace.to_str().unwrap(), "--json"])))
                .unwrap();
        scan["records"].as_u64().unwrap()
    };
    // A link (relative, to a file not there yet): the file it names is the trace.
    let link = dir.join("link.trace");
    symlink("real.trace", &link).unwrap();
    ok(&record_into(&link));
    assert!(
        kind(&link).is_symlink(),
        "{} is no link now",
        link.display()
    );
    let real = dir.join("real.trace");
    assert!(kind(&real).is_file());
    assert!(records(&real) > 0);
    // A FIFO: the trace is copied into it once the program has ended.
    let fifo = dir.join("trace.fifo");
    let made = Command::new("mkfifo").arg(&fifo).status().unwrap();
    assert!(made.success());
    let reader = {
        let fifo = fifo.clone();
        std::thread::spawn(move || std::fs::read(fifo).unwrap())
    };
    let o = record_into(&fifo);
    ok(&o);
    // Checked before joining the reader, which a FIFO replaced by a file would
    // leave waiting for ever.
    assert!(kind(&fifo).is_fifo(), "{} is no FIFO now", fifo.display());
    let got = reader.join().unwrap();
    assert!(got.starts_with(b"BENTOTRC"), "{} bytes", got.len());
    let copy = dir.join("copy.trace");
    std::fs::write(&copy, &got).unwrap();
    assert!(records(&copy) > 0);
    // Nothing else left, here or in the temporary directory.
    let mut names: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert_eq!(
        names,
        ["copy.trace", "link.trace", "real.trace", "trace.fifo"]
    );
    let staged = std::env::temp_dir().join(format!(".bento.trace.fifo.{}.tmp", std::process::id()));
    assert!(!staged.exists(), "{} left", staged.display());
    let _ = std::fs::remove_dir_all(&dir);
}
