//! The SVG charts: memory over time, one line per allocator, the map of a memory
//! space, one row per segment, and a leak query's live bytes, one bar per tag.

use std::path::Path;

use plotters::element::DashedPathElement;
use plotters::prelude::*;

use crate::map::{Category, SegmentRow};
use crate::run::{Run, Sample, bytes};

const MIB: f64 = (1 << 20) as f64;

/// Line colours, one per allocator in order.
const COLOURS: [RGBColor; 6] = [
    RGBColor(0x44, 0x77, 0xaa),
    RGBColor(0xee, 0x66, 0x77),
    RGBColor(0x22, 0x88, 0x33),
    RGBColor(0xcc, 0xbb, 0x44),
    RGBColor(0xaa, 0x33, 0x77),
    RGBColor(0x66, 0xcc, 0xee),
];

fn draw_err<E: std::fmt::Debug>(e: E) -> String {
    format!("cannot draw the chart: {e:?}")
}

/// The run whose kept bytes the memory chart draws.
const KEPT_RUN: &str = "bento";

/// Dashes of the kept line, in pixels: drawn, then skipped.
const DASH: (i32, i32) = (6, 4);

/// Whether a phase is marked on the memory chart: every phase but the start of a
/// level's loading or unloading, which lie close to the phase after it loaded.
fn marked(name: &str) -> bool {
    !name.ends_with("loading")
}

/// Committed bytes over the trace, one line per run, the live bytes as a wide grey
/// line, each phase (a level loaded) as a vertical mark, and the bytes of freed pages
/// the bento set-up keeps committed for reuse as a dashed line in its colour.
pub(crate) fn memory_chart(runs: &[Run], title: &str, out: &Path) -> Result<(), String> {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (1100, 540)).into_drawing_area();
        root.fill(&WHITE).map_err(draw_err)?;
        // The chart on the left, its legend on the right, clear of the lines.
        let (area, legend) = root.split_horizontally(880);
        // Each entry's label and line, dashed or not.
        let mut entries: Vec<(String, ShapeStyle, bool)> = Vec::new();
        let x_max = runs
            .iter()
            .flat_map(|r| r.samples.last())
            .map(|s| s.seq)
            .max()
            .unwrap_or(1)
            .max(1) as f64;
        let y_max = runs
            .iter()
            .flat_map(|r| &r.samples)
            .map(|s| s.committed.max(s.live))
            .max()
            .unwrap_or(1) as f64
            / MIB
            * 1.1;
        let mut chart = ChartBuilder::on(&area)
            .caption(title, ("sans-serif", 22))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(64)
            .build_cartesian_2d(0f64..x_max, 0f64..y_max.max(1.0))
            .map_err(draw_err)?;
        chart
            .configure_mesh()
            .x_desc("records replayed")
            .y_desc("MiB")
            .x_label_formatter(&|x| crate::run::count(*x))
            .draw()
            .map_err(draw_err)?;
        // Level boundaries, from the first run's phases.
        if let Some(first) = runs.first() {
            let mark = ShapeStyle::from(&BLACK.mix(0.25)).stroke_width(1);
            let phases: Vec<_> = first.phases.iter().filter(|(_, n)| marked(n)).collect();
            // Every phase gets a line; a label at most every 60 pixels or so.
            let every = phases.len().div_ceil(12).max(1);
            for (k, (seq, name)) in phases.into_iter().enumerate() {
                let x = *seq as f64;
                chart
                    .draw_series(std::iter::once(PathElement::new(
                        vec![(x, 0.0), (x, y_max)],
                        mark,
                    )))
                    .map_err(draw_err)?;
                if k % every != 0 {
                    continue;
                }
                let label = name.trim_end_matches(" loaded");
                chart
                    .draw_series(std::iter::once(Text::new(
                        label.to_owned(),
                        (x, y_max * 0.98),
                        ("sans-serif", 11).into_font().color(&BLACK.mix(0.6)),
                    )))
                    .map_err(draw_err)?;
            }
            let live = decimate(&first.samples, |s| s.live, x_max);
            let style = ShapeStyle::from(&BLACK.mix(0.45)).stroke_width(3);
            chart
                .draw_series(LineSeries::new(live, style))
                .map_err(draw_err)?;
            entries.push(("live (asked)".to_owned(), style, false));
        }
        for (i, run) in runs.iter().enumerate() {
            let colour = COLOURS[i % COLOURS.len()];
            let what = if run.peak_committed.is_some() {
                "committed"
            } else {
                "RSS growth"
            };
            let points = decimate(&run.samples, |s| s.committed, x_max);
            chart
                .draw_series(LineSeries::new(points, colour.stroke_width(2)))
                .map_err(draw_err)?;
            entries.push((
                format!("{} ({what})", run.allocator),
                colour.stroke_width(2),
                false,
            ));
            if run.allocator == KEPT_RUN {
                let kept = decimate(&run.samples, |s| s.kept, x_max);
                let style = colour.stroke_width(2);
                chart
                    .draw_series(DashedLineSeries::new(kept, DASH.0, DASH.1, style))
                    .map_err(draw_err)?;
                entries.push((format!("{} kept for reuse", run.allocator), style, true));
            }
        }
        draw_legend(&legend, entries, 60, 22)?;
        root.present().map_err(draw_err)?;
    }
    write(out, &svg)
}

