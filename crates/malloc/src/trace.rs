//! `BENTO_TRACE=path`: records the program's allocations as a bento trace (the format
//! of the bento-trace crate, version 1), through a fixed buffer and `write(2)`, never
//! allocating.
//!
//! Block ids are addresses. A traced call holds the trace's lock around the
//! allocator's work and its record, so the records are in the order the calls took
//! effect: a block's free is written before another thread can be given its address.
//! A `realloc` that moves its block is written as the allocation of the new block and
//! the free of the old one (the format's resize keeps its id). What glibc allocates
//! while it creates bento's purger thread is bento's, and goes unrecorded.
//!
//! `%p` in the path is replaced by the process id. Without it, the first process to
//! open the file holds an exclusive `flock` on it; a process that finds it held (a
//! program the traced one started, which inherits `BENTO_TRACE`) does not trace.
//! A forked child stops tracing (its buffer holds its parent's records). The header
//! is written when the file is opened; the records' buffer is written out when full
//! and at exit; a process that ends without `exit` loses the records still buffered,
//! and the trace then ends at an earlier record (or holds none). A trace that cannot
//! be opened is said once on stderr.
//!
//! Every write is the `write` system call itself, not libc's: libc's is a
//! cancellation point, and a thread cancelled there with the trace's lock held would
//! leave every other thread spinning on it.

use core::alloc::Layout;
use core::cell::UnsafeCell;
use core::ffi::{CStr, c_char, c_int};
use core::ptr::NonNull;
use core::sync::atomic::{AtomicI32, Ordering};

use bento_common::AllocError;
use bento_pages::lock::RawSpinLock;

use crate::sys::{Buf, errno, write_all};

/// The trace format's magic and version (bento-trace's `MAGIC` and `VERSION`).
const MAGIC: &[u8; 8] = b"BENTOTRC";
const VERSION: u8 = 1;
/// Record kinds (bento-trace's format).
const ALLOC: u8 = 1;
const FREE: u8 = 2;
const REALLOC: u8 = 3;

/// Bytes buffered before a write.
const BUFFER: usize = 64 << 10;
/// The longest record: a kind, a gap, two 10-byte varints, an alignment and a tag.
const LONGEST: usize = 1 + 1 + 10 + 10 + 1 + 1;

/// The trace file, or -1 when not tracing.
static FD: AtomicI32 = AtomicI32::new(-1);

/// Guards [`STATE`] and orders traced calls.
static LOCK: RawSpinLock = RawSpinLock::new();

struct State {
    bytes: [u8; BUFFER],
    len: usize,
}

/// The buffer, reached only with [`LOCK`] held.
struct Shared(UnsafeCell<State>);

// SAFETY: the state is reached only by the thread holding `LOCK` (see `with_state`).
unsafe impl Sync for Shared {}

static STATE: Shared = Shared(UnsafeCell::new(State {
    bytes: [0; BUFFER],
    len: 0,
}));

/// Opens the trace when `BENTO_TRACE` names one, and writes its header at once, so
/// that a process that ends without `exit` leaves a trace with no records rather
/// than an empty file. A trace that cannot be opened is said once on stderr.
pub(crate) fn arm() {
    // SAFETY: as in `sys::env_is`.
    let path = unsafe { libc::getenv(c"BENTO_TRACE".as_ptr()) };
    if path.is_null() {
        return;
    }
    // SAFETY: a C string from the environment.
    let path = unsafe { CStr::from_ptr(path) }.to_bytes();
    let mut name = [0u8; 4096];
    let Some(per_process) = expand(path, &mut name) else {
        cannot_open(path, libc::ENAMETOOLONG);
        return;
    };
    let flags = libc::O_WRONLY | libc::O_CREAT | libc::O_CLOEXEC;
    // SAFETY: `name` is NUL-terminated by `expand`.
    let fd = unsafe { libc::open(name.as_ptr().cast::<c_char>(), flags, 0o644 as c_int) };
    if fd < 0 {
        cannot_open(path, errno());
        return;
    }
    // SAFETY: `fd` is this process's open file.
    let owned = per_process || unsafe { libc::flock(fd, libc::LOCK_EX | libc::LOCK_NB) } == 0;
    // SAFETY: as above.
    let emptied = owned && unsafe { libc::ftruncate(fd, 0) } == 0;
    if !emptied {
        if owned {
            cannot_open(path, errno());
        }
        // SAFETY: as above; closed once.
        unsafe { libc::close(fd) };
        return;
    }
    let mut header = [0u8; 9];
    header[..8].copy_from_slice(MAGIC);
    header[8] = VERSION;
    write_all(fd, &header);
    FD.store(fd, Ordering::Release);
    // SAFETY: a handler that lives as long as the process.
    unsafe { libc::atexit(flush_at_exit) };
}

