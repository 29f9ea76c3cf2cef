//! `BENTO_RETAIN`: how long freed memory stays committed for reuse, and the purger,
//! a background thread that gives it back while the program is idle.
//!
//! Under a decay (the default, [`DEFAULT_DECAY_MS`]), the pages the allocator frees
//! stay committed in its commit cache and go back to the system once unused for the
//! decay time. The cache reads the clock on its own slow paths, so a program that
//! keeps allocating gives memory back without help; one that frees a lot and then
//! waits (for input, a timer, a socket) would keep it for ever. The purger ticks the
//! cache while the program waits.
//!
//! # When the purger starts
//!
//! Lazily, the first time memory is kept, so that a program that never keeps any
//! (most short ones) never has a second thread. Not from just any call, though: glibc
//! frees a finished thread's TLS vector and blocks with its stack cache's lock held,
//! and `pthread_create` takes that lock, so a purger started from such a `free` would
//! wait for ever on its own thread. A TLS vector is a small block, whose free makes at
//! most one small segment (64 KiB) kept; so a `free` (or `realloc`) starts the purger
//! itself only when it made at least [`START_FROM_FREE`] bytes kept (a large block's
//! pages, a segment), and any other asks the next allocation to start it, through the
//! set-up flag (`START_PURGER` in setup.rs), at no cost to the allocation's fast path
//! (glibc allocates with none of the locks `pthread_create` takes). Either happens
//! with no bento lock held.
//!
//! Left open: a free under that lock of a TLS block of [`START_FROM_FREE`] bytes or
//! more (a library loaded by `dlopen` with that much thread-local data), or of a small
//! one while another thread's free makes that much kept at the same instant, as the
//! first memory the process ever keeps; and a program that keeps memory only through
//! small frees and then never allocates again keeps it until its next allocation.
//!
//! `pthread_create` itself allocates (a thread's TLS vector) and so reaches this
//! library again: the set-up flag is back at `SET` before the call and the purger's
//! state says `STARTING`, so those calls go their usual way and start nothing.
//!
//! # The thread
//!
//! Detached, on a 64 KiB stack (the default one when glibc refuses that size), named
//! `bento-purge`, with every signal blocked (glibc keeps its own two for `setuid`
//! and cancellation open), so that no handler of the program ever runs on it. It
//! sleeps a quarter of the decay, ticks the cache (which gives back what is due,
//! holding the cache's lock no longer than a `free` does), and sleeps longer while
//! nothing is kept. It never allocates and never holds a lock while it sleeps: `exit`
//! (whose handlers, such as the statistics report, take the allocator's locks) and
//! `fork` (whose handler takes them all) wait at most for one tick to end, and the
//! process's end stops the thread wherever it is.
//!
//! A forked child has no purger: the fork handler marks it not started, and the child
//! starts its own the same lazy way.

use core::ffi::{c_int, c_void};
use core::ptr;
use core::sync::atomic::{AtomicU8, AtomicU32, AtomicUsize, Ordering};

use crate::policy::{DEFAULT, DEFAULT_DECAY_MS, Policy, parse, warn};
use crate::sys::{errno, set_errno};
use crate::{global, setup};

/// A `free` that makes at least this many bytes kept starts the purger itself.
const START_FROM_FREE: usize = 256 << 10;
/// The purger's stack.
const STACK: usize = 64 << 10;
/// The longest the purger sleeps while nothing is kept, in milliseconds.
const IDLE_MS: u32 = 1000;

/// The purger's state.
static PURGER: AtomicU8 = AtomicU8::new(NOT_STARTED);
/// Not running in this process; a `free` that finds memory kept starts it or asks the
/// next allocation to.
const NOT_STARTED: u8 = 0;
/// A thread is creating it.
const STARTING: u8 = 1;
/// It runs.
const RUNNING: u8 = 2;
/// Never to run: `BENTO_RETAIN=eager`, or the thread could not be created.
const OFF: u8 = 3;

/// The thread creating the purger (its `pthread_self`), 0 when none is.
static STARTER: AtomicUsize = AtomicUsize::new(0);