/// A legend's entries (a label, the line's style, whether it is dashed), one under
/// the other from `top`, `step` pixels apart.
fn draw_legend(
    legend: &DrawingArea<SVGBackend<'_>, plotters::coord::Shift>,
    entries: Vec<(String, ShapeStyle, bool)>,
    top: i32,
    step: i32,
) -> Result<(), String> {
    for (i, (label, style, dashed)) in entries.into_iter().enumerate() {
        let y = top + step * i as i32;
        let line = vec![(0, y + 6), (24, y + 6)];
        if dashed {
            legend
                .draw(&DashedPathElement::new(line, DASH.0, DASH.1, style))
                .map_err(draw_err)?;
        } else {
            legend
                .draw(&PathElement::new(line, style))
                .map_err(draw_err)?;
        }
        legend
            .draw(&Text::new(label, (30, y), ("sans-serif", 12).into_font()))
            .map_err(draw_err)?;
    }
    Ok(())
}

/// Buckets across the x axis: a line keeps each bucket's lowest and highest point.
const BUCKETS: f64 = 500.0;

/// The points of a series in MiB, at most two a bucket (its lowest and highest, in
/// order), so that a chart of thousands of samples stays small and keeps every peak
/// and trough.
fn decimate(samples: &[Sample], y: impl Fn(&Sample) -> u64, x_max: f64) -> Vec<(f64, f64)> {
    let mut points: Vec<(f64, f64)> = Vec::new();
    let flush = |(lo, hi): (Sample, Sample), points: &mut Vec<(f64, f64)>| {
        let (first, second) = if lo.seq <= hi.seq { (lo, hi) } else { (hi, lo) };
        points.push((first.seq as f64, y(&first) as f64 / MIB));
        if second.seq != first.seq {
            points.push((second.seq as f64, y(&second) as f64 / MIB));
        }
    };
    let mut bucket: Option<(u64, Sample, Sample)> = None;
    for &s in samples {
        let k = (s.seq as f64 / x_max * BUCKETS) as u64;
        match &mut bucket {
            Some((b, lo, hi)) if *b == k => {
                if y(&s) < y(lo) {
                    *lo = s;
                }
                if y(&s) > y(hi) {
                    *hi = s;
                }
            }
            _ => {
                if let Some((_, lo, hi)) = bucket.take() {
                    flush((lo, hi), &mut points);
                }
                bucket = Some((k, s, s));
            }
        }
    }
    if let Some((_, lo, hi)) = bucket {
        flush((lo, hi), &mut points);
    }
    points
}

fn write(out: &Path, svg: &str) -> Result<(), String> {
    crate::output::write_bytes(out, svg.as_bytes())
}

/// A white canvas of `size` pixels drawing into `svg`, with `title` at its top left.
fn titled<'a>(
    svg: &'a mut String,
    size: (u32, u32),
    title: &str,
) -> Result<DrawingArea<SVGBackend<'a>, plotters::coord::Shift>, String> {
    let root = SVGBackend::with_string(svg, size).into_drawing_area();
    root.fill(&WHITE).map_err(draw_err)?;
    root.draw(&Text::new(
        title.to_owned(),
        (10, 10),
        ("sans-serif", 18).into_font(),
    ))
    .map_err(draw_err)?;
    Ok(root)
}

