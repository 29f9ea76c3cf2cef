//! Bad input: configurations the allocator refuses, sources that refuse it, and
//! misuse it catches in debug builds (recorded here; aborting by default).

use core::alloc::Layout;
use core::ptr::NonNull;

use bento_common::LargeConfig;
use bento_common::{CommonAllocator, CommonError, Misuse, Routing};
use bento_pages::FaultyPages;
use bento_space::SpaceError;

use crate::{heap, on_heap, seen, shape};

#[test]
fn bad_configurations_fail_every_allocation() {
    let cases = [
        (
            shape().with_small_segment(1000),
            CommonError::SmallSegment(1000),
        ),
        (
            shape().with_small_segment(32 << 10),
            CommonError::SmallSegment(32 << 10),
        ),
        (
            shape().with_routing(Routing::Contention { regions: 0 }),
            CommonError::Regions(0),
        ),
        (
            shape().with_routing(Routing::Contention { regions: 33 }),
            CommonError::Regions(33),
        ),
    ];
    for (config, want) in cases {
        let common = CommonAllocator::with_config(config.with_pages(heap()));
        assert_eq!(common.init(), Err(want));
        // The same error again, and every allocation fails.
        assert_eq!(common.init(), Err(want));
        assert!(common.alloc(Layout::new::<u64>()).is_err());
        assert!(common.stats().regions().is_empty());
        assert!(!want.to_string().is_empty());
    }
    let bad_space = shape().with_large(LargeConfig::DEFAULT.with_segment_threshold(0));
    let common = CommonAllocator::with_config(bad_space.with_pages(heap()));
    assert!(matches!(
        common.init(),
        Err(CommonError::Space(SpaceError::SegmentThreshold { .. }))
    ));
}

#[test]
fn a_source_that_refuses_the_block_fails_the_start() {
    let pages = FaultyPages::new(heap());
    pages.fail_reserve(0);
    let c = shape();
    let common = CommonAllocator::with_config(c.with_pages(pages));
    assert!(matches!(common.init(), Err(CommonError::Pages(_))));
    assert!(common.alloc(Layout::new::<[u8; 100]>()).is_err());
}

#[test]
fn huge_and_impossible_requests_fail_cleanly() {
    let common = on_heap(Routing::BySize);
    for size in [isize::MAX as usize - 4095, 1 << 46] {
        let layout = Layout::from_size_align(size, 4096).unwrap();
        assert!(common.alloc(layout).is_err());
        assert!(common.alloc_zeroed(layout).is_err());
    }
    let small = Layout::new::<[u8; 40]>();
    let p = common.alloc(small).unwrap();
    let huge = Layout::from_size_align(1 << 46, 16).unwrap();
    // SAFETY: live with `small`; an `Err` leaves it unchanged.
    unsafe {
        assert!(common.resize(p, small, huge).is_err());
        common.dealloc(p, small);
    }
    common.validate().unwrap();
}