/// The decay the purger paces itself by, in milliseconds.
static DECAY_MS: AtomicU32 = AtomicU32::new(DEFAULT_DECAY_MS);

/// Reads `BENTO_RETAIN` and sets the common allocator's retention (from the set-up,
/// before anything else of it, so that its own allocations are under the policy).
pub(crate) fn arm() {
    // SAFETY: `getenv` reads the environment without allocating; the result, when not
    // null, is a C string that lives until the environment changes.
    let value = unsafe { libc::getenv(c"BENTO_RETAIN".as_ptr()) };
    let policy = if value.is_null() {
        DEFAULT
    } else {
        // SAFETY: as above: a C string from the environment.
        let value = unsafe { core::ffi::CStr::from_ptr(value) }.to_bytes();
        parse(value).unwrap_or_else(|| {
            warn(value);
            DEFAULT
        })
    };
    match policy {
        Policy::Eager => PURGER.store(OFF, Ordering::Relaxed),
        Policy::Decay(ms) => DECAY_MS.store(ms, Ordering::Relaxed),
    }
    // `COMMON` starts with the default (its configuration's), and is left unstarted
    // until the first allocation when that holds.
    if policy != DEFAULT {
        global::set_retention(policy);
    }
}

/// Whether a `free` should look at what it kept: true until the purger starts (and
/// never under `BENTO_RETAIN=eager`). One relaxed load.
#[inline]
pub(crate) fn watching() -> bool {
    PURGER.load(Ordering::Relaxed) == NOT_STARTED
}

/// The bytes kept now (a relaxed load).
#[inline]
pub(crate) fn kept() -> usize {
    global::kept()
}

/// After a `free` (or a `realloc`) that [`watching`] asked about, with no bento lock
/// held, given what was kept before it: when it made memory kept, starts the purger,
/// or asks the next allocation to (see the module's documentation). A free that kept
/// nothing costs a relaxed load and a comparison: one before it found the purger
/// started or asked for.
#[inline]
pub(crate) fn after_free(kept_before: usize) {
    let kept = global::kept();
    if kept > kept_before {
        kept_more(kept_before, kept);
    }
}

#[cold]
#[inline(never)]
fn kept_more(before: usize, kept: usize) {
    if !setup::set_up() {
        // The retention is not known yet; a later free will look again.
        return;
    }
    if kept - before >= START_FROM_FREE {
        start();
    } else {
        setup::request_purger();
    }
}

/// Starts the purger unless it runs, is being started, or is off. Called with no bento
/// lock held, from an allocation or a large `free`; keeps `errno`.
pub(crate) fn start() {
    if PURGER
        .compare_exchange(NOT_STARTED, STARTING, Ordering::AcqRel, Ordering::Relaxed)
        .is_err()
    {
        return;
    }
    let saved = errno();
    STARTER.store(this_thread(), Ordering::Relaxed);
    let state = if spawn() { RUNNING } else { OFF };
    STARTER.store(0, Ordering::Relaxed);
    PURGER.store(state, Ordering::Release);
    set_errno(saved);
}

/// Whether this thread is creating the purger: what glibc allocates meanwhile (the
/// new thread's TLS vector) is bento's, not the program's, and goes untraced.
pub(crate) fn creating_here() -> bool {
    let starter = STARTER.load(Ordering::Relaxed);
    starter != 0 && starter == this_thread()
}

/// This thread's id.
fn this_thread() -> usize {
    // SAFETY: `pthread_self` has no preconditions and cannot fail.
    let id = unsafe { libc::pthread_self() };
    usize::try_from(id).unwrap_or(usize::MAX)
}

/// After `fork`, in the child: the purger (running or being started) is its parent's
/// thread, not the child's; the child starts its own when it keeps memory.
pub(crate) fn forked_child() {
    let _ = PURGER.compare_exchange(RUNNING, NOT_STARTED, Ordering::Relaxed, Ordering::Relaxed);
    let _ = PURGER.compare_exchange(STARTING, NOT_STARTED, Ordering::Relaxed, Ordering::Relaxed);
}

