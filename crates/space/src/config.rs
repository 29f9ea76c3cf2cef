//! How a memory space is shaped: [`SpaceConfig`], and what is wrong with a bad one.

use bento_pages::{PageError, Retention};

use crate::chunk::{MAX_SEGMENT, SEGMENT_OVERHEAD};

/// The least a cache of the space keeps room for: `floor`, or half a segment while
/// the space holds at most two segments (`reserved` bytes in segments of
/// `granularity`). A small space that empties and fills again every frame then keeps
/// a frame's blocks and pages, and what it holds with nothing live stays below a
/// segment; larger spaces, where the footprint target applies, keep `floor`.
pub(crate) const fn cache_floor(reserved: usize, granularity: usize, floor: usize) -> usize {
    if reserved <= 2 * granularity && granularity / 2 > floor {
        granularity / 2
    } else {
        floor
    }
}

/// Under `Retention::Eager` the commit cache keeps at most this share of the space's
/// reserved bytes (as a shift: 1/32) and [`EAGER_MOST`], so that a small heap does not
/// keep megabytes of freed pages resident; under a decay this is the least it may
/// keep whatever the peak.
const COMMIT_SHARE_SHIFT: u32 = 5;
/// ... but always room for this many bytes.
const COMMIT_FLOOR: usize = 256 << 10;
/// The most `Retention::Eager` keeps.
const EAGER_MOST: usize = 4 << 20;

/// The commit cache's limit for a space of `reserved` bytes in segments of
/// `granularity` (see [`COMMIT_SHARE_SHIFT`]). A space of at most two segments may
/// keep half a segment, so that one which empties and fills again each frame (and
/// gives its segment back each time) finds its pages kept and makes no system call;
/// what it then holds with nothing live stays below one segment.
pub(crate) fn commit_cache_limit(reserved: usize, granularity: usize) -> usize {
    let floor = cache_floor(reserved, granularity, COMMIT_FLOOR);
    (reserved >> COMMIT_SHARE_SHIFT).min(EAGER_MOST).max(floor)
}

/// The shape of a [`MemorySpace`](crate::MemorySpace): how much it reserves up front,
/// the unit it commits in, the size of its segments and which requests get a segment
/// of their own.
///
/// Every field has a default (see [`SpaceConfig::DEFAULT`]); the `with_*` methods
/// change one field, and [`MemorySpace::new`](crate::MemorySpace::new) checks the
/// whole against its page source, returning [`SpaceError`] for a bad one.
///
/// ```
/// use bento_space::SpaceConfig;
///
/// let config = SpaceConfig::DEFAULT
///     .with_segment_granularity(256 << 10)
///     .with_segment_threshold(128 << 10);
/// assert_eq!(config.page_size, 4 << 10);
/// assert_eq!(config.segment_granularity, 256 << 10);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SpaceConfig {
    /// Bytes reserved (as ordinary segments) when the space is created, so that the
    /// first allocations do not wait on the page source. Rounded up to whole segments;
    /// 0 reserves nothing until the first allocation. Like every segment, these are
    /// released when a free leaves them empty.
    pub initial_capacity: usize,
    /// The unit the space commits in: a power of two; a space over a source with
    /// larger pages commits in the source's page instead. Smaller pages give back
    /// more of the free space (a free chunk keeps its partial pages at both ends
    /// committed) for more page calls, which the commit cache mostly absorbs.
    pub page_size: usize,
    /// The size (and alignment) of an ordinary segment: a power of two, at least four
    /// pages. Requests that do not fit one get a dedicated segment.
    pub segment_granularity: usize,
    /// Requests of at least this many bytes get a segment of their own, released when
    /// they are freed. At most what fits an ordinary segment.
    pub segment_threshold: usize,
    /// Bytes of freed pages a [`CommitCache`](bento_pages::CommitCache) between the
    /// space and its source may keep committed for reuse, so that freeing and reusing
    /// memory makes no page fault and no call to the source: the hard cap of the
    /// [`retention`](Self::retention) policy; 0 turns the cache off.
    /// [`MemorySpace::trim`](crate::MemorySpace::trim) gives them back. Counted in
    /// source pages; the cache's table (16 to 32 bytes per page, touched as used on a source
    /// whose fresh pages read as zero) comes from the source. Released segments are
    /// kept whole as spares too (up to 64, or 4 under `Retention::Eager`), so a space
    /// that empties and fills again makes no system call.
    pub commit_cache: usize,
    /// How long and how much of the freed memory the commit cache keeps:
    /// [`Retention::Decay`] (the default) keeps it (with what is in use) within
    /// 120 % of the peak in use and gives back what stays unused for 600 frames
    /// ([`MemorySpace::tick`]) or, before the program ticks, 1 s;
    /// [`Retention::Eager`] keeps at most 1/32 of the reserved bytes (at least
    /// 256 KiB, or half a segment while the space holds at most two) and at most
    /// 4 MiB, with no decay: no unoccupied page stays committed beyond that small
    /// cache.
    ///
    /// [`MemorySpace::tick`]: crate::MemorySpace::tick
    pub retention: Retention,
    /// Bytes of freed blocks (chunks below 8 KiB) the space keeps whole, each for the
    /// next request of its size class, instead of merging them with their
    /// neighbours at once: the block cache, which makes a free and the allocation
    /// after it touch one block rather than its neighbours and their lists. Counted
    /// by size class (a cached block may be up to 1/16 larger), and at most 1/128 of
    /// the bytes in use (at least 64 KiB, or half a segment while the space holds at
    /// most two segments) within this; 0 turns the cache off. A free that would
    /// leave a segment with only cached blocks takes them out of the cache, so
    /// segments still go back to the source the moment they empty;
    /// [`MemorySpace::trim`](crate::MemorySpace::trim) empties the cache.
    pub block_cache: usize,
}

