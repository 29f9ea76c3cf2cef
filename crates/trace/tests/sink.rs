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

/// A heap event as the sink receives it.
fn heap_event(kind: bento_heap::EventKind, addr: usize, size: usize) -> bento_heap::HeapEvent {
    bento_heap::HeapEvent {
        heap: "sink-threads",
        seq: 0,
        kind,
        addr,
        size,
        align: 8,
        tag: None,
    }
}

#[test]
fn a_resize_whose_old_address_another_thread_got_first_keeps_its_own_id() {
    use bento_heap::{EventKind, EventSink};
    let sink = TraceSink::new(std::vec::Vec::new()).unwrap();
    let (x, y) = (0x1000, 0x2000);
    sink.event(&heap_event(EventKind::Alloc, x, 16)); // id 1, on this thread
    // This thread begins to resize it; the inner allocator frees `x` and another
    // thread is given it, and tells the sink first.
    sink.resize_begin("sink-threads", x);
    std::thread::scope(|s| {
        s.spawn(|| sink.event(&heap_event(EventKind::Alloc, x, 32))); // id 2
    });
    let moved = EventKind::Realloc {
        old_addr: x,
        old_size: 16,
    };
    sink.event(&heap_event(moved, y, 64));
    // A failed resize of the other block: still at `x`, still id 2.
    sink.resize_begin("sink-threads", x);
    sink.resize_failed("sink-threads", x);
    sink.event(&heap_event(EventKind::Free, y, 64));
    sink.event(&heap_event(EventKind::Free, x, 32));
    let bytes = sink.finish().unwrap();
    let events: std::vec::Vec<Event> = TraceReader::new(&bytes[..])
        .unwrap()
        .map(|r| r.unwrap().event)
        .collect();
    let alloc = |id, size| Event::Alloc {
        id,
        size,
        align: 8,
        tag: 0,
    };
    assert_eq!(
        events,
        [
            alloc(1, 16),
            alloc(2, 32),
            Event::Realloc {
                id: 1,
                new_size: 64
            },
            Event::Free { id: 1 },
            Event::Free { id: 2 },
        ]
    );
}

#[test]
fn threads_resizing_through_one_heap_leave_no_block_live_in_the_trace() {
    use bento_space::SpinSpace;
    let space = SpinSpace::new(
        bento_space::MemorySpace::new(
            bento_pages::HeapPages::new(),
            bento_space::SpaceConfig::DEFAULT.with_page_size(4096),
        )
        .unwrap(),
    );
    let sink = Arc::new(TraceSink::new(std::vec::Vec::new()).unwrap());
    let heap = HeapBuilder::new("sink-threads")
        .register(false)
        .sink(sink.clone())
        .build(&space);
    std::thread::scope(|s| {
        for t in 0..4 {
            let heap = &heap;
            s.spawn(move || {
                for i in 0..2000usize {
                    // Grow and shrink blocks of sizes that reuse each other's
                    // addresses, then free them.
                    let mut v: Vec<u8, _> = Vec::with_capacity_in(8 + (i + t) % 24, heap);
                    v.extend(core::iter::repeat_n(t as u8, 40 + i % 100));
                    v.shrink_to_fit();
                    assert!(v.iter().all(|&b| b == t as u8));
                }
            });
        }
    });
    drop(heap);
    let bytes = Arc::into_inner(sink).unwrap().finish().unwrap();
    let mut live = std::collections::HashSet::new();
    for record in TraceReader::new(&bytes[..]).unwrap() {
        match record.unwrap().event {
            Event::Alloc { id, .. } => assert!(live.insert(id), "id {id} allocated twice"),
            Event::Realloc { id, .. } => assert!(live.contains(&id), "realloc of dead id {id}"),
            Event::Free { id } => assert!(live.remove(&id), "free of dead id {id}"),
            _ => {}
        }
    }
    assert!(
        live.is_empty(),
        "{} blocks live at the trace's end",
        live.len()
    );
}

#[test]
fn a_heaps_discard_becomes_a_free_of_each_of_its_live_blocks() {
    let sink = Arc::new(TraceSink::new(std::vec::Vec::new()).unwrap());
    let mut buf = std::vec![core::mem::MaybeUninit::uninit(); 1 << 16];
    let bump = bento_primitives::Bump::new(&mut buf);
    let mut frame = HeapBuilder::new("trace-frame")
        .register(false)
        .sink(sink.clone())
        .build(&bump);
    let other = HeapBuilder::new("trace-other")
        .register(false)
        .sink(sink.clone())
        .build(Global);
    let kept = allocator_api2::boxed::Box::new_in(1u64, &other);
    for n in [8usize, 24, 100] {
        core::mem::forget(Vec::<u8, _>::with_capacity_in(n, &frame));
    }
    frame.discard_all();
    assert_eq!(frame.stats().live_blocks, 0);
    drop(frame);
    drop(kept);
    drop(other);
    let bytes = Arc::into_inner(sink).unwrap().finish().unwrap();
    let events: std::vec::Vec<Event> = TraceReader::new(&bytes[..])
        .unwrap()
        .map(|r| r.unwrap().event)
        .collect();
    let ids =
        |f: fn(&Event) -> Option<u64>| events.iter().filter_map(f).collect::<std::vec::Vec<_>>();
    let allocs = ids(|e| match e {
        Event::Alloc { id, .. } => Some(*id),
        _ => None,
    });
    let frees = ids(|e| match e {
        Event::Free { id } => Some(*id),
        _ => None,
    });
    // The other heap's box (the first id), the frame's three blocks freed by the
    // discard, then the box.
    let first = allocs[0];
    assert_eq!(allocs, [first, first + 1, first + 2, first + 3]);
    assert_eq!(frees, [first + 1, first + 2, first + 3, first]);
}
