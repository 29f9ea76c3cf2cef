//! The stats the allocators were built to reach, each judged from a run, and the
//! summary table of them all that opens the report.

use std::fmt::Write as _;

use super::data::Data;
use super::fmt::{NONE, ratio};

/// How a target bounds its stat.
#[derive(Debug, Clone, Copy)]
pub enum Bound {
    /// The stat is at most this.
    AtMost(f64),
    /// The stat is at least this.
    AtLeast(f64),
}

/// A stat a design set out to reach.
#[derive(Debug)]
pub struct Target {
    /// The section of the report it belongs to.
    pub section: &'static str,
    /// The target in words.
    pub what: &'static str,
    /// The stat, from the run.
    pub stat: fn(&Data) -> Option<f64>,
    /// The bound it must keep.
    pub bound: Bound,
}

impl Target {
    /// Whether the run met it (`None`: not measured).
    pub fn met(&self, data: &Data) -> Option<bool> {
        let v = (self.stat)(data)?;
        Some(match self.bound {
            Bound::AtMost(b) => v <= b,
            Bound::AtLeast(b) => v >= b,
        })
    }
}

/// The programs of `bench-malloc` its targets judge (the threaded ones are not).
const MALLOC_PROGRAMS: &[&str] = &["python3", "sort", "gzip", "gcc", "c++ new", "big blocks"];

/// `field` of `allocator`'s row of the churn.
fn churn(d: &Data, allocator: &str, field: &str) -> Option<f64> {
    d.stat("churn", &[("allocator", allocator)], field)
}

/// `field` ÷ `peak_live_bytes` in `allocator`'s row of program `file`.
fn per_live(d: &Data, file: &str, allocator: &str, field: &str) -> Option<f64> {
    let key = [("allocator", allocator)];
    Some(d.stat(file, &key, field)? / d.stat(file, &key, "peak_live_bytes")?)
}

/// `field` of `allocator`'s row of the soak.
fn soak(d: &Data, allocator: &str, field: &str) -> Option<f64> {
    d.stat("soak", &[("allocator", allocator)], field)
}

/// The least of `field` over `allocators`' rows of the soak.
fn least_of(d: &Data, allocators: &[&str], field: &str) -> Option<f64> {
    allocators
        .iter()
        .filter_map(|a| soak(d, a, field))
        .reduce(f64::min)
}

/// `field` of `allocator`'s run of `bento demo`.
fn demo(d: &Data, allocator: &str, field: &str) -> Option<f64> {
    d.docs.get("demo")?["runs"]
        .as_array()?
        .iter()
        .find(|r| r["allocator"] == allocator)?[field]
        .as_f64()
}

/// The largest of bento's `field` ÷ glibc's over [`MALLOC_PROGRAMS`].
fn worst_malloc(d: &Data, field: &str) -> Option<f64> {
    MALLOC_PROGRAMS
        .iter()
        .map(|p| {
            let of = |a: &str| d.stat("malloc", &[("program", p), ("allocator", a)], field);
            Some(of("bento")? / of("glibc")?)
        })
        .try_fold(0.0f64, |m, v| Some(m.max(v?)))
}

