//! The free-chunk index: segregated lists under a two-level bitmap (TLSF's good fit).
//!
//! First level `fl`: the power of two of the size (level 0 holds every size below 256
//! in steps of 16). Second level `sl`: the next four bits, so each power of two is
//! split into 16 lists. A request is rounded up to the next list boundary, so every
//! chunk of the list found fits and no list is ever scanned: the waste this costs is
//! below 1/16 of the size (1/8 at worst counting the rounding to 16).

use core::ptr::{self, NonNull};

use crate::chunk::raw;

/// Second-level lists per first level.
const SL_BITS: u32 = 4;
pub(crate) const SL_COUNT: usize = 1 << SL_BITS;
/// log2 of the first size that leaves level 0 (256): below it lists are 16 bytes apart.
const LINEAR_LOG2: u32 = SL_BITS + 4;
/// First levels: sizes below 2^(FL_COUNT + LINEAR_LOG2 - 1), beyond `MAX_SEGMENT`.
pub(crate) const FL_COUNT: usize = 32;
/// An empty list's head, as a constant: compared with, not called.
const NULL: *mut u8 = ptr::null_mut();
/// From this chunk size up, a request looks first in its own list (see `Index::find`).
const EXACT_FROM: usize = 4096;
/// How many chunks of its own list a request looks at.
const EXACT_SCAN: usize = 8;

const _: () =
    assert!((crate::chunk::MAX_SEGMENT as u64) < 1u64 << (FL_COUNT as u32 + LINEAR_LOG2 - 1));

/// The list a free chunk of `size` bytes belongs in (`size` a multiple of 16, at least
/// 32, below `MAX_SEGMENT`).
#[inline]
pub(crate) const fn list_of(size: usize) -> (usize, usize) {
    if size < 1 << LINEAR_LOG2 {
        (0, size >> 4)
    } else {
        let log2 = size.ilog2();
        let fl = (log2 - LINEAR_LOG2 + 1) as usize;
        let sl = (size >> (log2 - SL_BITS)) & (SL_COUNT - 1);
        (fl, sl)
    }
}

/// Whether free chunks of `a` and `b` bytes belong to the same list: below 256 bytes
/// a list is 16 bytes wide; above, sizes that share their top five bits (the power of
/// two and the next four) share a list. Cheaper than comparing two `list_of`s.
#[inline]
pub(crate) const fn same_list(a: usize, b: usize) -> bool {
    let shift = if a < 1 << LINEAR_LOG2 {
        4
    } else {
        a.ilog2() - SL_BITS
    };
    a >> shift == b >> shift
}

/// The smallest chunk size list `(fl, sl)` holds.
#[inline]
pub(crate) const fn list_start(fl: usize, sl: usize) -> usize {
    if fl == 0 {
        sl << 4
    } else {
        let log2 = fl as u32 + LINEAR_LOG2 - 1;
        (1 << log2) + (sl << (log2 - SL_BITS))
    }
}

/// The first list whose every chunk holds `size` bytes: `size` rounded up to the next
/// list boundary, then mapped.
#[inline]
pub(crate) const fn list_at_least(size: usize) -> (usize, usize) {
    if size < 1 << LINEAR_LOG2 {
        (0, size >> 4)
    } else {
        // The size's top five bits, rounded up: 16 to 32, where 32 is the next
        // power of two's first list.
        let log2 = size.ilog2();
        let shift = log2 - SL_BITS;
        let top = (size + (1 << shift) - 1) >> shift;
        let fl = (log2 - LINEAR_LOG2 + 1) as usize + (top >> (SL_BITS + 1));
        (fl, top & (SL_COUNT - 1))
    }
}

