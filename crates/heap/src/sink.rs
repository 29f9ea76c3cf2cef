//! The trace hook: an [`EventSink`] a heap tells about every allocation, free and
//! resize, in order.

use core::fmt;

use crate::policy::Tag;

/// What happened to a block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventKind {
    /// A block was allocated.
    Alloc,
    /// A block was freed.
    Free,
    /// A block was resized (moved or not) from `old_addr`, `old_size` bytes.
    Realloc {
        /// Where it was.
        old_addr: usize,
        /// Its size before.
        old_size: usize,
    },
    /// Every live block of the heap went at once (`Heap::discard_all`): `size` is
    /// their bytes, `addr` 0.
    Discard,
}

/// One event a heap sends its [`EventSink`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HeapEvent {
    /// The heap's name.
    pub heap: &'static str,
    /// The event's number in the heap's sequence, from 0.
    pub seq: u64,
    /// What happened.
    pub kind: EventKind,
    /// The block's address (after a realloc, its new one).
    pub addr: usize,
    /// Its size in bytes (after a realloc, its new one).
    pub size: usize,
    /// Its alignment.
    pub align: usize,
    /// The tag it carries, if any.
    pub tag: Option<&'static str>,
}

/// Where a heap sends its events: a trace writer, a live view. Called on the thread
/// that allocates, after the operation, with no lock of the heap held; it must not
/// allocate from the heap it listens to.
///
/// A free is sent before the inner allocator takes the block back, and an allocation
/// after it hands one out, so a sink that knows blocks by address never sees an
/// address given out twice. A resize is the exception: the inner allocator may free
/// the old address (moving the block) and hand it to another thread before the
/// heap's [`EventKind::Realloc`] arrives. So the heap calls
/// [`resize_begin`](Self::resize_begin) first, while the block is still its own, on
/// the thread that resizes; then, on that thread, the `Realloc` event, or
/// [`resize_failed`](Self::resize_failed) when the block stayed as it was.
///
/// ```
/// use allocator_api2::alloc::Global;
/// use bento_heap::{HeapEvent, EventKind, EventSink, HeapBuilder};
/// use core::alloc::Layout;
/// use std::sync::{Arc, Mutex};
///
/// #[derive(Default)]
/// struct Log(Mutex<Vec<HeapEvent>>);
///
/// impl EventSink for Log {
///     fn event(&self, event: &HeapEvent) {
///         self.0.lock().unwrap().push(*event);
///     }
/// }
///
/// let log = Arc::new(Log::default());
/// let heap = HeapBuilder::new("doc-sink").sink(log.clone()).build(Global);
/// let layout = Layout::new::<u64>();
/// let p = heap.alloc(layout).unwrap();
/// // SAFETY: live, with its layout.
/// unsafe { heap.free(p, layout) };
/// let events = log.0.lock().unwrap();
/// assert_eq!(events.len(), 2);
/// assert_eq!((events[0].kind, events[1].kind), (EventKind::Alloc, EventKind::Free));
/// assert_eq!((events[0].seq, events[1].seq), (0, 1));
/// ```
pub trait EventSink: Send + Sync {
    /// Takes one event.
    fn event(&self, event: &HeapEvent);

    /// The heap `heap` is about to resize its block at `addr`: from now until this
    /// thread's `Realloc` event for it (or `resize_failed`), the address may be
    /// another block's. A sink that knows blocks by address sets this one aside here.
    /// Does nothing by default.
    fn resize_begin(&self, heap: &'static str, addr: usize) {
        let _ = (heap, addr);
    }

    /// The resize begun at `addr` failed: the block is still there, as it was.
    /// Does nothing by default.
    fn resize_failed(&self, heap: &'static str, addr: usize) {
        let _ = (heap, addr);
    }
}

impl fmt::Debug for dyn EventSink {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("EventSink")
    }
}

/// The tag name of an optional tag.
pub(crate) fn tag_name(tag: Option<&'static Tag>) -> Option<&'static str> {
    tag.map(Tag::name)
}
