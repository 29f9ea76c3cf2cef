use core::alloc::Layout;
use core::ptr::NonNull;

use allocator_api2::alloc::Allocator;
use bento_align::Alignment;
use bento_pages::{FaultyPages, HeapPages, Metered, PageSource};
use bento_primitives::{AllocError, Arena, ArenaConfig, FrameArena, FrameBusy};
use bento_testkit::{Caps, Ops, SizeGen, Stats, Target, cases, forward_to_api02, run, seeded};

type Faulty = FaultyPages<HeapPages>;

fn small_config(reserve: usize) -> ArenaConfig {
    ArenaConfig {
        reserve,
        commit_step: 4096,
        ..ArenaConfig::default()
    }
}

/// An `Arena` over failure-injecting heap pages as a testkit target.
struct ArenaTarget<'a> {
    arena: &'a mut Arena<Faulty>,
    resets: usize,
}

impl Target for ArenaTarget<'_> {
    forward_to_api02!(|self, end| &*self.arena);

    fn reset(&mut self) {
        self.resets += 1;
        if self.resets.is_multiple_of(2) {
            self.arena.reset_and_decommit();
            assert_eq!(self.arena.committed(), 0, "retain_on_reset is 0 here");
        } else {
            let committed = self.arena.committed();
            self.arena.reset();
            assert_eq!(self.arena.committed(), committed, "reset keeps the pages");
        }
        assert_eq!(self.arena.used(), 0);
    }

    fn fail_next(&mut self, k: u32) {
        self.arena.source().fail_commit(k as usize);
    }

    fn validate(&mut self) -> Result<Stats, String> {
        let used = self.arena.validate().map_err(|e| e.to_string())?.used_bytes;
        if self.arena.committed() < used || self.arena.peak() < used {
            return Err("committed or peak below the bytes in use".into());
        }
        Ok(Stats::default())
    }
}

#[test]
fn model_with_resets_and_commit_failures() {
    let reserve = cases(64 << 10, 16 << 10);
    let mut arena =
        Arena::with_source(Faulty::new(HeapPages::new()), small_config(reserve)).unwrap();
    let caps = Caps::default()
        .with_ops(Ops::RESET | Ops::FAIL_NEXT | Ops::HUGE)
        .with_sizes(SizeGen::new(cases(8192, 512)).with_boundaries(&[4096, 4097]))
        .with_max_align(Alignment::new(8192).unwrap())
        .with_max_live(cases(256, 24))
        .with_validate_every(4);
    let r = seeded(cases(300, 1), |u| {
        arena.source().heal();
        arena.reset();
        run(
            &mut ArenaTarget {
                arena: &mut arena,
                resets: 0,
            },
            &caps,
            u,
        )
    });
    // Coverage is the native runs' job; under Miri one case looks for UB.
    if !cfg!(miri) {
        assert!(
            r.resizes_in_place > 0 && r.resets > 0 && r.allocs_failed > 0,
            "{r:?}"
        );
        assert!(
            arena.source().injected() > 0,
            "no commit failure was injected"
        );
    }
}

#[test]
fn pages_are_committed_only_as_used() {
    let pages = Metered::new(HeapPages::new());
    let arena = Arena::with_source(&pages, small_config(1 << 20)).unwrap();
    assert_eq!((arena.committed(), pages.stats().committed), (0, 0));
    arena.alloc(1u8).unwrap();
    assert_eq!(arena.committed(), 4096);
    arena.alloc_layout(Layout::new::<[u8; 4096]>()).unwrap();
    assert_eq!(arena.committed(), 2 * 4096);
    arena.alloc_layout(Layout::new::<[u8; 20_000]>()).unwrap();
    assert_eq!(arena.committed(), 6 * 4096); // 24_104 bytes used
    assert_eq!(pages.stats().committed, arena.committed());
    assert_eq!(arena.reserved(), 1 << 20);
}

#[test]
fn a_commit_failure_is_an_error_that_changes_nothing() {
    let arena = Arena::with_source(Faulty::new(HeapPages::new()), small_config(1 << 20)).unwrap();
    let keep = arena.alloc([9u8; 100]).unwrap();
    let before = (arena.used(), arena.committed());
    arena.source().fail_commits_from(0);
    assert_eq!(
        arena.alloc_layout(Layout::new::<[u8; 8000]>()),
        Err(AllocError)
    );
    assert!(arena.alloc([0u8; 5000]).is_err());
    assert_eq!((arena.used(), arena.committed()), before);
    assert_eq!(keep[99], 9);
    // A single refused step-sized commit falls back to what the block needs.
    arena.source().heal();
    arena.source().fail_commit(0);
    let config = ArenaConfig {
        commit_step: 64 << 10,
        ..small_config(1 << 20)
    };
    let wide = Arena::with_source(Faulty::new(HeapPages::new()), config).unwrap();
    wide.source().fail_commit(0);
    wide.alloc(1u64).unwrap();
    assert_eq!(wide.committed(), 4096, "the retry commits just one page");
    arena.source().heal();
    assert!(arena.alloc_layout(Layout::new::<[u8; 8000]>()).is_ok());
}

