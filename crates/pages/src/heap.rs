//! Pages from the global allocator: for Miri, for targets without virtual memory, and
//! for tests.

use alloc::alloc::{Layout, alloc_zeroed, dealloc};
use alloc::vec::Vec;
use core::ptr::NonNull;

use bento_align::Alignment;

use crate::lock::Locked;
use crate::{Invalid, PageError, PageSource, check_range, check_reserve};

/// A live reservation: where it starts, and the layout it was allocated with.
#[derive(Debug)]
struct Reservation {
    base: NonNull<u8>,
    layout: Layout,
}

impl Reservation {
    fn contains(&self, addr: usize, size: usize) -> bool {
        let start = self.base.addr().get();
        addr >= start
            && addr - start <= self.layout.size()
            && size <= self.layout.size() - (addr - start)
    }
}

/// Pages from the global allocator, with page-aligned layouts.
///
/// Commit is implicit (a reservation is zeroed memory, usable at once); `decommit`
/// zero-fills the range, so decommitted memory reads as zero like the OS's. Every
/// reservation is recorded, so `commit` of a range outside one is an error rather than
/// a wild write, and `Drop` frees what is still reserved.
///
/// **It calls the global allocator**, so it must not back a `#[global_allocator]`.
/// This is the source everything above bento-pages runs on under Miri, which cannot
/// run `mmap` with `PROT_NONE`, `mprotect` or `madvise`.
///
/// ```
/// use bento_align::Alignment;
/// use bento_pages::{HeapPages, PageSource};
///
/// let pages = HeapPages::with_page_size(Alignment::new(256).unwrap());
/// let base = pages.reserve(1024, Alignment::new(4096).unwrap()).unwrap();
/// assert_eq!(base.addr().get() % 4096, 0);
/// // SAFETY: inside the live reservation; decommitted before release.
/// unsafe {
///     pages.commit(base, 256).unwrap();
///     base.write(1);
///     pages.decommit(base, 256);
///     assert_eq!(base.read(), 0); // decommitted memory reads as zero
///     pages.release(base, 1024);
/// }
/// ```
#[derive(Debug)]
pub struct HeapPages {
    page: Alignment,
    reservations: Locked<Vec<Reservation>>,
}

// SAFETY: the reservations are only reached under the lock; the pointers they hold are
// plain heap blocks owned by this source, usable from any thread.
unsafe impl Send for HeapPages {}
// SAFETY: as above; every method takes the lock before touching the table.
unsafe impl Sync for HeapPages {}

impl HeapPages {
    /// A source with 4 KiB pages.
    #[must_use]
    pub fn new() -> Self {
        Self::with_page_size(Alignment::PAGE_4K)
    }

    /// A source with pages of `page` bytes.
    #[must_use]
    pub fn with_page_size(page: Alignment) -> Self {
        Self {
            page,
            reservations: Locked::new(Vec::new()),
        }
    }

    /// Bytes in live reservations.
    ///
    /// ```
    /// use bento_align::Alignment;
    /// use bento_pages::{HeapPages, PageSource};
    ///
    /// let pages = HeapPages::new();
    /// let base = pages.reserve(8192, Alignment::MIN).unwrap();
    /// assert_eq!(pages.reserved(), 8192);
    /// // SAFETY: the whole live reservation, never committed.
    /// unsafe { pages.release(base, 8192) };
    /// assert_eq!(pages.reserved(), 0);
    /// ```
    pub fn reserved(&self) -> usize {
        self.reservations
            .with(|r| r.iter().map(|r| r.layout.size()).sum())
    }

    fn check_inside(&self, ptr: NonNull<u8>, size: usize) -> Result<(), PageError> {
        check_range(ptr, size, self.page.get())?;
        let addr = ptr.addr().get();
        if self
            .reservations
            .with(|r| r.iter().any(|r| r.contains(addr, size)))
        {
            Ok(())
        } else {
            Err(PageError::Invalid(Invalid::OutsideReservation {
                addr,
                size,
            }))
        }
    }
}

impl Default for HeapPages {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for HeapPages {
    fn drop(&mut self) {
        for r in self.reservations.get_mut().drain(..) {
            // SAFETY: `r` was allocated with `r.layout` in `reserve` and not freed:
            // `release` removes what it frees from the table.
            unsafe { dealloc(r.base.as_ptr(), r.layout) };
        }
    }
}

// SAFETY:
// - `page` is an `Alignment`, a constant power of two;
// - `reserve` returns a fresh zeroed heap block aligned to `max(align, page)`, which no
//   other reservation shares, usable at once (commit is implicit);
// - `decommit` zero-fills, so decommitted and fresh memory read as zero;
// - it calls the global allocator, as its documentation says.
unsafe impl PageSource for HeapPages {
    fn page_size(&self) -> usize {
        self.page.get()
    }

    fn reserve(&self, size: usize, align: Alignment) -> Result<NonNull<u8>, PageError> {
        let align = check_reserve(size, align, self.page)?;
        let layout = Layout::from_size_align(size, align.get())
            .map_err(|_| PageError::OutOfAddressSpace { size })?;
        // SAFETY: `layout` has a non-zero size (checked above).
        let base = NonNull::new(unsafe { alloc_zeroed(layout) })
            .ok_or(PageError::OutOfAddressSpace { size })?;
        self.reservations
            .with(|r| r.push(Reservation { base, layout }));
        Ok(base)
    }

    unsafe fn release(&self, base: NonNull<u8>, size: usize) {
        let found = self.reservations.with(|r| {
            let i = r
                .iter()
                .position(|r| r.base == base && r.layout.size() == size)?;
            Some(r.swap_remove(i))
        });
        let Some(r) = found else {
            panic!("HeapPages::release({base:p}, {size}): not a live reservation of this source");
        };
        // SAFETY: `r` was allocated with `r.layout` in `reserve`; it is out of the
        // table, so it is freed once.
        unsafe { dealloc(r.base.as_ptr(), r.layout) };
    }

    unsafe fn commit(&self, ptr: NonNull<u8>, size: usize) -> Result<(), PageError> {
        self.check_inside(ptr, size)
    }

    unsafe fn decommit(&self, ptr: NonNull<u8>, size: usize) {
        if let Err(e) = self.check_inside(ptr, size) {
            panic!("HeapPages::decommit({ptr:p}, {size}): {e}");
        }
        // SAFETY: the range is inside a live reservation (checked), which is writable
        // heap memory the caller does not use while it is decommitted.
        unsafe { ptr.write_bytes(0, size) };
    }

    fn decommitted_reads_zero(&self) -> bool {
        true
    }
}
