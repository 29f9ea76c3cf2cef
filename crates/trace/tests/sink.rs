//! `TraceSink`: a heap's allocations, resizes and frees become a trace with stable
//! ids, numbered tags, frames and phases; a failing output is reported, not hidden.

use std::io::{self, Write};
use std::sync::Arc;

use allocator_api2::alloc::Global;
use allocator_api2::vec::Vec;
use bento_heap::{HeapBuilder, Tag};
use bento_trace::{Event, TraceReader, TraceSink};

static MESHES: Tag = Tag::new("meshes");
static SOUNDS: Tag = Tag::new("sounds");

#[test]
fn a_heaps_life_becomes_a_trace_with_stable_ids_and_numbered_tags() {
    let sink = Arc::new(TraceSink::new(std::vec::Vec::new()).unwrap());
    let heap = HeapBuilder::new("trace-sink")
        .register(false)
        .sink(sink.clone())
        .build(Global);
    sink.phase("level 1");
    let mut a: Vec<u32, _> = heap.with_tag(&MESHES, || Vec::with_capacity_in(4, &heap));
    let b = heap.with_tag(&SOUNDS, || allocator_api2::boxed::Box::new_in(7u64, &heap));
    a.extend(0..100); // grows: realloc events for the same id
    sink.frame();
    drop(b);
    drop(a);
    drop(heap);
    assert_eq!(sink.tags(), ["meshes", "sounds"]);
    let bytes = Arc::into_inner(sink).unwrap().finish().unwrap();
    let records: std::vec::Vec<_> = TraceReader::new(&bytes[..])
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert!(records.windows(2).all(|w| w[1].seq == w[0].seq + 1));
    let events: std::vec::Vec<Event> = records.into_iter().map(|r| r.event).collect();
    assert_eq!(events[0], Event::Phase("level 1".into()));
    assert_eq!(
        events[1],
        Event::Alloc {
            id: 1,
            size: 16,
            align: 4,
            tag: 1
        }
    );
    assert_eq!(
        events[2],
        Event::Alloc {
            id: 2,
            size: 8,
            align: 8,
            tag: 2
        }
    );
    let grows: std::vec::Vec<_> = events[3..]
        .iter()
        .take_while(|e| matches!(e, Event::Realloc { .. }))
        .collect();
    assert!(
        !grows.is_empty()
            && grows
                .iter()
                .all(|e| matches!(e, Event::Realloc { id: 1, .. }))
    );
    let rest = &events[3 + grows.len()..];
    assert_eq!(
        rest,
        [Event::Frame, Event::Free { id: 2 }, Event::Free { id: 1 }]
    );
}

/// An output that fails after `room` bytes.
#[derive(Debug)]
struct Full {
    room: usize,
}

impl Write for Full {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if buf.len() > self.room {
            return Err(io::Error::new(io::ErrorKind::StorageFull, "no room"));
        }
        self.room -= buf.len();
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[test]
fn a_write_error_is_kept_and_returned() {
    let sink = Arc::new(TraceSink::new(Full { room: 12 }).unwrap());
    let heap = HeapBuilder::new("trace-full")
        .register(false)
        .sink(sink.clone())
        .build(Global);
    for _ in 0..4 {
        drop(allocator_api2::boxed::Box::new_in(1u8, &heap));
    }
    drop(heap);
    let err = Arc::into_inner(sink).unwrap().finish().unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::StorageFull);
}
