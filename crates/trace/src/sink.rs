//! [`TraceSink`]: a bento-heap [`EventSink`] that records a heap's events as a trace.

use std::collections::HashMap;
use std::io::{self, Write};
use std::sync::Mutex;
use std::thread::ThreadId;

use bento_heap::{EventKind, EventSink, HeapEvent};

use crate::format::Event;
use crate::writer::TraceWriter;

/// Records the events of the heaps it is given to ([`HeapBuilder::sink`]) as a trace
/// on `W`: each live block (known by its heap's name and its address) gets an id
/// (from 1, in allocation order), each tag name a
/// number (from 1, in order of first use; 0 is no tag, see [`tags`](Self::tags)).
/// Sequence numbers follow the order the sink receives events in. The first write
/// error is kept and returned by [`finish`](Self::finish); events after it are dropped.
///
/// Under threads, a block being resized is set aside when the heap begins the resize
/// ([`EventSink::resize_begin`]), by the resizing thread: another thread's block
/// given the old address meanwhile gets an id of its own, and the resize's record
/// names the block that was resized.
///
/// [`HeapBuilder::sink`]: bento_heap::HeapBuilder::sink
///
/// ```
/// use std::sync::Arc;
///
/// use allocator_api2::alloc::Global;
/// use allocator_api2::boxed::Box;
/// use bento_heap::HeapBuilder;
/// use bento_trace::{Event, TraceReader, TraceSink};
///
/// let sink = Arc::new(TraceSink::new(Vec::new()).unwrap());
/// let heap = HeapBuilder::new("doc-trace-sink").sink(sink.clone()).build(Global);
/// drop(Box::new_in([0u8; 100], &heap));
/// drop(heap);
/// let bytes = Arc::into_inner(sink).unwrap().finish().unwrap();
/// let events: Vec<Event> = TraceReader::new(&bytes[..]).unwrap().map(|r| r.unwrap().event).collect();
/// assert_eq!(events, [Event::Alloc { id: 1, size: 100, align: 1, tag: 0 }, Event::Free { id: 1 }]);
/// ```
#[derive(Debug)]
pub struct TraceSink<W: Write> {
    state: Mutex<State<W>>,
}

#[derive(Debug)]
struct State<W: Write> {
    writer: TraceWriter<W>,
    // Invariant: every live block the sink has seen allocated, by heap and address
    // (a heap over another that shares the sink may report the same address), with
    // its id, but for those being resized.
    live: HashMap<(&'static str, usize), u64>,
    // Invariant: the blocks being resized (between `resize_begin` and their `Realloc`
    // or `resize_failed`): the thread resizing, the heap, the old address and the id.
    moving: Vec<(ThreadId, &'static str, usize, u64)>,
    next_id: u64,
    tags: Vec<&'static str>,
    error: Option<io::Error>,
}

impl<W: Write> TraceSink<W> {
    /// A sink writing a trace on `out` (the header now).
    ///
    /// # Errors
    ///
    /// The error of writing the header.
    pub fn new(out: W) -> io::Result<Self> {
        Ok(Self {
            state: Mutex::new(State {
                writer: TraceWriter::new(out)?,
                live: HashMap::new(),
                moving: Vec::new(),
                next_id: 1,
                tags: Vec::new(),
                error: None,
            }),
        })
    }

    /// Records the end of a frame.
    pub fn frame(&self) {
        self.write(|w| w.frame().map(drop));
    }

    /// Records the start of a phase.
    pub fn phase(&self, name: &str) {
        self.write(|w| w.phase(name).map(drop));
    }

    /// The tag names by number: tag `n` is `tags()[n - 1]`.
    #[must_use]
    pub fn tags(&self) -> Vec<&'static str> {
        self.lock().tags.clone()
    }

    /// Flushes and returns the output.
    ///
    /// # Errors
    ///
    /// The first error any write met, or the flush's.
    pub fn finish(self) -> io::Result<W> {
        let state = self
            .state
            .into_inner()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(e) = state.error {
            return Err(e);
        }
        state.writer.finish()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State<W>> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn write(&self, f: impl FnOnce(&mut TraceWriter<W>) -> io::Result<()>) {
        let mut state = self.lock();
        if state.error.is_none()
            && let Err(e) = f(&mut state.writer)
        {
            state.error = Some(e);
        }
    }
}

impl<W: Write + Send> EventSink for TraceSink<W> {
    fn event(&self, event: &HeapEvent) {
        let mut guard = self.lock();
        let state = &mut *guard;
        if state.error.is_some() {
            return;
        }
        let tag = match event.tag {
            None => 0,
            Some(name) => match state.tags.iter().position(|t| *t == name) {
                Some(i) => i + 1,
                None => {
                    state.tags.push(name);
                    state.tags.len()
                }
            },
        };
        if event.kind == EventKind::Discard {
            // A free of each of the heap's live blocks, in id order.
            let mut ids: Vec<u64> = Vec::new();
            state.live.retain(|&(heap, _), id| {
                let keep = heap != event.heap;
                if !keep {
                    ids.push(*id);
                }
                keep
            });
            ids.sort_unstable();
            for id in ids {
                if let Err(e) = state.writer.push_event(&Event::Free { id }) {
                    state.error = Some(e);
                    return;
                }
            }
            return;
        }
        let record = match event.kind {
            EventKind::Discard => return,
            EventKind::Alloc => {
                let id = state.next_id;
                state.next_id += 1;
                state.live.insert((event.heap, event.addr), id);
                Event::Alloc {
                    id,
                    size: event.size as u64,
                    align: event.align as u64,
                    tag: u32::try_from(tag).unwrap_or(u32::MAX),
                }
            }
            EventKind::Free => match state.live.remove(&(event.heap, event.addr)) {
                Some(id) => Event::Free { id },
                None => return,
            },
            EventKind::Realloc { old_addr, .. } => match state
                .take_moving(event.heap, old_addr)
                .or_else(|| state.live.remove(&(event.heap, old_addr)))
            {
                Some(id) => {
                    state.live.insert((event.heap, event.addr), id);
                    Event::Realloc {
                        id,
                        new_size: event.size as u64,
                    }
                }
                None => return,
            },
        };
        let seq_result = state.writer.push_event(&record);
        if let Err(e) = seq_result {
            state.error = Some(e);
        }
    }

    fn resize_begin(&self, heap: &'static str, addr: usize) {
        let mut state = self.lock();
        if let Some(id) = state.live.remove(&(heap, addr)) {
            state
                .moving
                .push((std::thread::current().id(), heap, addr, id));
        }
    }

    fn resize_failed(&self, heap: &'static str, addr: usize) {
        let mut state = self.lock();
        if let Some(id) = state.take_moving(heap, addr) {
            state.live.insert((heap, addr), id);
        }
    }
}

impl<W: Write> State<W> {
    /// The id of the block this thread is resizing in `heap` from `addr`, no longer
    /// moving.
    fn take_moving(&mut self, heap: &'static str, addr: usize) -> Option<u64> {
        let me = std::thread::current().id();
        let i = self
            .moving
            .iter()
            .rposition(|&(t, h, a, _)| t == me && h == heap && a == addr)?;
        Some(self.moving.swap_remove(i).3)
    }
}
