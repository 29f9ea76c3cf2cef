//! [`PageSource`], the four callbacks every bento allocator that grows takes its
//! memory through, and the argument checks its implementations share.

use core::ptr::NonNull;

use bento_align::Alignment;

#[cfg(doc)]
use crate::CommitCache;
use crate::error::{Invalid, PageError};

/// Where memory comes from: dsmalloc's four callbacks.
///
/// A source hands out **reservations** of address space ([`reserve`](Self::reserve),
/// [`release`](Self::release)) and makes page-sized pieces of them usable
/// ([`commit`](Self::commit)) or gives their memory back while keeping the address
/// space ([`decommit`](Self::decommit)). Every bento allocator that grows takes its
/// memory from a `PageSource`.
///
/// All sizes are multiples of [`page_size`](Self::page_size) and all ranges are
/// page-aligned and inside one live reservation.
///
/// # Safety
///
/// Implementations must guarantee:
///
/// - `page_size` returns a power of two, the same value for the life of the instance.
/// - `reserve(size, align)` returns, on success, a pointer aligned to at least
///   `max(align, page_size)` to `size` bytes that belong to no other live reservation
///   of any source, valid (with the returned pointer's provenance) until released.
///   If `commit_is_implicit` is true they are readable and writable at once.
/// - After `commit(ptr, size)` returns `Ok`, the range is readable and writable until
///   it is decommitted or released. On `Err`, the range is left decommitted.
/// - After `decommit`, the range's contents are lost; when `decommitted_reads_zero` is
///   true, a range that is committed again (and a range never committed since it was
///   reserved) reads as zero.
/// - `commit_is_implicit`, `decommitted_reads_zero` and `decommit_may_span` return the
///   same value for the life of the instance.
/// - When `decommit_may_span` is true, `decommit` accepts a range made of adjacent
///   pages of several live reservations, as if each had been decommitted on its own.
/// - No method calls the global allocator, unless the type documents that it does
///   (`HeapPages`); such a source must not back a `#[global_allocator]`.
/// - The methods may be called from any thread the source is shared with; they do not
///   call back into the caller.
///
/// # Example
///
/// ```
/// use bento_align::Alignment;
/// use bento_pages::{PageSource, SystemPages};
///
/// let pages = SystemPages::new();
/// let size = 16 * pages.page_size();
/// let base = pages.reserve(size, Alignment::MIN).unwrap();
/// // SAFETY: the first page of a live reservation, a page-sized range.
/// unsafe {
///     pages.commit(base, pages.page_size()).unwrap();
///     base.write(7);
///     pages.decommit(base, pages.page_size());
///     pages.release(base, size);
/// }
/// ```
pub unsafe trait PageSource {
    /// The commit granularity in bytes: a power of two, constant per instance.
    fn page_size(&self) -> usize;

    /// Reserves `size` bytes of address space aligned to `max(align, page_size)`.
    ///
    /// `size` must be a non-zero multiple of the page size, or the call fails with
    /// [`PageError::Invalid`].
    fn reserve(&self, size: usize, align: Alignment) -> Result<NonNull<u8>, PageError>;

    /// Gives a whole reservation back.
    ///
    /// # Safety
    ///
    /// The caller must ensure that:
    /// - `base` and `size` are exactly those of a live reservation from this source;
    /// - every page of it committed through this source has been decommitted (so that
    ///   wrappers that count committed bytes stay exact);
    /// - nothing reads or writes the range afterwards.
    unsafe fn release(&self, base: NonNull<u8>, size: usize);

    /// Makes `[ptr, ptr + size)` readable and writable. The default does nothing and
    /// succeeds, for sources whose memory is usable once reserved.
    ///
    /// # Safety
    ///
    /// The caller must ensure that `ptr` is page-aligned, `size` a non-zero multiple of
    /// the page size, and the range inside one live reservation from this source.
    /// Sources check what they cheaply can and return [`PageError::Invalid`].
    unsafe fn commit(&self, ptr: NonNull<u8>, size: usize) -> Result<(), PageError> {
        let _ = (ptr, size);
        Ok(())
    }

    /// Gives the memory of `[ptr, ptr + size)` back, keeping the address space. The
    /// default does nothing.
    ///
    /// # Safety
    ///
    /// The caller must ensure what [`commit`](Self::commit) requires, and that nothing
    /// reads or writes the range until it is committed again.
    unsafe fn decommit(&self, ptr: NonNull<u8>, size: usize) {
        let _ = (ptr, size);
    }

    /// Whether reserved memory is usable without `commit` (dsmalloc's null commit
    /// callbacks). Callers still call `commit` and `decommit`, which are then cheap.
    fn commit_is_implicit(&self) -> bool {
        true
    }

    /// Whether memory reads as zero when committed after a decommit, or after its
    /// reservation.
    fn decommitted_reads_zero(&self) -> bool {
        false
    }

