//! The `bento` command as a user runs it: every sub-command at a small size, its SVG
//! charts parsed as XML with the series they must hold, and each mistake a user makes
//! answered with one line and a non-zero exit, never a panic.

use std::path::Path;
use std::process::{Command, Output};

#[path = "../src/allocators.rs"]
mod allocators;

mod common;

use common::{bento, command, ok, scratch, stderr, stdout};

/// Checks a run failed naming `what`, and no panic: a mistake in the arguments with
/// clap's whole message and exit 2 (what was wrong, its suggestion, the usage), any
/// other with one line and exit 1.
fn fails_with(o: &Output, what: &str) {
    let err = stderr(o);
    assert!(!o.status.success(), "succeeded: {}", stdout(o));
    assert!(err.contains(what), "stderr does not name `{what}`:\n{err}");
    assert!(
        !err.contains("panicked") && !err.contains("stack backtrace"),
        "{err}"
    );
    match o.status.code() {
        Some(2) => {
            assert!(err.starts_with("error: "), "not clap's message:\n{err}");
            assert!(err.contains("try '--help'"), "{err}");
        }
        Some(1) => assert!(err.lines().count() <= 2, "more than a line or two:\n{err}"),
        other => panic!("exit {other:?}:\n{err}"),
    }
}

/// Parses an SVG file as XML; returns its text nodes and the number of `<polyline>`
/// and `<path>`/`<rect>` elements.
struct Svg {
    texts: Vec<String>,
    lines: usize,
    rects: Vec<String>,
}

fn svg(path: &Path) -> Svg {
    let text = std::fs::read_to_string(path).unwrap();
    let doc = roxmltree::Document::parse(&text)
        .unwrap_or_else(|e| panic!("{} is not well-formed XML: {e}", path.display()));
    assert_eq!(doc.root_element().tag_name().name(), "svg");
    let mut s = Svg {
        texts: Vec::new(),
        lines: 0,
        rects: Vec::new(),
    };
    for node in doc.descendants() {
        match node.tag_name().name() {
            "text" => s.texts.push(node.text().unwrap_or("").trim().to_owned()),
            "polyline" => s.lines += 1,
            "rect" => s
                .rects
                .push(node.attribute("fill").unwrap_or("").to_owned()),
            _ => {}
        }
    }
    s
}

/// The allocators `demo` runs, in the order of its rows.
const DEMO_ROWS: &[&str] = allocators::ALLOCATORS;

/// The allocators that count their OS calls.
const COUNTING: &[&str] = &[
    "space",
    "common",
    "bento",
    "bento-huge",
    "bento-guard",
    "bento-prof",
];

/// The names `replay --allocators` takes, in clap's order: every allocator, built in
/// or not (a peer not built in is refused when it runs, with a reason).
fn replay_names() -> Vec<&'static str> {
    let mut names = vec!["system", "mimalloc", "jemalloc", "space", "common", "bento"];
    if cfg!(target_os = "linux") {
        names.push("bento-huge");
    }
    if cfg!(unix) {
        names.push("bento-guard");
    }
    names.push("bento-prof");
    names
}

/// `bento demo --levels 2 -o DIR EXTRA…`'s output.
fn demo(dir: &Path, extra: &[&str]) -> String {
    let mut args = vec!["demo", "--levels", "2", "-o", dir.to_str().unwrap()];
    args.extend(extra);
    ok(&bento(&args))
}

