//! The template's directives, each turned into its Markdown: criterion's tables, the
//! callgrind counts, the charts, and the measuring programs' tables.

use std::fmt::Write as _;
use std::path::Path;

use plotters::prelude::*;

use super::data::{Bench, Data};
use super::fmt::{NONE, duration, or_none, ratio};
use super::programs;
use super::targets::summary_table;

/// Renders `template` with `data`; charts go to `img` (linked as `img/<file>`).
///
/// # Errors
///
/// An unknown or malformed directive, or a chart that cannot be written.
pub fn render(template: &str, data: &Data, img: &Path) -> Result<String, String> {
    let mut out = String::new();
    for (i, line) in template.lines().enumerate() {
        let Some(inner) = line
            .trim()
            .strip_prefix("{{")
            .and_then(|l| l.strip_suffix("}}"))
        else {
            out.push_str(line);
            out.push('\n');
            continue;
        };
        let words: Vec<&str> = inner.split_whitespace().collect();
        let block = directive(&words, data, img)
            .map_err(|e| format!("template line {}: `{line}`: {e}", i + 1))?;
        out.push_str(block.trim_end());
        out.push('\n');
    }
    Ok(out)
}

/// `GROUP:SUBJECT` pairs.
fn pairs<'a>(words: &[&'a str]) -> Result<Vec<(&'a str, &'a str)>, String> {
    words
        .iter()
        .map(|b| {
            b.split_once(':')
                .ok_or(format!("`{b}` is not GROUP:SUBJECT"))
        })
        .collect()
}

fn directive(words: &[&str], data: &Data, img: &Path) -> Result<String, String> {
    match words {
        ["meta"] => Ok(programs::meta(data)),
        ["summary"] => Ok(summary_table(data)),
        ["criterion", group, subject] => Ok(criterion_table(data, group, subject)),
        ["grid", groups @ ..] if !groups.is_empty() => Ok(grid(data, &pairs(groups)?)),
        ["chart", name, bars @ ..] if !bars.is_empty() => chart(data, name, &pairs(bars)?, img),
        ["icount", modes @ ..] if !modes.is_empty() => Ok(icount_table(data, modes)),
        ["icount-grid", prefix, cols, rows] => Ok(icount_grid(data, prefix, cols, rows)),
        ["table", name] => programs::table(data, name),
        _ => Err("unknown directive".into()),
    }
}

/// The group's benchmarks, the subject first within each parameter.
fn group_rows<'a>(data: &'a Data, group: &str, subject: &str) -> Vec<&'a Bench> {
    let mut rows: Vec<&Bench> = data.benches.values().filter(|b| b.group == group).collect();
    let key = |b: &Bench| {
        let function = b.function().to_owned();
        (b.param.clone(), function != subject, function)
    };
    rows.sort_by_key(|b| key(b));
    rows
}

/// The subject's benchmark of the same parameter as `b`.
fn subject_of<'a>(data: &'a Data, b: &Bench, subject: &str) -> Option<&'a Bench> {
    let id = match &b.param {
        Some(p) => format!("{}/{subject}/{p}", b.group),
        None => format!("{}/{subject}", b.group),
    };
    data.benches.get(&id)
}

fn not_measured(what: &str) -> String {
    format!("*(`{what}` was not measured in this run)*")
}

/// One group: each benchmark's time, its rate when the group has a throughput, and
/// `subject ÷ it`.
fn criterion_table(data: &Data, group: &str, subject: &str) -> String {
    let rows = group_rows(data, group, subject);
    if rows.is_empty() {
        return not_measured(group);
    }
    let rated = rows.iter().any(|b| b.elements.is_some());
    let mut t = String::new();
    if rated {
        let _ = writeln!(
            t,
            "| `{group}` | time | M elements/s | `{subject}` ÷ it (time) |\n|---|---|---|---|"
        );
    } else {
        let _ = writeln!(t, "| `{group}` | time | `{subject}` ÷ it |\n|---|---|---|");
    }
    for b in rows {
        let r = or_none(subject_of(data, b, subject), |s| ratio(s.ns / b.ns));
        let name = if b.function() == subject {
            format!("**{}**", b.name)
        } else {
            b.name.clone()
        };
        if rated {
            let rate = or_none(b.elements, |e| format!("{:.1}", e as f64 * 1e3 / b.ns));
            let _ = writeln!(t, "| {name} | {} | {rate} | {r} |", duration(b.ns));
        } else {
            let _ = writeln!(t, "| {name} | {} | {r} |", duration(b.ns));
        }
    }
    t
}

