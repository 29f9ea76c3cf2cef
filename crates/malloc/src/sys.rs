//! The raw calls every part of the library shares, none of which allocates: a
//! fixed buffer to format into, `write(2)` as the system call itself, `errno`, the
//! environment, and the descriptors the library owns ([`OwnedFd`]) and the stderr it
//! may write to after start-up ([`stderr`]).

use core::ffi::{CStr, c_int};
use core::fmt::{self, Write};
use core::mem::MaybeUninit;
use core::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, Ordering};

/// A fixed buffer `fmt` writes into, dropping what does not fit.
pub(crate) struct Buf<const N: usize> {
    pub(crate) bytes: [u8; N],
    pub(crate) len: usize,
}

impl<const N: usize> Buf<N> {
    pub(crate) const fn new() -> Self {
        Self {
            bytes: [0; N],
            len: 0,
        }
    }
}

impl<const N: usize> Buf<N> {
    /// Appends what fits of `bytes`.
    pub(crate) fn push(&mut self, bytes: &[u8]) {
        let n = bytes.len().min(N - self.len);
        self.bytes[self.len..self.len + n].copy_from_slice(&bytes[..n]);
        self.len += n;
    }

    /// Appends what fits of `bytes` with each control byte (a newline, a carriage
    /// return, an escape, DEL...) written as `\xHH`, so that an echoed value keeps a
    /// message on one line and the terminal's state as it was.
    pub(crate) fn push_escaped(&mut self, bytes: &[u8]) {
        const HEX: &[u8; 16] = b"0123456789abcdef";
        for &b in bytes {
            if b < 0x20 || b == 0x7f {
                self.push(&[
                    b'\\',
                    b'x',
                    HEX[usize::from(b >> 4)],
                    HEX[usize::from(b & 15)],
                ]);
            } else {
                self.push(&[b]);
            }
        }
    }

    /// The bytes written so far.
    pub(crate) fn as_bytes(&self) -> &[u8] {
        &self.bytes[..self.len]
    }
}

impl<const N: usize> Write for Buf<N> {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        self.push(s.as_bytes());
        Ok(())
    }
}

/// Writes all of `bytes` to `fd`, ignoring failures, through the `write` system call
/// itself rather than libc's `write`: libc's is a cancellation point, and a thread
/// cancelled in it while holding a lock (the trace's) would leave every other thread
/// waiting on that lock for ever. The raw call is not a cancellation point.
pub(crate) fn write_all(fd: i32, mut bytes: &[u8]) {
    while !bytes.is_empty() {
        // SAFETY: `bytes` is a live slice of `bytes.len()` bytes; `syscall` passes the
        // three arguments of `write` to the kernel as they are.
        let n = unsafe {
            libc::syscall(
                libc::SYS_write,
                libc::c_long::from(fd),
                bytes.as_ptr(),
                bytes.len(),
            )
        };
        match usize::try_from(n) {
            Ok(n) if n > 0 => bytes = &bytes[n..],
            _ => {
                // SAFETY: this thread's `errno`.
                if n < 0 && unsafe { *libc::__errno_location() } == libc::EINTR {
                    continue;
                }
                return;
            }
        }
    }
}

/// Opens `path` with `flags` (and `mode` for a file it creates) through the `openat`
/// system call itself (libc's `open` is a cancellation point, as its `write` is);
/// the descriptor, or -1 with `errno` set.
pub(crate) fn open(path: &CStr, flags: c_int, mode: libc::mode_t) -> c_int {
    // SAFETY: `path` is a live NUL-terminated string; `syscall` passes the four
    // arguments of `openat` to the kernel as they are.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_openat,
            libc::c_long::from(libc::AT_FDCWD),
            path.as_ptr(),
            libc::c_long::from(flags),
            libc::c_long::from(mode),
        )
    };
    c_int::try_from(fd).unwrap_or(-1)
}

/// Closes `fd`, a descriptor of this library's own, through the `close` system call
/// itself (libc's is a cancellation point); keeps `errno`.
pub(crate) fn close(fd: c_int) {
    let saved = errno();
    // SAFETY: closing a descriptor touches no memory of the process's; the caller
    // owns `fd`.
    unsafe { libc::syscall(libc::SYS_close, libc::c_long::from(fd)) };
    set_errno(saved);
}

