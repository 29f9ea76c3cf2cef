//! Pages carved out of a caller's buffer: static memory, a console's carve-out.

use core::mem::MaybeUninit;
use core::ptr::NonNull;

use bento_align::{Alignment, align_up};

use crate::lock::Locked;
use crate::{Invalid, PageError, PageSource, check_range, check_reserve};

/// "No next range": the end of the free list.
const NIL: usize = usize::MAX;

/// The header a free range keeps in its first bytes: the list is intrusive, so the
/// source needs no storage of its own.
#[repr(C)]
struct FreeRange {
    /// Bytes in this free range (a multiple of the page size).
    size: usize,
    /// Offset of the next free range (higher address), or `NIL`.
    next: usize,
}

const _: () = assert!(size_of::<FreeRange>() <= 4096);

/// The free list: offsets from the base, in address order, never adjacent (released
/// ranges merge with their neighbours).
#[derive(Debug)]
struct FreeList {
    // Invariant: `NIL` or the offset of the first free range; each range's header is
    // written at its offset and ranges are sorted, disjoint and non-adjacent.
    head: usize,
}

/// Hands out page-aligned ranges of one buffer the caller owns, first fit over an
/// address-ordered free list kept inside the free ranges themselves; released ranges
/// merge with their free neighbours.
///
/// Commit is implicit and `decommit` does nothing: the buffer is always usable memory,
/// so decommitted memory keeps its contents ([`decommitted_reads_zero`] is false).
/// Reserving fails with [`PageError::OutOfAddressSpace`] when no free range fits.
///
/// [`decommitted_reads_zero`]: PageSource::decommitted_reads_zero
///
/// ```
/// use bento_align::Alignment;
/// use bento_pages::{FixedPages, PageSource, PageError};
/// use core::mem::MaybeUninit;
///
/// let buf: &'static mut [MaybeUninit<u8>] = Box::leak(Box::new([MaybeUninit::uninit(); 1 << 16]));
/// let pages = FixedPages::new(buf, Alignment::new(4096).unwrap());
/// let a = pages.reserve(8192, Alignment::MIN).unwrap();
/// let b = pages.reserve(4096, Alignment::MIN).unwrap();
/// assert_ne!(a, b);
/// assert!(matches!(pages.reserve(1 << 16, Alignment::MIN), Err(PageError::OutOfAddressSpace { .. })));
/// // SAFETY: `a` is a live reservation of 8192 bytes (commit is implicit).
/// unsafe { pages.release(a, 8192) };
/// assert_eq!(pages.reserve(8192, Alignment::MIN).unwrap(), a); // first fit reuses it
/// ```
#[derive(Debug)]
pub struct FixedPages {
    // Invariant: page-aligned, valid for reads and writes of `len` bytes for the life
    // of the source, and reached by nobody else except through reservations.
    base: NonNull<u8>,
    // Invariant: a multiple of `page`.
    len: usize,
    page: Alignment,
    // Invariant: `base + len`, valid for reads and writes of one bit per page of
    // `len` (whole `u64` words, after the pages handed out), reached only under the
    // lock: the bit of a page is set exactly when a live reservation starts there.
    starts: NonNull<u64>,
    free: Locked<FreeList>,
}

// SAFETY: the buffer belongs to the source (see the constructors), and the free list
// headers and the start table inside it are only touched under the lock.
unsafe impl Send for FixedPages {}
// SAFETY: as above; every method that reads or writes a header or the table holds
// the lock.
unsafe impl Sync for FixedPages {}

impl FixedPages {
    /// Pages of `page` bytes from `buf` (the part of it that is page-aligned).
    ///
    /// `page` must be at least 16 bytes, room for a free range's header; smaller
    /// values are raised to 16.
    pub fn new(buf: &'static mut [MaybeUninit<u8>], page: Alignment) -> Self {
        let len = buf.len();
        let base = NonNull::from(buf).cast::<u8>();
        // SAFETY: `buf` is a `'static` exclusive borrow, so its `len` bytes are valid
        // and nobody else reaches them.
        unsafe { Self::from_raw(base, len, page) }
    }

