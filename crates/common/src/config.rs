//! How a common allocator is shaped: [`CommonConfig`], its [`SizeClasses`],
//! [`LargeConfig`] and [`Routing`], and what is wrong with a bad one.

#[cfg(all(feature = "os", any(unix, windows)))]
use bento_pages::SystemPages;
use bento_pages::{GuardConfig, MisuseHook, PageError, ProfileConfig, Retention};
use bento_space::{SpaceConfig, SpaceError};

/// The most small size classes a table holds.
pub const MAX_CLASSES: usize = 32;

/// The largest size a small class may serve.
pub const MAX_SMALL: usize = 1024;

/// The most regions a [`Routing::Contention`] allocator spreads over.
pub const MAX_CONTENTION_REGIONS: usize = 32;

/// The most alignment a class region serves (a request of a multiple of 16 bytes
/// gets a class of such blocks). A request aligned beyond it goes to the large
/// region.
pub const SMALL_ALIGN: usize = 16;

/// The size of the granule the region map records an owner for: every segment of
/// every region covers whole granules.
pub(crate) const GRANULE: usize = 64 << 10;

/// The most runs a span holds (its `idle` bits).
pub(crate) const MAX_SPAN_RUNS: usize = 64;

/// The small size classes: ascending multiples of 8, each served by a region of its
/// own, with an O(1) table from a request's size to its class. A class's blocks lie
/// one after another in runs, so a class that is not a multiple of 16 (24, 40, 56)
/// has blocks aligned to 8 only: a request aligned to 16 goes by its size rounded up
/// to 16, to the first class that is a multiple of 16 and holds it.
///
/// ```
/// use bento_common::SizeClasses;
///
/// let classes = SizeClasses::DEFAULT;
/// assert_eq!(classes.len(), 20);
/// assert_eq!(classes.class_of(1), Some(0));
/// assert_eq!(classes.size(classes.class_of(65).unwrap()), 80);
/// assert_eq!(classes.class_of(257), None);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SizeClasses {
    sizes: [u16; MAX_CLASSES],
    len: u8,
    // The largest size, at most `MAX_SMALL`.
    largest: u16,
    // `lookup[(size + 7) / 8]` is the class of `size`, for sizes up to the largest.
    lookup: [u8; MAX_SMALL / 8 + 1],
}

impl SizeClasses {
    /// Every 8 bytes up to 64, and every 16 bytes from 64 to 256: 20 classes.
    pub const DEFAULT: Self = Self::new(&[
        8, 16, 24, 32, 40, 48, 56, 64, 80, 96, 112, 128, 144, 160, 176, 192, 208, 224, 240, 256,
    ]);

    /// A table of the given sizes.
    ///
    /// # Panics
    ///
    /// When `sizes` is empty, longer than [`MAX_CLASSES`], not strictly ascending, or
    /// holds a size that is not a multiple of 8 or beyond [`MAX_SMALL`]; in a `const`
    /// context that is a compile-time error.
    ///
    /// ```
    /// use bento_common::SizeClasses;
    ///
    /// let classes = SizeClasses::new(&[16, 32, 64, 128]);
    /// assert_eq!(classes.class_of(33), Some(2));
    /// assert_eq!(classes.largest(), 128);
    /// ```
    #[must_use]
    pub const fn new(sizes: &[u16]) -> Self {
        assert!(
            !sizes.is_empty() && sizes.len() <= MAX_CLASSES,
            "SizeClasses: between 1 and 32 sizes"
        );
        let mut table = [0u16; MAX_CLASSES];
        let mut lookup = [u8::MAX; MAX_SMALL / 8 + 1];
        let mut i = 0;
        let mut slot = 0;
        while i < sizes.len() {
            let size = sizes[i] as usize;
            assert!(
                size > 0 && size.is_multiple_of(8) && size <= MAX_SMALL,
                "SizeClasses: each size a multiple of 8 between 8 and 1024"
            );
            assert!(
                i == 0 || sizes[i - 1] < sizes[i],
                "SizeClasses: sizes strictly ascending"
            );
            table[i] = sizes[i];
            while slot <= size / 8 {
                lookup[slot] = i as u8;
                slot += 1;
            }
            i += 1;
        }
        // A size that is a multiple of 16 (what a request aligned to 16 is routed by)
        // goes to a class whose size is one too, so that its blocks are aligned to 16;
        // none: the large region serves it.
        slot = 0;
        while slot < lookup.len() {
            let mut class = lookup[slot] as usize;
            while slot % 2 == 0 && class < sizes.len() && !sizes[class].is_multiple_of(16) {
                class += 1;
            }
            if class < sizes.len() {
                lookup[slot] = class as u8;
            } else {
                lookup[slot] = u8::MAX;
            }
            slot += 2;
        }
        Self {
            sizes: table,
            len: sizes.len() as u8,
            largest: sizes[sizes.len() - 1],
            lookup,
        }
    }

