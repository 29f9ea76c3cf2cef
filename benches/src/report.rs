//! `docs/benchmarks.md` from one run's figures: criterion's results, the tables the
//! measuring programs print, and callgrind's counts, put into the template
//! `benches/report/template.md`, with the targets checked and the charts drawn.
//! `cargo xtask bench` measures and then runs `--bin report`; the report alone
//! re-renders the last run's figures.
//!
//! The template is Markdown in which a line holding only a directive is replaced:
//!
//! | directive | becomes |
//! |---|---|
//! | `{{meta}}` | the machine, the date and the commands of the run |
//! | `{{criterion GROUP SUBJECT}}` | every benchmark of the group, its time and `SUBJECT ÷ it` |
//! | `{{chart NAME GROUP:SUBJECT…}}` | `docs/img/bench-NAME.svg`, SUBJECT ÷ each peer as bars, and its link |
//! | `{{icount MODE…}}` | callgrind's instructions per operation of each `insns` mode |
//! | `{{file NAME}}` | the table a measuring program printed (`NAME.md`), as is |
//! | `{{code NAME}}` | a program's output (`NAME.txt`) as a text block |
//! | `{{targets SECTION}}` | the section's targets, each measured and marked met or not |
//!
//! A figure missing from the run shows as `—` and its target as not measured.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use plotters::prelude::*;

/// One criterion benchmark's result.
#[derive(Debug, Clone, PartialEq)]
pub struct Bench {
    /// `group/function[/parameter]`.
    pub id: String,
    /// The group, as `benchmark_group` named it.
    pub group: String,
    /// The function, with `/parameter` when it has one.
    pub name: String,
    /// The parameter, when the benchmark has one.
    pub param: Option<String>,
    /// Nanoseconds per iteration (criterion's slope estimate, or its mean).
    pub ns: f64,
    /// Elements per iteration, for groups with an element throughput.
    pub elements: Option<u64>,
}

/// One callgrind count of an `insns` mode.
#[derive(Debug, Clone, PartialEq)]
pub struct Icount {
    /// What the loop is.
    pub what: String,
    /// The `--toggle-collect` pattern.
    pub collect: String,
    /// The argument `insns` took (a count of operations, or of frames).
    pub arg: u64,
    /// Operations the loop ran.
    pub n: u64,
    /// Instructions counted in the collected functions.
    pub total: u64,
}

impl Icount {
    /// Instructions per operation.
    pub fn per_op(&self) -> f64 {
        self.total as f64 / self.n as f64
    }
}

/// Every figure of one run.
#[derive(Debug, Default)]
pub struct Data {
    /// Criterion's results by id.
    pub benches: BTreeMap<String, Bench>,
    /// The measuring programs' outputs by name (`global.md` → `global`).
    pub files: BTreeMap<String, String>,
    /// Callgrind counts by `insns` mode.
    pub icounts: BTreeMap<String, Icount>,
}

impl Data {
    /// Reads criterion's results under `criterion` and the run's files in `results`
    /// (`*.md`, `*.txt`, `icount.tsv`, `meta.md`).
    ///
    /// # Errors
    ///
    /// A file that cannot be read or parsed, named.
    pub fn load(criterion: &Path, results: &Path) -> Result<Data, String> {
        let mut data = Data::default();
        let mut found = Vec::new();
        find_benchmarks(criterion, &mut found);
        for path in found {
            let bench = read_bench(&path).map_err(|e| format!("{}: {e}", path.display()))?;
            data.benches.insert(bench.id.clone(), bench);
        }
        let entries = std::fs::read_dir(results)
            .map_err(|e| format!("{}: {e} (run `cargo xtask bench` first)", results.display()))?;
        for entry in entries.flatten() {
            let path = entry.path();
            let (Some(stem), Some(ext)) = (path.file_stem(), path.extension()) else {
                continue;
            };
            let stem = stem.to_string_lossy().into_owned();
            let icount = ext == "tsv" && stem == "icount";
            if !(icount || ext == "md" || ext == "txt") {
                continue;
            }
            let text =
                std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
            if icount {
                data.icounts = parse_icounts(&text)?;
            } else {
                data.files.insert(stem, text);
            }
        }
        Ok(data)
    }

    /// Nanoseconds per iteration of benchmark `id`.
    pub fn time(&self, id: &str) -> Option<f64> {
        self.benches.get(id).map(|b| b.ns)
    }

