//! `BENTO_MALLOC_STATS=1`: the common allocator's report on stderr at exit, written
//! through a buffer on the stack and `write(2)`, never allocating.

use core::fmt::Write;
use core::sync::atomic::{AtomicI32, Ordering};

use crate::global::COMMON;
use crate::sys::{Buf, env_is, write_all};

/// Where the report goes: a copy of stderr taken when it was armed (programs such as
/// coreutils close stderr in their own exit handlers, which may run first).
static STDERR: AtomicI32 = AtomicI32::new(2);

/// Registers the report at exit when the environment asks for it.
pub(crate) fn arm() {
    if env_is(c"BENTO_MALLOC_STATS", b"1") {
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

extern "C" fn report() {
    let mut buf = Buf::<REPORT>::new();
    let _ = writeln!(
        buf,
        "bento-malloc: the common allocator at exit\n{}",
        COMMON.report()
    );
    write_all(STDERR.load(Ordering::Relaxed), &buf.bytes[..buf.len]);
}
