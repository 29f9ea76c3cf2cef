//! Threads on their own blocks: does the allocator scale from one thread to two?
//!
//! Each thread keeps 256 blocks of 16–256 B live and replaces one at random per step
//! (a free and an allocation), touching nothing another thread touches. One round
//! runs the work on one thread, then the same work on each of two threads at once;
//! the scaling is two threads' throughput over one's (2.0 is perfect). Allocators are
//! interleaved within a round, so the machine's drift falls on all of them alike.
//!
//! `cargo run --release -p bento-benches --bin scaling [rounds] [steps] [allocator]`;
//! with `SCALING_JSON=1` the summary is printed as JSON for `cargo xtask bench`:
//! `{"rounds": N, "steps": N, "rows": [{"allocator": NAME, "median_scaling": X,
//! "lowest_scaling": X, "one_thread_ns": X, "two_threads_ns": X}…]}` (the times per
//! pair, medians over the rounds).

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::Barrier;
use std::time::{Duration, Instant};

use bento_benches::Rng;

const LIVE: usize = 256;

fn layout(size: usize) -> Layout {
    Layout::from_size_align(size, 8).expect("a small size")
}

/// One thread's work in the shape `SCALING_SHAPE` names: `pairs` (a 64-byte block
/// allocated and freed at once) or the default, replacements of a random live block.
fn work<A: GlobalAlloc>(alloc: &A, seed: u64, steps: usize) -> u64 {
    if std::env::var("SCALING_SHAPE").is_ok_and(|s| s == "pairs") {
        return pairs(alloc, steps);
    }
    replace(alloc, seed, steps)
}

/// `steps` pairs of a 64-byte allocation and its free.
fn pairs<A: GlobalAlloc>(alloc: &A, steps: usize) -> u64 {
    let mut sum = 0u64;
    for _ in 0..steps {
        // SAFETY: a non-zero size.
        let p = unsafe { alloc.alloc(layout(64)) };
        assert!(!p.is_null(), "out of memory");
        // SAFETY: a fresh block of 64 bytes.
        unsafe { p.write(1) };
        sum = sum.wrapping_add(p.addr() as u64);
        // SAFETY: live, freed once.
        unsafe { alloc.dealloc(std::hint::black_box(p), layout(64)) };
    }
    sum
}

/// `steps` replacements of a random live block.
fn replace<A: GlobalAlloc>(alloc: &A, seed: u64, steps: usize) -> u64 {
    let mut rng = Rng::new(seed);
    let size = |r: u64| 16 + (r as usize & 255);
    let mut live: Vec<(*mut u8, usize)> = (0..LIVE)
        .map(|_| {
            let n = size(rng.next_u64());
            // SAFETY: a non-zero size.
            (unsafe { alloc.alloc(layout(n)) }, n)
        })
        .collect();
    let mut sum = 0u64;
    for _ in 0..steps {
        let r = rng.next_u64();
        let slot = &mut live[(r >> 40) as usize % LIVE];
        // SAFETY: a live block of the allocator, of its recorded size.
        unsafe { alloc.dealloc(slot.0, layout(slot.1)) };
        let n = size(r);
        // SAFETY: a non-zero size.
        let p = unsafe { alloc.alloc(layout(n)) };
        assert!(!p.is_null(), "out of memory");
        // SAFETY: a fresh block of at least 16 bytes.
        unsafe { p.write(n as u8) };
        sum = sum.wrapping_add(p.addr() as u64);
        *slot = (p, n);
    }
    for (p, n) in live {
        // SAFETY: live, freed once.
        unsafe { alloc.dealloc(p, layout(n)) };
    }
    sum
}

/// The wall time of `threads` threads each running `steps` steps at once.
fn run<A: GlobalAlloc + Sync>(alloc: &A, threads: usize, steps: usize) -> Duration {
    run_each(|_| alloc, threads, steps)
}

/// As [`run`], thread `t` on `alloc(t)`.
fn run_each<'a, A: GlobalAlloc + Sync + 'a>(
    alloc: impl Fn(usize) -> &'a A + Sync,
    threads: usize,
    steps: usize,
) -> Duration {
    let start = Barrier::new(threads + 1);
    let done = Barrier::new(threads + 1);
    std::thread::scope(|s| {
        for t in 0..threads {
            let (start, done, alloc) = (&start, &done, &alloc);
            s.spawn(move || {
                let alloc = alloc(t);
                // A first pass outside the clock: the thread's cache and its runs.
                std::hint::black_box(work(alloc, t as u64 + 1, steps / 8));
                start.wait();
                let cpu = thread_cpu();
                std::hint::black_box(work(alloc, t as u64 + 1, steps));
                let cpu = thread_cpu() - cpu;
                if std::env::var_os("SCALING_CPU").is_some() {
                    eprintln!(
                        "  thread {t}: {:.2} ns/pair of its CPU",
                        cpu.as_nanos() as f64 / steps as f64
                    );
                }
                done.wait();
            });
        }
        start.wait();
        let t0 = Instant::now();
        done.wait();
        t0.elapsed()
    })
}

