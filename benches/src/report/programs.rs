//! The measuring programs' tables, formatted from their JSON (`{{table NAME}}`), and
//! the run's record (`{{meta}}`).

use std::fmt::Write as _;

use serde_json::Value;

use super::data::Data;
use super::fmt::{NONE, bytes, duration, micros, or_none, ratio};

/// The table of program `name` (`session`, `churn`, `scaling`, `global`, `malloc`,
/// `validate`, `demo` or `soak`), or a note that the run did not measure it.
///
/// # Errors
///
/// A name that is none of those.
pub(crate) fn table(data: &Data, name: &str) -> Result<String, String> {
    let format = match name {
        "session" => session,
        "churn" => churn,
        "scaling" => scaling,
        "global" => global,
        "malloc" => malloc,
        "validate" => validate,
        "demo" => demo,
        "soak" => soak,
        _ => return Err(format!("no table for `{name}`")),
    };
    Ok(match data.docs.get(name) {
        Some(doc) => format(doc),
        None => format!("*(`{name}` was not measured in this run)*"),
    })
}

/// The number `field` of `row`.
fn num(row: &Value, field: &str) -> Option<f64> {
    row[field].as_f64()
}

/// The text `field` of `row`, or `?`.
fn text<'a>(row: &'a Value, field: &str) -> &'a str {
    row[field].as_str().unwrap_or("?")
}

/// The rows of `doc`.
fn rows(doc: &Value) -> &[Value] {
    doc["rows"].as_array().map_or(&[], Vec::as_slice)
}

/// `field` in bytes, and in brackets its ratio to the row's `peak_live_bytes`.
fn per_live(row: &Value, field: &str) -> String {
    match (num(row, field), num(row, "peak_live_bytes")) {
        (Some(v), Some(live)) => format!("{} ({:.3})", bytes(v), v / live),
        (Some(v), None) => bytes(v),
        _ => NONE.to_owned(),
    }
}

fn session(doc: &Value) -> String {
    let mut t = String::from(
        "| allocator | peak live | peak committed (÷ live) | peak RSS growth (÷ live) |\n\
         |---|---|---|---|\n",
    );
    for row in rows(doc) {
        let _ = writeln!(
            t,
            "| {} | {} | {} | {} |",
            text(row, "allocator"),
            or_none(num(row, "peak_live_bytes"), bytes),
            per_live(row, "peak_committed_bytes"),
            per_live(row, "peak_rss_growth_bytes"),
        );
    }
    t
}

fn scaling(doc: &Value) -> String {
    let mut t = String::from(
        "| allocator | 1 thread ns/pair | 2 threads ns/pair | scaling, median | scaling, lowest |\n\
         |---|---|---|---|---|\n",
    );
    for row in rows(doc) {
        let ns = |f: &str| or_none(num(row, f), |v| format!("{v:.2}"));
        let _ = writeln!(
            t,
            "| {} | {} | {} | {} | {} |",
            text(row, "allocator"),
            ns("one_thread_ns"),
            ns("two_threads_ns"),
            or_none(num(row, "median_scaling"), ratio),
            or_none(num(row, "lowest_scaling"), ratio),
        );
    }
    t
}

fn churn(doc: &Value) -> String {
    let mut t = String::from(
        "| allocator | operations | p50 µs | p99 µs | p99.9 µs | p99.99 µs | max µs | \
         over 10 µs | over 100 µs | peak RSS ÷ peak live | peak committed ÷ peak live | \
         mappings at peak | held 1 s after free-all |\n\
         |---|---|---|---|---|---|---|---|---|---|---|---|---|\n",
    );
    for row in rows(doc) {
        let us = |f: &str| or_none(num(row, f), micros);
        let count = |f: &str| or_none(num(row, f), |v| format!("{v:.0}"));
        let rss = match (
            num(row, "peak_rss_growth_bytes"),
            num(row, "peak_live_bytes"),
        ) {
            (Some(rss), Some(live)) => ratio(rss / live),
            _ => NONE.to_owned(),
        };
        // Only bento's rows can say what they committed (0 for the others).
        let committed = match (
            num(row, "peak_committed_bytes"),
            num(row, "peak_live_bytes"),
        ) {
            (Some(c), Some(live)) if c > 0.0 => ratio(c / live),
            _ => NONE.to_owned(),
        };
        let _ = writeln!(
            t,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {rss} | {committed} | {} | {} |",
            text(row, "allocator"),
            count("operations"),
            us("p50_ns"),
            us("p99_ns"),
            us("p999_ns"),
            us("p9999_ns"),
            us("max_ns"),
            count("over_10us"),
            count("over_100us"),
            count("mappings_at_peak"),
            or_none(num(row, "held_after_free_all_bytes"), bytes),
        );
    }
    t
}