#[test]
fn reset_keeps_pages_and_reset_and_decommit_keeps_the_retained_part() {
    let pages = Metered::new(HeapPages::new());
    let config = ArenaConfig {
        retain_on_reset: 8192,
        ..small_config(1 << 20)
    };
    let mut arena = Arena::with_source(&pages, config).unwrap();
    arena.alloc_slice_copy(&[1u8; 50_000]).unwrap();
    let committed = arena.committed();
    arena.reset();
    assert_eq!((arena.used(), arena.committed()), (0, committed));
    arena.reset_and_decommit();
    assert_eq!(arena.committed(), 8192);
    assert_eq!(pages.stats().committed, 8192);
    assert_eq!(arena.peak(), 50_000);
    drop(arena);
    crate::assert_all_given_back(&pages);
}

#[test]
fn trap_on_reset_decommits_above_the_retained_part() {
    let pages = Metered::new(HeapPages::new());
    let config = ArenaConfig {
        retain_on_reset: 4096,
        trap_on_reset: true,
        ..small_config(1 << 20)
    };
    let mut arena = Arena::with_source(&pages, config).unwrap();
    arena.alloc_slice_copy(&[1u8; 30_000]).unwrap();
    let decommits = pages.stats().decommits;
    arena.reset();
    assert_eq!(arena.committed(), 4096);
    assert_eq!(pages.stats().decommits, decommits + 1);
    assert_eq!(pages.stats().committed, 4096);
}

/// A stale pointer into a trapping arena faults: checked in a child process, since the
/// fault kills it.
#[cfg(all(unix, not(miri)))]
#[test]
fn trap_on_reset_makes_a_stale_pointer_fault() {
    use bento_pages::SystemPages;
    if std::env::var_os("BENTO_TRAP_CHILD").is_some() {
        let config = ArenaConfig {
            trap_on_reset: true,
            ..ArenaConfig::default()
        };
        let mut arena = Arena::with_source(SystemPages::with_traps(), config).unwrap();
        let p = NonNull::from(arena.alloc([7u8; 64]).unwrap()).cast::<u8>();
        arena.reset();
        // SAFETY: none: this read of a stale pointer is meant to fault.
        let v = unsafe { core::ptr::read_volatile(p.as_ptr()) };
        println!("read {v} without a fault");
        std::process::exit(0);
    }
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "arena::trap_on_reset_makes_a_stale_pointer_fault",
            "--nocapture",
        ])
        .env("BENTO_TRAP_CHILD", "1")
        .output()
        .unwrap();
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(
        out.status.signal(),
        Some(libc::SIGSEGV),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
}

#[test]
fn scopes_nest_and_roll_back() {
    let mut arena = Arena::with_source(HeapPages::new(), small_config(1 << 20)).unwrap();
    arena.alloc(1u64).unwrap();
    let base = arena.used();
    {
        let mut outer = arena.scope();
        let a = outer.alloc([1u32; 10]).unwrap();
        assert_eq!(a[9], 1);
        let outer_used = outer.used();
        let first_inner;
        {
            let inner = outer.scope();
            first_inner = NonNull::from(inner.alloc(0u64).unwrap());
            let mut v = allocator_api2::vec::Vec::new_in(&inner);
            v.extend(0..1000u32);
            assert_eq!(v[999], 999);
            assert!(inner.scope_used() >= 4008);
        }
        assert_eq!(outer.used(), outer_used);
        // The next block lands where the inner scope's first one did.
        assert_eq!(NonNull::from(outer.alloc(2u64).unwrap()), first_inner);
    }
    assert_eq!(arena.used(), base);
    arena.validate().unwrap();
}

#[test]
fn a_block_below_a_scope_does_not_grow_into_it() {
    let mut arena = Arena::with_source(HeapPages::new(), small_config(1 << 20)).unwrap();
    let l = Layout::from_size_align(16, 8).unwrap();
    let p = arena.alloc_layout(l).unwrap();
    let used = arena.used();
    {
        let scope = arena.scope();
        // SAFETY: `p` is live with `l` (the scope does not free it).
        assert!(!unsafe { scope.try_grow_in_place(p, l, 64) });
        // SAFETY: as above; the free is refused in effect (it lies below the scope).
        unsafe { (&*scope).deallocate(p, l) };
        assert_eq!(scope.used(), used);
    }
    assert_eq!(arena.used(), used);
}

#[test]
fn collections_live_in_it() {
    let arena = Arena::with_source(HeapPages::new(), small_config(4 << 20)).unwrap();
    let n = cases(5000, 100) as u32;
    let mut map = hashbrown::HashMap::new_in(&arena);
    for i in 0..n {
        map.insert(format!("entity_{i}"), i * 7);
    }
    assert_eq!(map[format!("entity_{}", n - 1).as_str()], (n - 1) * 7);
    assert_eq!(map.len(), n as usize);
    let mut v = allocator_api2::vec::Vec::new_in(&arena);
    v.extend(0..10 * n as u64);
    assert_eq!(
        v.iter().sum::<u64>(),
        (10 * n as u64 - 1) * 10 * n as u64 / 2
    );
    let b = allocator_api2::boxed::Box::new_in([3u16; 100], &arena);
    assert_eq!(b[50], 3);
}