/// Segregated free lists and their bitmaps.
pub(crate) struct Index {
    // Invariant: bit `fl` is set iff `sl_bitmap[fl] != 0`.
    fl_bitmap: u32,
    // Invariant: bit `sl` of `sl_bitmap[fl]` is set iff `heads[fl][sl]` is non-null.
    sl_bitmap: [u16; FL_COUNT],
    // Invariant: each head is null or the first free chunk of a doubly linked list (via
    // the chunks' `fd`/`bk` words, null-terminated) of free chunks whose sizes map to
    // this list. Every free chunk of the space but the designated one (`Core::dv`)
    // is in exactly one list.
    heads: [[*mut u8; SL_COUNT]; FL_COUNT],
}

impl Index {
    pub(crate) const fn new() -> Self {
        Self {
            fl_bitmap: 0,
            sl_bitmap: [0; FL_COUNT],
            heads: [[ptr::null_mut(); SL_COUNT]; FL_COUNT],
        }
    }

    /// Adds free chunk `c` of `size` bytes to the front of its list.
    ///
    /// # Safety
    ///
    /// The caller must ensure that `c` is a free chunk of `size` bytes (its head
    /// written) in committed memory of a live segment, and in no list.
    #[inline]
    pub(crate) unsafe fn insert(&mut self, c: NonNull<u8>, size: usize) {
        // SAFETY: the caller's contract.
        unsafe { self.insert_own(c, c, size) }
    }

    /// [`insert`](Self::insert), writing `c`'s own link words through `own` (the
    /// caller's pointer to a block being freed; see `Core::adopt`) and keeping `c`.
    ///
    /// # Safety
    ///
    /// As for `insert`, with `own` a pointer to `c` that may write its payload.
    #[inline]
    pub(crate) unsafe fn insert_own(&mut self, c: NonNull<u8>, own: NonNull<u8>, size: usize) {
        let (fl, sl) = list_of(size);
        let first = self.heads[fl][sl];
        // SAFETY: `c` is a free chunk (the caller's contract), its links reachable
        // through `own`; `first`, when non-null, is the free chunk at the head of the
        // list (the invariant of `heads`).
        unsafe {
            raw::set_link(own, 0, first);
            raw::set_link(own, 1, ptr::null_mut());
            match NonNull::new(first) {
                // A non-empty list: its bits are set already.
                Some(first) => raw::set_link(first, 1, c.as_ptr()),
                None => {
                    self.fl_bitmap |= 1 << fl;
                    self.sl_bitmap[fl] |= 1 << sl;
                }
            }
        }
        self.heads[fl][sl] = c.as_ptr();
    }

    /// Takes free chunk `c` of `size` bytes out of its list.
    ///
    /// # Safety
    ///
    /// The caller must ensure that `c` is a free chunk of `size` bytes in a list of
    /// this index.
    #[inline]
    pub(crate) unsafe fn remove(&mut self, c: NonNull<u8>, size: usize) {
        // SAFETY: `c` is a listed free chunk, so its links are its list neighbours,
        // themselves listed free chunks.
        unsafe {
            let fd = raw::link(c, 0);
            let bk = raw::link(c, 1);
            if let Some(fd) = NonNull::new(fd) {
                raw::set_link(fd, 1, bk);
            }
            match NonNull::new(bk) {
                Some(bk) => raw::set_link(bk, 0, fd),
                None => {
                    let (fl, sl) = list_of(size);
                    debug_assert_eq!(
                        self.heads[fl][sl],
                        c.as_ptr(),
                        "free chunk {c:p} of {size} bytes has no predecessor but does not head its list"
                    );
                    self.heads[fl][sl] = fd;
                    if fd.is_null() {
                        self.sl_bitmap[fl] &= !(1 << sl);
                        if self.sl_bitmap[fl] == 0 {
                            self.fl_bitmap &= !(1 << fl);
                        }
                    }
                }
            }
        }
    }

