//! The most bytes a replay may hold live: `--max-live`, else the memory available,
//! so that a trace bigger than the machine (one flipped byte of a size can ask for
//! 22 GiB) is refused before it runs rather than replayed until the kernel kills it.

use std::path::Path;

use crate::run::bytes;

/// What bounds the bytes a replay holds live.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum LiveBound {
    /// `--max-live`, in bytes.
    Given(u64),
    /// The memory available as the command starts (`MemAvailable`), in bytes.
    Available(u64),
    /// No bound: none given, and the system does not tell its memory available.
    Unbounded,
}

impl LiveBound {
    /// `--max-live` when given, else the memory available where the system tells.
    pub(crate) fn new(max_live: Option<Self>) -> Self {
        max_live.unwrap_or_else(|| mem_available().map_or(Self::Unbounded, Self::Available))
    }

    /// The bound in bytes, `None` when there is none.
    pub(crate) fn bytes(self) -> Option<u64> {
        match self {
            Self::Given(n) | Self::Available(n) => Some(n),
            Self::Unbounded => None,
        }
    }

    /// Checks a trace's peak of live bytes against the bound: an error naming both
    /// when the peak is over it.
    pub(crate) fn check(self, trace: &Path, peak_live: u128) -> Result<(), String> {
        match self.bytes() {
            Some(limit) if peak_live > u128::from(limit) => {
                Err(self.refusal(trace, &format!("its peak live, {},", bytes(peak_live))))
            }
            _ => Ok(()),
        }
    }

    /// One line: `what` in `trace` (`its peak live, 4.00 EiB,`) is more than the
    /// bound, and how to replay it anyway.
    pub(crate) fn refusal(self, trace: &Path, what: &str) -> String {
        let bound = match self {
            Self::Given(n) => format!("--max-live {}", bytes(n)),
            Self::Available(n) => format!(
                "the {} of memory available (MemAvailable in /proc/meminfo); --max-live \
                 SIZE replays a trace of up to SIZE live",
                bytes(n)
            ),
            Self::Unbounded => "no bound".to_owned(),
        };
        format!("{}: {what} is more than {bound}", trace.display())
    }
}

/// The memory available for new work without swapping (`MemAvailable` of
/// `/proc/meminfo`), in bytes; `None` where the system does not tell (not Linux).
pub(crate) fn mem_available() -> Option<u64> {
    meminfo_available(&std::fs::read_to_string("/proc/meminfo").ok()?)
}

/// `MemAvailable` of the text of `/proc/meminfo` (`MemAvailable:  24060280 kB`), in
/// bytes.
fn meminfo_available(meminfo: &str) -> Option<u64> {
    let line = meminfo
        .lines()
        .find_map(|l| l.strip_prefix("MemAvailable:"))?;
    let mut words = line.split_whitespace();
    let n: u64 = words.next()?.parse().ok()?;
    let unit = match words.next() {
        None => 1,
        Some("kB") => 1024,
        Some(_) => return None,
    };
    n.checked_mul(unit)
}

/// The units a size takes, with the power of two of each: binary, whether written
/// `G` or `GiB` (any case).
const UNITS: [(&str, &str, u32); 7] = [
    ("b", "", 0),
    ("k", "kib", 10),
    ("m", "mib", 20),
    ("g", "gib", 30),
    ("t", "tib", 40),
    ("p", "pib", 50),
    ("e", "eib", 60),
];

/// Parses `--max-live`: `none` (no bound) or a size (see [`parse_size`]).
pub(crate) fn parse_max_live(text: &str) -> Result<LiveBound, String> {
    if text.trim().eq_ignore_ascii_case("none") {
        Ok(LiveBound::Unbounded)
    } else {
        parse_size(text).map(LiveBound::Given)
    }
}

