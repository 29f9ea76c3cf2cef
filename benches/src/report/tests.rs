use serde_json::json;

use super::data::parse_icounts;
use super::fmt::{bytes, micros};
use super::*;

fn bench(id: &str, ns: f64, elements: Option<u64>) -> Bench {
    let parts: Vec<&str> = id.split('/').collect();
    let (group, rest) = (format!("{}/{}", parts[0], parts[1]), &parts[2..]);
    Bench {
        id: id.to_owned(),
        group,
        name: rest.join("/"),
        param: rest.get(1).map(|p| (*p).to_owned()),
        ns,
        elements,
    }
}

const MIB: u64 = 1 << 20;

/// `bench-malloc`'s stats: bento level with glibc but in `sort`'s time and `gzip`'s
/// footprint.
fn malloc() -> serde_json::Value {
    let mut rows = Vec::new();
    for program in ["python3", "sort", "gzip", "gcc", "c++ new", "big blocks"] {
        let (time, rss) = match program {
            "sort" => (1.2, 1.0),
            "gzip" => (1.0, 1.5),
            _ => (1.0, 1.0),
        };
        for (allocator, time, rss) in [("glibc", 1.0, 1.0), ("bento", time, rss)] {
            rows.push(json!({"program": program, "allocator": allocator,
                "median_time_ns": 400e6 * time, "min_time_ns": 0, "max_time_ns": 0,
                "peak_rss_bytes": 100.0 * MIB as f64 * rss}));
        }
    }
    json!({"rounds": 5, "rows": rows})
}

