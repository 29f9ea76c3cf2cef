//! Pages from the operating system: `mmap`/`mprotect`/`madvise`/`munmap` on Unix
//! (through rustix), `VirtualAlloc`/`VirtualFree` on Windows (through windows-sys).
//!
//! Architecture invariant: this module is the only code in bento that calls the
//! operating system's virtual-memory API.

#[cfg(all(feature = "os", unix))]
mod unix;
#[cfg(all(feature = "os", windows))]
mod windows;

#[cfg(all(feature = "os", unix))]
use unix as os;
#[cfg(all(feature = "os", windows))]
use windows as os;

#[cfg(all(feature = "os", any(unix, windows)))]
pub use self::system_pages::SystemPages;

#[cfg(all(feature = "os", any(unix, windows)))]
mod system_pages {
    use core::ptr::NonNull;

    use bento_align::Alignment;

    use super::os;
    use crate::{PageError, PageSource, check_range, check_size};

    /// Pages from the operating system.
    ///
    /// - Unix ([`new`](Self::new)): `reserve` maps read/write address space with
    ///   `MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE` (alignment by over-reserving
    ///   and unmapping the excess), which holds no memory until a page is first
    ///   touched; `commit` makes no system call; `decommit` is one
    ///   `madvise(MADV_DONTNEED)` per range (elsewhere than Linux, a fresh mapping
    ///   over the range), which gives the memory back and keeps the mapping whole, so
    ///   the kernel's count of mappings stays one per reservation however the pages
    ///   come and go; `release` is `munmap`. The page size is read from the auxiliary
    ///   vector, without allocating.
    /// - Unix ([`with_traps`](Self::with_traps)): reservations and decommitted pages
    ///   are `PROT_NONE`, so a stray access to memory the consumer gave back faults
    ///   at once (a use-after-free trap for debugging); `commit` is an `mprotect` and
    ///   `decommit` adds one. Each protection change can split the mapping, so a
    ///   large heap with scattered free pages approaches the kernel's limit on
    ///   mappings (`vm.max_map_count`, 65,530 by default).
    /// - Windows: `VirtualAlloc(MEM_RESERVE)` / `VirtualAlloc(MEM_COMMIT)` /
    ///   `VirtualFree(MEM_DECOMMIT)` / `VirtualFree(MEM_RELEASE)`; decommitted pages
    ///   always fault; reservations are aligned to the allocation granularity
    ///   (64 KiB).
    ///
    /// Without traps on Unix, reserved memory is usable at once
    /// ([`commit_is_implicit`](PageSource::commit_is_implicit)), as in every Unix
    /// `malloc`: the kernel commits a page when it is first written. Under strict
    /// overcommit accounting (`vm.overcommit_memory = 2`) the kernel then charges
    /// whole reservations; `with_traps` charges only committed pages.
    ///
    /// It is a copyable handle of one flag: every value is usable from every thread
    /// and in a `static`.
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
    pub struct SystemPages {
        /// Whether decommitted (and reserved) memory is inaccessible on Unix.
        trap: bool,
        /// Whether reservations that can hold huge pages ask for them.
        huge: bool,
    }

    impl SystemPages {
        /// The operating system's pages, committed by touch on Unix.
        #[must_use]
        pub const fn new() -> Self {
            Self {
                trap: false,
                huge: false,
            }
        }

        /// The operating system's pages, with decommitted memory inaccessible on Unix
        /// too (as it always is on Windows): a read or write of a page the consumer
        /// gave back faults. For debugging use-after-free; it costs an `mprotect` on
        /// every commit and decommit.
        ///
        /// ```
        /// use bento_pages::{PageSource, SystemPages};
        ///
        /// assert!(!SystemPages::with_traps().commit_is_implicit());
        /// assert!(SystemPages::with_traps().traps());
        /// ```
        #[must_use]
        pub const fn with_traps() -> Self {
            Self {
                trap: true,
                huge: false,
            }
        }

