//! The common allocator as the program's allocator: every `Box`, `Vec` and `String`
//! of the program lives in its size-class regions.
//!
//! `cargo run -p bento-alloc --example global_allocator`

use std::collections::BTreeMap;

use bento_alloc::common::CommonAllocator;

#[global_allocator]
static GLOBAL: CommonAllocator = CommonAllocator::new();

fn main() {
    let mut scores: BTreeMap<String, Vec<u32>> = BTreeMap::new();
    for i in 0..10_000u32 {
        scores
            .entry(format!("player-{}", i % 100))
            .or_default()
            .push(i);
    }
    let threads: Vec<_> = (0..4)
        .map(|t| std::thread::spawn(move || (0..1000).map(|i| format!("{t}-{i}")).count()))
        .collect();
    let made: usize = threads.into_iter().map(|t| t.join().unwrap()).sum();
    assert_eq!((scores.len(), made), (100, 4000));
    let stats = GLOBAL.stats();
    assert!(stats.live_blocks > 100);
    println!("{}", GLOBAL.report());
}
