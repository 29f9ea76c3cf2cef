//! `BENTO_PROF`: a sampled allocation profile of the program, written in pprof's
//! format at exit (and on demand through `bento_prof_dump`), without allocating:
//! the profiler's table lives in its own pages and the dump goes through a buffer
//! on the stack and `write(2)`.

use core::ffi::{CStr, c_char, c_int, c_uint};

use bento_pages::ProfileConfig;

use crate::global::COMMON;
use crate::sys::{self, Buf, write_all};
use crate::trace::{PATH, expand};

/// `BENTO_PROF_EVERY`'s value, or the default rate: `None` for a value it does not
/// take (a decimal number of bytes from 4096 to 2^30).
pub(crate) fn parse_every(value: Option<&[u8]>) -> Option<ProfileConfig> {
    match value {
        None | Some(b"") => Some(ProfileConfig::DEFAULT.backtrace(true)),
        Some(v) => Some(ProfileConfig::parse(core::str::from_utf8(v).ok()?)?.backtrace(true)),
    }
}

/// The environment's C string `name`, if set.
fn env(name: &CStr) -> Option<&'static [u8]> {
    // SAFETY: `getenv` reads the environment without allocating; the result, when not
    // null, is a C string that lives until the environment changes (bento reads it
    // at set-up and exit only).
    let value = unsafe { libc::getenv(name.as_ptr()) };
    // SAFETY: as above.
    (!value.is_null()).then(|| unsafe { CStr::from_ptr(value) }.to_bytes())
}

/// Reads `BENTO_PROF` (the dump's path; `%p` is the process id) and
/// `BENTO_PROF_EVERY`, and when a path is set gives `COMMON` a profiler and
/// registers the dump at exit. A rate it does not take is said in one line on
/// stderr, and the default holds.
pub(crate) fn arm() {
    if env(c"BENTO_PROF").is_none_or(<[u8]>::is_empty) {
        return;
    }
    let every = env(c"BENTO_PROF_EVERY");
    let config = parse_every(every).unwrap_or_else(|| {
        let mut line = Buf::<256>::new();
        line.push(b"bento-malloc: BENTO_PROF_EVERY=");
        let v = every.unwrap_or_default();
        line.push_escaped(&v[..v.len().min(64)]);
        line.push(b" is no number of bytes from 4096 to 1073741824; sampling every 65536\n");
        write_all(2, line.as_bytes());
        ProfileConfig::DEFAULT.backtrace(true)
    });
    let _ = COMMON.configure(|c| c.profile = Some(config));
    // SAFETY: a handler that lives as long as the process.
    unsafe { libc::atexit(dump_at_exit) };
}

extern "C" fn dump_at_exit() {
    if let Some(path) = env(c"BENTO_PROF") {
        let _ = dump(path, false);
    }
}