    /// `time(a) ÷ time(b)`.
    pub fn ratio(&self, a: &str, b: &str) -> Option<f64> {
        Some(self.time(a)? / self.time(b)?)
    }

    /// Elements per second of benchmark `id`.
    pub fn rate(&self, id: &str) -> Option<f64> {
        let b = self.benches.get(id)?;
        Some(b.elements? as f64 * 1e9 / b.ns)
    }

    /// Instructions per operation of `insns` mode `mode`.
    pub fn per_op(&self, mode: &str) -> Option<f64> {
        self.icounts.get(mode).map(Icount::per_op)
    }

    /// The number in the cell of Markdown table `file` whose row starts with the
    /// cells `row` and whose column is headed `column`: the last number in brackets
    /// when the cell has one (`35.8 MiB (1.140)` gives 1.140), else its first.
    pub fn cell(&self, file: &str, row: &[&str], column: &str) -> Option<f64> {
        let text = self.files.get(file)?;
        let mut lines = text.lines().filter(|l| l.trim_start().starts_with('|'));
        let header = cells(lines.next()?);
        let col = header.iter().position(|h| h == column)?;
        let found = lines
            .map(cells)
            .find(|cells| cells.len() > col && cells.iter().zip(row).all(|(c, r)| c == r))?;
        number(&found[col])
    }
}

fn find_benchmarks(dir: &Path, found: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            if path.file_name().is_some_and(|n| n == "new") {
                let file = path.join("benchmark.json");
                if file.exists() {
                    found.push(file);
                }
            } else {
                find_benchmarks(&path, found);
            }
        }
    }
}

/// A benchmark from its `new/benchmark.json` and the `estimates.json` beside it.
fn read_bench(benchmark: &Path) -> Result<Bench, String> {
    let read = |p: &Path| -> Result<serde_json::Value, String> {
        let text = std::fs::read_to_string(p).map_err(|e| e.to_string())?;
        serde_json::from_str(&text).map_err(|e| e.to_string())
    };
    let b = read(benchmark)?;
    let e = read(&benchmark.with_file_name("estimates.json"))?;
    let text = |v: &serde_json::Value, k: &str| v[k].as_str().map(str::to_owned);
    let id = text(&b, "full_id").ok_or("no full_id")?;
    let group = text(&b, "group_id").ok_or("no group_id")?;
    let function = text(&b, "function_id");
    let param = text(&b, "value_str");
    let name = match (&function, &param) {
        (Some(f), Some(p)) => format!("{f}/{p}"),
        (Some(f), None) => f.clone(),
        (None, Some(p)) => p.clone(),
        (None, None) => return Err("neither function_id nor value_str".into()),
    };
    let ns = ["slope", "mean"]
        .iter()
        .find_map(|k| e[*k]["point_estimate"].as_f64())
        .ok_or("no slope or mean estimate")?;
    let elements = b["throughput"]["Elements"].as_u64();
    Ok(Bench {
        id,
        group,
        name,
        param: function.and(param),
        ns,
        elements,
    })
}

/// `mode \t what \t collect \t arg \t n \t total` lines.
fn parse_icounts(text: &str) -> Result<BTreeMap<String, Icount>, String> {
    let mut out = BTreeMap::new();
    for (i, line) in text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
    {
        let f: Vec<&str> = line.split('\t').collect();
        let bad = || format!("icount.tsv line {}: `{line}`", i + 1);
        let [mode, what, collect, arg, n, total] = f[..] else {
            return Err(bad());
        };
        let arg = arg.parse().map_err(|_| bad())?;
        let n: u64 = n.parse().map_err(|_| bad())?;
        let total = total.parse().map_err(|_| bad())?;
        if n == 0 {
            return Err(bad());
        }
        out.insert(
            mode.to_owned(),
            Icount {
                what: what.to_owned(),
                collect: collect.to_owned(),
                arg,
                n,
                total,
            },
        );
    }
    Ok(out)
}

fn cells(line: &str) -> Vec<String> {
    let line = line.trim().trim_start_matches('|').trim_end_matches('|');
    line.split('|').map(|c| c.trim().to_owned()).collect()
}

/// The last bracketed number of `cell`, or its first number.
fn number(cell: &str) -> Option<f64> {
    let lead = |s: &str| -> Option<f64> {
        let s = s.trim_start_matches(|c: char| !(c.is_ascii_digit() || c == '.'));
        let end = s
            .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == ','))
            .unwrap_or(s.len());
        s[..end].replace(',', "").parse().ok()
    };
    cell.rfind('(')
        .and_then(|open| lead(&cell[open + 1..]))
        .or_else(|| lead(cell))
}

