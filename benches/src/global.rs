//! A Rust program's mix of allocations, for `cargo xtask bench-global`: each
//! `global_<allocator>` binary installs one allocator as `#[global_allocator]` and
//! runs [`main`], which prints the time and the peak resident set.
//!
//! The mix: a `BTreeMap<String, Vec<u32>>` built, queried and half emptied; a
//! `Vec<String>` built, sorted and deduplicated; a `HashMap<u64, Vec<u8>>` churned;
//! and two threads passing boxes through a channel (frees on the other thread).

use std::collections::{BTreeMap, HashMap};
use std::hint::black_box;
use std::time::Instant;

/// One round of the mix; returns a value that depends on all of it.
pub fn mix(scale: usize) -> u64 {
    let mut acc = 0u64;

    let mut tree: BTreeMap<String, Vec<u32>> = BTreeMap::new();
    for i in 0..scale {
        tree.entry(format!("entity-{:06}", (i * 7919) % (scale / 4 + 1)))
            .or_default()
            .push(i as u32);
    }
    for i in 0..scale {
        if let Some(v) = tree.get(&format!("entity-{:06}", i % (scale / 4 + 1))) {
            acc = acc.wrapping_add(v.len() as u64);
        }
    }
    let keys: Vec<String> = tree.keys().step_by(2).cloned().collect();
    for k in &keys {
        tree.remove(k);
    }
    acc = acc.wrapping_add(tree.len() as u64);
    drop((tree, keys));

    let mut words: Vec<String> = (0..scale)
        .map(|i| "w".repeat(1 + (i * 31) % 90) + &i.to_string())
        .collect();
    words.sort_unstable();
    words.dedup();
    acc = acc.wrapping_add(words.iter().map(|w| w.len() as u64).sum::<u64>());
    drop(words);

    let mut map: HashMap<u64, Vec<u8>> = HashMap::new();
    for i in 0..scale as u64 {
        map.insert(i, vec![i as u8; (i as usize * 13) % 700]);
        if i % 3 == 0 {
            map.remove(&(i / 2));
        }
    }
    acc = acc.wrapping_add(map.values().map(|v| v.len() as u64).sum::<u64>());
    drop(map);

    let (tx, rx) = std::sync::mpsc::sync_channel::<Box<[u8]>>(256);
    let consumer = std::thread::spawn(move || rx.iter().map(|b| b.len() as u64).sum::<u64>());
    for i in 0..scale {
        tx.send(vec![1u8; 16 + (i * 29) % 1000].into_boxed_slice())
            .unwrap();
    }
    drop(tx);
    acc.wrapping_add(consumer.join().unwrap())
}

/// The peak resident set of this process in KiB (`VmHWM`; 0 where `/proc` is
/// missing).
fn peak_rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

/// Runs the mix `rounds` times at the scale given as the first argument (default
/// 200 000) and prints `time_ns=<total> rss_kib=<peak> check=<value>`.
pub fn main() {
    let scale = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(200_000);
    let start = Instant::now();
    let mut check = 0u64;
    for _ in 0..3 {
        check = check.wrapping_add(mix(black_box(scale)));
    }
    let ns = start.elapsed().as_nanos();
    println!("time_ns={ns} rss_kib={} check={check}", peak_rss_kib());
}