    /// How many classes there are.
    #[must_use]
    pub const fn len(&self) -> usize {
        self.len as usize
    }

    /// Whether the table is empty (never: [`new`](Self::new) refuses one).
    #[must_use]
    pub const fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The block size of class `class`.
    ///
    /// # Panics
    ///
    /// When `class >= self.len()`.
    #[must_use]
    pub const fn size(&self, class: usize) -> usize {
        assert!(
            class < self.len as usize,
            "SizeClasses::size: no such class"
        );
        self.sizes[class] as usize
    }

    /// The largest class's size: requests above it go to the large region.
    #[must_use]
    pub const fn largest(&self) -> usize {
        self.largest as usize
    }

    /// The class serving `size` bytes (the smallest that holds them), or `None` above
    /// the largest class.
    #[inline]
    #[must_use]
    pub const fn class_of(&self, size: usize) -> Option<usize> {
        if size > self.largest as usize {
            return None;
        }
        // `size <= largest <= MAX_SMALL`, so the index is inside the table.
        let slot = size.div_ceil(8);
        if slot < self.lookup.len() && self.lookup[slot] != u8::MAX {
            Some(self.lookup[slot] as usize)
        } else {
            None
        }
    }
}

impl Default for SizeClasses {
    fn default() -> Self {
        Self::DEFAULT
    }
}

/// How requests find their region.
///
/// ```
/// use bento_common::{CommonConfig, Routing};
///
/// let config = CommonConfig::DEFAULT.with_routing(Routing::Contention { regions: 4 });
/// assert_eq!(config.routing, Routing::Contention { regions: 4 });
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Routing {
    /// The class from the size: each small class has a region, larger requests (and
    /// requests aligned beyond [`SMALL_ALIGN`]) go to the large region.
    #[default]
    BySize,
    /// `regions` general regions (1 to [`MAX_CONTENTION_REGIONS`]), each serving any
    /// request: a thread tries to lock one and, rather than wait while it is in use,
    /// moves on to the next; it blocks only after a full cycle of failed tries. A free
    /// finds its region through the region map.
    Contention {
        /// How many regions.
        regions: usize,
    },
}

/// The shape of the large region's memory space (and of each region's under
/// [`Routing::Contention`]): the three knobs of a [`SpaceConfig`] that the allocator
/// leaves to its user. The others are the allocator's own: nothing is reserved up
/// front, the commit cache is the one the regions share
/// ([`CommonConfig::commit_cache`], under [`CommonConfig::retention`]), and the
/// block cache is [`CommonConfig::block_cache`].
///
/// ```
/// use bento_common::{CommonConfig, LargeConfig};
///
/// let large = LargeConfig::DEFAULT.with_segment_granularity(8 << 20);
/// let config = CommonConfig::DEFAULT.with_large(large);
/// assert_eq!(config.large.segment_threshold, 16 << 20);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LargeConfig {
    /// The unit the region commits in (see [`SpaceConfig::page_size`]).
    pub page_size: usize,
    /// The size of an ordinary segment (see [`SpaceConfig::segment_granularity`]),
    /// at least 64 KiB.
    pub segment_granularity: usize,
    /// Requests of at least this many bytes get a segment of their own (see
    /// [`SpaceConfig::segment_threshold`]).
    pub segment_threshold: usize,
}

impl LargeConfig {
    /// 64 KiB pages, 32 MiB segments, a segment of its own for requests of 16 MiB
    /// and more.
    pub const DEFAULT: Self = Self {
        page_size: 64 << 10,
        segment_granularity: 32 << 20,
        segment_threshold: 16 << 20,
    };

    /// This shape committing in pages of `bytes`.
    #[must_use]
    pub const fn with_page_size(mut self, bytes: usize) -> Self {
        self.page_size = bytes;
        self
    }

