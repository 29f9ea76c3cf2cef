//! The stats, the report, the region map, trimming back to the baseline, and the
//! shared page layer's promises.

use core::alloc::Layout;
use core::ptr::NonNull;

use bento_common::{CommonAllocator, Routing, SizeClasses};
use bento_pages::Metered;

use crate::{heap, on_heap, shape};

#[test]
fn each_class_has_its_region_and_the_map_knows_it() {
    let common = on_heap(Routing::BySize);
    let classes = SizeClasses::DEFAULT;
    let mut blocks = Vec::new();
    for size in 1..=300 {
        let layout = Layout::from_size_align(size, 8).unwrap();
        let p = common.alloc(layout).unwrap();
        assert!(common.owns(p));
        // SAFETY: live.
        let usable = unsafe { common.usable_size(p) };
        match classes.class_of(size) {
            Some(c) => assert_eq!(usable, classes.size(c), "size {size}"),
            None => assert!(usable >= size),
        }
        blocks.push((p, layout));
    }
    let s = common.stats();
    // The small classes, the large region, then the 32 medium bins.
    assert_eq!(s.regions().len(), 53);
    for (c, r) in s.regions()[..20].iter().enumerate() {
        let below = if c == 0 { 0 } else { classes.size(c - 1) };
        assert_eq!(r.block, classes.size(c));
        assert_eq!(r.live_blocks, classes.size(c) - below, "class {c}");
        assert_eq!(r.live_bytes, r.live_blocks * r.block);
    }
    assert_eq!(s.regions()[20].live_blocks, 0, "the large region");
    assert_eq!(s.regions()[21].block, 288);
    assert_eq!(s.regions()[21].live_blocks, 32, "257 to 288 bytes");
    assert_eq!(s.regions()[22].live_blocks, 12, "289 to 300 bytes");
    // Alignment beyond 16 goes to the large region whatever the size.
    let aligned = Layout::from_size_align(8, 64).unwrap();
    let p = common.alloc(aligned).unwrap();
    assert_eq!(p.addr().get() % 64, 0);
    assert_eq!(common.stats().regions()[20].live_blocks, 1);
    blocks.push((p, aligned));
    assert_eq!(common.validate().unwrap().live_blocks, 301);
    let table = common.report().to_string();
    assert!(
        table.contains("large") && table.contains("total"),
        "{table}"
    );
    assert!(
        common
            .leaks()
            .unwrap()
            .to_string()
            .contains("301 live blocks")
    );
    for (p, layout) in blocks {
        // SAFETY: live with `layout`.
        unsafe { common.dealloc(p, layout) };
    }
    assert!(common.leaks().is_none());
    assert!(!common.owns(NonNull::from(&classes).cast()));
}

#[test]
#[cfg_attr(miri, ignore = "tens of thousands of blocks: minutes under Miri")]
fn trim_brings_memory_back_to_the_baseline() {
    let pages = Metered::new(heap());
    let c = shape();
    let common = CommonAllocator::with_config(c.with_pages(&pages));
    // The baseline: the allocator's own tables (its block, the cache's slot table and
    // the map's first leaf), taken after one block came and went.
    let one = Layout::new::<u64>();
    let p = common.alloc(one).unwrap();
    // SAFETY: live.
    unsafe { common.dealloc(p, one) };
    common.trim();
    let baseline = common.stats().resident;
    assert_eq!(baseline, pages.stats().committed);
    assert_eq!(
        baseline,
        common.stats().tables,
        "an empty allocator holds its tables"
    );
    assert_eq!(common.stats().reserved, 0);

    let mut blocks = Vec::new();
    for i in 0..20_000usize {
        let layout = Layout::from_size_align(8 + (i * 37) % 5000, 8).unwrap();
        blocks.push((common.alloc(layout).unwrap(), layout));
    }
    for size in [100 << 10, 1 << 20] {
        let layout = Layout::from_size_align(size, 16).unwrap();
        blocks.push((common.alloc(layout).unwrap(), layout));
    }
    assert!(common.stats().resident > baseline + (20 << 20) / 8);
    for (p, layout) in blocks {
        // SAFETY: live with `layout`.
        unsafe { common.dealloc(p, layout) };
    }
    common.trim();
    let s = common.stats();
    assert_eq!(
        (s.live_blocks, s.reserved, s.committed, s.cache.parked),
        (0, 0, 0, 0)
    );
    // Back to the tables alone (the map may have made a leaf for a new address
    // range meanwhile).
    assert_eq!(s.resident, s.tables, "{}", common.report());
    assert!(s.tables - baseline <= 128 << 10);
    drop(common);
    assert_eq!(pages.stats().reserved, 0, "dropping gives everything back");
    assert_eq!(pages.stats().committed, 0);
}

