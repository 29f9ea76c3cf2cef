//! Seeded replay: the fuzz driver as a plain `#[test]` over pseudo-random inputs made
//! from a fixed seed, so a failure names the case that reproduces it.

use alloc::vec;
use alloc::vec::Vec;

use arbitrary::Unstructured;
use bento_trace::Rng;

use crate::oracle::{Failure, RunReport};

/// The seed used when `BENTO_SEED` is not set.
const DEFAULT_SEED: u64 = 0xB3A7_0000_5EED_0001;

fn base_seed() -> u64 {
    std::env::var("BENTO_SEED")
        .ok()
        .and_then(|s| {
            let s = s.trim();
            match s.strip_prefix("0x") {
                Some(hex) => u64::from_str_radix(hex, 16).ok(),
                None => s.parse().ok(),
            }
        })
        .unwrap_or(DEFAULT_SEED)
}

/// The `len` pseudo-random bytes of case `case` under the base seed (`BENTO_SEED`, or
/// a fixed default).
///
/// ```
/// let a = bento_testkit::seeded_bytes(3, 64);
/// assert_eq!(a, bento_testkit::seeded_bytes(3, 64));
/// assert_ne!(a, bento_testkit::seeded_bytes(4, 64));
/// ```
#[must_use]
pub fn seeded_bytes(case: usize, len: usize) -> Vec<u8> {
    // bento's one generator, its seed mixed: cases differ in a few bits of it.
    let mut rng = Rng::mixed(base_seed() ^ (case as u64).wrapping_mul(0xD6E8_FEB8_6659_FD93));
    let mut out = vec![0; len];
    rng.fill_bytes(&mut out);
    out
}

/// `native` normally, `miri` under Miri (which interprets every instruction).
///
/// ```
/// let n = bento_testkit::cases(1000, 4);
/// assert!(n == 1000 || n == 4);
/// ```
#[must_use]
pub const fn cases(native: usize, miri: usize) -> usize {
    if cfg!(miri) { miri } else { native }
}

/// Runs `program` over `n` seeded inputs and returns the summed [`RunReport`].
///
/// Each input is 16 KiB of pseudo-random bytes (2 KiB under Miri). `BENTO_SEED` sets
/// the base seed; `BENTO_CASE=i` runs case `i` alone.
///
/// # Panics
///
/// On the first failing case, with a message naming the case and seed that reproduce
/// it.
///
/// ```
/// use allocator_api2::alloc::Global;
/// use bento_testkit::{run, seeded, Api02, Caps};
///
/// let report = seeded(8, |u| run(&mut Api02::new(&Global), &Caps::default(), u));
/// assert!(report.allocs > 100);
/// ```
pub fn seeded<F>(n: usize, mut program: F) -> RunReport
where
    F: FnMut(&mut Unstructured<'_>) -> Result<RunReport, Failure>,
{
    let len = if cfg!(miri) { 2 << 10 } else { 16 << 10 };
    let only: Option<usize> = std::env::var("BENTO_CASE")
        .ok()
        .and_then(|s| s.trim().parse().ok());
    let mut total = RunReport::default();
    for case in (0..n).filter(|c| only.is_none_or(|o| o == *c)) {
        let bytes = seeded_bytes(case, len);
        match program(&mut Unstructured::new(&bytes)) {
            Ok(report) => total += report,
            Err(failure) => panic!(
                "bento-testkit: case {case} of {n} failed (BENTO_SEED={:#x}; rerun alone with BENTO_CASE={case}): {failure}",
                base_seed()
            ),
        }
    }
    total
}