    /// Gives free chunk `c`, listed with `old` bytes, its new size `new` (its head
    /// already says so): moves it to the list `new` maps to, or leaves it where it is
    /// when that is the same list (the common case of a large chunk that grows or
    /// shrinks by a block).
    ///
    /// # Safety
    ///
    /// The caller must ensure `c` is a free chunk in the list of `old`, and that its
    /// new size `new` is a valid free-chunk size of committed memory.
    #[inline]
    pub(crate) unsafe fn resize(&mut self, c: NonNull<u8>, old: usize, new: usize) {
        if !same_list(old, new) {
            // SAFETY: the caller's contract.
            unsafe {
                self.remove(c, old);
                self.insert(c, new);
            }
        }
    }

    /// Puts free chunk `new` of `new_size` bytes in the place of free chunk `old`,
    /// listed with `old_size` bytes, which stops being a chunk (it merged into
    /// `new`): when both map to the same list `new` takes `old`'s links and place in
    /// it, with no bitmap change.
    ///
    /// # Safety
    ///
    /// The caller must ensure `old` is a listed free chunk of `old_size` bytes and
    /// `new` a free chunk of `new_size` bytes (its head written) in committed memory,
    /// in no list.
    #[inline]
    pub(crate) unsafe fn replace(
        &mut self,
        old: NonNull<u8>,
        old_size: usize,
        new: NonNull<u8>,
        new_size: usize,
    ) {
        // SAFETY: the caller's contract.
        unsafe { self.replace_own(old, old_size, new, new, new_size) }
    }

    /// [`replace`](Self::replace), writing `new`'s own link words through `own` (see
    /// [`insert_own`](Self::insert_own)).
    ///
    /// # Safety
    ///
    /// As for `replace`, with `own` a pointer to `new` that may write its payload.
    #[inline(always)]
    pub(crate) unsafe fn replace_own(
        &mut self,
        old: NonNull<u8>,
        old_size: usize,
        new: NonNull<u8>,
        own: NonNull<u8>,
        new_size: usize,
    ) {
        if !same_list(old_size, new_size) {
            // SAFETY: the caller's contract.
            unsafe {
                self.remove(old, old_size);
                self.insert_own(new, own, new_size);
            }
            return;
        }
        // SAFETY: `old` is listed, so its links are its list neighbours (listed free
        // chunks) or null; `new` is a free chunk whose link words are its own,
        // reachable through `own`.
        unsafe {
            let fd = raw::link(old, 0);
            let bk = raw::link(old, 1);
            raw::set_link(own, 0, fd);
            raw::set_link(own, 1, bk);
            if let Some(fd) = NonNull::new(fd) {
                raw::set_link(fd, 1, new.as_ptr());
            }
            match NonNull::new(bk) {
                Some(bk) => raw::set_link(bk, 0, new.as_ptr()),
                None => {
                    let (fl, sl) = list_of(new_size);
                    self.heads[fl][sl] = new.as_ptr();
                }
            }
        }
    }

    /// A free chunk of at least `size` bytes, left in its list: the first chunk of the
    /// first non-empty list whose chunks all fit. Returns it with its size.
    ///
    /// From [`EXACT_FROM`] bytes up, the list `size` itself falls in is tried first
    /// (its first [`EXACT_SCAN`] chunks), so that a hole of exactly the size asked,
    /// which the rounding up would skip, is reused before a larger chunk is split
    /// (and fresh pages committed in it).
    ///
    /// # Safety
    ///
    /// The index's invariants hold (every listed chunk is a free chunk of a live
    /// segment with its head written).
    #[inline]
    pub(crate) unsafe fn find(&self, size: usize) -> Option<(NonNull<u8>, usize)> {
        // SAFETY: the caller's contract.
        unsafe { self.find_from(size, list_at_least(size)) }
    }

