//! The common allocator as `#[global_allocator]` under a real workload: millions of
//! `String`s, `Vec`s and map entries built and dropped; its stats agree with what
//! the test knows is live.

// Under Miri only the empty `main` is built.
#![cfg_attr(miri, allow(unused))]

use std::collections::{BTreeMap, HashMap};

mod os_global;

#[cfg(not(miri))]
use os_global::GLOBAL;

#[cfg(miri)]
fn main() {}

/// How much work: a million allocations in release builds, a tenth in debug.
const SCALE: usize = if cfg!(debug_assertions) {
    100_000
} else {
    1_000_000
};

/// The stats with this thread's cache flushed: the blocks of a medium bin in a
/// cache count at the bin's size, so that live bytes are exact only without them.
#[cfg(not(miri))]
fn settled() -> bento_common::CommonStats {
    GLOBAL.trim();
    GLOBAL.stats()
}

#[cfg(not(miri))]
fn main() {
    os_global::start();
    let base = settled();

    // Exactly what the test holds shows in the stats.
    let boxes: Vec<Box<[u8; 100]>> = (0..1000).map(|i| Box::new([i as u8; 100])).collect();
    let s = GLOBAL.stats();
    // The vector's own buffer is one large block more.
    assert_eq!(
        s.live_blocks,
        base.live_blocks + 1001,
        "{}",
        GLOBAL.report()
    );
    assert_eq!(
        s.regions()[10].live_blocks - base.regions()[10].live_blocks,
        1000,
        "the 112-byte class"
    );
    assert!(boxes.iter().enumerate().all(|(i, b)| b[99] == i as u8));
    drop(boxes);

    let mut total = 0usize;
    for round in 0..4 {
        // Strings of every small size and some large ones.
        let strings: Vec<String> = (0..SCALE / 4)
            .map(|i| "x".repeat(1 + (i * 7 + round) % 600))
            .collect();
        total += strings.iter().map(String::len).sum::<usize>();

        // A BTreeMap<String, Vec<u32>> built and queried: a Rust program's mix.
        let mut tree: BTreeMap<String, Vec<u32>> = BTreeMap::new();
        for i in 0..SCALE / 20 {
            tree.entry(format!("key-{}", i % 5000))
                .or_default()
                .push(i as u32);
        }
        assert_eq!(tree.len(), 5000.min(SCALE / 20));
        total += tree.values().map(Vec::len).sum::<usize>();

        let mut map: HashMap<u64, Vec<u8>> = HashMap::new();
        for i in 0..SCALE / 20 {
            map.insert(i as u64, vec![i as u8; i % 300]);
            if i % 3 == 0 {
                map.remove(&(i as u64 / 2));
            }
        }
        total += map.len();
        drop((strings, tree, map));
        GLOBAL
            .validate()
            .expect("the allocator validates after each round");
    }
    assert!(total > SCALE);

    let end = settled();
    assert_eq!(end.live_blocks, base.live_blocks, "{}", GLOBAL.report());
    assert_eq!(end.live_bytes, base.live_bytes);
    let trimmed = end;
    assert_eq!(trimmed.cache.parked, 0);
    assert!(
        trimmed.resident <= base.resident + (4 << 20),
        "{}",
        GLOBAL.report()
    );
    println!("global_workload: ok\n{}", GLOBAL.report());
}
