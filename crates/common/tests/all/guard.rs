//! Sampled guard pages: guarded blocks through every entry point, beside the
//! allocator's own, in model runs and on two threads at once.

use core::alloc::Layout;

use bento_common::{CommonAllocator, CommonConfig};
use bento_pages::{GuardConfig, HeapPages};
use bento_testkit::{Ops, Stats, run, seeded};

use crate::model::{caps, classes, target};
use crate::{heap, shape};

/// An allocator of the model runs' shape with the front end and one allocation in
/// `every` guarded.
fn guarded(every: u32, slots: u32) -> CommonAllocator<HeapPages> {
    CommonAllocator::with_config(
        shape()
            .with_classes(classes())
            .with_thread_cache(true)
            .with_guard(GuardConfig::DEFAULT.every(every).slots(slots))
            .with_pages(heap()),
    )
}

#[test]
fn model_with_guard_pages() {
    let common = guarded(3, 16);
    let r = seeded(20, |u| {
        let mut t = target(&common).with_validate(|common| {
            let walked = common.validate().map_err(|c| c.to_string())?;
            let guarded = common.guard_stats().map_or(0, |g| g.live as usize);
            Ok(Stats {
                live_blocks: Some(walked.live_blocks + guarded),
                live_bytes: None,
            })
        });
        run(&mut t, &caps(Ops::TRIM), u)
    });
    let g = common.guard_stats().unwrap();
    assert!(g.guarded > 50, "{g:?} after {r:?}");
    assert_eq!(g.live, 0);
    assert!(g.quarantined > 0 && g.quarantined <= 16, "{g:?}");
    assert_eq!(common.stats().live_blocks, 0);
}

#[test]
fn a_guarded_block_goes_through_every_entry_point() {
    let common = guarded(1, 8);
    let page = 4096;
    let layout = Layout::from_size_align(100, 4).unwrap();
    let p = common.alloc(layout).unwrap();
    assert_eq!(
        (p.as_ptr() as usize + 100) % page,
        0,
        "against its slot's end"
    );
    // SAFETY: live blocks of this allocator, used within their sizes, each freed
    // once.
    unsafe {
        assert_eq!(common.usable_size(p), 100);
        p.write_bytes(7, 100);
        // A resize is a new block of the allocator's own (resizes are not sampled),
        // the bytes copied.
        let q = common
            .resize(p, layout, Layout::from_size_align(300, 8).unwrap())
            .unwrap();
        assert_ne!(p, q);
        assert!((0..100).all(|i| *q.as_ptr().add(i) == 7));
        let r = common
            .realloc(q, Layout::from_size_align(50, 8).unwrap())
            .unwrap();
        assert!((0..50).all(|i| *r.as_ptr().add(i) == 7));
        common.free(r);
        let z = common.alloc_zeroed(Layout::new::<[u64; 100]>()).unwrap();
        assert!((0..800).all(|i| *z.as_ptr().add(i) == 0));
        common.dealloc(z, Layout::new::<[u64; 100]>());
        // Too large for a slot: the allocator's own.
        let big = Layout::from_size_align(3 * page, 8).unwrap();
        let b = common.alloc(big).unwrap();
        assert_eq!(common.stats().live_blocks, 1);
        common.dealloc(b, big);
    }
    let g = common.guard_stats().unwrap();
    assert_eq!((g.live, g.guarded), (0, 2), "{g:?}");
    assert_eq!(
        g.committed_bytes,
        GuardConfig::DEFAULT.slots(8).committed_bound(page) - 8 * 2 * page
    );
}

#[test]
fn two_threads_share_the_pool_without_overlap() {
    static COMMON: std::sync::OnceLock<CommonAllocator<HeapPages>> = std::sync::OnceLock::new();
    let common = COMMON.get_or_init(|| guarded(2, 32));
    std::thread::scope(|s| {
        for t in 0..2u8 {
            s.spawn(move || {
                let mut live = Vec::new();
                for i in 0..4000usize {
                    let size = 16 + (i * 37) % 5000;
                    let layout = Layout::from_size_align(size, 16).unwrap();
                    let p = common.alloc(layout).unwrap();
                    // SAFETY: a fresh block of `size` bytes.
                    unsafe { p.write_bytes(t ^ i as u8, size) };
                    live.push((p, layout, t ^ i as u8));
                    if live.len() > 20 {
                        let (p, layout, b) = live.swap_remove(i % live.len());
                        // SAFETY: live, written with `b`, freed once.
                        unsafe {
                            let bytes = core::slice::from_raw_parts(p.as_ptr(), layout.size());
                            assert!(bytes.iter().all(|&x| x == b), "a block kept its bytes");
                            if i % 2 == 0 {
                                common.free(p);
                            } else {
                                common.dealloc(p, layout);
                            }
                        }
                    }
                }
                for (p, layout, _) in live {
                    // SAFETY: live, freed once.
                    unsafe { common.dealloc(p, layout) };
                }
            });
        }
    });
    let g = common.guard_stats().unwrap();
    assert_eq!(g.live, 0, "{g:?}");
    assert!(g.guarded > 500, "{g:?}");
    common.validate().unwrap();
    assert_eq!(common.stats().live_blocks, 0);
}

#[test]
fn without_a_guard_config_there_is_no_pool() {
    let common = CommonAllocator::with_config(CommonConfig::DEFAULT.with_pages(heap()));
    let p = common.alloc(Layout::new::<u64>()).unwrap();
    assert_eq!(common.guard_stats(), None);
    // SAFETY: live, freed once.
    unsafe { common.free(p) };
}