    /// This shape with ordinary segments of `bytes`.
    #[must_use]
    pub const fn with_segment_granularity(mut self, bytes: usize) -> Self {
        self.segment_granularity = bytes;
        self
    }

    /// This shape giving requests of `bytes` and more a segment of their own.
    #[must_use]
    pub const fn with_segment_threshold(mut self, bytes: usize) -> Self {
        self.segment_threshold = bytes;
        self
    }
}

impl Default for LargeConfig {
    fn default() -> Self {
        Self::DEFAULT
    }
}

/// The shape of a [`CommonAllocator`](crate::CommonAllocator): its page source, size
/// classes, region shapes, routing and the bounds of its caches.
///
/// ```
/// use bento_common::{CommonConfig, SizeClasses};
///
/// let config = CommonConfig::DEFAULT
///     .with_classes(SizeClasses::new(&[16, 32, 64]))
///     .with_small_segment(128 << 10);
/// assert_eq!(config.small_segment, 128 << 10);
/// assert_eq!(config.large.segment_granularity, 32 << 20);
/// ```
#[derive(Clone, Copy, Debug)]
pub struct CommonConfig<P> {
    /// Where every region's memory comes from.
    pub pages: P,
    /// The small classes (under [`Routing::BySize`]).
    pub classes: SizeClasses,
    /// The largest span of the class regions (small classes and medium bins): the
    /// reservations their runs come from (64 KiB of blocks of one size each,
    /// committed when a run is taken and decommitted when it empties), a power of two
    /// from 64 KiB to 4 MiB. A region's first span holds one run and each next one
    /// twice as many as it has spans, up to this; a span whose runs have all emptied
    /// goes back at the next `trim` or decay step.
    pub small_segment: usize,
    /// The shape of the large region (and of each region under
    /// [`Routing::Contention`]).
    pub large: LargeConfig,
    /// How requests find their region.
    pub routing: Routing,
    /// Bytes of freed pages the one commit cache of the whole allocator may keep
    /// committed for reuse (with released segments kept whole): the hard cap of the
    /// [`retention`](Self::retention) policy. Under `Retention::Eager` it keeps at
    /// most 1/32 of the bytes reserved and 8 MiB, with a floor of four small segments
    /// or `commit_floor`, whichever is larger.
    pub commit_cache: usize,
    /// How long and how much of the freed memory the commit cache keeps:
    /// [`Retention::Decay`] (the default) keeps it (with what is in use) within
    /// 120 % of the peak in use and gives back what stays unused for 600 frames
    /// ([`CommonAllocator::tick`](crate::CommonAllocator::tick)) or, before the
    /// program ticks, 1 s; [`Retention::Eager`] keeps only the small cache above.
    pub retention: Retention,
    /// The least the commit cache may park however little is reserved (0: four small
    /// segments). A program that frees and reallocates blocks of megabytes in a loop
    /// keeps their pages (up to this much) instead of faulting them in again each
    /// time; bento-malloc sets it to the cache's whole capacity.
    pub commit_floor: usize,
    /// Bytes of freed blocks the large region's space keeps for reuse (its block
    /// cache). Class regions keep none: a freed block goes back to its run.
    pub block_cache: usize,
    /// What a misuse found in a debug build (a foreign pointer, a double free, a
    /// wrong layout) calls: [`abort_on_misuse`](crate::abort_on_misuse) by default,
    /// which never allocates or unwinds.
    pub misuse: MisuseHook,
    /// Whether threads keep a few freed blocks of each size up to 4 KiB for
    /// themselves (the per-thread front end, under `Routing::BySize` with `std`):
    /// most allocations and frees then take no lock. An allocator with the front end
    /// should live as long as the threads that use it (a `static`): one dropped while
    /// another thread's cache still holds its blocks leaks its memory rather than free
    /// it under that thread.
    pub thread_cache: bool,
    /// Sampled guard pages (`None`, the default: off): one allocation in
    /// [`GuardConfig::every`] of up to two pages goes to a slot of its own between
    /// inaccessible pages, so that an overrun or a use after free faults at once and
    /// is reported with the block's allocation and free sites. Unix only (elsewhere
    /// it is ignored); the pool is never given back, and its blocks are counted in
    /// [`CommonAllocator::guard_stats`](crate::CommonAllocator::guard_stats), not in
    /// the regions' stats.
    pub guard: Option<GuardConfig>,
    /// A sampled allocation profile (`None`, the default: off): each thread counts
    /// the bytes it allocates down from an exponential draw (one compare on the
    /// hot path), and the allocation that crosses zero is recorded with its stack
    /// in a `Profiler` of this shape
    /// ([`CommonAllocator::profiler`](crate::CommonAllocator::profiler)) until its
    /// free. Needs the feature `profile` (`std` brings it) on Unix or Windows;
    /// elsewhere it is ignored.
    pub profile: Option<ProfileConfig>,
}

