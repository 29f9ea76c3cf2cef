//! Walking a space: the [`Allocations`], [`FreeBlocks`] and [`Chunks`] iterators
//! (`validate.rs` checks what they walk).

use core::fmt;
use core::marker::PhantomData;
use core::ptr::NonNull;

use bento_pages::PageSource;

use crate::chunk::flags::{CACHED, IN_USE};
use crate::chunk::{IN_USE_OVERHEAD, Kind, MIN_CHUNK, Segment, raw};
use crate::memory_space::MemorySpace;

/// A block found by walking a space: an allocation's payload and usable size, or a
/// free chunk's address and size.
///
/// ```
/// use core::alloc::Layout;
/// use bento_pages::HeapPages;
/// use bento_space::{MemorySpace, SpaceConfig};
///
/// let mut space = MemorySpace::new(HeapPages::new(), SpaceConfig::DEFAULT.with_page_size(4096)).unwrap();
/// let p = space.alloc(Layout::new::<[u8; 40]>()).unwrap();
/// let blocks: Vec<_> = space.allocations().collect();
/// assert_eq!((blocks[0].ptr, blocks[0].size), (p, 40));
/// // SAFETY: live.
/// unsafe { space.free(p) };
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Block {
    /// Where the block starts.
    pub ptr: NonNull<u8>,
    /// Its size in bytes.
    pub size: usize,
}

/// Steps through every chunk of every segment.
struct Cursor {
    seg: *mut Segment,
    next: Option<NonNull<u8>>,
}

impl Cursor {
    /// The next chunk, its head, and whether it is free (in a free list or cached).
    ///
    /// # Safety
    ///
    /// The space's segments and tags are intact and unchanged since the cursor began.
    unsafe fn step(&mut self) -> Option<(NonNull<u8>, usize, bool)> {
        loop {
            let seg = NonNull::new(self.seg)?;
            // SAFETY: `seg` is a live segment; `next` is its first chunk or the chunk
            // after the last one returned, which the intact tags keep inside it.
            unsafe {
                let c = self
                    .next
                    .unwrap_or_else(|| seg.cast::<u8>().add((*seg.as_ptr()).first));
                let head = raw::head(c);
                let size = raw::size(head);
                if size == 0 {
                    self.seg = (*seg.as_ptr()).next;
                    self.next = None;
                    continue;
                }
                self.next = Some(c.add(size));
                // An in-use chunk of a segment that is not dedicated carries `CACHED`
                // only in the block cache.
                let cached = head & CACHED != 0 && (*seg.as_ptr()).kind != Kind::Dedicated as usize;
                return Some((c, head, head & IN_USE == 0 || cached));
            }
        }
    }
}

/// Every live block of a space, segment by segment in address order within each
/// segment (dsmalloc's FindFirst/NextAllocation). From [`MemorySpace::allocations`].
pub struct Allocations<'a> {
    cursor: Cursor,
    _space: PhantomData<&'a mut ()>,
}

/// Every free chunk of a space (dsmalloc's FindFirst/NextFreeBlock); each block is a
/// whole chunk, tags included. From [`MemorySpace::free_blocks`].
pub struct FreeBlocks<'a> {
    cursor: Cursor,
    _space: PhantomData<&'a mut ()>,
}

impl Iterator for Allocations<'_> {
    type Item = Block;

    fn next(&mut self) -> Option<Block> {
        loop {
            // SAFETY: the iterator borrows the space exclusively, so nothing changes
            // its tags while it walks.
            let (c, head, free) = unsafe { self.cursor.step()? };
            if !free {
                return Some(Block {
                    // SAFETY: the cursor stepped onto a chunk of a live segment.
                    ptr: unsafe { raw::payload(c) },
                    size: raw::size(head) - IN_USE_OVERHEAD,
                });
            }
        }
    }
}

impl Iterator for FreeBlocks<'_> {
    type Item = Block;

    fn next(&mut self) -> Option<Block> {
        loop {
            // SAFETY: as for `Allocations`.
            let (c, head, free) = unsafe { self.cursor.step()? };
            if free {
                return Some(Block {
                    ptr: c,
                    size: raw::size(head),
                });
            }
        }
    }
}

impl fmt::Debug for Allocations<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Allocations")
            .field("next", &self.cursor.next)
            .finish()
    }
}

impl fmt::Debug for FreeBlocks<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FreeBlocks")
            .field("next", &self.cursor.next)
            .finish()
    }
}

/// What a segment is for, as [`Chunks`] reports it.
///
/// ```
/// use core::alloc::Layout;
/// use bento_pages::HeapPages;
/// use bento_space::{MemorySpace, SegmentKind, SpaceConfig};
///
/// let config = SpaceConfig::DEFAULT.with_page_size(4096);
/// let mut space = MemorySpace::new(HeapPages::new(), config).unwrap();
/// let big = space.alloc(Layout::from_size_align(config.segment_threshold, 8).unwrap()).unwrap();
/// assert_eq!(space.chunks().next().unwrap().kind, SegmentKind::Dedicated);
/// // SAFETY: live.
/// unsafe { space.free(big) };
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SegmentKind {
    /// An ordinary segment of `segment_granularity` bytes (or more), shared by many
    /// blocks; its free chunks' interior pages are decommitted.
    Ordinary,
    /// A segment of its own for one large or strongly aligned block.
    Dedicated,
    /// The caller's memory of [`MemorySpace::with_base`]: always committed, never
    /// released.
    Base,
}

