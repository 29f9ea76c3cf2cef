//! How the report writes a stat: the one place numbers become text.

use bento_pages::ByteSize;

/// What a cell shows when the run has no stat for it.
pub(crate) const NONE: &str = "—";

/// `ns` nanoseconds, in the unit that keeps three or four stats.
pub fn duration(ns: f64) -> String {
    match ns {
        ns if ns < 1e3 => format!("{ns:.1} ns"),
        ns if ns < 1e6 => format!("{:.2} µs", ns / 1e3),
        ns if ns < 1e9 => format!("{:.1} ms", ns / 1e6),
        ns => format!("{:.2} s", ns / 1e9),
    }
}

/// `bytes` in binary units, as every bento report writes them.
pub(crate) fn bytes(bytes: f64) -> String {
    ByteSize(bytes.max(0.0).round() as u128).to_string()
}

/// `ns` nanoseconds in microseconds: two decimals below 10, one below 1000, none above.
pub(crate) fn micros(ns: f64) -> String {
    let us = ns / 1e3;
    match us {
        us if us < 10.0 => format!("{us:.2}"),
        us if us < 1e3 => format!("{us:.1}"),
        us => format!("{us:.0}"),
    }
}

/// A ratio to two decimals.
pub(crate) fn ratio(r: f64) -> String {
    format!("{r:.2}")
}

/// `value` formatted by `f`, or [`NONE`].
pub(crate) fn or_none<T>(value: Option<T>, f: impl FnOnce(T) -> String) -> String {
    value.map_or_else(|| NONE.to_owned(), f)
}