/// Writes the profile (with `since_mark`, only what was allocated since the last
/// mark) to `path` (`%p` expanded): a regular file (or none yet) whole or not at
/// all, through a temporary file beside it and a rename; anything else (a FIFO, a
/// device, a link to one) in place. False when it cannot be written (said on
/// stderr) or there is no profile.
fn dump(path: &[u8], since_mark: bool) -> bool {
    let Some(profiler) = COMMON.profiler() else {
        return false;
    };
    let mut name = [0u8; PATH];
    let mut temp = [0u8; PATH];
    if expand(path, &mut name).is_none() {
        return cannot(path, libc::ENAMETOOLONG);
    }
    let name = CStr::from_bytes_until_nul(&name).expect("NUL-terminated");
    // Where it goes: a file of its own beside the path, renamed over it when whole.
    let mut st = core::mem::MaybeUninit::<libc::stat>::uninit();
    // SAFETY: `st` is valid for writes of a `stat`.
    let exists = unsafe { libc::lstat(name.as_ptr(), st.as_mut_ptr()) } == 0;
    // SAFETY: written when `lstat` succeeded.
    let regular = !exists || unsafe { st.assume_init() }.st_mode & libc::S_IFMT == libc::S_IFREG;
    let target = if regular {
        let n = name.to_bytes();
        let suffix = b".bento-tmp";
        if n.len() + suffix.len() >= PATH {
            return cannot(path, libc::ENAMETOOLONG);
        }
        temp[..n.len()].copy_from_slice(n);
        temp[n.len()..n.len() + suffix.len()].copy_from_slice(suffix);
        CStr::from_bytes_until_nul(&temp).expect("NUL-terminated")
    } else {
        name
    };
    let flags = if regular {
        libc::O_WRONLY | libc::O_CREAT | libc::O_TRUNC | libc::O_CLOEXEC | libc::O_NOFOLLOW
    } else {
        libc::O_WRONLY | libc::O_CLOEXEC
    };
    let fd = sys::open(target, flags, 0o644);
    if fd < 0 {
        return cannot(path, sys::errno());
    }
    let mut buf = Buf::<{ 16 << 10 }>::new();
    profiler.write_pprof(since_mark, &mut |bytes| {
        if buf.as_bytes().len() + bytes.len() > 16 << 10 {
            write_all(fd, buf.as_bytes());
            buf = Buf::new();
        }
        if bytes.len() > 16 << 10 {
            write_all(fd, bytes);
        } else {
            buf.push(bytes);
        }
    });
    write_all(fd, buf.as_bytes());
    sys::close(fd);
    if regular {
        // SAFETY: two live NUL-terminated paths.
        if unsafe { libc::rename(target.as_ptr(), name.as_ptr()) } != 0 {
            let code = sys::errno();
            // SAFETY: as above; the temporary file is this call's own.
            unsafe { libc::unlink(target.as_ptr()) };
            return cannot(path, code);
        }
    }
    true
}

/// Says on stderr that the profile cannot be written to `path`; false.
fn cannot(path: &[u8], code: c_int) -> bool {
    let mut line = Buf::<{ 4 * PATH + 128 }>::new();
    line.push(b"bento-malloc: BENTO_PROF: cannot write the profile ");
    line.push_escaped(path);
    let _ = core::fmt::Write::write_fmt(&mut line, format_args!(" (errno {code})\n"));
    write_all(2, line.as_bytes());
    false
}

/// The C entry points of the profile.
pub mod api {
    use super::{COMMON, CStr, c_char, c_int, c_uint};

    /// `bento_prof_dump(path, since_mark)`: writes the profile now to `path` (`%p` is
    /// the process id) as the exit's dump is written; with `since_mark` non-zero,
    /// only the blocks allocated since the last `bento_prof_mark` that are still
    /// live. Returns 0, or -1 when there is no profile (`BENTO_PROF` unset) or the
    /// file cannot be written.
    ///
    /// # Safety
    ///
    /// `path` is a NUL-terminated string.
    #[unsafe(no_mangle)]
    pub unsafe extern "C" fn bento_prof_dump(path: *const c_char, since_mark: c_int) -> c_int {
        if path.is_null() {
            return -1;
        }
        // SAFETY: the caller's contract.
        let path = unsafe { CStr::from_ptr(path) }.to_bytes();
        if super::dump(path, since_mark != 0) {
            0
        } else {
            -1
        }
    }

    /// `bento_prof_mark()`: starts a new generation of the profile (a level's load,
    /// say); returns its number, 0 without a profile.
    ///
    /// # Safety
    ///
    /// None.
    #[unsafe(no_mangle)]
    pub unsafe extern "C" fn bento_prof_mark() -> c_uint {
        COMMON.profiler().map_or(0, |p| p.mark())
    }
}

#[cfg(test)]
mod tests {
    use super::parse_every;
    use bento_pages::ProfileConfig;

    #[test]
    fn bento_prof_every_takes_a_number_of_bytes() {
        let on = ProfileConfig::DEFAULT.backtrace(true);
        assert_eq!(parse_every(None), Some(on));
        assert_eq!(parse_every(Some(b"65536")), Some(on.every(65536)));
        for bad in [&b"0"[..], b"4095", b"2000000000", b"1k", b"-5", b"\xff"] {
            assert_eq!(parse_every(Some(bad)), None, "{bad:?}");
        }
    }
}
