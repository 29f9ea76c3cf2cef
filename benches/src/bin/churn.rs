//! The latency of every operation in a large churn, and the resident memory it costs:
//! sizes 16 B – 1 MiB (log-uniform), the live set grown to 128 MiB, 90 % of it freed
//! in random order, 16 rounds; every allocation and free timed on its own. Each
//! allocator runs in its own process, so that one's memory does not count against
//! another's.
//!
//! ```sh
//! cargo run --release -p bento-benches --bin churn            # every allocator, a table
//! cargo run --release -p bento-benches --bin churn -- glibc   # one row
//! ```
//!
//! Columns: latency percentiles over every operation (p50 … max), how many took
//! over 10 µs and over 100 µs, the peak resident set (`VmHWM`) less the one before the run, over the
//! peak live bytes, the most mappings the process had at a round's peak, and what
//! the process still holds a second after everything is
//! freed (no trim call; bento's space is told to look at the clock, its decay time
//! being 1 s). Every page of a block is written once after its allocation (outside
//! the timed call), as a program uses its memory.

use std::process::Command;
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

/// A `/proc/self/status` figure in bytes (0 where it is missing).
fn status_bytes(key: &str) -> usize {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|line| line.strip_prefix(key))
        .and_then(|rest| rest.split_whitespace().next()?.parse::<usize>().ok())
        .map_or(0, |kib| kib << 10)
}

struct Figures {
    latencies: Vec<u32>,
    peak_live: usize,
    /// The most mappings (`/proc/self/maps` lines) the process had at a round's peak.
    vmas: usize,
    /// The resident set once every block is freed, the heap still alive.
    held: usize,
}

/// Runs the churn on `heap`, timing each call; `settle` runs once everything is freed,
/// before the resident set is read.
fn churn<H: Heap>(heap: &mut H, settle: impl FnOnce()) -> Figures {
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
    Figures {
        latencies,
        vmas,
        peak_live,
        held: status_bytes("VmRSS:"),
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

/// Runs the churn on `peer` and prints its table row.
fn run(peer: &str) {
    let base = status_bytes("VmRSS:");
    let mut figures = match peer {
        "bento" => {
            let space =
                MemorySpace::new(SystemPages::new(), SpaceConfig::DEFAULT).expect("a space");
            // The space's decay time passes; it is told to look at the clock, as an
            // idle program's hook would.
            churn(&mut Api(&space), || {
                idle();
                space.decay();
            })
        }
        "common" => {
            let common = bento_common::CommonAllocator::new();
            churn(&mut Api(&common), || {
                idle();
                common.decay();
            })
        }
        "glibc" => churn(&mut GlobalHeap(std::alloc::System), idle),
        "mimalloc" => churn(&mut GlobalHeap(mimalloc::MiMalloc), idle),
        "jemalloc" => churn(&mut GlobalHeap(tikv_jemallocator::Jemalloc), idle),
        "talc" => churn(&mut Talc::new(2 << 30), idle),
        _ => panic!("unknown allocator {peer}; one of {PEERS:?}"),
    };
    let peak = status_bytes("VmHWM:").saturating_sub(base);
    let l = &mut figures.latencies;
    l.sort_unstable();
    let at = |q: f64| f64::from(l[((l.len() - 1) as f64 * q) as usize]) / 1000.0;
    let slow = l.iter().filter(|&&ns| ns > 100_000).count();
    let over_10 = l.iter().filter(|&&ns| ns > 10_000).count();
    let mib = |b: usize| b as f64 / f64::from(1 << 20);
    println!(
        "| {peer} | {} | {:.2} | {:.1} | {:.1} | {:.1} | {:.0} | {over_10} | {slow} | {:.2} | {} | {:.1} MiB |",
        l.len(),
        at(0.5),
        at(0.99),
        at(0.999),
        at(0.9999),
        at(1.0),
        peak as f64 / figures.peak_live as f64,
        figures.vmas,
        mib(figures.held.saturating_sub(base)),
    );
}

fn main() {
    if let Some(peer) = std::env::args().nth(1) {
        run(&peer);
        return;
    }
    println!(
        "| allocator | operations | p50 µs | p99 µs | p99.9 µs | p99.99 µs | max µs | over 10 µs | over 100 µs | peak RSS ÷ peak live | mappings at peak | held 1 s after free-all |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|");
    let me = std::env::current_exe().expect("the binary's path");
    for peer in PEERS {
        let status = Command::new(&me)
            .arg(peer)
            .status()
            .expect("run the churn in a child");
        assert!(status.success(), "{peer} failed");
    }
}