/// Creates the purger's thread, detached, with every signal blocked; says whether it
/// runs.
fn spawn() -> bool {
    // SAFETY: `sigset_t` is plain data, filled by `sigfillset` before use.
    let mut all: libc::sigset_t = unsafe { core::mem::zeroed() };
    // SAFETY: as above; written by `pthread_sigmask`.
    let mut old: libc::sigset_t = unsafe { core::mem::zeroed() };
    // SAFETY: `all` is a live `sigset_t`. glibc's `pthread_sigmask` leaves its own
    // signals (cancellation, `setuid`'s) unblocked whatever the set says; the thread
    // created meanwhile starts with this mask.
    let masked = unsafe {
        libc::sigfillset(&raw mut all) == 0
            && libc::pthread_sigmask(libc::SIG_SETMASK, &raw const all, &raw mut old) == 0
    };
    // A large static TLS (glibc carves it out of the stack) may not fit the small
    // stack: then the default one.
    let created = create(Some(STACK)) || create(None);
    if masked {
        // SAFETY: `old` is the mask `pthread_sigmask` saved just above.
        unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, &raw const old, ptr::null_mut()) };
    }
    created
}

/// `pthread_create` of a detached purger, on a stack of `stack` bytes (the default
/// when `None`).
fn create(stack: Option<usize>) -> bool {
    // SAFETY: `pthread_attr_t` is plain data, set up by `pthread_attr_init`.
    let mut attr: libc::pthread_attr_t = unsafe { core::mem::zeroed() };
    // SAFETY: `attr` is live; it is initialised before the other calls and destroyed
    // once after them. `run` lives as long as the process and takes no argument; the
    // thread id is written into a live local.
    unsafe {
        if libc::pthread_attr_init(&raw mut attr) != 0 {
            return false;
        }
        let mut ok =
            libc::pthread_attr_setdetachstate(&raw mut attr, libc::PTHREAD_CREATE_DETACHED) == 0
                && stack
                    .is_none_or(|bytes| libc::pthread_attr_setstacksize(&raw mut attr, bytes) == 0);
        if ok {
            let mut thread: libc::pthread_t = 0;
            ok = libc::pthread_create(&raw mut thread, &raw const attr, run, ptr::null_mut()) == 0;
        }
        libc::pthread_attr_destroy(&raw mut attr);
        ok
    }
}

/// The purger: ticks the cache every quarter of the decay while memory is kept, and
/// at most every [`IDLE_MS`] (or every decay, when shorter) while none is.
extern "C" fn run(_: *mut c_void) -> *mut c_void {
    // SAFETY: `PR_SET_NAME` names this thread; the name is a NUL-terminated string
    // of at most 16 bytes, copied by the kernel.
    unsafe { libc::prctl(libc::PR_SET_NAME, c"bento-purge".as_ptr()) };
    let decay = DECAY_MS.load(Ordering::Relaxed);
    let busy = (decay / 4).max(1);
    let idle = decay.min(IDLE_MS).max(busy);
    let mut pause = busy;
    loop {
        sleep_ms(pause);
        global::tick();
        pause = if global::kept() > 0 { busy } else { idle };
    }
}

/// Sleeps `ms` milliseconds (less if a signal stops and continues the process), by
/// the `clock_nanosleep` system call itself: libc's is a cancellation point, and a
/// sleep is all this thread does between its ticks.
fn sleep_ms(ms: u32) {
    let t = libc::timespec {
        tv_sec: libc::time_t::from(ms / 1000),
        tv_nsec: libc::c_long::from(ms % 1000) * 1_000_000,
    };
    // SAFETY: `t` is a live `timespec`; the remainder pointer may be null.
    unsafe {
        libc::syscall(
            libc::SYS_clock_nanosleep,
            libc::c_long::from(libc::CLOCK_MONOTONIC),
            libc::c_long::from(0 as c_int),
            &raw const t,
            ptr::null_mut::<libc::timespec>(),
        )
    };
}
