use core::alloc::Layout;

use super::pool::GuardPool;
use super::*;

fn layout(size: usize, align: usize) -> Layout {
    Layout::from_size_align(size, align).unwrap()
}

fn pool(slots: u32) -> &'static GuardPool {
    GuardPool::new(GuardConfig::DEFAULT.slots(slots)).unwrap()
}

#[test]
fn a_block_ends_where_its_slot_does_and_its_slot_is_committed_alone() {
    let pool = pool(3);
    let page = pool.page;
    let before = pool.stats();
    assert_eq!(
        before.committed_bytes,
        GuardConfig::DEFAULT.slots(3).table_bytes(page)
    );
    for (size, align) in [(1, 1), (100, 4), (48, 16), (page, 8), (2 * page, 16)] {
        let p = pool
            .alloc(layout(size, align), Label::default(), &Trace::EMPTY)
            .unwrap();
        let end = (p.addr().get() + size).next_multiple_of(align);
        if pool.stats().guarded % 2 == 1 {
            assert_eq!(end % page, 0, "{size}/{align} ends on its slot's end");
        } else {
            assert_eq!(p.addr().get() % page, 0, "{size}/{align} starts its slot");
        }
        assert_eq!(p.addr().get() % align, 0);
        assert!(pool.owns(p.as_ptr()));
        // SAFETY: the block's bytes are committed.
        unsafe { p.write_bytes(0x5A, size) };
        assert_eq!(pool.size_of(p), Some(size));
        let live = pool.stats().committed_bytes - before.committed_bytes;
        assert_eq!(
            live,
            size.next_multiple_of(page),
            "{size}/{align}: its pages alone"
        );
        pool.validate().unwrap();
        // SAFETY: live, not used after.
        assert_eq!(unsafe { pool.free(p, &Trace::here(None)) }, size);
        pool.validate().unwrap();
        assert_eq!(pool.size_of(p), None);
        assert_eq!(pool.stats().committed_bytes, before.committed_bytes);
    }
}

#[test]
fn layouts_that_do_not_fit_a_slot_are_refused() {
    let pool = pool(1);
    let page = pool.page;
    assert!(
        pool.alloc(layout(0, 1), Label::default(), &Trace::EMPTY)
            .is_none()
    );
    assert!(
        pool.alloc(layout(2 * page + 1, 1), Label::default(), &Trace::EMPTY)
            .is_none()
    );
    assert!(
        pool.alloc(layout(8, 2 * page), Label::default(), &Trace::EMPTY)
            .is_none()
    );
    assert_eq!(pool.stats().guarded, 0);
}

#[test]
fn fresh_slots_go_first_then_the_oldest_freed_and_a_full_pool_refuses() {
    let pool = pool(2);
    let l = layout(64, 8);
    let a = pool.alloc(l, Label::default(), &Trace::EMPTY).unwrap();
    let b = pool.alloc(l, Label::default(), &Trace::EMPTY).unwrap();
    assert_ne!(a, b);
    assert!(pool.alloc(l, Label::default(), &Trace::EMPTY).is_none());
    assert_eq!(pool.stats().refused, 1);
    // SAFETY: live, not used after.
    unsafe {
        pool.free(a, &Trace::EMPTY);
        pool.free(b, &Trace::EMPTY);
    }
    let stats = pool.stats();
    assert_eq!((stats.live, stats.quarantined, stats.guarded), (0, 2, 2));
    // `a` was freed first: its slot is reused first, `b`'s stays in quarantine.
    assert_eq!(pool.validate().unwrap().quarantined, 2);
    let c = pool.alloc(l, Label::default(), &Trace::EMPTY).unwrap();
    assert_eq!(c, a);
    pool.validate().unwrap();
    assert_eq!(pool.stats().quarantined, 1);
    // SAFETY: live, not used after.
    unsafe { pool.free(c, &Trace::EMPTY) };
}

