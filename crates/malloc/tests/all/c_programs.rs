//! C programs written for the library: every rule of its C semantics, threads
//! passing blocks to each other, forks while locks are held, misuse, the statistics
//! at exit and a trace of a program's allocations.

use std::os::unix::process::ExitStatusExt;
use std::process::Command;

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
    // The default retention, and one that has the purger tick every millisecond
    // while the forks take every lock.
    for retain in [None, Some("1")] {
        let mut cmd = preloaded(&program);
        cmd.arg("300");
        if let Some(ms) = retain {
            cmd.env("BENTO_RETAIN", ms);
        }
        let o = run_within(&mut cmd, std::time::Duration::from_secs(120));
        assert!(o.status.success(), "{cmd:?}: {:?}", o.status);
        assert_eq!(String::from_utf8_lossy(&o.stdout), "fork: ok\n");
    }
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

/// Runs `cmd` to its end, or kills it after `limit` and fails: a deadlock ends the
/// test instead of hanging it.
fn run_within(cmd: &mut std::process::Command, limit: std::time::Duration) -> std::process::Output {
    let mut child = cmd
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("the program runs");
    let start = std::time::Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > limit {
            let _ = child.kill();
            let o = child.wait_with_output().unwrap();
            panic!(
                "{cmd:?} did not end within {limit:?} (a deadlock?)\nstderr:\n{}",
                String::from_utf8_lossy(&o.stderr)
            );
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

#[test]
fn threads_cancelled_while_a_trace_is_written_leave_no_lock_held() {
    let dir = scratch("cancel");
    let program = compile("cancel", &dir);
    let trace = dir.join("cancel.trace");
    let o = run_within(
        preloaded(&program).arg("5").env("BENTO_TRACE", &trace),
        std::time::Duration::from_secs(60),
    );
    assert!(
        o.status.success(),
        "{:?}\n{}",
        o.status,
        String::from_utf8_lossy(&o.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&o.stdout), "cancel: ok\n");
    let reader = TraceReader::new(std::fs::File::open(&trace).unwrap()).unwrap();
    assert!(reader.count() > 1000);
}

#[test]
fn a_process_that_ends_with_exit_leaves_a_trace_with_its_header() {
    let dir = scratch("quick-exit");
    let program = compile("quick_exit", &dir);
    let trace = dir.join("quick.trace");
    run_ok(preloaded(&program).env("BENTO_TRACE", &trace));
    let bytes = std::fs::read(&trace).unwrap();
    assert!(bytes.len() >= 9, "{} bytes", bytes.len());
    // A trace: its header read, whatever records made it out.
    let reader = TraceReader::new(&bytes[..]).unwrap();
    assert!(reader.into_iter().all(|r| r.is_ok()));
}

#[test]
fn a_trace_that_cannot_be_written_is_said_once_on_stderr() {
    let dir = scratch("trace-unwritable");
    let trace = dir.join("no-such-dir").join("x.trace");
    let o = run_ok(preloaded("/bin/true").env("BENTO_TRACE", &trace));
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.starts_with("bento-malloc: BENTO_TRACE: cannot write the trace ")
            && err.contains("no-such-dir/x.trace: ")
            && err.trim_end().ends_with("; not tracing"),
        "{err}"
    );
}

/// Runs `misuse CASE SIZE` and checks that it aborted with one line naming the
/// pointer.
fn misuse_aborts(program: &std::path::Path, case: &str, size: usize) {
    let o = run_within(
        preloaded(program).args([case, &size.to_string()]),
        std::time::Duration::from_secs(30),
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(
        o.status.signal(),
        Some(libc::SIGABRT),
        "`misuse {case} {size}` ended with {:?}\nstdout: {}\nstderr: {err}",
        o.status,
        String::from_utf8_lossy(&o.stdout)
    );
    assert!(
        err.starts_with("bento-common: ") && err.contains("0x") && err.lines().count() == 1,
        "`misuse {case} {size}`: {err}"
    );
}

#[test]
fn sized_frees_and_mallinfo2_keep_what_c_and_glibc_promise() {
    let dir = scratch("sized");
    let program = compile("sized", &dir);
    // glibc alone: its mallinfo2 counts the blocks the same way (its sized frees
    // where it has them).
    let o = run_ok(&mut Command::new(&program));
    let glibc = String::from_utf8_lossy(&o.stdout);
    assert!(glibc.starts_with("ok: ok, sized frees "), "{glibc}");
    let o = run_ok(preloaded(&program).arg("ok"));
    assert_eq!(
        String::from_utf8_lossy(&o.stdout),
        "ok: ok, sized frees found\n"
    );
    // A size the block cannot have: one line naming the pointer, then the process
    // aborts; so for an alignment that is no power of two.
    misuse_aborts(&program, "wrong-size", 0);
    let o = run_within(
        preloaded(&program).arg("wrong-align"),
        std::time::Duration::from_secs(30),
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.signal(), Some(libc::SIGABRT), "{err}");
    assert!(
        err.starts_with("bento-malloc: free_aligned_sized(0x")
            && err.ends_with(", 3, 128): the alignment 3 is no power of two\n"),
        "{err}"
    );
}

#[test]
fn misuse_of_free_is_caught_in_every_size() {
    let dir = scratch("misuse");
    let program = compile("misuse", &dir);
    // The small classes, the medium sizes, the large region (3 MiB too) and a
    // dedicated segment (from 16 MiB).
    for size in [
        16,
        24,
        64,
        200,
        256,
        300,
        1000,
        5000,
        100_000,
        3 << 20,
        20 << 20,
    ] {
        for case in ["interior", "interior-zeroed", "double", "double-later"] {
            misuse_aborts(&program, case, size);
        }
    }
    for case in ["realloc-freed", "usable-interior"] {
        misuse_aborts(&program, case, 64);
        misuse_aborts(&program, case, 1000);
    }
    // No misuse: blocks of every alignment pass the checks.
    let o = run_ok(preloaded(&program).arg("aligned"));
    assert_eq!(String::from_utf8_lossy(&o.stdout), "aligned: ok\n");
}

#[test]
fn malloc_trim_gives_the_address_space_back() {
    let dir = scratch("trim");
    let program = compile("trim", &dir);
    let o = run_ok(&mut preloaded(&program));
    let out = String::from_utf8_lossy(&o.stdout);
    let kib: Vec<u64> = out.split_whitespace().map(|s| s.parse().unwrap()).collect();
    let [start, freed, trimmed] = kib[..] else {
        panic!("{out}")
    };
    // Freed, the allocator keeps spare segments and pages (address space, not
    // resident memory); trimmed, it is back where it started.
    assert!(freed > start, "{out}");
    assert!(
        trimmed <= start + 1024,
        "{out}: {} KiB kept after the trim",
        trimmed - start
    );
}

/// What `retain MODE` printed, in KiB (`waited` in milliseconds).
#[derive(Debug)]
struct Retained {
    base: u64,
    peak: u64,
    freed: u64,
    after: u64,
    waited: u64,
    purgers: u64,
}

/// `tests/c/retain.c`, compiled into the scratch directory of test `test`.
fn retain_program(test: &str) -> std::path::PathBuf {
    compile("retain", &scratch(test))
}

/// Runs `retain MODE WAIT_MS LIMIT_MS` (compiled for test `test`) with
/// `BENTO_RETAIN=retain` (a deadlock ends the test) and reads its line.
fn retained(test: &str, mode: &str, retain: &str, wait_ms: u64, limit_ms: u64) -> Retained {
    retained_by(&retain_program(test), &[mode], retain, wait_ms, limit_ms)
}

/// Runs `program MODE... WAIT_MS LIMIT_MS` (`retain`) with `BENTO_RETAIN=retain` (a
/// deadlock ends the test) and reads its line.
fn retained_by(
    program: &std::path::Path,
    mode: &[&str],
    retain: &str,
    wait_ms: u64,
    limit_ms: u64,
) -> Retained {
    let o = run_within(
        preloaded(program)
            .args(mode)
            .args([wait_ms.to_string(), limit_ms.to_string()])
            .env("BENTO_RETAIN", retain),
        std::time::Duration::from_secs(120),
    );
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success() && o.stderr.is_empty(),
        "`retain {mode:?}` with BENTO_RETAIN={retain}: {:?}\nstdout: {out}\nstderr: {}",
        o.status,
        String::from_utf8_lossy(&o.stderr)
    );
    let v: Vec<u64> = out.split_whitespace().map(|s| s.parse().unwrap()).collect();
    let [base, peak, freed, after, waited, purgers] = v[..] else {
        panic!("{out}")
    };
    Retained {
        base,
        peak,
        freed,
        after,
        waited,
        purgers,
    }
}

/// KiB in a MiB.
const MIB: u64 = 1024;

/// Checks that the one purger gave back the memory kept (`whose`: where, for the
/// message), within a few MiB.
fn assert_given_back(r: &Retained, whose: &str) {
    assert!(
        r.after <= r.base + 6 * MIB,
        "{r:?}: {} KiB still resident{whose} after {} ms",
        r.after.saturating_sub(r.base),
        r.waited
    );
    assert_eq!(r.purgers, 1, "{r:?}");
}

#[test]
fn an_idle_program_gets_its_kept_memory_back_from_the_purger() {
    // Decay after 200 ms; the program sleeps four times that, then polls its resident
    // set (up to 30 s, so that a loaded machine only makes the test slower).
    let r = retained("retain-idle", "idle", "200", 800, 30_000);
    assert!(
        r.peak >= r.base + 60 * MIB,
        "{r:?}: the 64 MiB were not resident"
    );
    // Right after the frees the memory is kept, more of it than eager keeps...
    assert!(
        r.freed >= r.base + 16 * MIB,
        "{r:?}: {} KiB kept after the frees",
        r.freed - r.base
    );
    // ...and with no call to malloc since, the purger gave it back.
    assert_given_back(&r, "");
}

#[test]
fn bento_retain_eager_gives_memory_back_at_once_with_no_thread() {
    let r = retained("retain-eager", "idle", "eager", 0, 0);
    assert!(r.peak >= r.base + 60 * MIB, "{r:?}");
    // At most the commit cache's floor (8 MiB) stays, with no wait.
    assert!(
        r.freed <= r.base + 12 * MIB,
        "{r:?}: {} KiB kept after the frees",
        r.freed.saturating_sub(r.base)
    );
    assert_eq!(r.purgers, 0, "{r:?}");
}

#[test]
fn a_bad_bento_retain_is_said_once_and_the_default_holds() {
    let program = retain_program("retain-bad");
    // Each echoed on the one line, control bytes escaped.
    for (bad, echoed) in [
        ("banana", "banana"),
        ("0", "0"),
        ("3600001", "3600001"),
        ("12ms", "12ms"),
        ("-1", "-1"),
        ("99999999999", "99999999999"),
        ("00000000", "00000000"),
        ("12\n34", "12\\x0a34"),
        ("eager\r\x1b[2K", "eager\\x0d\\x1b[2K"),
    ] {
        let o = run_ok(preloaded(&program).arg("quick").env("BENTO_RETAIN", bad));
        assert_eq!(String::from_utf8_lossy(&o.stdout), "quick: ok\n");
        assert_eq!(
            String::from_utf8_lossy(&o.stderr),
            format!(
                "bento-malloc: BENTO_RETAIN={echoed} is neither `eager` nor milliseconds \
                 from 1 to 3600000; keeping freed memory for 1000 ms\n"
            )
        );
    }
    // Leading zeros do not matter, however many.
    for good in [
        "",
        "eager",
        "1",
        "250",
        "3600000",
        "0000001",
        "00000001",
        "0003600000",
    ] {
        let o = run_ok(preloaded(&program).arg("quick").env("BENTO_RETAIN", good));
        assert_eq!(String::from_utf8_lossy(&o.stdout), "quick: ok\n");
        assert!(o.stderr.is_empty(), "BENTO_RETAIN={good}");
    }
}

#[test]
fn a_forked_child_starts_a_purger_of_its_own() {
    // The parent keeps its freed 64 MiB and forks; the child allocates and frees
    // 64 MiB of its own, then waits: its purger gives back its memory and the kept
    // pages it inherited. Twenty more children fork from the parent meanwhile.
    let r = retained("retain-fork", "fork", "200", 800, 30_000);
    assert!(r.peak >= r.base + 60 * MIB, "{r:?}");
    assert_given_back(&r, " in the child");
}

#[test]
fn a_program_exits_while_its_purger_ticks() {
    let program = retain_program("retain-exit");
    // The purger ticks every millisecond while `exit` runs the report, which takes
    // the allocator's locks: neither waits on the other for long.
    for _ in 0..20 {
        let o = run_within(
            preloaded(&program)
                .args(["idle", "0", "0"])
                .env("BENTO_RETAIN", "1")
                .env("BENTO_MALLOC_STATS", "1"),
            std::time::Duration::from_secs(60),
        );
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(o.status.success(), "{:?}\n{err}", o.status);
        assert!(
            err.starts_with("bento-malloc: the common allocator at exit\n"),
            "{err}"
        );
    }
}

/// The most the library keeps for reuse after a free, whatever the peak (the
/// README's stat), in KiB.
const KEPT_MOST: u64 = 64 * MIB;
/// What the resident set may hold above the program's own besides the kept pages:
/// the allocator's tables and partly used runs (the README's stat), in KiB.
const KEPT_SLACK: u64 = 4 * MIB;

/// The bytes the statistics report at exit says are kept for reuse, in KiB.
fn kept_at_exit(report: &str) -> u64 {
    let line = report
        .lines()
        .find(|l| l.starts_with("resident "))
        .unwrap_or_else(|| panic!("no stats in the report:\n{report}"));
    let words: Vec<&str> = line.split_whitespace().collect();
    let at = words
        .windows(4)
        .position(|w| w[2..] == ["kept", "for"])
        .unwrap_or_else(|| panic!("{line}"));
    let n: f64 = words[at].parse().unwrap();
    let unit = match words[at + 1].trim_end_matches(',') {
        "B" => 1.0 / 1024.0,
        "KiB" => 1.0,
        "MiB" => 1024.0,
        "GiB" => 1024.0 * 1024.0,
        other => panic!("{other} in {line}"),
    };
    (n * unit) as u64
}

#[test]
fn a_large_peak_freed_whole_keeps_what_the_readme_says() {
    let program = retain_program("retain-peak");
    for size in [64usize, 4096, 1 << 20, 20_000_000] {
        for peak in [64u64, 400] {
            let what = format!("{peak} MiB in blocks of {size} bytes");
            // A decay far longer than the run, so that the stats are the cap's
            // alone; the report at exit says what the allocator keeps.
            let o = run_within(
                preloaded(&program)
                    .args(["peak", &size.to_string(), &peak.to_string(), "0", "0"])
                    .env("BENTO_RETAIN", "60000")
                    .env("BENTO_MALLOC_STATS", "1"),
                std::time::Duration::from_secs(120),
            );
            let out = String::from_utf8_lossy(&o.stdout);
            let err = String::from_utf8_lossy(&o.stderr);
            assert!(o.status.success(), "{what}: {:?}\n{out}\n{err}", o.status);
            let v: Vec<u64> = out.split_whitespace().map(|s| s.parse().unwrap()).collect();
            let [base, top, freed, ..] = v[..] else {
                panic!("{out}")
            };
            assert!(top >= base + (peak - 2) * MIB, "{what}: {out}");
            let kept = kept_at_exit(&err);
            let resident = freed.saturating_sub(base);
            assert!(
                kept <= KEPT_MOST && resident <= KEPT_MOST + KEPT_SLACK,
                "{what}: {kept} KiB kept, {resident} KiB resident after the frees\n{err}"
            );
            if peak == 400 {
                // The cap, not less, is what stays after a peak far above it.
                assert!(
                    kept >= KEPT_MOST - 8 * MIB && resident >= KEPT_MOST - 8 * MIB,
                    "{what}: {kept} KiB kept, {resident} KiB resident after the frees"
                );
            }
            // Under a short decay it all goes back, down to what was resident
            // before the peak.
            let (size, peak) = (size.to_string(), peak.to_string());
            let r = retained_by(&program, &["peak", &size, &peak], "200", 800, 30_000);
            assert_given_back(&r, &format!(" of {what}"));
        }
    }
}

/// The faults `huge` took to fill its blocks, with `BENTO_HUGE` set to `huge`.
fn huge_faults(program: &std::path::Path, huge: Option<&str>) -> (u64, String) {
    let mut cmd = preloaded(program);
    if let Some(value) = huge {
        cmd.env("BENTO_HUGE", value);
    }
    let o = run_ok(&mut cmd);
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    let faults = out
        .trim()
        .strip_prefix("huge: ")
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{out}"));
    (faults, String::from_utf8_lossy(&o.stderr).into_owned())
}

#[test]
fn bento_huge_asks_for_huge_pages() {
    let program = compile("huge", &scratch("huge"));
    let thp =
        std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled").unwrap_or_default();
    // 128 MiB in 4 KiB pages: some 32,768 faults (unless the kernel gives every
    // mapping huge pages unasked).
    let small = if thp.contains("[always]") { 0 } else { 30_000 };
    let (usual, quiet) = huge_faults(&program, None);
    assert_eq!(quiet, "");
    assert!(usual > small, "{usual} faults without huge pages");
    let (off, quiet) = huge_faults(&program, Some("off"));
    assert!(off > small && quiet.is_empty(), "{off} faults, {quiet}");
    let (huge, said) = huge_faults(&program, Some("1"));
    if thp.contains("[always]") || thp.contains("[madvise]") {
        // 64 huge pages and the small blocks' first pages: well under a tenth.
        assert!(
            huge < usual / 10,
            "{huge} faults with huge pages, {usual} without"
        );
        assert_eq!(said, "");
    }
    // A value it does not know: one line, and the usual pages.
    let (bad, said) = huge_faults(&program, Some("yes"));
    assert!(bad > small, "{bad}");
    assert_eq!(
        said,
        "bento-malloc: BENTO_HUGE=yes is neither `on`/`1` nor `off`/`0`; huge pages stay off\n"
    );
}

/// Runs `tests/c/guard.c`'s `mode` with every allocation guarded; its stderr, after
/// checking that it aborted.
fn guarded_death(program: &std::path::Path, mode: &str) -> String {
    let o = run_within(
        preloaded(program).arg(mode).env("BENTO_GUARD", "1,16"),
        std::time::Duration::from_secs(30),
    );
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert_eq!(o.status.signal(), Some(libc::SIGABRT), "{mode}: {err}");
    err
}

#[test]
fn a_guarded_block_overrun_underrun_or_used_after_free_dies_with_one_report() {
    let dir = scratch("guard");
    // `-rdynamic`: the program's functions in its dynamic symbols, named in the
    // report; no tail calls, so that `drop_block` keeps its frame.
    let flags = [
        "-O2",
        "-fno-builtin",
        "-fno-optimize-sibling-calls",
        "-rdynamic",
    ];
    let program = compile_with("guard", &dir, &flags);
    let o = run_ok(preloaded(&program).arg("ok").env("BENTO_GUARD", "1,16"));
    assert_eq!(String::from_utf8_lossy(&o.stdout), "ok\n");
    for (mode, head, place) in [
        (
            "overrun",
            "bento: overrun of a 96-byte block at 0x",
            "0 bytes past its end",
        ),
        (
            "slack",
            "bento: overrun (found at its free) of a 100-byte block",
            "0 bytes past its end, was written",
        ),
        (
            "underrun",
            "bento: underrun of a 48-byte block at 0x",
            "1 bytes before its start",
        ),
        (
            "use-after-free",
            "bento: use after free of a 64-byte block at 0x",
            "8 bytes into it",
        ),
        (
            "double-free",
            "bento: double free of a 32-byte block at 0x",
            "freed twice",
        ),
    ] {
        let err = guarded_death(&program, mode);
        let first = err.lines().next().unwrap_or_default();
        assert!(first.starts_with(head), "{mode}: {err}");
        assert!(
            first.contains(place) && first.ends_with("(heap \"malloc\")"),
            "{mode}: {err}"
        );
        // The allocation site: the program's own function, by name.
        let alloc = err
            .split("bento: allocated at:\n")
            .nth(1)
            .unwrap_or_default();
        assert!(
            alloc.lines().take(4).any(|l| l.contains(" make_block+0x")),
            "{mode}: {err}"
        );
        if mode != "overrun" && mode != "underrun" && mode != "slack" {
            let freed = err.split("bento: freed at:\n").nth(1).unwrap_or_default();
            assert!(
                freed.lines().take(4).any(|l| l.contains(" drop_block+0x")),
                "{mode}: {err}"
            );
        }
        assert!(err.ends_with("bento: aborting\n"), "{mode}: {err}");
        // One report: its lines are bento's, nothing else on stderr.
        assert!(
            err.lines()
                .all(|l| l.starts_with("bento: ") || l.starts_with("    ")),
            "{err}"
        );
    }
    // A fault that is not the pool's goes to the handler the program installed.
    let o = run_within(
        preloaded(&program).arg("chain").env("BENTO_GUARD", "1,16"),
        std::time::Duration::from_secs(30),
    );
    assert_eq!(o.status.code(), Some(3), "{o:?}");
    assert_eq!(String::from_utf8_lossy(&o.stdout), "own handler\n");
    assert!(o.stderr.is_empty(), "{o:?}");
}

#[test]
fn a_bad_bento_guard_is_said_once_and_guard_pages_stay_off() {
    let dir = scratch("guard-bad");
    let program = compile("guard", &dir);
    let o = run_within(
        preloaded(&program)
            .arg("overrun")
            .env("BENTO_GUARD", "often"),
        std::time::Duration::from_secs(30),
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(
        err,
        "bento-malloc: BENTO_GUARD=often is neither `on`, `off`, N nor N,SLOTS; guard pages stay off\n"
    );
    // Unguarded, the overrun lands in the block's own slack: no fault.
    assert_eq!(String::from_utf8_lossy(&o.stdout), "no fault\n");
}

/// The fields of a protobuf message: (number, varint or bytes).
fn proto_fields(mut b: &[u8]) -> Vec<(u64, Result<u64, Vec<u8>>)> {
    fn varint(b: &mut &[u8]) -> u64 {
        let (mut v, mut shift) = (0, 0);
        loop {
            let byte = b[0];
            *b = &b[1..];
            v |= u64::from(byte & 0x7f) << shift;
            shift += 7;
            if byte & 0x80 == 0 {
                return v;
            }
        }
    }
    let mut out = Vec::new();
    while !b.is_empty() {
        let key = varint(&mut b);
        if key & 7 == 0 {
            out.push((key >> 3, Ok(varint(&mut b))));
        } else {
            assert_eq!(key & 7, 2, "a varint or bytes field");
            let len = varint(&mut b) as usize;
            out.push((key >> 3, Err(b[..len].to_vec())));
            b = &b[len..];
        }
    }
    out
}

/// A pprof profile's samples: (inuse_space, the names of its stack's functions).
fn pprof_samples(bytes: &[u8]) -> Vec<(u64, Vec<String>)> {
    let top = proto_fields(bytes);
    let strings: Vec<String> = top
        .iter()
        .filter(|(f, _)| *f == 6)
        .map(|(_, v)| String::from_utf8_lossy(v.as_ref().unwrap_err()).into_owned())
        .collect();
    let field = |m: &[(u64, Result<u64, Vec<u8>>)], n: u64| -> u64 {
        m.iter()
            .find(|(f, _)| *f == n)
            .and_then(|(_, v)| v.clone().ok())
            .unwrap_or(0)
    };
    let mut names = std::collections::HashMap::new();
    for (_, v) in top.iter().filter(|(f, _)| *f == 5) {
        let f = proto_fields(v.as_ref().unwrap_err());
        names.insert(field(&f, 1), strings[field(&f, 2) as usize].clone());
    }
    let mut functions = std::collections::HashMap::new();
    for (_, v) in top.iter().filter(|(f, _)| *f == 4) {
        let l = proto_fields(v.as_ref().unwrap_err());
        let line = l
            .iter()
            .find(|(f, _)| *f == 4)
            .unwrap()
            .1
            .clone()
            .unwrap_err();
        functions.insert(field(&l, 1), names[&field(&proto_fields(&line), 1)].clone());
    }
    let packed = |b: &[u8]| {
        let mut b = b;
        let mut out = Vec::new();
        while !b.is_empty() {
            let (mut v, mut shift) = (0u64, 0);
            loop {
                let byte = b[0];
                b = &b[1..];
                v |= u64::from(byte & 0x7f) << shift;
                shift += 7;
                if byte & 0x80 == 0 {
                    break;
                }
            }
            out.push(v);
        }
        out
    };
    top.iter()
        .filter(|(f, _)| *f == 2)
        .map(|(_, v)| {
            let s = proto_fields(v.as_ref().unwrap_err());
            let stack = packed(
                s.iter()
                    .find(|(f, _)| *f == 1)
                    .unwrap()
                    .1
                    .as_ref()
                    .unwrap_err(),
            );
            let values = packed(
                s.iter()
                    .find(|(f, _)| *f == 2)
                    .unwrap()
                    .1
                    .as_ref()
                    .unwrap_err(),
            );
            (
                values[1],
                stack.iter().map(|id| functions[id].clone()).collect(),
            )
        })
        .collect()
}

#[test]
fn bento_prof_dumps_what_a_level_left_live_with_its_stack() {
    let dir = scratch("prof");
    let flags = [
        "-O2",
        "-fno-builtin",
        "-fno-optimize-sibling-calls",
        "-rdynamic",
    ];
    let program = compile_with("prof", &dir, &flags);
    let level = dir.join("level.pb");
    let at_exit = dir.join("exit-%p.pb");
    let o = run_ok(
        preloaded(&program)
            .arg(&level)
            .env("BENTO_PROF", &at_exit)
            // A mean of 16 KiB: each 64 KiB block is sampled with probability 0.98,
            // so the estimate of the 32 is within a few per cent.
            .env("BENTO_PROF_EVERY", "16384"),
    );
    assert_eq!(String::from_utf8_lossy(&o.stdout), "ok\n");
    let samples = pprof_samples(&std::fs::read(&level).unwrap());
    // The 2 MiB the level left, found under `leak_level`; nothing else of the level
    // lives (its other blocks were freed).
    let leaked: u64 = samples
        .iter()
        .filter(|(_, stack)| stack.iter().any(|f| f.starts_with("leak_level+")))
        .map(|(bytes, _)| bytes)
        .sum();
    assert!(
        (1_800_000..=2_400_000).contains(&leaked),
        "{leaked}: {samples:?}"
    );
    let other: u64 = samples.iter().map(|(b, _)| b).sum::<u64>() - leaked;
    assert!(other < 200_000, "{other}: {samples:?}");
    // At exit: the whole profile, in a file named after the process.
    let exits: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("exit-"))
        .collect();
    assert_eq!(exits.len(), 1, "{exits:?}");
    let whole = pprof_samples(&std::fs::read(exits[0].path()).unwrap());
    assert!(
        whole
            .iter()
            .any(|(_, s)| s.iter().any(|f| f.starts_with("leak_level+")))
    );
    assert!(
        !exits[0]
            .file_name()
            .to_string_lossy()
            .ends_with(".bento-tmp")
    );
}
