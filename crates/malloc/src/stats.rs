//! `BENTO_MALLOC_STATS=1`: the common allocator's report on stderr at exit, written
//! through a buffer on the stack and `write(2)`, never allocating.

use core::fmt::{self, Write};
use core::sync::atomic::{AtomicI32, Ordering};

use crate::COMMON;

/// Where the report goes: a copy of stderr taken when it was armed (programs such as
/// coreutils close stderr in their own exit handlers, which may run first).
static STDERR: AtomicI32 = AtomicI32::new(2);

/// Registers the report at exit when the environment asks for it.
pub(crate) fn arm() {
    if crate::trace::env_is(c"BENTO_MALLOC_STATS", b"1") {
        // SAFETY: duplicating a descriptor; a failure leaves fd 2 in use.
        let copy = unsafe { libc::fcntl(2, libc::F_DUPFD_CLOEXEC, 3) };
        if copy >= 0 {
            STDERR.store(copy, Ordering::Relaxed);
        }
        // SAFETY: a handler that lives as long as the process.
        unsafe { libc::atexit(report) };
    }
}

/// Bytes of the report; a longer one is cut.
const REPORT: usize = 16 << 10;

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

extern "C" fn report() {
    let mut buf = Buf::<REPORT>::new();
    let _ = writeln!(
        buf,
        "bento-malloc: the common allocator at exit\n{}",
        COMMON.report()
    );
    write_all(STDERR.load(Ordering::Relaxed), &buf.bytes[..buf.len]);
}