#[test]
fn the_sampler_draws_around_its_rate() {
    let pool = GuardPool::new(GuardConfig::DEFAULT.every(100).slots(1)).unwrap();
    let mut sum = 0u64;
    for _ in 0..10_000 {
        let d = pool.draw();
        assert!((1..200).contains(&d), "{d}");
        sum += u64::from(d);
    }
    let mean = sum / 10_000;
    assert!((90..=110).contains(&mean), "{mean}");
    let hits = (0..100_000).filter(|_| pool.sample()).count();
    assert!((800..=1_250).contains(&hits), "{hits}");
}

#[test]
fn configs_are_bounded_and_parsed_strictly() {
    assert_eq!(GuardConfig::DEFAULT.every(0).every, 1);
    assert_eq!(GuardConfig::DEFAULT.slots(0).slots, 1);
    assert_eq!(GuardConfig::DEFAULT.slots(u32::MAX).slots, MAX_SLOTS);
    assert_eq!(
        GuardConfig::parse("1000"),
        Some(GuardConfig::DEFAULT.every(1000))
    );
    for bad in [
        "",
        "0",
        "-1",
        "x",
        "10,0",
        "10,4097",
        "10,",
        "10,2,3",
        "99999999999",
    ] {
        assert_eq!(GuardConfig::parse(bad), None, "{bad:?}");
    }
    let c = GuardConfig::DEFAULT;
    assert_eq!(
        c.reserved_bytes(4096),
        c.table_bytes(4096) + (64 * 3 + 1) * 4096
    );
    assert_eq!(c.committed_bound(4096), c.table_bytes(4096) + 64 * 2 * 4096);
    // As `GuardConfig::DEFAULT` says.
    assert_eq!(c.table_bytes(4096), 28 << 10);
    assert_eq!(c.reserved_bytes(4096), 800 << 10);
    assert_eq!(c.committed_bound(4096), 540 << 10);
}

#[test]
fn traces_hold_the_callers_frames() {
    let t = Trace::here(Some(core::panic::Location::caller()));
    assert_eq!(t.caller().unwrap().file(), file!());
    #[cfg(all(feature = "std", target_os = "linux"))]
    {
        assert!(t.frames().len() >= 2, "{t:?}");
        let me = (traces_hold_the_callers_frames as fn() as *const ()).addr();
        // The first frame is this test's own (a return address a little past its start).
        assert!(
            t.frames()[0] > me && t.frames()[0] - me < 4096,
            "{t:?} vs {me:#x}"
        );
    }
}

/// Runs `child` in a child process (this test binary again, this test alone) and
/// returns its stderr, checking that it aborted.
#[cfg(feature = "std")]
fn dies(test: &str, child: impl FnOnce()) -> std::string::String {
    use std::os::unix::process::ExitStatusExt;
    if std::env::var_os("BENTO_GUARD_CHILD").is_some() {
        child();
        std::process::exit(0);
    }
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", test, "--nocapture", "--test-threads=1"])
        .env("BENTO_GUARD_CHILD", "1")
        .output()
        .unwrap();
    let err = std::string::String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.signal(), Some(libc::SIGABRT), "{err}");
    err
}

#[cfg(feature = "std")]
#[test]
fn an_overrun_faults_at_once_and_names_the_block_and_its_site() {
    let err = dies(
        "guard::tests::an_overrun_faults_at_once_and_names_the_block_and_its_site",
        || {
            let pool = GuardPool::new(GuardConfig::DEFAULT.slots(2).named("test-pool")).unwrap();
            let p = pool
                .alloc(layout(100, 4), Label::default(), &Trace::here(None))
                .unwrap();
            // SAFETY: none: the byte past the block, to fault.
            unsafe { p.add(100).write_volatile(1) };
        },
    );
    assert!(
        err.contains("bento: overrun of a 100-byte block at 0x"),
        "{err}"
    );
    assert!(
        err.contains(", 0 bytes past its end (heap \"test-pool\")"),
        "{err}"
    );
    assert!(err.contains("bento: allocated at:\n    #0 0x"), "{err}");
    assert!(err.ends_with("bento: aborting\n"), "{err}");
}