/// Groups side by side: a column per group (and parameter), a row per function; each
/// cell the time and, in brackets, the column's `SUBJECT ÷ it`; the subjects' cells
/// in bold.
fn grid(data: &Data, groups: &[(&str, &str)]) -> String {
    // Columns: (group, subject, parameter); rows: functions, the subjects first.
    let mut cols: Vec<(&str, &str, Option<String>)> = Vec::new();
    let mut funcs: Vec<(bool, String)> = Vec::new();
    for (group, subject) in groups {
        for b in group_rows(data, group, subject) {
            let col = (*group, *subject, b.param.clone());
            if !cols.contains(&col) {
                cols.push(col);
            }
            let func = (b.function() != *subject, b.function().to_owned());
            if !funcs.iter().any(|f| f.1 == func.1) {
                funcs.push(func);
            }
        }
    }
    if cols.is_empty() {
        let names: Vec<&str> = groups.iter().map(|g| g.0).collect();
        return not_measured(&names.join("`, `"));
    }
    funcs.sort();
    let mut t = String::from("| time (subject ÷ it) |");
    for (group, _, param) in &cols {
        let workload = group.split_once('/').map_or(*group, |(_, w)| w);
        match param {
            Some(p) => {
                let _ = write!(t, " `{workload}/{p}` |");
            }
            None => {
                let _ = write!(t, " `{workload}` |");
            }
        }
    }
    t.push_str("\n|---|");
    t.push_str(&"---|".repeat(cols.len()));
    t.push('\n');
    for (_, func) in &funcs {
        let _ = write!(t, "| {func} |");
        for (group, subject, param) in &cols {
            let id = match param {
                Some(p) => format!("{group}/{func}/{p}"),
                None => format!("{group}/{func}"),
            };
            let cell = match data.benches.get(&id) {
                None => NONE.to_owned(),
                Some(b) if b.function() == *subject => format!("**{}**", duration(b.ns)),
                Some(b) => match subject_of(data, b, subject) {
                    Some(s) => format!("{} ({})", duration(b.ns), ratio(s.ns / b.ns)),
                    None => duration(b.ns),
                },
            };
            let _ = write!(t, " {cell} |");
        }
        t.push('\n');
    }
    t
}

/// Each mode's count: the loop, the command, instructions per operation.
fn icount_table(data: &Data, modes: &[&str]) -> String {
    let mut t = String::from("| loop | command | instructions / operation |\n|---|---|---|\n");
    for mode in modes {
        match data.icounts.get(*mode) {
            Some(c) => {
                let _ = writeln!(
                    t,
                    "| {} | `insns {mode} {}` | {:.1} |",
                    c.what,
                    c.arg,
                    c.per_op()
                );
            }
            None => {
                let _ = writeln!(t, "| — | `insns {mode}` | not counted in this run |");
            }
        }
    }
    t
}

/// Instructions per operation of the modes `PREFIX-COL-ROW`, `cols` and `rows` being
/// comma-separated; `—` where a mode was not counted.
fn icount_grid(data: &Data, prefix: &str, cols: &str, rows: &str) -> String {
    let cols: Vec<&str> = cols.split(',').collect();
    let mut t = String::from("| instructions / operation |");
    for col in &cols {
        let _ = write!(t, " {col} |");
    }
    t.push_str("\n|---|");
    t.push_str(&"---|".repeat(cols.len()));
    t.push('\n');
    for row in rows.split(',') {
        let _ = write!(t, "| {row} |");
        for col in &cols {
            let cell = or_none(data.per_op(&format!("{prefix}-{col}-{row}")), |v| {
                format!("{v:.1}")
            });
            let _ = write!(t, " {cell} |");
        }
        t.push('\n');
    }
    t
}

/// Draws `docs/img/bench-<name>.svg`: for each `(group, subject)`, one bar per peer
/// of `subject ÷ peer` in time, with a line at 1.
fn chart(data: &Data, name: &str, bars: &[(&str, &str)], img: &Path) -> Result<String, String> {
    let mut rows: Vec<(String, f64)> = Vec::new();
    for (group, subject) in bars {
        for b in group_rows(data, group, subject) {
            if b.function() == *subject {
                continue;
            }
            if let Some(s) = subject_of(data, b, subject) {
                rows.push((format!("{group} · {}", b.name), s.ns / b.ns));
            }
        }
    }
    if rows.is_empty() {
        return Ok(format!("*(no stats for the chart `{name}` in this run)*"));
    }
    let file = format!("bench-{name}.svg");
    let path = img.join(&file);
    let (width, row_h, left, top) = (900u32, 22u32, 330i32, 50i32);
    let height = top as u32 + row_h * rows.len() as u32 + 40;
    let max = rows.iter().map(|r| r.1).fold(1.0f64, f64::max).min(8.0) * 1.08;
    {
        let root = SVGBackend::new(&path, (width, height)).into_drawing_area();
        let e = |e: DrawingAreaErrorKind<_>| format!("{}: {e}", path.display());
        root.fill(&WHITE).map_err(e)?;
        let scale = |v: f64| left + ((width as i32 - left - 60) as f64 * v.min(max) / max) as i32;
        let title = format!("bento ÷ peer, time per iteration ({name}); below 1: bento is faster");
        root.draw(&Text::new(title, (10, 14), ("sans-serif", 16).into_font()))
            .map_err(e)?;
        let font = ("sans-serif", 12).into_font();
        for (i, (label, r)) in rows.iter().enumerate() {
            let y = top + (i as u32 * row_h) as i32;
            let color = if *r <= 1.0 {
                RGBColor(46, 139, 87)
            } else {
                RGBColor(205, 92, 92)
            };
            root.draw(&Rectangle::new(
                [(left, y + 3), (scale(*r), y + row_h as i32 - 3)],
                color.filled(),
            ))
            .map_err(e)?;
            root.draw(&Text::new(label.clone(), (10, y + 5), font.clone()))
                .map_err(e)?;
            let shown = if *r > max {
                format!("{r:.2} ▸")
            } else {
                format!("{r:.2}")
            };
            root.draw(&Text::new(shown, (scale(*r) + 4, y + 5), font.clone()))
                .map_err(e)?;
        }
        let bottom = top + (row_h * rows.len() as u32) as i32;
        root.draw(&PathElement::new(
            vec![(scale(1.0), top - 4), (scale(1.0), bottom + 4)],
            BLACK.stroke_width(1),
        ))
        .map_err(e)?;
        root.draw(&Text::new("1.0", (scale(1.0) - 8, bottom + 10), font))
            .map_err(e)?;
        root.present().map_err(e)?;
    }
    Ok(format!("![{name}: bento ÷ each peer](img/{file})"))
}
