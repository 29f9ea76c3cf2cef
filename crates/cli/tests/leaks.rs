//! `bento inspect --born | --phase` as a user asks it: what a window of frames (or a
//! phase) allocated and left live at a later frame, on a trace with a planted leak.

mod common;

use std::path::Path;

use bento_trace::TraceWriter;
use bento_trace::workload::tags;
use common::{bento, ok, scratch, stderr};

/// Twelve frames: each allocates four blocks and frees them in the same frame, but
/// frame 3 (in the phase "level 2") also allocates three level blocks of 1000 bytes
/// and one of 70,000 that nothing frees, and frame 5 a streamed block of 5000 that
/// frame 9 frees. Returns the trace's path.
fn planted(dir: &Path) -> String {
    let path = dir.join("leaky.trace");
    let mut w = TraceWriter::new(Vec::new()).unwrap();
    let mut id = 0;
    for frame in 0..12u64 {
        if frame % 4 == 0 {
            w.phase(&format!("level {}", frame / 4)).unwrap();
        }
        let first = id;
        for k in 0..4 {
            w.alloc(id, 64 << k, 16, tags::GLOBAL).unwrap();
            id += 1;
        }
        if frame == 3 {
            for size in [1000, 1000, 1000, 70_000] {
                w.alloc(1000 + id, size, 16, tags::LEVEL).unwrap();
                id += 1;
            }
        }
        if frame == 5 {
            w.alloc(500, 5000, 16, tags::STREAM).unwrap();
        }
        if frame == 9 {
            w.free(500).unwrap();
        }
        for k in first..first + 4 {
            w.free(k).unwrap();
        }
        w.frame().unwrap();
    }
    std::fs::write(&path, w.finish().unwrap()).unwrap();
    path.to_str().unwrap().to_owned()
}

fn query(args: &[&str]) -> serde_json::Value {
    let mut all = vec!["inspect"];
    all.extend_from_slice(args);
    all.push("--json");
    serde_json::from_str(&ok(&bento(&all))).expect("JSON")
}

#[test]
fn a_window_of_frames_names_the_blocks_it_left_live() {
    let dir = scratch("leaks-frames");
    let t = planted(&dir);
    // Frames 2..4 made 12 blocks that they freed and the 4 planted ones.
    let found = query(&[&t, "--born", "2..4", "--live-at", "8"]);
    assert_eq!(found["allocated"]["blocks"], 16);
    assert_eq!(found["live"]["blocks"], 4);
    assert_eq!(found["live"]["bytes"], 73_000);
    assert_eq!(found["by_tag"]["level"]["blocks"], 4);
    assert_eq!(found["by_tag"].as_object().unwrap().len(), 1);
    // By power-of-two size: three blocks from 512 B, one from 64 KiB.
    assert_eq!(found["by_size"]["512"]["blocks"], 3);
    assert_eq!(found["by_size"]["65536"]["bytes"], 70_000);
    assert_eq!(found["frames"], 8);
    // The streamed block is live at frame 8 and gone at frame 9's end.
    let streamed = query(&[&t, "--born", "5", "--live-at", "8"]);
    assert_eq!(streamed["live"]["blocks"], 1);
    assert_eq!(streamed["by_tag"]["stream"]["bytes"], 5000);
    let gone = query(&[&t, "--born", "5", "--live-at", "9"]);
    assert_eq!(gone["live"]["blocks"], 0);
    // A window with no leak, and the end of the trace by default.
    assert_eq!(query(&[&t, "--born", "6..11"])["live"]["blocks"], 0);
    assert_eq!(query(&[&t, "--born", "0..11"])["live"]["bytes"], 73_000);
    // The table and the chart.
    let svg = dir.join("leaks.svg");
    let text = ok(&bento(&[
        "inspect",
        &t,
        "--born",
        "3",
        "-o",
        svg.to_str().unwrap(),
    ]));
    assert!(
        text.contains("of the 8 blocks (72.2 KiB) allocated in frame 3, 4 (71.3 KiB) are still live at the end of the trace"),
        "{text}"
    );
    assert!(text.contains("level"), "{text}");
    let drawn = std::fs::read_to_string(&svg).unwrap();
    roxmltree::Document::parse(&drawn).expect("an SVG document");
    assert!(drawn.contains("level: 4 blocks, 71.3 KiB"), "{drawn}");
}

/// A protobuf message's fields: (field number, a varint, or the bytes of a
/// length-delimited field).
fn fields(mut b: &[u8]) -> Vec<(u64, Result<u64, Vec<u8>>)> {
    let mut out = Vec::new();
    while !b.is_empty() {
        let key = varint(&mut b);
        let value = match key & 7 {
            0 => Ok(varint(&mut b)),
            2 => {
                let n = varint(&mut b) as usize;
                let (bytes, rest) = b.split_at(n);
                b = rest;
                Err(bytes.to_vec())
            }
            wire => panic!("wire type {wire} in a profile"),
        };
        out.push((key >> 3, value));
    }
    out
}

/// The varint at the front of `b`, which it moves past.
fn varint(b: &mut &[u8]) -> u64 {
    let (mut v, mut shift) = (0u64, 0);
    loop {
        let byte = b[0];
        *b = &b[1..];
        v |= u64::from(byte & 0x7f) << shift;
        if byte < 0x80 {
            return v;
        }
        shift += 7;
    }
}

/// The varints of a packed field.
fn packed(mut b: &[u8]) -> Vec<u64> {
    let mut out = Vec::new();
    while !b.is_empty() {
        out.push(varint(&mut b));
    }
    out
}