#[cfg(feature = "std")]
#[test]
fn a_use_after_free_and_an_underrun_name_their_kind_and_the_free_site() {
    let name = "guard::tests::a_use_after_free_and_an_underrun_name_their_kind_and_the_free_site";
    let err = dies(name, || {
        let pool = GuardPool::new(GuardConfig::DEFAULT.slots(2)).unwrap();
        let label = Label {
            heap: Some("audio"),
            tag: Some("voices"),
            owner: 0,
        };
        let p = pool
            .alloc(layout(48, 16), label, &Trace::here(None))
            .unwrap();
        // SAFETY: live, then freed; the read after is the bug under test.
        unsafe {
            pool.free(p, &Trace::here(Some(core::panic::Location::caller())));
            core::hint::black_box(p.add(16).read_volatile());
        }
    });
    assert!(
        err.contains("bento: use after free of a 48-byte block"),
        "{err}"
    );
    assert!(
        err.contains("16 bytes into it (heap \"audio\", tag \"voices\")"),
        "{err}"
    );
    assert!(
        err.contains("bento: freed at:\n    crates/pages/src/guard/tests.rs:"),
        "{err}"
    );
}

#[cfg(feature = "std")]
#[test]
fn an_underrun_faults_before_the_slot_and_a_double_free_is_reported() {
    let err = dies(
        "guard::tests::an_underrun_faults_before_the_slot_and_a_double_free_is_reported",
        || {
            let pool = GuardPool::new(GuardConfig::DEFAULT.slots(2)).unwrap();
            let p = pool
                .alloc(layout(2 * pool.page, 16), Label::default(), &Trace::EMPTY)
                .unwrap();
            // SAFETY: none: the byte before the block, in the guard page, to fault.
            unsafe { p.sub(8).write_volatile(1) };
        },
    );
    assert!(
        err.contains("bento: underrun of a 8192-byte block"),
        "{err}"
    );
    assert!(err.contains("8 bytes before its start"), "{err}");
    assert!(
        err.contains("bento: allocated at: (no stack in this build)"),
        "{err}"
    );
    let err = dies("guard::tests::double_free_child", double_free_child);
    assert!(
        err.contains("bento: double free of a 32-byte block at 0x"),
        "{err}"
    );
    assert!(
        err.contains("bento: freed at:") && err.contains("bento: this free at:"),
        "{err}"
    );
}

/// Frees a guarded block twice (run only as a child of the test above).
#[cfg(feature = "std")]
#[test]
fn double_free_child() {
    if std::env::var_os("BENTO_GUARD_CHILD").is_none() {
        return;
    }
    let pool = GuardPool::new(GuardConfig::DEFAULT.slots(2)).unwrap();
    let p = pool
        .alloc(layout(32, 8), Label::default(), &Trace::here(None))
        .unwrap();
    // SAFETY: live; the second free is the bug under test.
    unsafe {
        pool.free(p, &Trace::here(None));
        pool.free(p, &Trace::here(None));
    }
}

#[cfg(feature = "std")]
#[test]
fn threads_share_a_pool_and_it_stays_valid() {
    let pool = pool(16);
    std::thread::scope(|s| {
        for t in 0..4u8 {
            s.spawn(move || {
                for i in 0..500usize {
                    let size = 1 + (i * 131) % (2 * pool.page);
                    let Some(p) = pool.alloc(layout(size, 8), Label::default(), &Trace::EMPTY)
                    else {
                        continue;
                    };
                    // SAFETY: a live block of `size` bytes, freed once.
                    unsafe {
                        p.write_bytes(t, size);
                        assert!((0..size).all(|k| *p.as_ptr().add(k) == t));
                        pool.free(p, &Trace::EMPTY);
                    }
                    if i % 50 == 0 {
                        pool.validate().unwrap();
                    }
                }
            });
        }
    });
    let s = pool.validate().unwrap();
    assert_eq!(s.live, 0);
    assert!(s.guarded > 1000, "{s:?}");
}
