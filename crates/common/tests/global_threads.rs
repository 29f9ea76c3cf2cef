//! The common allocator as `#[global_allocator]` with four threads exchanging boxes
//! through channels: every block is freed on another thread than the one that
//! allocated it, and the stats come back to where they were.

// Under Miri only the empty `main` is built.
#![cfg_attr(miri, allow(unused))]

use std::sync::mpsc;

mod os_global;

#[cfg(not(miri))]
use os_global::GLOBAL;

#[cfg(miri)]
fn main() {}

const THREADS: usize = 4;
const PER_THREAD: usize = if cfg!(debug_assertions) {
    20_000
} else {
    200_000
};

#[cfg(not(miri))]
fn main() {
    os_global::start();
    // Warm up what the standard library allocates once (thread bookkeeping, the
    // standard output buffer).
    std::thread::spawn(|| println!("global_threads: start"))
        .join()
        .unwrap();
    let base = GLOBAL.stats();

    let (senders, receivers): (Vec<_>, Vec<_>) =
        (0..THREADS).map(|_| mpsc::channel::<Box<[u64]>>()).unzip();
    let handles: Vec<_> = receivers
        .into_iter()
        .enumerate()
        .map(|(t, rx)| {
            let next = senders[(t + 1) % THREADS].clone();
            std::thread::spawn(move || {
                let mut received = 0usize;
                for i in 0..PER_THREAD {
                    let len = 1 + (i * 31 + t) % 200;
                    let mut b = vec![0u64; len].into_boxed_slice();
                    b.fill((t * PER_THREAD + i) as u64);
                    next.send(b).unwrap();
                    while let Ok(b) = rx.try_recv() {
                        assert!(b.iter().all(|&v| v == b[0]), "a block changed in flight");
                        received += 1;
                    }
                }
                drop(next);
                for b in rx {
                    assert!(b.iter().all(|&v| v == b[0]));
                    received += 1;
                }
                received
            })
        })
        .collect();
    drop(senders);
    let received: usize = handles.into_iter().map(|h| h.join().unwrap()).sum();
    assert_eq!(received, THREADS * PER_THREAD);

    GLOBAL.validate().expect("the allocator validates");
    let end = GLOBAL.stats();
    assert_eq!(end.live_blocks, base.live_blocks, "{}", GLOBAL.report());
    println!(
        "global_threads: ok, {} lock waits\n{}",
        end.contended,
        GLOBAL.report()
    );
}