#[test]
fn bad_inputs_fail_cleanly() {
    let arena = Arena::with_source(HeapPages::new(), small_config(64 << 10)).unwrap();
    let z = arena
        .alloc_layout(Layout::from_size_align(0, 4096).unwrap())
        .unwrap();
    assert_eq!(
        (z.addr().get() % 4096, arena.used(), arena.committed()),
        (0, 0, 0)
    );
    let p = arena
        .alloc_layout(Layout::from_size_align(10, 4096).unwrap())
        .unwrap();
    assert_eq!(p.addr().get() % 4096, 0);
    let big_align = arena
        .alloc_layout(Layout::from_size_align(8, 16384).unwrap())
        .unwrap();
    assert_eq!(big_align.addr().get() % 16384, 0);
    let used = arena.used();
    for layout in [
        Layout::from_size_align(64 << 10, 8).unwrap(),
        Layout::from_size_align(isize::MAX as usize - 15, 16).unwrap(),
        Layout::from_size_align(8, 1 << 30).unwrap(),
    ] {
        assert_eq!(arena.alloc_layout(layout), Err(AllocError), "{layout:?}");
    }
    assert_eq!(arena.used(), used);
    assert_eq!(arena.validate().map(|r| r.used_bytes), Ok(used));
    assert!(Arena::with_source(HeapPages::new(), small_config(0)).is_err());
}

#[test]
fn frames_rotate_and_memory_lives_n_frames() {
    let pages = HeapPages::new();
    let frames = FrameArena::<_, 3>::with_source(&pages, small_config(1 << 20)).unwrap();
    let mut in_flight: Vec<(bento_primitives::Frame<'_, _>, NonNull<u64>)> = Vec::new();
    for k in 0..cases(30, 8) as u64 {
        if in_flight.len() == 3 {
            // Frame k - 3 must go before its arena comes round again.
            assert_eq!(
                frames.next_frame().unwrap_err(),
                FrameBusy {
                    frame: in_flight[0].0.number()
                }
            );
            in_flight.remove(0);
        }
        let frame = frames.next_frame().unwrap();
        assert_eq!((frame.number(), frame.used()), (k, 0));
        let p = NonNull::from(frame.alloc(k * 1000).unwrap());
        frame.alloc_slice_copy(&[k as u8; 300]).unwrap();
        in_flight.push((frame, p));
        // Every frame still in flight reads back what it wrote.
        for (f, p) in &in_flight {
            // SAFETY: `p` is a block of `f`'s arena, not reset while `f` lives.
            assert_eq!(unsafe { p.read() }, f.number() * 1000);
        }
    }
    assert_eq!(frames.committed(), 3 * 4096);
    assert_eq!(frames.peak(), 8 + 304);
}

// Miri cannot map pages; `HeapPages` covers the same logic above.
#[cfg_attr(miri, ignore)]
#[test]
fn the_system_source_works_too() {
    let mut arena = Arena::new(16 << 20).unwrap();
    assert!(arena.source().page_size() >= 4096);
    let s = arena.alloc_slice_copy(&[5u32; 100_000]).unwrap();
    assert_eq!(s[99_999], 5);
    arena.reset_and_decommit();
    assert_eq!(arena.committed(), 0);
}

#[test]
fn tiny_pages_still_give_aligned_blocks() {
    // A source whose pages are smaller than a block header: the arenas reserve in
    // 16-byte granules at a 16-byte boundary anyway.
    let pages = HeapPages::with_page_size(Alignment::new(4).unwrap());
    let arena = Arena::with_source(&pages, small_config(100)).unwrap();
    let a = arena
        .alloc_layout(Layout::from_size_align(3, 1).unwrap())
        .unwrap();
    let b = NonNull::from(arena.alloc(7u64).unwrap());
    assert_eq!(b.addr().get() % 8, 0);
    assert!(b.addr().get() >= a.addr().get() + 3);
    assert_eq!(arena.reserved() % 16, 0);
    arena.validate().unwrap();
    let double = bento_primitives::DoubleArena::with_source(&pages, small_config(100)).unwrap();
    let lower = double
        .lower()
        .alloc_layout(Layout::from_size_align(40, 1).unwrap())
        .unwrap();
    let upper = double.upper().alloc_layout(Layout::new::<u64>()).unwrap();
    assert_eq!(upper.addr().get() % 8, 0);
    assert!(upper.addr().get() >= lower.addr().get() + 40);
    assert!(
        double
            .upper()
            .alloc_layout(Layout::from_size_align(64, 1).unwrap())
            .is_err()
    );
    double.validate().unwrap();
}
