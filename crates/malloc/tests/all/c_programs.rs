//! C programs written for the library: every rule of its C semantics, threads
//! passing blocks to each other, forks while locks are held, misuse, the statistics
//! at exit and a trace of a program's allocations.

use std::os::unix::process::ExitStatusExt;

use bento_trace::{ReplayOptions, TraceReader, replay};

use crate::{compile, compile_with, preloaded, run_ok, scratch};

#[test]
fn every_c_rule_holds() {
    let dir = scratch("conformance");
    // Unoptimised and without builtins, so that the compiler folds no call away
    // (`malloc(SIZE_MAX) == NULL` is known to it).
    let program = compile_with("conformance", &dir, &["-O0", "-fno-builtin"]);
    let o = run_ok(&mut preloaded(&program));
    assert_eq!(String::from_utf8_lossy(&o.stdout), "conformance: ok\n");
    // The same program without bento fails its first check (glibc's classes differ),
    // so the checks do see which allocator runs.
    let o = std::process::Command::new(&program).output().unwrap();
    assert!(!o.status.success());
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("conformance: malloc comes from bento"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}

#[test]
fn four_threads_pass_blocks_to_each_other_intact() {
    let dir = scratch("stress");
    let program = compile("stress", &dir);
    let o = run_ok(preloaded(&program).args(["4", "100000"]));
    assert_eq!(String::from_utf8_lossy(&o.stdout), "stress: ok\n");
}

#[test]
fn a_child_forked_while_threads_allocate_never_deadlocks() {
    let dir = scratch("fork");
    let program = compile("fork", &dir);
    let o = run_ok(preloaded(&program).arg("300"));
    assert_eq!(String::from_utf8_lossy(&o.stdout), "fork: ok\n");
}

#[test]
fn a_foreign_pointer_is_reported_and_the_process_aborts() {
    let dir = scratch("foreign");
    let src = dir.join("foreign.c");
    std::fs::write(
        &src,
        "#include <stdlib.h>\nint main(void) { static char not_malloced[64]; \
         free(not_malloced + 16); return 0; }\n",
    )
    .unwrap();
    let program = dir.join("foreign");
    run_ok(
        std::process::Command::new("cc")
            .arg("-o")
            .arg(&program)
            .arg(&src),
    );
    let o = preloaded(&program).output().unwrap();
    assert_eq!(o.status.signal(), Some(libc::SIGABRT), "{:?}", o.status);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.starts_with("bento-common: ") && err.contains("not") && err.lines().count() == 1,
        "{err}"
    );
}

#[test]
fn bento_malloc_stats_prints_the_report_at_exit() {
    let o = run_ok(preloaded("/bin/ls").arg("/").env("BENTO_MALLOC_STATS", "1"));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.starts_with("bento-malloc: the common allocator at exit\n"),
        "{err}"
    );
    for column in ["region", "large", "total", "resident"] {
        assert!(err.contains(column), "{err}");
    }
    // Not asked for: nothing.
    let o = run_ok(preloaded("/bin/ls").arg("/"));
    assert!(o.stderr.is_empty());
}

/// Runs `traced N` with `BENTO_TRACE` and returns (its counts, the trace's
/// allocations, the replay's report).
fn traced_run(n: u32, dir: &std::path::Path, program: &std::path::Path) -> (u64, u64, u64) {
    let trace = dir.join(format!("traced-{n}.trace"));
    let o = run_ok(
        preloaded(program)
            .arg(n.to_string())
            .env("BENTO_TRACE", &trace),
    );
    let out = String::from_utf8_lossy(&o.stdout);
    let mut counts = out.split_whitespace().map(|s| s.parse::<u64>().unwrap());
    let (allocs, moved) = (counts.next().unwrap(), counts.next().unwrap());
    let reader = TraceReader::new(std::fs::File::open(&trace).unwrap()).unwrap();
    let report = replay(
        &mut bento_trace::GlobalTarget(std::alloc::System),
        reader,
        ReplayOptions::default(),
        |_, _| {},
    )
    .unwrap_or_else(|e| panic!("the trace of `traced {n}` does not replay: {e}"));
    assert_eq!(report.failures, 0);
    (allocs + moved, report.allocs, report.frees)
}

#[test]
fn a_traced_program_replays_to_the_same_number_of_allocations() {
    let dir = scratch("trace");
    let program = compile("traced", &dir);
    // What the C runtime allocates on its own, with no work: the baseline.
    let (_, base_allocs, _) = traced_run(0, &dir, &program);
    for n in [1, 1000, 20_000] {
        let (expected, allocs, frees) = traced_run(n, &dir, &program);
        assert_eq!(
            allocs - base_allocs,
            expected,
            "`traced {n}`: its own allocations plus the reallocs that moved"
        );
        assert!(frees >= expected, "{frees} frees");
    }
    // `%p` gives each process a trace of its own, named by its id.
    let pattern = dir.join("per-process-%p.trace");
    let mut child = preloaded(&program)
        .arg("10")
        .env("BENTO_TRACE", &pattern)
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let pid = child.id();
    assert!(child.wait().unwrap().success());
    let trace = dir.join(format!("per-process-{pid}.trace"));
    let reader = TraceReader::new(std::fs::File::open(&trace).unwrap()).unwrap();
    assert!(reader.count() > 10);
    assert!(!pattern.exists());
}
