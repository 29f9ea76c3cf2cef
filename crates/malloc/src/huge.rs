//! `BENTO_HUGE`: whether the common allocator's reservations ask for huge pages.

use bento_pages::SystemPages;

use crate::global::COMMON;
use crate::sys::{Buf, write_all};

/// What `BENTO_HUGE` asks for: `Some(true)` for `1` or `on`, `Some(false)` for unset,
/// empty, `0` or `off`, `None` for anything else.
pub(crate) fn parse(value: Option<&[u8]>) -> Option<bool> {
    match value {
        None | Some(b"" | b"0" | b"off") => Some(false),
        Some(b"1" | b"on") => Some(true),
        Some(_) => None,
    }
}

/// Reads `BENTO_HUGE` and, when it says so, gives `COMMON` a source with huge pages
/// (from the set-up, before anything starts `COMMON`). A value it does not know, or
/// huge pages the system does not offer, is said in one line on stderr, and the
/// usual pages hold.
pub(crate) fn arm() {
    // SAFETY: `getenv` reads the environment without allocating; the result, when not
    // null, is a C string that lives until the environment changes.
    let value = unsafe { libc::getenv(c"BENTO_HUGE".as_ptr()) };
    let value = (!value.is_null()).then(|| {
        // SAFETY: as above: a C string from the environment.
        unsafe { core::ffi::CStr::from_ptr(value) }.to_bytes()
    });
    match parse(value) {
        Some(false) => {}
        Some(true) => match SystemPages::new().with_huge_pages() {
            Ok(pages) => {
                // Refused only once `COMMON` has started: not before the set-up.
                let _ = COMMON.configure(|config| config.pages = pages);
            }
            Err(e) => {
                let mut line = Buf::<256>::new();
                line.push(b"bento-malloc: BENTO_HUGE: ");
                let _ = core::fmt::Write::write_fmt(&mut line, format_args!("{e}\n"));
                write_all(2, line.as_bytes());
            }
        },
        None => {
            let mut line = Buf::<256>::new();
            line.push(b"bento-malloc: BENTO_HUGE=");
            let value = value.unwrap_or_default();
            line.push_escaped(&value[..value.len().min(64)]);
            line.push(b" is neither `on`/`1` nor `off`/`0`; huge pages stay off\n");
            write_all(2, line.as_bytes());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::parse;

    #[test]
    fn bento_huge_takes_on_and_off() {
        for (value, want) in [
            (None, Some(false)),
            (Some(&b""[..]), Some(false)),
            (Some(b"0"), Some(false)),
            (Some(b"off"), Some(false)),
            (Some(b"1"), Some(true)),
            (Some(b"on"), Some(true)),
            (Some(b"yes"), None),
            (Some(b"ON"), None),
            (Some(b" 1"), None),
            (Some(b"2"), None),
        ] {
            assert_eq!(parse(value), want, "{value:?}");
        }
    }
}