    /// Pages of `page` bytes from the raw region `[base, base + len)`. The last pages
    /// of the region hold the source's table of where reservations start (one bit per
    /// page: one page of 4 KiB for each 128 MiB), so that a release that is not
    /// exactly a live reservation is caught.
    ///
    /// # Safety
    ///
    /// The caller must ensure that the region is valid for reads and writes for the
    /// life of the source and that nothing else reads or writes it, except through the
    /// reservations this source hands out.
    pub unsafe fn from_raw(base: NonNull<u8>, len: usize, page: Alignment) -> Self {
        let page = page.max_with(
            Alignment::of::<FreeRange>()
                .max_with(Alignment::new(size_of::<FreeRange>()).expect("16 is a power of two")),
        );
        let lead = base.as_ptr().align_offset(page.get()).min(len);
        let pages = (len - lead) / page.get();
        // Whole pages for a bit per page (a few more bits than the pages left).
        let table = pages.div_ceil(64) * 8;
        let table_pages = table.div_ceil(page.get());
        let usable = pages.saturating_sub(table_pages) * page.get();
        // SAFETY: `lead <= len`, so this stays inside (or one past) the region.
        let base = unsafe { base.add(lead) };
        // SAFETY: `usable <= len - lead`; with no usable page the table is empty and
        // never read.
        let starts = unsafe { base.add(usable) }.cast::<u64>();
        if usable > 0 {
            // SAFETY: the table's words lie in the region after the usable pages
            // (`table <= table_pages * page`), page-aligned, so aligned for `u64`.
            unsafe { starts.write_bytes(0, usable.div_ceil(page.get()).div_ceil(64)) };
        }
        let this = Self {
            base,
            len: usable,
            page,
            starts,
            free: Locked::new(FreeList { head: NIL }),
        };
        if usable > 0 {
            // SAFETY: offset 0 heads a free range of `usable` bytes inside the region.
            unsafe { this.write_header(0, usable, NIL) };
            let mut this = this;
            this.free.get_mut().head = 0;
            return this;
        }
        this
    }

    /// Bytes the source manages (the page-aligned part of the buffer).
    ///
    /// ```
    /// use bento_align::Alignment;
    /// use bento_pages::FixedPages;
    /// use core::mem::MaybeUninit;
    ///
    /// let buf = Box::leak(Box::new([MaybeUninit::uninit(); 4 * 4096]));
    /// let pages = FixedPages::new(buf, Alignment::PAGE_4K);
    /// assert!(pages.capacity() >= 2 * 4096);
    /// ```
    pub fn capacity(&self) -> usize {
        self.len
    }

    /// Bytes in free ranges, by walking the free list.
    ///
    /// ```
    /// use bento_align::Alignment;
    /// use bento_pages::{FixedPages, PageSource};
    /// use core::mem::MaybeUninit;
    ///
    /// let buf = Box::leak(Box::new([MaybeUninit::uninit(); 1 << 15]));
    /// let pages = FixedPages::new(buf, Alignment::PAGE_4K);
    /// let before = pages.available();
    /// let p = pages.reserve(4096, Alignment::MIN).unwrap();
    /// assert_eq!(pages.available(), before - 4096);
    /// ```
    pub fn available(&self) -> usize {
        self.free.with(|list| {
            let mut total = 0;
            let mut at = list.head;
            while at != NIL {
                // SAFETY: `at` is on the free list, so it heads a free range.
                let (size, next) = unsafe { self.read_header(at) };
                total += size;
                at = next;
            }
            total
        })
    }

    fn ptr_at(&self, offset: usize) -> NonNull<u8> {
        debug_assert!(offset <= self.len, "offset {offset} outside the buffer");
        // SAFETY: `offset <= len`, inside (or one past) the region.
        unsafe { self.base.add(offset) }
    }

    /// # Safety
    ///
    /// The caller must hold the lock and pass the offset of a free range's start.
    unsafe fn read_header(&self, offset: usize) -> (usize, usize) {
        let h = self.ptr_at(offset).cast::<FreeRange>();
        // SAFETY: free ranges start page-aligned and hold a header written by
        // `write_header`; the lock keeps other threads out.
        unsafe { ((*h.as_ptr()).size, (*h.as_ptr()).next) }
    }

