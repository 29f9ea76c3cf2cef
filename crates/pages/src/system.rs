//! Pages from the operating system: `mmap`/`mprotect`/`madvise`/`munmap` on Unix
//! (through rustix), `VirtualAlloc`/`VirtualFree` on Windows (through windows-sys).
//!
//! Architecture invariant: this module is the only code in bento that calls the
//! operating system's virtual-memory API.

#[cfg(unix)]
mod unix;
#[cfg(windows)]
mod windows;

#[cfg(unix)]
use unix as os;
#[cfg(windows)]
use windows as os;

#[cfg(any(unix, windows))]
pub use self::system_pages::SystemPages;

#[cfg(any(unix, windows))]
mod system_pages {
    use core::ptr::NonNull;

    use bento_align::Alignment;

    use super::os;
    use crate::{PageError, PageSource, check_range, check_size};

    /// Pages from the operating system.
    ///
    /// - Unix: `reserve` maps `PROT_NONE`, `MAP_PRIVATE | MAP_ANONYMOUS |
    ///   MAP_NORESERVE` (alignment by over-reserving and unmapping the excess);
    ///   `commit` is `mprotect` read/write; `decommit` is `madvise(MADV_DONTNEED)`
    ///   then `mprotect(PROT_NONE)`, so the memory goes back to the OS and a stray
    ///   access faults; `release` is `munmap`. The page size is read from the
    ///   auxiliary vector, without allocating.
    /// - Windows: `VirtualAlloc(MEM_RESERVE)` / `VirtualAlloc(MEM_COMMIT)` /
    ///   `VirtualFree(MEM_DECOMMIT)` / `VirtualFree(MEM_RELEASE)`; reservations are
    ///   aligned to the allocation granularity (64 KiB).
    ///
    /// It is a zero-sized handle: every value is the same source, usable from every
    /// thread and in a `static`.
    ///
    /// ```
    /// use bento_align::Alignment;
    /// use bento_pages::{PageSource, SystemPages};
    ///
    /// let pages = SystemPages::new();
    /// let page = pages.page_size();
    /// let base = pages.reserve(1 << 20, Alignment::new(1 << 20).unwrap()).unwrap();
    /// assert_eq!(base.addr().get() % (1 << 20), 0);
    /// // SAFETY: one page of a live reservation, decommitted before release.
    /// unsafe {
    ///     pages.commit(base, page).unwrap();
    ///     base.write(42);
    ///     pages.decommit(base, page);
    ///     pages.commit(base, page).unwrap();
    ///     assert_eq!(base.read(), 0); // the OS gave the page back zeroed
    ///     pages.decommit(base, page);
    ///     pages.release(base, 1 << 20);
    /// }
    /// ```
    #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
    pub struct SystemPages;

    impl SystemPages {
        /// The operating system's pages.
        #[must_use]
        pub const fn new() -> Self {
            Self
        }
    }

    // SAFETY:
    // - the page size is the OS's, a constant power of two;
    // - `os::reserve` returns a fresh mapping aligned to `max(align, page)` (it
    //   over-reserves and trims, or retries at an aligned address on Windows);
    // - commit and decommit change protection and residency only inside ranges the
    //   caller owns, and decommitted memory is replaced by zero pages;
    // - nothing here allocates: the syscalls are made directly.
    unsafe impl PageSource for SystemPages {
        #[inline]
        fn page_size(&self) -> usize {
            os::page_size()
        }

        fn reserve(&self, size: usize, align: Alignment) -> Result<NonNull<u8>, PageError> {
            check_size(size, os::page_size())?;
            os::reserve(size, align.max_with(os::granularity()))
        }

        unsafe fn release(&self, base: NonNull<u8>, size: usize) {
            debug_assert!(
                check_range(base, size, os::page_size()).is_ok(),
                "SystemPages::release({base:p}, {size}): not a page-aligned range"
            );
            // SAFETY: the caller passes exactly a live reservation of this source.
            unsafe { os::release(base, size) }
        }

        unsafe fn commit(&self, ptr: NonNull<u8>, size: usize) -> Result<(), PageError> {
            check_range(ptr, size, os::page_size())?;
            // SAFETY: the caller passes a range inside a live reservation.
            unsafe { os::commit(ptr, size) }
        }

        unsafe fn decommit(&self, ptr: NonNull<u8>, size: usize) {
            debug_assert!(
                check_range(ptr, size, os::page_size()).is_ok(),
                "SystemPages::decommit({ptr:p}, {size}): not a page-aligned range"
            );
            // SAFETY: the caller passes a range inside a live reservation that it no
            // longer reads or writes.
            unsafe { os::decommit(ptr, size) }
        }

        fn commit_is_implicit(&self) -> bool {
            false
        }

        fn decommitted_reads_zero(&self) -> bool {
            true
        }
    }
}