/// `ns` nanoseconds, in the unit that keeps three or four figures.
pub fn duration(ns: f64) -> String {
    match ns {
        ns if ns < 1e3 => format!("{ns:.1} ns"),
        ns if ns < 1e6 => format!("{:.2} µs", ns / 1e3),
        ns if ns < 1e9 => format!("{:.1} ms", ns / 1e6),
        ns => format!("{:.2} s", ns / 1e9),
    }
}

/// A ratio to two decimals, or `—`.
fn ratio(r: Option<f64>) -> String {
    r.map_or("—".to_owned(), |r| format!("{r:.2}"))
}

/// How a target bounds its figure.
#[derive(Debug, Clone, Copy)]
pub enum Bound {
    /// The figure is at most this.
    AtMost(f64),
    /// The figure is at least this.
    AtLeast(f64),
}

/// A figure a design set out to reach.
#[derive(Debug)]
pub struct Target {
    /// The section of the report it belongs to.
    pub section: &'static str,
    /// The target in words.
    pub what: &'static str,
    /// The figure, from the run.
    pub figure: fn(&Data) -> Option<f64>,
    /// The bound it must keep.
    pub bound: Bound,
}

impl Target {
    /// Whether the run met it (`None`: not measured).
    pub fn met(&self, data: &Data) -> Option<bool> {
        let v = (self.figure)(data)?;
        Some(match self.bound {
            Bound::AtMost(b) => v <= b,
            Bound::AtLeast(b) => v >= b,
        })
    }
}

const MALLOC_PROGRAMS: &[&str] = &["python3", "sort", "gzip", "gcc", "c++ new", "big blocks"];

fn churn(d: &Data, allocator: &str, column: &str) -> Option<f64> {
    d.cell("churn", &[allocator], column)
}

fn worst_malloc(d: &Data, column: &str) -> Option<f64> {
    MALLOC_PROGRAMS
        .iter()
        .map(|p| d.cell("malloc", &[p, "bento"], column))
        .try_fold(0.0f64, |m, v| Some(m.max(v?)))
}