#[test]
fn demo_prints_a_table_per_allocator_and_writes_both_charts() {
    let dir = scratch("demo");
    let out = demo(&dir, &[]);
    // The first table's rows (the latency table lists them again).
    let rows: Vec<&str> = out
        .lines()
        .skip_while(|l| !l.starts_with("allocator"))
        .take_while(|l| !l.is_empty())
        .filter_map(|l| l.split_whitespace().next())
        .filter(|first| DEMO_ROWS.contains(first))
        .collect();
    assert_eq!(rows, DEMO_ROWS, "{out}");
    let header = out
        .lines()
        .find(|l| l.starts_with("allocator"))
        .unwrap_or_else(|| panic!("no header:\n{out}"));
    assert!(header.contains("OS calls in play"), "{header}");
    // The allocators that count no calls have none in play.
    let row = |name: &str| out.lines().find(|l| l.starts_with(name)).unwrap();
    assert!(row("system").contains(" - "), "{out}");
    // The subsystem heaps' report, and the map's totals.
    for heap in ["level", "streaming", "game"] {
        assert!(out.lines().any(|l| l.starts_with(heap)), "{out}");
    }
    assert!(out.contains("The memory space at the peak:"), "{out}");
    // bento-prof's estimate per heap beside the heap's own count, and its profile,
    // which `bento diff` reads: against an empty one, the heaps' live stacks.
    let estimates: Vec<&str> = out
        .lines()
        .filter(|l| l.starts_with("profile: heap "))
        .collect();
    assert!(
        estimates
            .iter()
            .any(|l| l.starts_with("profile: heap level: estimated ")),
        "{out}"
    );
    let empty = dir.join("empty.pb");
    let nothing = bento_pages::Profiler::new(bento_pages::ProfileConfig::DEFAULT).unwrap();
    let mut bytes = Vec::new();
    nothing.write_pprof(false, &mut |b| bytes.extend_from_slice(b));
    std::fs::write(&empty, bytes).unwrap();
    let profile = dir.join("demo-profile.pb");
    let grown = ok(&bento(&[
        "diff",
        empty.to_str().unwrap(),
        profile.to_str().unwrap(),
    ]));
    assert!(
        grown.lines().skip(1).any(|l| l.contains("heap level")),
        "{grown}"
    );
    assert!(
        out.contains("demo-profile.pb, bento-prof's heap profile"),
        "{out}"
    );
    // One way of writing bytes on the whole screen, the heaps' report included: three
    // significant stats, so never "7343 KiB" beside "22.7 MiB".
    for (i, word) in out.split_whitespace().enumerate().skip(1) {
        if ["B", "KiB", "MiB", "GiB"].contains(&word) {
            let number = out.split_whitespace().nth(i - 1).unwrap();
            let digits = number.chars().filter(char::is_ascii_digit).count();
            assert!(
                digits <= 3 || word == "B" && digits <= 4,
                "`{number} {word}`: {out}"
            );
        }
    }
    // The latency table, a row per allocator.
    assert!(out.contains("p99.99"), "{out}");
    let memory = svg(&dir.join("demo-memory.svg"));
    for series in [
        "live (asked)",
        "system (RSS growth)",
        #[cfg(feature = "mimalloc")]
        "mimalloc (RSS growth)",
        #[cfg(all(feature = "jemalloc", unix))]
        "jemalloc (RSS growth)",
        "space (committed)",
        "common (committed)",
        "bento (committed)",
        "bento kept for reuse",
    ] {
        assert!(memory.texts.iter().any(|t| t == series), "no {series}");
    }
    // The live line and each allocator's are polylines, the kept line dashes of them.
    assert!(memory.lines > DEMO_ROWS.len() + 1, "{} lines", memory.lines);
    // Both levels are marked where they loaded, not where they began loading or
    // unloading.
    assert!(memory.texts.iter().any(|t| t == "level 1"));
    assert!(!memory.texts.iter().any(|t| t.contains("loading")));
    let map = svg(&dir.join("demo-heapmap.svg"));
    assert!(map.texts.iter().any(|t| t.starts_with("segment ")));
    for legend in ["live", "free, committed", "decommitted", "overhead"] {
        assert!(map.texts.iter().any(|t| t == legend), "no {legend}");
    }
    // Rows of live bytes, in the live colour.
    assert!(map.rects.iter().filter(|f| *f == "#4477AA").count() > 1);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn demo_json_has_the_same_figures_for_scripts() {
    let dir = scratch("json");
    let out = demo(&dir, &["--json"]);
    let doc: serde_json::Value = serde_json::from_str(&out).expect("stdout is JSON");
    let runs = doc["runs"].as_array().unwrap();
    let names: Vec<&str> = runs
        .iter()
        .map(|r| r["allocator"].as_str().unwrap())
        .collect();
    assert_eq!(names, DEMO_ROWS);
    let peak = doc["peak_live"].as_u64().unwrap();
    for run in runs {
        assert_eq!(run["peak_live"].as_u64(), Some(peak), "{run}");
        assert_eq!(run["failures"].as_u64(), Some(0));
        assert!(run["ops_per_sec"].as_f64().unwrap() > 0.0);
        assert!(run["fragmentation"].as_f64().unwrap() >= 0.9);
        // Every allocator touches fresh pages: the replay's minor faults are counted.
        assert!(run["page_faults"].as_u64().unwrap() > 0, "{run}");
        let name = run["allocator"].as_str().unwrap();
        let per_frame = &run["os_calls_per_frame"];
        let kept = &run["kept_for_reuse"];
        if !COUNTING.contains(&name) {
            assert!(per_frame.is_null() && run["os_calls"].is_null(), "{run}");
            assert!(kept.is_null(), "{run}");
            continue;
        }
        // bento's allocators tell what their retention kept and gave back.
        let peak_committed = run["peak_committed"].as_u64().unwrap();
        assert!(kept["peak"].as_u64().unwrap() <= peak_committed, "{run}");
        assert!(kept["given_back"].as_u64().is_some(), "{run}");
        let field = |f: &str| {
            per_frame[f]
                .as_u64()
                .unwrap_or_else(|| panic!("{name}: no {f} in {per_frame}"))
        };
        // Two levels of 120 frames; the first is the warm-up.
        assert_eq!(
            (field("frames"), field("warm_up_frames")),
            (240, 120),
            "{run}"
        );
        assert!(field("frames_with_calls") <= 120, "{run}");
        assert_eq!(
            field("total"),
            field("inside_frames") + field("at_frame_ends"),
            "{run}"
        );
        assert!(field("max") <= field("total"), "{run}");
        assert!(field("frames_with_calls") <= field("total"), "{run}");
        assert!(field("total") <= run["os_calls"].as_u64().unwrap(), "{run}");
    }
    assert!(doc["heaps"].as_str().unwrap().contains("level"));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn gen_inspect_replay_and_map_agree_on_a_trace() {
    let dir = scratch("tools");
    let trace = dir.join("world.trace");
    let t = trace.to_str().unwrap();
    let out = ok(&gen_scale("world", "0.05", t));
    assert!(out.starts_with("wrote "), "{out}");

    let scan = inspect_json(t);
    let peak = scan["peak_live"].as_u64().unwrap();
    assert_eq!(scan["allocs"], scan["frees"]);
    assert_eq!(scan["never_freed"].as_u64(), Some(0));
    let table = ok(&bento(&["inspect", t]));
    assert!(
        table.contains("lifetime (records)") && table.contains("frame"),
        "{table}"
    );

    let chart = dir.join("replay.svg");
    let replay = ok(&bento(&[
        "replay",
        t,
        "--allocators",
        "space,system",
        "-o",
        chart.to_str().unwrap(),
        "--json",
    ]));
    let runs: serde_json::Value = serde_json::from_str(&replay).unwrap();
    for run in runs.as_array().unwrap() {
        assert_eq!(run["peak_live"].as_u64(), Some(peak));
        assert_eq!(
            run["ops"],
            scan["allocs"].as_u64().unwrap() * 2 + scan["reallocs"].as_u64().unwrap()
        );
    }
    let chart = svg(&chart);
    assert!(chart.texts.iter().any(|t| t == "space (committed)"));
    assert!(chart.texts.iter().any(|t| t == "system (RSS growth)"));
    // Without `--allocators`: every allocator but the bento set-up.
    let runs: serde_json::Value =
        serde_json::from_str(&ok(&bento(&["replay", t, "--json"]))).unwrap();
    let names: Vec<&str> = runs
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["allocator"].as_str().unwrap())
        .collect();
    let expected: Vec<&str> = DEMO_ROWS
        .iter()
        .copied()
        .filter(|n| !n.starts_with("bento"))
        .collect();
    assert_eq!(names, expected);

    let map = dir.join("map.svg");
    let out = map_at(t, "peak", &map);
    assert!(out.contains("segments:"), "{out}");
    assert!(svg(&map).texts.iter().any(|t| t.contains("after record")));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn mistakes_get_one_line_and_a_non_zero_exit() {
    let dir = scratch("mistakes");
    let trace = dir.join("t.trace");
    let t = trace.to_str().unwrap();
    ok(&gen_scale("mixed", "0.025", t));

    fails_with(
        &bento(&["replay", "/no/such/file.trace"]),
        "cannot open /no/such/file.trace",
    );
    fails_with(&bento(&["inspect", "/no/such/file.trace"]), "cannot open");
    fails_with(
        &bento(&["replay", t, "--allocators", "space,tcmalloc"]),
        "invalid value 'tcmalloc' for '--allocators",
    );
    fails_with(
        &bento(&["gen", "--scale", "many", "-o", t]),
        "invalid value 'many'",
    );
    fails_with(
        &bento(&["gen", "--scale", "0", "-o", t]),
        "0 is not from 0.01 to 100",
    );
    fails_with(&bento(&["demo", "--levels", "-3"]), "unexpected argument");
    fails_with(&bento(&["map", t, "--at", "soon"]), "bad --at `soon`");
    fails_with(&bento(&["frobnicate"]), "unrecognized subcommand");
    let not_a_trace = dir.join("readme.txt");
    std::fs::write(&not_a_trace, "hello").unwrap();
    fails_with(
        &bento(&["inspect", not_a_trace.to_str().unwrap()]),
        "not a bento trace",
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_corrupted_trace_exits_non_zero_with_the_offset() {
    let dir = scratch("corrupt");
    let trace = dir.join("t.trace");
    let t = trace.to_str().unwrap();
    ok(&gen_scale("lifo", "0.05", t));
    let mut bytes = std::fs::read(&trace).unwrap();
    let cut = bytes.len() / 2;
    bytes.truncate(cut);
    bytes.push(0x7e); // no record has this kind
    std::fs::write(&trace, &bytes).unwrap();
    for args in [
        vec!["inspect", t],
        vec!["replay", t, "--allocators", "space"],
        vec!["map", t, "--at", "100000000"],
    ] {
        let o = bento(&args);
        fails_with(&o, "at byte ");
        let err = stderr(&o);
        let offset: u64 = err
            .split("at byte ")
            .nth(1)
            .and_then(|s| s.split(|c: char| !c.is_ascii_digit()).next())
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| panic!("no offset in {err}"));
        assert!(offset as usize <= cut, "{err}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Runs bento under a 512-byte file-size limit, with SIGXFSZ ignored so that a write
/// past the limit fails with EFBIG rather than killing the process.
fn bento_with_small_file_limit(args: &[&str]) -> Output {
    Command::new("sh")
        .arg("-c")
        .arg("trap '' XFSZ; ulimit -f 1; exec \"$0\" \"$@\"")
        .arg(env!("CARGO_BIN_EXE_bento"))
        .args(args)
        .output()
        .expect("sh runs")
}

#[test]
fn a_write_stopped_by_an_error_leaves_no_file_and_the_old_one_untouched() {
    let dir = scratch("efbig");
    let trace = dir.join("t.trace");
    let t = trace.to_str().unwrap();
    let o =
        bento_with_small_file_limit(&["gen", "--profile", "world", "--scale", "0.025", "-o", t]);
    fails_with(&o, &format!("cannot write {t}"));
    let left: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert!(left.is_empty(), "left behind: {left:?}");

    // An existing output stays as it was, for a trace and for a chart.
    ok(&gen_scale("world", "0.025", t));
    let before = std::fs::read(&trace).unwrap();
    let o = bento_with_small_file_limit(&["gen", "--profile", "lifo", "--scale", "0.05", "-o", t]);
    fails_with(&o, &format!("cannot write {t}"));
    assert!(std::fs::read(&trace).unwrap() == before, "{t} changed");
    let map = dir.join("map.svg");
    std::fs::write(&map, "old").unwrap();
    let o = bento_with_small_file_limit(&["map", t, "-o", map.to_str().unwrap()]);
    fails_with(&o, "cannot write");
    assert_eq!(std::fs::read_to_string(&map).unwrap(), "old");
    let mut names: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert_eq!(names, ["map.svg", "t.trace"]);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Writes a trace by hand.
fn hand_trace(path: &Path, f: impl FnOnce(&mut bento_trace::TraceWriter<Vec<u8>>)) {
    let mut w = bento_trace::TraceWriter::new(Vec::new()).unwrap();
    f(&mut w);
    std::fs::write(path, w.finish().unwrap()).unwrap();
}

#[test]
fn refused_requests_are_counted_in_the_table_and_fail_the_replay_unless_allowed() {
    let dir = scratch("refused");
    let trace = dir.join("over-budget.trace");
    let t = trace.to_str().unwrap();
    // 100 MiB of blocks of the game's global tag: the bento set-up's "game" heap holds
    // 64 MiB.
    hand_trace(&trace, |w| {
        for id in 0..100 {
            w.alloc(id, 1 << 20, 16, bento_trace::workload::tags::GLOBAL)
                .unwrap();
        }
    });
    let o = bento(&["replay", t, "--allocators", "system,bento"]);
    fails_with(&o, "bento refused ");
    let err = stderr(&o);
    let refused: u64 = err
        .split("bento refused ")
        .nth(1)
        .and_then(|s| s.split(' ').next())
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no count in {err}"));
    assert!((1..100).contains(&refused), "{err}");
    assert!(err.contains(&format!("{refused} of 100")), "{err}");
    assert!(!err.contains("system refused"), "{err}");
    assert!(err.contains("--allow-failures"), "{err}");
    // The table came first, with the count in its own column.
    let table = stdout(&o);
    let header = table.lines().next().unwrap_or_default();
    assert!(header.contains("refused"), "{table}");
    let row = |name: &str| {
        table
            .lines()
            .find(|l| l.starts_with(name))
            .unwrap_or_else(|| panic!("no {name} row:\n{table}"))
            .to_owned()
    };
    assert!(
        row("bento").contains(&format!(" {refused} of 100 ")),
        "{table}"
    );
    assert!(
        row("system").split_whitespace().nth(1) == Some("0"),
        "{table}"
    );

    let allowed = ok(&bento(&[
        "replay",
        t,
        "--allocators",
        "bento",
        "--allow-failures",
    ]));
    assert!(
        allowed.contains(&format!(" {refused} of 100 ")),
        "{allowed}"
    );
    let o = bento(&["replay", t, "--allocators", "bento", "--json"]);
    assert!(!o.status.success());
    let runs: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(runs[0]["failures"].as_u64(), Some(refused));
    assert_eq!(runs[0]["requests"].as_u64(), Some(100));
    let help = ok(&bento(&["replay", "--help"]));
    assert!(help.contains("--allow-failures"), "{help}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn sizes_past_isize_max_are_refused_and_no_sum_wraps() {
    let dir = scratch("huge");
    let trace = dir.join("huge.trace");
    let t = trace.to_str().unwrap();
    let max = isize::MAX as u64;
    hand_trace(&trace, |w| {
        // No `Layout` holds these: a replay refuses them.
        w.alloc(1, 1 << 63, 8, 0).unwrap();
        w.alloc(2, 1 << 63, 8, 0).unwrap();
        // These are possible, and three of them overflow a u64 sum.
        w.alloc(3, max, 1, 5).unwrap();
        w.alloc(4, max, 1, 5).unwrap();
        w.alloc(5, max, 1, 5).unwrap();
        w.realloc(5, u64::MAX).unwrap();
        // A lifetime in the top bucket.
        w.record(u64::MAX - 1, &bento_trace::Event::Free { id: 3 })
            .unwrap();
    });
    let table = ok(&bento(&["inspect", t]));
    assert!(table.contains("impossible: 3 requests"), "{table}");
    // 3 × (2^63 - 1) bytes asked: 24 EiB, not a wrapped stat.
    let global = table
        .lines()
        .find(|l| l.starts_with("global"))
        .unwrap_or_else(|| panic!("no global tag:\n{table}"));
    assert!(global.contains("24.0 EiB"), "{global}");
    // Asked, though never live: 2 × 2^63 bytes.
    let none = table.lines().find(|l| l.starts_with("none")).unwrap();
    assert!(none.contains("16.0 EiB"), "{none}");
    assert!(table.contains("8.00 EiB – 16.0 EiB"), "{table}");
    assert!(
        table.contains("9223372036854775808 – 18446744073709551615"),
        "{table}"
    );
    assert!(!table.contains("– 0 B"), "{table}");
    let scan = inspect_json(t);
    assert_eq!(scan["impossible"].as_u64(), Some(3));
    assert!(scan["peak_live"].as_f64().unwrap() > 2.7e19, "{scan}");

    // More live than any bound of bytes: a replay is refused unless told there is
    // none, and then counts the same requests as refused, and says so.
    fails_with(
        &bento(&["replay", t, "--allocators", "system", "--max-live", "8EiB"]),
        "its peak live, 24.0 EiB, is more than --max-live 8.00 EiB",
    );
    let o = bento(&["replay", t, "--allocators", "system", "--max-live", "none"]);
    fails_with(&o, "system refused ");
    let o = bento(&[
        "replay",
        t,
        "--allocators",
        "system",
        "--allow-failures",
        "--max-live",
        "none",
        "--json",
    ]);
    let runs: serde_json::Value = serde_json::from_str(&ok(&o)).unwrap();
    assert!(runs[0]["failures"].as_u64().unwrap() >= 3, "{runs}");
    let map = dir.join("map.svg");
    ok(&bento(&[
        "map",
        t,
        "--at",
        "end",
        "--max-live",
        "none",
        "-o",
        map.to_str().unwrap(),
    ]));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn every_number_a_user_types_is_bounded() {
    let dir = scratch("bounds");
    let trace = dir.join("t.trace");
    let t = trace.to_str().unwrap();
    // Past the largest scale, below the smallest, not numbers at all: refused before
    // anything is written.
    for profile in ["game", "world", "mixed", "lifo", "long"] {
        for scale in ["100.5", "18446744073709552", "1e300", "inf", "0.001", "-1"] {
            fails_with(&gen_scale(profile, scale, t), "is not from 0.01 to 100");
        }
        for scale in ["NaN", "18446744073709551616x", ""] {
            fails_with(&gen_scale(profile, scale, t), "--scale");
        }
        assert!(!trace.exists(), "{profile} wrote {t}");
    }
    fails_with(
        &bento(&["demo", "--levels", "1001", "-o", dir.to_str().unwrap()]),
        "1..=1000",
    );
    assert!(!dir.join("demo.trace").exists());
    assert!(ok(&bento(&["gen", "--help"])).contains("0.01 to 100"));
    assert!(ok(&bento(&["demo", "--help"])).contains("1 to 1000"));
    ok(&gen_scale("lifo", "0.05", t));
    let scan = inspect_json(t);
    let last = scan["last_seq"].as_u64().unwrap();
    let map = dir.join("map.svg");
    map_at(t, &last.to_string(), &map);
    let m = map.to_str().unwrap();
    for at in [last + 1, 99_999_999, u64::MAX] {
        fails_with(
            &bento(&["map", t, "--at", &at.to_string(), "-o", m]),
            &format!("past the trace's last record, {last}"),
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// `bento map TRACE --at AT -o OUT`'s output.
fn map_at(trace: &str, at: &str, out: &Path) -> String {
    ok(&bento(&[
        "map",
        trace,
        "--at",
        at,
        "-o",
        out.to_str().unwrap(),
    ]))
}

/// `bento inspect TRACE --json`'s stats.
fn inspect_json(trace: &str) -> serde_json::Value {
    serde_json::from_str(&ok(&bento(&["inspect", trace, "--json"]))).unwrap()
}

/// `bento gen --profile PROFILE --scale SCALE -o OUT`.
fn gen_scale(profile: &str, scale: &str, out: &str) -> Output {
    bento(&[
        "gen",
        "--profile",
        profile,
        &format!("--scale={scale}"),
        "-o",
        out,
    ])
}

#[test]
fn a_scale_is_a_multiple_of_the_profiles_default_for_every_profile() {
    let dir = scratch("scale");
    let t = dir.join("t.trace");
    let t = t.to_str().unwrap();
    let allocs = |profile: &str, scale: &str| -> u64 {
        ok(&gen_scale(profile, scale, t));
        let scan = inspect_json(t);
        scan["allocs"].as_u64().unwrap()
    };
    for profile in ["game", "world", "mixed", "lifo", "long"] {
        // The long session's unit is an hour of its 8: a quarter is two.
        let (a, b) = if profile == "long" {
            ("0.25", "0.5")
        } else {
            ("0.05", "0.1")
        };
        let (small, double) = (allocs(profile, a), allocs(profile, b));
        // Twice the units, about twice the allocations (the units differ in size).
        let ratio = double as f64 / small as f64;
        assert!(
            (1.5..=2.5).contains(&ratio),
            "{profile}: {small} then {double}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_bare_bento_prints_the_usage_and_mistakes_keep_clap_s_words() {
    let o = bento(&[]);
    assert_eq!(o.status.code(), Some(2));
    let text = format!("{}{}", stdout(&o), stderr(&o));
    assert!(text.contains("Usage: bento <COMMAND>"), "{text}");
    for command in ["demo", "gen", "record", "replay", "inspect", "map"] {
        assert!(text.contains(&format!("  {command} ")), "{command}: {text}");
    }
    assert!(!text.contains("__child"), "{text}");
    // The missing argument is named, and the usage shown.
    let o = bento(&["replay"]);
    fails_with(&o, "the following required arguments were not provided");
    assert!(stderr(&o).contains("<TRACE>"), "{}", stderr(&o));
    assert!(stderr(&o).contains("Usage: bento replay"), "{}", stderr(&o));
    fails_with(&bento(&["record"]), "<PROGRAM ARGS>");
    // clap's suggestions stay.
    fails_with(
        &bento(&["repaly", "x"]),
        "a similar subcommand exists: 'replay'",
    );
    fails_with(
        &bento(&["replay", "x", "--allocators", "system,mimaloc"]),
        "a similar value exists: 'mimalloc'",
    );
    fails_with(
        &bento(&["gen", "--profile", "gam"]),
        "a similar value exists: 'game'",
    );
    // A trailing comma leaves an empty name: clap lists the names it takes.
    fails_with(
        &bento(&["replay", "x", "--allocators", "system,"]),
        &format!("[possible values: {}]", replay_names().join(", ")),
    );
    // Every allocator is offered by name.
    let help = ok(&bento(&["replay", "--help"]));
    for name in ["system", "mimalloc", "jemalloc", "space", "common", "bento"] {
        assert!(help.contains(name), "{name}: {help}");
    }
}

#[test]
fn every_command_writes_to_its_output_and_says_so() {
    let dir = scratch("outputs");
    // `gen` without `-o`: PROFILE.trace in the working directory.
    let o = command(&["gen", "--profile", "mixed", "--scale", "0.01"])
        .current_dir(&dir)
        .output()
        .unwrap();
    let out = ok(&o);
    assert!(out.starts_with("wrote mixed.trace: "), "{out}");
    let trace = dir.join("mixed.trace");
    assert!(trace.is_file());
    let t = trace.to_str().unwrap();
    // `map` without `-o`: map.svg in the working directory.
    let o = command(&["map", "mixed.trace"])
        .current_dir(&dir)
        .output()
        .unwrap();
    assert!(ok(&o).contains("wrote map.svg"));
    assert!(dir.join("map.svg").is_file());
    // `replay` writes its chart only when asked, with `-o` as every command.
    let chart = dir.join("chart.svg");
    let out = ok(&bento(&[
        "replay",
        t,
        "--allocators",
        "system",
        "--no-latency",
        "-o",
        chart.to_str().unwrap(),
    ]));
    assert!(out.contains(&format!("wrote {}", chart.display())), "{out}");
    assert!(chart.is_file());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn an_empty_trace_inspects_as_one_with_no_records() {
    let dir = scratch("empty");
    let empty = dir.join("empty.trace");
    std::fs::write(&empty, b"").unwrap();
    let header = dir.join("header.trace");
    hand_trace(&header, |_| {});
    assert_eq!(std::fs::metadata(&header).unwrap().len(), 9);
    for trace in [&empty, &header] {
        let t = trace.to_str().unwrap();
        let out = ok(&bento(&["inspect", t]));
        assert!(out.contains("holds no records"), "{out}");
        let scan = inspect_json(t);
        assert_eq!(scan["records"].as_u64(), Some(0));
        fails_with(&bento(&["replay", t]), "an empty trace");
        fails_with(&bento(&["map", t]), "an empty trace");
    }
    let garbage = dir.join("garbage.trace");
    std::fs::write(&garbage, b"\0\0\0").unwrap();
    fails_with(
        &bento(&["inspect", garbage.to_str().unwrap()]),
        "not a bento trace",
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// The rows of the table under `header` (its first line) whose first word is `name`,
/// each cut at the end of the column `column` (every column but the first is
/// right-aligned under its header): the last word of what is left is that cell.
fn cell(table: &str, name: &str, column: &str) -> String {
    let header = table
        .lines()
        .find(|l| l.contains(column))
        .unwrap_or_else(|| panic!("no column {column}:\n{table}"));
    let at = header.find(column).unwrap();
    let end = header[..at].chars().count() + column.chars().count();
    let row = table
        .lines()
        .find(|l| l.split_whitespace().next() == Some(name))
        .unwrap_or_else(|| panic!("no {name} row:\n{table}"));
    let cut: String = row.chars().take(end).collect();
    cut.split_whitespace().last().unwrap_or_default().to_owned()
}

#[test]
fn a_trace_with_nothing_live_shows_no_ratio() {
    let dir = scratch("nothing-live");
    let trace = dir.join("frames.trace");
    let t = trace.to_str().unwrap();
    // Frames and phases, no allocation.
    hand_trace(&trace, |w| {
        w.phase("level 0 loaded").unwrap();
        for _ in 0..5 {
            w.frame().unwrap();
        }
        w.phase("level 0 unloading").unwrap();
    });
    let names = "space,common,system";
    let table = ok(&bento(&["replay", t, "--allocators", names]));
    for name in names.split(',') {
        // Committed bytes over no live bytes: no ratio, not the committed bytes.
        assert_eq!(cell(&table, name, "committed ÷ live"), "—", "{table}");
        // Percentiles of no operations: none.
        let latency = table
            .lines()
            .skip_while(|l| !l.starts_with("latency (ns)"))
            .find(|l| l.starts_with(name))
            .unwrap_or_else(|| panic!("no {name} latency:\n{table}"));
        let words: Vec<&str> = latency.split_whitespace().collect();
        assert_eq!(words[1..], ["0", "—", "—", "—", "—", "—"], "{table}");
    }
    assert!(table.contains("—: a ratio of nothing"), "{table}");
    let runs: serde_json::Value =
        serde_json::from_str(&ok(&bento(&["replay", t, "--allocators", names, "--json"]))).unwrap();
    for run in runs.as_array().unwrap() {
        assert_eq!(run["peak_live"].as_u64(), Some(0), "{run}");
        assert!(run["fragmentation"].is_null(), "{run}");
        assert!(run["latency_ns"]["p50"].is_null(), "{run}");
        assert_eq!(run["latency_ns"]["ops"].as_u64(), Some(0), "{run}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
#[cfg(target_os = "linux")]
fn a_trace_bigger_than_the_memory_available_is_refused_before_it_replays() {
    let dir = scratch("too-big");
    let huge = dir.join("huge.trace");
    let h = huge.to_str().unwrap();
    // 4 EiB in one block: more than any machine's memory, and past any address
    // space, so that a replay that went ahead anyway would be refused by the
    // allocator at once rather than touch its pages.
    hand_trace(&huge, |w| {
        w.alloc(1, 4096, 8, 0).unwrap();
        w.alloc(2, 1 << 62, 8, 0).unwrap();
        w.free(2).unwrap();
        w.free(1).unwrap();
    });
    let o = bento(&["replay", h, "--allocators", "system"]);
    fails_with(
        &o,
        &format!("{h}: its peak live, 4.00 EiB, is more than the "),
    );
    let err = stderr(&o);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains(" of memory available (MemAvailable in /proc/meminfo); --max-live SIZE"),
        "{err}"
    );
    // The stat of memory available, in bytes as the tables write them.
    let available = err
        .split("is more than the ")
        .nth(1)
        .and_then(|s| s.split(" of memory").next())
        .unwrap_or_default();
    assert!(available.ends_with("iB"), "{err}");
    // Refused before any replay: no table.
    assert!(stdout(&o).is_empty(), "{}", stdout(&o));
    // `map` replays too: stopped before the record that would pass the bound.
    let map = dir.join("map.svg");
    let o = bento(&["map", h, "--at", "end", "-o", map.to_str().unwrap()]);
    fails_with(
        &o,
        &format!("{h}: the 4.00 EiB that record 1 would make live is more than the "),
    );
    assert!(!map.exists());

    // Given a bound, the trace goes through it: the allocator itself refuses the
    // 4 EiB.
    let out = ok(&bento(&[
        "replay",
        h,
        "--allocators",
        "system",
        "--no-latency",
        "--max-live",
        "8EiB",
        "--allow-failures",
    ]));
    let row = out.lines().find(|l| l.starts_with("system")).unwrap();
    assert!(row.contains(" 1 of 2 "), "{out}");
    ok(&bento(&[
        "map",
        h,
        "--at",
        "end",
        "--max-live",
        "8E",
        "-o",
        map.to_str().unwrap(),
    ]));

    // A trace of 2 MiB live: within a bound of 4 MiB, over one of 1 MiB, in the
    // parent's check and in each replay's own.
    let small = dir.join("small.trace");
    let s = small.to_str().unwrap();
    hand_trace(&small, |w| {
        w.alloc(1, 1 << 20, 8, 0).unwrap();
        w.alloc(2, 1 << 20, 8, 0).unwrap();
    });
    let runs: serde_json::Value = serde_json::from_str(&ok(&bento(&[
        "replay",
        s,
        "--allocators",
        "system,space",
        "--max-live",
        "4MiB",
        "--json",
    ])))
    .unwrap();
    for run in runs.as_array().unwrap() {
        assert_eq!(run["peak_live"].as_u64(), Some(2 << 20), "{run}");
    }
    let o = bento(&["replay", s, "--allocators", "system", "--max-live", "1MiB"]);
    fails_with(
        &o,
        &format!("{s}: its peak live, 2.00 MiB, is more than --max-live 1.00 MiB"),
    );
    let result = dir.join("run.json");
    let o = bento(&[
        "__child",
        s,
        "--allocator",
        "system",
        "--result",
        result.to_str().unwrap(),
        "--max-live",
        "1048577",
    ]);
    fails_with(
        &o,
        "record 1 would make 2097152 bytes live, over the replay's bound of 1048577",
    );
    assert!(!result.exists());

    // A bound is a size from 1 byte to 16 EiB less one.
    for (bad, what) in [
        ("0", "0 is not from 1 byte to 18446744073709551615 bytes"),
        ("16EiB", "16EiB is not from 1 byte to"),
        ("1GB", "`1GB` is not a size"),
        ("lots", "`lots` is not a size"),
    ] {
        fails_with(
            &bento(&["replay", s, "--max-live", bad]),
            &format!("invalid value '{bad}' for '--max-live <SIZE>': {what}"),
        );
    }
    for command in ["replay", "map"] {
        let help = ok(&bento(&[command, "--help"]));
        assert!(help.contains("--max-live <SIZE>"), "{help}");
        assert!(help.contains("MemAvailable"), "{help}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
