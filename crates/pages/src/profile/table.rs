//! The profiler's table: its samples in a dense array (so the pages it touches are
//! as many as it holds) behind an open-addressed index of their addresses (linear
//! probing, deletion by backward shift).

use core::ptr::NonNull;

use crate::guard::{Label, Trace};

/// One sampled live block.
#[derive(Clone, Copy)]
pub(super) struct Entry {
    pub(super) addr: usize,
    pub(super) size: usize,
    /// The inverse of the probability that a block of this size is sampled.
    pub(super) weight: f64,
    pub(super) frame: u64,
    pub(super) phase: Option<&'static str>,
    pub(super) mark: u32,
    pub(super) label: Label,
    pub(super) trace: Trace,
}

/// The table. Its memory (zeroed pages: an empty index) belongs to the profiler.
pub(super) struct Table {
    entries: NonNull<Entry>,
    // Invariant: `index[i]` is 0 (empty) or `k + 1` for the entry `k < len` whose
    // address probes to `i` from its hash with no empty slot between.
    index: NonNull<u32>,
    mask: usize,
    cap: u32,
    len: u32,
}

fn hash(addr: usize) -> usize {
    (addr >> 4).wrapping_mul(0x9E37_79B9_7F4A_7C15_u64 as usize) >> 16
}

impl Table {
    /// A table over `index` (`slots` zeroed `u32`s, a power of two above `cap`) and
    /// room for `cap` entries at `entries`.
    ///
    /// # Safety
    ///
    /// Both regions are valid, zeroed and the table's alone for the program.
    pub(super) unsafe fn new(
        index: NonNull<u32>,
        slots: usize,
        entries: NonNull<Entry>,
        cap: u32,
    ) -> Self {
        debug_assert!(slots.is_power_of_two() && slots > cap as usize);
        Self {
            entries,
            index,
            mask: slots - 1,
            cap,
            len: 0,
        }
    }

    pub(super) fn len(&self) -> u32 {
        self.len
    }

    fn slot(&self, i: usize) -> u32 {
        // SAFETY: `i <= mask`: inside the index.
        unsafe { self.index.add(i).read() }
    }

    fn set_slot(&mut self, i: usize, v: u32) {
        // SAFETY: as in `slot`; the table is reached through `&mut`.
        unsafe { self.index.add(i).write(v) }
    }

    fn entry(&self, k: u32) -> &Entry {
        debug_assert!(k < self.len);
        // SAFETY: `k < len`: a written entry.
        unsafe { self.entries.add(k as usize).as_ref() }
    }

    /// The index slot holding `addr`'s entry.
    fn find(&self, addr: usize) -> Option<usize> {
        let mut i = hash(addr) & self.mask;
        loop {
            match self.slot(i) {
                0 => return None,
                k if self.entry(k - 1).addr == addr => return Some(i),
                _ => i = (i + 1) & self.mask,
            }
        }
    }

    /// Adds `e`: `Some(true)`, or `Some(false)` when it replaced the entry at its
    /// address; `None` when full.
    pub(super) fn insert(&mut self, e: Entry) -> Option<bool> {
        if let Some(i) = self.find(e.addr) {
            let k = self.slot(i) - 1;
            // SAFETY: `k < len`: a written entry.
            unsafe { self.entries.add(k as usize).write(e) };
            return Some(false);
        }
        if self.len == self.cap {
            return None;
        }
        let mut i = hash(e.addr) & self.mask;
        while self.slot(i) != 0 {
            i = (i + 1) & self.mask;
        }
        // SAFETY: `len < cap`: room for one more entry.
        unsafe { self.entries.add(self.len as usize).write(e) };
        self.len += 1;
        self.set_slot(i, self.len);
        Some(true)
    }

    /// Removes `addr`'s entry; false when there is none.
    pub(super) fn remove(&mut self, addr: usize) -> bool {
        let Some(i) = self.find(addr) else {
            return false;
        };
        let k = self.slot(i) - 1;
        self.unindex(i);
        let last = self.len - 1;
        if k != last {
            let moved = *self.entry(last);
            let j = self.find(moved.addr).expect("every entry is indexed");
            // SAFETY: `k < len`: a written entry, overwritten by the last one.
            unsafe { self.entries.add(k as usize).write(moved) };
            self.set_slot(j, k + 1);
        }
        self.len = last;
        true
    }

    /// Empties index slot `i`, shifting back the entries probed past it.
    fn unindex(&mut self, mut i: usize) {
        self.set_slot(i, 0);
        let mut j = i;
        loop {
            j = (j + 1) & self.mask;
            let v = self.slot(j);
            if v == 0 {
                return;
            }
            let home = hash(self.entry(v - 1).addr) & self.mask;
            // `j`'s entry may move to `i` when its home is not in `(i, j]` cyclically.
            let in_between = if i <= j {
                i < home && home <= j
            } else {
                i < home || home <= j
            };
            if !in_between {
                self.set_slot(i, v);
                self.set_slot(j, 0);
                i = j;
            }
        }
    }

    /// Calls `f` on every entry.
    pub(super) fn for_each(&self, mut f: impl FnMut(&Entry)) {
        for k in 0..self.len {
            f(self.entry(k));
        }
    }

    /// Removes every entry `keep` refuses, telling `gone` its address.
    pub(super) fn retain(
        &mut self,
        mut keep: impl FnMut(&Entry) -> bool,
        mut gone: impl FnMut(usize),
    ) {
        let mut k = 0;
        while k < self.len {
            let e = *self.entry(k);
            if keep(&e) {
                k += 1;
            } else {
                self.remove(e.addr);
                gone(e.addr);
            }
        }
    }
}
