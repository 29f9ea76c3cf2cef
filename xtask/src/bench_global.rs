//! `cargo xtask bench-global [ROUNDS]`: the same program (`bento_benches::global`, a
//! Rust program's mix of maps, strings and channels) built once with each allocator
//! as `#[global_allocator]`, run in turn ROUNDS times (default 5, alternating so that
//! machine noise falls on every allocator alike); prints each one's median, fastest
//! and slowest time and its peak resident set as JSON (`cargo xtask bench` writes it
//! to `target/bench-report/global.json` and the report takes the ratios):
//! `{"rounds": N, "rows": [{"allocator": NAME, "median_time_ns": N, "min_time_ns": N,
//! "max_time_ns": N, "peak_rss_bytes": N}…]}`. Not part of CI.

use std::process::Command;

use crate::step::{Outcome, Step, cargo, print_table, rounds_arg, status, target_dir};

pub(crate) const STEP: Step = Step {
    name: "bench-global",
    run,
};

/// The allocators, by binary (`global_<name>`).
const PEERS: &[&str] = &["common", "system", "mimalloc", "jemalloc"];

fn run() -> Outcome {
    print_table(measure(rounds_arg()))
}

/// Builds and runs the programs `rounds` times each; their stats as JSON.
pub(crate) fn measure(rounds: usize) -> Result<String, String> {
    let mut build = cargo();
    build.args(["build", "--release", "-p", "bento-benches"]);
    for peer in PEERS {
        build.args(["--bin", &format!("global_{peer}")]);
    }
    if let Outcome::Failed(e) = status(build) {
        return Err(e);
    }
    let dir = target_dir().join("release");
    let mut times: Vec<Vec<u64>> = vec![Vec::new(); PEERS.len()];
    let mut rss = vec![0u64; PEERS.len()];
    let mut checks = vec![0u64; PEERS.len()];
    for round in 0..rounds {
        for (i, peer) in PEERS.iter().enumerate() {
            let out = match Command::new(dir.join(format!("global_{peer}"))).output() {
                Ok(out) if out.status.success() => out,
                Ok(out) => return Err(format!("global_{peer} exited with {}", out.status)),
                Err(e) => return Err(format!("could not run global_{peer}: {e}")),
            };
            let line = String::from_utf8_lossy(&out.stdout);
            let field = |name: &str| -> Option<u64> {
                line.split_whitespace()
                    .find_map(|f| f.strip_prefix(name))
                    .and_then(|v| v.parse().ok())
            };
            let (Some(ns), Some(kib), Some(check)) =
                (field("time_ns="), field("rss_kib="), field("check="))
            else {
                return Err(format!("global_{peer} printed `{line}`"));
            };
            times[i].push(ns);
            rss[i] = rss[i].max(kib);
            checks[i] = check;
            println!("round {round}: {peer:9} {:8.1} ms", ns as f64 / 1e6);
        }
    }
    if checks.iter().any(|&c| c != checks[0]) {
        return Err(format!(
            "the allocators computed different results: {checks:?}"
        ));
    }
    let rows: Vec<serde_json::Value> = PEERS
        .iter()
        .zip(times.iter_mut().zip(&rss))
        .map(|(peer, (t, kib))| {
            t.sort_unstable();
            serde_json::json!({
                "allocator": peer,
                "median_time_ns": t[t.len() / 2],
                "min_time_ns": t[0],
                "max_time_ns": t[t.len() - 1],
                "peak_rss_bytes": kib * 1024,
            })
        })
        .collect();
    let doc = serde_json::json!({ "rounds": rounds, "rows": rows });
    serde_json::to_string_pretty(&doc).map_err(|e| e.to_string())
}