    /// Whether one [`decommit`](Self::decommit) may cover adjacent pages of different
    /// live reservations (the OS's pages on Unix: `madvise` takes any mapped range).
    /// A wrapper that gathers pages of unknown reservations into runs, as
    /// [`CommitCache`] does when it gives parked pages back, merges adjacent ones
    /// into one call only when this is true. The default is false.
    ///
    /// ```
    /// use bento_pages::{HeapPages, PageSource};
    ///
    /// assert!(!HeapPages::new().decommit_may_span());
    /// ```
    fn decommit_may_span(&self) -> bool {
        false
    }

    /// [`page_size`](Self::page_size) as an [`Alignment`].
    ///
    /// ```
    /// use bento_pages::{PageSource, SystemPages};
    ///
    /// let pages = SystemPages::new();
    /// assert_eq!(pages.page_alignment().get(), pages.page_size());
    /// ```
    fn page_alignment(&self) -> Alignment {
        Alignment::new(self.page_size()).expect("PageSource::page_size is a power of two")
    }
}

/// Writes `PageSource` methods that forward to another source: `|s| inner` names it
/// (`s` is the method's `&self`), and the list after it the methods, each a name of
/// `PageSource`'s or `properties` (the three that describe the source). With no
/// arguments: every method, to the source behind a reference or smart pointer.
macro_rules! forward_page_source {
    () => {
        $crate::forward_page_source!(
            |s| **s;
            page_size reserve release commit decommit properties
        );
    };
    (|$s:ident| $inner:expr; $($method:ident)*) => {
        $($crate::forward_page_source!(@$method |$s| $inner);)*
    };
    (@page_size |$s:ident| $inner:expr) => {
        fn page_size(&self) -> usize {
            let $s = self;
            $inner.page_size()
        }
    };
    (@reserve |$s:ident| $inner:expr) => {
        fn reserve(&self, size: usize, align: Alignment) -> Result<NonNull<u8>, PageError> {
            let $s = self;
            $inner.reserve(size, align)
        }
    };
    (@release |$s:ident| $inner:expr) => {
        unsafe fn release(&self, base: NonNull<u8>, size: usize) {
            let $s = self;
            // SAFETY: the caller upholds `release`'s contract, which is the inner
            // source's.
            unsafe { $inner.release(base, size) }
        }
    };
    (@commit |$s:ident| $inner:expr) => {
        unsafe fn commit(&self, ptr: NonNull<u8>, size: usize) -> Result<(), PageError> {
            let $s = self;
            // SAFETY: the caller upholds `commit`'s contract, which is the inner
            // source's.
            unsafe { $inner.commit(ptr, size) }
        }
    };
    (@decommit |$s:ident| $inner:expr) => {
        unsafe fn decommit(&self, ptr: NonNull<u8>, size: usize) {
            let $s = self;
            // SAFETY: the caller upholds `decommit`'s contract, which is the inner
            // source's.
            unsafe { $inner.decommit(ptr, size) }
        }
    };
    (@properties |$s:ident| $inner:expr) => {
        fn commit_is_implicit(&self) -> bool {
            let $s = self;
            $inner.commit_is_implicit()
        }

        fn decommitted_reads_zero(&self) -> bool {
            let $s = self;
            $inner.decommitted_reads_zero()
        }

        fn decommit_may_span(&self) -> bool {
            let $s = self;
            $inner.decommit_may_span()
        }
    };
}
pub(crate) use forward_page_source;

// SAFETY: every method forwards to `P`, which upholds the contract.
unsafe impl<P: PageSource + ?Sized> PageSource for &P {
    forward_page_source!();
}

// SAFETY: every method forwards to `P`, which upholds the contract.
#[cfg(feature = "alloc")]
unsafe impl<P: PageSource + ?Sized> PageSource for alloc::sync::Arc<P> {
    forward_page_source!();
}

/// Checks the arguments every source's `commit` and `decommit` share: a page-aligned
/// pointer and a non-zero multiple of the page size.
pub(crate) fn check_range(ptr: NonNull<u8>, size: usize, page: usize) -> Result<(), PageError> {
    check_size(size, page)?;
    if ptr.addr().get() & (page - 1) != 0 {
        return Err(PageError::Invalid(Invalid::Misaligned {
            addr: ptr.addr().get(),
            page,
        }));
    }
    Ok(())
}

/// Checks a `reserve` of `size` bytes from a source of `page`-byte pages, and gives
/// the alignment the reservation gets: `align`, at least a page.
pub(crate) fn check_reserve(
    size: usize,
    align: Alignment,
    page: Alignment,
) -> Result<Alignment, PageError> {
    check_size(size, page.get())?;
    Ok(align.max_with(page))
}

/// Checks that `size` is a non-zero multiple of `page`.
pub(crate) fn check_size(size: usize, page: usize) -> Result<(), PageError> {
    if size == 0 {
        return Err(PageError::Invalid(Invalid::ZeroSize));
    }
    if size & (page - 1) != 0 {
        return Err(PageError::Invalid(Invalid::NotPageMultiple { size, page }));
    }
    Ok(())
}