        /// The same source, with huge pages asked for where the system offers them:
        /// on Linux every reservation of 2 MiB or more is aligned to 2 MiB and advised
        /// `MADV_HUGEPAGE`, so that the kernel backs it with transparent huge pages
        /// when `/sys/kernel/mm/transparent_hugepage/enabled` is `always` or
        /// `madvise` (and ignores the advice when it is `never`). A first touch then
        /// faults in 2 MiB at once instead of 4 KiB: far fewer faults for a program
        /// that fills its memory, for more resident memory (a huge page stays whole
        /// until part of it is decommitted) and a slower single fault when the kernel
        /// must first gather 2 MiB.
        ///
        /// # Errors
        ///
        /// [`PageError::HugePagesUnavailable`] where they are not offered: every
        /// system but Linux. Windows' large pages are committed whole when reserved,
        /// need the lock-pages privilege and cannot be decommitted, which breaks the
        /// page contract's decommit; other Unix systems have no advice for them.
        ///
        /// ```
        /// use bento_pages::SystemPages;
        ///
        /// match SystemPages::new().with_huge_pages() {
        ///     Ok(pages) => assert!(pages.huge_pages() && cfg!(target_os = "linux")),
        ///     Err(e) => assert!(e.to_string().contains("huge pages")),
        /// }
        /// ```
        pub const fn with_huge_pages(self) -> Result<Self, PageError> {
            match os::HUGE_PAGES {
                Ok(()) => Ok(Self { huge: true, ..self }),
                Err(why) => Err(PageError::HugePagesUnavailable { why }),
            }
        }

        /// Whether reservations ask for huge pages
        /// ([`with_huge_pages`](Self::with_huge_pages)).
        ///
        /// ```
        /// use bento_pages::SystemPages;
        ///
        /// assert!(!SystemPages::new().huge_pages());
        /// ```
        #[must_use]
        pub const fn huge_pages(&self) -> bool {
            self.huge
        }

        /// Whether decommitted memory faults when touched: on Windows always, on
        /// Unix with [`with_traps`](Self::with_traps).
        ///
        /// ```
        /// use bento_pages::SystemPages;
        ///
        /// assert_eq!(SystemPages::new().traps(), cfg!(windows));
        /// ```
        #[must_use]
        pub const fn traps(&self) -> bool {
            self.trap || cfg!(windows)
        }
    }

    // SAFETY:
    // - the page size is the OS's, a constant power of two;
    // - `os::reserve` returns a fresh mapping aligned to `max(align, page)` (it
    //   over-reserves and trims, or retries at an aligned address on Windows);
    // - reservations are read/write from the start exactly when `commit_is_implicit`
    //   says so (Unix without traps);
    // - on Unix a decommit works on adjacent mapped pages of several reservations
    //   (`decommit_may_span`);
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
            let align = align.max_with(os::granularity());
            if self.huge {
                return os::reserve_huge(size, align, self.trap);
            }
            os::reserve(size, align, self.trap)
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
            unsafe { os::commit(ptr, size, self.trap) }
        }

        unsafe fn decommit(&self, ptr: NonNull<u8>, size: usize) {
            debug_assert!(
                check_range(ptr, size, os::page_size()).is_ok(),
                "SystemPages::decommit({ptr:p}, {size}): not a page-aligned range"
            );
            // SAFETY: the caller passes a range inside a live reservation that it no
            // longer reads or writes.
            unsafe { os::decommit(ptr, size, self.trap) }
        }

        fn commit_is_implicit(&self) -> bool {
            !self.traps()
        }

        fn decommitted_reads_zero(&self) -> bool {
            true
        }

        fn decommit_may_span(&self) -> bool {
            // `madvise` and `mprotect` (or a fixed mapping) take any mapped range on
            // Unix; `VirtualFree` decommits inside one reservation only.
            cfg!(unix)
        }
    }
}
