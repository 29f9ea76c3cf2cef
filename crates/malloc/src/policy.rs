//! `BENTO_RETAIN`'s values: how long freed memory stays committed for reuse, as a
//! [`Policy`] and as the common allocator's [`Retention`].

use core::fmt::Write;

use bento_pages::{Decay, Retention};

use crate::sys::{Buf, write_all};

/// The decay when `BENTO_RETAIN` is unset: memory unused for between half a second
/// and a second goes back.
pub(crate) const DEFAULT_DECAY_MS: u32 = 1000;
/// The longest decay `BENTO_RETAIN` takes: an hour.
const MAX_DECAY_MS: u32 = 3_600_000;

/// What `BENTO_RETAIN` asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Policy {
    /// Freed pages go back at once (beyond the commit cache's small floor).
    Eager,
    /// Freed pages go back after this many milliseconds unused.
    Decay(u32),
}

/// `BENTO_RETAIN` unset.
pub(crate) const DEFAULT: Policy = Policy::Decay(DEFAULT_DECAY_MS);

/// The retention of `policy`.
pub(crate) const fn retention(policy: Policy) -> Retention {
    match policy {
        Policy::Eager => Retention::Eager,
        Policy::Decay(ms) => Retention::Decay(Decay::millis(ms)),
    }
}

/// `BENTO_RETAIN`'s value as a policy: `eager`, or a whole number of milliseconds from
/// 1 to [`MAX_DECAY_MS`] (an empty value is the default); `None` for anything else.
pub(crate) fn parse(value: &[u8]) -> Option<Policy> {
    if value.is_empty() {
        return Some(DEFAULT);
    }
    if value == b"eager" {
        return Some(Policy::Eager);
    }
    if value.len() > 7 || !value.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let ms = value.iter().fold(0u32, |n, d| n * 10 + u32::from(d - b'0'));
    (1..=MAX_DECAY_MS)
        .contains(&ms)
        .then_some(Policy::Decay(ms))
}

/// Says in one line on stderr, written without allocating, that `value` is not a
/// value of `BENTO_RETAIN`.
pub(crate) fn warn(value: &[u8]) {
    let mut line = Buf::<256>::new();
    line.push(b"bento-malloc: BENTO_RETAIN=");
    line.push(&value[..value.len().min(64)]);
    let _ = writeln!(
        line,
        " is neither `eager` nor milliseconds from 1 to {MAX_DECAY_MS}; \
         keeping freed memory for {DEFAULT_DECAY_MS} ms"
    );
    write_all(2, &line.bytes[..line.len]);
}

#[cfg(test)]
mod tests {
    use super::{Policy, parse};

    #[test]
    fn bento_retain_takes_eager_and_milliseconds() {
        assert_eq!(parse(b"eager"), Some(Policy::Eager));
        assert_eq!(parse(b"250"), Some(Policy::Decay(250)));
        assert_eq!(parse(b"1"), Some(Policy::Decay(1)));
        assert_eq!(parse(b"3600000"), Some(Policy::Decay(3_600_000)));
        assert_eq!(parse(b""), Some(Policy::Decay(1000)));
        for bad in [
            &b"0"[..],
            b"3600001",
            b"99999999999999999999",
            b"-5",
            b"+5",
            b" 5",
            b"5ms",
            b"1e3",
            b"Eager",
            b"lazy",
        ] {
            assert_eq!(parse(bad), None, "{}", String::from_utf8_lossy(bad));
        }
    }
}
