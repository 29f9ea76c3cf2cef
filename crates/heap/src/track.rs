//! The tracking policy: [`NoTracking`], or [`Tracked`], a table of live blocks with
//! their size, tag and allocation site, per-tag stats, and the leak report built
//! from them.

use alloc::vec::Vec;
use core::fmt;
use core::panic::Location;
use core::ptr::NonNull;

use crate::sync::Lock;
use hashbrown::HashMap;

use crate::policy::Tag;

/// How much a tracking heap records of each block.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Track {
    /// Size, alignment, tag and the allocation site (`#[track_caller]` on the heap's
    /// own methods; blocks allocated through the `Allocator` trait have none).
    #[default]
    Sites,
    /// The same and a backtrace of every allocation (with `std`; slow: for hunting
    /// one leak). Without `std` it is [`Track::Sites`].
    Backtraces,
}

/// What a tracking heap knows of one live block.
pub(crate) struct Record {
    pub(crate) ptr: BlockPtr,
    pub(crate) size: usize,
    pub(crate) align: usize,
    pub(crate) tag: Option<&'static Tag>,
    pub(crate) site: Option<&'static Location<'static>>,
    #[cfg(feature = "std")]
    pub(crate) backtrace: Option<alloc::boxed::Box<std::backtrace::Backtrace>>,
}

/// A live block's pointer, kept in the table (with its provenance, so that
/// [`Heap::validate`](crate::Heap::validate) can read its guards).
#[derive(Clone, Copy)]
pub(crate) struct BlockPtr(pub(crate) NonNull<u8>);

// SAFETY: the table is behind a lock; the pointer is dereferenced only by the heap
// that owns the block, for the block's guards, while it is live.
unsafe impl Send for BlockPtr {}

/// A block a heap still holds: from [`Heap::leaks`](crate::Heap::leaks), or from a
/// dropped child heap's report.
#[derive(Clone, Debug)]
pub struct Leak {
    /// The heap that allocated it.
    pub heap: &'static str,
    /// The block (`None` in the summary line of an untracked child heap).
    pub ptr: Option<NonNull<u8>>,
    /// Its size in bytes (all of them, in a summary line).
    pub size: usize,
    /// How many blocks the line stands for: 1, or more in a summary line.
    pub blocks: usize,
    /// Its tag, if any.
    pub tag: Option<&'static str>,
    /// Where it was allocated, when known.
    pub site: Option<&'static Location<'static>>,
    /// The backtrace of its allocation, with [`Track::Backtraces`].
    #[cfg(feature = "std")]
    pub backtrace: Option<alloc::string::String>,
}

// SAFETY: a `Leak` only describes a block (its address is never dereferenced
// through it).
unsafe impl Send for Leak {}
// SAFETY: as above.
unsafe impl Sync for Leak {}

impl fmt::Display for Leak {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.ptr {
            Some(ptr) => write!(f, "{}: {} bytes at {ptr:p}", self.heap, self.size)?,
            None => write!(
                f,
                "{}: {} blocks, {} bytes (untracked)",
                self.heap, self.blocks, self.size
            )?,
        }
        if let Some(tag) = self.tag {
            write!(f, " [{tag}]")?;
        }
        match self.site {
            Some(site) => write!(f, ", allocated at {site}"),
            None if self.ptr.is_some() => f.write_str(", allocated through Allocator"),
            None => Ok(()),
        }
    }
}

/// Stats of one tag of a tracking heap, from
/// [`Heap::tag_stats`](crate::Heap::tag_stats).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TagStats {
    /// The tag's name.
    pub tag: &'static str,
    /// Bytes in live blocks carrying it.
    pub live_bytes: usize,
    /// Live blocks carrying it.
    pub live_blocks: usize,
    /// Blocks allocated with it so far.
    pub total_allocs: usize,
}

/// The tracking policy of a [`Heap`](crate::Heap): [`NoTracking`] or [`Tracked`].
/// Sealed.
pub trait Tracking: Send + Sync + fmt::Debug + private::Sealed {
    /// Whether it keeps a table (a constant, so an untracked heap has no tracking
    /// code).
    const ON: bool;

    /// The table, when it keeps one.
    #[doc(hidden)]
    fn table(&self) -> Option<&Tracked>;
}

mod private {
    pub trait Sealed {}
    impl Sealed for super::NoTracking {}
    impl Sealed for super::Tracked {}
}

/// No table of live blocks: the default, which costs nothing.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoTracking;

impl Tracking for NoTracking {
    const ON: bool = false;

    #[inline]
    fn table(&self) -> Option<&Tracked> {
        None
    }
}

/// A table of live blocks (address → size, alignment, tag, allocation site), behind
/// a lock that never allocates, in memory from the global allocator (never the
/// heap's own). Built by [`HeapBuilder::tracking`](crate::HeapBuilder::tracking).
pub struct Tracked {
    pub(crate) mode: Track,
    pub(crate) state: Lock<State>,
}

pub(crate) struct State {
    pub(crate) live: HashMap<usize, Record>,
    pub(crate) tags: Vec<(&'static Tag, TagStats)>,
}

impl fmt::Debug for Tracked {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Tracked")
            .field("mode", &self.mode)
            .field("live", &self.state.lock().live.len())
            .finish()
    }
}

