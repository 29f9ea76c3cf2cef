//! An idle program over the common allocator as `#[global_allocator]`: what it keeps
//! after a large free while it waits without allocating (all of it, within the cap),
//! and what a purger gives back within the decay time.

// Under Miri only the empty `main` is built (the test waits on the OS clock).
#![cfg_attr(miri, allow(unused))]

use std::time::{Duration, Instant};

use bento_common::{CommonAllocator, CommonConfig};
use bento_pages::{Decay, Retention};

/// The decay of this binary's allocator.
const DECAY_MS: u32 = 50;

#[cfg(not(miri))]
#[global_allocator]
static GLOBAL: CommonAllocator = CommonAllocator::with_config(
    CommonConfig::DEFAULT.with_retention(Retention::Decay(Decay::millis(DECAY_MS))),
);

#[cfg(miri)]
fn main() {}

/// Sleeps without allocating until `done` holds or `limit` passes; says which.
#[cfg(not(miri))]
fn wait_for(limit: Duration, done: impl Fn() -> bool) -> bool {
    let start = Instant::now();
    while !done() {
        if start.elapsed() > limit {
            return false;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    true
}

#[cfg(not(miri))]
fn main() {
    GLOBAL.init().expect("the allocator starts");
    GLOBAL.trim();
    let base = GLOBAL.stats();

    // 64 MiB in blocks of 1 MiB and 1 KiB, written, then freed whole.
    let big: Vec<Vec<u8>> = (0..48).map(|i| vec![i as u8; 1 << 20]).collect();
    let small: Vec<Vec<u8>> = (0..16 << 10).map(|i| vec![i as u8; 1 << 10]).collect();
    assert!(big.iter().all(|b| b[1000] == b[0]) && small.iter().all(|b| b[10] == b[0]));
    drop((big, small));
    let kept = GLOBAL.kept();
    assert!(
        kept >= 16 << 20,
        "a 64 MiB free keeps pages for reuse: {kept}"
    );

    // Idle: no allocation, no tick, no `decay`, no purger: it all stays.
    let gone = wait_for(Duration::from_millis(10 * u64::from(DECAY_MS)), || {
        GLOBAL.kept() < kept
    });
    assert!(!gone, "an idle allocator with no purger gave memory back");

    // The purger gives it back within a few decay times (the bound is generous: the
    // machine may be busy).
    let purger = GLOBAL.spawn_purger().expect("a thread");
    assert!(
        wait_for(Duration::from_secs(10), || GLOBAL.kept() == 0),
        "the purger left {} bytes kept",
        GLOBAL.kept()
    );
    // The freed blocks the regions kept went with the pages: down to the tables.
    assert!(
        wait_for(Duration::from_secs(10), || {
            GLOBAL.stats().resident <= base.resident + (2 << 20)
        }),
        "resident {} after the purge, {} before the peak",
        GLOBAL.stats().resident,
        base.resident
    );
    drop(purger);

    // A dropped purger has stopped: memory freed now stays while the program idles.
    let again: Vec<Vec<u8>> = (0..16).map(|i| vec![i as u8; 1 << 20]).collect();
    drop(again);
    let kept = GLOBAL.kept();
    assert!(kept > 0);
    let gone = wait_for(Duration::from_millis(10 * u64::from(DECAY_MS)), || {
        GLOBAL.kept() < kept
    });
    assert!(!gone, "a dropped purger still ran");
    GLOBAL.validate().expect("valid");
    println!("global_idle: ok");
}
