//! A heap profile in pprof's format (`profile.proto`, written uncompressed, which
//! `go tool pprof` and speedscope read as they read a gzipped one): samples of
//! live blocks with two values, `inuse_objects` (count) and `inuse_space` (bytes),
//! each under a stack of named frames, leaf first.
//!
//! Only what a heap profile needs is written: the sample types, the samples, one
//! location per frame name (a line of a function of that name) and the string
//! table. Protobuf by hand: varints and length-delimited fields.

use std::collections::HashMap;

/// One sample: its stack's location ids (leaf first), its two values, and its
/// labels as string ids (key, value).
#[derive(Debug)]
struct Sample {
    stack: Vec<u64>,
    values: [i64; 2],
    labels: Vec<(i64, i64)>,
}

/// A profile being built: frames are interned by name.
#[derive(Debug, Default)]
pub(crate) struct Profile {
    strings: Vec<String>,
    string_ids: HashMap<String, i64>,
    /// Function (and location) ids by frame name: a frame's location id is its
    /// function's.
    frames: Vec<i64>,
    frame_ids: HashMap<String, u64>,
    samples: Vec<Sample>,
}

impl Profile {
    pub(crate) fn new() -> Self {
        let mut p = Self::default();
        // The string table's first entry is the empty string.
        p.string("");
        p
    }

    fn string(&mut self, s: &str) -> i64 {
        if let Some(&i) = self.string_ids.get(s) {
            return i;
        }
        let i = self.strings.len() as i64;
        self.strings.push(s.to_owned());
        self.string_ids.insert(s.to_owned(), i);
        i
    }

    fn frame(&mut self, name: &str) -> u64 {
        if let Some(&id) = self.frame_ids.get(name) {
            return id;
        }
        let name_id = self.string(name);
        self.frames.push(name_id);
        let id = self.frames.len() as u64;
        self.frame_ids.insert(name.to_owned(), id);
        id
    }

    /// Adds a sample of `objects` blocks and `bytes` bytes under `stack` (leaf
    /// first), with string labels `labels` (key, value).
    pub(crate) fn sample(
        &mut self,
        stack: &[&str],
        objects: u64,
        bytes: u128,
        labels: &[(&str, &str)],
    ) {
        let stack = stack.iter().map(|f| self.frame(f)).collect();
        let labels = labels
            .iter()
            .map(|(k, v)| (self.string(k), self.string(v)))
            .collect();
        let clamp = |v: u128| i64::try_from(v).unwrap_or(i64::MAX);
        self.samples.push(Sample {
            stack,
            values: [clamp(u128::from(objects)), clamp(bytes)],
            labels,
        });
    }

    /// The profile's bytes.
    pub(crate) fn encode(mut self) -> Vec<u8> {
        let types = [
            (self.string("inuse_objects"), self.string("count")),
            (self.string("inuse_space"), self.string("bytes")),
        ];
        let mut out = Vec::new();
        for (ty, unit) in types {
            let mut m = Vec::new();
            int(&mut m, 1, ty);
            int(&mut m, 2, unit);
            message(&mut out, 1, &m);
        }
        for s in &self.samples {
            let mut m = Vec::new();
            packed(&mut m, 1, s.stack.iter().copied());
            packed(&mut m, 2, s.values.iter().map(|&v| v as u64));
            for &(key, value) in &s.labels {
                let mut l = Vec::new();
                int(&mut l, 1, key);
                int(&mut l, 2, value);
                message(&mut m, 3, &l);
            }
            message(&mut out, 2, &m);
        }
        for (i, _) in self.frames.iter().enumerate() {
            let id = i as u64 + 1;
            let mut line = Vec::new();
            uint(&mut line, 1, id);
            let mut m = Vec::new();
            uint(&mut m, 1, id);
            message(&mut m, 4, &line);
            message(&mut out, 4, &m);
        }
        for (i, &name) in self.frames.iter().enumerate() {
            let mut m = Vec::new();
            uint(&mut m, 1, i as u64 + 1);
            int(&mut m, 2, name);
            int(&mut m, 3, name);
            message(&mut out, 5, &m);
        }
        for s in &self.strings {
            key(&mut out, 6, 2);
            varint(&mut out, s.len() as u64);
            out.extend_from_slice(s.as_bytes());
        }
        // The default sample type: `inuse_space`.
        int(&mut out, 14, types[1].0);
        out
    }
}

fn varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn key(out: &mut Vec<u8>, field: u32, wire: u8) {
    varint(out, u64::from(field) << 3 | u64::from(wire));
}

fn uint(out: &mut Vec<u8>, field: u32, v: u64) {
    key(out, field, 0);
    varint(out, v);
}

fn int(out: &mut Vec<u8>, field: u32, v: i64) {
    uint(out, field, v as u64);
}

fn message(out: &mut Vec<u8>, field: u32, body: &[u8]) {
    key(out, field, 2);
    varint(out, body.len() as u64);
    out.extend_from_slice(body);
}

fn packed(out: &mut Vec<u8>, field: u32, values: impl Iterator<Item = u64>) {
    let mut body = Vec::new();
    for v in values {
        varint(&mut body, v);
    }
    message(out, field, &body);
}
