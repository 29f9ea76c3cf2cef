//! The `Allocator` trait of allocator-api2 0.2 and 0.4 for `&MemorySpace` and
//! `&LockedSpace`, written once by a macro from three raw operations.

use core::alloc::Layout;
use core::ptr::NonNull;

use crate::space::dangling;

/// A request the space cannot satisfy. The `Allocator` impls turn it into each
/// allocator-api2 version's `AllocError`.
///
/// ```
/// use bento_space::AllocError;
///
/// assert_eq!(AllocError.to_string(), "out of memory in a bento memory space");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AllocError;

impl core::fmt::Display for AllocError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("out of memory in a bento memory space")
    }
}

impl core::error::Error for AllocError {}

/// The operations the `Allocator` impls are written from.
///
/// # Safety
///
/// Implementations must guarantee what `MemorySpace`'s methods of the same names do:
/// `raw_alloc` returns a block of at least `layout.size() > 0` bytes aligned to
/// `layout.align()`, valid until freed; `raw_resize` keeps the block where it is and
/// returns true only when it now holds `new_size` bytes.
#[cfg_attr(not(any(feature = "api2-02", feature = "api2-04")), allow(dead_code))]
pub(crate) unsafe trait RawSpace {
    fn raw_alloc(&self, layout: Layout) -> Result<NonNull<u8>, AllocError>;

    /// # Safety
    ///
    /// `ptr` is a live block of `self`, allocated with `layout` (non-zero size) or
    /// resized to it last.
    unsafe fn raw_free(&self, ptr: NonNull<u8>, layout: Layout);

    /// # Safety
    ///
    /// `ptr` is a live block of `self`.
    unsafe fn raw_resize(&self, ptr: NonNull<u8>, new_size: usize) -> bool;
}

/// `Allocator::grow` and `shrink` from the raw operations: in place when the block is
/// aligned for `new` and can be resized there, else allocate, copy and free.
///
/// # Safety
///
/// `ptr` is a live block of `space` allocated (or last resized) with `old`.
#[cfg_attr(not(any(feature = "api2-02", feature = "api2-04")), allow(dead_code))]
pub(crate) unsafe fn resize<S: RawSpace + ?Sized>(
    space: &S,
    ptr: NonNull<u8>,
    old: Layout,
    new: Layout,
) -> Result<NonNull<u8>, AllocError> {
    if old.size() == 0 {
        return if new.size() == 0 {
            Ok(dangling(new.align()))
        } else {
            space.raw_alloc(new)
        };
    }
    if new.size() == 0 {
        // SAFETY: the caller's contract.
        unsafe { space.raw_free(ptr, old) };
        return Ok(dangling(new.align()));
    }
    let aligned = ptr.addr().get() & (new.align() - 1) == 0;
    // SAFETY: the caller's contract.
    if aligned && unsafe { space.raw_resize(ptr, new.size()) } {
        return Ok(ptr);
    }
    let fresh = space.raw_alloc(new)?;
    // SAFETY: `ptr` holds `old.size()` bytes and `fresh` `new.size()`; they are
    // different live blocks. Then `ptr` is freed, as the caller gave it up.
    unsafe {
        core::ptr::copy_nonoverlapping(ptr.as_ptr(), fresh.as_ptr(), old.size().min(new.size()));
        space.raw_free(ptr, old);
    }
    Ok(fresh)
}

/// Writes `unsafe impl Allocator for $ty` for each enabled allocator-api2 version,
/// for a `$ty` that is `&T` with `T: RawSpace`.
macro_rules! impl_allocator {
    (impl[$($gen:tt)*] for $ty:ty) => {
        #[cfg(feature = "api2-02")]
        $crate::alloc_api::impl_allocator!(@one allocator_api2, [$($gen)*], $ty);
        #[cfg(feature = "api2-04")]
        $crate::alloc_api::impl_allocator!(@one allocator_api2_04, [$($gen)*], $ty);
    };
    (@one $api:ident, [$($gen:tt)*], $ty:ty) => {
        // SAFETY: forwards to `RawSpace`, whose contract is `Allocator`'s; zero-size
        // layouts get dangling pointers and are never passed on; the caller
        // obligations of each method are passed on unchanged. A reference moves no
        // memory.
        unsafe impl<$($gen)*> $api::alloc::Allocator for $ty {
            #[inline]
            fn allocate(
                &self,
                layout: core::alloc::Layout,
            ) -> Result<core::ptr::NonNull<[u8]>, $api::alloc::AllocError> {
                use $crate::alloc_api::RawSpace as _;
                let p = if layout.size() == 0 {
                    $crate::space::dangling(layout.align())
                } else {
                    self.raw_alloc(layout).map_err(|_| $api::alloc::AllocError)?
                };
                Ok(core::ptr::NonNull::slice_from_raw_parts(p, layout.size()))
            }

            #[inline]
            unsafe fn deallocate(&self, ptr: core::ptr::NonNull<u8>, layout: core::alloc::Layout) {
                use $crate::alloc_api::RawSpace as _;
                if layout.size() != 0 {
                    // SAFETY: the caller's `Allocator::deallocate` contract; a
                    // non-zero size means a real block.
                    unsafe { self.raw_free(ptr, layout) }
                }
            }

            unsafe fn grow(
                &self,
                ptr: core::ptr::NonNull<u8>,
                old: core::alloc::Layout,
                new: core::alloc::Layout,
            ) -> Result<core::ptr::NonNull<[u8]>, $api::alloc::AllocError> {
                // SAFETY: the caller's `Allocator::grow` contract.
                match unsafe { $crate::alloc_api::resize(*self, ptr, old, new) } {
                    Ok(p) => Ok(core::ptr::NonNull::slice_from_raw_parts(p, new.size())),
                    Err(_) => Err($api::alloc::AllocError),
                }
            }

            unsafe fn shrink(
                &self,
                ptr: core::ptr::NonNull<u8>,
                old: core::alloc::Layout,
                new: core::alloc::Layout,
            ) -> Result<core::ptr::NonNull<[u8]>, $api::alloc::AllocError> {
                // SAFETY: the caller's `Allocator::shrink` contract.
                match unsafe { $crate::alloc_api::resize(*self, ptr, old, new) } {
                    Ok(p) => Ok(core::ptr::NonNull::slice_from_raw_parts(p, new.size())),
                    Err(_) => Err($api::alloc::AllocError),
                }
            }
        }
    };
}

pub(crate) use impl_allocator;
