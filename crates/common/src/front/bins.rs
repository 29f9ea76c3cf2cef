//! The front end's bins ([`Bin`]): one per small class, then eight medium bins an
//! octave from 257 to 4096 bytes; their sizes, and the division-free test of a
//! block's offset against its bin's stride.

use crate::config::MAX_CLASSES;

/// Medium bins: eight per octave from 256 to 4096 bytes.
pub(crate) const MEDIUM_BINS: usize = 32;
/// Bins of a cache: one per small class (up to 32), then the medium ones.
pub(crate) const BINS: usize = MAX_CLASSES + MEDIUM_BINS;
/// The largest request the front end serves.
pub(crate) const MAX_CACHED: usize = 4096;
/// The bytes a bin holds at most (within 8 to 128 blocks).
pub(crate) const BIN_BYTES: usize = 16 << 10;
/// The most blocks a bin holds.
pub(crate) const BIN_MOST: u32 = 128;

/// Which medium bin `size` (257 to 4096 bytes) falls in, from 0: its octave and
/// eighth.
#[inline]
pub(crate) const fn medium_bin(size: usize) -> usize {
    let octave = (usize::BITS - 1 - (size - 1).leading_zeros()) as usize - 8;
    octave * 8 + ((size - 1 - (256 << octave)) >> (5 + octave))
}

/// A bin of the front end, and the index of its class region: the small classes
/// in order (`0..classes.len()`), then the medium bins in order. The one number a
/// class region goes by; [`RegionId`](crate::layer::map::RegionId) is what the
/// region map and the stats call it.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[repr(transparent)]
pub(crate) struct Bin(u8);

impl Bin {
    /// What the size lookup holds for a size no bin serves: a bin that is always
    /// empty and full (capacity 0), so that the hot paths need no test for it.
    pub(crate) const NONE: Self = Self(BINS as u8);

    /// Bin `index` (at most `BINS`, which is `NONE`).
    #[inline]
    pub(crate) const fn new(index: usize) -> Self {
        assert!(index <= BINS, "a bin index is at most BINS");
        Self(index as u8)
    }

    /// The medium bin of `size` (257 to 4096 bytes), after `smalls` small classes.
    #[inline]
    pub(crate) const fn medium(smalls: usize, size: usize) -> Self {
        Self::new(smalls + medium_bin(size))
    }

    /// The bin's index: into a cache's bins and the allocator's class regions.
    #[inline(always)]
    pub(crate) const fn index(self) -> usize {
        self.0 as usize
    }
}

/// Whether `size` falls in a medium bin.
#[inline]
pub(crate) const fn is_medium(size: usize) -> bool {
    size > 256 && size <= MAX_CACHED
}

/// The block size of the `m`th medium bin.
#[inline]
pub(crate) const fn medium_size(m: usize) -> usize {
    let octave = m / 8;
    (256 << octave) + (m % 8 + 1) * (32 << octave)
}

/// A block stride as a divisibility test without a division: `2^shift` times an
/// odd number whose inverse modulo `2^BITS` is `inverse`. `n` is a multiple of the
/// stride when its low `shift` bits are zero and `(n >> shift) * inverse`, wrapping,
/// is at most `limit` (the multiples of an odd number are exactly the numbers its
/// inverse maps to `0..=MAX / odd`).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Stride {
    shift: u32,
    /// The low `shift` bits.
    low: usize,
    inverse: usize,
    limit: usize,
}

impl Stride {
    /// The test for multiples of `stride` (non-zero).
    pub(crate) const fn new(stride: usize) -> Self {
        let shift = stride.trailing_zeros();
        let odd = stride >> shift;
        // Newton's iteration doubles the bits of the inverse each step: an odd
        // number is its own inverse to 3 bits, so 5 steps give 96 (and 64) bits.
        let mut inverse = odd;
        let mut i = 0;
        while i < 5 {
            inverse = inverse.wrapping_mul(2usize.wrapping_sub(odd.wrapping_mul(inverse)));
            i += 1;
        }
        Self {
            shift,
            low: (1 << shift) - 1,
            inverse,
            limit: usize::MAX / odd,
        }
    }

    /// Whether `n` is a multiple of the stride.
    #[inline(always)]
    pub(crate) const fn divides(&self, n: usize) -> bool {
        n & self.low == 0 && (n >> self.shift).wrapping_mul(self.inverse) <= self.limit
    }
}

#[cfg(test)]
mod tests {
    /// The division-free test agrees with `%` for every stride a bin has.
    #[test]
    #[cfg_attr(miri, ignore = "safe arithmetic: nothing for Miri to check")]
    fn stride_tests_agree_with_the_remainder() {
        for stride in (16..=4096).step_by(8) {
            let test = super::Stride::new(stride);
            for n in (0..3 * stride).chain([usize::MAX - 7, usize::MAX / 2, 65_408, 2 * stride]) {
                assert_eq!(test.divides(n), n % stride == 0, "{n} by {stride}");
            }
        }
    }
}
