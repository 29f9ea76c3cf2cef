//! The stats of a common allocator: [`CommonStats`] per region and in total, the
//! [`CommonReport`] table, the [`CommonLeaks`] list, and [`CommonAllocator::validate`]'s walk.
//!
//! [`CommonAllocator::validate`]: crate::CommonAllocator::validate

use core::fmt;

use bento_pages::{ByteSize, CacheStats, PageSource, PageStats};
use bento_space::SpaceCorruption;

use crate::front::bins::Bin;
use crate::inner::{Inner, MAX_REGIONS, Owner};
use crate::layer::map::leaf_reservation;
use crate::region::run::Runs;
use crate::region::{Class, General};
use crate::sync::Ordering;

/// One region's stats.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RegionStats {
    /// The block size of a class region (a small class or a medium bin); 0 for the
    /// large region (or a contention region), which serves any size.
    pub block: usize,
    /// Live blocks (not those in threads' caches).
    pub live_blocks: usize,
    /// Bytes in live blocks: the class size each in a class region, the usable size
    /// in a general one.
    pub live_bytes: usize,
    /// Freed blocks kept for reuse: those the threads' caches hold of a class region,
    /// a general region's block cache.
    pub cached_blocks: usize,
    /// Bytes the region's segments have committed.
    pub committed: usize,
    /// The most `committed` has been.
    pub max_committed: usize,
    /// Bytes of address space the region's segments hold.
    pub reserved: usize,
    /// The most `reserved` has been.
    pub max_reserved: usize,
    /// Live segments: a class region's spans of runs.
    pub segments: usize,
    /// A class region's runs in use (64 KiB of blocks of its size each).
    pub runs: usize,
    /// Times a thread found the region's lock taken and waited.
    pub contended: usize,
}

/// A common allocator's stats: each region's, and the totals.
///
/// ```
/// use core::alloc::Layout;
/// use bento_common::CommonAllocator;
///
/// let common = CommonAllocator::new();
/// let p = common.alloc(Layout::new::<[u8; 50]>()).unwrap();
/// let s = common.stats();
/// assert_eq!((s.live_blocks, s.live_bytes), (1, 56));
/// assert_eq!(s.regions()[6].live_blocks, 1); // the 56-byte class
/// assert!(s.resident >= s.committed);
/// // SAFETY: live.
/// unsafe { common.free(p) };
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CommonStats {
    regions: [RegionStats; MAX_REGIONS],
    count: usize,
    /// Live blocks in all regions.
    pub live_blocks: usize,
    /// Bytes in live blocks, in all regions.
    pub live_bytes: usize,
    /// Freed blocks kept for reuse, in all regions.
    pub cached_blocks: usize,
    /// Bytes the regions' segments have committed.
    pub committed: usize,
    /// Bytes of address space the regions' segments hold.
    pub reserved: usize,
    /// Memory the allocator holds in its page source: the regions' committed bytes,
    /// the commit cache's parked pages and spare segments, and the allocator's own
    /// tables (its block, the region map's leaves, the cache's slot table).
    pub resident: usize,
    /// The most `resident` has been.
    pub max_resident: usize,
    /// The allocator's own tables, in `resident`: its block (regions and the top of
    /// the region map), the map's leaves and the commit cache's slot table. An empty,
    /// trimmed allocator holds this much and no more.
    pub tables: usize,
    /// Lock waits, in all regions.
    pub contended: usize,
    /// What reached the page source: all the allocator's reserves, commits,
    /// decommits and releases.
    pub source: PageStats,
    /// The shared commit cache's stats.
    pub cache: CacheStats,
}

impl Default for CommonStats {
    fn default() -> Self {
        Self {
            regions: [RegionStats::default(); MAX_REGIONS],
            count: 0,
            live_blocks: 0,
            live_bytes: 0,
            cached_blocks: 0,
            committed: 0,
            reserved: 0,
            resident: 0,
            max_resident: 0,
            tables: 0,
            contended: 0,
            source: PageStats::default(),
            cache: CacheStats::default(),
        }
    }
}

impl CommonStats {
    /// Each region's stats: the small classes in order, then the large region
    /// (under `Routing::BySize`), or the contention regions.
    #[must_use]
    pub fn regions(&self) -> &[RegionStats] {
        &self.regions[..self.count]
    }

    fn push(&mut self, region: RegionStats) {
        self.regions[self.count] = region;
        self.count += 1;
        self.live_blocks += region.live_blocks;
        self.live_bytes += region.live_bytes;
        self.cached_blocks += region.cached_blocks;
        self.committed += region.committed;
        self.reserved += region.reserved;
        self.contended += region.contended;
    }
}