    /// # Safety
    ///
    /// The caller must hold the lock (or own the source exclusively) and pass the
    /// offset of a range that is free or being freed.
    unsafe fn write_header(&self, offset: usize, size: usize, next: usize) {
        let h = self.ptr_at(offset).cast::<FreeRange>();
        // SAFETY: the range is page-aligned (so aligned for `FreeRange`) and at least
        // a page (so large enough), and nobody else uses free memory.
        unsafe { h.write(FreeRange { size, next }) };
    }

    /// The word of the start table holding page `page`'s bit, and the bit.
    fn start_bit(&self, page: usize) -> (NonNull<u64>, u64) {
        debug_assert!(page < self.len / self.page.get());
        // SAFETY: `page` is a page of the buffer, so its word lies in the table
        // (`starts`' invariant).
        (unsafe { self.starts.add(page / 64) }, 1 << (page % 64))
    }

    /// Whether a live reservation starts at page `page`.
    ///
    /// # Safety
    ///
    /// The caller must hold the lock.
    unsafe fn starts_at(&self, page: usize) -> bool {
        let (word, bit) = self.start_bit(page);
        // SAFETY: the caller holds the lock, which guards the table.
        unsafe { word.read() & bit != 0 }
    }

    /// Marks (or clears) page `page` as where a live reservation starts.
    ///
    /// # Safety
    ///
    /// The caller must hold the lock.
    unsafe fn set_start(&self, page: usize, on: bool) {
        let (word, bit) = self.start_bit(page);
        // SAFETY: the caller holds the lock, which guards the table.
        unsafe {
            let w = word.read();
            word.write(if on { w | bit } else { w & !bit });
        }
    }

    /// Whether `[offset, offset + size)` (page-aligned, inside the buffer, in no free
    /// range) is exactly one live reservation: one starts at `offset`, none starts
    /// inside, and what follows is the buffer's end, a free range (`next_free`, the
    /// first free range above `offset`) or another reservation.
    ///
    /// # Safety
    ///
    /// The caller must hold the lock.
    unsafe fn is_one_reservation(&self, offset: usize, size: usize, next_free: usize) -> bool {
        let (first, end) = (offset / self.page.get(), (offset + size) / self.page.get());
        // SAFETY: the caller holds the lock, which each call needs.
        unsafe {
            self.starts_at(first)
                && (first + 1..end).all(|p| !self.starts_at(p))
                && (offset + size == self.len || next_free == offset + size || self.starts_at(end))
        }
    }

    /// Whether `[offset, offset + size)` lies in the buffer and in no free range.
    fn is_reserved(&self, list: &FreeList, offset: usize, size: usize) -> bool {
        if offset > self.len || size > self.len - offset {
            return false;
        }
        let mut at = list.head;
        while at != NIL {
            // SAFETY: called with the lock held; `at` is on the free list.
            let (fsize, next) = unsafe { self.read_header(at) };
            if at < offset + size && offset < at + fsize {
                return false;
            }
            at = next;
        }
        true
    }

    fn check_reserved(&self, ptr: NonNull<u8>, size: usize) -> Result<(), PageError> {
        check_range(ptr, size, self.page.get())?;
        let addr = ptr.addr().get();
        let outside = PageError::Invalid(Invalid::OutsideReservation { addr, size });
        let offset = addr.checked_sub(self.base.addr().get()).ok_or(outside)?;
        if self.free.with(|list| self.is_reserved(list, offset, size)) {
            Ok(())
        } else {
            Err(outside)
        }
    }
}

// SAFETY:
// - `page` is a constant power of two;
// - `reserve` carves page-aligned ranges out of free ranges only, so no two live
//   reservations overlap, and the buffer is valid memory (commit is implicit);
// - `decommit` does nothing and `decommitted_reads_zero` is false, as documented;
// - nothing allocates: the free list lives in the free ranges.
unsafe impl PageSource for FixedPages {
    fn page_size(&self) -> usize {
        self.page.get()
    }

