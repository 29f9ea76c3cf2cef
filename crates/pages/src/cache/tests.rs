//! The occupancy bits against the slots: `validate` finds a bit on an empty slot and
//! a kept page without its bit.

use alloc::vec::Vec;

use super::*;
use crate::HeapPages;

const PAGE: usize = 4096;

/// A cache of 4 pages (8 slots, one occupancy word) with two pages kept, in slots
/// the test finds.
fn two_kept() -> (CommitCache<HeapPages>, NonNull<u8>) {
    let cache = CommitCache::with_capacity(HeapPages::new(), 4 * PAGE).unwrap();
    cache.set_retention(Retention::Decay(Decay::frames(100)));
    let base = cache.reserve(8 * PAGE, Alignment::MIN).unwrap();
    // SAFETY: the first two pages of a live reservation, committed, then decommitted.
    unsafe {
        cache.commit(base, 2 * PAGE).unwrap();
        cache.decommit(base, 2 * PAGE);
    }
    assert_eq!(cache.validate().unwrap().parked, 2 * PAGE);
    (cache, base)
}

/// The slots of the table, from the test's side of the lock (nothing else runs).
fn slots(cache: &CommitCache<HeapPages>) -> Vec<*mut u8> {
    let mut out = Vec::with_capacity(cache.slots);
    for i in 0..cache.slots {
        // SAFETY: the table holds `slots` pointers; no other thread touches the cache.
        out.push(unsafe { cache.table.add(i).read() });
    }
    out
}

fn release(cache: CommitCache<HeapPages>, base: NonNull<u8>) {
    cache.trim();
    // SAFETY: the live reservation, its pages decommitted.
    unsafe { cache.release(base, 8 * PAGE) };
}

#[test]
fn the_bits_mark_exactly_the_kept_slots() {
    let (cache, base) = two_kept();
    let table = slots(&cache);
    // SAFETY: the one occupancy word, read with no other thread.
    let word = unsafe { cache.occupied.read() };
    for (i, e) in table.iter().enumerate() {
        assert_eq!(word >> i & 1 == 1, !e.is_null(), "slot {i}");
    }
    let mut found = Vec::new();
    let mut from = 0;
    // SAFETY: no other thread touches the cache, so the lock is not needed.
    while let Some(i) = unsafe { cache.next_kept(from) } {
        found.push(i);
        from = i + 1;
    }
    assert_eq!(found.len(), 2);
    assert!(found.iter().all(|&i| !table[i].is_null()));
    release(cache, base);
}

#[test]
fn a_bit_on_an_empty_slot_is_found() {
    let (cache, base) = two_kept();
    let empty = slots(&cache).iter().position(|e| e.is_null()).unwrap();
    // SAFETY: the one occupancy word, written with no other thread.
    unsafe { cache.occupied.write(cache.occupied.read() | 1 << empty) };
    assert_eq!(
        cache.validate(),
        Err(CacheCorruption::Occupancy { slot: empty })
    );
    // SAFETY: as above: the bit put back.
    unsafe { cache.occupied.write(cache.occupied.read() & !(1 << empty)) };
    release(cache, base);
}

#[test]
fn a_kept_page_without_its_bit_is_found() {
    let (cache, base) = two_kept();
    let kept = slots(&cache).iter().position(|e| !e.is_null()).unwrap();
    // SAFETY: the one occupancy word, written with no other thread.
    unsafe { cache.occupied.write(cache.occupied.read() & !(1 << kept)) };
    assert_eq!(
        cache.validate(),
        Err(CacheCorruption::Count {
            counted: PAGE,
            recorded: 2 * PAGE
        })
    );
    // SAFETY: as above: the bit put back.
    unsafe { cache.occupied.write(cache.occupied.read() | 1 << kept) };
    release(cache, base);
}
