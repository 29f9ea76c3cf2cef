//! [`Rng`]: the one seeded generator of bento's workloads, test programs and
//! benchmarks.

/// A seeded pseudo-random generator: xorshift64, whose whole state is one `u64`, so a
/// workload, a test program or a benchmark that names its seed draws the same numbers
/// on every machine and in every build. Not for anything that must be unpredictable.
///
/// [`Rng::new`] starts from a state as given (what the workloads and benchmarks do, so
/// their streams stay as they are); [`Rng::mixed`] first mixes a seed of any quality
/// (SplitMix64's finaliser), so that seeds `1`, `2`, `3` give unrelated streams.
///
/// ```
/// use bento_trace::Rng;
///
/// let mut a = Rng::new(7);
/// let mut b = Rng::new(7);
/// assert_eq!(a.next_u64(), b.next_u64());
/// assert_eq!(Rng::step(7), Rng::new(7).next_u64());
/// let size = Rng::mixed(3).log_uniform(16, 4096);
/// assert!((16..=4096).contains(&size));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rng(u64);

impl Rng {
    /// A generator whose next number is [`Rng::step`] of `state` (0, which xorshift
    /// never leaves, becomes 1).
    #[must_use]
    pub const fn new(state: u64) -> Self {
        Self(if state == 0 { 1 } else { state })
    }

    /// A generator from `seed` mixed first, for seeds that differ in few bits.
    #[must_use]
    pub const fn mixed(seed: u64) -> Self {
        let mut z = seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        Self::new(z ^ (z >> 31))
    }

    /// One step of xorshift64 from state `x`: the number after `x`.
    #[must_use]
    pub const fn step(mut x: u64) -> u64 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    }

    /// The next number.
    #[inline]
    pub fn next_u64(&mut self) -> u64 {
        self.0 = Self::step(self.0);
        self.0
    }

    /// A number below `n` (0 for `n == 0`).
    #[inline]
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }

    /// A size log-uniform in `[lo, hi]` (`lo` taken as at least 1).
    pub fn log_uniform(&mut self, lo: usize, hi: usize) -> usize {
        log_uniform(self.next_u64(), lo, hi)
    }

    /// Fills `out` with the next numbers' bytes, little-endian.
    pub fn fill_bytes(&mut self, out: &mut [u8]) {
        for chunk in out.chunks_mut(8) {
            let bytes = self.next_u64().to_le_bytes();
            chunk.copy_from_slice(&bytes[..chunk.len()]);
        }
    }
}

/// A size log-uniform in `[lo, hi]` (`lo` taken as at least 1) from 64 random bits.
pub(crate) fn log_uniform(bits: u64, lo: usize, hi: usize) -> usize {
    let lo = lo.max(1);
    let hi = hi.max(lo);
    let u = (bits >> 11) as f64 / (1u64 << 53) as f64;
    let span = (hi as f64 / lo as f64).log2();
    ((lo as f64 * (u * span).exp2()) as usize).clamp(lo, hi)
}
