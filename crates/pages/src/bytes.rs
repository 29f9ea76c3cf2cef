//! [`ByteSize`]: a count of bytes as a person writes it, the one way every bento
//! report, table and command prints sizes.

use core::fmt;

/// The units, each 1024 times the one before.
const UNITS: [&str; 11] = [
    "B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB", "ZiB", "YiB", "RiB", "QiB",
];

/// A count of bytes that displays in binary units with three significant stats:
/// `0 B`, `1023 B`, `1.50 KiB`, `50.0 MiB`, `300 GiB`. It honours the formatter's
/// width, fill and alignment (`{:>10}` right-aligns it in ten columns) and needs no
/// allocation. It holds a `u128`, so that a sum of many `u64` sizes prints as it is.
///
/// ```
/// use bento_pages::ByteSize;
///
/// assert_eq!(ByteSize(1536).to_string(), "1.50 KiB");
/// assert_eq!(ByteSize(50 << 20).to_string(), "50.0 MiB");
/// assert_eq!(format!("[{:>9}]", ByteSize(7_519_232)), "[ 7.17 MiB]");
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ByteSize(pub u128);

impl ByteSize {
    /// `bytes` as a `ByteSize`.
    ///
    /// ```
    /// use bento_pages::ByteSize;
    ///
    /// assert_eq!(ByteSize::of(4096).to_string(), "4.00 KiB");
    /// ```
    #[must_use]
    pub fn of(bytes: usize) -> Self {
        Self(bytes as u128)
    }
}

impl From<usize> for ByteSize {
    fn from(bytes: usize) -> Self {
        Self::of(bytes)
    }
}

impl From<u64> for ByteSize {
    fn from(bytes: u64) -> Self {
        Self(u128::from(bytes))
    }
}

impl fmt::Display for ByteSize {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.0;
        let (mut unit, mut scale) = (0, 1u128);
        while unit + 1 < UNITS.len() && n >= scale * 1024 {
            scale *= 1024;
            unit += 1;
        }
        let name = UNITS[unit];
        // `n / scale` rounded to `digits` decimals, as an integer (`rem * k` stays
        // far below 2^128: `scale` is at most 2^100).
        let rounded = |digits: u32| {
            let k = 10u128.pow(digits);
            let (whole, rem) = (n / scale, n % scale);
            whole * k + (rem * k + scale / 2) / scale
        };
        let mut text = Text::default();
        if unit == 0 {
            fmt::write(&mut text, format_args!("{n} {name}"))?;
        } else if rounded(2) < 1000 {
            let v = rounded(2);
            fmt::write(&mut text, format_args!("{}.{:02} {name}", v / 100, v % 100))?;
        } else if rounded(1) < 1000 {
            let v = rounded(1);
            fmt::write(&mut text, format_args!("{}.{} {name}", v / 10, v % 10))?;
        } else {
            fmt::write(&mut text, format_args!("{} {name}", rounded(0)))?;
        }
        f.pad(text.as_str())
    }
}

/// Room for one stat: at most 20 digits, a point, a space and a unit.
#[derive(Default)]
struct Text {
    bytes: [u8; 32],
    len: usize,
}

impl Text {
    fn as_str(&self) -> &str {
        // Only whole `&str`s are written in, so the bytes are UTF-8.
        core::str::from_utf8(&self.bytes[..self.len]).unwrap_or("?")
    }
}

impl fmt::Write for Text {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        let end = self.len + s.len();
        let room = self.bytes.get_mut(self.len..end).ok_or(fmt::Error)?;
        room.copy_from_slice(s.as_bytes());
        self.len = end;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    extern crate std;

    use std::string::ToString;

    use super::ByteSize;

    #[test]
    fn sizes_read_as_a_person_writes_them() {
        let cases: [(u128, &str); 14] = [
            (0, "0 B"),
            (1023, "1023 B"),
            (1024, "1.00 KiB"),
            (1536, "1.50 KiB"),
            (10 * 1024 - 1, "10.0 KiB"),
            (7_519_232, "7.17 MiB"),
            (50 << 20, "50.0 MiB"),
            ((100 << 20) - 1, "100 MiB"),
            ((1 << 20) - 1, "1024 KiB"),
            (300 << 30, "300 GiB"),
            (1 << 60, "1.00 EiB"),
            (u64::MAX as u128, "16.0 EiB"),
            (3 * u64::MAX as u128, "48.0 EiB"),
            (u128::MAX, "268435456 QiB"),
        ];
        for (n, text) in cases {
            assert_eq!(ByteSize(n).to_string(), text, "{n} bytes");
        }
    }

    #[test]
    fn width_and_alignment_apply_to_the_whole_figure() {
        assert_eq!(std::format!("{:>10}|", ByteSize(1536)), "  1.50 KiB|");
        assert_eq!(std::format!("{:<8}|", ByteSize(5)), "5 B     |");
        assert_eq!(std::format!("{:*^10}", ByteSize(5)), "***5 B****");
    }
}
