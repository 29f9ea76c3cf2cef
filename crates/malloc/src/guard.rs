//! `BENTO_GUARD`: sampled guard pages for the common allocator.

use bento_pages::GuardConfig;

use crate::global::COMMON;
use crate::sys::{Buf, write_all};

/// What `BENTO_GUARD` asks for: `Some(None)` for unset, empty, `0` or `off`;
/// `Some(Some(config))` for `on` (one allocation in 4096, 64 slots), `N` or
/// `N,SLOTS`; `None` for anything else.
pub(crate) fn parse(value: Option<&[u8]>) -> Option<Option<GuardConfig>> {
    let config = GuardConfig::DEFAULT.named("malloc");
    match value {
        None | Some(b"" | b"0" | b"off") => Some(None),
        Some(b"on") => Some(Some(config)),
        Some(value) => {
            let text = core::str::from_utf8(value).ok()?;
            let parsed = GuardConfig::parse(text)?;
            Some(Some(config.every(parsed.every).slots(parsed.slots)))
        }
    }
}

/// Reads `BENTO_GUARD` and, when it says so, gives `COMMON` a guard pool (from the
/// set-up, before anything starts `COMMON`). A value it does not know is said in
/// one line on stderr, and guard pages stay off.
pub(crate) fn arm() {
    // SAFETY: `getenv` reads the environment without allocating; the result, when not
    // null, is a C string that lives until the environment changes.
    let value = unsafe { libc::getenv(c"BENTO_GUARD".as_ptr()) };
    let value = (!value.is_null()).then(|| {
        // SAFETY: as above: a C string from the environment.
        unsafe { core::ffi::CStr::from_ptr(value) }.to_bytes()
    });
    match parse(value) {
        Some(None) => {}
        Some(Some(guard)) => {
            // Refused only once `COMMON` has started: not before the set-up.
            let _ = COMMON.configure(|config| config.guard = Some(guard));
        }
        None => {
            let mut line = Buf::<256>::new();
            line.push(b"bento-malloc: BENTO_GUARD=");
            let value = value.unwrap_or_default();
            line.push_escaped(&value[..value.len().min(64)]);
            line.push(b" is neither `on`, `off`, N nor N,SLOTS; guard pages stay off\n");
            write_all(2, line.as_bytes());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::parse;
    use bento_pages::GuardConfig;

    #[test]
    fn bento_guard_takes_on_off_a_rate_and_slots() {
        let on = GuardConfig::DEFAULT.named("malloc");
        for (value, want) in [
            (None, Some(None)),
            (Some(&b""[..]), Some(None)),
            (Some(b"0"), Some(None)),
            (Some(b"off"), Some(None)),
            (Some(b"on"), Some(Some(on))),
            (Some(b"1"), Some(Some(on.every(1)))),
            (Some(b"500,8"), Some(Some(on.every(500).slots(8)))),
            (Some(b"500,0"), None),
            (Some(b"500,5000"), None),
            (Some(b"yes"), None),
            (Some(b"-3"), None),
            (Some(b"\xff"), None),
            (Some(b"99999999999999"), None),
        ] {
            assert_eq!(parse(value), want, "{value:?}");
        }
    }
}