#[cfg(all(feature = "os", any(unix, windows)))]
impl CommonConfig<SystemPages> {
    /// The 20 classes of [`SizeClasses::DEFAULT`] and 32 medium bins (257 B to 4 KiB)
    /// in runs of 1 MiB spans; a large region of 32 MiB segments committed in 64 KiB
    /// pages, with a segment of its own for requests of 16 MiB and more;
    /// [`Routing::BySize`]; a commit cache of up to 64 MiB under the default
    /// retention, and 256 KiB of cached blocks in the large region; memory from
    /// [`SystemPages`].
    pub const DEFAULT: Self = CommonConfig::new(SystemPages::new());
}

impl<P: Copy> CommonConfig<P> {
    /// This configuration over another page source.
    ///
    /// ```
    /// use bento_common::CommonConfig;
    /// use bento_pages::HeapPages;
    ///
    /// let config = CommonConfig::DEFAULT.with_pages(HeapPages::new());
    /// assert_eq!(config.small_segment, 1 << 20);
    /// ```
    #[must_use]
    pub const fn with_pages<Q>(self, pages: Q) -> CommonConfig<Q> {
        let Self {
            pages: _,
            classes,
            small_segment,
            large,
            routing,
            commit_cache,
            retention,
            commit_floor,
            block_cache,
            misuse,
            thread_cache,
            guard,
            profile,
        } = self;
        CommonConfig {
            pages,
            classes,
            small_segment,
            large,
            routing,
            commit_cache,
            retention,
            commit_floor,
            block_cache,
            misuse,
            thread_cache,
            guard,
            profile,
        }
    }
}

impl<P> CommonConfig<P> {
    /// The default shape (see [`CommonConfig::DEFAULT`]) over `pages`.
    ///
    /// ```
    /// use bento_common::CommonConfig;
    /// use bento_pages::HeapPages;
    ///
    /// let config = CommonConfig::new(HeapPages::new());
    /// assert_eq!(config.classes.len(), 20);
    /// ```
    pub const fn new(pages: P) -> Self {
        Self {
            pages,
            classes: SizeClasses::DEFAULT,
            small_segment: 1 << 20,
            large: LargeConfig::DEFAULT,
            routing: Routing::BySize,
            commit_cache: 64 << 20,
            retention: Retention::DEFAULT,
            commit_floor: 0,
            block_cache: 256 << 10,
            misuse: crate::abort_on_misuse,
            thread_cache: true,
            guard: None,
            profile: None,
        }
    }
    /// This configuration with other size classes.
    #[must_use]
    pub const fn with_classes(mut self, classes: SizeClasses) -> Self {
        self.classes = classes;
        self
    }

    /// This configuration with small segments of `bytes`.
    #[must_use]
    pub const fn with_small_segment(mut self, bytes: usize) -> Self {
        self.small_segment = bytes;
        self
    }

    /// This configuration with another large-region shape.
    #[must_use]
    pub const fn with_large(mut self, large: LargeConfig) -> Self {
        self.large = large;
        self
    }

    /// This configuration with another routing.
    #[must_use]
    pub const fn with_routing(mut self, routing: Routing) -> Self {
        self.routing = routing;
        self
    }

    /// This configuration with the per-thread front end on or off.
    #[must_use]
    pub const fn with_thread_cache(mut self, on: bool) -> Self {
        self.thread_cache = on;
        self
    }

    /// This configuration with sampled guard pages of `guard`'s shape (see
    /// [`guard`](Self::guard)).
    ///
    /// ```
    /// use bento_common::CommonConfig;
    /// use bento_pages::GuardConfig;
    ///
    /// let config = CommonConfig::DEFAULT.with_guard(GuardConfig::DEFAULT.every(1000));
    /// assert_eq!(config.guard.unwrap().every, 1000);
    /// ```
    #[must_use]
    pub const fn with_guard(mut self, guard: GuardConfig) -> Self {
        self.guard = Some(guard);
        self
    }