/// What a chunk holds, as [`Chunks`] reports it.
///
/// ```
/// use core::alloc::Layout;
/// use bento_pages::HeapPages;
/// use bento_space::{ChunkState, MemorySpace, SpaceConfig};
///
/// let mut space = MemorySpace::new(HeapPages::new(), SpaceConfig::DEFAULT.with_page_size(4096)).unwrap();
/// let p = space.alloc(Layout::new::<u64>()).unwrap();
/// let states: Vec<ChunkState> = space.chunks().map(|c| c.state).collect();
/// assert_eq!(states, [ChunkState::Live, ChunkState::Free]);
/// // SAFETY: live.
/// unsafe { space.free(p) };
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChunkState {
    /// A live block.
    Live,
    /// A free chunk in the index.
    Free,
    /// A freed block kept whole in the block cache for reuse.
    Cached,
}

/// One chunk of a space, with its segment: what a map of the space draws.
///
/// ```
/// use core::alloc::Layout;
/// use bento_pages::HeapPages;
/// use bento_space::{ChunkState, MemorySpace, SpaceConfig};
///
/// let mut space = MemorySpace::new(HeapPages::new(), SpaceConfig::DEFAULT.with_page_size(4096)).unwrap();
/// let p = space.alloc(Layout::new::<[u8; 100]>()).unwrap();
/// let chunks: Vec<_> = space.chunks().collect();
/// assert_eq!(chunks[0].state, ChunkState::Live);
/// assert_eq!(chunks[1].state, ChunkState::Free); // the rest of the segment
/// assert!(chunks[1].decommitted.len() > 0);       // most of it decommitted
/// // SAFETY: live.
/// unsafe { space.free(p) };
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChunkInfo {
    /// The base of the chunk's segment.
    pub segment: NonNull<u8>,
    /// The segment's size in bytes (header and end fence included).
    pub segment_size: usize,
    /// What the segment is for.
    pub kind: SegmentKind,
    /// Where the chunk starts (its tags included).
    pub ptr: NonNull<u8>,
    /// Its size in bytes.
    pub size: usize,
    /// What it holds.
    pub state: ChunkState,
    /// The bytes of the chunk, as offsets from `ptr`, whose pages are decommitted
    /// (empty but for free chunks of ordinary segments with a whole page inside).
    pub decommitted: core::ops::Range<usize>,
}

/// Every chunk of every segment, in address order within each segment. From
/// [`MemorySpace::chunks`].
///
/// ```
/// use bento_pages::HeapPages;
/// use bento_space::{MemorySpace, SpaceConfig};
///
/// let mut space = MemorySpace::new(HeapPages::new(), SpaceConfig::DEFAULT).unwrap();
/// assert_eq!(space.chunks().count(), 0); // no segment yet
/// ```
pub struct Chunks<'a> {
    cursor: Cursor,
    page_mask: usize,
    _space: PhantomData<&'a mut ()>,
}

impl Iterator for Chunks<'_> {
    type Item = ChunkInfo;

    fn next(&mut self) -> Option<ChunkInfo> {
        // SAFETY: the iterator borrows the space exclusively, so nothing changes its
        // tags while it walks.
        let (c, head, free) = unsafe { self.cursor.step()? };
        // `step` leaves the cursor on the segment of the chunk it returned.
        let seg = NonNull::new(self.cursor.seg)?;
        // SAFETY: a live segment's header.
        let s = unsafe { seg.as_ref() };
        let kind = match s.kind {
            k if k == Kind::Dedicated as usize => SegmentKind::Dedicated,
            k if k == Kind::Base as usize => SegmentKind::Base,
            _ => SegmentKind::Ordinary,
        };
        let size = raw::size(head);
        let state = match (free, head & IN_USE != 0) {
            (false, _) => ChunkState::Live,
            (true, true) => ChunkState::Cached,
            (true, false) => ChunkState::Free,
        };
        let mut decommitted = 0..0;
        if state == ChunkState::Free && kind == SegmentKind::Ordinary {
            // As `Core::interior`: the pages past the head and links, before the page
            // of the footer.
            let addr = c.addr().get();
            let m = self.page_mask;
            let (lo, hi) = ((addr + MIN_CHUNK + m) & !m, (addr + size) & !m);
            if lo < hi {
                decommitted = lo - addr..hi - addr;
            }
        }
        Some(ChunkInfo {
            segment: seg.cast(),
            segment_size: s.size,
            kind,
            ptr: c,
            size,
            state,
            decommitted,
        })
    }
}

impl fmt::Debug for Chunks<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Chunks").finish_non_exhaustive()
    }
}