impl SpaceConfig {
    /// 4 KiB pages (or the source's, when larger), 1 MiB segments, a threshold of
    /// 512 KiB, nothing reserved up front, a commit cache of up to 64 MiB under
    /// [`Retention::DEFAULT`] and a block cache of up to 1 MiB. The block cache
    /// shrinks to a share of the heap (1/128 of the bytes in use, at least 64 KiB, or
    /// half a segment in a space of at most two segments), so that a heap's resident
    /// footprint stays near its live bytes.
    ///
    /// The threshold sits at half a segment so that a large block never leaves most
    /// of an ordinary segment unusable behind it.
    pub const DEFAULT: Self = Self {
        initial_capacity: 0,
        page_size: 4 << 10,
        segment_granularity: 1 << 20,
        segment_threshold: 512 << 10,
        commit_cache: 64 << 20,
        block_cache: 1 << 20,
        retention: Retention::DEFAULT,
    };

    /// This configuration with `retention` as the commit cache's policy.
    ///
    /// ```
    /// use bento_pages::Retention;
    /// use bento_space::SpaceConfig;
    ///
    /// assert!(SpaceConfig::DEFAULT.with_retention(Retention::Eager).retention.is_eager());
    /// ```
    #[must_use]
    pub const fn with_retention(mut self, retention: Retention) -> Self {
        self.retention = retention;
        self
    }

    /// This configuration with a block cache of `bytes` (0: none).
    ///
    /// ```
    /// use bento_space::SpaceConfig;
    ///
    /// assert_eq!(SpaceConfig::DEFAULT.with_block_cache(0).block_cache, 0);
    /// ```
    #[must_use]
    pub const fn with_block_cache(mut self, bytes: usize) -> Self {
        self.block_cache = bytes;
        self
    }

    /// This configuration with a commit cache of `bytes` (0: none).
    ///
    /// ```
    /// use bento_space::SpaceConfig;
    ///
    /// assert_eq!(SpaceConfig::DEFAULT.with_commit_cache(0).commit_cache, 0);
    /// ```
    #[must_use]
    pub const fn with_commit_cache(mut self, bytes: usize) -> Self {
        self.commit_cache = bytes;
        self
    }

    /// This configuration with `initial_capacity` bytes reserved up front.
    ///
    /// ```
    /// use bento_space::SpaceConfig;
    ///
    /// assert_eq!(SpaceConfig::DEFAULT.with_initial_capacity(4 << 20).initial_capacity, 4 << 20);
    /// ```
    #[must_use]
    pub const fn with_initial_capacity(mut self, bytes: usize) -> Self {
        self.initial_capacity = bytes;
        self
    }

    /// This configuration with `page_size` as the commit unit.
    ///
    /// ```
    /// use bento_space::SpaceConfig;
    ///
    /// assert_eq!(SpaceConfig::DEFAULT.with_page_size(4096).page_size, 4096);
    /// ```
    #[must_use]
    pub const fn with_page_size(mut self, bytes: usize) -> Self {
        self.page_size = bytes;
        self
    }

