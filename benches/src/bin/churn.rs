//! The latency of every operation in a large churn, and the resident memory it costs:
//! sizes 16 B – 1 MiB (log-uniform), the live set grown to 128 MiB, 90 % of it freed
//! in random order, 16 rounds; every allocation and free timed on its own. Each
//! allocator runs in its own process, so that one's memory does not count against
//! another's. The stats are printed as JSON for the report (`cargo xtask bench`
//! writes them to `target/bench-report/churn.json`).
//!
//! ```sh
//! cargo run --release -p bento-benches --bin churn            # every allocator
//! cargo run --release -p bento-benches --bin churn -- glibc   # one row
//! ```
//!
//! The output: `{"rows": [ROW…]}`, a row being `{"allocator": NAME, …}` with:
//! `operations`; latency percentiles over every operation, `p50_ns`, `p99_ns`,
//! `p999_ns`, `p9999_ns` and `max_ns`; how many took over 10 µs and over 100 µs
//! (`over_10us`, `over_100us`); `peak_live_bytes`; `peak_rss_growth_bytes`, the
//! peak resident set (`VmHWM`) less the one before the run; `peak_committed_bytes`,
//! the most the allocator's page layer held committed (bento's rows; 0 for the
//! others, which cannot say); `mappings_at_peak`, the
//! most mappings the process had at a round's peak; and `held_after_free_all_bytes`,
//! what the process still holds a second after everything is freed (no trim call;
//! bento's space is told to look at the clock, its decay time being 1 s). Every page
//! of a block is written once after its allocation (outside the timed call), as a
//! program uses its memory.

use std::process::{Command, Stdio};
use std::ptr::NonNull;
use std::time::Instant;

use bento_benches::Rng;
use bento_benches::heap::{Api, GlobalHeap, Heap, Talc, below};
use bento_pages::SystemPages;
use bento_space::{MemorySpace, SpaceConfig};

const PEERS: &[&str] = &["bento", "common", "glibc", "mimalloc", "jemalloc", "talc"];
const LIVE: usize = 128 << 20;
const ROUNDS: usize = 16;
/// The share of the live set freed each round, in percent.
const FREED: usize = 90;

/// A size from 16 B to 1 MiB: an octave `16 << e` (`e` in 0..16, equally likely) and
/// a uniform offset in it.
fn size_of_draw(r: u64) -> usize {
    let e = (r % 16) as u32;
    let base = 16usize << e;
    base + ((r >> 8) as usize & (base - 1))
}

/// A `/proc/self/status` stat in bytes (0 where it is missing).
fn status_bytes(key: &str) -> usize {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|line| line.strip_prefix(key))
        .and_then(|rest| rest.split_whitespace().next()?.parse::<usize>().ok())
        .map_or(0, |kib| kib << 10)
}

struct Stats {
    latencies: Vec<u32>,
    peak_live: usize,
    /// The most mappings (`/proc/self/maps` lines) the process had at a round's peak.
    vmas: usize,
    /// The resident set once every block is freed, the heap still alive.
    held: usize,
    /// The most bytes the allocator's page layer had committed, for bento's rows
    /// (0 for the others, which are measured by their resident set).
    committed: usize,
}

/// Runs the churn on `heap`, timing each call; `settle` runs once everything is freed,
/// before the resident set is read.
fn churn<H: Heap>(heap: &mut H, settle: impl FnOnce()) -> Stats {
    let mut rng = Rng::new(0x2545_F491_4F6C_DD1D);
    let mut live: Vec<(NonNull<u8>, usize)> = Vec::with_capacity(1 << 16);
    let mut latencies = Vec::with_capacity(1 << 20);
    let mut live_bytes = 0usize;
    let mut peak_live = 0usize;
    let mut vmas = 0;
    for _ in 0..ROUNDS {
        while live_bytes < LIVE {
            let size = size_of_draw(rng.next_u64());
            let layout = std::alloc::Layout::from_size_align(size, 8).expect("a size");
            let t = Instant::now();
            let p = heap.allocate(layout);
            latencies.push(t.elapsed().as_nanos() as u32);
            for off in (0..size).step_by(4096) {
                // SAFETY: inside the fresh block of `size` bytes.
                unsafe { p.as_ptr().add(off).write(1) };
            }
            live.push((p, size));
            live_bytes += size;
        }
        peak_live = peak_live.max(live_bytes);
        vmas = vmas.max(mappings());
        let keep = live.len() * (100 - FREED) / 100;
        while live.len() > keep {
            let (p, size) = live.swap_remove(below(rng.next_u64(), live.len()));
            let layout = std::alloc::Layout::from_size_align(size, 8).expect("a size");
            let t = Instant::now();
            // SAFETY: a live block of this heap with its layout, freed once.
            unsafe { heap.deallocate(p, layout) };
            latencies.push(t.elapsed().as_nanos() as u32);
            live_bytes -= size;
        }
    }
    for (p, size) in live {
        let layout = std::alloc::Layout::from_size_align(size, 8).expect("a size");
        // SAFETY: as above.
        unsafe { heap.deallocate(p, layout) };
    }
    settle();
    Stats {
        latencies,
        vmas,
        peak_live,
        held: status_bytes("VmRSS:"),
        committed: 0,
    }
}