/// Colour of each byte category of the map, and its legend.
fn category_colour(c: Category) -> RGBColor {
    match c {
        Category::Live => RGBColor(0x44, 0x77, 0xaa),
        Category::FreeCommitted => RGBColor(0xee, 0xaa, 0x33),
        Category::Decommitted => RGBColor(0xdd, 0xdd, 0xdd),
        Category::Overhead => RGBColor(0x55, 0x55, 0x55),
    }
}

/// Pixels across a segment's row.
const ROW_WIDTH: u32 = 900;
const ROW_HEIGHT: u32 = 14;
const LABEL_WIDTH: u32 = 170;
/// The most rows drawn; the rest are counted in a last line.
pub(crate) const MAX_ROWS: usize = 400;

/// The map: one row per segment, each drawn to its own scale (its size is written
/// beside it), coloured by what each pixel's bytes mostly are.
pub(crate) fn map_chart(rows: &[SegmentRow], title: &str, out: &Path) -> Result<(), String> {
    let shown = rows.len().min(MAX_ROWS);
    let extra = u32::from(rows.len() > shown);
    let height = 70 + (shown as u32 + extra) * (ROW_HEIGHT + 4) + 20;
    let width = LABEL_WIDTH + ROW_WIDTH + 20;
    let mut svg = String::new();
    {
        let root = titled(&mut svg, (width, height), title)?;
        let font = ("sans-serif", 12).into_font();
        // The legend.
        let mut x = 10;
        for c in [
            Category::Live,
            Category::FreeCommitted,
            Category::Decommitted,
            Category::Overhead,
        ] {
            root.draw(&Rectangle::new(
                [(x, 40), (x + 12, 52)],
                category_colour(c).filled(),
            ))
            .map_err(draw_err)?;
            root.draw(&Text::new(c.name().to_owned(), (x + 16, 40), font.clone()))
                .map_err(draw_err)?;
            x += 40 + 8 * c.name().len() as i32;
        }
        for (i, row) in rows.iter().take(shown).enumerate() {
            let y = 70 + i as i32 * (ROW_HEIGHT + 4) as i32;
            let label = format!("{} {}", row.kind, bytes(row.size as u64));
            root.draw(&Text::new(label, (10, y), font.clone()))
                .map_err(draw_err)?;
            for (start, end, c) in row.runs(ROW_WIDTH as usize) {
                let x0 = (LABEL_WIDTH as usize + start) as i32;
                let x1 = (LABEL_WIDTH as usize + end) as i32;
                root.draw(&Rectangle::new(
                    [(x0, y), (x1, y + ROW_HEIGHT as i32)],
                    category_colour(c).filled(),
                ))
                .map_err(draw_err)?;
            }
        }
        if extra == 1 {
            let y = 70 + shown as i32 * (ROW_HEIGHT + 4) as i32;
            root.draw(&Text::new(
                format!("… and {} more segments", rows.len() - shown),
                (10, y),
                font,
            ))
            .map_err(draw_err)?;
        }
        root.present().map_err(draw_err)?;
    }
    write(out, &svg)
}

/// One allocator's line of the soak's chart.
pub(crate) struct SoakLine {
    pub(crate) allocator: String,
    /// Whether it ran over fixed memory (its stat is committed, else RSS growth).
    pub(crate) bounded: bool,
    /// Each hour's most live and most held, in order.
    pub(crate) hours: Vec<(u64, u64)>,
    /// Its least memory for the whole session, when bounded.
    pub(crate) least: Option<u64>,
}

