//! Sampled guard pages through a heap: a use after free and an overrun of a
//! guarded block end the program with one report naming the heap, the tag and the
//! allocation site (each in a child process: the report aborts).

#![cfg(all(unix, not(miri)))]

use core::alloc::Layout;
use std::os::unix::process::ExitStatusExt;

use allocator_api2::alloc::Global;
use bento_heap::{HeapBuilder, Tag};
use bento_pages::GuardConfig;

static VOICES: Tag = Tag::new("voices");

/// Runs this test binary's `test` alone with `GUARD_CHILD` set; its stderr, after
/// checking that it aborted.
fn child_dies(test: &str) -> String {
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", test, "--nocapture", "--test-threads=1"])
        .env("GUARD_CHILD", "1")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    // SIGABRT.
    assert_eq!(out.status.signal(), Some(6), "{err}");
    err
}

fn in_child() -> bool {
    std::env::var_os("GUARD_CHILD").is_some()
}

#[test]
fn a_use_after_free_through_a_heap_names_the_heap_tag_and_site() {
    if in_child() {
        let heap = HeapBuilder::new("audio")
            .register(false)
            .guard_pages(GuardConfig::DEFAULT.every(1).slots(4))
            .build(Global);
        let layout = Layout::new::<[u64; 8]>();
        let p = heap.alloc_tagged(layout, &VOICES).unwrap();
        // SAFETY: live, freed once; the read after is the bug under test.
        unsafe {
            heap.free(p, layout);
            core::hint::black_box(p.add(8).read_volatile());
        }
        return;
    }
    let err =
        child_dies("guard_pages::a_use_after_free_through_a_heap_names_the_heap_tag_and_site");
    let first = err
        .lines()
        .find(|l| l.starts_with("bento: "))
        .unwrap_or_default();
    assert!(
        first.starts_with("bento: use after free of a 64-byte block at 0x"),
        "{err}"
    );
    assert!(
        first.ends_with("8 bytes into it (heap \"audio\", tag \"voices\")"),
        "{err}"
    );
    let alloc = err
        .split("bento: allocated at:\n")
        .nth(1)
        .unwrap_or_default();
    assert!(
        alloc.starts_with("    crates/heap/tests/all/guard_pages.rs:"),
        "{err}"
    );
    assert!(err.contains("bento: freed at:\n    #0 0x"), "{err}");
    assert!(err.ends_with("bento: aborting\n"), "{err}");
}

#[test]
fn an_overrun_through_a_heap_faults_at_the_first_byte_past_the_block() {
    if in_child() {
        let heap = HeapBuilder::new("physics")
            .register(false)
            .guard_pages(GuardConfig::DEFAULT.every(1).slots(4))
            .build(Global);
        // Two blocks: one against its slot's end, the other against its start.
        for _ in 0..2 {
            let mut v = allocator_api2::vec::Vec::<u8, _>::with_capacity_in(200, &heap);
            for i in 0..=200 {
                // The 201st byte is past the block: bounds unchecked, as a bug is.
                // SAFETY: none for `i == 200`: the overrun under test.
                unsafe { v.as_mut_ptr().add(i).write_volatile(i as u8) };
            }
        }
        return;
    }
    let err = child_dies(
        "guard_pages::an_overrun_through_a_heap_faults_at_the_first_byte_past_the_block",
    );
    let first = err
        .lines()
        .find(|l| l.starts_with("bento: "))
        .unwrap_or_default();
    assert!(
        first.starts_with("bento: overrun of a 200-byte block at 0x"),
        "{err}"
    );
    assert!(
        first.ends_with("0 bytes past its end (heap \"physics\")"),
        "{err}"
    );
}

#[test]
fn guarded_heap_blocks_live_beside_the_others_on_many_threads() {
    let heap = HeapBuilder::new("guarded-threads")
        .register(false)
        .guard_pages(GuardConfig::DEFAULT.every(3).slots(64))
        .build(Global);
    std::thread::scope(|s| {
        for t in 0..4u8 {
            let heap = &heap;
            s.spawn(move || {
                let mut kept = Vec::new();
                for i in 0..2000usize {
                    let layout = Layout::from_size_align(8 + (i * 31) % 6000, 8).unwrap();
                    let p = heap.alloc(layout).unwrap();
                    // SAFETY: a fresh block of `layout.size()` bytes.
                    unsafe { p.write_bytes(t, layout.size()) };
                    kept.push((p, layout));
                    if kept.len() > 16 {
                        let (p, layout) = kept.swap_remove(i % kept.len());
                        // SAFETY: live, freed once, its bytes as written.
                        unsafe {
                            assert!((0..layout.size()).all(|k| *p.as_ptr().add(k) == t));
                            heap.free(p, layout);
                        }
                    }
                }
                for (p, layout) in kept {
                    // SAFETY: live, freed once.
                    unsafe { heap.free(p, layout) };
                }
            });
        }
    });
    let s = heap.validate().unwrap();
    assert_eq!((s.live_blocks, s.total_allocs), (0, 8000), "{s:?}");
}

#[test]
fn a_frame_heaps_discard_sends_its_guarded_blocks_back_and_a_late_use_faults() {
    if in_child() {
        return;
    }
    let mut buf = vec![core::mem::MaybeUninit::uninit(); 1 << 16];
    let mut bump = bento_primitives::Bump::new(&mut buf);
    for frame in 0..3 {
        let mut heap = HeapBuilder::new("frame-temps")
            .register(false)
            .tracking(bento_heap::Track::Sites)
            .guard_pages(GuardConfig::DEFAULT.every(2).slots(16))
            .build(&bump);
        for i in 0..10 {
            let layout = Layout::from_size_align(16 + i, 8).unwrap();
            heap.alloc_tagged(layout, &VOICES).unwrap();
        }
        assert_eq!(heap.tag_stats()[0].live_blocks, 10);
        heap.discard_all();
        let s = heap.validate().unwrap();
        assert_eq!(
            (s.live_blocks, s.live_bytes, s.total_frees),
            (0, 0, 10),
            "frame {frame}"
        );
        assert_eq!(heap.tag_stats()[0].live_blocks, 0);
        drop(heap);
        bump.reset();
    }
    let g = bento_heap::guard_stats().unwrap();
    assert!(g.guarded > 0, "{g:?}");
    let err = child_dies("guard_pages::a_guarded_frame_block_used_after_its_discard_faults");
    let first = err
        .lines()
        .find(|l| l.starts_with("bento: "))
        .unwrap_or_default();
    assert!(
        first.starts_with("bento: use after free of a 64-byte block"),
        "{err}"
    );
    assert!(first.ends_with("(heap \"frame\")"), "{err}");
}

/// A guarded block of a frame heap used after the frame's discard (run only as a
/// child of the test above).
#[test]
fn a_guarded_frame_block_used_after_its_discard_faults() {
    if !in_child() {
        return;
    }
    let mut buf = vec![core::mem::MaybeUninit::uninit(); 1 << 16];
    let bump = bento_primitives::Bump::new(&mut buf);
    let mut heap = HeapBuilder::new("frame")
        .register(false)
        .guard_pages(GuardConfig::DEFAULT.every(1).slots(4))
        .build(&bump);
    let p = heap.alloc(Layout::new::<[u8; 64]>()).unwrap();
    heap.discard_all();
    // SAFETY: none: the block went with the discard; the read is the bug under test.
    core::hint::black_box(unsafe { p.read_volatile() });
}
