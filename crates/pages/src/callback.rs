//! dsmalloc's API, literally: four C function pointers.

use core::ffi::{c_int, c_void};
use core::fmt;
use core::ptr::NonNull;

use bento_align::Alignment;

use crate::{Invalid, PageError, PageSource, check_range, check_size};

/// Reserves `size` bytes of page-aligned address space; null on failure.
pub type ReserveFn = unsafe extern "C" fn(size: usize) -> *mut c_void;
/// Releases a whole reservation.
pub type ReleaseFn = unsafe extern "C" fn(ptr: *mut c_void, size: usize);
/// Commits a range; returns 0 on success, any other value is an error code.
pub type CommitFn = unsafe extern "C" fn(ptr: *mut c_void, size: usize) -> c_int;
/// Decommits a range.
pub type DecommitFn = unsafe extern "C" fn(ptr: *mut c_void, size: usize);

/// A page source made of four `extern "C"` callbacks, as dsmalloc takes them: the
/// form a C or C++ engine hands its memory to bento in.
///
/// `commit` and `decommit` are optional: `None` means commit is implicit (reserved
/// memory is usable at once) and decommit does nothing. The callbacks reserve
/// page-aligned memory only, so an alignment above the page size is refused with
/// [`Invalid::AlignmentTooLarge`].
///
/// ```
/// use bento_align::Alignment;
/// use bento_pages::{CallbackPages, PageSource};
/// use core::ffi::c_void;
///
/// // A reserve over the system allocator, for the example.
/// unsafe extern "C" fn reserve(size: usize) -> *mut c_void {
///     let layout = std::alloc::Layout::from_size_align(size, 4096).unwrap();
///     // SAFETY: `size` is non-zero (the source checks it before calling).
///     unsafe { std::alloc::alloc_zeroed(layout).cast() }
/// }
/// unsafe extern "C" fn release(ptr: *mut c_void, size: usize) {
///     let layout = std::alloc::Layout::from_size_align(size, 4096).unwrap();
///     // SAFETY: `ptr` came from `reserve` with the same size.
///     unsafe { std::alloc::dealloc(ptr.cast(), layout) }
/// }
///
/// // SAFETY: `reserve` returns zeroed, 4096-aligned, exclusive memory usable at once;
/// // `release` frees exactly what `reserve` returned.
/// let pages = unsafe { CallbackPages::new(Alignment::PAGE_4K, reserve, release, None, None) };
/// let base = pages.reserve(8192, Alignment::MIN).unwrap();
/// assert!(pages.commit_is_implicit());
/// // SAFETY: the live reservation, never explicitly committed.
/// unsafe { pages.release(base, 8192) };
/// ```
#[derive(Clone, Copy)]
pub struct CallbackPages {
    page: Alignment,
    reserve: ReserveFn,
    release: ReleaseFn,
    commit: Option<CommitFn>,
    decommit: Option<DecommitFn>,
}

impl CallbackPages {
    /// A source calling `reserve`, `release` and, when given, `commit` and `decommit`,
    /// with pages of `page` bytes.
    ///
    /// # Safety
    ///
    /// The caller must ensure that the callbacks together uphold every guarantee of
    /// [`PageSource`] (with `commit_is_implicit` true exactly when `commit` is `None`,
    /// and `decommitted_reads_zero` false): `reserve` returns null or `page`-aligned
    /// memory of the size asked, shared with no other reservation; `commit` returning
    /// 0 makes a range usable; none of them calls back into bento or, if this source
    /// backs a global allocator, into the global allocator; they may be called from
    /// any thread this source is shared with.
    pub const unsafe fn new(
        page: Alignment,
        reserve: ReserveFn,
        release: ReleaseFn,
        commit: Option<CommitFn>,
        decommit: Option<DecommitFn>,
    ) -> Self {
        Self {
            page,
            reserve,
            release,
            commit,
            decommit,
        }
    }
}

impl fmt::Debug for CallbackPages {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CallbackPages")
            .field("page", &self.page)
            .field("commit", &self.commit.is_some())
            .field("decommit", &self.decommit.is_some())
            .finish_non_exhaustive()
    }
}

// SAFETY: the constructor's caller guaranteed that the callbacks uphold the contract;
// this type only checks arguments and forwards.
unsafe impl PageSource for CallbackPages {
    fn page_size(&self) -> usize {
        self.page.get()
    }

    fn reserve(&self, size: usize, align: Alignment) -> Result<NonNull<u8>, PageError> {
        check_size(size, self.page.get())?;
        if align > self.page {
            return Err(PageError::Invalid(Invalid::AlignmentTooLarge {
                align: align.get(),
                max: self.page.get(),
            }));
        }
        // SAFETY: `size` is a non-zero page multiple, what the callback expects.
        let p = unsafe { (self.reserve)(size) };
        let p = NonNull::new(p.cast::<u8>()).ok_or(PageError::OutOfAddressSpace { size })?;
        debug_assert!(
            p.addr().get() & self.page.mask() == 0,
            "CallbackPages: the reserve callback returned {p:p}, not aligned to {}",
            self.page
        );
        Ok(p)
    }

    unsafe fn release(&self, base: NonNull<u8>, size: usize) {
        // SAFETY: the caller passes exactly a live reservation from `reserve`.
        unsafe { (self.release)(base.as_ptr().cast(), size) }
    }

    unsafe fn commit(&self, ptr: NonNull<u8>, size: usize) -> Result<(), PageError> {
        check_range(ptr, size, self.page.get())?;
        let Some(commit) = self.commit else {
            return Ok(());
        };
        // SAFETY: the caller passes a page range inside a live reservation.
        match unsafe { commit(ptr.as_ptr().cast(), size) } {
            0 => Ok(()),
            code => Err(PageError::CommitRefused { size, code }),
        }
    }

    unsafe fn decommit(&self, ptr: NonNull<u8>, size: usize) {
        if let Some(decommit) = self.decommit {
            // SAFETY: the caller passes a page range inside a live reservation that it
            // no longer uses.
            unsafe { decommit(ptr.as_ptr().cast(), size) }
        }
    }

    fn commit_is_implicit(&self) -> bool {
        self.commit.is_none()
    }

    fn decommitted_reads_zero(&self) -> bool {
        false
    }
}
