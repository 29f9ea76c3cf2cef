//! The raw calls every part of the library shares, none of which allocates: a
//! fixed buffer to format into, `write(2)` as the system call itself, `errno`, and
//! the environment.

use core::ffi::{CStr, c_int};
use core::fmt::{self, Write};

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
