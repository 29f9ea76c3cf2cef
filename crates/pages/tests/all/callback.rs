//! `CallbackPages` over C-ABI callbacks that call the OS through the system source.

use core::ffi::{c_int, c_void};
use core::ptr::NonNull;

use bento_align::Alignment;
use bento_pages::{CallbackPages, Invalid, PageError, PageSource, SystemPages};

use crate::common::disjoint;

const PAGE: usize = 4096;

unsafe extern "C" fn reserve(size: usize) -> *mut c_void {
    SystemPages::new()
        .reserve(size, Alignment::MIN)
        .map_or(core::ptr::null_mut(), |p| p.as_ptr().cast())
}

unsafe extern "C" fn release(ptr: *mut c_void, size: usize) {
    // SAFETY: `CallbackPages` passes back what `reserve` returned.
    unsafe { SystemPages::new().release(NonNull::new_unchecked(ptr.cast()), size) }
}

unsafe extern "C" fn commit(ptr: *mut c_void, size: usize) -> c_int {
    // SAFETY: `CallbackPages` passes a page range of a live reservation.
    match unsafe { SystemPages::new().commit(NonNull::new_unchecked(ptr.cast()), size) } {
        Ok(()) => 0,
        Err(PageError::CommitRefused { code, .. }) => code.max(1),
        Err(_) => -1,
    }
}

unsafe extern "C" fn decommit(ptr: *mut c_void, size: usize) {
    // SAFETY: `CallbackPages` passes a page range of a live reservation.
    unsafe { SystemPages::new().decommit(NonNull::new_unchecked(ptr.cast()), size) }
}

unsafe extern "C" fn refuse(_: *mut c_void, _: usize) -> c_int {
    12 // ENOMEM
}

fn callbacks() -> CallbackPages {
    assert!(PAGE.is_multiple_of(SystemPages::new().page_size()));
    // SAFETY: the callbacks forward to `SystemPages`, which upholds the contract, and
    // its page size divides the 4 KiB pages declared here (asserted above).
    unsafe {
        CallbackPages::new(
            Alignment::PAGE_4K,
            reserve,
            release,
            Some(commit),
            Some(decommit),
        )
    }
}

#[test]
fn round_trips_through_the_callbacks() {
    let pages = callbacks();
    assert!(!pages.commit_is_implicit());
    // Alignments above the page are refused (see below), so this is the page-aligned
    // part of `common::round_trip`.
    let base = pages.reserve(8 * PAGE, Alignment::MIN).unwrap();
    // SAFETY: ranges of the live reservation, decommitted before release.
    unsafe {
        pages.commit(base, 8 * PAGE).unwrap();
        base.add(5 * PAGE).write(3);
        assert_eq!(base.add(5 * PAGE).read(), 3);
        pages.decommit(base, 8 * PAGE);
        pages.release(base, 8 * PAGE);
    }
    disjoint(&pages);
}

#[test]
fn large_alignments_are_refused_clearly() {
    assert_eq!(
        callbacks().reserve(PAGE, Alignment::new(2 * PAGE).unwrap()),
        Err(PageError::Invalid(Invalid::AlignmentTooLarge {
            align: 2 * PAGE,
            max: PAGE
        }))
    );
}

#[test]
fn a_refusing_commit_callback_is_an_error_with_its_code() {
    // SAFETY: as in `callbacks`, with a commit that always refuses (allowed: a failed
    // commit leaves the range decommitted).
    let pages = unsafe {
        CallbackPages::new(
            Alignment::PAGE_4K,
            reserve,
            release,
            Some(refuse),
            Some(decommit),
        )
    };
    let base = pages.reserve(PAGE, Alignment::MIN).unwrap();
    // SAFETY: a page of the live reservation; nothing committed before release.
    unsafe {
        assert_eq!(
            pages.commit(base, PAGE),
            Err(PageError::CommitRefused {
                size: PAGE,
                code: 12
            })
        );
        pages.release(base, PAGE);
    }
}

#[test]
fn without_commit_callbacks_commit_is_implicit() {
    // SAFETY: reserve through `SystemPages` would need commits; these callbacks reserve
    // committed memory instead, so commit is truly implicit.
    unsafe extern "C" fn reserve_rw(size: usize) -> *mut c_void {
        let p = SystemPages::new().reserve(size, Alignment::MIN).unwrap();
        // SAFETY: the whole reservation just made.
        unsafe { SystemPages::new().commit(p, size).unwrap() };
        p.as_ptr().cast()
    }
    // SAFETY: `reserve_rw` returns usable page-aligned memory; `release` unmaps it.
    let pages = unsafe { CallbackPages::new(Alignment::PAGE_4K, reserve_rw, release, None, None) };
    assert!(pages.commit_is_implicit());
    let base = pages.reserve(2 * PAGE, Alignment::MIN).unwrap();
    // SAFETY: the reservation is usable at once; released whole.
    unsafe {
        base.write(1);
        pages.commit(base, PAGE).unwrap();
        pages.decommit(base, PAGE);
        pages.release(base, 2 * PAGE);
    }
}
