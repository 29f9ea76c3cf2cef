//! The common allocator as `#[global_allocator]` under a transfer stress: a
//! producer allocates blocks of every class and some large ones, fills each with a
//! pattern, and consumers on other threads check the pattern and free them.

// Under Miri only the empty `main` is built.
#![cfg_attr(miri, allow(unused))]

use std::sync::mpsc;

use bento_common::CommonAllocator;

// Not under Miri: see docs/ARCHITECTURE.md, the code map of crates/common.
#[cfg(not(miri))]
#[global_allocator]
static GLOBAL: CommonAllocator = CommonAllocator::new();

#[cfg(miri)]
fn main() {}

const BLOCKS: usize = if cfg!(debug_assertions) {
    50_000
} else {
    500_000
};

/// The pattern of block `i`.
fn pattern(i: usize) -> u8 {
    (i * 131 % 251) as u8 | 1
}

#[cfg(not(miri))]
fn main() {
    // Started now, so that the baseline below has every region in it (some
    // targets' runtimes allocate nothing before `main`).
    GLOBAL.init().expect("the allocator starts");
    // A short run first, and a send that surely blocks: what the standard library
    // keeps once (thread bookkeeping, the main thread's cached channel context, made
    // the first time it blocks) is then in the baseline.
    transfer(16);
    let (tx, rx) = mpsc::sync_channel::<u8>(0);
    let late = std::thread::spawn(move || {
        std::thread::sleep(std::time::Duration::from_millis(50));
        rx.recv().unwrap()
    });
    tx.send(1).unwrap();
    late.join().unwrap();
    let base = GLOBAL.stats();
    transfer(BLOCKS);
    GLOBAL.validate().expect("the allocator validates");
    assert_eq!(
        GLOBAL.stats().live_blocks,
        base.live_blocks,
        "{}",
        GLOBAL.report()
    );
    println!("global_transfer: ok");
}

/// Sends `blocks` blocks through two consumers, which check and free them.
fn transfer(blocks: usize) {
    let (tx_a, rx_a) = mpsc::sync_channel::<(usize, Vec<u8>)>(64);
    let (tx_b, rx_b) = mpsc::sync_channel::<(usize, Vec<u8>)>(64);
    let consumer = |rx: mpsc::Receiver<(usize, Vec<u8>)>| {
        std::thread::spawn(move || {
            let mut n = 0;
            for (i, block) in rx {
                assert!(
                    block.iter().all(|&b| b == pattern(i)),
                    "block {i} was overwritten"
                );
                n += 1;
            }
            n
        })
    };
    let (a, b) = (consumer(rx_a), consumer(rx_b));
    for i in 0..blocks {
        let len = match i % 16 {
            15 => 300 + i % 70_000,
            _ => 1 + i % 256,
        };
        let block = vec![pattern(i); len];
        if i % 2 == 0 { &tx_a } else { &tx_b }
            .send((i, block))
            .unwrap();
    }
    drop((tx_a, tx_b));
    assert_eq!(a.join().unwrap() + b.join().unwrap(), blocks);
}
