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
/// 1 to [`MAX_DECAY_MS`] in decimal digits, leading zeros or not (an empty value is
/// the default); `None` for anything else.
pub(crate) fn parse(value: &[u8]) -> Option<Policy> {
    if value.is_empty() {
        return Some(DEFAULT);
    }
    if value == b"eager" {
        return Some(Policy::Eager);
    }
    if !value.iter().all(u8::is_ascii_digit) {
        return None;
    }
    // Saturating: a number of any length is read without overflow, and one past
    // `u32::MAX` is out of range as it is.
    let ms = value.iter().fold(0u32, |n, d| {
        n.saturating_mul(10).saturating_add(u32::from(d - b'0'))
    });
    (1..=MAX_DECAY_MS)
        .contains(&ms)
        .then_some(Policy::Decay(ms))
}

/// The bytes of `BENTO_RETAIN`'s value [`warning`] echoes.
const ECHOED: usize = 64;

/// The line saying that `value` is not a value of `BENTO_RETAIN`: its first
/// [`ECHOED`] bytes echoed with control bytes escaped (`\xHH`), so that it stays one
/// line.
fn warning(value: &[u8]) -> Buf<512> {
    let mut line = Buf::<512>::new();
    line.push(b"bento-malloc: BENTO_RETAIN=");
    line.push_escaped(&value[..value.len().min(ECHOED)]);
    let _ = writeln!(
        line,
        " is neither `eager` nor milliseconds from 1 to {MAX_DECAY_MS}; \
         keeping freed memory for {DEFAULT_DECAY_MS} ms"
    );
    line
}

/// Says in one line on stderr, written without allocating, that `value` is not a
/// value of `BENTO_RETAIN` (from the set-up, while fd 2 is the program's stderr).
pub(crate) fn warn(value: &[u8]) {
    write_all(2, warning(value).as_bytes());
}

#[cfg(test)]
mod tests {
    use super::{Policy, parse, warning};

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

    #[test]
    fn bento_retain_takes_any_number_of_leading_zeros() {
        assert_eq!(parse(b"0000001"), Some(Policy::Decay(1)));
        assert_eq!(parse(b"00000001"), Some(Policy::Decay(1)));
        assert_eq!(
            parse(b"000000000000000000000000000250"),
            Some(Policy::Decay(250))
        );
        assert_eq!(parse(b"0003600000"), Some(Policy::Decay(3_600_000)));
        // Zero is zero however it is written, and a long number stays out of range
        // rather than wrapping into it (4294967546 is 250 past 2^32).
        for bad in [
            &b"00"[..],
            b"00000000",
            b"0003600001",
            b"4294967546",
            b"18446744073709551866",
            b"000000000000000000000000000000000000000000000000009999999999",
        ] {
            assert_eq!(parse(bad), None, "{}", String::from_utf8_lossy(bad));
        }
    }

    #[test]
    fn a_bad_bento_retain_is_echoed_on_one_line() {
        for (value, echoed) in [
            (&b"12\n34"[..], &b"12\\x0a34"[..]),
            (b"\r\x1b[2J\x7f", b"\\x0d\\x1b[2J\\x7f"),
            (b"lazy", b"lazy"),
        ] {
            let line = warning(value);
            let line = line.as_bytes();
            assert_eq!(
                line.iter().filter(|&&b| b == b'\n').count(),
                1,
                "{}",
                String::from_utf8_lossy(line)
            );
            assert!(
                line.ends_with(b" ms\n"),
                "{}",
                String::from_utf8_lossy(line)
            );
            assert!(
                line.iter().all(|&b| b == b'\n' || (b >= 0x20 && b != 0x7f)),
                "{}",
                String::from_utf8_lossy(line)
            );
            let mut expected = b"bento-malloc: BENTO_RETAIN=".to_vec();
            expected.extend_from_slice(echoed);
            expected.extend_from_slice(b" is neither");
            assert!(
                line.starts_with(&expected),
                "{}",
                String::from_utf8_lossy(line)
            );
        }
        // A long value of control bytes is cut before it is escaped, and the line
        // still ends whole.
        let line = warning(&[b'\n'; 300]);
        assert!(
            line.as_bytes()
                .ends_with(b"keeping freed memory for 1000 ms\n")
        );
    }
}