/// A small run: a few benchmarks, a count, and each program's JSON.
fn data() -> Data {
    let mut d = Data::default();
    for b in [
        bench("space/mixed/bento_space", 400.0, None),
        bench("space/mixed/system_glibc", 800.0, None),
        bench("space/mixed/mimalloc", 200.0, None),
        bench("space/frame_16/bento_space", 1000.0, None),
        bench("space/frame_16/system_glibc", 1250.0, None),
        bench("common/threads/bento_common/1", 1000.0, Some(100)),
        bench("common/threads/bento_common/2", 1000.0, Some(200)),
        bench("common/threads/mimalloc/2", 4000.0, Some(200)),
    ] {
        d.benches.insert(b.id.clone(), b);
    }
    let docs = [
        (
            "icount",
            json!({"rows": [{"mode": "space-mixed-bento", "what": "mixed steps",
                "collect": "bento_benches::heap::mixed_replace*", "arg": 1000,
                "operations": 1000, "instructions": 300_000}]}),
        ),
        (
            "session",
            json!({"levels": 100, "rows": [
                {"allocator": "glibc", "peak_live_bytes": 100 * MIB,
                 "peak_committed_bytes": null, "peak_rss_growth_bytes": 165 * MIB},
                {"allocator": "common", "peak_live_bytes": 100 * MIB,
                 "peak_committed_bytes": 120 * MIB, "peak_rss_growth_bytes": 114 * MIB},
            ]}),
        ),
        (
            "churn",
            json!({"rows": [
                {"allocator": "bento", "operations": 1000, "p50_ns": 480, "p99_ns": 71_000,
                 "p999_ns": 110_300, "p9999_ns": 137_300, "max_ns": 185_000,
                 "over_10us": 2678, "over_100us": 94, "peak_live_bytes": 100 * MIB,
                 "peak_rss_growth_bytes": 105 * MIB, "peak_committed_bytes": 103 * MIB,
                 "mappings_at_peak": 112,
                 "held_after_free_all_bytes": MIB / 2},
                {"allocator": "glibc", "operations": 1000, "p50_ns": 90, "p99_ns": 5000,
                 "p999_ns": 63_500, "p9999_ns": 118_100, "max_ns": 174_000,
                 "over_10us": 273, "over_100us": 7, "peak_live_bytes": 100 * MIB,
                 "peak_rss_growth_bytes": 101 * MIB, "peak_committed_bytes": 0,
                 "mappings_at_peak": 61,
                 "held_after_free_all_bytes": 125 * MIB},
            ]}),
        ),
        ("malloc", malloc()),
        (
            "scaling",
            json!({"rounds": 5, "steps": 1000, "rows": [
                {"allocator": "common", "median_scaling": 1.91, "lowest_scaling": 1.62,
                 "one_thread_ns": 4.5, "two_threads_ns": 4.71},
                {"allocator": "mimalloc", "median_scaling": 1.88, "lowest_scaling": 1.81,
                 "one_thread_ns": 6.0, "two_threads_ns": 6.38},
            ]}),
        ),
        (
            "global",
            json!({"rounds": 5, "rows": [
                {"allocator": "common", "median_time_ns": 800_000_000u64,
                 "min_time_ns": 790_000_000u64, "max_time_ns": 810_000_000u64,
                 "peak_rss_bytes": 72 * MIB},
                {"allocator": "system", "median_time_ns": 1_000_000_000u64,
                 "min_time_ns": 990_000_000u64, "max_time_ns": 1_100_000_000u64,
                 "peak_rss_bytes": 57 * MIB},
            ]}),
        ),
        (
            "validate",
            json!({"rows": [{"time_ns": 27_000_000, "segments": 4049,
                "reserved_bytes": 1012 * MIB, "live_blocks": 524_288, "free_chunks": 526_313}]}),
        ),
        (
            "demo",
            json!({"levels": 24, "records": 543_996, "allocations": 270_347,
                "peak_live": 33 * MIB, "heaps": "heap  live\nlevel 22 MiB\n", "runs": [
                {"allocator": "system", "seconds": 0.0678, "ops_per_sec": 7.98e6,
                 "peak_committed": null, "avg_committed": 38 * MIB,
                 "peak_rss_growth": 48 * MIB, "fragmentation": 1.523, "os_calls": null,
                 "os_calls_per_frame": null, "page_faults": 19551, "held_after_idle": null},
                {"allocator": "bento", "seconds": 0.045, "ops_per_sec": 12.03e6,
                 "peak_committed": 37 * MIB, "avg_committed": 35 * MIB,
                 "peak_rss_growth": 35 * MIB, "fragmentation": 1.179, "os_calls": 385,
                 "os_calls_per_frame": {"frames": 2880, "inside_frames": 33},
                 "page_faults": 11602, "held_after_idle": 1_142_947},
            ]}),
        ),
        (
            "soak",
            json!({"hours": 100, "levels_per_hour": 3, "frames_per_level": 120,
                "peak_live": 70 * MIB, "rows": [
                {"allocator": "bento", "bounded": true, "first_hour_live": 60 * MIB,
                 "session_live": 70 * MIB, "first_hour_least": 63 * MIB,
                 "session_least": 77 * MIB, "flatness": 1.048, "peak_held": 90 * MIB,
                 "frame_os_calls_after_first_hour": 0},
                {"allocator": "common", "bounded": true, "first_hour_live": 60 * MIB,
                 "session_live": 70 * MIB, "first_hour_least": 65 * MIB,
                 "session_least": 77 * MIB, "flatness": 1.016, "peak_held": 90 * MIB,
                 "frame_os_calls_after_first_hour": 50},
                {"allocator": "rlsf", "bounded": true, "first_hour_live": 60 * MIB,
                 "session_live": 70 * MIB, "first_hour_least": 66 * MIB,
                 "session_least": 84 * MIB, "flatness": 1.09, "peak_held": 84 * MIB,
                 "frame_os_calls_after_first_hour": 0},
                {"allocator": "talc", "bounded": true, "first_hour_live": 60 * MIB,
                 "session_live": 70 * MIB, "first_hour_least": 70 * MIB,
                 "session_least": 133 * MIB, "flatness": 1.63, "peak_held": 130 * MIB,
                 "frame_os_calls_after_first_hour": 0},
                {"allocator": "system", "bounded": false, "first_hour_live": 60 * MIB,
                 "session_live": 70 * MIB, "first_hour_least": null,
                 "session_least": null, "flatness": null, "peak_held": 121 * MIB,
                 "frame_os_calls_after_first_hour": null},
                {"allocator": "jemalloc", "bounded": false, "first_hour_live": 60 * MIB,
                 "session_live": 70 * MIB, "first_hour_least": null,
                 "session_least": null, "flatness": null, "peak_held": 100 * MIB,
                 "frame_os_calls_after_first_hour": null},
            ]}),
        ),
        (
            "meta",
            json!({"date_utc": "2026-11-27 18:39", "cpu": "AMD EPYC", "logical_cpus": 2,
                "kernel": "6.18", "rustc": "rustc 1.95.0", "profile": "release",
                "commands": ["cargo xtask bench-global 5"]}),
        ),
    ];
    for (name, doc) in docs {
        d.insert(name, doc).unwrap();
    }
    d
}

