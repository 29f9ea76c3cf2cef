//! The trace format: every event round-trips, and a truncated or corrupted trace is
//! an error naming a byte offset inside it, never a panic.

use bento_trace::{Event, MAX_PHASE, Record, TraceError, TraceReader, TraceWriter};
use proptest::prelude::*;

fn event() -> impl Strategy<Value = Event> {
    prop_oneof![
        (any::<u64>(), any::<u64>(), 0u32..64, any::<u32>()).prop_map(|(id, size, s, tag)| {
            Event::Alloc {
                id,
                size,
                align: 1 << s,
                tag,
            }
        }),
        any::<u64>().prop_map(|id| Event::Free { id }),
        (any::<u64>(), any::<u64>()).prop_map(|(id, new_size)| Event::Realloc { id, new_size }),
        Just(Event::Frame),
        ".{0,40}".prop_map(Event::Phase),
    ]
}

/// `records` written with their sequence numbers.
fn write(records: &[Record]) -> Vec<u8> {
    let mut w = TraceWriter::new(Vec::new()).unwrap();
    for r in records {
        w.record(r.seq, &r.event).unwrap();
    }
    w.finish().unwrap()
}

fn read(bytes: &[u8]) -> Result<Vec<Record>, TraceError> {
    TraceReader::new(bytes)?.collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(if cfg!(miri) { 4 } else { 256 }))]

    #[test]
    fn every_trace_round_trips(events in prop::collection::vec((event(), 0u64..1000), 0..50)) {
        let mut seq = 0;
        let records: Vec<Record> = events
            .into_iter()
            .map(|(event, gap)| {
                seq += gap;
                let r = Record { seq, event };
                seq += 1;
                r
            })
            .collect();
        let bytes = write(&records);
        prop_assert_eq!(read(&bytes).unwrap(), records);
    }

    #[test]
    fn a_corrupted_trace_is_an_error_or_a_trace_never_a_panic(
        events in prop::collection::vec(event(), 1..20),
        flips in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..4),
    ) {
        let records: Vec<Record> =
            events.into_iter().enumerate().map(|(i, event)| Record { seq: i as u64, event }).collect();
        let mut bytes = write(&records);
        for (at, byte) in flips {
            let i = at.index(bytes.len());
            bytes[i] = byte;
        }
        match read(&bytes) {
            Ok(records) => {
                // Whatever still parses is a valid trace: it writes back to the same bytes.
                let again = write(&records);
                prop_assert_eq!(read(&again).unwrap(), records);
            }
            Err(e) => {
                if let Some(offset) = e.offset() {
                    prop_assert!(offset < bytes.len() as u64, "{} past the end", e);
                }
            }
        }
    }
}

#[test]
fn a_trace_cut_at_every_byte_is_truncated_at_its_last_record() {
    let mut w = TraceWriter::new(Vec::new()).unwrap();
    w.phase("level 1").unwrap();
    w.alloc(1, 1 << 40, 4096, 7).unwrap();
    w.realloc(1, 300).unwrap();
    w.frame().unwrap();
    w.free(1).unwrap();
    let bytes = w.finish().unwrap();
    // Where records end (a whole trace): after the header, and after each record.
    let ends: Vec<usize> = (9..=bytes.len())
        .filter(|&cut| read(&bytes[..cut]).is_ok())
        .collect();
    assert_eq!(ends.len(), 6, "{ends:?}");
    assert_eq!(read(&bytes).unwrap().len(), 5);
    for cut in 0..bytes.len() {
        let result = read(&bytes[..cut]);
        if cut == 0 {
            assert!(matches!(result.as_deref(), Ok([])), "cut {cut}");
        } else if cut < 8 {
            assert!(matches!(result, Err(TraceError::BadMagic)), "cut {cut}");
        } else if cut == 8 {
            assert!(
                matches!(result, Err(TraceError::Truncated { offset: 0 })),
                "cut {cut}"
            );
        } else if !ends.contains(&cut) {
            // The record that starts at the last end before the cut is incomplete.
            let start = ends.iter().copied().filter(|&e| e < cut).max().unwrap() as u64;
            match result {
                Err(TraceError::Truncated { offset }) => assert_eq!(offset, start, "cut {cut}"),
                other => panic!("cut {cut}: {other:?}"),
            }
        }
    }
}

#[test]
fn bad_values_name_their_offset() {
    let header = b"BENTOTRC\x01".to_vec();
    let cases: Vec<(Vec<u8>, u64, &str)> = vec![
        (vec![9, 0], 9, "unknown record kind"),
        (
            vec![
                4, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x02,
            ],
            10,
            "a varint above u64::MAX",
        ),
        (vec![1, 0, 1, 1, 64, 0], 13, "an alignment above 2^63"),
        (
            vec![1, 0, 1, 1, 3, 0x80, 0x80, 0x80, 0x80, 0x10],
            14,
            "a tag above u32::MAX",
        ),
        (vec![5, 0, 0x81, 0x20], 11, "a phase name over 4096 bytes"),
        (
            vec![5, 0, 2, 0xC3, 0x28],
            12,
            "a phase name that is not UTF-8",
        ),
        (
            vec![
                4, 0xFE, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x01, 4, 0,
            ],
            21,
            "the sequence number overflows",
        ),
    ];
    for (body, offset, what) in cases {
        let mut bytes = header.clone();
        bytes.extend_from_slice(&body);
        match read(&bytes) {
            Err(TraceError::Corrupt { offset: o, what: w }) => {
                assert_eq!((o, w), (offset, what), "{body:?}");
            }
            other => panic!("{body:?}: {other:?}"),
        }
    }
    assert!(matches!(
        read(b"BENTOTRC\x02"),
        Err(TraceError::Version { version: 2 })
    ));
    assert!(matches!(read(b"NOTATRACE"), Err(TraceError::BadMagic)));
}

#[test]
fn an_empty_input_and_a_bare_header_are_traces_of_no_records() {
    // A recorder whose process ended before its header was written leaves 0 bytes.
    let mut empty = TraceReader::new(&b""[..]).unwrap();
    assert!(empty.next_record().unwrap().is_none());
    assert!(empty.next_record().unwrap().is_none());
    let header = TraceWriter::new(Vec::new()).unwrap().finish().unwrap();
    assert_eq!(header.len(), 9);
    assert_eq!(read(&header).unwrap(), []);
    // Anything else that is not a whole header is still not a trace.
    for bad in [&b"B"[..], b"BENTOTR", b"\0", b"hello"] {
        assert!(matches!(read(bad), Err(TraceError::BadMagic)), "{bad:?}");
    }
}

#[test]
fn the_writer_refuses_what_the_format_cannot_hold() {
    let mut w = TraceWriter::new(Vec::new()).unwrap();
    assert!(w.alloc(1, 8, 3, 0).is_err());
    assert!(w.phase(&"x".repeat(MAX_PHASE + 1)).is_err());
    w.record(10, &Event::Frame).unwrap();
    assert!(w.record(10, &Event::Frame).is_err());
    assert!(w.record(u64::MAX, &Event::Frame).is_err());
    let bytes = w.finish().unwrap();
    assert_eq!(
        read(&bytes).unwrap(),
        [Record {
            seq: 10,
            event: Event::Frame
        }]
    );
}
