//! The decay schedule as its docs state it: a page unused for between half the decay
//! time (rounded up) and the whole of it goes back, in frames for every decay time,
//! and by the clock under a decay in milliseconds whether or not the program ticks;
//! a new policy starts every age afresh.

use core::cell::Cell;
use core::ptr::NonNull;

use bento_align::Alignment;
use bento_pages::{CommitCache, Decay, HeapPages, Metered, PageSource, Retention};

const PAGE: usize = 4096;

type Cache = CommitCache<Metered<HeapPages>>;

/// A cache of 64 pages under `retention`, and a reservation of 16 pages from it.
fn reserved(retention: Retention) -> (Cache, NonNull<u8>) {
    let pages = CommitCache::with_capacity(Metered::new(HeapPages::new()), 64 * PAGE).unwrap();
    pages.set_retention(retention);
    let base = pages.reserve(16 * PAGE, Alignment::MIN).unwrap();
    (pages, base)
}

/// Commits page `i` of the reservation at `base`, writes it and decommits it: the
/// cache keeps it.
///
/// # Safety
///
/// Page `i` must be a page of the live reservation at `base`, not committed.
unsafe fn use_and_free(pages: &Cache, base: NonNull<u8>, i: usize) {
    // SAFETY: the caller's contract.
    unsafe { use_and_free_run(pages, base, i, 1) }
}

/// [`use_and_free`] for pages `first..first + n`, committed together (so that the
/// peak in use makes room for all of them under the cap).
///
/// # Safety
///
/// The pages must be pages of the live reservation at `base`, not committed.
unsafe fn use_and_free_run(pages: &Cache, base: NonNull<u8>, first: usize, n: usize) {
    // SAFETY: the caller's contract.
    unsafe {
        let p = base.add(first * PAGE);
        pages.commit(p, n * PAGE).unwrap();
        for k in 0..n {
            p.add(k * PAGE).write(k as u8);
        }
        pages.decommit(p, n * PAGE);
    }
}

/// Gives everything back and releases the reservation.
fn finish(pages: &Cache, base: NonNull<u8>) {
    pages.validate().unwrap();
    pages.trim();
    // SAFETY: the live reservation, every page of it decommitted.
    unsafe { pages.release(base, 16 * PAGE) };
}

/// The tick after a page's free at which it goes back, under `Decay::frames(delay)`,
/// freed `offset` ticks into the program's ticking, with another page kept again every
/// frame when `busy` (so the shortcut for an idle cache does not apply).
fn age_at_return(delay: u32, offset: u32, busy: bool) -> u32 {
    let decay = Decay::frames(delay).with_peak_percent(1000);
    let (pages, base) = reserved(Retention::Decay(decay));
    // SAFETY: pages 0 and 8 of the live reservation, each decommitted after its use.
    let age = unsafe {
        for _ in 0..=offset {
            pages.tick();
        }
        // Page 8, when busy, is kept again every frame from here: younger than page
        // 0, it goes back with it or after it, so one page kept means page 0 is gone.
        if busy {
            use_and_free(&pages, base, 8);
        }
        use_and_free(&pages, base, 0);
        let mut age = 0;
        let kept = |pages: &Cache| pages.stats().parked;
        let floor = if busy { PAGE } else { 0 };
        while kept(&pages) > floor {
            if busy {
                // Page 8 taken back and freed again: kept this frame.
                use_and_free(&pages, base, 8);
            }
            pages.tick();
            age += 1;
            assert!(age <= 4 * delay + 4, "delay {delay}: never given back");
        }
        age
    };
    finish(&pages, base);
    age
}

#[test]
fn in_frames_a_page_goes_back_between_half_the_decay_and_all_of_it() {
    let delays = if cfg!(miri) { 1..=4 } else { 1..=12 };
    for delay in delays {
        for offset in 0..delay {
            for busy in [false, true] {
                let age = age_at_return(delay, offset, busy);
                let half = delay.div_ceil(2);
                assert!(
                    (half..=delay).contains(&age),
                    "Decay::frames({delay}), freed {offset} ticks in, busy {busy}: given \
                     back {age} frames after its free, outside {half}..={delay}"
                );
            }
        }
    }
}

#[test]
fn three_frames_keep_a_page_through_the_next_tick() {
    let (pages, base) = reserved(Retention::Decay(Decay::frames(3)));
    // SAFETY: page 0 of the live reservation.
    unsafe {
        pages.tick();
        use_and_free(&pages, base, 0);
    }
    assert_eq!(pages.tick(), 0, "one frame unused: kept");
    assert_eq!(pages.tick(), PAGE, "two frames unused: given back");
    finish(&pages, base);
}