/// The first row's median time ÷ each row's: the subject, bento-common, first.
fn global(doc: &Value) -> String {
    let rows = rows(doc);
    let first = rows.first().and_then(|r| num(r, "median_time_ns"));
    let mut t = String::from(
        "| allocator | median time | fastest / slowest | bento-common ÷ it | peak RSS |\n\
         |---|---|---|---|---|\n",
    );
    for row in rows {
        let median = num(row, "median_time_ns");
        let spread = match (num(row, "min_time_ns"), num(row, "max_time_ns")) {
            (Some(a), Some(b)) => format!("{} / {}", duration(a), duration(b)),
            _ => NONE.to_owned(),
        };
        let _ = writeln!(
            t,
            "| {} | {} | {spread} | {} | {} |",
            text(row, "allocator"),
            or_none(median, duration),
            or_none(first.zip(median), |(f, m)| ratio(f / m)),
            or_none(num(row, "peak_rss_bytes"), bytes),
        );
    }
    t
}

/// A row per program: glibc's median time and peak RSS, then each other allocator's
/// as ratios to glibc's.
fn malloc(doc: &Value) -> String {
    let rows = rows(doc);
    let mut programs: Vec<&str> = Vec::new();
    let mut allocators: Vec<&str> = Vec::new();
    for row in rows {
        let (p, a) = (text(row, "program"), text(row, "allocator"));
        if !programs.contains(&p) {
            programs.push(p);
        }
        if a != "glibc" && !allocators.contains(&a) {
            allocators.push(a);
        }
    }
    let find = |p: &str, a: &str| {
        rows.iter()
            .find(|r| text(r, "program") == p && text(r, "allocator") == a)
    };
    let rounds = or_none(num(doc, "rounds"), |r| format!("{r:.0}"));
    let mut t = format!(
        "Medians of {rounds} rounds; each allocator's time and peak RSS ÷ glibc's.\n\n\
         | program | glibc: time, peak RSS |"
    );
    for a in &allocators {
        let _ = write!(t, " {a} ÷ glibc |");
    }
    t.push_str("\n|---|---|");
    t.push_str(&"---|".repeat(allocators.len()));
    t.push('\n');
    for p in programs {
        let glibc = find(p, "glibc");
        let of = |r: Option<&Value>, f: &str| r.and_then(|r| num(r, f));
        let _ = write!(
            t,
            "| {p} | {}, {} |",
            or_none(of(glibc, "median_time_ns"), duration),
            or_none(of(glibc, "peak_rss_bytes"), bytes),
        );
        for a in &allocators {
            let row = find(p, a);
            let r = |f: &str| or_none(of(row, f).zip(of(glibc, f)), |(v, g)| ratio(v / g));
            let _ = write!(t, " {}, {} |", r("median_time_ns"), r("peak_rss_bytes"));
        }
        t.push('\n');
    }
    t
}

fn validate(doc: &Value) -> String {
    let mut t = String::from(
        "| `validate()` | segments | reserved | live blocks | free chunks |\n|---|---|---|---|---|\n",
    );
    for row in rows(doc) {
        let count = |f: &str| or_none(num(row, f), |v| format!("{v:.0}"));
        let _ = writeln!(
            t,
            "| {} | {} | {} | {} | {} |",
            or_none(num(row, "time_ns"), duration),
            count("segments"),
            or_none(num(row, "reserved_bytes"), bytes),
            count("live_blocks"),
            count("free_chunks"),
        );
    }
    t
}

