//! What a [`CommitCache`](crate::CommitCache) does with the pages its consumer gives
//! back: the retention policy every allocator over the cache shares.

/// How a [`CommitCache`](crate::CommitCache) keeps the pages its consumer decommits and
/// the reservations it releases.
///
/// ```
/// use bento_pages::{Decay, Retention};
///
/// // A game that ticks once a frame: kept pages go back after 60 to 120 frames unused.
/// let game = Retention::Decay(Decay::frames(120));
/// assert!(!game.is_eager());
/// // A program that never ticks: after 500 to 1000 ms unused, by the OS clock.
/// # #[cfg(feature = "os")]
/// let server = Retention::Decay(Decay::millis(1000));
/// assert!(Retention::Eager.is_eager());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Retention {
    /// Keeps at most the limit the consumer sets ([`CommitCache::set_limit`]), for as
    /// long as no other page needs the room: no unoccupied page stays committed
    /// beyond that small cache, and no clock is read.
    ///
    /// [`CommitCache::set_limit`]: crate::CommitCache::set_limit
    Eager,
    /// Keeps freed pages and released reservations committed, within a cap, and gives
    /// back what stayed unused for the decay time.
    Decay(Decay),
}

impl Retention {
    /// The retention of a new cache: [`Decay::DEFAULT`].
    pub const DEFAULT: Self = Self::Decay(Decay::DEFAULT);

    /// Whether this is [`Retention::Eager`].
    ///
    /// ```
    /// assert!(bento_pages::Retention::Eager.is_eager());
    /// ```
    pub const fn is_eager(&self) -> bool {
        matches!(self, Self::Eager)
    }
}

impl Default for Retention {
    fn default() -> Self {
        Self::DEFAULT
    }
}

/// The decay schedule and the cap of [`Retention::Decay`].
///
/// Kept pages age in two generations: each decay step gives back the older one and
/// makes the younger one older, so a page unused for between half the decay time
/// (rounded up) and the whole of it goes back. A decay that counts **frames**
/// (`frames > 0`) steps in calls of [`CommitCache::tick`] once the program ticks, and
/// in **milliseconds** of `clock` before that; one of `frames: 0` steps by the clock
/// always, even in a program that ticks. The clock is read on the cache's slow paths,
/// by [`CommitCache::decay`] and, under `frames: 0`, by `tick`. In frames, a page
/// freed during a frame has been unused for one frame at the next tick: under
/// `Decay::frames(3)` it goes back at the second tick after its free, under
/// `Decay::frames(4)` at the second to the fourth. A new schedule
/// ([`CommitCache::set_retention`]) starts the decay clock afresh.
///
/// The cap: the bytes committed through the cache, in use and kept, stay within
/// `peak_percent` of the most ever in use at once, and the kept bytes within the
/// cache's capacity; a page that would break it goes back at once.
///
/// [`CommitCache::tick`]: crate::CommitCache::tick
/// [`CommitCache::decay`]: crate::CommitCache::decay
/// [`CommitCache::set_retention`]: crate::CommitCache::set_retention
///
/// ```
/// use bento_pages::Decay;
///
/// let d = Decay::frames(30);
/// assert_eq!((d.frames, d.millis, d.peak_percent), (30, 0, 100));
/// assert!(d.clock.is_none());
/// ```
#[derive(Clone, Copy, Debug)]
pub struct Decay {
    /// Frames a kept page waits for reuse (0: frames do not count, `tick` reads the
    /// clock).
    pub frames: u32,
    /// Milliseconds a kept page waits for reuse, by `clock`: while the program has not
    /// ticked, or always when `frames` is 0 (0: time does not count).
    pub millis: u32,
    /// A monotonic clock in milliseconds; `None`: only frames count.
    pub clock: Option<fn() -> u64>,
    /// What is committed through the cache (in use and kept) stays within this
    /// percentage of the most ever in use at once; at least 100.
    pub peak_percent: u32,
}

impl Decay {
    /// 600 frames once the program ticks (10 s at 60 frames a second, jemalloc's
    /// decay time), 1 s of the OS clock before that (with the feature `os`); what is
    /// committed stays within 120 % of the peak in use. Measured on `bento demo`: a
    /// shorter decay or a tighter cap makes a level's load fault in pages the last
    /// level gave back (a cap of 110 % doubles the bento set-up's page faults).
    pub const DEFAULT: Self = Self {
        frames: 600,
        millis: 1000,
        clock: OS_CLOCK,
        peak_percent: 120,
    };