impl<P: PageSource> MemorySpace<P> {
    /// Every live block, as payload and usable size. Borrows the space exclusively, so
    /// nothing can allocate or free while it walks.
    ///
    /// ```
    /// use core::alloc::Layout;
    /// use bento_pages::HeapPages;
    /// use bento_space::{MemorySpace, SpaceConfig};
    ///
    /// let mut space = MemorySpace::new(HeapPages::new(), SpaceConfig::DEFAULT.with_page_size(4096)).unwrap();
    /// let a = space.alloc(Layout::new::<[u8; 100]>()).unwrap();
    /// let b = space.alloc(Layout::new::<[u8; 200]>()).unwrap();
    /// let live: usize = space.allocations().map(|b| b.size).sum();
    /// assert_eq!(live, space.stats().live_bytes);
    /// // SAFETY: live.
    /// unsafe { space.free(a); space.free(b) };
    /// ```
    pub fn allocations(&mut self) -> Allocations<'_> {
        Allocations {
            cursor: self.cursor(),
            _space: PhantomData,
        }
    }

    /// Every free chunk, whole (address and size), the block cache's included (a
    /// cached chunk is not merged, so it may lie next to another free chunk).
    /// Borrows the space exclusively.
    ///
    /// ```
    /// use core::alloc::Layout;
    /// use bento_pages::HeapPages;
    /// use bento_space::{MemorySpace, SpaceConfig};
    ///
    /// let mut space = MemorySpace::new(HeapPages::new(), SpaceConfig::DEFAULT.with_page_size(4096)).unwrap();
    /// let a = space.alloc(Layout::new::<[u8; 100]>()).unwrap();
    /// let free: usize = space.free_blocks().map(|b| b.size).sum();
    /// assert_eq!(free, space.stats().free_bytes);
    /// // SAFETY: live.
    /// unsafe { space.free(a) };
    /// ```
    pub fn free_blocks(&mut self) -> FreeBlocks<'_> {
        FreeBlocks {
            cursor: self.cursor(),
            _space: PhantomData,
        }
    }

    /// Every chunk of every segment — live, free and cached, with the pages of each
    /// that are decommitted — in address order within each segment: the picture of
    /// the space that `bento map` draws. Borrows the space exclusively.
    ///
    /// ```
    /// use core::alloc::Layout;
    /// use bento_pages::HeapPages;
    /// use bento_space::{ChunkState, MemorySpace, SpaceConfig};
    ///
    /// let mut space = MemorySpace::new(HeapPages::new(), SpaceConfig::DEFAULT.with_page_size(4096)).unwrap();
    /// let p = space.alloc(Layout::new::<[u8; 100]>()).unwrap();
    /// let s = space.stats();
    /// let chunks: Vec<_> = space.chunks().collect();
    /// let free: usize = chunks.iter().filter(|c| c.state != ChunkState::Live).map(|c| c.size).sum();
    /// let decommitted: usize = chunks.iter().map(|c| c.decommitted.len()).sum();
    /// assert_eq!(free, s.free_bytes);
    /// assert_eq!(decommitted, s.reserved - s.committed);
    /// // SAFETY: live.
    /// unsafe { space.free(p) };
    /// ```
    pub fn chunks(&mut self) -> Chunks<'_> {
        let page_mask = self.entered().core.page_mask();
        Chunks {
            cursor: self.cursor(),
            page_mask,
            _space: PhantomData,
        }
    }

    /// The largest free chunk of any segment, cached ones included: the biggest
    /// block the space could place without a new segment (less its head word). 0
    /// with no free chunk. Walks every chunk, so call it now and then, not per
    /// request.
    ///
    /// ```
    /// use core::alloc::Layout;
    /// use bento_pages::HeapPages;
    /// use bento_space::{MemorySpace, SpaceConfig};
    ///
    /// let config = SpaceConfig::DEFAULT.with_page_size(4096).with_block_cache(0);
    /// let space = MemorySpace::new(HeapPages::new(), config).unwrap();
    /// assert_eq!(space.largest_free(), 0);
    /// let a = space.alloc(Layout::new::<[u8; 100]>()).unwrap();
    /// let whole = space.largest_free();
    /// assert!(whole > config.segment_granularity / 2);
    /// let b = space.alloc(Layout::from_size_align(whole / 2, 16).unwrap()).unwrap();
    /// assert!(space.largest_free() < whole);
    /// // SAFETY: live blocks, each freed once.
    /// unsafe { space.free(b) };
    /// unsafe { space.free(a) };
    /// ```
    pub fn largest_free(&self) -> usize {
        let entered = self.entered();
        let mut cursor = Cursor {
            seg: entered.core.first_segment(),
            next: None,
        };
        let mut largest = 0;
        // SAFETY: the space is entered for the whole walk and the loop calls nothing
        // that allocates or frees in it, so no tag changes while it walks.
        while let Some((_, head, free)) = unsafe { cursor.step() } {
            if free {
                largest = largest.max(raw::size(head));
            }
        }
        drop(entered);
        largest
    }

    fn cursor(&mut self) -> Cursor {
        let entered = self.entered();
        Cursor {
            seg: entered.core.first_segment(),
            next: None,
        }
    }
}
