//! The bytes the oracle writes into every block it is given and checks on each
//! step: a pattern per block, laid out and compared a 256-byte row at a time.
//!
//! These are plain functions, not methods of the generic interpreter, so that they
//! are compiled (optimised, see the workspace's profile) in this crate rather than in
//! each test crate at opt-level 0.

/// The byte at offset `i` of a block filled with `seed`.
pub(crate) fn pattern(seed: u8, i: usize) -> u8 {
    seed ^ (i as u8).wrapping_mul(0x2d) ^ ((i >> 8) as u8)
}

/// The pattern a row at a time: each 256 bytes of a block are [`pattern`]'s
/// `(i as u8) * 0x2d` run XORed with one byte (the seed and the row's number), so the
/// 256 possible rows are laid out once and a block is written with copies and
/// checked with comparisons. The byte work is most of a model test's time, and
/// under Miri a copy or a comparison is one step where a loop is one per byte.
static ROWS: [[u8; 256]; 256] = {
    let mut rows = [[0; 256]; 256];
    let mut x = 0;
    while x < 256 {
        let mut j = 0;
        while j < 256 {
            rows[x][j] = (x as u8) ^ (j as u8).wrapping_mul(0x2d);
            j += 1;
        }
        x += 1;
    }
    rows
};

/// A row of zeros, to compare zeroed bytes with.
static ZEROS: [u8; 256] = [0; 256];

/// Row `k` of block `seed`'s pattern, `len` bytes of it.
fn row(seed: u8, k: usize, len: usize) -> &'static [u8] {
    &ROWS[usize::from(seed ^ (k as u8))][..len]
}

/// Writes block `seed`'s pattern over `bytes`.
#[inline(never)]
pub(crate) fn fill_pattern(bytes: &mut [u8], seed: u8) {
    for (k, chunk) in bytes.chunks_mut(256).enumerate() {
        chunk.copy_from_slice(row(seed, k, chunk.len()));
    }
}

/// The first byte of `bytes` that breaks block `seed`'s pattern, and its value.
#[inline(never)]
pub(crate) fn find_mismatch(bytes: &[u8], seed: u8) -> Option<(usize, u8)> {
    let (k, chunk) = bytes
        .chunks(256)
        .enumerate()
        .find(|&(k, chunk)| chunk != row(seed, k, chunk.len()))?;
    let want = row(seed, k, chunk.len());
    let j = chunk.iter().zip(want).position(|(x, w)| x != w)?;
    Some((k * 256 + j, chunk[j]))
}

/// The offset of the first non-zero byte.
#[inline(never)]
pub(crate) fn first_nonzero(bytes: &[u8]) -> Option<usize> {
    let (k, chunk) = bytes
        .chunks(256)
        .enumerate()
        .find(|&(_, chunk)| chunk != &ZEROS[..chunk.len()])?;
    Some(k * 256 + chunk.iter().position(|&x| x != 0)?)
}

#[cfg(test)]
mod tests {
    use super::{fill_pattern, find_mismatch, first_nonzero, pattern};

    #[test]
    #[cfg_attr(
        miri,
        ignore = "safe code, checked natively; the oracle uses it under Miri"
    )]
    fn rows_write_and_check_the_pattern_byte_for_byte() {
        for (seed, len) in [
            (0, 0),
            (7, 1),
            (0x5a, 255),
            (0xff, 256),
            (3, 257),
            (200, 70_000),
        ] {
            let mut bytes = vec![0u8; len];
            fill_pattern(&mut bytes, seed);
            for (i, &b) in bytes.iter().enumerate() {
                assert_eq!(b, pattern(seed, i), "seed {seed} byte {i}");
            }
            assert_eq!(find_mismatch(&bytes, seed), None);
            for at in [0, len / 2, len.saturating_sub(1)]
                .into_iter()
                .filter(|&i| i < len)
            {
                let mut broken = bytes.clone();
                broken[at] ^= 0x10;
                assert_eq!(find_mismatch(&broken, seed), Some((at, broken[at])));
            }
        }
    }

    #[test]
    fn the_first_nonzero_byte_is_found_in_any_row() {
        let mut bytes = vec![0u8; 1000];
        assert_eq!(first_nonzero(&bytes), None);
        for at in [999, 600, 256, 255, 0] {
            bytes[at] = 1;
            assert_eq!(first_nonzero(&bytes), Some(at));
        }
    }
}