impl Tracking for Tracked {
    const ON: bool = true;

    #[inline]
    fn table(&self) -> Option<&Tracked> {
        Some(self)
    }
}

impl Tracked {
    pub(crate) fn new(mode: Track) -> Self {
        Self {
            mode,
            state: Lock::new(State {
                live: HashMap::new(),
                tags: Vec::new(),
            }),
        }
    }

    /// Records a new block at `ptr`.
    pub(crate) fn insert(
        &self,
        ptr: NonNull<u8>,
        size: usize,
        align: usize,
        tag: Option<&'static Tag>,
        site: Option<&'static Location<'static>>,
    ) {
        #[cfg(feature = "std")]
        let backtrace = (self.mode == Track::Backtraces)
            .then(|| alloc::boxed::Box::new(std::backtrace::Backtrace::force_capture()));
        let record = Record {
            ptr: BlockPtr(ptr),
            size,
            align,
            tag,
            site,
            #[cfg(feature = "std")]
            backtrace,
        };
        let mut state = self.state.lock();
        if let Some(tag) = tag {
            let stats = state.tag_mut(tag);
            stats.live_bytes += size;
            stats.live_blocks += 1;
            stats.total_allocs += 1;
        }
        state.live.insert(ptr.addr().get(), record);
    }

    /// Forgets the block at `ptr`; `None` when the table has no such block.
    pub(crate) fn remove(&self, ptr: NonNull<u8>) -> Option<Record> {
        let mut state = self.state.lock();
        let record = state.live.remove(&ptr.addr().get())?;
        if let Some(tag) = record.tag {
            let stats = state.tag_mut(tag);
            stats.live_bytes -= record.size;
            stats.live_blocks -= 1;
        }
        Some(record)
    }

    /// Forgets every block (`Heap::discard_all`): no tag holds anything live.
    pub(crate) fn clear(&self) {
        let mut state = self.state.lock();
        state.live.clear();
        for (_, stats) in &mut state.tags {
            stats.live_bytes = 0;
            stats.live_blocks = 0;
        }
    }

    /// The size, alignment and site recorded for `ptr`.
    pub(crate) fn get(
        &self,
        ptr: NonNull<u8>,
    ) -> Option<(usize, usize, Option<&'static Location<'static>>)> {
        let state = self.state.lock();
        state
            .live
            .get(&ptr.addr().get())
            .map(|r| (r.size, r.align, r.site))
    }

    /// The tag recorded for `ptr`.
    pub(crate) fn tag_of(&self, ptr: NonNull<u8>) -> Option<&'static Tag> {
        self.state
            .lock()
            .live
            .get(&ptr.addr().get())
            .and_then(|r| r.tag)
    }

    /// Moves the record of a resized block from `old` to `new`, `new_size` bytes.
    pub(crate) fn moved(&self, old: NonNull<u8>, new: NonNull<u8>, new_size: usize, align: usize) {
        let mut state = self.state.lock();
        let Some(mut record) = state.live.remove(&old.addr().get()) else {
            return;
        };
        if let Some(tag) = record.tag {
            let stats = state.tag_mut(tag);
            stats.live_bytes = stats.live_bytes - record.size + new_size;
        }
        record.ptr = BlockPtr(new);
        record.size = new_size;
        record.align = align;
        state.live.insert(new.addr().get(), record);
    }

    /// Every live block, in address order, as leaks of `heap`.
    pub(crate) fn leaks(&self, heap: &'static str) -> Vec<Leak> {
        let state = self.state.lock();
        let mut leaks: Vec<Leak> = state
            .live
            .values()
            .map(|r| Leak {
                heap,
                ptr: Some(r.ptr.0),
                size: r.size,
                blocks: 1,
                tag: r.tag.map(Tag::name),
                site: r.site,
                #[cfg(feature = "std")]
                backtrace: r.backtrace.as_ref().map(|b| alloc::format!("{b}")),
            })
            .collect();
        leaks.sort_by_key(|l| l.ptr.map(NonNull::addr));
        leaks
    }

    /// The per-tag stats, in the order tags first appeared.
    pub(crate) fn tag_stats(&self) -> Vec<TagStats> {
        self.state.lock().tags.iter().map(|&(_, s)| s).collect()
    }

    /// Live blocks and their bytes, from the table.
    pub(crate) fn live(&self) -> (usize, usize) {
        let state = self.state.lock();
        (state.live.len(), state.live.values().map(|r| r.size).sum())
    }

    /// Calls `f` with each live block, its size and site (under the table's lock).
    pub(crate) fn for_each(
        &self,
        mut f: impl FnMut(NonNull<u8>, usize, Option<&'static Location<'static>>),
    ) {
        let state = self.state.lock();
        for r in state.live.values() {
            f(r.ptr.0, r.size, r.site);
        }
    }
}

impl State {
    fn tag_mut(&mut self, tag: &'static Tag) -> &mut TagStats {
        let i = match self.tags.iter().position(|(t, _)| core::ptr::eq(*t, tag)) {
            Some(i) => i,
            None => {
                self.tags.push((
                    tag,
                    TagStats {
                        tag: tag.name(),
                        live_bytes: 0,
                        live_blocks: 0,
                        total_allocs: 0,
                    },
                ));
                self.tags.len() - 1
            }
        };
        &mut self.tags[i].1
    }
}