/// The process's mappings now (0 where `/proc` is missing).
fn mappings() -> usize {
    std::fs::read_to_string("/proc/self/maps").map_or(0, |m| m.lines().count())
}

/// A second of idleness once everything is freed: bento's default decay time.
fn idle() {
    std::thread::sleep(std::time::Duration::from_millis(1100));
}

/// Runs the churn on `peer`; its row of stats.
fn run(peer: &str) -> serde_json::Value {
    let base = status_bytes("VmRSS:");
    let mut stats = match peer {
        "bento" => {
            let space =
                MemorySpace::new(SystemPages::new(), SpaceConfig::DEFAULT).expect("a space");
            // The space's decay time passes; it is told to look at the clock, as an
            // idle program's hook would.
            let mut stats = churn(&mut Api(&space), || {
                idle();
                space.decay();
            });
            stats.committed = space.stats().max_committed;
            stats
        }
        "common" => {
            let common = bento_common::CommonAllocator::new();
            let mut stats = churn(&mut Api(&common), || {
                idle();
                common.decay();
            });
            stats.committed = common.stats().max_resident;
            stats
        }
        "glibc" => churn(&mut GlobalHeap(std::alloc::System), idle),
        "mimalloc" => churn(&mut GlobalHeap(mimalloc::MiMalloc), idle),
        "jemalloc" => churn(&mut GlobalHeap(tikv_jemallocator::Jemalloc), idle),
        "talc" => churn(&mut Talc::new(2 << 30), idle),
        _ => panic!("unknown allocator {peer}; one of {PEERS:?}"),
    };
    let peak = status_bytes("VmHWM:").saturating_sub(base);
    let l = &mut stats.latencies;
    l.sort_unstable();
    let at = |q: f64| l[((l.len() - 1) as f64 * q) as usize];
    let over = |ns: u32| l.iter().filter(|&&t| t > ns).count();
    serde_json::json!({
        "allocator": peer,
        "operations": l.len(),
        "p50_ns": at(0.5),
        "p99_ns": at(0.99),
        "p999_ns": at(0.999),
        "p9999_ns": at(0.9999),
        "max_ns": at(1.0),
        "over_10us": over(10_000),
        "over_100us": over(100_000),
        "peak_live_bytes": stats.peak_live,
        "peak_rss_growth_bytes": peak,
        "peak_committed_bytes": stats.committed,
        "mappings_at_peak": stats.vmas,
        "held_after_free_all_bytes": stats.held.saturating_sub(base),
    })
}

fn main() {
    if let Some(peer) = std::env::args().nth(1) {
        println!("{}", run(&peer));
        return;
    }
    let me = std::env::current_exe().expect("the binary's path");
    let mut rows = Vec::new();
    for peer in PEERS {
        eprintln!("churn: {peer}");
        let out = Command::new(&me)
            .arg(peer)
            .stderr(Stdio::inherit())
            .output()
            .expect("run the churn in a child");
        assert!(out.status.success(), "{peer} failed");
        let row: serde_json::Value =
            serde_json::from_slice(&out.stdout).expect("a child prints one JSON row");
        rows.push(row);
    }
    let doc = serde_json::json!({ "rows": rows });
    println!(
        "{}",
        serde_json::to_string_pretty(&doc).expect("JSON of numbers")
    );
}
