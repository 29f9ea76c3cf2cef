//! The misuse hook of a common allocator: the report goes to stderr through a fixed
//! buffer and `write(2)`, then the process aborts. Nothing here allocates, so it
//! is safe inside `GlobalAlloc` and `malloc`.

use core::fmt::{self, Write};

use bento_pages::Misuse;

/// Bytes of a report: the rest of a longer one is cut.
const REPORT: usize = 512;

/// A fixed buffer that `fmt` writes into, dropping what does not fit.
struct Buf {
    bytes: [u8; REPORT],
    len: usize,
}

impl Write for Buf {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        let room = REPORT - self.len;
        let n = s.len().min(room);
        self.bytes[self.len..self.len + n].copy_from_slice(&s.as_bytes()[..n]);
        self.len += n;
        Ok(())
    }
}

/// Writes `bento-common: <the misuse>` and a newline to stderr without allocating, then
/// aborts the process: the default [`MisuseHook`](crate::MisuseHook) of a
/// [`CommonAllocator`](crate::CommonAllocator), which serves code that must not
/// unwind (`GlobalAlloc`, `malloc`).
///
/// Set [`panic_on_misuse`](crate::panic_on_misuse) in
/// [`CommonConfig::misuse`](crate::CommonConfig::misuse) to panic instead (an
/// allocator used through `Allocator`, in tests).
///
/// ```no_run
/// use bento_common::{Misuse, abort_on_misuse};
///
/// let ptr = core::ptr::NonNull::<u8>::dangling();
/// abort_on_misuse(&Misuse::Foreign { ptr }); // prints, then the process ends
/// ```
pub fn abort_on_misuse(misuse: &Misuse<'_>) {
    let mut buf = Buf {
        bytes: [0; REPORT],
        len: 0,
    };
    let _ = writeln!(buf, "bento-common: {misuse}");
    write_stderr(&buf.bytes[..buf.len]);
    abort();
}

/// Writes `bytes` to the standard error stream, ignoring failures.
fn write_stderr(bytes: &[u8]) {
    #[cfg(unix)]
    {
        let mut rest = bytes;
        while !rest.is_empty() {
            // SAFETY: `rest` is a live byte slice of `rest.len()` bytes.
            let n = unsafe { raw_write(rest) };
            if n <= 0 {
                return;
            }
            rest = &rest[n.unsigned_abs()..];
        }
    }
    #[cfg(all(not(unix), feature = "std"))]
    {
        use std::io::Write as _;
        // Standard error is unbuffered: this neither allocates nor keeps the bytes.
        let _ = std::io::stderr().write_all(bytes);
    }
    #[cfg(all(not(unix), not(feature = "std")))]
    let _ = bytes;
}

/// `write(2, bytes)`. On Linux the system call itself: libc's `write` is a
/// cancellation point, and the hook may run with a region's lock held, so a thread
/// cancelled there would leave the others waiting on that lock instead of the process
/// aborting.
///
/// # Safety
///
/// `bytes` is a live byte slice.
#[cfg(unix)]
unsafe fn raw_write(bytes: &[u8]) -> isize {
    #[cfg(target_os = "linux")]
    // SAFETY: the caller's contract; `syscall` passes the arguments of `write` as
    // they are. The result is a byte count or -1, which fits an `isize`.
    unsafe {
        libc::syscall(
            libc::SYS_write,
            libc::c_long::from(2),
            bytes.as_ptr(),
            bytes.len(),
        ) as isize
    }
    #[cfg(not(target_os = "linux"))]
    // SAFETY: the caller's contract.
    unsafe {
        libc::write(2, bytes.as_ptr().cast(), bytes.len())
    }
}

/// Ends the process at once.
fn abort() -> ! {
    #[cfg(unix)]
    // SAFETY: `abort` takes no arguments and does not return.
    unsafe {
        libc::abort()
    }
    #[cfg(all(not(unix), feature = "std"))]
    std::process::abort();
    #[cfg(all(not(unix), not(feature = "std")))]
    panic!("bento-common: misuse (see above)");
}