/// Every target the allocators were built to, with the stat that measures it.
pub const TARGETS: &[Target] = &[
    Target {
        section: "bump",
        what: "`Bump` 16 B ÷ bumpalo, time",
        stat: |d| d.ratio("bump/16B_then_reset/bento", "bump/16B_then_reset/bumpalo"),
        bound: Bound::AtMost(0.9),
    },
    Target {
        section: "bump",
        what: "`Bump::alloc` 16 B, instructions per allocation",
        stat: |d| d.per_op("bento"),
        bound: Bound::AtMost(12.0),
    },
    Target {
        section: "bump",
        what: "`Arena` ÷ `Bump`, 16 B, time",
        stat: |d| d.ratio("bump/16B_then_reset/arena", "bump/16B_then_reset/bento"),
        bound: Bound::AtMost(1.3),
    },
    Target {
        section: "bump",
        what: "`Arena` ÷ `Bump`, frame of 10k, time",
        stat: |d| {
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
        stat: |d| {
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
        stat: |d| {
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
        stat: |d| {
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
        stat: |d| Some(d.per_op("pool")? / d.per_op("pool-bare")?),
        bound: Bound::AtMost(1.2),
    },
    Target {
        section: "pool",
        what: "`SharedPool` through its cache ÷ `Pool`, one thread, LIFO, time",
        stat: |d| {
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
        stat: |d| {
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
        stat: |d| {
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
        stat: |d| d.ratio("space/mixed/bento_space", "space/mixed/system_glibc"),
        bound: Bound::AtMost(0.6),
    },
    Target {
        section: "space",
        what: "mixed ÷ mimalloc, time",
        stat: |d| d.ratio("space/mixed/bento_space", "space/mixed/mimalloc"),
        bound: Bound::AtMost(1.0),
    },
    Target {
        section: "space",
        what: "mixed ÷ talc, time",
        stat: |d| d.ratio("space/mixed/bento_space", "space/mixed/talc"),
        bound: Bound::AtMost(1.0),
    },
    Target {
        section: "space",
        what: "mixed, instructions per operation (a step is two)",
        stat: |d| Some(d.per_op("space-mixed-bento")? / 2.0),
        bound: Bound::AtMost(75.0),
    },
    Target {
        section: "space",
        what: "`lifo_empty` ÷ glibc, time",
        stat: |d| {
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
        stat: |d| {
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
        stat: |d| d.ratio("space/frame_16/bento_space", "space/frame_16/system_glibc"),
        bound: Bound::AtMost(1.0),
    },
    Target {
        section: "space",
        what: "`free_all_10m` ÷ glibc, time",
        stat: |d| {
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
        stat: |d| per_live(d, "session", "bento", "peak_rss_growth_bytes"),
        bound: Bound::AtMost(1.10),
    },
    Target {
        section: "soak",
        what: "bento set-up: least memory for the session ÷ peak live, ÷ the first hour's",
        stat: |d| soak(d, "bento", "flatness"),
        bound: Bound::AtMost(1.05),
    },
    Target {
        section: "soak",
        what: "common: least memory for the session ÷ peak live, ÷ the first hour's",
        stat: |d| soak(d, "common", "flatness"),
        bound: Bound::AtMost(1.10),
    },
    Target {
        section: "soak",
        what: "bento set-up: least memory ÷ the best of talc, rlsf and dlmalloc-rs",
        stat: |d| {
            let best = least_of(d, &["talc", "rlsf", "dlmalloc"], "session_least")?;
            Some(soak(d, "bento", "session_least")? / best)
        },
        bound: Bound::AtMost(0.9),
    },
    Target {
        section: "soak",
        what: "bento set-up: least memory ÷ the least peak RSS of glibc, mimalloc, jemalloc",
        stat: |d| {
            let best = least_of(d, &["system", "mimalloc", "jemalloc"], "peak_held")?;
            Some(soak(d, "bento", "session_least")? / best)
        },
        bound: Bound::AtMost(0.6),
    },
    Target {
        section: "soak",
        what: "bento set-up: OS calls inside gameplay frames after the first hour",
        stat: |d| soak(d, "bento", "frame_os_calls_after_first_hour"),
        bound: Bound::AtMost(0.0),
    },
    Target {
        section: "churn",
        what: "p99.99 latency ÷ glibc's",
        stat: |d| Some(churn(d, "bento", "p9999_ns")? / churn(d, "glibc", "p9999_ns")?),
        bound: Bound::AtMost(1.0),
    },
    Target {
        section: "churn",
        what: "operations over 100 µs, minus glibc's",
        stat: |d| Some(churn(d, "bento", "over_100us")? - churn(d, "glibc", "over_100us")?),
        bound: Bound::AtMost(0.0),
    },
    Target {
        section: "churn",
        what: "peak RSS ÷ peak live, ÷ glibc's",
        stat: |d| {
            let field = "peak_rss_growth_bytes";
            Some(per_live(d, "churn", "bento", field)? / per_live(d, "churn", "glibc", field)?)
        },
        bound: Bound::AtMost(1.0),
    },
    Target {
        section: "churn",
        what: "common: peak committed ÷ peak live, ÷ glibc's peak RSS ÷ peak live",
        stat: |d| {
            let committed = per_live(d, "churn", "common", "peak_committed_bytes")?;
            Some(committed / per_live(d, "churn", "glibc", "peak_rss_growth_bytes")?)
        },
        bound: Bound::AtMost(1.0),
    },
    Target {
        section: "churn",
        what: "space: peak committed ÷ peak live",
        stat: |d| per_live(d, "churn", "bento", "peak_committed_bytes"),
        bound: Bound::AtMost(1.5),
    },
    Target {
        section: "churn",
        what: "MiB held a second after every block is freed, no `trim()`",
        stat: |d| Some(churn(d, "bento", "held_after_free_all_bytes")? / f64::from(1 << 20)),
        bound: Bound::AtMost(1.0),
    },
    Target {
        section: "common",
        what: "mixed ÷ mimalloc, time",
        stat: |d| d.ratio("common/mixed/bento_common", "common/mixed/mimalloc"),
        bound: Bound::AtMost(1.0),
    },
    Target {
        section: "common",
        what: "small ÷ mimalloc, time",
        stat: |d| d.ratio("common/small/bento_common", "common/small/mimalloc"),
        bound: Bound::AtMost(1.0),
    },
    Target {
        section: "common",
        what: "the better of mixed and small ÷ jemalloc, time",
        stat: |d| {
            let mixed = d.ratio("common/mixed/bento_common", "common/mixed/jemalloc")?;
            let small = d.ratio("common/small/bento_common", "common/small/jemalloc")?;
            Some(mixed.min(small))
        },
        bound: Bound::AtMost(1.0),
    },
    Target {
        section: "common",
        what: "two threads ÷ one thread, throughput",
        stat: |d| {
            Some(
                d.rate("common/threads/bento_common/2")?
                    / d.rate("common/threads/bento_common/1")?,
            )
        },
        bound: Bound::AtLeast(1.6),
    },
    Target {
        section: "common",
        what: "two threads on their own blocks ÷ one, the lowest of the rounds",
        stat: |d| d.stat("scaling", &[("allocator", "common")], "lowest_scaling"),
        bound: Bound::AtLeast(1.8),
    },
    Target {
        section: "common",
        what: "two threads ÷ mimalloc's two threads, throughput",
        stat: |d| {
            Some(d.rate("common/threads/bento_common/2")? / d.rate("common/threads/mimalloc/2")?)
        },
        bound: Bound::AtLeast(1.0),
    },
    Target {
        section: "common",
        what: "game session: peak RSS growth ÷ peak live",
        stat: |d| per_live(d, "session", "common", "peak_rss_growth_bytes"),
        bound: Bound::AtMost(1.15),
    },
    Target {
        section: "heap",
        what: "`Heap` over the space ÷ the space, mixed, time",
        stat: |d| d.ratio("heap/space-mixed/heap", "heap/space-mixed/space"),
        bound: Bound::AtMost(1.05),
    },
    Target {
        section: "heap",
        what: "`Heap` over the common allocator ÷ it, small, time",
        stat: |d| d.ratio("heap/common-small/heap", "heap/common-small/common"),
        bound: Bound::AtMost(1.15),
    },
    Target {
        section: "heap",
        what: "`Heap` over the space ÷ the space, mixed, instructions",
        stat: |d| Some(d.per_op("space-mixed-heap")? / d.per_op("space-mixed-bento")?),
        bound: Bound::AtMost(1.05),
    },
    Target {
        section: "heap",
        what: "`Heap` over the common allocator ÷ it, small, instructions",
        stat: |d| Some(d.per_op("space-small-heapcommon")? / d.per_op("space-small-commonapi")?),
        bound: Bound::AtMost(1.2),
    },
    Target {
        section: "heap",
        what: "`Heap` over the common allocator ÷ it, mixed, instructions",
        stat: |d| Some(d.per_op("space-mixed-heapcommon")? / d.per_op("space-mixed-commonapi")?),
        bound: Bound::AtMost(1.2),
    },
    Target {
        section: "heap",
        what: "two threads ÷ one thread, the heap's scaling ÷ the common allocator's",
        stat: |d| {
            let heap = d.rate("heap/threads/heap_over_common/2")?
                / d.rate("heap/threads/heap_over_common/1")?;
            let common = d.rate("heap/threads/common/2")? / d.rate("heap/threads/common/1")?;
            Some(heap / common)
        },
        bound: Bound::AtLeast(1.0),
    },
    Target {
        section: "heap",
        what: "sampled guard pages at the default rate (`bento-guard` ÷ `bento`), the demo's time",
        stat: |d| Some(demo(d, "bento-guard", "seconds")? / demo(d, "bento", "seconds")?),
        bound: Bound::AtMost(1.02),
    },
    Target {
        section: "heap",
        what: "sampled guard pages (`bento-guard` − `bento`), the demo's peak committed, KiB \
               (documented: at most 540)",
        stat: |d| {
            let more =
                demo(d, "bento-guard", "peak_committed")? - demo(d, "bento", "peak_committed")?;
            Some(more / 1024.0)
        },
        bound: Bound::AtMost(540.0),
    },
    Target {
        section: "heap",
        what: "a sampled profile at the default rate (`bento-prof` ÷ `bento`), the demo's time",
        stat: |d| Some(demo(d, "bento-prof", "seconds")? / demo(d, "bento", "seconds")?),
        bound: Bound::AtMost(1.02),
    },
    Target {
        section: "heap",
        what: "the profile's estimate of each heap's live bytes at the demo's busiest \
               moment, the worst heap's error, %",
        stat: |d| {
            let lines = d.docs.get("demo")?["profile"].as_array()?;
            lines
                .iter()
                .map(|l| {
                    let l = l.as_str()?;
                    let pct = l.rsplit_once('(')?.1.trim_end_matches(" %)");
                    pct.parse::<f64>().ok().map(f64::abs)
                })
                .try_fold(0.0f64, |m, v| Some(m.max(v?)))
        },
        bound: Bound::AtMost(10.0),
    },
    Target {
        section: "malloc",
        what: "bento-malloc ÷ glibc, time, the worst program",
        stat: |d| worst_malloc(d, "median_time_ns"),
        bound: Bound::AtMost(1.0),
    },
    Target {
        section: "malloc",
        what: "bento-malloc ÷ glibc, peak RSS, the worst program",
        stat: |d| worst_malloc(d, "peak_rss_bytes"),
        bound: Bound::AtMost(1.0),
    },
];

/// The verdict on one target: its stat in this run, and `met`, `**not met**` or
/// `not measured`.
pub fn verdict(target: &Target, data: &Data) -> (String, &'static str) {
    match ((target.stat)(data), target.met(data)) {
        (Some(v), Some(true)) => (ratio(v), "met"),
        (Some(v), _) => (ratio(v), "**not met**"),
        (None, _) => (NONE.to_owned(), "not measured"),
    }
}

/// Every target of [`TARGETS`] in one table, by group, after a count of those met.
pub fn summary_table(data: &Data) -> String {
    let met = TARGETS.iter().filter(|t| t.met(data) == Some(true)).count();
    let measured = TARGETS.iter().filter(|t| t.met(data).is_some()).count();
    let mut t = format!(
        "**{met} of {} targets met**; {} not met, {} not measured in this run.\n\n\
         | group | target | bound | this run | |\n|---|---|---|---|---|\n",
        TARGETS.len(),
        measured - met,
        TARGETS.len() - measured,
    );
    let mut section = "";
    for target in TARGETS {
        let group = if target.section == section {
            String::new()
        } else {
            section = target.section;
            format!("**{section}**")
        };
        let bound = match target.bound {
            Bound::AtMost(b) => format!("≤ {b}"),
            Bound::AtLeast(b) => format!("≥ {b}"),
        };
        let (value, verdict) = verdict(target, data);
        let _ = writeln!(
            t,
            "| {group} | {} | {bound} | {value} | {verdict} |",
            target.what
        );
    }
    t
}
