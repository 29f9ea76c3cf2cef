//! The Windows side of `SystemPages`, through windows-sys.

use core::ffi::c_void;
use core::ptr::{self, NonNull};

use bento_align::Alignment;
use windows_sys::Win32::Foundation::GetLastError;
use windows_sys::Win32::System::Memory::{
    MEM_COMMIT, MEM_DECOMMIT, MEM_RELEASE, MEM_RESERVE, PAGE_NOACCESS, PAGE_READWRITE,
    VirtualAlloc, VirtualFree,
};
use windows_sys::Win32::System::SystemInformation::{GetSystemInfo, SYSTEM_INFO};

use crate::error::PageError;

fn system_info() -> SYSTEM_INFO {
    // SAFETY: `SYSTEM_INFO` is plain data for which all-zero is a valid value, and
    // `GetSystemInfo` fills it in.
    unsafe {
        let mut info: SYSTEM_INFO = core::mem::zeroed();
        GetSystemInfo(&mut info);
        info
    }
}

/// The commit granularity.
pub(super) fn page_size() -> usize {
    system_info().dwPageSize as usize
}

/// The reservation granularity (64 KiB on every current Windows).
pub(super) fn granularity() -> Alignment {
    Alignment::new(system_info().dwAllocationGranularity as usize)
        .expect("the allocation granularity is a power of two")
}

/// How many times to retry an aligned reservation that another thread raced for.
const ALIGNED_RETRIES: usize = 16;

/// Reserves `size` bytes aligned to `align` (at least the allocation granularity).
/// Windows commits explicitly, so decommitted pages always fault and `_trap` changes
/// nothing.
/// Why `SystemPages::with_huge_pages` is not offered on Windows.
pub(super) const HUGE_PAGES: Result<(), &'static str> =
    Err("Windows' large pages are committed whole when reserved and cannot be decommitted");

/// Never called: `HUGE_PAGES` refuses them, so no source asks.
pub(super) fn reserve_huge(
    size: usize,
    align: Alignment,
    trap: bool,
) -> Result<NonNull<u8>, PageError> {
    reserve(size, align, trap)
}

pub(super) fn reserve(
    size: usize,
    align: Alignment,
    _trap: bool,
) -> Result<NonNull<u8>, PageError> {
    let oom = PageError::OutOfAddressSpace { size };
    if align <= granularity() {
        // SAFETY: a fresh reservation at an address the OS chooses.
        let p = unsafe { VirtualAlloc(ptr::null(), size, MEM_RESERVE, PAGE_NOACCESS) };
        return NonNull::new(p.cast::<u8>()).ok_or(oom);
    }
    // Windows cannot trim a reservation: find an aligned address inside a larger one,
    // release it, and reserve exactly there (another thread may take it: retry).
    let total = size.checked_add(align.get()).ok_or(oom)?;
    for _ in 0..ALIGNED_RETRIES {
        // SAFETY: a fresh reservation, released at once.
        let probe = unsafe { VirtualAlloc(ptr::null(), total, MEM_RESERVE, PAGE_NOACCESS) };
        if probe.is_null() {
            return Err(oom);
        }
        let aligned = bento_align::align_up(probe.addr(), align).ok_or(oom)?;
        // SAFETY: `probe` is the reservation just made.
        unsafe { VirtualFree(probe, 0, MEM_RELEASE) };
        // The address is only a request to the OS, never dereferenced.
        let want = ptr::without_provenance::<c_void>(aligned);
        // SAFETY: a fresh reservation at a requested address; the OS refuses it if the
        // range is taken.
        let p = unsafe { VirtualAlloc(want, size, MEM_RESERVE, PAGE_NOACCESS) };
        if let Some(p) = NonNull::new(p.cast::<u8>()) {
            return Ok(p);
        }
    }
    Err(oom)
}

/// # Safety
///
/// The caller must pass exactly a live reservation.
pub(super) unsafe fn release(base: NonNull<u8>, _size: usize) {
    // SAFETY: the caller's contract; `MEM_RELEASE` takes size 0 and the base.
    let ok = unsafe { VirtualFree(base.as_ptr().cast(), 0, MEM_RELEASE) };
    debug_assert!(ok != 0, "VirtualFree(MEM_RELEASE) failed");
}

/// # Safety
///
/// The caller must pass a page-aligned range inside a live reservation.
pub(super) unsafe fn commit(ptr: NonNull<u8>, size: usize, _trap: bool) -> Result<(), PageError> {
    // SAFETY: the range is inside a reservation of this source.
    let p = unsafe { VirtualAlloc(ptr.as_ptr().cast(), size, MEM_COMMIT, PAGE_READWRITE) };
    if p.is_null() {
        // SAFETY: reads the calling thread's last error; no preconditions.
        let code = unsafe { GetLastError() } as i32;
        Err(PageError::CommitRefused { size, code })
    } else {
        Ok(())
    }
}

/// # Safety
///
/// The caller must pass a page-aligned range inside a live reservation that it no
/// longer reads or writes.
pub(super) unsafe fn decommit(ptr: NonNull<u8>, size: usize, _trap: bool) {
    // SAFETY: the caller's contract.
    let ok = unsafe { VirtualFree(ptr.as_ptr().cast(), size, MEM_DECOMMIT) };
    debug_assert!(ok != 0, "VirtualFree(MEM_DECOMMIT) failed");
}
