//! The tree of heaps: a child's blocks count in every ancestor and against every
//! budget, its leaks go up to its parent, and the registry reports every heap once,
//! as a tree sorted by live bytes.

use allocator_api2::alloc::{Allocator, Global};
use bento_heap::{HeapBuilder, OnLeak, Track};

use crate::{bytes, record, seen, unregistered, watched};

#[test]
fn a_grandchild_counts_in_every_ancestor_and_their_budgets_bind_it() {
    let game = unregistered("tree-game").budget(1000).build(Global);
    let level = unregistered("tree-level").parent(&game).build(Global);
    let audio = unregistered("tree-audio")
        .parent(&level)
        .budget(800)
        .build(Global);
    let a = audio.alloc(bytes(700)).unwrap();
    let g = game.alloc(bytes(250)).unwrap();
    for heap in [&level.stats(), &audio.stats()] {
        assert_eq!((heap.live_bytes, heap.live_blocks), (700, 1));
    }
    assert_eq!(game.stats().live_bytes, 950);
    // Within audio's budget, but not game's: refused, and nothing charged anywhere.
    assert!(audio.alloc(bytes(60)).is_err());
    assert_eq!(audio.stats().failures, 1);
    assert_eq!(
        (game.stats().live_bytes, level.stats().live_bytes),
        (950, 700)
    );
    assert!(audio.alloc(bytes(50)).is_ok_and(|p| {
        // SAFETY: just allocated, 50 bytes.
        unsafe { audio.free(p, bytes(50)) };
        true
    }));
    // SAFETY: live blocks with their layouts.
    unsafe {
        audio.free(a, bytes(700));
        game.free(g, bytes(250));
    }
    for s in [
        game.validate().unwrap(),
        level.validate().unwrap(),
        audio.validate().unwrap(),
    ] {
        assert_eq!((s.live_bytes, s.live_blocks), (0, 0));
    }
    assert_eq!(game.stats().total_allocs, 3);
}

#[test]
fn a_dropped_childs_leaks_go_up_to_its_parent() {
    let parent = watched("tree-parent").build(Global);
    let child = unregistered("tree-child")
        .parent(&parent)
        .tracking(Track::Sites)
        .build(Global);
    let layout = bytes(33);
    let leaked = child.alloc(layout).unwrap();
    let line = line!() - 1;
    let untracked = unregistered("tree-untracked").parent(&parent).build(Global);
    let small = untracked.alloc(bytes(5)).unwrap();
    drop(child);
    drop(untracked);
    // Nothing was reported yet: the reports went to the parent.
    assert!(seen().is_empty());
    let leaks = parent.leaks();
    assert_eq!(leaks.len(), 2);
    assert_eq!(
        (leaks[0].heap, leaks[0].ptr, leaks[0].size),
        ("tree-child", Some(leaked), 33)
    );
    assert_eq!(leaks[0].site.unwrap().line(), line);
    assert_eq!(
        (leaks[1].heap, leaks[1].blocks, leaks[1].size),
        ("tree-untracked", 1, 5)
    );
    // Leaked bytes stay counted: the memory is gone.
    assert_eq!(parent.stats().live_bytes, 38);
    // The parent's own table is empty, so `check` agrees.
    parent.validate().unwrap();
    drop(parent);
    let got = seen();
    assert_eq!(got.len(), 1);
    assert!(got[0].contains("tree-child: 33 bytes"), "{}", got[0]);
    assert!(
        got[0].contains("tree-untracked: 1 blocks, 5 bytes"),
        "{}",
        got[0]
    );
    // SAFETY: the leaked blocks, still live in the heaps' inner allocator.
    unsafe {
        Global.deallocate(leaked, layout);
        Global.deallocate(small, bytes(5));
    }
}

#[test]
fn a_child_outliving_its_parent_reports_its_own_leaks() {
    let parent = unregistered("tree-gone").build(Global);
    let child = unregistered("tree-orphan")
        .parent(&parent)
        .misuse_hook(record)
        .build(Global);
    let p = child.alloc(bytes(21)).unwrap();
    drop(parent);
    // The parent's account lives on with the child: its stats still count.
    assert_eq!(child.stats().live_bytes, 21);
    drop(child);
    let got = seen();
    assert_eq!(got.len(), 1, "{got:?}");
    assert!(
        got[0].contains("heap \"tree-orphan\" dropped with 1 live blocks (21 bytes)"),
        "{}",
        got[0]
    );
    // SAFETY: the leaked block, still live in the heap's inner allocator.
    unsafe { Global.deallocate(p, bytes(21)) };
}

#[test]
fn the_report_lists_every_heap_once_as_a_sorted_tree() {
    let root = HeapBuilder::new("report-root").budget(10_000).build(Global);
    let small = HeapBuilder::new("report-small").parent(&root).build(Global);
    let big = HeapBuilder::new("report-big")
        .parent(&root)
        .budget(4000)
        .build(Global);
    let leaf = HeapBuilder::new("report-leaf").parent(&small).build(Global);
    let hidden = unregistered("report-hidden").build(Global);
    let a = big.alloc(bytes(3000)).unwrap();
    let b = leaf.alloc(bytes(100)).unwrap();
    let c = hidden.alloc(bytes(1)).unwrap();
    let report = bento_heap::report();
    let rows: Vec<_> = report
        .rows()
        .iter()
        .filter(|r| r.name.starts_with("report-"))
        .map(|r| (r.name, r.depth, r.stats.live_bytes))
        .collect();
    assert_eq!(
        rows,
        [
            ("report-root", 0, 3100),
            ("report-big", 1, 3000),
            ("report-small", 1, 100),
            ("report-leaf", 2, 100),
        ]
    );
    let table = report.to_string();
    assert!(table.contains("report-big"), "{table}");
    assert!(
        table
            .lines()
            .any(|l| l.contains("report-big") && l.contains("75%")),
        "{table}"
    );
    assert_eq!(table.matches("report-root").count(), 1);
    // SAFETY: live blocks with their layouts.
    unsafe {
        big.free(a, bytes(3000));
        leaf.free(b, bytes(100));
        hidden.free(c, bytes(1));
    }
    drop(leaf);
    assert!(
        !bento_heap::report()
            .rows()
            .iter()
            .any(|r| r.name == "report-leaf")
    );
    let _ = OnLeak::Ignore;
}
