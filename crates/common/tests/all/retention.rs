//! The retention policy through the common allocator: freed memory kept, then given
//! back on the decay schedule with the blocks the regions and the thread keep.

use core::alloc::Layout;
use core::ptr::NonNull;
use std::sync::atomic::{AtomicU64, Ordering};

use bento_common::{CommonAllocator, CommonConfig};
use bento_pages::{Decay, HeapPages, Phase, Retention};

use crate::heap;

/// Grows a live set of sizes 16 B – 256 KiB to `live` bytes and frees 90 % of it,
/// `rounds` times, then frees everything; writes each page of each block.
fn churn(common: &CommonAllocator<HeapPages>, live: usize, rounds: usize) {
    let mut rng = bento_testkit::Rng::new(0x2545_F491_4F6C_DD1D);
    let mut next = move || rng.next_u64();
    let mut held: Vec<(NonNull<u8>, Layout)> = Vec::new();
    let mut bytes = 0;
    for _ in 0..rounds {
        while bytes < live {
            let r = next();
            let base = 16usize << (r % 15);
            let size = base + ((r >> 8) as usize & (base - 1));
            let layout = Layout::from_size_align(size, 8).unwrap();
            let p = common.alloc(layout).unwrap();
            for off in (0..size).step_by(4096) {
                // SAFETY: inside the fresh block.
                unsafe { p.as_ptr().add(off).write(1) };
            }
            held.push((p, layout));
            bytes += size;
        }
        while held.len() > held.len() / 10 + 1 {
            let (p, layout) = held.swap_remove(next() as usize % held.len());
            // SAFETY: a live block with its layout, freed once.
            unsafe { common.dealloc(p, layout) };
            bytes -= layout.size();
        }
    }
    for (p, layout) in held {
        // SAFETY: as above.
        unsafe { common.dealloc(p, layout) };
    }
}

fn sized() -> (usize, usize) {
    if cfg!(miri) {
        (256 << 10, 2)
    } else {
        (24 << 20, 4)
    }
}

#[test]
fn memory_freed_by_a_churn_goes_back_within_the_decay_time_without_trim() {
    let common = CommonAllocator::with_config(
        CommonConfig::DEFAULT
            .with_pages(heap())
            .with_retention(Retention::Decay(Decay::frames(4))),
    );
    let (live, rounds) = sized();
    churn(&common, live, rounds);
    let s = common.stats();
    assert!(s.cache.parked > 0, "freed pages are kept: {:?}", s.cache);
    for _ in 0..8 {
        common.tick();
    }
    let s = common.stats();
    assert!(
        s.resident <= s.tables + (4 << 20),
        "{} bytes resident after the decay time ({} of tables)",
        s.resident,
        s.tables
    );
    assert_eq!((s.cache.parked, s.committed), (0, 0), "{s:?}");
    common.validate().unwrap();
}

static NOW: AtomicU64 = AtomicU64::new(0);

fn fake_clock() -> u64 {
    NOW.load(Ordering::Relaxed)
}

/// A program that never ticks a frame: a thread reads the clock with `tick`, as
/// bento-malloc's does.
#[test]
fn a_decay_in_milliseconds_gives_back_by_the_clock() {
    let decay = Decay {
        frames: 0,
        millis: 100,
        clock: Some(fake_clock),
        peak_percent: 100,
    };
    let common = CommonAllocator::with_config(
        CommonConfig::DEFAULT
            .with_pages(heap())
            .with_retention(Retention::Decay(decay)),
    );
    let (live, rounds) = sized();
    churn(&common, live / 4, rounds);
    assert!(common.kept() > 0);
    common.tick();
    assert!(common.kept() > 0, "no time passed");
    for ms in [60, 120] {
        NOW.store(ms, Ordering::Relaxed);
        common.tick();
    }
    // The idle hook does the same.
    for ms in [180, 240] {
        NOW.store(ms, Ordering::Relaxed);
        common.decay();
    }
    let s = common.stats();
    assert!(s.resident <= s.tables + (4 << 20), "{s:?}");
    assert_eq!(s.cache.parked, 0);
}