    /// This configuration with a sampled allocation profile of `profile`'s shape (see
    /// [`profile`](Self::profile)).
    #[must_use]
    pub const fn with_profile(mut self, profile: ProfileConfig) -> Self {
        self.profile = Some(profile);
        self
    }

    /// This configuration with another misuse hook.
    #[must_use]
    pub const fn with_misuse_hook(mut self, hook: MisuseHook) -> Self {
        self.misuse = hook;
        self
    }

    /// This configuration with a commit cache of `bytes` (0: none).
    #[must_use]
    pub const fn with_commit_cache(mut self, bytes: usize) -> Self {
        self.commit_cache = bytes;
        self
    }

    /// This configuration with `retention` as the commit cache's policy.
    ///
    /// ```
    /// use bento_common::CommonConfig;
    /// use bento_pages::Retention;
    ///
    /// assert!(CommonConfig::DEFAULT.with_retention(Retention::Eager).retention.is_eager());
    /// ```
    #[must_use]
    pub const fn with_retention(mut self, retention: Retention) -> Self {
        self.retention = retention;
        self
    }

    /// This configuration with a commit cache that may park `bytes` however little is
    /// reserved (at most its capacity, [`commit_cache`](Self::commit_cache)).
    ///
    /// ```
    /// use bento_common::CommonConfig;
    ///
    /// let config = CommonConfig::DEFAULT.with_commit_floor(8 << 20);
    /// assert_eq!(config.commit_floor, 8 << 20);
    /// ```
    #[must_use]
    pub const fn with_commit_floor(mut self, bytes: usize) -> Self {
        self.commit_floor = bytes;
        self
    }

    /// This configuration with `bytes` of freed blocks kept by the large region's
    /// space (0: every free goes back to it at once).
    #[must_use]
    pub const fn with_block_cache(mut self, bytes: usize) -> Self {
        self.block_cache = bytes;
        self
    }

    /// The space configuration of the large region (and of the contention regions).
    pub(crate) const fn large_space(&self) -> SpaceConfig {
        SpaceConfig::DEFAULT
            .with_page_size(self.large.page_size)
            .with_segment_granularity(self.large.segment_granularity)
            .with_segment_threshold(self.large.segment_threshold)
            .with_initial_capacity(0)
            .with_commit_cache(0)
            .with_block_cache(self.block_cache)
    }

    /// Checks the parts a page source does not decide.
    pub(crate) fn check_shape(&self) -> Result<(), CommonError> {
        let small = self.small_segment;
        if !small.is_power_of_two() || !(GRANULE..=MAX_SPAN_RUNS * GRANULE).contains(&small) {
            return Err(CommonError::SmallSegment(small));
        }
        if let Routing::Contention { regions } = self.routing
            && !(1..=MAX_CONTENTION_REGIONS).contains(&regions)
        {
            return Err(CommonError::Regions(regions));
        }
        if self.large.segment_granularity < GRANULE {
            return Err(CommonError::Space(SpaceError::SegmentGranularity {
                granularity: self.large.segment_granularity,
                page: self.large.page_size,
            }));
        }
        Ok(())
    }
}

/// Why a common allocator could not start; [`CommonAllocator::init`](crate::CommonAllocator::init)
/// returns it, and every allocation fails after it.
///
/// ```
/// use bento_common::{CommonAllocator, CommonConfig, CommonError};
///
/// let common = CommonAllocator::with_config(CommonConfig::DEFAULT.with_small_segment(1000));
/// assert_eq!(common.init(), Err(CommonError::SmallSegment(1000)));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CommonError {
    /// The small segment size is not a power of two from 64 KiB to 4 MiB.
    #[error("small segment size {0} is not a power of two from 64 KiB to 4 MiB")]
    SmallSegment(usize),
    /// The contention region count is outside 1 to 32.
    #[error("{0} contention regions: between 1 and 32")]
    Regions(usize),
    /// A region's space configuration is invalid for the page source.
    #[error("a region's space configuration")]
    Space(#[from] SpaceError),
    /// The page source refused the allocator's own tables.
    #[error("the page source refused the allocator's tables")]
    Pages(#[from] PageError),
}