/// One row of [`CommonReport`]'s table: `label`, then `r`'s stats.
fn row(f: &mut fmt::Formatter<'_>, label: &dyn fmt::Display, r: &RegionStats) -> fmt::Result {
    writeln!(
        f,
        "{label:>7} {:>9} {:>10} {:>8} {:>10} {:>10} {:>5} {:>5} {:>7}",
        r.live_blocks,
        ByteSize::of(r.live_bytes),
        r.cached_blocks,
        ByteSize::of(r.committed),
        ByteSize::of(r.reserved),
        r.segments,
        r.runs,
        r.contended
    )
}

/// [`CommonStats`] as a table: one row per region that holds memory, then the
/// totals. Its `Display` writes with `core::fmt` only.
#[derive(Clone, Copy, Debug)]
pub struct CommonReport(pub CommonStats);

impl fmt::Display for CommonReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = &self.0;
        writeln!(
            f,
            "{:>7} {:>9} {:>10} {:>8} {:>10} {:>10} {:>5} {:>5} {:>7}",
            "region", "live", "bytes", "cached", "committed", "reserved", "segs", "runs", "waits"
        )?;
        for r in s
            .regions()
            .iter()
            .filter(|r| r.reserved > 0 || r.live_blocks > 0)
        {
            if r.block == 0 {
                row(f, &"large", r)?;
            } else {
                row(f, &r.block, r)?;
            }
        }
        let total = RegionStats {
            live_blocks: s.live_blocks,
            live_bytes: s.live_bytes,
            cached_blocks: s.cached_blocks,
            committed: s.committed,
            reserved: s.reserved,
            segments: s.regions().iter().map(|r| r.segments).sum(),
            runs: s.regions().iter().map(|r| r.runs).sum(),
            contended: s.contended,
            ..RegionStats::default()
        };
        row(f, &"total", &total)?;
        write!(
            f,
            "resident {} (peak {}): {} tables, {} kept for reuse ({} given back, {} \
             pages reused); {} source calls",
            ByteSize::of(s.resident),
            ByteSize::of(s.max_resident),
            ByteSize::of(s.tables),
            ByteSize::of(s.cache.parked),
            ByteSize::of(s.cache.purged),
            s.cache.hits,
            s.source.reserves + s.source.releases + s.source.commits + s.source.decommits
        )
    }
}

/// The live blocks per region of an allocator that should be empty: its leak
/// report (see [`CommonAllocator::leaks`](crate::CommonAllocator::leaks)).
#[derive(Clone, Copy, Debug)]
pub struct CommonLeaks(pub CommonStats);

impl fmt::Display for CommonLeaks {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = &self.0;
        let plural = if s.live_blocks == 1 { "" } else { "s" };
        write!(
            f,
            "{} live block{plural} ({} bytes):",
            s.live_blocks, s.live_bytes
        )?;
        for r in s.regions().iter().filter(|r| r.live_blocks > 0) {
            if r.block == 0 {
                write!(f, " {} in the large region", r.live_blocks)?;
            } else {
                write!(f, " {} of {} B", r.live_blocks, r.block)?;
            }
            f.write_str(";")?;
        }
        Ok(())
    }
}

/// What [`CommonAllocator::validate`](crate::CommonAllocator::validate) found wrong.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CommonCorruption {
    /// A region's memory space broke one of its rules.
    #[error("region {region}: {corruption}")]
    Space {
        /// The region's index.
        region: usize,
        /// What the space's walk found.
        corruption: SpaceCorruption,
    },
    /// A class region's run or span is broken: a header, a list it is on, a free
    /// list (a block not in the run, a cycle, a count that does not match), or a
    /// stat that its runs do not add up to.
    #[error("region {region}: run broken at {addr:#x}")]
    Run {
        /// The region's index.
        region: usize,
        /// The run, span or block where the walk went wrong (0 for a stat).
        addr: usize,
    },
    /// The region map does not give a block of the region to it.
    #[error("region {region}: the region map gives block {addr:#x} to region id {owner}")]
    Map {
        /// The region's index.
        region: usize,
        /// The block.
        addr: usize,
        /// The id the map holds for it (0: nobody).
        owner: u8,
    },
    /// The guard pool's records and counts disagree.
    #[error("the guard pool: {0}")]
    Guard(bento_pages::GuardCorruption),
}

