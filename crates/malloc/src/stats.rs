//! `BENTO_MALLOC_STATS=1`: the common allocator's report on stderr at exit, written
//! through a buffer on the stack and `write(2)`, never allocating.
//!
//! The report goes to stderr as the process was started with, and never into a file
//! the program opened: to the copy of stderr taken when it was armed, if that number
//! is still open on the same file (programs such as coreutils close stderr in their
//! own exit handlers, which may run first; others close every descriptor they did
//! not open, and a file they open then may take the copy's number); else to fd 2 if
//! it is still that file or not a regular file at all (a terminal, a pipe: stderr by
//! convention, see `sys::stderr`); else nowhere.

use core::fmt::Write;

use crate::global::COMMON;
use crate::sys::{Buf, OwnedFd, env_is, write_all};

/// A copy of stderr taken when the report was armed (none when stderr was closed).
static STDERR: OwnedFd = OwnedFd::none();

/// Registers the report at exit when the environment asks for it.
pub(crate) fn arm() {
    if env_is(c"BENTO_MALLOC_STATS", b"1") {
        // SAFETY: duplicating a descriptor; a failure (stderr closed) leaves no copy.
        let copy = unsafe { libc::fcntl(2, libc::F_DUPFD_CLOEXEC, 3) };
        if copy >= 0 {
            let _ = STDERR.adopt(copy);
        }
        // SAFETY: a handler that lives as long as the process.
        unsafe { libc::atexit(report) };
    }
}

/// Bytes of the report; a longer one is cut.
const REPORT: usize = 16 << 10;

extern "C" fn report() {
    let mut buf = Buf::<REPORT>::new();
    let _ = writeln!(
        buf,
        "bento-malloc: the common allocator at exit\n{}",
        COMMON.report()
    );
    if let Some(fd) = STDERR.checked().or_else(crate::sys::stderr) {
        write_all(fd, buf.as_bytes());
    }
}
