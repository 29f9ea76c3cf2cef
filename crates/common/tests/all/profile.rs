//! Sampled allocation profiles in the common allocator: every entry point keeps the
//! profile's table right (model runs), the estimate tracks the live bytes, threads.

use core::alloc::Layout;

use bento_common::CommonAllocator;
use bento_pages::{HeapPages, ProfileConfig};
use bento_testkit::{Ops, run, seeded};

use crate::model::{caps, classes, target};
use crate::{heap, shape};

fn profiled(every: usize) -> CommonAllocator<HeapPages> {
    CommonAllocator::with_config(
        shape()
            .with_classes(classes())
            .with_thread_cache(true)
            .with_profile(ProfileConfig::DEFAULT.every(every).backtrace(false))
            .with_pages(heap()),
    )
}

#[test]
fn model_with_a_profile() {
    let common = profiled(4096);
    seeded(20, |u| {
        let r = run(&mut target(&common), &caps(Ops::TRIM), u);
        let s = common.profiler().unwrap().stats();
        assert_eq!(s.live_samples, 0, "every sample goes with its block: {s:?}");
        r
    });
    assert!(common.profiler().unwrap().stats().sampled > 100);
}

#[test]
fn the_estimate_follows_the_live_bytes_through_frees_and_resizes() {
    let common = profiled(16 << 10);
    let mut live = Vec::new();
    let mut x = 7u64;
    let mut truth = 0usize;
    for i in 0..200_000usize {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let size = [24, 200, 3000, 20_000, 150_000][(x % 5) as usize];
        let layout = Layout::from_size_align(size, 8).unwrap();
        let mut p = common.alloc(layout).unwrap();
        let mut size = size;
        if i % 7 == 0 {
            // SAFETY: live with `layout`; replaced by the result.
            p = unsafe { common.realloc(p, Layout::from_size_align(size * 2, 8).unwrap()) }
                .unwrap();
            size *= 2;
        }
        truth += size;
        live.push((p, size));
        if live.len() > 2000 {
            let (p, size) = live.swap_remove((x >> 8) as usize % live.len());
            truth -= size;
            // SAFETY: live, freed once.
            unsafe { common.free(p) };
        }
    }
    let estimate = common.profiler().unwrap().stats().estimated_live_bytes as f64;
    assert!(
        (estimate / truth as f64 - 1.0).abs() < 0.1,
        "{estimate} of {truth}"
    );
    for (p, _) in live {
        // SAFETY: live, freed once.
        unsafe { common.free(p) };
    }
    assert_eq!(common.profiler().unwrap().stats().live_samples, 0);
}

#[test]
fn threads_feed_one_profile() {
    static COMMON: std::sync::OnceLock<CommonAllocator<HeapPages>> = std::sync::OnceLock::new();
    let common = COMMON.get_or_init(|| profiled(8192));
    std::thread::scope(|s| {
        for t in 0..2u64 {
            s.spawn(move || {
                let mut kept = Vec::new();
                let mut x = t + 3;
                for _ in 0..50_000 {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    let layout = Layout::from_size_align(16 + (x % 3000) as usize, 16).unwrap();
                    kept.push((common.alloc(layout).unwrap(), layout));
                    if kept.len() > 100 {
                        let (p, layout) = kept.swap_remove((x >> 9) as usize % kept.len());
                        // SAFETY: live, freed once.
                        unsafe { common.dealloc(p, layout) };
                    }
                }
                for (p, layout) in kept {
                    // SAFETY: live, freed once.
                    unsafe { common.dealloc(p, layout) };
                }
            });
        }
    });
    let s = common.profiler().unwrap().stats();
    assert_eq!(s.live_samples, 0, "{s:?}");
    assert!(s.sampled > 1000, "{s:?}");
    common.validate().unwrap();
}