impl<P: PageSource> Inner<P> {
    /// The stats, region by region under each one's lock. Blocks move between a
    /// class region and the threads' caches only under its lock, so the blocks the
    /// caches hold of it are read under it too: none is counted twice or missed.
    pub(crate) fn stats(&self) -> CommonStats {
        let mut stats = CommonStats::default();
        for owner in self.slots() {
            stats.push(match owner {
                Owner::Class(bin, class) => {
                    let held = class.lock();
                    let in_threads = self.in_threads(bin);
                    class_stats(class, &held.runs, held.runs.used, in_threads)
                }
                Owner::General(region) => general_stats(region, &region.lock().stats()),
            });
        }
        self.totals(&mut stats);
        stats
    }

    /// Fills in what the page layer knows.
    fn totals(&self, stats: &mut CommonStats) {
        stats.source = self.layer.source().stats();
        stats.cache = self.layer.cache.stats();
        stats.resident = stats.source.committed;
        stats.max_resident = stats.source.max_committed;
        stats.tables = self.block_bytes
            + self.table_bytes
            + self.layer.leaves.load(Ordering::Relaxed) * leaf_reservation(self.layer.source());
    }

    /// The free blocks the threads' caches hold of `bin`'s class region. Read under the
    /// region's lock, it is exact for the region whatever the threads do meanwhile:
    /// a block enters or leaves a cache's count either under that lock (a refill or
    /// a flush) or as a user's allocation or free.
    fn in_threads(&self, bin: Bin) -> usize {
        if self.front.enabled() {
            self.front.registry().held(bin)
        } else {
            0
        }
    }

    /// Walks every region; see `CommonAllocator::validate`.
    pub(crate) fn validate(&self) -> Result<CommonStats, CommonCorruption> {
        let mut stats = CommonStats::default();
        for (i, owner) in self.slots().enumerate() {
            stats.push(match owner {
                Owner::Class(bin, class) => {
                    let held = class.lock();
                    let in_threads = self.in_threads(bin);
                    let owned = |a| self.layer.map.owner(a) == class.id;
                    let walk = held
                        .runs
                        .validate(&held.pages, owned)
                        .map_err(|addr| CommonCorruption::Run { region: i, addr })?;
                    if in_threads > walk.used {
                        return Err(CommonCorruption::Run { region: i, addr: 0 });
                    }
                    class_stats(class, &held.runs, walk.used, in_threads)
                }
                Owner::General(region) => {
                    let mut held = region.lock();
                    let report = held
                        .validate()
                        .map_err(|corruption| CommonCorruption::Space {
                            region: i,
                            corruption,
                        })?;
                    for block in held.allocations() {
                        let owner = self.layer.map.owner(block.ptr.addr().get());
                        if owner != region.id {
                            return Err(CommonCorruption::Map {
                                region: i,
                                addr: block.ptr.addr().get(),
                                owner: owner.get(),
                            });
                        }
                    }
                    let mut stats = general_stats(region, &held.stats());
                    // The walk's own counts, not the counters.
                    stats.live_blocks = report.live_blocks;
                    stats.live_bytes = report.live_bytes;
                    stats.cached_blocks = report.cached_blocks;
                    stats.segments = report.segments;
                    stats
                }
            });
        }
        self.totals(&mut stats);
        if let Some(pool) = self.guard {
            pool.validate().map_err(CommonCorruption::Guard)?;
        }
        Ok(stats)
    }
}

/// A class region's stats from its runs: `used` blocks out, `in_threads` of them
/// in threads' caches.
fn class_stats<P: PageSource>(
    region: &Class<P>,
    runs: &Runs,
    used: usize,
    in_threads: usize,
) -> RegionStats {
    let live_blocks = used.saturating_sub(in_threads);
    RegionStats {
        block: region.block,
        live_blocks,
        live_bytes: live_blocks * region.block,
        cached_blocks: in_threads,
        committed: runs.committed,
        max_committed: runs.max_committed,
        reserved: runs.reserved,
        max_reserved: runs.max_reserved,
        segments: runs.spans(),
        runs: runs.runs(),
        contended: region.contended(),
    }
}

/// A general region's stats from its space's.
fn general_stats<P: PageSource>(
    region: &General<P>,
    space: &bento_space::SpaceStats,
) -> RegionStats {
    RegionStats {
        block: 0,
        live_blocks: space.live_blocks,
        live_bytes: space.live_bytes,
        cached_blocks: space.cached_blocks,
        committed: space.committed,
        max_committed: space.max_committed,
        reserved: space.reserved,
        max_reserved: space.max_reserved,
        segments: space.segments,
        runs: 0,
        contended: region.contended(),
    }
}