/// Parses a size as `--max-live` takes it: a number of bytes, whole or not, with a
/// binary unit or none (`512`, `1.5G`, `64 MiB`), from 1 byte to `u64::MAX` bytes.
pub(crate) fn parse_size(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let end = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (number, unit) = t.split_at(end);
    let unit = unit.trim().to_ascii_lowercase();
    let shift = UNITS
        .iter()
        .find(|(short, long, _)| unit == *short || unit == *long)
        .map(|u| u.2);
    let not_a_size = || {
        format!(
            "`{text}` is not a size: a number of bytes, or of K, M, G, T, P or E (KiB, MiB, \
             GiB, TiB, PiB or EiB)"
        )
    };
    let (Some(shift), false) = (shift, number.is_empty()) else {
        return Err(not_a_size());
    };
    let value: Option<u128> = match number.parse::<u64>() {
        Ok(n) => Some(u128::from(n) << shift),
        Err(_) => {
            let x: f64 = number.parse().map_err(|_| not_a_size())?;
            // Below 2^64 · 2^60 whatever the unit: the product fits a u128.
            let v = (x * (1u128 << shift) as f64).floor();
            (v < 2f64.powi(120)).then_some(v as u128)
        }
    };
    match value.map(u64::try_from) {
        Some(Ok(n)) if n >= 1 => Ok(n),
        _ => Err(format!(
            "{text} is not from 1 byte to {} bytes (16 EiB less a byte)",
            u64::MAX
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_read_in_binary_units_and_out_of_range_ones_are_named() {
        assert_eq!(parse_size("512"), Ok(512));
        assert_eq!(parse_size("1G"), Ok(1 << 30));
        assert_eq!(parse_size("1GiB"), Ok(1 << 30));
        assert_eq!(parse_size("64 mib"), Ok(64 << 20));
        assert_eq!(parse_size("1.5K"), Ok(1536));
        assert_eq!(parse_size("8EiB"), Ok(1 << 63));
        assert_eq!(parse_size(&u64::MAX.to_string()), Ok(u64::MAX));
        assert_eq!(parse_max_live("2M"), Ok(LiveBound::Given(2 << 20)));
        assert_eq!(parse_max_live("none"), Ok(LiveBound::Unbounded));
        for bad in [
            "16EiB",
            "0",
            "0.2",
            "18446744073709551616",
            "99999999999999999999.5E",
        ] {
            let err = parse_size(bad).unwrap_err();
            assert!(err.contains("is not from 1 byte to"), "{bad}: {err}");
        }
        for bad in ["", "GiB", "1GB", "-1", "1.2.3", "ten", "1e3"] {
            let err = parse_size(bad).unwrap_err();
            assert!(err.contains("is not a size"), "{bad}: {err}");
        }
    }

    #[test]
    fn mem_available_reads_meminfo_in_bytes() {
        let text = "MemTotal:       24576000 kB\nMemFree:  1000 kB\nMemAvailable:   \
                    24060280 kB\nBuffers: 0 kB\n";
        assert_eq!(meminfo_available(text), Some(24_060_280 * 1024));
        assert_eq!(meminfo_available("MemFree: 1000 kB\n"), None);
        assert_eq!(meminfo_available("MemAvailable: lots\n"), None);
        #[cfg(target_os = "linux")]
        assert!(mem_available().is_some_and(|n| n > 0));
    }

    #[test]
    fn a_refusal_names_the_peak_and_the_bound_on_one_line() {
        let trace = Path::new("huge.trace");
        let peak = 1u128 << 40;
        let err = LiveBound::Available(16 << 30)
            .check(trace, peak)
            .unwrap_err();
        assert_eq!(
            err,
            "huge.trace: its peak live, 1.00 TiB, is more than the 16.0 GiB of memory \
             available (MemAvailable in /proc/meminfo); --max-live SIZE replays a trace of \
             up to SIZE live"
        );
        let err = LiveBound::Given(1 << 20).check(trace, peak).unwrap_err();
        assert_eq!(
            err,
            "huge.trace: its peak live, 1.00 TiB, is more than --max-live 1.00 MiB"
        );
        assert!(LiveBound::Given(1 << 40).check(trace, peak).is_ok());
        assert!(LiveBound::Unbounded.check(trace, u128::MAX).is_ok());
    }
}
