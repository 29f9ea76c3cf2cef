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
//! The trace's descriptor is moved to a high number and owned as an [`OwnedFd`]: each
//! write of the buffer first checks that the number is still open on the trace's file
//! (a program may close descriptors it did not open and open files of its own in
//! their place). When it is not, the trace's path is opened again for appending, the
//! same file (device and inode) and, without `%p`, its `flock` taken again; when that
//! fails, tracing stops, said in one line on stderr, and nothing is written to the
//! number the program now owns.
//!
//! Every write is the `write` system call itself, not libc's: libc's is a
//! cancellation point, and a thread cancelled there with the trace's lock held would
//! leave every other thread spinning on it.

use core::alloc::Layout;
use core::cell::UnsafeCell;
use core::ffi::{CStr, c_int};
use core::ptr::NonNull;

use bento_common::AllocError;
use bento_pages::lock::RawSpinLock;

use crate::sys::{self, Buf, OwnedFd, errno, file_of, set_errno, write_all};

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

/// The trace's descriptor (none when not tracing), changed with [`LOCK`] held.
static FD: OwnedFd = OwnedFd::none();

/// Bytes of the expanded path, with its NUL.
pub(crate) const PATH: usize = 4096;

/// Guards [`STATE`] and orders traced calls.
static LOCK: RawSpinLock = RawSpinLock::new();

struct State {
    bytes: [u8; BUFFER],
    len: usize,
    /// The trace's path, `%p` expanded, NUL-terminated: where it is opened again.
    path: [u8; PATH],
    /// Whether the trace holds its file's `flock` (a path without `%p`).
    flocked: bool,
}

/// The buffer, reached only with [`LOCK`] held.
struct Shared(UnsafeCell<State>);

// SAFETY: the state is reached only by the thread holding `LOCK` (see `with_state`).
unsafe impl Sync for Shared {}

static STATE: Shared = Shared(UnsafeCell::new(State {
    bytes: [0; BUFFER],
    len: 0,
    path: [0; PATH],
    flocked: false,
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
    LOCK.lock();
    // SAFETY: `LOCK` is held.
    let armed = unsafe { with_state(|s| open(s, path)) };
    // SAFETY: taken above by this thread.
    unsafe { LOCK.unlock() };
    if armed {
        // SAFETY: a handler that lives as long as the process.
        unsafe { libc::atexit(flush_at_exit) };
    }
}

/// Opens the trace `path` (from `BENTO_TRACE`) into `FD`, empty but for its header;
/// says whether it traces.
fn open(s: &mut State, path: &[u8]) -> bool {
    let Some(per_process) = expand(path, &mut s.path) else {
        cannot_open(path, libc::ENAMETOOLONG);
        return false;
    };
    let fd = sys::open(
        name(s),
        libc::O_WRONLY | libc::O_CREAT | libc::O_CLOEXEC,
        0o644,
    );
    if fd < 0 {
        cannot_open(path, errno());
        return false;
    }
    // SAFETY: `fd` is this process's open file.
    let owned = per_process || unsafe { libc::flock(fd, libc::LOCK_EX | libc::LOCK_NB) } == 0;
    // SAFETY: as above.
    let emptied = owned && unsafe { libc::ftruncate(fd, 0) } == 0;
    if !emptied {
        if owned {
            cannot_open(path, errno());
        }
        sys::close(fd);
        return false;
    }
    s.flocked = !per_process;
    let Some(fd) = FD.adopt(fd) else {
        cannot_open(path, errno());
        return false;
    };
    let mut header = [0u8; 9];
    header[..8].copy_from_slice(MAGIC);
    header[8] = VERSION;
    write_all(fd, &header);
    true
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
    let mut line = Buf::<{ 4 * PATH + 256 }>::new();
    line.push(b"bento-malloc: BENTO_TRACE: cannot write the trace ");
    line.push_escaped(path);
    line.push(b": ");
    line.push(why);
    line.push(b"; not tracing\n");
    write_all(2, line.as_bytes());
}

/// Says on stderr (when it is still stderr: see `sys::stderr`), in one line written
/// without allocating, that tracing stopped: the trace's descriptor was closed or
/// taken over, and its path no longer opens on the same file.
fn stopped(path: &[u8]) {
    let mut line = Buf::<{ 4 * PATH + 256 }>::new();
    line.push(b"bento-malloc: BENTO_TRACE: the trace ");
    line.push_escaped(path);
    line.push(
        b" was closed under bento and cannot be opened again as the same file; tracing stopped\n",
    );
    if let Some(fd) = sys::stderr() {
        write_all(fd, line.as_bytes());
    }
}

/// Writes `path` into `out` with `%p` replaced by the process id, NUL-terminated;
/// says whether it had `%p`. `None` when it does not fit.
pub(crate) fn expand(path: &[u8], out: &mut [u8; PATH]) -> Option<bool> {
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

/// Writes the buffer out, to the trace's file only (see [`writable`]); keeps `errno`.
/// With [`LOCK`] held (the state is reached through it).
fn flush(s: &mut State) {
    if s.len > 0 {
        let saved = errno();
        if let Some(fd) = writable(s) {
            write_all(fd, &s.bytes[..s.len]);
        }
        set_errno(saved);
    }
    s.len = 0;
}

/// The trace's descriptor, checked: still open on the trace's file, or the trace
/// opened again; `None` when not tracing, or when tracing stopped (said on stderr).
/// With [`LOCK`] held.
fn writable(s: &State) -> Option<c_int> {
    if let Some(fd) = FD.checked() {
        return Some(fd);
    }
    if FD.raw() < 0 {
        return None;
    }
    // The number is closed or another file's: the program's now, never written.
    let fd = reopen(s);
    if fd.is_none() {
        FD.forget();
        stopped(name(s).to_bytes());
    }
    fd
}

/// Opens the trace's path again for appending, as `FD`; `None` (nothing opened) when
/// it does not open, is not the file the trace was (another file in its place, or
/// none), or its `flock` is someone else's now.
fn reopen(s: &State) -> Option<c_int> {
    let fd = sys::open(
        name(s),
        libc::O_WRONLY | libc::O_APPEND | libc::O_CLOEXEC,
        0,
    );
    if fd < 0 {
        return None;
    }
    let same = file_of(fd).is_some_and(|(id, _)| id == FD.file());
    // SAFETY: `fd` is the file just opened, this library's.
    let locked =
        same && (!s.flocked || unsafe { libc::flock(fd, libc::LOCK_EX | libc::LOCK_NB) } == 0);
    if !locked {
        sys::close(fd);
        return None;
    }
    FD.adopt(fd)
}

/// The trace's expanded path (`c""` before it is opened).
fn name(s: &State) -> &CStr {
    CStr::from_bytes_until_nul(&s.path).unwrap_or(c"")
}

extern "C" fn flush_at_exit() {
    LOCK.lock();
    // SAFETY: `LOCK` is held.
    unsafe { with_state(flush) };
    // Later calls (other exit handlers, destructors) are not traced: the file ends
    // at the last record written here.
    FD.forget();
    // SAFETY: taken above by this thread.
    unsafe { LOCK.unlock() };
}

#[inline(always)]
pub(crate) fn tracing() -> bool {
    FD.raw() >= 0
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
/// does not trace; its copy of the trace's descriptor is closed when it is still the
/// trace's (the parent's stays open); the lock the forking thread took is given back.
pub(crate) fn forked_child() {
    FD.close();
    // SAFETY: `lock` took it on the thread that is now the child's only one.
    unsafe { LOCK.unlock() };
}