#[test]
fn dropping_with_live_blocks_gives_everything_back() {
    let pages = Metered::new(heap());
    for routing in [Routing::BySize, Routing::Contention { regions: 4 }] {
        let c = shape().with_routing(routing);
        let common = CommonAllocator::with_config(c.with_pages(&pages));
        for size in [8, 100, 1000, 100_000] {
            let _ = common
                .alloc(Layout::from_size_align(size, 8).unwrap())
                .unwrap();
        }
        drop(common);
        assert_eq!((pages.stats().reserved, pages.stats().committed), (0, 0));
    }
    // An allocator that never started has nothing to give back.
    drop(on_heap(Routing::BySize));
}

#[test]
#[cfg_attr(miri, ignore = "tens of thousands of blocks: minutes under Miri")]
fn a_small_region_that_empties_and_refills_makes_no_system_call() {
    let pages = Metered::new(heap());
    let c = shape();
    let common = CommonAllocator::with_config(c.with_pages(&pages));
    let layout = Layout::new::<[u8; 32]>();
    let n = 3000; // more than the block budget holds: segments empty and go back
    let mut calls = Vec::new();
    for _ in 0..4 {
        let blocks: Vec<_> = (0..n).map(|_| common.alloc(layout).unwrap()).collect();
        for p in blocks {
            // SAFETY: live with `layout`.
            unsafe { common.dealloc(p, layout) };
        }
        let s = pages.stats();
        calls.push(s.reserves + s.releases + s.commits + s.decommits);
    }
    assert_eq!(calls[1], calls[3], "calls after warm-up: {calls:?}");
    assert_eq!(common.stats().live_blocks, 0);
}

#[test]
#[cfg_attr(miri, ignore = "tens of thousands of blocks: minutes under Miri")]
fn emptied_runs_go_idle_beyond_two_a_region() {
    let common = on_heap(Routing::BySize);
    let mut blocks = Vec::new();
    for c in 0..20 {
        let layout = Layout::from_size_align(SizeClasses::DEFAULT.size(c), 8).unwrap();
        // Enough for five runs of each class.
        let n = 5 * (64 << 10) / SizeClasses::DEFAULT.size(c).max(16);
        for _ in 0..n {
            blocks.push((common.alloc(layout).unwrap(), layout));
        }
    }
    let s = common.validate().unwrap();
    assert!(s.regions()[..20].iter().all(|r| r.runs >= 5), "{s:?}");
    for (p, layout) in blocks {
        // SAFETY: live with `layout`.
        unsafe { common.dealloc(p, layout) };
    }
    // This thread's cache keeps a few blocks (of one or two runs); the rest went
    // back to their runs, two of which stay committed for the next refill.
    let s = common.validate().unwrap();
    for r in &s.regions()[..20] {
        assert!(r.runs <= 4 && r.committed <= 4 * (64 << 10), "{r:?}");
    }
    common.trim();
    let s = common.validate().unwrap();
    for r in &s.regions()[..20] {
        assert_eq!(
            (r.live_blocks, r.runs, r.segments, r.reserved),
            (0, 0, 0, 0),
            "{r:?}"
        );
    }
}

#[test]
#[cfg_attr(miri, ignore = "mmap is not supported under Miri")]
fn alloc_zeroed_is_zero_from_fresh_and_reused_segments() {
    let common = crate::common(bento_pages::SystemPages::new(), Routing::BySize);
    let layout = Layout::from_size_align(200 << 10, 4096).unwrap();
    for _ in 0..4 {
        let p = common.alloc_zeroed(layout).unwrap();
        // SAFETY: `layout.size()` bytes, live; then freed.
        unsafe {
            let bytes = core::slice::from_raw_parts_mut(p.as_ptr(), layout.size());
            assert!(bytes.iter().all(|&b| b == 0));
            bytes.fill(0xa5);
            common.dealloc(p, layout);
        }
    }
    assert!(
        common.stats().cache.reuses > 0,
        "the spare segment was reused"
    );
}

#[test]
fn contention_regions_serve_two_threads() {
    let common = on_heap(Routing::Contention { regions: 2 });
    std::thread::scope(|s| {
        for t in 0..2 {
            let common = &common;
            s.spawn(move || {
                let mut live = Vec::new();
                for i in 0..cases(20_000, 80) {
                    let layout = Layout::from_size_align(8 + (i * 13 + t) % 700, 8).unwrap();
                    let p = common.alloc(layout).unwrap();
                    // SAFETY: fresh, `layout.size()` bytes.
                    unsafe { p.as_ptr().write_bytes(t as u8, layout.size()) };
                    live.push((p, layout));
                    if i % 3 == 0 {
                        let (p, layout) = live.swap_remove(i % live.len());
                        // SAFETY: live with `layout`, filled by this thread.
                        unsafe {
                            assert_eq!(p.as_ptr().read(), t as u8);
                            common.dealloc(p, layout);
                        }
                    }
                }
                for (p, layout) in live {
                    // SAFETY: live with `layout`.
                    unsafe { common.dealloc(p, layout) };
                }
            });
        }
    });
    let s = common.validate().unwrap();
    assert_eq!(s.live_blocks, 0);
    assert!(s.regions().iter().all(|r| r.block == 0));
}

use bento_testkit::cases;