    fn reserve(&self, size: usize, align: Alignment) -> Result<NonNull<u8>, PageError> {
        let align = check_reserve(size, align, self.page)?;
        let base_addr = self.base.addr().get();
        let found = self.free.with(|list| {
            let (mut prev, mut at) = (NIL, list.head);
            while at != NIL {
                // SAFETY: the lock is held and `at` is on the free list.
                let (fsize, next) = unsafe { self.read_header(at) };
                // Where an aligned block would start, as an offset.
                let start = align_up(base_addr + at, align).map(|a| a - base_addr);
                if let Some(start) = start.filter(|&s| s - at <= fsize && size <= fsize - (s - at))
                {
                    let lead = start - at;
                    let tail = fsize - lead - size;
                    // The tail (if any) becomes a free range after the lead (if any).
                    let after = if tail > 0 {
                        // SAFETY: `[start + size, at + fsize)` is the free tail.
                        unsafe { self.write_header(start + size, tail, next) };
                        start + size
                    } else {
                        next
                    };
                    if lead > 0 {
                        // SAFETY: `[at, start)` stays free; rewrite its header.
                        unsafe { self.write_header(at, lead, after) };
                    } else if prev == NIL {
                        list.head = after;
                    } else {
                        // SAFETY: `prev` is the free range before `at`.
                        let (psize, _) = unsafe { self.read_header(prev) };
                        // SAFETY: as above.
                        unsafe { self.write_header(prev, psize, after) };
                    }
                    // SAFETY: the lock is held; `start` is a page of the buffer.
                    unsafe { self.set_start(start / self.page.get(), true) };
                    return Some(start);
                }
                prev = at;
                at = next;
            }
            None
        });
        match found {
            Some(offset) => Ok(self.ptr_at(offset)),
            None => Err(PageError::OutOfAddressSpace { size }),
        }
    }

    unsafe fn release(&self, base: NonNull<u8>, size: usize) {
        let offset = base.addr().get().wrapping_sub(self.base.addr().get());
        self.free.with(|list| {
            let live = check_range(base, size, self.page.get()).is_ok()
                && self.is_reserved(list, offset, size);
            // Find the free neighbours: `prev` below, `next` above.
            let (mut prev, mut next) = (NIL, list.head);
            while live && next != NIL && next < offset {
                prev = next;
                // SAFETY: the lock is held and `next` is on the free list.
                next = unsafe { self.read_header(next) }.1;
            }
            assert!(
                // SAFETY: the lock is held; the range is page-aligned, in the buffer.
                live && unsafe { self.is_one_reservation(offset, size, next) },
                "FixedPages::release({base:p}, {size}): not exactly a live reservation of \
                 this source (part of one, several, or none)"
            );
            // SAFETY: the lock is held; `offset` starts the reservation going.
            unsafe { self.set_start(offset / self.page.get(), false) };
            // Merge with the range above when adjacent.
            let (mut size, mut after) = (size, next);
            if next == offset + size {
                // SAFETY: as above.
                let (nsize, nnext) = unsafe { self.read_header(next) };
                size += nsize;
                after = nnext;
            }
            // Merge with the range below when adjacent, else link after it.
            if prev != NIL {
                // SAFETY: as above.
                let (psize, _) = unsafe { self.read_header(prev) };
                if prev + psize == offset {
                    // SAFETY: `prev` grows over the released range.
                    unsafe { self.write_header(prev, psize + size, after) };
                    return;
                }
                // SAFETY: `prev` stays as it is and points at the released range.
                unsafe { self.write_header(prev, psize, offset) };
            } else {
                list.head = offset;
            }
            // SAFETY: the released range is the caller's no more; it heads a free range.
            unsafe { self.write_header(offset, size, after) };
        });
    }

    unsafe fn commit(&self, ptr: NonNull<u8>, size: usize) -> Result<(), PageError> {
        self.check_reserved(ptr, size)
    }

    unsafe fn decommit(&self, ptr: NonNull<u8>, size: usize) {
        debug_assert!(
            self.check_reserved(ptr, size).is_ok(),
            "FixedPages::decommit({ptr:p}, {size}): not inside a live reservation"
        );
    }
}
