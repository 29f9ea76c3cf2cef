//! The Unix side of `SystemPages`, through rustix.

use core::ffi::c_void;
use core::ptr::{self, NonNull};

use bento_align::Alignment;
use rustix::mm::{self, MapFlags, MprotectFlags, ProtFlags};

use crate::error::PageError;

#[inline]
pub(super) fn page_size() -> usize {
    rustix::param::page_size()
}

/// Reservations are aligned to pages on Unix.
#[inline]
pub(super) fn granularity() -> Alignment {
    Alignment::new(page_size()).expect("the OS page size is a power of two")
}

/// The protection of reserved (and, with `trap`, decommitted) memory: none with
/// `trap`, read/write without.
fn reserved_protection(trap: bool) -> ProtFlags {
    if trap {
        ProtFlags::empty()
    } else {
        ProtFlags::READ | ProtFlags::WRITE
    }
}

/// Maps `size` bytes of address space aligned to `align` (at least a page):
/// inaccessible with `trap`, else readable and writable, with no memory behind it
/// until a page is first touched.
pub(super) fn reserve(size: usize, align: Alignment, trap: bool) -> Result<NonNull<u8>, PageError> {
    let page = page_size();
    // Over-reserve so that an aligned start exists, then unmap the excess.
    let extra = align.get().saturating_sub(page);
    let total = size
        .checked_add(extra)
        .ok_or(PageError::OutOfAddressSpace { size })?;
    // SAFETY: a fresh anonymous mapping at an address the kernel chooses touches no
    // existing memory.
    let raw = unsafe {
        mm::mmap_anonymous(
            ptr::null_mut(),
            total,
            reserved_protection(trap),
            MapFlags::PRIVATE | MapFlags::NORESERVE,
        )
    }
    .map_err(|_| PageError::OutOfAddressSpace { size })?;
    let raw = raw.cast::<u8>();
    let lead = raw.align_offset(align.get());
    debug_assert!(
        lead <= extra,
        "mmap returned a pointer that is not page-aligned"
    );
    let trail = extra - lead;
    if lead > 0 {
        // SAFETY: `[raw, raw + lead)` is the head of the mapping just made, unused.
        unsafe { unmap(raw, lead) };
    }
    // SAFETY: `lead <= extra < total`, so the result is inside the mapping.
    let base = unsafe { raw.add(lead) };
    if trail > 0 {
        // SAFETY: `[base + size, base + size + trail)` is the tail of the mapping.
        unsafe { unmap(base.add(size), trail) };
    }
    NonNull::new(base).ok_or(PageError::OutOfAddressSpace { size })
}

/// Whether `SystemPages::with_huge_pages` is offered, and if not, why.
#[cfg(any(target_os = "linux", target_os = "android"))]
pub(super) const HUGE_PAGES: Result<(), &'static str> = Ok(());
#[cfg(not(any(target_os = "linux", target_os = "android")))]
pub(super) const HUGE_PAGES: Result<(), &'static str> =
    Err("only Linux's transparent huge pages are offered on Unix");

/// The size of a transparent huge page on x86-64 and of the usual arm64 kernels.
const HUGE_PAGE: usize = 2 << 20;

/// As [`reserve`], for a source with huge pages: a reservation that can hold one
/// is aligned to it and advised `MADV_HUGEPAGE` (a kernel without transparent huge
/// pages refuses the advice, which changes nothing: the pages are the usual ones).
pub(super) fn reserve_huge(
    size: usize,
    align: Alignment,
    trap: bool,
) -> Result<NonNull<u8>, PageError> {
    if size < HUGE_PAGE {
        return reserve(size, align, trap);
    }
    let huge = Alignment::new(HUGE_PAGE).expect("a power of two");
    let base = reserve(size, align.max_with(huge), trap)?;
    #[cfg(any(target_os = "linux", target_os = "android"))]
    {
        // SAFETY: advice on the mapping just made, which nothing uses yet; it changes
        // how the kernel backs the pages, not their contents.
        let advised = unsafe { mm::madvise(base.as_ptr().cast(), size, mm::Advice::LinuxHugepage) };
        // Refused where the kernel has no transparent huge pages: the usual pages.
        let _ = advised;
    }
    Ok(base)
}

/// # Safety
///
/// The caller must pass a page-aligned range of a mapping it owns and no longer uses.
unsafe fn unmap(ptr: *mut u8, size: usize) {
    // SAFETY: the caller's contract.
    let result = unsafe { mm::munmap(ptr.cast::<c_void>(), size) };
    debug_assert!(result.is_ok(), "munmap({ptr:p}, {size}) failed: {result:?}");
}

/// # Safety
///
/// The caller must pass exactly a live reservation.
pub(super) unsafe fn release(base: NonNull<u8>, size: usize) {
    // SAFETY: the caller's contract.
    unsafe { unmap(base.as_ptr(), size) }
}

/// Makes the range accessible: an `mprotect` with `trap`; nothing without, since the
/// whole reservation is already read/write and the kernel gives a page memory when
/// it is first touched.
///
/// # Safety
///
/// The caller must pass a page-aligned range inside a live reservation.
pub(super) unsafe fn commit(ptr: NonNull<u8>, size: usize, trap: bool) -> Result<(), PageError> {
    if !trap {
        return Ok(());
    }
    // SAFETY: the range is inside a mapping this source made; changing its protection
    // affects no other memory.
    unsafe {
        mm::mprotect(
            ptr.as_ptr().cast::<c_void>(),
            size,
            MprotectFlags::READ | MprotectFlags::WRITE,
        )
    }
    .map_err(|e| PageError::CommitRefused {
        size,
        code: e.raw_os_error(),
    })
}

/// Gives the range's memory back in one call (and with `trap`, makes it
/// inaccessible in a second). Without `trap` the mapping stays whole, so decommitting
/// never splits it into more kernel mappings.
///
/// # Safety
///
/// The caller must pass a page-aligned range inside a live reservation that it no
/// longer reads or writes.
pub(super) unsafe fn decommit(ptr: NonNull<u8>, size: usize, trap: bool) {
    let addr = ptr.as_ptr().cast::<c_void>();
    // Give the memory back. On Linux `MADV_DONTNEED` drops the pages at once and
    // later reads see zero pages (plain `Advice::DontNeed` is POSIX's, a no-op there).
    #[cfg(any(target_os = "linux", target_os = "android"))]
    {
        // SAFETY: the range is inside a mapping of this source and unused.
        let result = unsafe { mm::madvise(addr, size, mm::Advice::LinuxDontNeed) };
        debug_assert!(
            result.is_ok(),
            "madvise({addr:p}, {size}) failed: {result:?}"
        );
        if trap {
            // SAFETY: as above; a stray access now faults.
            let result = unsafe { mm::mprotect(addr, size, MprotectFlags::empty()) };
            debug_assert!(
                result.is_ok(),
                "mprotect({addr:p}, {size}) failed: {result:?}"
            );
        }
    }
    // Elsewhere, map fresh zero pages (inaccessible with `trap`) over the range in one
    // step.
    #[cfg(not(any(target_os = "linux", target_os = "android")))]
    {
        // SAFETY: `MAP_FIXED` replaces only the caller's unused range of this source's
        // mapping.
        let result = unsafe {
            mm::mmap_anonymous(
                addr,
                size,
                reserved_protection(trap),
                MapFlags::PRIVATE | MapFlags::FIXED | MapFlags::NORESERVE,
            )
        };
        debug_assert!(
            result.is_ok(),
            "mmap(MAP_FIXED) over {addr:p} failed: {result:?}"
        );
    }
}