    /// [`find`](Self::find), with `list_at_least(size)` given as `(fl, sl)`.
    ///
    /// # Safety
    ///
    /// As for `find`, and `(fl, sl)` must be `list_at_least(size)`.
    #[inline]
    pub(crate) unsafe fn find_from(
        &self,
        size: usize,
        (fl, sl): (usize, usize),
    ) -> Option<(NonNull<u8>, usize)> {
        debug_assert_eq!((fl, sl), list_at_least(size));
        if self.fl_bitmap == 0 {
            return None;
        }
        if size >= EXACT_FROM
            // SAFETY: the caller's contract.
            && let Some(found) = unsafe { self.find_in_own_list(size) }
        {
            return Some(found);
        }
        let (fl, sl) = self.first_list(fl, sl)?;
        // Invariant of the bitmaps: the list is non-empty.
        let c = NonNull::new(self.heads[fl][sl])?;
        // SAFETY: `c` heads a list, so it is a free chunk with its head written.
        let found = raw::size(unsafe { raw::head(c) });
        debug_assert!(
            found >= size,
            "list ({fl}, {sl}) held a chunk of {found} < {size}"
        );
        Some((c, found))
    }

    /// The first of the first [`EXACT_SCAN`] chunks of the list `size` falls in that
    /// holds `size` bytes, if any.
    ///
    /// # Safety
    ///
    /// As for [`find`](Self::find).
    #[cold]
    #[inline(never)]
    unsafe fn find_in_own_list(&self, size: usize) -> Option<(NonNull<u8>, usize)> {
        let (fl, sl) = list_of(size);
        if list_start(fl, sl) == size {
            // Every chunk of the list fits: the rounded search finds it first.
            return None;
        }
        let mut at = self.heads[fl][sl];
        for _ in 0..EXACT_SCAN {
            let c = NonNull::new(at)?;
            // SAFETY: a listed chunk is free with its head and links written.
            let found = raw::size(unsafe { raw::head(c) });
            if found >= size {
                return Some((c, found));
            }
            // SAFETY: as above.
            at = unsafe { raw::link(c, 0) };
        }
        None
    }

    /// The first non-empty list at or after `(fl, sl)`.
    #[inline]
    fn first_list(&self, fl: usize, sl: usize) -> Option<(usize, usize)> {
        if fl >= FL_COUNT {
            return None;
        }
        let here = u32::from(self.sl_bitmap[fl]) & (u32::MAX << sl);
        if here != 0 {
            return Some((fl, here.trailing_zeros() as usize));
        }
        let above = self.fl_bitmap & u32::MAX.checked_shl(fl as u32 + 1).unwrap_or(0);
        if above == 0 {
            return None;
        }
        let fl = above.trailing_zeros() as usize;
        Some((fl, self.sl_bitmap[fl].trailing_zeros() as usize))
    }

    /// The first chunk of list `(fl, sl)`, or null.
    pub(crate) fn head_of(&self, fl: usize, sl: usize) -> *mut u8 {
        self.heads[fl][sl]
    }

    /// Whether the bitmaps say list `(fl, sl)` is non-empty.
    pub(crate) fn marked(&self, fl: usize, sl: usize) -> bool {
        self.fl_bitmap & (1 << fl) != 0 && self.sl_bitmap[fl] & (1 << sl) != 0
    }

    /// The lists of first level `fl` as two masks of second-level bits: those whose
    /// head is non-null, and those the bitmaps mark. `validate` visits only the lists
    /// set in either, so an empty level costs a scan of its heads and no more.
    pub(crate) fn row(&self, fl: usize) -> (u16, u16) {
        let heads = &self.heads[fl];
        let mut held = 0;
        let mut sl = 0;
        while sl < SL_COUNT {
            // A comparison rather than `is_null`, a `while` rather than an iterator:
            // `validate` runs this for every level, and Miri interprets each call.
            if heads[sl] != NULL {
                held |= 1 << sl;
            }
            sl += 1;
        }
        let marked = if self.fl_bitmap & (1 << fl) != 0 {
            self.sl_bitmap[fl]
        } else {
            0
        };
        (held, marked)
    }

    /// Whether the first-level bit of `fl` agrees with its second-level bitmap.
    pub(crate) fn first_level_agrees(&self, fl: usize) -> bool {
        (self.fl_bitmap & (1 << fl) != 0) == (self.sl_bitmap[fl] != 0)
    }
}

#[cfg(test)]
mod tests;
