//! `bento diff` as a user runs it: two profiles a game's heaps dumped, before and
//! after a level with a planted leak; the diff names the leak's site.

mod common;

use core::alloc::Layout;
use std::path::Path;

use allocator_api2::alloc::Global;
use bento_heap::{HeapBuilder, Tag};
use bento_pages::{ProfileConfig, Profiler};
use common::{bento, ok, scratch, stderr};

static MESHES: Tag = Tag::new("meshes");

/// A level: some thousands of blocks allocated and freed, and with `leak`, 32 blocks
/// of 64 KiB kept (the line `leak_site` names).
fn play(
    heap: &bento_heap::Heap<Global>,
    leak: bool,
    kept: &mut Vec<(core::ptr::NonNull<u8>, Layout)>,
) {
    for round in 0..200usize {
        let blocks: Vec<_> = (0..50)
            .map(|i| {
                let layout = Layout::from_size_align(16 + (i * 97 + round) % 4000, 8).unwrap();
                (heap.alloc_tagged(layout, &MESHES).unwrap(), layout)
            })
            .collect();
        for (p, layout) in blocks {
            // SAFETY: live, freed once.
            unsafe { heap.free(p, layout) };
        }
    }
    if leak {
        for _ in 0..32 {
            let layout = Layout::from_size_align(64 << 10, 8).unwrap();
            kept.push((heap.alloc_tagged(layout, &MESHES).unwrap(), layout)); // leak_site
        }
    }
}

fn dump(profiler: &Profiler, path: &Path) {
    let mut bytes = Vec::new();
    profiler.write_pprof(false, &mut |b| bytes.extend_from_slice(b));
    std::fs::write(path, bytes).unwrap();
}

#[test]
fn a_diff_of_two_dumps_names_the_leak_a_level_planted() {
    let dir = scratch("diff");
    let profiler = Profiler::new(ProfileConfig::DEFAULT.every(16 << 10).backtrace(false)).unwrap();
    let heap = HeapBuilder::new("level")
        .register(false)
        .profile(profiler)
        .build(Global);
    let mut kept = Vec::new();
    profiler.set_frame(0, Some("level 6"));
    play(&heap, false, &mut kept);
    let before = dir.join("before.pb");
    dump(profiler, &before);
    profiler.set_frame(1, Some("level 7"));
    play(&heap, true, &mut kept);
    let after = dir.join("after.pb");
    dump(profiler, &after);
    let out = ok(&bento(&[
        "diff",
        before.to_str().unwrap(),
        after.to_str().unwrap(),
    ]));
    let line = include_str!("diff.rs")
        .lines()
        .position(|l| l.ends_with("// leak_site"))
        .unwrap()
        + 1;
    let rows: Vec<&str> = out.lines().collect();
    assert!(rows[0].contains("stack (leaf first)"), "{out}");
    // The first row: the planted 2 MiB (within the sampling's error), at its site,
    // under its tag and heap.
    let first = rows[1];
    let site = format!("crates/cli/tests/diff.rs:{line} < tag meshes < heap level");
    assert!(first.contains(&site), "{site} in {out}");
    // 2 MiB in truth: each 64 KiB block is sampled with probability 0.98 at 16 KiB.
    let mib: f64 = first
        .trim_start()
        .trim_start_matches('+')
        .split(' ')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    assert!(
        (1.6..=2.2).contains(&mib) && first.contains(" MiB "),
        "{out}"
    );
    assert!(out.ends_with("in all\n"), "{out}");
    // As JSON, every change.
    let json = ok(&bento(&[
        "diff",
        before.to_str().unwrap(),
        after.to_str().unwrap(),
        "--json",
    ]));
    let rows: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert!(
        rows[0]["stack"].as_str().unwrap().contains("leak")
            || rows[0]["stack"]
                .as_str()
                .unwrap()
                .contains(&format!("diff.rs:{line}"))
    );
    assert!(rows[0]["bytes"].as_i64().unwrap() > 1_800_000);
    for (p, layout) in kept {
        // SAFETY: live, freed once.
        unsafe { heap.free(p, layout) };
    }
}

#[test]
fn diff_refuses_what_is_no_profile_with_one_line() {
    let dir = scratch("diff-bad");
    let junk = dir.join("junk.pb");
    std::fs::write(&junk, [0x0f, 0xff]).unwrap();
    let gz = dir.join("gz.pb");
    std::fs::write(&gz, [0x1f, 0x8b, 8, 0]).unwrap();
    let missing = dir.join("missing.pb");
    for (path, says) in [
        (&junk, "is no pprof profile"),
        (&gz, "is gzipped"),
        (&missing, "cannot read"),
    ] {
        let err = stderr(&bento(&[
            "diff",
            path.to_str().unwrap(),
            path.to_str().unwrap(),
        ]));
        assert!(
            err.starts_with("bento: ") && err.contains(says) && err.lines().count() == 1,
            "{err}"
        );
    }
    let err = stderr(&bento(&["diff", "a", "b", "--top", "0"]));
    assert!(err.contains("--top"), "{err}");
}
