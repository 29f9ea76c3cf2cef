//! `cargo xtask bench-global [ROUNDS]`: the same program (`bento_benches::global`, a
//! Rust program's mix of maps, strings and channels) built once with each allocator
//! as `#[global_allocator]`, run in turn ROUNDS times (default 5, alternating so that
//! machine noise falls on every allocator alike), and the median time of each as a
//! ratio (bento-common's ÷ each), with the peak resident set. Not part of CI.

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

/// Builds and runs the programs `rounds` times each; the table of their medians.
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
    let mut times: Vec<Vec<f64>> = vec![Vec::new(); PEERS.len()];
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
            times[i].push(ns as f64 / 1e6);
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
    let medians: Vec<f64> = times
        .iter_mut()
        .map(|t| {
            t.sort_by(f64::total_cmp);
            t[t.len() / 2]
        })
        .collect();
    let mut table = String::from(
        "| allocator | median time | bento-common ÷ it | peak RSS |\n|---|---|---|---|\n",
    );
    for (i, peer) in PEERS.iter().enumerate() {
        table.push_str(&format!(
            "| {peer} | {:.1} ms | {:.2} | {:.1} MiB |\n",
            medians[i],
            medians[0] / medians[i],
            rss[i] as f64 / 1024.0
        ));
    }
    Ok(table)
}