/// Every target the allocators were built to, with the figure that measures it.
pub const TARGETS: &[Target] = &[
    Target {
        section: "bump",
        what: "`Bump` 16 B ÷ bumpalo, time",
        figure: |d| d.ratio("bump/16B_then_reset/bento", "bump/16B_then_reset/bumpalo"),
        bound: Bound::AtMost(0.9),
    },
    Target {
        section: "bump",
        what: "`Bump::alloc` 16 B, instructions per allocation",
        figure: |d| d.per_op("bento"),
        bound: Bound::AtMost(12.0),
    },
    Target {
        section: "bump",
        what: "`Arena` ÷ `Bump`, 16 B, time",
        figure: |d| d.ratio("bump/16B_then_reset/arena", "bump/16B_then_reset/bento"),
        bound: Bound::AtMost(1.3),
    },
    Target {
        section: "bump",
        what: "`Arena` ÷ `Bump`, frame of 10k, time",
        figure: |d| {
            d.ratio(
                "bump/frame_10k_reset/arena/10000",
                "bump/frame_10k_reset/bento/10000",
            )
        },
        bound: Bound::AtMost(1.3),
    },
    Target {
        section: "bump",
        what: "`Stack` ÷ `Bump`, time",
        figure: |d| {
            d.ratio(
                "stack/16B_then_rollback/stack",
                "stack/16B_then_rollback/bump",
            )
        },
        bound: Bound::AtMost(1.3),
    },
    Target {
        section: "pool",
        what: "`Pool` ÷ bare free list, LIFO, time",
        figure: |d| {
            d.ratio(
                "pool/lifo_batch_100/bento_pool",
                "pool/lifo_batch_100/bare_free_list",
            )
        },
        bound: Bound::AtMost(1.2),
    },
    Target {
        section: "pool",
        what: "`Pool` ÷ bare free list, random, time",
        figure: |d| {
            d.ratio(
                "pool/random_10k_live/bento_pool",
                "pool/random_10k_live/bare_free_list",
            )
        },
        bound: Bound::AtMost(1.2),
    },
    Target {
        section: "pool",
        what: "`Pool` ÷ bare free list, LIFO, instructions",
        figure: |d| Some(d.per_op("pool")? / d.per_op("pool-bare")?),
        bound: Bound::AtMost(1.2),
    },
    Target {
        section: "pool",
        what: "`SharedPool` through its cache ÷ `Pool`, one thread, LIFO, time",
        figure: |d| {
            d.ratio(
                "pool/lifo_batch_100/bento_shared_pool_cache",
                "pool/lifo_batch_100/bento_pool",
            )
        },
        bound: Bound::AtMost(2.0),
    },
    Target {
        section: "pool",
        what: "`SharedPool` through its cache ÷ `Pool`, one thread, random, time",
        figure: |d| {
            d.ratio(
                "pool/random_10k_live/bento_shared_pool_cache",
                "pool/random_10k_live/bento_pool",
            )
        },
        bound: Bound::AtMost(2.0),
    },
    Target {
        section: "pool",
        what: "`SharedPool` alone ÷ `Pool`, one thread, LIFO, time",
        figure: |d| {
            d.ratio(
                "pool/lifo_batch_100/bento_shared_pool",
                "pool/lifo_batch_100/bento_pool",
            )
        },
        bound: Bound::AtMost(2.0),
    },
    Target {
        section: "space",
        what: "mixed ÷ glibc, time",
        figure: |d| d.ratio("space/mixed/bento_space", "space/mixed/system_glibc"),
        bound: Bound::AtMost(0.6),
    },
    Target {
        section: "space",
        what: "mixed ÷ mimalloc, time",
        figure: |d| d.ratio("space/mixed/bento_space", "space/mixed/mimalloc"),
        bound: Bound::AtMost(1.0),
    },
    Target {
        section: "space",
        what: "mixed ÷ talc, time",
        figure: |d| d.ratio("space/mixed/bento_space", "space/mixed/talc"),
        bound: Bound::AtMost(1.0),
    },
    Target {
        section: "space",
        what: "mixed, instructions per operation (a step is two)",
        figure: |d| Some(d.per_op("space-mixed-bento")? / 2.0),
        bound: Bound::AtMost(75.0),
    },
    Target {
        section: "space",
        what: "`lifo_empty` ÷ glibc, time",
        figure: |d| {
            d.ratio(
                "space/lifo_empty/bento_space",
                "space/lifo_empty/system_glibc",
            )
        },
        bound: Bound::AtMost(1.0),
    },
    Target {
        section: "space",
        what: "`lifo_pinned` ÷ glibc, time",
        figure: |d| {
            d.ratio(
                "space/lifo_pinned/bento_space",
                "space/lifo_pinned/system_glibc",
            )
        },
        bound: Bound::AtMost(1.0),
    },
    Target {
        section: "space",
        what: "`frame_16` ÷ glibc, time",
        figure: |d| d.ratio("space/frame_16/bento_space", "space/frame_16/system_glibc"),
        bound: Bound::AtMost(1.0),
    },
    Target {
        section: "space",
        what: "`free_all_10m` ÷ glibc, time",
        figure: |d| {
            d.ratio(
                "space/free_all_10m/bento_space",
                "space/free_all_10m/system_glibc",
            )
        },
        bound: Bound::AtMost(1.0),
    },
    Target {
        section: "space",
        what: "game session, defaults: peak RSS growth ÷ peak live",
        figure: |d| d.cell("session", &["bento"], "peak RSS growth (÷ live)"),
        bound: Bound::AtMost(1.10),
    },
    Target {
        section: "churn",
        what: "p99.99 latency ÷ glibc's",
        figure: |d| Some(churn(d, "bento", "p99.99 µs")? / churn(d, "glibc", "p99.99 µs")?),
        bound: Bound::AtMost(1.0),
    },
    Target {
        section: "churn",
        what: "operations over 100 µs, minus glibc's",
        figure: |d| Some(churn(d, "bento", "over 100 µs")? - churn(d, "glibc", "over 100 µs")?),
        bound: Bound::AtMost(0.0),
    },
    Target {
        section: "churn",
        what: "peak RSS ÷ peak live, ÷ glibc's",
        figure: |d| {
            let column = "peak RSS ÷ peak live";
            Some(churn(d, "bento", column)? / churn(d, "glibc", column)?)
        },
        bound: Bound::AtMost(1.0),
    },
    Target {
        section: "churn",
        what: "MiB held a second after every block is freed, no `trim()`",
        figure: |d| churn(d, "bento", "held 1 s after free-all"),
        bound: Bound::AtMost(1.0),
    },
    Target {
        section: "common",
        what: "mixed ÷ mimalloc, time",
        figure: |d| d.ratio("common/mixed/bento_common", "common/mixed/mimalloc"),
        bound: Bound::AtMost(1.0),
    },
    Target {
        section: "common",
        what: "small ÷ mimalloc, time",
        figure: |d| d.ratio("common/small/bento_common", "common/small/mimalloc"),
        bound: Bound::AtMost(1.0),
    },
    Target {
        section: "common",
        what: "the better of mixed and small ÷ jemalloc, time",
        figure: |d| {
            let mixed = d.ratio("common/mixed/bento_common", "common/mixed/jemalloc")?;
            let small = d.ratio("common/small/bento_common", "common/small/jemalloc")?;
            Some(mixed.min(small))
        },
        bound: Bound::AtMost(1.0),
    },
    Target {
        section: "common",
        what: "two threads ÷ one thread, throughput",
        figure: |d| {
            Some(
                d.rate("common/threads/bento_common/2")?
                    / d.rate("common/threads/bento_common/1")?,
            )
        },
        bound: Bound::AtLeast(1.6),
    },
    Target {
        section: "common",
        what: "two threads ÷ mimalloc's two threads, throughput",
        figure: |d| {
            Some(d.rate("common/threads/bento_common/2")? / d.rate("common/threads/mimalloc/2")?)
        },
        bound: Bound::AtLeast(1.0),
    },
    Target {
        section: "common",
        what: "game session: peak RSS growth ÷ peak live",
        figure: |d| d.cell("session", &["common"], "peak RSS growth (÷ live)"),
        bound: Bound::AtMost(1.15),
    },
    Target {
        section: "heap",
        what: "`Heap` over the space ÷ the space, mixed, time",
        figure: |d| d.ratio("heap/space-mixed/heap", "heap/space-mixed/space"),
        bound: Bound::AtMost(1.05),
    },
    Target {
        section: "heap",
        what: "`Heap` over the common allocator ÷ it, small, time",
        figure: |d| d.ratio("heap/common-small/heap", "heap/common-small/common"),
        bound: Bound::AtMost(1.15),
    },
    Target {
        section: "heap",
        what: "`Heap` over the space ÷ the space, mixed, instructions",
        figure: |d| Some(d.per_op("space-mixed-heap")? / d.per_op("space-mixed-bento")?),
        bound: Bound::AtMost(1.05),
    },
    Target {
        section: "heap",
        what: "`Heap` over the common allocator ÷ it, small, instructions",
        figure: |d| Some(d.per_op("space-small-heapcommon")? / d.per_op("space-small-commonapi")?),
        bound: Bound::AtMost(1.2),
    },
    Target {
        section: "heap",
        what: "`Heap` over the common allocator ÷ it, mixed, instructions",
        figure: |d| Some(d.per_op("space-mixed-heapcommon")? / d.per_op("space-mixed-commonapi")?),
        bound: Bound::AtMost(1.2),
    },
    Target {
        section: "heap",
        what: "two threads ÷ one thread, the heap's scaling ÷ the common allocator's",
        figure: |d| {
            let heap = d.rate("heap/threads/heap_over_common/2")?
                / d.rate("heap/threads/heap_over_common/1")?;
            let common = d.rate("heap/threads/common/2")? / d.rate("heap/threads/common/1")?;
            Some(heap / common)
        },
        bound: Bound::AtLeast(1.0),
    },
    Target {
        section: "malloc",
        what: "bento-malloc ÷ glibc, time, the worst program",
        figure: |d| worst_malloc(d, "time ÷ glibc"),
        bound: Bound::AtMost(1.0),
    },
    Target {
        section: "malloc",
        what: "bento-malloc ÷ glibc, peak RSS, the worst program",
        figure: |d| worst_malloc(d, "RSS ÷ glibc"),
        bound: Bound::AtMost(1.0),
    },
];

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