#[test]
fn a_window_writes_its_live_blocks_as_a_pprof_heap_profile() {
    let dir = scratch("leaks-pprof");
    let t = planted(&dir);
    let pb = dir.join("leaks.pb");
    let text = ok(&bento(&[
        "inspect",
        &t,
        "--born",
        "2..4",
        "--pprof",
        pb.to_str().unwrap(),
    ]));
    assert!(text.contains(&format!("wrote {}", pb.display())), "{text}");
    let profile = fields(&std::fs::read(&pb).unwrap());
    let bytes_of = |f: &(u64, Result<u64, Vec<u8>>)| f.1.clone().unwrap_err();
    let strings: Vec<String> = profile
        .iter()
        .filter(|f| f.0 == 6)
        .map(|f| String::from_utf8(bytes_of(f)).unwrap())
        .collect();
    assert_eq!(strings[0], "");
    let string = |i: u64| strings[i as usize].as_str();
    // Two sample types: objects, then bytes.
    let types: Vec<(String, String)> = profile
        .iter()
        .filter(|f| f.0 == 1)
        .map(|f| {
            let t = fields(&bytes_of(f));
            (
                string(t[0].1.clone().unwrap()).to_owned(),
                string(t[1].1.clone().unwrap()).to_owned(),
            )
        })
        .collect();
    assert_eq!(
        types,
        [
            ("inuse_objects".to_owned(), "count".to_owned()),
            ("inuse_space".to_owned(), "bytes".to_owned())
        ]
    );
    // Functions by id, locations by id (each naming its function).
    let mut function = std::collections::HashMap::new();
    for f in profile.iter().filter(|f| f.0 == 5) {
        let m = fields(&bytes_of(f));
        function.insert(
            m[0].1.clone().unwrap(),
            string(m[1].1.clone().unwrap()).to_owned(),
        );
    }
    let mut location = std::collections::HashMap::new();
    for f in profile.iter().filter(|f| f.0 == 4) {
        let m = fields(&bytes_of(f));
        let line = fields(&m[1].1.clone().unwrap_err());
        location.insert(
            m[0].1.clone().unwrap(),
            function[&line[0].1.clone().unwrap()].clone(),
        );
    }
    let (mut objects, mut space) = (0, 0);
    let mut stacks = Vec::new();
    for f in profile.iter().filter(|f| f.0 == 2) {
        let m = fields(&bytes_of(f));
        let stack: Vec<String> = packed(&m[0].1.clone().unwrap_err())
            .iter()
            .map(|id| location[id].clone())
            .collect();
        let values = packed(&m[1].1.clone().unwrap_err());
        objects += values[0];
        space += values[1];
        stacks.push((stack, values));
    }
    assert_eq!((objects, space), (4, 73_000));
    stacks.sort();
    assert_eq!(
        stacks,
        [
            (
                vec!["blocks from 512 B".to_owned(), "tag level".to_owned()],
                vec![3, 3000]
            ),
            (
                vec!["blocks from 64.0 KiB".to_owned(), "tag level".to_owned()],
                vec![1, 70_000]
            ),
        ]
    );
    // The default sample type is the bytes.
    let default = profile
        .iter()
        .find(|f| f.0 == 14)
        .unwrap()
        .1
        .clone()
        .unwrap();
    assert_eq!(string(default), "inuse_space");
}

#[test]
fn a_phase_names_what_it_left_live() {
    let dir = scratch("leaks-phase");
    let t = planted(&dir);
    // "level 0" is frames 0..3: the planted blocks; "level 1" (frames 4..7) made the
    // streamed block, which frame 9 (in "level 2") freed.
    let level0 = query(&[&t, "--phase", "level 0"]);
    assert_eq!(level0["live"]["blocks"], 4);
    assert_eq!(level0["born"], "phase \"level 0\"");
    let level1 = query(&[&t, "--phase", "level 1", "--live-at", "7"]);
    assert_eq!(level1["live"]["blocks"], 1);
    assert_eq!(query(&[&t, "--phase", "level 1"])["live"]["blocks"], 0);
    assert_eq!(
        query(&[&t, "--phase", "no such phase"])["allocated"]["blocks"],
        0
    );
}

#[test]
fn a_query_it_cannot_answer_says_why_in_one_line() {
    let dir = scratch("leaks-mistakes");
    let t = planted(&dir);
    for (args, what) in [
        (
            vec!["--born", "4..2"],
            "ends (frame 2) before it starts (frame 4)",
        ),
        (vec!["--born", "two"], "`two` is not a frame number"),
        (
            vec!["--born", "1..99999999999999999999"],
            "is not a frame number",
        ),
        (
            vec!["--born", "5", "--live-at", "3"],
            "before the window ends",
        ),
        (
            vec!["--born", "1", "--live-at", "40"],
            "holds 12 frame marks",
        ),
        (vec!["--live-at", "3"], "give --born FRAMES or --phase NAME"),
        (
            vec!["--pprof", "x.pb"],
            "give --born FRAMES or --phase NAME",
        ),
    ] {
        let mut all = vec!["inspect", t.as_str()];
        all.extend(args.iter().copied());
        let o = bento(&all);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(1), "{args:?}: {err}");
        assert!(err.contains(what), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
    }
    // Both windows at once: clap's own message.
    let o = bento(&["inspect", &t, "--born", "1", "--phase", "level 0"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
}
