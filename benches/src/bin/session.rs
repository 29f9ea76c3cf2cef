//! The fragmentation stat: a synthetic game session of 100 level cycles
//! (`bento_trace::workload`, the workload of the space's long-session test) on each
//! allocator, printing its peak footprint and peak live bytes as JSON for the report
//! (`cargo xtask bench` writes it to `target/bench-report/session.json`).
//!
//! ```sh
//! cargo run --release -p bento-benches --bin session            # every allocator
//! cargo run --release -p bento-benches --bin session -- glibc   # one row
//! ```
//!
//! The output: `{"levels": N, "rows": [ROW…]}`, a row being `{"allocator": NAME,
//! "peak_live_bytes": N, "peak_committed_bytes": N or null, "peak_rss_growth_bytes": N}`.
//! The committed stat is, for a memory space, its peak `committed`, and for the
//! common allocator its peak `resident` (committed, parked and its own tables; exact,
//! from their counters); `null` for an allocator that keeps no such stat. The
//! resident set's growth is, for every allocator, the process's resident set sampled
//! at each checkpoint (after each level loads and at each frame's busiest moment) less
//! the one before the session. Each allocator runs in its own process, so that one's
//! memory does not count against another.

use std::process::{Command, Stdio};

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

/// Runs the session on `peer`; its row of stats.
fn run(peer: &str, config: SessionConfig) -> serde_json::Value {
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
    serde_json::json!({
        "allocator": peer,
        "peak_live_bytes": report.peak_live,
        "peak_committed_bytes": committed,
        "peak_rss_growth_bytes": peak_rss,
    })
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
        println!("{}", run(peer, config));
        return;
    }
    let me = std::env::current_exe().expect("the binary's path");
    let mut rows = Vec::new();
    for peer in PEERS {
        eprintln!("session: {peer}");
        let out = Command::new(&me)
            .args([peer.to_string(), levels.to_string()])
            .stderr(Stdio::inherit())
            .output()
            .expect("run the session in a child");
        assert!(out.status.success(), "{peer} failed");
        let row: serde_json::Value =
            serde_json::from_slice(&out.stdout).expect("a child prints one JSON row");
        rows.push(row);
    }
    let doc = serde_json::json!({ "levels": levels, "rows": rows });
    println!(
        "{}",
        serde_json::to_string_pretty(&doc).expect("JSON of numbers")
    );
}