/// This thread's `errno`.
pub(crate) fn errno() -> c_int {
    // SAFETY: glibc's `errno` of this thread, always valid.
    unsafe { *libc::__errno_location() }
}

/// Sets this thread's `errno`.
pub(crate) fn set_errno(code: c_int) {
    // SAFETY: glibc's `errno` of this thread, always valid.
    unsafe { *libc::__errno_location() = code };
}

/// Whether environment variable `name` is set to `value`.
pub(crate) fn env_is(name: &CStr, value: &[u8]) -> bool {
    // SAFETY: `getenv` reads the environment without allocating; the result, when not
    // null, is a C string that lives until the environment changes.
    unsafe {
        let v = libc::getenv(name.as_ptr());
        !v.is_null() && CStr::from_ptr(v).to_bytes() == value
    }
}

/// The file a descriptor is open on: its device and inode numbers, which no other
/// file shares while it exists.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct FileId {
    dev: u64,
    ino: u64,
}

/// What `fstat` says of `fd`: the file it is open on and whether that is a regular
/// file; `None` when `fd` is not open. Keeps `errno`.
pub(crate) fn file_of(fd: c_int) -> Option<(FileId, bool)> {
    let saved = errno();
    let mut st = MaybeUninit::<libc::stat>::uninit();
    // SAFETY: `st` is valid for writes of a `stat`; `fstat` neither allocates nor is a
    // cancellation point.
    let found = unsafe { libc::fstat(fd, st.as_mut_ptr()) } == 0;
    set_errno(saved);
    if !found {
        return None;
    }
    // SAFETY: `fstat` succeeded, so it wrote the whole of `st`.
    let st = unsafe { st.assume_init() };
    // `dev_t` and `ino_t` are narrower than 64 bits on some 32-bit targets.
    #[allow(clippy::useless_conversion)]
    let id = FileId {
        dev: u64::from(st.st_dev),
        ino: u64::from(st.st_ino),
    };
    Some((id, st.st_mode & libc::S_IFMT == libc::S_IFREG))
}

/// The lowest number [`move_high`] moves a descriptor to, from the soft
/// `RLIMIT_NOFILE`: 64 below it (960 under the usual 1024), or 1024 when that is
/// lower (past `FD_SETSIZE`, where loops that close "every descriptor" often stop,
/// and not so high that the kernel's table of descriptors grows much), or the upper
/// half of a limit of 128 or less. A limit that cannot be read counts as 1024.
fn high_floor() -> c_int {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `limit` is a live `rlimit` for the kernel to write.
    let soft = if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &raw mut limit) } == 0 {
        limit.rlim_cur
    } else {
        1024
    };
    let floor = if soft > 128 {
        (soft - 64).min(1024)
    } else {
        soft / 2
    };
    c_int::try_from(floor.max(3)).unwrap_or(1024)
}

/// Moves `fd`, a descriptor this library just opened, to a number at or above
/// [`high_floor`] (close-on-exec), so that a program opening files of its own does
/// not get the numbers next to its standard streams taken; returns the new number, or
/// `fd` itself when no higher one is free (the limit, a sandbox).
pub(crate) fn move_high(fd: c_int) -> c_int {
    let saved = errno();
    // SAFETY: duplicating a descriptor this library owns; no memory is involved.
    let high = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, high_floor()) };
    let fd = if high >= 0 {
        // `fd` is this library's own, closed once; `high` now holds its file.
        close(fd);
        high
    } else {
        fd
    };
    set_errno(saved);
    fd
}

/// A descriptor this library opened for itself, with the file it was opened on.
///
/// A program may close descriptors it did not open (a daemon's or a sandbox's
/// close-everything loop, `closefrom(3)`) and then open files of its own, which take
/// the freed numbers, or put a file of its own on a number (`dup2`, a shell's
/// `exec 3>file`): the number is then the program's.
/// So the library writes to its descriptor only once [`checked`](Self::checked) has
/// found it still open on the file it was taken on (a `fstat` and two comparisons),
/// and never closes it otherwise. Every field is atomic: a `static` of it is read
/// by any thread; its owner changes it under a lock of its own or before any other
/// thread can use it.
#[derive(Debug)]
pub(crate) struct OwnedFd {
    /// The descriptor, or -1.
    fd: AtomicI32,
    dev: AtomicU64,
    ino: AtomicU64,
}

