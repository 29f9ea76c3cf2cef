//! Edge-biased generators: a raw number from the fuzzer becomes a size or alignment
//! that lands on a boundary (0, 1, align±1, page±1, caller-given boundaries ±1) more
//! often than chance would.

use alloc::vec::Vec;
use bento_align::Alignment;

/// Turns raw numbers into allocation sizes, biased towards edges.
///
/// ```
/// use bento_testkit::SizeGen;
///
/// let sizes = SizeGen::new(1 << 20).with_boundaries(&[256, 65536]);
/// for raw in 0..1000 {
///     assert!(sizes.pick(raw, 16) <= 1 << 20);
/// }
/// ```
#[derive(Clone, Debug)]
pub struct SizeGen {
    max: usize,
    page: usize,
    boundaries: Vec<usize>,
}

impl SizeGen {
    /// Sizes from 0 to `max` (inclusive), with 4 KiB pages as an edge.
    #[must_use]
    pub fn new(max: usize) -> Self {
        Self {
            max,
            page: 4096,
            boundaries: Vec::new(),
        }
    }

    /// Use `page` as the page-size edge (page−1, page, page+1).
    ///
    /// ```
    /// let sizes = bento_testkit::SizeGen::new(1 << 16).with_page(65536);
    /// assert_eq!(sizes.max(), 1 << 16);
    /// ```
    #[must_use]
    pub fn with_page(mut self, page: usize) -> Self {
        self.page = page;
        self
    }

    /// Add boundaries (chunk, segment, size-class, threshold sizes): each is hit
    /// exactly, one below and one above.
    ///
    /// ```
    /// let sizes = bento_testkit::SizeGen::new(1024).with_boundaries(&[64, 256]);
    /// assert!((0..4096).any(|raw| sizes.pick(raw, 8) == 257));
    /// ```
    #[must_use]
    pub fn with_boundaries(mut self, boundaries: &[usize]) -> Self {
        self.boundaries.extend_from_slice(boundaries);
        self
    }

    /// The largest size this generator returns.
    #[must_use]
    pub fn max(&self) -> usize {
        self.max
    }

    /// The size `raw` selects for a block aligned to `align`: three times in eight an
    /// edge, otherwise log-uniform in `0..=max`.
    #[must_use]
    pub fn pick(&self, raw: u32, align: usize) -> usize {
        let selector = raw & 7;
        let rest = raw >> 3;
        let size = if selector < 3 {
            let fixed = [
                0,
                1,
                align.saturating_sub(1),
                align,
                align + 1,
                self.page - 1,
                self.page,
                self.page + 1,
            ];
            let n = fixed.len() + 3 * self.boundaries.len();
            let k = rest as usize % n;
            if k < fixed.len() {
                fixed[k]
            } else {
                let b = self.boundaries[(k - fixed.len()) / 3];
                match (k - fixed.len()) % 3 {
                    0 => b.saturating_sub(1),
                    1 => b,
                    _ => b.saturating_add(1),
                }
            }
        } else {
            // Pick a bit length, then a number of that length.
            let bits = usize::BITS - self.max.leading_zeros();
            let len = (rest % (bits + 1)) as usize;
            let noise = (rest as usize / (bits as usize + 1)).wrapping_mul(0x9E37_79B9);
            if len == 0 {
                0
            } else {
                let low = 1usize << (len - 1);
                low | (noise & (low - 1))
            }
        };
        size.min(self.max)
    }
}

/// Turns raw numbers into alignments: mostly 1 to 16, sometimes up to a maximum.
///
/// ```
/// use bento_testkit::AlignGen;
/// use bento_align::Alignment;
///
/// let aligns = AlignGen::new(Alignment::new(8192).unwrap());
/// assert!((0..=255).all(|raw| aligns.pick(raw).get() <= 8192));
/// assert!((0..=255).any(|raw| aligns.pick(raw).get() == 8192));
/// ```
#[derive(Clone, Copy, Debug)]
pub struct AlignGen {
    max: Alignment,
}

impl AlignGen {
    /// Alignments from 1 to `max`.
    #[must_use]
    pub fn new(max: Alignment) -> Self {
        Self { max }
    }

    /// The largest alignment this generator returns.
    #[must_use]
    pub fn max(&self) -> Alignment {
        self.max
    }

    /// The alignment `raw` selects.
    #[must_use]
    pub fn pick(&self, raw: u8) -> Alignment {
        let max_log = self.max.log2();
        let log = if raw < 160 {
            u32::from(raw) % 5
        } else {
            u32::from(raw) % (max_log + 1)
        };
        Alignment::new(1 << log.min(max_log)).expect("a power of two")
    }
}