fn directive(words: &[&str], data: &Data, img: &Path) -> Result<String, String> {
    match words {
        ["meta"] => Ok(data
            .files
            .get("meta")
            .cloned()
            .unwrap_or_else(|| "*(no record of the run)*".into())),
        ["criterion", group, subject] => criterion_table(data, group, subject),
        ["chart", name, bars @ ..] if !bars.is_empty() => {
            let bars = bars
                .iter()
                .map(|b| {
                    b.split_once(':')
                        .ok_or(format!("`{b}` is not GROUP:SUBJECT"))
                })
                .collect::<Result<Vec<_>, _>>()?;
            chart(data, name, &bars, img)
        }
        ["icount", modes @ ..] if !modes.is_empty() => Ok(icount_table(data, modes)),
        ["file", name] => Ok(data.files.get(*name).map_or_else(
            || format!("*(`{name}` was not measured in this run)*"),
            Clone::clone,
        )),
        ["code", name] => Ok(data.files.get(*name).map_or_else(
            || format!("*(`{name}` was not measured in this run)*"),
            |t| format!("```text\n{}\n```", t.trim_end()),
        )),
        ["targets", section] => targets_table(data, section),
        _ => Err("unknown directive".into()),
    }
}

/// The group's benchmarks, the subject first within each parameter.
fn group_rows<'a>(data: &'a Data, group: &str, subject: &str) -> Vec<&'a Bench> {
    let mut rows: Vec<&Bench> = data.benches.values().filter(|b| b.group == group).collect();
    let key = |b: &Bench| {
        let function = b.name.split('/').next().unwrap_or("").to_owned();
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

fn criterion_table(data: &Data, group: &str, subject: &str) -> Result<String, String> {
    let rows = group_rows(data, group, subject);
    if rows.is_empty() {
        return Ok(format!("*(`{group}` was not measured in this run)*"));
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
        let r = subject_of(data, b, subject).map(|s| s.ns / b.ns);
        let name = if b.name.split('/').next() == Some(subject) {
            format!("**{}**", b.name)
        } else {
            b.name.clone()
        };
        if rated {
            let rate = b
                .elements
                .map_or("—".into(), |e| format!("{:.1}", e as f64 * 1e3 / b.ns));
            let _ = writeln!(t, "| {name} | {} | {rate} | {} |", duration(b.ns), ratio(r));
        } else {
            let _ = writeln!(t, "| {name} | {} | {} |", duration(b.ns), ratio(r));
        }
    }
    Ok(t)
}

fn icount_table(data: &Data, modes: &[&str]) -> String {
    let mut t = String::from(
        "| loop | command | `--toggle-collect` | operations | instructions / operation |\n|---|---|---|---|---|\n",
    );
    for mode in modes {
        match data.icounts.get(*mode) {
            Some(c) => {
                let _ = writeln!(
                    t,
                    "| {} | `insns {mode} {}` | `{}` | {} | {:.1} |",
                    c.what,
                    c.arg,
                    c.collect,
                    c.n,
                    c.per_op()
                );
            }
            None => {
                let _ = writeln!(
                    t,
                    "| — | `insns {mode}` | — | — | not counted in this run |"
                );
            }
        }
    }
    t
}

fn targets_table(data: &Data, section: &str) -> Result<String, String> {
    let mine: Vec<&Target> = TARGETS.iter().filter(|t| t.section == section).collect();
    if mine.is_empty() {
        return Err(format!("no targets for section `{section}`"));
    }
    let mut t = String::from("| target | bound | this run | |\n|---|---|---|---|\n");
    for target in mine {
        let bound = match target.bound {
            Bound::AtMost(b) => format!("≤ {b}"),
            Bound::AtLeast(b) => format!("≥ {b}"),
        };
        let (value, verdict) = match ((target.figure)(data), target.met(data)) {
            (Some(v), Some(true)) => (format!("{v:.2}"), "met"),
            (Some(v), _) => (format!("{v:.2}"), "**not met**"),
            (None, _) => ("—".to_owned(), "not measured"),
        };
        let _ = writeln!(t, "| {} | {bound} | {value} | {verdict} |", target.what);
    }
    Ok(t)
}

/// Draws `docs/img/bench-<name>.svg`: for each `(group, subject)`, one bar per peer
/// of `subject ÷ peer` in time, with a line at 1.
fn chart(data: &Data, name: &str, bars: &[(&str, &str)], img: &Path) -> Result<String, String> {
    let mut rows: Vec<(String, f64)> = Vec::new();
    for (group, subject) in bars {
        for b in group_rows(data, group, subject) {
            let function = b.name.split('/').next().unwrap_or("");
            if function == *subject {
                continue;
            }
            if let Some(s) = subject_of(data, b, subject) {
                rows.push((format!("{group} · {}", b.name), s.ns / b.ns));
            }
        }
    }
    if rows.is_empty() {
        return Ok(format!("*(no figures for the chart `{name}` in this run)*"));
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

#[cfg(test)]
mod tests;
