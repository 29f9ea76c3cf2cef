use std::collections::HashMap;
use std::string::String;
use std::vec::Vec;

use core::ptr::NonNull;

use super::*;
use crate::guard::{Label, Trace};

fn at(addr: usize) -> NonNull<u8> {
    NonNull::new(addr as *mut u8).unwrap()
}

#[test]
fn the_table_keeps_what_a_map_keeps_through_inserts_and_removes() {
    let p = Profiler::new(ProfileConfig::DEFAULT.capacity(300)).unwrap();
    let mut model = HashMap::new();
    let mut x = 12345u64;
    for step in 0..20_000 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        // Addresses from a small range, so that probes collide and wrap.
        let addr = 16 * (1 + (x % 700) as usize);
        if x.is_multiple_of(3) {
            assert_eq!(
                p.forget(at(addr)),
                model.remove(&addr).is_some(),
                "step {step}"
            );
        } else if model.len() < 300 || model.contains_key(&addr) {
            p.record(at(addr), addr, Label::default(), &Trace::EMPTY);
            model.insert(addr, addr);
        }
        if step % 1000 == 0 {
            assert_eq!(p.stats().live_samples as usize, model.len());
            for &a in model.keys() {
                assert!(p.may_hold(at(a)), "the filter never forgets a held block");
            }
        }
    }
    for &a in model.keys() {
        assert!(p.forget(at(a)));
    }
    assert_eq!(p.stats().live_samples, 0);
    let full = Profiler::new(ProfileConfig::DEFAULT.capacity(2)).unwrap();
    for a in 1..=3 {
        full.record(at(a * 64), 8, Label::default(), &Trace::EMPTY);
    }
    let s = full.stats();
    assert_eq!((s.live_samples, s.sampled, s.dropped), (2, 3, 1));
}

#[test]
fn the_exponential_draw_has_its_mean_and_the_estimate_is_unbiased() {
    let every = 64 << 10;
    let p = Profiler::new(ProfileConfig::DEFAULT.every(every)).unwrap();
    let n = 200_000;
    let mean = (0..n).map(|_| p.draw() as f64).sum::<f64>() / n as f64;
    assert!((mean / every as f64 - 1.0).abs() < 0.02, "{mean}");
    // Blocks of many sizes through the countdown, as an allocator samples them.
    let mut left = p.draw();
    let mut truth = 0usize;
    let mut x = 99u64;
    for i in 0..200_000usize {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let size = [16, 48, 200, 1000, 4096, 30_000, 300_000][(x % 7) as usize];
        truth += size;
        if size >= left {
            left = p.draw();
            p.record(
                at(64 * (i + 1)),
                size,
                Label {
                    tag: Some(if size < 4096 { "small" } else { "large" }),
                    ..Label::default()
                },
                &Trace::EMPTY,
            );
        } else {
            left -= size;
        }
    }
    let estimate = p.stats().estimated_live_bytes as f64;
    assert!(
        (estimate / truth as f64 - 1.0).abs() < 0.03,
        "{estimate} of {truth}"
    );
    let small = p.estimate(|l, _| l.tag == Some("small")) as f64;
    assert!(small > 0.0 && small < estimate);
}

/// A protobuf message's fields: (number, varint or bytes).
fn fields(mut b: &[u8]) -> Vec<(u64, Result<u64, Vec<u8>>)> {
    fn varint(b: &mut &[u8]) -> u64 {
        let mut v = 0;
        let mut shift = 0;
        loop {
            let byte = b[0];
            *b = &b[1..];
            v |= u64::from(byte & 0x7f) << shift;
            shift += 7;
            if byte & 0x80 == 0 {
                return v;
            }
        }
    }
    let mut out = Vec::new();
    while !b.is_empty() {
        let key = varint(&mut b);
        match key & 7 {
            0 => out.push((key >> 3, Ok(varint(&mut b)))),
            2 => {
                let len = varint(&mut b) as usize;
                out.push((key >> 3, Err(b[..len].to_vec())));
                b = &b[len..];
            }
            w => panic!("wire type {w}"),
        }
    }
    out
}

#[test]
fn a_dump_is_a_profile_proto_with_the_samples_and_their_names() {
    let p = Profiler::new(ProfileConfig::DEFAULT.every(4096)).unwrap();
    p.set_frame(7, Some("level 7"));
    let label = Label {
        heap: Some("level"),
        tag: Some("meshes"),
        owner: 1,
    };
    p.record(
        at(4096),
        1 << 20,
        label,
        &Trace::here(Some(core::panic::Location::caller())),
    );
    p.mark();
    p.record(at(8192), 1 << 20, Label::default(), &Trace::EMPTY);
    let mut bytes = Vec::new();
    p.write_pprof(false, &mut |b| bytes.extend_from_slice(b));
    let top = fields(&bytes);
    let strings: Vec<String> = top
        .iter()
        .filter(|(f, _)| *f == 6)
        .map(|(_, v)| String::from_utf8(v.clone().unwrap_err()).unwrap())
        .collect();
    assert_eq!(strings[0], "");
    for s in [
        "inuse_space",
        "heap level",
        "tag meshes",
        "phase",
        "level 7",
    ] {
        assert!(strings.iter().any(|t| t == s), "{s} in {strings:?}");
    }
    assert!(
        strings
            .iter()
            .any(|t| t.starts_with("crates/pages/src/profile/tests.rs:"))
    );
    let samples: Vec<_> = top.iter().filter(|(f, _)| *f == 2).collect();
    assert_eq!(samples.len(), 2);
    let first = fields(samples[0].1.as_ref().unwrap_err());
    let values = first
        .iter()
        .find(|(f, _)| *f == 2)
        .unwrap()
        .1
        .clone()
        .unwrap_err();
    // One block of 1 MiB, weight 1 (far above the 4 KiB mean).
    assert_eq!(values, [1, 0x80, 0x80, 0x40]);
    assert!(
        top.iter().any(|(f, v)| *f == 12 && *v == Ok(4096)),
        "the period"
    );
    // Since the mark: the second block alone.
    let mut since = Vec::new();
    p.write_pprof(true, &mut |b| since.extend_from_slice(b));
    assert_eq!(fields(&since).iter().filter(|(f, _)| *f == 2).count(), 1);
    p.forget_owned(1);
    assert_eq!(p.stats().live_samples, 1);
}
