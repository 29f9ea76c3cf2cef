//! Sampled allocation profiles through heaps: the estimate per tag beside the true
//! live bytes, every entry point keeping the table right, and threads.

#![cfg(not(miri))]

use core::alloc::Layout;
use core::ptr::NonNull;

use allocator_api2::alloc::Global;
use bento_heap::{HeapBuilder, Tag, Track};
use bento_pages::{ProfileConfig, Profiler};

static MESHES: Tag = Tag::new("meshes");
static SOUNDS: Tag = Tag::new("sounds");
static SCRIPTS: Tag = Tag::new("scripts");

/// A small xorshift, for the workloads' sizes and orders.
fn next(x: &mut u64) -> u64 {
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    *x
}

#[test]
fn the_estimate_per_tag_is_within_a_tenth_of_the_live_bytes() {
    let profiler = Profiler::new(ProfileConfig::DEFAULT.every(8 << 10).backtrace(false)).unwrap();
    let heap = HeapBuilder::new("profile-tags")
        .register(false)
        .tracking(Track::Sites)
        .profile(profiler)
        .build(Global);
    // Three tags of block sizes far below, near and far above the mean, replaced at
    // random, each some 10 MiB live at the end: 1,200 samples or more a tag at a mean of
    // 8 KiB, so one standard error is under 3 % and 10 % more than three.
    let tags: [(&Tag, usize, usize); 3] = [
        (&MESHES, 2048, 20_000),
        (&SOUNDS, 200_000, 200),
        (&SCRIPTS, 128, 320_000),
    ];
    let mut live: Vec<(NonNull<u8>, Layout)> = Vec::new();
    let mut x = 0x4242_4242u64;
    for round in 0..8 {
        for &(tag, size, count) in &tags {
            for _ in 0..count / 4 {
                let size = size / 2 + (next(&mut x) as usize % size);
                let layout = Layout::from_size_align(size, 8).unwrap();
                live.push((heap.alloc_tagged(layout, tag).unwrap(), layout));
            }
        }
        // Free a random half.
        for _ in 0..live.len() / 2 {
            let i = next(&mut x) as usize % live.len();
            let (p, layout) = live.swap_remove(i);
            // SAFETY: live, freed once.
            unsafe { heap.free(p, layout) };
        }
        let _ = round;
    }
    for stats in heap.tag_stats() {
        let estimate = profiler.estimate(|l, _| l.tag == Some(stats.tag)) as f64;
        let truth = stats.live_bytes as f64;
        println!("tag {}: estimated {estimate}, live {truth}", stats.tag);
        assert!(
            (estimate / truth - 1.0).abs() < 0.10,
            "tag {}: estimated {estimate}, live {truth}",
            stats.tag
        );
    }
    for (p, layout) in live {
        // SAFETY: live, freed once.
        unsafe { heap.free(p, layout) };
    }
    assert_eq!(profiler.estimate(|l, _| l.heap == Some("profile-tags")), 0);
}

#[test]
fn resizes_and_discards_keep_the_profile_right() {
    let profiler = Profiler::new(ProfileConfig::DEFAULT.every(4096).backtrace(true)).unwrap();
    let heap = HeapBuilder::new("profile-resize")
        .register(false)
        .profile(profiler)
        .build(Global);
    let mut v: allocator_api2::vec::Vec<u8, _> = allocator_api2::vec::Vec::new_in(&heap);
    for i in 0..(4 << 20) {
        v.push(i as u8);
    }
    // The last block alone counts, once: about 4 MiB (the vector's capacity).
    let est = profiler.estimate(|l, _| l.heap == Some("profile-resize"));
    assert_eq!(est as usize, v.capacity());
    drop(v);
    assert_eq!(
        profiler.estimate(|l, _| l.heap == Some("profile-resize")),
        0
    );
    let mut buf = vec![core::mem::MaybeUninit::uninit(); 1 << 20];
    let mut bump = bento_primitives::Bump::new(&mut buf);
    for _ in 0..3 {
        let mut frame = HeapBuilder::new("profile-frame")
            .register(false)
            .profile(profiler)
            .build(&bump);
        for n in 1..100 {
            core::mem::forget(allocator_api2::vec::Vec::<u8, _>::with_capacity_in(
                n * 64,
                &frame,
            ));
        }
        assert!(profiler.estimate(|l, _| l.heap == Some("profile-frame")) > 0);
        frame.discard_all();
        assert_eq!(profiler.estimate(|l, _| l.heap == Some("profile-frame")), 0);
        drop(frame);
        bump.reset();
    }
}

#[test]
fn threads_share_a_profiler() {
    let profiler = Profiler::new(ProfileConfig::DEFAULT.every(8192).backtrace(false)).unwrap();
    let heap = HeapBuilder::new("profile-threads")
        .register(false)
        .profile(profiler)
        .build(Global);
    std::thread::scope(|s| {
        for t in 0..4u64 {
            let heap = &heap;
            s.spawn(move || {
                let mut x = t + 1;
                let mut kept = Vec::new();
                for _ in 0..20_000 {
                    let layout =
                        Layout::from_size_align(16 + next(&mut x) as usize % 4000, 8).unwrap();
                    kept.push((heap.alloc(layout).unwrap(), layout));
                    if kept.len() > 64 {
                        let (p, layout) = kept.swap_remove(next(&mut x) as usize % kept.len());
                        // SAFETY: live, freed once.
                        unsafe { heap.free(p, layout) };
                    }
                }
                for (p, layout) in kept {
                    // SAFETY: live, freed once.
                    unsafe { heap.free(p, layout) };
                }
            });
        }
    });
    let s = profiler.stats();
    assert!(s.sampled > 1000, "{s:?}");
    assert_eq!(s.live_samples, 0, "{s:?}");
    assert_eq!(heap.validate().unwrap().live_blocks, 0);
}