    /// Keeps freed pages for as long as nothing else needs them: no decay step ever
    /// runs and the only cap is the cache's capacity, so kept pages go back only
    /// past it, on `trim`, or when the source refuses a commit (the cache then gives
    /// them up first). For fixed memory (a console's, a [`LimitedPages`] budget),
    /// where a page given back serves no other program, and where a page given back
    /// mid-level is a system call and a fault inside a frame when it is taken again.
    ///
    /// [`LimitedPages`]: crate::LimitedPages
    ///
    /// ```
    /// let keep = bento_pages::Decay::KEEP;
    /// assert_eq!((keep.frames, keep.millis, keep.peak_percent), (0, 0, u32::MAX));
    /// ```
    pub const KEEP: Self = Self {
        frames: 0,
        millis: 0,
        clock: None,
        peak_percent: u32::MAX,
    };

    /// Decay after `frames` calls of `tick`, with no clock.
    ///
    /// ```
    /// assert_eq!(bento_pages::Decay::frames(10).frames, 10);
    /// ```
    pub const fn frames(frames: u32) -> Self {
        Self {
            frames,
            millis: 0,
            clock: None,
            peak_percent: 100,
        }
    }

    /// Decay after `millis` milliseconds of the OS's monotonic clock, whether or not
    /// the program ticks: `tick` and `decay` read the clock (for menus, a minimised
    /// game, or a thread that gives memory back while the program is idle).
    ///
    /// ```
    /// let d = bento_pages::Decay::millis(250);
    /// assert_eq!((d.frames, d.millis), (0, 250));
    /// assert!(d.clock.is_some());
    /// ```
    #[cfg(all(feature = "os", any(unix, windows)))]
    pub const fn millis(millis: u32) -> Self {
        Self {
            frames: 0,
            millis,
            clock: OS_CLOCK,
            peak_percent: 100,
        }
    }

    /// This schedule with the cap at `percent` of the peak (at least 100).
    ///
    /// ```
    /// assert_eq!(bento_pages::Decay::frames(10).with_peak_percent(150).peak_percent, 150);
    /// ```
    pub const fn with_peak_percent(mut self, percent: u32) -> Self {
        self.peak_percent = if percent < 100 { 100 } else { percent };
        self
    }
}

// Two schedules are equal when they read the same clock (the same function).
impl PartialEq for Decay {
    fn eq(&self, other: &Self) -> bool {
        let clock = |d: &Self| d.clock.map(|f| f as usize);
        (self.frames, self.millis, self.peak_percent, clock(self))
            == (other.frames, other.millis, other.peak_percent, clock(other))
    }
}

impl Eq for Decay {}

impl Default for Decay {
    fn default() -> Self {
        Self::DEFAULT
    }
}

/// A level's phase, as the program tells it ([`CommitCache::phase`]): while a level
/// loads or unloads nothing kept decays (the decay clock stops, for one decay time at
/// most), so what an unload frees is there for the next load; play starts the clock
/// again.
///
/// [`CommitCache::phase`]: crate::CommitCache::phase
///
/// ```
/// use bento_pages::Phase;
/// assert_ne!(Phase::Load, Phase::Play);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Phase {
    /// A level is loading: what it asks for is likely what the last unload freed.
    Load,
    /// The level plays: what stays unused decays.
    Play,
    /// A level is unloading: what it frees is kept for the next load.
    Unload,
}

#[cfg(all(feature = "os", any(unix, windows)))]
const OS_CLOCK: Option<fn() -> u64> = Some(os_millis);
#[cfg(not(all(feature = "os", any(unix, windows))))]
const OS_CLOCK: Option<fn() -> u64> = None;

/// The OS's monotonic clock in milliseconds, the coarse one where there is one (a
/// few nanoseconds to read, no system call on Linux).
///
/// ```
/// let a = bento_pages::os_millis();
/// assert!(bento_pages::os_millis() >= a);
/// ```
#[cfg(all(feature = "os", any(unix, windows)))]
pub fn os_millis() -> u64 {
    #[cfg(unix)]
    {
        // libc's clock: glibc reads the vDSO it set up before any program code ran,
        // so this works from the first `malloc` of a preloaded library (and under
        // valgrind, which rustix's own vDSO lookup trips on).
        #[cfg(any(target_os = "linux", target_os = "android"))]
        let id = if cfg!(miri) {
            libc::CLOCK_MONOTONIC
        } else {
            libc::CLOCK_MONOTONIC_COARSE
        };
        #[cfg(not(any(target_os = "linux", target_os = "android")))]
        let id = libc::CLOCK_MONOTONIC;
        let mut t = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: `t` is a valid `timespec` to write; a monotonic clock exists on
        // every Unix bento builds for, and on failure `t` stays zero.
        unsafe { libc::clock_gettime(id, &raw mut t) };
        (t.tv_sec as u64) * 1000 + (t.tv_nsec as u64) / 1_000_000
    }
    #[cfg(windows)]
    {
        // SAFETY: no arguments, no preconditions.
        unsafe { windows_sys::Win32::System::SystemInformation::GetTickCount64() }
    }
}