/// The soak's chart: what each allocator held, hour by hour (committed over fixed
/// memory with memory to spare, or its resident set's growth), beside the live bytes
/// as a wide grey line; each bounded allocator's least memory for the whole session
/// as a dashed line in its colour.
pub(crate) fn soak_chart(rows: &[SoakLine], title: &str, out: &Path) -> Result<(), String> {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (1100, 540)).into_drawing_area();
        root.fill(&WHITE).map_err(draw_err)?;
        let (area, legend) = root.split_horizontally(820);
        let hours = rows.iter().map(|r| r.hours.len()).max().unwrap_or(1).max(1);
        let y_max = rows
            .iter()
            .flat_map(|r| {
                r.hours
                    .iter()
                    .map(|&(live, held)| held.max(live))
                    .chain(r.least)
            })
            .max()
            .unwrap_or(1) as f64
            / MIB
            * 1.1;
        let mut chart = ChartBuilder::on(&area)
            .caption(title, ("sans-serif", 20))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(64)
            .build_cartesian_2d(0f64..hours as f64, 0f64..y_max.max(1.0))
            .map_err(draw_err)?;
        chart
            .configure_mesh()
            .x_desc("hours of play")
            .y_desc("MiB")
            .draw()
            .map_err(draw_err)?;
        // Each hour's stat drawn across the hour.
        let steps = |f: &dyn Fn(&(u64, u64)) -> u64, row: &SoakLine| {
            row.hours
                .iter()
                .enumerate()
                .flat_map(|(hour, h)| {
                    let y = f(h) as f64 / MIB;
                    [(hour as f64, y), (hour as f64 + 1.0, y)]
                })
                .collect::<Vec<_>>()
        };
        let mut entries: Vec<(String, ShapeStyle, bool)> = Vec::new();
        if let Some(first) = rows.first() {
            let style = ShapeStyle::from(&BLACK.mix(0.45)).stroke_width(3);
            chart
                .draw_series(LineSeries::new(steps(&|h| h.0, first), style))
                .map_err(draw_err)?;
            entries.push(("live (asked)".to_owned(), style, false));
        }
        for (i, row) in rows.iter().enumerate() {
            let colour = COLOURS[i % COLOURS.len()].stroke_width(2);
            chart
                .draw_series(LineSeries::new(steps(&|h| h.1, row), colour))
                .map_err(draw_err)?;
            let what = if row.bounded {
                "committed"
            } else {
                "RSS growth"
            };
            entries.push((format!("{} ({what})", row.allocator), colour, false));
            if let Some(least) = row.least {
                let y = least as f64 / MIB;
                chart
                    .draw_series(DashedLineSeries::new(
                        [(0.0, y), (hours as f64, y)],
                        DASH.0,
                        DASH.1,
                        colour,
                    ))
                    .map_err(draw_err)?;
                entries.push((
                    format!("{} least memory: {}", row.allocator, bytes(least)),
                    colour,
                    true,
                ));
            }
        }
        draw_legend(&legend, entries, 40, 20)?;
        root.present().map_err(draw_err)?;
    }
    write(out, &svg)
}

/// The live bytes of a leak query: `summary` under the title, then one bar per tag
/// (`rows`: its name, blocks and bytes), longest first, labelled with its figures.
pub(crate) fn leak_chart(
    rows: &[(&str, u64, u128)],
    summary: &str,
    title: &str,
    out: &Path,
) -> Result<(), String> {
    let mut rows = rows.to_vec();
    rows.sort_by(|a, b| b.2.cmp(&a.2).then(a.0.cmp(b.0)));
    let shown = rows.len().min(MAX_ROWS);
    // Room for a tag's name and figures before its bar.
    let label_width = 280u32;
    let height = 70 + (shown.max(1) as u32) * (ROW_HEIGHT + 4) + 20;
    let width = label_width + ROW_WIDTH + 20;
    let most = rows.first().map_or(1, |r| r.2.max(1));
    let mut svg = String::new();
    {
        let root = titled(&mut svg, (width, height), title)?;
        let font = ("sans-serif", 12).into_font();
        root.draw(&Text::new(summary.to_owned(), (10, 40), font.clone()))
            .map_err(draw_err)?;
        for (i, &(tag, blocks, size)) in rows.iter().take(shown).enumerate() {
            let y = 70 + i as i32 * (ROW_HEIGHT + 4) as i32;
            let label = format!("{tag}: {blocks} blocks, {}", bytes(size));
            root.draw(&Text::new(label, (10, y), font.clone()))
                .map_err(draw_err)?;
            let len = (size * u128::from(ROW_WIDTH) / most).max(1) as i32;
            let x0 = label_width as i32;
            root.draw(&Rectangle::new(
                [(x0, y), (x0 + len, y + ROW_HEIGHT as i32)],
                COLOURS[i % COLOURS.len()].filled(),
            ))
            .map_err(draw_err)?;
        }
        root.present().map_err(draw_err)?;
    }
    write(out, &svg)
}