thread_local! {
    /// The clock of these tests, in milliseconds: each test thread reads its own.
    static NOW: Cell<u64> = const { Cell::new(0) };
}

fn now() -> u64 {
    NOW.get()
}

/// A decay of `millis` milliseconds of [`now`] only, as `Decay::millis` makes one.
fn timed(millis: u32) -> Decay {
    Decay {
        millis,
        clock: Some(now),
        ..Decay::frames(0)
    }
}

/// A game that ticks under a decay in frames, then switches to a decay in
/// milliseconds (its menu, or the window minimised) and keeps ticking: time rules,
/// from the switch on, through `tick` and `decay` alike.
#[test]
fn a_decay_in_milliseconds_set_after_ticks_runs_by_the_clock() {
    for through_tick in [false, true] {
        NOW.set(5_000);
        let (pages, base) = reserved(Retention::Decay(Decay::frames(600)));
        // SAFETY: pages 0..4 of the live reservation.
        unsafe {
            for _ in 0..10 {
                pages.tick();
            }
            use_and_free_run(&pages, base, 0, 4);
        }
        NOW.set(9_000);
        pages.set_retention(Retention::Decay(timed(100)));
        let step = |pages: &Cache| {
            if through_tick {
                pages.tick()
            } else {
                pages.decay()
            }
        };
        NOW.set(9_049);
        assert_eq!(step(&pages), 0, "49 ms after the switch: kept");
        assert_eq!(pages.stats().parked, 4 * PAGE);
        NOW.set(9_050);
        assert_eq!(
            step(&pages),
            4 * PAGE,
            "50 ms unused after the switch (tick: {through_tick}): given back"
        );
        finish(&pages, base);
    }
}

/// Switching from a decay by the clock to one in frames restarts the ages in frames:
/// what was kept waits the new decay time, counted from the switch.
#[test]
fn a_decay_in_frames_set_after_a_timed_one_counts_from_the_switch() {
    NOW.set(1_000_000);
    let (pages, base) = reserved(Retention::Decay(timed(1000)));
    // SAFETY: pages 0..4 of the live reservation.
    unsafe {
        use_and_free_run(&pages, base, 0, 4);
    }
    pages.set_retention(Retention::Decay(Decay::frames(4)));
    assert_eq!(pages.tick(), 0, "one frame after the switch: kept");
    assert_eq!(pages.tick(), 4 * PAGE, "two frames unused: given back");
    finish(&pages, base);
}

/// Setting the policy in force is not a switch: a program that sets it every frame
/// still gets its memory back.
#[test]
fn setting_the_same_policy_every_frame_still_decays() {
    let decay = Retention::Decay(Decay::frames(4));
    let (pages, base) = reserved(decay);
    // SAFETY: page 0 of the live reservation.
    unsafe { use_and_free(&pages, base, 0) };
    let mut frames = 0;
    while pages.stats().parked > 0 {
        pages.set_retention(decay);
        pages.tick();
        frames += 1;
        assert!(frames <= 4, "kept past the decay time");
    }
    finish(&pages, base);
}

/// Under the OS clock itself: `Decay::millis` after ticks gives the memory back
/// through `decay` within a few decay times of waiting.
#[cfg(all(feature = "os", any(unix, windows), not(miri)))]
#[test]
fn decay_millis_after_ticks_gives_memory_back_on_the_os_clock() {
    let (pages, base) = reserved(Retention::Decay(Decay::frames(600)));
    // SAFETY: pages 0..8 of the live reservation.
    unsafe {
        pages.tick();
        use_and_free_run(&pages, base, 0, 8);
    }
    pages.set_retention(Retention::Decay(Decay::millis(20)));
    let start = std::time::Instant::now();
    while pages.stats().parked > 0 {
        assert!(
            start.elapsed() < std::time::Duration::from_secs(10),
            "still kept after 10 s under a decay of 20 ms"
        );
        std::thread::sleep(std::time::Duration::from_millis(5));
        pages.tick();
        pages.decay();
    }
    finish(&pages, base);
}

/// `Decay::KEEP` never steps: what the cap allows stays through any number of ticks
/// and clock reads, and goes on `trim`.
#[test]
fn keep_never_decays_and_trims() {
    let (pages, base) = reserved(Retention::Decay(Decay::KEEP));
    // SAFETY: pages 0..4 of the live reservation.
    unsafe { use_and_free_run(&pages, base, 0, 4) };
    for _ in 0..100 {
        assert_eq!(pages.tick() + pages.decay(), 0);
    }
    let s = pages.stats();
    assert_eq!((s.parked, s.steps), (4 * PAGE, 0));
    assert_eq!(pages.trim(), 4 * PAGE);
    finish(&pages, base);
}
