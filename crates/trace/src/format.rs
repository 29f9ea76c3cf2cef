//! The records of a trace and the constants of the format (see the crate docs).

use std::alloc::Layout;

/// The first 8 bytes of every trace.
pub const MAGIC: [u8; 8] = *b"BENTOTRC";
/// The format version this build writes and reads.
pub const VERSION: u64 = 1;
/// The longest phase name, in bytes.
pub const MAX_PHASE: usize = 4096;

/// Record kinds, as written.
pub(crate) const ALLOC: u8 = 1;
pub(crate) const FREE: u8 = 2;
pub(crate) const REALLOC: u8 = 3;
pub(crate) const FRAME: u8 = 4;
pub(crate) const PHASE: u8 = 5;

/// What happened.
///
/// ```
/// use bento_trace::Event;
///
/// let e = Event::Alloc { id: 7, size: 100, align: 8, tag: 0 };
/// assert_ne!(e, Event::Free { id: 7 });
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    /// Block `id` was allocated: `size` bytes aligned to `align` (a power of two),
    /// carrying `tag` (0 for none).
    Alloc {
        /// The block's id, unique among live blocks.
        id: u64,
        /// Its size in bytes.
        size: u64,
        /// Its alignment.
        align: u64,
        /// Its tag.
        tag: u32,
    },
    /// Block `id` was freed.
    Free {
        /// The block's id.
        id: u64,
    },
    /// Block `id` was resized to `new_size` bytes.
    Realloc {
        /// The block's id.
        id: u64,
        /// Its new size.
        new_size: u64,
    },
    /// A frame ended.
    Frame,
    /// A phase began ("level 3 loaded").
    Phase(String),
}

impl Event {
    /// The layout a replay asks for a block of `size` bytes aligned to `align`: a size
    /// of 0 as one byte; `None` when no [`Layout`] can hold it (more than `isize::MAX`
    /// bytes once rounded up to the alignment, or an alignment that is not a power of
    /// two). A replay counts such a request as refused, and `bento inspect` as a
    /// request no allocator can give.
    ///
    /// ```
    /// use bento_trace::Event;
    ///
    /// assert_eq!(Event::layout(0, 8).map(|l| (l.size(), l.align())), Some((1, 8)));
    /// assert!(Event::layout(isize::MAX as u64, 1).is_some());
    /// assert!(Event::layout(isize::MAX as u64, 2).is_none());
    /// assert!(Event::layout(1 << 63, 1).is_none());
    /// assert!(Event::layout(1, 1 << 63).is_none());
    /// ```
    #[must_use]
    pub fn layout(size: u64, align: u64) -> Option<Layout> {
        let size = usize::try_from(size.max(1)).ok()?;
        let align = usize::try_from(align).ok()?;
        Layout::from_size_align(size, align).ok()
    }
}

/// One record: an event and its sequence number (increasing through a trace).
///
/// ```
/// use bento_trace::{Event, Record};
///
/// let r = Record { seq: 0, event: Event::Frame };
/// assert_eq!(r.seq, 0);
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record {
    /// The sequence number.
    pub seq: u64,
    /// The event.
    pub event: Event,
}

/// Appends `v` as a varint.
pub(crate) fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}