#[test]
fn rows_are_found_by_their_names() {
    let d = data();
    assert_eq!(d.rows("session").len(), 2);
    assert!(d.rows("nothing").is_empty());
    let key = [("allocator", "common")];
    assert_eq!(
        d.stat("session", &key, "peak_committed_bytes"),
        Some((120 * MIB) as f64)
    );
    let glibc = [("allocator", "glibc")];
    assert_eq!(d.stat("session", &glibc, "peak_committed_bytes"), None);
    assert_eq!(
        d.stat("session", &[("allocator", "talc")], "peak_live_bytes"),
        None
    );
    assert_eq!(d.stat("session", &glibc, "no_such_field"), None);
    let sort = [("program", "sort"), ("allocator", "bento")];
    assert_eq!(d.stat("malloc", &sort, "median_time_ns"), Some(480e6));
}

#[test]
fn the_run_is_read_from_its_json_files() {
    let dir = std::env::temp_dir().join(format!("bento-report-load-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("validate.json"), r#"{"rows": [{"time_ns": 5}]}"#).unwrap();
    std::fs::write(dir.join("notes.txt"), "not a stat").unwrap();
    let d = Data::load(&dir.join("no-criterion"), &dir).unwrap();
    assert_eq!(d.stat("validate", &[], "time_ns"), Some(5.0));
    assert_eq!(d.docs.len(), 1);
    std::fs::write(dir.join("churn.json"), "| a | table |").unwrap();
    assert!(Data::load(&dir, &dir).unwrap_err().contains("churn.json"));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn ratios_rates_and_counts() {
    let d = data();
    assert_eq!(
        d.ratio("space/mixed/bento_space", "space/mixed/system_glibc"),
        Some(0.5)
    );
    assert_eq!(d.rate("common/threads/bento_common/2"), Some(200e6));
    assert_eq!(d.per_op("space-mixed-bento"), Some(300.0));
    assert_eq!(d.ratio("space/mixed/bento_space", "space/mixed/talc"), None);
}

#[test]
fn targets_are_judged_from_the_numbers() {
    let d = data();
    let find = |what: &str| TARGETS.iter().find(|t| t.what == what).unwrap();
    let value = |what: &str| (find(what).stat)(&d);
    assert_eq!(find("mixed ÷ glibc, time").met(&d), Some(true));
    assert_eq!(find("mixed ÷ mimalloc, time").met(&d), Some(false));
    assert_eq!(find("mixed ÷ talc, time").met(&d), None);
    assert_eq!(
        find("two threads ÷ one thread, throughput").met(&d),
        Some(true)
    );
    assert_eq!(
        value("game session: peak RSS growth ÷ peak live"),
        Some(1.14)
    );
    // The lowest round decides, not the median.
    let two = "two threads on their own blocks ÷ one, the lowest of the rounds";
    assert_eq!(value(two), Some(1.62));
    assert_eq!(find(two).met(&d), Some(false));
    assert_eq!(
        find("mixed, instructions per operation (a step is two)").met(&d),
        Some(false)
    );
    assert_eq!(
        value("p99.99 latency ÷ glibc's"),
        Some(137_300.0 / 118_100.0)
    );
    assert_eq!(value("operations over 100 µs, minus glibc's"), Some(87.0));
    let rss = value("peak RSS ÷ peak live, ÷ glibc's").unwrap();
    assert!((rss - 105.0 / 101.0).abs() < 1e-12, "{rss}");
    assert_eq!(
        value("MiB held a second after every block is freed, no `trim()`"),
        Some(0.5)
    );
    // The soak: flat lines, and the best of each kind of peer.
    assert_eq!(
        find("bento set-up: least memory for the session ÷ peak live, ÷ the first hour's").met(&d),
        Some(true)
    );
    assert_eq!(
        value("bento set-up: least memory ÷ the best of talc, rlsf and dlmalloc-rs"),
        Some(77.0 / 84.0)
    );
    assert_eq!(
        value("bento set-up: least memory ÷ the least peak RSS of glibc, mimalloc, jemalloc"),
        Some(0.77)
    );
    assert_eq!(
        value("bento set-up: OS calls inside gameplay frames after the first hour"),
        Some(0.0)
    );
    // The worst of the programs measured: sort's time, gzip's footprint.
    assert_eq!(
        value("bento-malloc ÷ glibc, time, the worst program"),
        Some(1.2)
    );
    assert_eq!(
        value("bento-malloc ÷ glibc, peak RSS, the worst program"),
        Some(1.5)
    );
}

#[test]
fn the_summary_lists_every_target_with_a_count() {
    let d = data();
    let table = summary_table(&d);
    let met = TARGETS.iter().filter(|t| t.met(&d) == Some(true)).count();
    assert!(
        table.starts_with(&format!("**{met} of {} targets met**", TARGETS.len())),
        "{table}"
    );
    let rows: Vec<&str> = table.lines().filter(|l| l.starts_with("| ")).collect();
    assert_eq!(
        rows.len(),
        TARGETS.len() + 1,
        "a header and a row per target"
    );
    for target in TARGETS {
        assert!(
            table.contains(&format!("| {} |", target.what)),
            "{}",
            target.what
        );
    }
    // The group is named on its first row only.
    assert!(table.contains("| **space** | mixed ÷ glibc, time | ≤ 0.6 | 0.50 | met |"));
    assert!(table.contains("|  | mixed ÷ mimalloc, time | ≤ 1 | 2.00 | **not met** |"));
    assert!(table.contains("|  | mixed ÷ talc, time | ≤ 1 | — | not measured |"));
    assert_eq!(table.matches("| **space** |").count(), 1);
}

#[test]
fn every_target_section_has_a_group_in_the_template() {
    let template = include_str!("../../report/template.md");
    assert!(template.contains("\n{{summary}}\n"));
    let headings: Vec<&str> = template.lines().filter(|l| l.starts_with("## ")).collect();
    for t in TARGETS {
        assert!(
            headings.iter().any(|h| h.contains(t.section)),
            "the template has no heading of the group `{}`",
            t.section
        );
    }
}

#[test]
fn program_tables_are_formatted_from_their_figures() {
    let d = data();
    let dir = std::env::temp_dir();
    let table = |name: &str| render(&format!("{{{{table {name}}}}}\n"), &d, &dir).unwrap();
    let session = table("session");
    assert!(
        session.contains("| common | 100 MiB | 120 MiB (1.200) | 114 MiB (1.140) |"),
        "{session}"
    );
    assert!(session.contains("| glibc | 100 MiB | — | 165 MiB (1.650) |"));
    let churn = table("churn");
    assert!(
        churn.contains(
            "| bento | 1000 | 0.48 | 71.0 | 110.3 | 137.3 | 185.0 | 2678 | 94 | 1.05 | 1.03 | 112 | 512 KiB |"
        ),
        "{churn}"
    );
    let global = table("global");
    assert!(
        global.contains("| system | 1.00 s | 990.0 ms / 1.10 s | 0.80 | 57.0 MiB |"),
        "{global}"
    );
    let malloc = table("malloc");
    assert!(malloc.contains("| program | glibc: time, peak RSS | bento ÷ glibc |"));
    assert!(
        malloc.contains(
            "| sort | 400.0 ms, 100 MiB | 1.20, 1.00 |\n| gzip | 400.0 ms, 100 MiB | 1.00, 1.50 |"
        ),
        "{malloc}"
    );
    assert!(malloc.starts_with("Medians of 5 rounds;"));
    assert!(table("validate").contains("| 27.0 ms | 4049 | 1012 MiB | 524288 | 526313 |"));
    let scaling = table("scaling");
    assert!(
        scaling.contains(
            "| common | 4.50 | 4.71 | 1.91 | 1.62 |\n| mimalloc | 6.00 | 6.38 | 1.88 | 1.81 |"
        ),
        "{scaling}"
    );
    let demo = table("demo");
    assert!(demo.starts_with("24 levels (543996 records, 270347 allocations, peak live 33.0 MiB)"));
    assert!(
        demo.contains("| system | 67.8 ms | 7.98 M | 48.0 MiB (RSS) | 38.0 MiB | 48.0 MiB | 1.523 | — | — | 19551 | — |"),
        "{demo}"
    );
    assert!(demo.contains("| bento | 45.0 ms | 12.03 M | 37.0 MiB |"));
    assert!(demo.contains("| 385 | 33 | 11602 | 1.09 MiB |"), "{demo}");
    assert!(demo.contains("```text\nheap  live\nlevel 22 MiB\n```"));
    let soak = table("soak");
    assert!(soak.starts_with("100 hours of 3 levels of 120 frames (peak live 70.0 MiB)"));
    assert!(
        soak.contains(
            "| bento | 63.0 MiB (1.050×) | 77.0 MiB (1.100×) | 1.048 | 90.0 MiB (1.286×) | 0 |"
        ),
        "{soak}"
    );
    assert!(
        soak.contains(
            "| system | cannot be bounded | cannot be bounded | — | 121 MiB (1.729×) (RSS) | — |"
        ),
        "{soak}"
    );
    let missing = render("{{table churn}}\n", &Data::default(), &dir).unwrap();
    assert_eq!(missing, "*(`churn` was not measured in this run)*\n");
    assert!(render("{{table nothing}}\n", &d, &dir).is_err());
}

#[test]
fn the_template_renders_and_draws_its_charts() {
    let dir = std::env::temp_dir().join(format!("bento-report-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let template = "# t\n{{meta}}\n{{summary}}\n{{criterion common/threads bento_common}}\n\
                    {{grid space/mixed:bento_space space/frame_16:bento_space}}\n\
                    {{chart space space/mixed:bento_space}}\n{{icount space-mixed-bento lifo}}\n\
                    {{icount-grid space mixed,lifo bento,glibc}}\nend\n";
    let out = render(template, &data(), &dir).unwrap();
    assert!(out.contains(
        "- Machine: AMD EPYC, 2 logical CPUs, Linux 6.18; rustc 1.95.0; release profile."
    ));
    assert!(out.contains("  - `cargo xtask bench-global 5`"));
    assert!(out.contains("targets met**"));
    assert!(
        out.contains("| mimalloc/2 | 4.00 µs | 50.0 | 0.25 |"),
        "{out}"
    );
    assert!(out.contains("| time (subject ÷ it) | `mixed` | `frame_16` |\n|---|---|---|\n"));
    assert!(
        out.contains("| bento_space | **400.0 ns** | **1.00 µs** |"),
        "{out}"
    );
    assert!(out.contains("| mimalloc | 200.0 ns (2.00) | — |"));
    assert!(out.contains("| system_glibc | 800.0 ns (0.50) | 1.25 µs (0.80) |"));
    assert!(
        out.contains("| mixed steps | `insns space-mixed-bento 1000` | 300.0 |"),
        "{out}"
    );
    assert!(out.contains("| — | `insns lifo` | not counted in this run |"));
    assert!(out.contains("| instructions / operation | mixed | lifo |\n|---|---|---|\n"));
    assert!(out.contains("| bento | 300.0 | — |\n| glibc | — | — |"));
    assert!(out.contains("![space: bento ÷ each peer](img/bench-space.svg)"));
    assert!(out.ends_with("end\n"));
    let svg = std::fs::read_to_string(dir.join("bench-space.svg")).unwrap();
    assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
    assert!(svg.contains("space/mixed · system_glibc") && svg.contains("2.00"));
    let empty = render("{{meta}}\n{{grid bump/x:bento}}\n", &Data::default(), &dir).unwrap();
    assert_eq!(
        empty,
        "*(no record of the run)*\n*(`bump/x` was not measured in this run)*\n"
    );
    assert!(render("{{nonsense}}\n", &data(), &dir).is_err());
    assert!(render("{{chart x space/mixed}}\n", &data(), &dir).is_err());
    assert!(render("{{grid space/mixed}}\n", &data(), &dir).is_err());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn icount_rows_are_checked() {
    let row = |ops: serde_json::Value| {
        json!({"rows": [{"mode": "a", "what": "b", "collect": "c", "arg": 100,
            "operations": ops, "instructions": 5000}]})
    };
    assert!(parse_icounts(&row(json!(0))).is_err(), "no operations");
    assert!(parse_icounts(&row(json!("ten"))).is_err());
    assert!(
        parse_icounts(&json!({"rows": [{"mode": "a"}]})).is_err(),
        "fields short"
    );
    assert!(parse_icounts(&json!([])).is_err(), "no rows");
    let one = parse_icounts(&row(json!(1000))).unwrap();
    assert_eq!((one["a"].arg, one["a"].per_op()), (100, 5.0));
    assert_eq!(parse_icounts(&json!({"rows": []})).unwrap().len(), 0);
}

#[test]
fn figures_keep_their_unit() {
    assert_eq!(duration(469.04), "469.0 ns");
    assert_eq!(duration(3350.0), "3.35 µs");
    assert_eq!(duration(199.8e6), "199.8 ms");
    assert_eq!(duration(2.5e9), "2.50 s");
    assert_eq!(micros(480.0), "0.48");
    assert_eq!(micros(71_040.0), "71.0");
    assert_eq!(micros(4_360_000.0), "4360");
    assert_eq!(bytes(1536.0), "1.50 KiB");
    assert_eq!(bytes((125 * MIB) as f64), "125 MiB");
}
