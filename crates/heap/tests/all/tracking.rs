//! Tracking: leaks listed with the file and line that allocated them, tags whose
//! stats add up, double and foreign frees caught, and the report on drop.

use core::alloc::Layout;

use allocator_api2::alloc::{Allocator, Global};
use allocator_api2::boxed::Box;
use bento_heap::{OnLeak, Tag, Track};

use crate::{record, seen, unregistered, watched};

static TEXTURES: Tag = Tag::new("textures");
static MESHES: Tag = Tag::new("meshes");

#[test]
fn a_leaked_block_is_reported_with_the_file_and_line_that_allocated_it() {
    let heap = watched("leaky").build(Global);
    let layout = Layout::new::<[u8; 48]>();
    let kept = heap.alloc(layout).unwrap();
    let line = line!() - 1;
    let freed = heap.alloc(layout).unwrap();
    // SAFETY: live, with its layout.
    unsafe { heap.free(freed, layout) };
    let leaks = heap.leaks();
    assert_eq!(leaks.len(), 1);
    assert_eq!((leaks[0].ptr, leaks[0].size), (Some(kept), 48));
    let site = leaks[0].site.unwrap();
    assert_eq!((site.file(), site.line()), (file!(), line));
    // Dropped with the block live: the hook gets the report, naming the site.
    drop(heap);
    let got = seen();
    assert_eq!(got.len(), 1);
    assert!(
        got[0].contains("heap \"leaky\" dropped with 1 live blocks (48 bytes)"),
        "{}",
        got[0]
    );
    assert!(
        got[0].contains(&format!("{}:{line}", file!())),
        "{}",
        got[0]
    );
    // SAFETY: the leaked block, still live in the heap's inner allocator.
    unsafe { Global.deallocate(kept, layout) };
}

#[test]
fn the_leak_policy_panics_logs_or_ignores() {
    let layout = Layout::new::<u64>();
    let mut leaked = Vec::new();
    let panics = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let heap = unregistered("leak-panic")
            .on_leak(OnLeak::Panic)
            .build(Global);
        leaked.push(heap.alloc(layout).unwrap());
    }));
    let message = panics.unwrap_err();
    let message = message.downcast_ref::<String>().unwrap();
    assert!(
        message.contains("heap \"leak-panic\" dropped with 1 live blocks (8 bytes)"),
        "{message}"
    );
    assert!(message.contains("untracked"), "{message}");
    for on_leak in [OnLeak::Log, OnLeak::Ignore] {
        let heap = unregistered("leak-quiet")
            .on_leak(on_leak)
            .misuse_hook(record)
            .build(Global);
        leaked.push(heap.alloc(layout).unwrap());
        drop(heap);
        assert!(seen().is_empty());
    }
    for p in leaked {
        // SAFETY: the leaked blocks, still live in the heaps' inner allocator.
        unsafe { Global.deallocate(p, layout) };
    }
}

#[test]
fn tag_figures_add_up_to_the_heap() {
    let heap = unregistered("tags").tracking(Track::Sites).build(Global);
    let a = heap.with_tag(&TEXTURES, || Box::new_in([0u8; 100], &heap));
    let b = heap.with_tag(&MESHES, || {
        // The innermost scope wins; a per-call tag beats the scope.
        let inner = heap.with_tag(&TEXTURES, || Box::new_in([0u8; 50], &heap));
        (inner, Box::new_in([0u8; 30], &heap))
    });
    let layout = Layout::new::<[u8; 7]>();
    let c = heap
        .with_tag(&TEXTURES, || heap.alloc_tagged(layout, &MESHES))
        .unwrap();
    let untagged = Box::new_in([0u8; 5], &heap);
    let tags = heap.tag_stats();
    let get = |name| tags.iter().find(|t| t.tag == name).copied().unwrap();
    assert_eq!(
        (get("textures").live_bytes, get("textures").live_blocks),
        (150, 2)
    );
    assert_eq!(
        (get("meshes").live_bytes, get("meshes").total_allocs),
        (37, 2)
    );
    let tagged: usize = tags.iter().map(|t| t.live_bytes).sum();
    assert_eq!(tagged + 5, heap.stats().live_bytes);
    drop((a, b, untagged));
    // SAFETY: live, with its layout.
    unsafe { heap.free(c, layout) };
    assert!(
        heap.tag_stats()
            .iter()
            .all(|t| t.live_bytes == 0 && t.live_blocks == 0)
    );
    heap.validate().unwrap();
}

#[test]
fn a_double_free_a_foreign_pointer_and_a_wrong_size_are_caught() {
    let heap = watched("tracked-misuse").build(Global);
    let layout = Layout::new::<[u8; 40]>();
    let p = heap.alloc(layout).unwrap();
    // SAFETY: live; the wrong size is caught and frees nothing.
    unsafe { heap.free(p, Layout::new::<[u8; 41]>()) };
    assert!(seen()[0].contains("freed with size 41"));
    assert_eq!(heap.stats().live_blocks, 1);
    // SAFETY: live, with its layout; the second free is caught and does nothing.
    unsafe {
        heap.free(p, layout);
        heap.free(p, layout);
    }
    assert!(seen()[0].contains("is not in this allocator's memory"));
    let mut local = 0u64;
    // SAFETY: not a block of the heap: caught, nothing freed.
    unsafe {
        heap.free(
            core::ptr::NonNull::from(&mut local).cast(),
            Layout::new::<u64>(),
        )
    };
    assert_eq!(seen().len(), 1);
    let s = heap.validate().unwrap();
    assert_eq!((s.live_blocks, s.total_frees), (0, 1));
}

#[cfg(feature = "std")]
#[test]
#[cfg_attr(miri, ignore = "backtraces read the binary's debug info")]
fn backtraces_are_kept_when_asked() {
    let heap = unregistered("backtraces")
        .tracking(Track::Backtraces)
        .on_leak(OnLeak::Ignore)
        .build(Global);
    let p = heap.alloc(Layout::new::<u32>()).unwrap();
    assert!(heap.leaks()[0].backtrace.is_some());
    // SAFETY: live, with its layout.
    unsafe { heap.free(p, Layout::new::<u32>()) };
}
