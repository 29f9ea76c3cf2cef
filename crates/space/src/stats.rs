//! [`SpaceStats`]: a space's stats.

use bento_pages::{CacheStats, PageStats};

#[cfg(doc)]
use crate::{MemorySpace, SpaceConfig};

/// A space's stats, kept as counters as it works; [`MemorySpace::stats`] adds up
/// only the blocks in the block cache (a walk of it), and
/// [`MemorySpace::validate`] recomputes each by walking the segments.
///
/// A block in the block cache (see [`SpaceConfig::block_cache`]) counts as free: in
/// `free_bytes`, and in `cached_bytes` and `cached_blocks`, not in `live_bytes`.
///
/// The base segment of [`MemorySpace::with_base`] counts as reserved and committed.
///
/// ```
/// use core::alloc::Layout;
/// use bento_pages::HeapPages;
/// use bento_space::{MemorySpace, SpaceConfig};
///
/// let space = MemorySpace::new(HeapPages::new(), SpaceConfig::DEFAULT.with_page_size(4096)).unwrap();
/// let p = space.alloc(Layout::new::<[u8; 100]>()).unwrap();
/// let s = space.stats();
/// assert_eq!((s.live_blocks, s.live_bytes, s.segments), (1, 104, 1));
/// assert_eq!(s.reserved, 1 << 20);
/// // SAFETY: live.
/// unsafe { space.free(p) };
/// assert_eq!(space.stats().reserved, 0);
/// assert_eq!(space.stats().max_reserved, 1 << 20);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SpaceStats {
    /// Bytes of address space the space holds (dsmalloc's GetTotalReservedMemory).
    pub reserved: usize,
    /// The most `reserved` has been (dsmalloc's GetMaxReservedMemory).
    pub max_reserved: usize,
    /// Bytes committed for the space's segments: pages its blocks, free chunks' ends
    /// and segment headers use. Pages the commit cache parks are not in it (see
    /// `resident`).
    pub committed: usize,
    /// The most `committed` has been.
    pub max_committed: usize,
    /// Bytes the live blocks can hold (their usable sizes).
    pub live_bytes: usize,
    /// Live blocks.
    pub live_blocks: usize,
    /// Bytes in free chunks, the cached ones included.
    pub free_bytes: usize,
    /// Bytes in the block cache: freed blocks kept whole for reuse (their chunks'
    /// sizes, heads included).
    pub cached_bytes: usize,
    /// Blocks in the block cache.
    pub cached_blocks: usize,
    /// Live segments (ordinary, dedicated and base).
    pub segments: usize,
    /// The memory the space holds in the page source: `committed` plus the pages the
    /// commit cache parks (decommitted for the space, still committed in the source,
    /// `cache.parked`). The stat to watch for the space's footprint;
    /// [`trim`](MemorySpace::trim) brings it down to `committed`.
    pub resident: usize,
    /// What reached the page source, counted below the commit cache: its reserved
    /// and committed bytes (with the cache's parked pages and slot table, without the
    /// base segment) and its calls. All zero without a source.
    pub source: PageStats,
    /// The commit cache's stats: pages it served without calling the source, and
    /// what it parks now (committed in the source, not counted in `committed`).
    pub cache: CacheStats,
}