    /// This configuration with ordinary segments of `bytes`.
    ///
    /// ```
    /// use bento_space::SpaceConfig;
    ///
    /// let c = SpaceConfig::DEFAULT.with_segment_granularity(4 << 20);
    /// assert_eq!(c.segment_granularity, 4 << 20);
    /// ```
    #[must_use]
    pub const fn with_segment_granularity(mut self, bytes: usize) -> Self {
        self.segment_granularity = bytes;
        self
    }

    /// This configuration with dedicated segments from `bytes` up.
    ///
    /// ```
    /// use bento_space::SpaceConfig;
    ///
    /// assert_eq!(SpaceConfig::DEFAULT.with_segment_threshold(1000).segment_threshold, 1000);
    /// ```
    #[must_use]
    pub const fn with_segment_threshold(mut self, bytes: usize) -> Self {
        self.segment_threshold = bytes;
        self
    }

    /// This configuration as a space over a source with pages of `source_page` bytes
    /// uses it: a power-of-two page size below the source's is raised to it.
    pub(crate) const fn for_source(self, source_page: usize) -> Self {
        if self.page_size.is_power_of_two() && self.page_size < source_page {
            self.with_page_size(source_page)
        } else {
            self
        }
    }

    /// Checks this configuration against a page source whose page is `source_page`
    /// bytes (a page size below the source's is an error here; a space raises it).
    ///
    /// ```
    /// use bento_space::{SpaceConfig, SpaceError};
    ///
    /// assert!(SpaceConfig::DEFAULT.check(4096).is_ok());
    /// let bad = SpaceConfig::DEFAULT.with_page_size(3000);
    /// assert!(matches!(bad.check(4096), Err(SpaceError::PageSize { .. })));
    /// ```
    pub fn check(&self, source_page: usize) -> Result<(), SpaceError> {
        let page = self.page_size;
        if !page.is_power_of_two() || page < source_page {
            return Err(SpaceError::PageSize { page, source_page });
        }
        let granularity = self.segment_granularity;
        // At least four pages, and room for a header, a chunk and the fence besides.
        let least = page.saturating_mul(4).max(4 * SEGMENT_OVERHEAD);
        if !granularity.is_power_of_two() || granularity < least || granularity > MAX_SEGMENT {
            return Err(SpaceError::SegmentGranularity { granularity, page });
        }
        let threshold = self.segment_threshold;
        if threshold == 0 || threshold > granularity.saturating_sub(SEGMENT_OVERHEAD + 8) {
            return Err(SpaceError::SegmentThreshold {
                threshold,
                granularity,
            });
        }
        if self.initial_capacity > MAX_SEGMENT {
            return Err(SpaceError::InitialCapacity(self.initial_capacity));
        }
        Ok(())
    }
}

impl Default for SpaceConfig {
    fn default() -> Self {
        Self::DEFAULT
    }
}

/// Why a memory space could not be created.
///
/// ```
/// use bento_space::{SpaceConfig, SpaceError};
///
/// let err = SpaceConfig::DEFAULT.with_segment_threshold(0).check(4096).unwrap_err();
/// assert!(err.to_string().contains("segment threshold"));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SpaceError {
    /// The page size is not a power of two at least the source's page.
    #[error("page size {page} is not a power of two of at least the source's page ({source_page})")]
    PageSize {
        /// The page size configured.
        page: usize,
        /// The page source's page size.
        source_page: usize,
    },
    /// The segment granularity is not a power of two of at least four pages (or is
    /// beyond what the index can hold).
    #[error(
        "segment granularity {granularity} is not a power of two between four pages ({page} each) and 2^38 (2^30 on 32-bit targets)"
    )]
    SegmentGranularity {
        /// The granularity configured.
        granularity: usize,
        /// The page size configured.
        page: usize,
    },
    /// The threshold is zero or larger than an ordinary segment can hold.
    #[error("segment threshold {threshold} is 0 or does not fit a segment of {granularity} bytes")]
    SegmentThreshold {
        /// The threshold configured.
        threshold: usize,
        /// The granularity configured.
        granularity: usize,
    },
    /// The initial capacity is beyond what can be reserved.
    #[error("initial capacity {0} is too large")]
    InitialCapacity(usize),
    /// The memory given to `with_base` cannot hold a segment (too small or too large).
    #[error("the base memory of {len} bytes cannot hold a segment")]
    BaseSize {
        /// The usable length, after aligning the start.
        len: usize,
    },
    /// The page source refused the initial reservation or commit.
    #[error("the page source refused the initial capacity")]
    Pages(#[from] PageError),
}