/// Each misuse the debug build catches is reported, changes nothing, and loses
/// nothing: the allocator validates and empties afterwards.
#[test]
#[cfg(debug_assertions)]
fn misuse_is_reported_and_changes_nothing() {
    // Reports left by an earlier test on this thread (Miri runs them on one).
    let _ = seen();
    for routing in [Routing::BySize, Routing::Contention { regions: 2 }] {
        let common = on_heap(routing);
        let small = Layout::new::<[u8; 24]>();
        let large = Layout::new::<[u8; 3000]>();
        let a = common.alloc(small).unwrap();
        let b = common.alloc(large).unwrap();
        let local = 0u64;
        let foreign = NonNull::from(&local).cast::<u8>();
        // SAFETY: each call's misuse is the point; the debug build catches it before
        // any memory is touched.
        unsafe {
            common.dealloc(foreign, small);
            assert!(
                matches!(seen()[..], [Misuse::Foreign { .. }]),
                "{routing:?}"
            );
            common.free(foreign);
            assert!(matches!(seen()[..], [Misuse::Foreign { .. }]));
            assert_eq!(common.usable_size(foreign), 0);
            assert!(matches!(seen()[..], [Misuse::Foreign { .. }]));

            if routing == Routing::BySize {
                // A small block freed with a large layout: the map says otherwise.
                common.dealloc(a, large);
                assert!(matches!(seen()[..], [Misuse::WrongLayout { .. }]));
                // A small block freed with another class's layout.
                common.dealloc(a, Layout::new::<[u8; 200]>());
                assert!(matches!(seen()[..], [Misuse::WrongLayout { .. }]));
            }
            // Twice: the second is a double free, from the free list or the space.
            common.dealloc(a, small);
            assert!(seen().is_empty());
            common.dealloc(a, small);
            // A free list or a block cache knows the block; a space that merged it
            // finds the pointer in a free chunk; a segment that emptied went back, and
            // the region map no longer knows the pointer.
            let twice = seen();
            assert!(
                matches!(
                    twice[..],
                    [Misuse::DoubleFree { .. }
                        | Misuse::NeverAllocated { .. }
                        | Misuse::Interior { .. }
                        | Misuse::Foreign { .. }]
                ),
                "{routing:?}: {twice:?}"
            );
            common.free(b);
            common.free(b);
            assert_eq!(seen().len(), 1, "a large double free is reported too");
            // A pointer inside a block.
            let c = common.alloc(large).unwrap();
            common.free(c.add(16));
            assert_eq!(seen().len(), 1, "an interior pointer is reported");
            common.free(c);
        }
        common.validate().unwrap();
        assert_eq!(common.stats().live_blocks, 0);
        assert!(seen().is_empty());
    }
}

/// The default hook writes one line to stderr and aborts: run in a child process.
#[test]
#[cfg(all(debug_assertions, unix, not(miri)))]
fn the_default_hook_writes_to_stderr_and_aborts() {
    use std::process::Command;
    if std::env::var_os("BENTO_COMMON_ABORT_CHILD").is_some() {
        let common = CommonAllocator::new();
        common.init().unwrap();
        let local = 0u64;
        // SAFETY: the misuse is the point: the debug build catches it and aborts.
        unsafe { common.free(NonNull::from(&local).cast()) };
        unreachable!("the hook aborts");
    }
    let out = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "bad_input::the_default_hook_writes_to_stderr_and_aborts",
            "--nocapture",
        ])
        .env("BENTO_COMMON_ABORT_CHILD", "1")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(out.status.signal(), Some(libc::SIGABRT), "{stderr}");
    assert!(stderr.contains("bento-common: "), "{stderr}");
    assert!(!stderr.contains("unreachable"), "{stderr}");
}

/// Release builds: a free without a layout (C's `free`) and `usable_size` probe the
/// pointer in O(1), so a double free and a pointer inside a block of any size are
/// reported and change nothing, as the debug build's walk does.
#[test]
#[cfg(not(debug_assertions))]
fn a_free_without_a_layout_is_probed_in_release_builds() {
    let _ = seen();
    let common = on_heap(Routing::BySize);
    let sizes = [8, 24, 64, 200, 256, 300, 3000, 20_000, crate::LARGE_SEGMENT];
    for size in sizes {
        let layout = Layout::from_size_align(size, 8).unwrap();
        let a = common.alloc(layout).unwrap();
        let keep = common.alloc(layout).unwrap();
        // SAFETY: each misuse is the point: the probe reports it before any memory
        // is touched; `a` and `keep` are live blocks of this allocator.
        unsafe {
            a.write_bytes(0x41, size);
            if size >= 32 {
                common.free(a.add(16));
                assert!(
                    matches!(seen()[..], [Misuse::Interior { .. }]),
                    "{size}: an interior pointer"
                );
                assert_eq!(common.usable_size(a.add(16)), 0);
                assert_eq!(
                    seen().len(),
                    1,
                    "{size}: usable_size of an interior pointer"
                );
            }
            common.free(a);
            assert!(seen().is_empty(), "{size}: a good free");
            common.free(a);
            let twice = seen();
            assert!(
                matches!(
                    twice[..],
                    [
                        Misuse::DoubleFree { .. }
                            | Misuse::Interior { .. }
                            | Misuse::Foreign { .. }
                    ]
                ),
                "{size}: a double free: {twice:?}"
            );
            common.free(keep);
        }
        common.validate().unwrap();
        assert_eq!(common.stats().live_blocks, 0);
    }
    assert!(seen().is_empty());
}