/// This thread's CPU time so far.
fn thread_cpu() -> Duration {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `t` is a valid timespec to write; the clock exists on Linux.
    let ok = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &raw mut t) } == 0;
    assert!(ok, "no thread CPU clock");
    Duration::new(t.tv_sec as u64, t.tv_nsec as u32)
}

/// The control: no allocator at all. Every block is the thread's own 64 bytes (the
/// shapes write only a block's first byte), so what it measures is the loop and the
/// machine: how two busy cores run compared with one.
struct Control;

std::thread_local! {
    static SLOT: std::cell::UnsafeCell<[u64; 8]> = const { std::cell::UnsafeCell::new([0; 8]) };
}

// SAFETY: never used for more than a block's first byte (see `Control`); the slot is
// the thread's, alive while the thread runs, and aligned to 8.
unsafe impl GlobalAlloc for Control {
    unsafe fn alloc(&self, _: Layout) -> *mut u8 {
        SLOT.with(|s| s.get().cast())
    }

    unsafe fn dealloc(&self, _: *mut u8, _: Layout) {}
}

/// An allocator under test, by name.
struct Peer {
    name: &'static str,
    run: fn(usize, usize) -> Duration,
}

static COMMON: bento_common::CommonAllocator = bento_common::CommonAllocator::new();
static OWN: [bento_common::CommonAllocator; 2] = [
    bento_common::CommonAllocator::new(),
    bento_common::CommonAllocator::new(),
];

fn peers() -> Vec<Peer> {
    vec![
        Peer {
            name: "common",
            run: |threads, steps| run(&COMMON, threads, steps),
        },
        Peer {
            name: "control",
            run: |threads, steps| run(&Control, threads, steps),
        },
        Peer {
            name: "common-own",
            run: |threads, steps| run_each(|t| &OWN[t % 2], threads, steps),
        },
        Peer {
            name: "system",
            run: |threads, steps| run(&System, threads, steps),
        },
        Peer {
            name: "mimalloc",
            run: |threads, steps| run(&mimalloc::MiMalloc, threads, steps),
        },
        Peer {
            name: "jemalloc",
            run: |threads, steps| run(&tikv_jemallocator::Jemalloc, threads, steps),
        },
    ]
}

fn main() {
    let mut args = std::env::args().skip(1);
    let rounds: usize = args.next().map_or(3, |a| a.parse().expect("rounds"));
    let steps: usize = args.next().map_or(4_000_000, |a| a.parse().expect("steps"));
    let only = args.next();
    let peers: Vec<Peer> = peers()
        .into_iter()
        .filter(|p| only.as_deref().is_none_or(|o| o == p.name))
        .collect();
    let json = std::env::var("SCALING_JSON").is_ok_and(|v| v == "1");
    let say = |line: String| {
        if json {
            eprintln!("{line}");
        } else {
            println!("{line}");
        }
    };
    say("allocator  round  1 thread ns/pair  2 threads ns/pair  scaling".into());
    // Per peer: each round's scaling, and its times per pair on one and two threads.
    let mut all: Vec<[Vec<f64>; 3]> = (0..peers.len()).map(|_| Default::default()).collect();
    for round in 1..=rounds.max(1) {
        for (peer, [scalings, ones, twos]) in peers.iter().zip(&mut all) {
            let one = (peer.run)(1, steps);
            let two = (peer.run)(2, steps);
            let per = |d: Duration| d.as_nanos() as f64 / steps as f64;
            // Two threads did twice the work: throughput ratio 2 × one / two.
            let scaling = 2.0 * one.as_secs_f64() / two.as_secs_f64();
            scalings.push(scaling);
            ones.push(per(one));
            twos.push(per(two));
            say(format!(
                "{:<10} {round:>5}  {:>16.2}  {:>17.2}  {scaling:>7.2}",
                peer.name,
                per(one),
                per(two)
            ));
        }
    }
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let mut rows = Vec::new();
    say("allocator  median scaling  lowest".into());
    for (peer, [mut scalings, mut ones, mut twos]) in peers.iter().zip(all) {
        let mid = median(&mut scalings);
        say(format!(
            "{:<10} {mid:>14.2}  {:>6.2}",
            peer.name, scalings[0]
        ));
        rows.push(serde_json::json!({
            "allocator": peer.name,
            "median_scaling": mid,
            "lowest_scaling": scalings[0],
            "one_thread_ns": median(&mut ones),
            "two_threads_ns": median(&mut twos),
        }));
    }
    if json {
        let doc = serde_json::json!({"rounds": rounds.max(1), "steps": steps, "rows": rows});
        println!("{doc}");
    }
}