impl OwnedFd {
    /// No descriptor.
    pub(crate) const fn none() -> Self {
        Self {
            fd: AtomicI32::new(-1),
            dev: AtomicU64::new(0),
            ino: AtomicU64::new(0),
        }
    }

    /// Takes `fd`, which this library just opened or duplicated, as its own: moved
    /// high ([`move_high`]) and its file recorded. Returns the descriptor, or `None`
    /// (`fd` closed) when `fstat` cannot tell its file.
    pub(crate) fn adopt(&self, fd: c_int) -> Option<c_int> {
        let fd = move_high(fd);
        let Some((id, _)) = file_of(fd) else {
            // This library's own descriptor, closed once.
            close(fd);
            return None;
        };
        self.dev.store(id.dev, Ordering::Relaxed);
        self.ino.store(id.ino, Ordering::Relaxed);
        self.fd.store(fd, Ordering::Release);
        Some(fd)
    }

    /// The descriptor, unchecked (-1: none): whether there is one, not whether it
    /// may be written. One relaxed load.
    #[inline(always)]
    pub(crate) fn raw(&self) -> c_int {
        self.fd.load(Ordering::Relaxed)
    }

    /// The file it was taken on.
    pub(crate) fn file(&self) -> FileId {
        FileId {
            dev: self.dev.load(Ordering::Relaxed),
            ino: self.ino.load(Ordering::Relaxed),
        }
    }

    /// The descriptor, when it is still open on the file it was taken on: what each
    /// write must ask first. `None` when there is none, or when the number is closed
    /// or open on another file.
    pub(crate) fn checked(&self) -> Option<c_int> {
        let fd = self.fd.load(Ordering::Acquire);
        (fd >= 0 && file_of(fd).is_some_and(|(id, _)| id == self.file())).then_some(fd)
    }

    /// Drops the descriptor without closing it (its number may be the program's
    /// now).
    pub(crate) fn forget(&self) {
        self.fd.store(-1, Ordering::Release);
    }

    /// Drops the descriptor, closing it when it is still on its file.
    pub(crate) fn close(&self) {
        if let Some(fd) = self.checked() {
            // The library's own descriptor (just checked), closed once: it is
            // forgotten below.
            close(fd);
        }
        self.forget();
    }
}

/// The file stderr was open on when the process was set up: whether it was open, its
/// device and its inode.
static STDERR_KNOWN: AtomicBool = AtomicBool::new(false);
static STDERR_DEV: AtomicU64 = AtomicU64::new(0);
static STDERR_INO: AtomicU64 = AtomicU64::new(0);

/// Notes the file stderr is open on (from the set-up, before anything is written
/// there).
pub(crate) fn note_stderr() {
    if let Some((id, _)) = file_of(2) {
        STDERR_DEV.store(id.dev, Ordering::Relaxed);
        STDERR_INO.store(id.ino, Ordering::Relaxed);
        STDERR_KNOWN.store(true, Ordering::Release);
    }
}

/// The file stderr was open on at set-up, if it was open.
fn stderr_at_setup() -> Option<FileId> {
    STDERR_KNOWN.load(Ordering::Acquire).then(|| FileId {
        dev: STDERR_DEV.load(Ordering::Relaxed),
        ino: STDERR_INO.load(Ordering::Relaxed),
    })
}

/// Where a line written after start-up may go: fd 2 when it is still the file
/// stderr was at set-up, or when it is not a regular file (a terminal, a pipe, a
/// socket, `/dev/null`: stderr by convention); `None` when it is closed, or a regular
/// file other than that one — a program that closed its descriptors and opened a
/// file of its own as number 2 must not find bento's lines in it.
pub(crate) fn stderr() -> Option<c_int> {
    let (id, regular) = file_of(2)?;
    (!regular || stderr_at_setup() == Some(id)).then_some(2)
}