/// Says on stderr, in one line written without allocating, that the trace `path`
/// cannot be written, and why.
fn cannot_open(path: &[u8], code: c_int) {
    let mut why = [0u8; 128];
    // SAFETY: the XSI `strerror_r` writes a NUL-terminated message of at most
    // `why.len()` bytes into `why`, without allocating.
    let found = unsafe { libc::strerror_r(code, why.as_mut_ptr().cast(), why.len()) } == 0;
    let why = if found {
        CStr::from_bytes_until_nul(&why).map_or(&b"?"[..], CStr::to_bytes)
    } else {
        b"unknown error"
    };
    let mut line = Buf::<{ 4096 + 256 }>::new();
    line.push(b"bento-malloc: BENTO_TRACE: cannot write the trace ");
    line.push(path);
    line.push(b": ");
    line.push(why);
    line.push(b"; not tracing\n");
    write_all(2, &line.bytes[..line.len]);
}

/// Writes `path` into `out` with `%p` replaced by the process id, NUL-terminated;
/// says whether it had `%p`. `None` when it does not fit.
fn expand(path: &[u8], out: &mut [u8; 4096]) -> Option<bool> {
    let mut pid = [0u8; 20];
    // SAFETY: `getpid` cannot fail.
    let mut n = u64::from(unsafe { libc::getpid() }.unsigned_abs());
    let mut digits = 0;
    loop {
        pid[19 - digits] = b'0' + (n % 10) as u8;
        digits += 1;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    let pid = &pid[20 - digits..];
    let (mut len, mut had) = (0, false);
    let mut i = 0;
    while i < path.len() {
        let piece: &[u8] = if path[i..].starts_with(b"%p") {
            had = true;
            i += 2;
            pid
        } else {
            i += 1;
            &path[i - 1..i]
        };
        out.get_mut(len..len + piece.len())?.copy_from_slice(piece);
        len += piece.len();
    }
    *out.get_mut(len)? = 0;
    Some(had)
}

/// Runs `f` on the buffer.
///
/// # Safety
///
/// The caller must hold [`LOCK`].
unsafe fn with_state<R>(f: impl FnOnce(&mut State) -> R) -> R {
    // SAFETY: the caller holds `LOCK`, so this is the only reference to the state.
    f(unsafe { &mut *STATE.0.get() })
}

fn put_varint(s: &mut State, mut v: u64) {
    while v >= 0x80 {
        s.bytes[s.len] = (v as u8) | 0x80;
        s.len += 1;
        v >>= 7;
    }
    s.bytes[s.len] = v as u8;
    s.len += 1;
}

/// Appends one record of `kind` with `fields` (the sequence gap is 0: records are
/// numbered one after another).
///
/// # Safety
///
/// The caller must hold [`LOCK`].
unsafe fn record(kind: u8, fields: &[u64], align: Option<usize>) {
    // SAFETY: the caller's contract.
    unsafe {
        with_state(|s| {
            if s.len + LONGEST > BUFFER {
                flush(s);
            }
            s.bytes[s.len] = kind;
            s.bytes[s.len + 1] = 0;
            s.len += 2;
            for &f in fields {
                put_varint(s, f);
            }
            if let Some(align) = align {
                s.bytes[s.len] = align.trailing_zeros() as u8;
                s.bytes[s.len + 1] = 0; // no tag
                s.len += 2;
            }
        })
    };
}

fn flush(s: &mut State) {
    let fd = FD.load(Ordering::Acquire);
    if fd >= 0 {
        write_all(fd, &s.bytes[..s.len]);
    }
    s.len = 0;
}

extern "C" fn flush_at_exit() {
    LOCK.lock();
    // SAFETY: `LOCK` is held.
    unsafe { with_state(flush) };
    // Later calls (other exit handlers, destructors) are not traced: the file ends
    // at the last record written here.
    FD.store(-1, Ordering::Release);
    // SAFETY: taken above by this thread.
    unsafe { LOCK.unlock() };
}

#[inline(always)]
pub(crate) fn tracing() -> bool {
    FD.load(Ordering::Relaxed) >= 0
}

/// Runs an allocation, recording it when tracing.
#[inline]
pub(crate) fn traced_alloc(
    layout: Layout,
    f: impl FnOnce(Layout) -> Result<NonNull<u8>, AllocError>,
) -> Result<NonNull<u8>, AllocError> {
    if !tracing() || crate::retain::creating_here() {
        return f(layout);
    }
    locked(|| {
        let r = f(layout);
        if let (Ok(p), true) = (r, tracing()) {
            let fields = [p.addr().get() as u64, layout.size() as u64];
            // SAFETY: inside `locked`.
            unsafe { record(ALLOC, &fields, Some(layout.align())) };
        }
        r
    })
}

/// Runs a free, recording it (before the block can be handed out again) when tracing.
#[inline]
pub(crate) fn traced_free(p: NonNull<u8>, f: impl FnOnce()) {
    if !tracing() {
        return f();
    }
    locked(|| {
        if tracing() {
            // SAFETY: inside `locked`.
            unsafe { record(FREE, &[p.addr().get() as u64], None) };
        }
        f();
    });
}

/// Runs a resize of `old` to `new`, recording it when tracing.
#[inline]
pub(crate) fn traced_realloc(
    old: NonNull<u8>,
    new: Layout,
    f: impl FnOnce() -> Result<NonNull<u8>, ()>,
) -> Result<NonNull<u8>, ()> {
    if !tracing() {
        return f();
    }
    locked(|| {
        let r = f();
        if let (Ok(q), true) = (r, tracing()) {
            let (old, size) = (old.addr().get() as u64, new.size() as u64);
            // SAFETY: inside `locked`.
            unsafe {
                if q.addr().get() as u64 == old {
                    record(REALLOC, &[old, size], None);
                } else {
                    record(ALLOC, &[q.addr().get() as u64, size], Some(new.align()));
                    record(FREE, &[old], None);
                }
            }
        }
        r
    })
}

fn locked<R>(f: impl FnOnce() -> R) -> R {
    LOCK.lock();
    let r = f();
    // SAFETY: taken above by this thread.
    unsafe { LOCK.unlock() };
    r
}

/// Takes the trace's lock before a fork.
pub(crate) fn lock() {
    LOCK.lock();
}

/// Gives it back after the fork, in the parent.
pub(crate) fn unlock() {
    // SAFETY: `lock` took it on this thread before the fork.
    unsafe { LOCK.unlock() };
}

/// After the fork, in the child: the buffer holds the parent's records, so the child
/// does not trace; the lock the forking thread took is given back.
pub(crate) fn forked_child() {
    let fd = FD.swap(-1, Ordering::AcqRel);
    if fd >= 0 {
        // SAFETY: the child's copy of the trace's descriptor, closed once (the
        // parent's stays open).
        unsafe { libc::close(fd) };
    }
    // SAFETY: `lock` took it on the thread that is now the child's only one.
    unsafe { LOCK.unlock() };
}
