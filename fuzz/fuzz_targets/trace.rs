//! Reads arbitrary bytes as a trace: an error or records, never a panic; whatever
//! parses writes back to a trace that reads the same.

#![no_main]

use bento_trace::{Record, TraceReader, TraceWriter};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|bytes: &[u8]| {
    let Ok(reader) = TraceReader::new(bytes) else {
        return;
    };
    let records: Vec<Record> = reader.map_while(Result::ok).collect();
    let mut w = TraceWriter::new(Vec::new()).expect("a Vec takes the header");
    for r in &records {
        w.record(r.seq, &r.event).expect("a parsed record writes back");
    }
    let again = w.finish().expect("a Vec flushes");
    let reread: Vec<Record> = TraceReader::new(&again[..])
        .expect("a written header reads")
        .collect::<Result<_, _>>()
        .expect("a written trace reads");
    assert_eq!(reread, records);
});