/// Release builds: the probe passes every block a correct program frees by address,
/// of every alignment, in dedicated segments under a page larger than the source's.
#[test]
#[cfg(not(debug_assertions))]
fn the_probe_passes_aligned_and_dedicated_blocks() {
    let _ = seen();
    let large_pages = shape().with_large(
        LargeConfig::DEFAULT
            .with_page_size(128 << 10)
            .with_segment_granularity(4 << 20)
            .with_segment_threshold(1 << 20),
    );
    for config in [shape(), large_pages] {
        let common = CommonAllocator::with_config(config.with_pages(crate::heap()));
        let mut live = Vec::new();
        for align in [8, 16, 64, 4096, 64 << 10, 1 << 20] {
            for size in [1, 24, 200, 300, 5000, 300 << 10, 2 << 20] {
                let layout = Layout::from_size_align(size, align).unwrap();
                live.push(common.alloc(layout).unwrap());
            }
        }
        for &p in &live {
            // SAFETY: live blocks of this allocator.
            assert!(unsafe { common.usable_size(p) } > 0);
        }
        for p in live {
            // SAFETY: as above, each freed once.
            unsafe { common.free(p) };
        }
        assert!(seen().is_empty(), "a correct program's block was reported");
        common.validate().unwrap();
        assert_eq!(common.stats().live_blocks, 0);
    }
}

/// Release builds: a block freed twice after its segment emptied, parked in the
/// commit cache and was taken again (its old bytes still there), is reported and not
/// freed: blocks freed last in their segments among them.
#[test]
#[cfg(not(debug_assertions))]
fn a_double_free_into_a_segment_used_again_is_reported() {
    let _ = seen();
    // No free lists: every free reaches the space. Pages of a caller's buffer, which
    // keep their bytes when decommitted and when a segment is released and taken
    // again (as parked pages of the OS do), unlike the heap-backed source's.
    let buf = Box::leak(vec![core::mem::MaybeUninit::<u8>::uninit(); 8 << 20].into_boxed_slice());
    let pages = bento_pages::FixedPages::new(buf, bento_align::Alignment::new(4096).unwrap());
    let common = CommonAllocator::with_config(shape().with_block_cache(0).with_pages(pages));
    let small = Layout::from_size_align(24, 8).unwrap();
    let mut old: Vec<_> = (0..6000).map(|_| common.alloc(small).unwrap()).collect();
    old.sort();
    // Each segment's 100th block (in its first page) is freed after the rest of it.
    let segment = |p: &NonNull<u8>| p.addr().get() >> 16;
    let mut last = Vec::new();
    for (i, p) in old.iter().enumerate() {
        let first_of_segment = old.iter().position(|q| segment(q) == segment(p)).unwrap();
        if i - first_of_segment == 100 {
            last.push(*p);
        }
    }
    assert!(last.len() >= 2);
    for p in old.iter().filter(|p| !last.contains(p)).chain(&last) {
        // SAFETY: live, freed once here.
        unsafe { common.free(*p) };
    }
    assert!(seen().is_empty());
    assert_eq!(common.stats().live_blocks, 0);
    // A parked segment taken again: ten blocks carved from its start.
    let new: Vec<_> = (0..10).map(|_| common.alloc(small).unwrap()).collect();
    for &p in old.iter().filter(|p| !new.contains(p)) {
        // SAFETY: a second free: the misuse is the point, reported before anything
        // is touched.
        unsafe { common.free(p) };
        assert_eq!(seen().len(), 1, "a second free of {p:p} was not reported");
    }
    common.validate().unwrap();
    for p in new {
        // SAFETY: live, with its layout.
        unsafe { common.dealloc(p, small) };
    }
    common.validate().unwrap();
    assert_eq!(common.stats().live_blocks, 0);
}