/// `bento demo --json`: the session, a row per allocator, and the bento set-up's
/// heaps as text.
fn demo(doc: &Value) -> String {
    let count = |v: Option<f64>| or_none(v, |v| format!("{v:.0}"));
    let mut t = format!(
        "{} levels ({} records, {} allocations, peak live {}).\n\n\
         | allocator | time | ops/s | peak committed | avg committed | peak RSS growth | \
         committed ÷ live | OS calls | OS calls in play | page faults | held after idle |\n\
         |---|---|---|---|---|---|---|---|---|---|---|\n",
        count(num(doc, "levels")),
        count(num(doc, "records")),
        count(num(doc, "allocations")),
        or_none(num(doc, "peak_live"), bytes),
    );
    for run in doc["runs"].as_array().map_or(&[][..], Vec::as_slice) {
        let b = |f: &str| or_none(num(run, f), bytes);
        let committed = match (num(run, "peak_committed"), num(run, "peak_rss_growth")) {
            (Some(c), _) => bytes(c),
            (None, Some(rss)) => format!("{} (RSS)", bytes(rss)),
            _ => NONE.to_owned(),
        };
        let frames = &run["os_calls_per_frame"];
        let in_play = match num(frames, "frames") {
            Some(f) if f > 0.0 => count(num(frames, "inside_frames")),
            _ => NONE.to_owned(),
        };
        let _ = writeln!(
            t,
            "| {} | {} | {} | {committed} | {} | {} | {} | {} | {in_play} | {} | {} |",
            text(run, "allocator"),
            or_none(num(run, "seconds"), |s| duration(s * 1e9)),
            or_none(num(run, "ops_per_sec"), |v| format!("{:.2} M", v / 1e6)),
            b("avg_committed"),
            b("peak_rss_growth"),
            or_none(num(run, "fragmentation"), |f| format!("{f:.3}")),
            count(num(run, "os_calls")),
            count(num(run, "page_faults")),
            b("held_after_idle"),
        );
    }
    if let Some(heaps) = doc["heaps"].as_str().filter(|h| !h.trim().is_empty()) {
        let _ = write!(
            t,
            "\nThe bento set-up's subsystem heaps at the session's busiest moment:\n\n\
             ```text\n{}\n```\n",
            heaps.trim_end()
        );
    }
    t
}

/// `bento soak --json`: the session, then a row per allocator: its least memory for
/// the first hour and for the session (× the peak live), how flat that is, the most
/// it held with memory to spare, and its OS calls inside gameplay frames after the
/// first hour.
fn soak(doc: &Value) -> String {
    let count = |v: Option<f64>| or_none(v, |v| format!("{v:.0}"));
    let mut t = format!(
        "{} hours of {} levels of {} frames (peak live {}).\n\n\
         | allocator | least memory, first hour | least memory, session | flat | \
         most held with memory to spare | OS calls in frames after hour 1 |\n\
         |---|---|---|---|---|---|\n",
        count(num(doc, "hours")),
        count(num(doc, "levels_per_hour")),
        count(num(doc, "frames_per_level")),
        or_none(num(doc, "peak_live"), bytes),
    );
    for row in doc["rows"].as_array().map_or(&[][..], Vec::as_slice) {
        let times = |n: Option<f64>, live: Option<f64>| match (n, live) {
            (Some(n), Some(l)) if l > 0.0 => format!("{} ({:.3}×)", bytes(n), n / l),
            (Some(n), _) => bytes(n),
            _ if row["bounded"].as_bool() == Some(false) => "cannot be bounded".to_owned(),
            _ => NONE.to_owned(),
        };
        let held = match row["bounded"].as_bool() {
            Some(false) => format!(
                "{} (RSS)",
                times(num(row, "peak_held"), num(row, "session_live"))
            ),
            _ => times(num(row, "peak_held"), num(row, "session_live")),
        };
        let _ = writeln!(
            t,
            "| {} | {} | {} | {} | {held} | {} |",
            text(row, "allocator"),
            times(num(row, "first_hour_least"), num(row, "first_hour_live")),
            times(num(row, "session_least"), num(row, "session_live")),
            or_none(num(row, "flatness"), |f| format!("{f:.3}")),
            count(num(row, "frame_os_calls_after_first_hour")),
        );
    }
    t
}

/// The machine, the date and the commands of the run, from `meta.json`.
pub(crate) fn meta(data: &Data) -> String {
    let Some(m) = data.docs.get("meta") else {
        return "*(no record of the run)*".to_owned();
    };
    let s = |f: &str| m[f].as_str().unwrap_or("?");
    let mut t = format!(
        "- Date: {} (UTC).\n- Machine: {}, {} logical CPUs, Linux {}; {}; {} profile.\n\
         - Commands (in this order; `cargo xtask bench --icount` runs them all):\n",
        s("date_utc"),
        s("cpu"),
        m["logical_cpus"].as_u64().unwrap_or(0),
        s("kernel"),
        s("rustc"),
        s("profile"),
    );
    for c in m["commands"].as_array().map_or(&[][..], Vec::as_slice) {
        let _ = writeln!(t, "  - `{}`", c.as_str().unwrap_or("?"));
    }
    t
}
