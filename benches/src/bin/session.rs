//! The fragmentation figure: a synthetic game session of 100 level cycles
//! (`bento_trace::workload`, the workload of the space's long-session test) on each
//! allocator, reporting peak footprint ÷ peak live bytes.
//!
//! ```sh
//! cargo run --release -p bento-benches --bin session            # every allocator
//! cargo run --release -p bento-benches --bin session -- glibc   # one
//! ```
//!
//! The footprint is, for a memory space, its peak `committed`, and for the common
//! allocator its peak `resident` (committed, parked and its own tables; exact, from
//! their counters) and, for every allocator, the process's resident set sampled at each
//! checkpoint (after each level loads and at each frame's busiest moment) less the
//! resident set before the session. Each allocator runs in its own process, so that
//! one's memory does not count against another.

use std::process::Command;

use bento_pages::SystemPages;
use bento_space::{MemorySpace, SpaceConfig};
use bento_testkit::workload::{Checkpoint, Session, SessionConfig, play};
use bento_trace::{ApiTarget, GlobalTarget as Global};

const PEERS: &[&str] = &[
    "bento",
    "bento-64k-pages",
    "common",
    "glibc",
    "mimalloc",
    "jemalloc",
];

/// The resident set of this process in bytes (0 where `/proc` is missing).
fn rss() -> usize {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: usize = statm
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    pages * 4096
}

/// Runs the session on `peer`; prints one table row.
fn run(peer: &str, config: SessionConfig) {
    let base = rss();
    let mut peak_rss = 0usize;
    let mut sample = |_: Checkpoint, _: usize| {
        peak_rss = peak_rss.max(rss().saturating_sub(base));
    };
    let session = Session::new(config);
    let (report, committed) = match peer {
        "bento" | "bento-64k-pages" => {
            let page = if peer == "bento" { 4096 } else { 64 << 10 };
            let space = MemorySpace::new(
                SystemPages::new(),
                SpaceConfig::DEFAULT.with_page_size(page),
            )
            .expect("a space");
            let report = play(&mut ApiTarget(&&space), session, &mut sample);
            (report, Some(space.stats().max_committed))
        }
        "common" => {
            let mut common = Global(bento_common::CommonAllocator::new());
            let report = play(&mut common, session, &mut sample);
            (report, Some(common.0.stats().max_resident))
        }
        "glibc" => (
            play(&mut Global(std::alloc::System), session, &mut sample),
            None,
        ),
        "mimalloc" => (
            play(&mut Global(mimalloc::MiMalloc), session, &mut sample),
            None,
        ),
        "jemalloc" => (
            play(
                &mut Global(tikv_jemallocator::Jemalloc),
                session,
                &mut sample,
            ),
            None,
        ),
        _ => panic!("unknown allocator {peer}; one of {PEERS:?}"),
    };
    assert_eq!(report.failures, 0);
    let live = report.peak_live as f64;
    let mib = |b: usize| b as f64 / f64::from(1 << 20);
    let committed = committed.map_or("–".to_owned(), |c| {
        format!("{:.1} MiB ({:.3})", mib(c), c as f64 / live)
    });
    println!(
        "| {peer} | {:.1} MiB | {committed} | {:.1} MiB ({:.3}) |",
        mib(report.peak_live),
        mib(peak_rss),
        peak_rss as f64 / live
    );
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let levels = args
        .get(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(SessionConfig::GAME.levels);
    let config = SessionConfig {
        levels,
        ..SessionConfig::GAME
    };
    if let Some(peer) = args.first() {
        run(peer, config);
        return;
    }
    println!("| allocator | peak live | peak committed (÷ live) | peak RSS growth (÷ live) |");
    println!("|---|---|---|---|");
    let me = std::env::current_exe().expect("the binary's path");
    for peer in PEERS {
        let status = Command::new(&me)
            .args([peer.to_string(), levels.to_string()])
            .status()
            .expect("run the session in a child");
        assert!(status.success(), "{peer} failed");
    }
}