/// Loads and unloads hold what is kept; play lets it decay.
#[test]
fn what_an_unload_frees_is_kept_through_the_load() {
    let common = CommonAllocator::with_config(
        CommonConfig::DEFAULT
            .with_pages(heap())
            .with_retention(Retention::Decay(Decay::frames(40))),
    );
    let layout = Layout::from_size_align(1 << 20, 16).unwrap();
    let p = common.alloc(layout).unwrap();
    common.phase(Phase::Unload);
    // SAFETY: live, freed once.
    unsafe { common.dealloc(p, layout) };
    let kept = common.kept();
    assert!(kept >= 1 << 20);
    let report = common.report().to_string();
    assert!(report.contains(" kept for reuse ("), "{report}");
    common.phase(Phase::Load);
    for _ in 0..20 {
        common.tick();
    }
    assert_eq!(common.kept(), kept, "held through the load");
    let hits = common.stats().cache.hits;
    let q = common.alloc(layout).unwrap();
    assert!(
        common.stats().cache.hits >= hits + 256,
        "the load reuses the pages"
    );
    // SAFETY: live, freed once.
    unsafe { common.dealloc(q, layout) };
    common.phase(Phase::Play);
    for _ in 0..40 {
        common.tick();
    }
    assert_eq!(common.kept(), 0, "decayed in play");
}

/// Threads allocate and free while another ticks, changes phase and trims: the
/// stats stay consistent and everything decays at the end.
#[test]
fn ticks_and_trims_from_another_thread_meet_allocations() {
    let common = CommonAllocator::with_config(
        CommonConfig::DEFAULT
            .with_pages(heap())
            .with_retention(Retention::Decay(Decay::frames(2))),
    );
    let rounds = if cfg!(miri) { 12 } else { 2000 };
    std::thread::scope(|s| {
        for t in 0..3 {
            let common = &common;
            s.spawn(move || {
                for i in 0..rounds {
                    let size = 64 << ((i + t) % 12);
                    let layout = Layout::from_size_align(size, 16).unwrap();
                    let p = common.alloc(layout).unwrap();
                    // SAFETY: inside the block, then freed once.
                    unsafe {
                        p.as_ptr().write(t as u8);
                        p.as_ptr().add(size - 1).write(t as u8);
                        common.dealloc(p, layout);
                    }
                }
            });
        }
        let common = &common;
        s.spawn(move || {
            for i in 0..rounds / 4 {
                common.tick();
                match i % 50 {
                    0 => common.phase(Phase::Unload),
                    5 => common.phase(Phase::Load),
                    10 => common.phase(Phase::Play),
                    49 => {
                        common.trim();
                    }
                    _ => {}
                }
            }
        });
    });
    common.phase(Phase::Play);
    for _ in 0..4 {
        common.tick();
    }
    common.validate().unwrap();
    let s = common.stats();
    assert_eq!((s.live_blocks, s.cache.parked), (0, 0), "{s:?}");
}

/// `Retention::Eager`: no decay, and no more kept than the small cache's limit.
#[test]
fn eager_keeps_only_its_small_cache() {
    let common = CommonAllocator::with_config(
        CommonConfig::DEFAULT
            .with_pages(heap())
            .with_retention(Retention::Eager),
    );
    let (live, rounds) = sized();
    churn(&common, live, rounds);
    for _ in 0..100 {
        common.tick();
    }
    let s = common.stats();
    assert!(s.cache.limit <= 8 << 20, "{:?}", s.cache);
    // What the source holds beyond the blocks' pages and the tables is the small
    // cache, no more.
    assert!(s.cache.parked <= s.cache.limit, "{:?}", s.cache);
    assert_eq!(s.resident, s.committed + s.cache.parked + s.tables, "{s:?}");
    assert_eq!(s.cache.steps, 0, "no decay under Eager");
    common.validate().unwrap();
}

/// A game that ticks under the default decay in frames, then switches to a decay in
/// milliseconds (its menus, or the window minimised) and goes on ticking: the clock
/// rules from the switch, through `tick` and `decay` alike.
#[cfg(not(miri))]
#[test]
fn a_decay_in_milliseconds_set_after_ticks_gives_back_by_the_os_clock() {
    let common = CommonAllocator::with_config(CommonConfig::DEFAULT.with_pages(heap()));
    let (live, rounds) = sized();
    for _ in 0..10 {
        common.tick();
    }
    churn(&common, live / 4, rounds);
    assert!(common.kept() > 0);
    common.set_retention(Retention::Decay(Decay::millis(20)));
    let start = std::time::Instant::now();
    let mut frame = 0u32;
    while common.kept() > 0 {
        assert!(
            start.elapsed() < std::time::Duration::from_secs(10),
            "still kept after 10 s under a decay of 20 ms: {:?}",
            common.stats().cache
        );
        std::thread::sleep(std::time::Duration::from_millis(2));
        frame += 1;
        if frame.is_multiple_of(2) {
            common.tick();
        } else {
            common.decay();
        }
    }
    let s = common.stats();
    assert!(s.resident <= s.tables + (4 << 20), "{s:?}");
    common.validate().unwrap();
}
