//! The `Allocator` trait of allocator-api2 0.2 and 0.4, written for each allocator from
//! one set of inherent methods (the [`RawAlloc`] trait) by one macro.

use core::alloc::Layout;
use core::ptr::NonNull;

/// A request the allocator cannot satisfy (out of room, or an alignment it cannot
/// give). The `Allocator` impls turn it into each allocator-api2 version's
/// `AllocError`.
///
/// ```
/// use bento_primitives::AllocError;
///
/// assert_eq!(AllocError.to_string(), "out of memory in a bento allocator");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AllocError;

impl core::fmt::Display for AllocError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("out of memory in a bento allocator")
    }
}

impl core::error::Error for AllocError {}

/// The four operations every bento primitive implements once; `impl_allocator!` makes
/// them allocator-api2 `Allocator` impls for `&Type`.
///
/// # Safety
///
/// Implementations must guarantee what allocator-api2's `Allocator` does: `alloc`
/// returns a block of at least `layout.size()` bytes aligned to `layout.align()`,
/// valid until it is deallocated (or the allocator is reset, which takes `&mut`);
/// `grow` and `shrink` keep the first `min(old, new)` bytes and return a block fitting
/// `new`; on `Err` nothing changes.
// Unused only when both allocator-api2 features are off.
#[cfg_attr(not(any(feature = "api2-02", feature = "api2-04")), allow(dead_code))]
pub(crate) unsafe trait RawAlloc {
    fn alloc_raw(&self, layout: Layout) -> Result<NonNull<u8>, AllocError>;

    /// # Safety
    ///
    /// `ptr` is a live block of `self` allocated with `layout`.
    unsafe fn dealloc_raw(&self, ptr: NonNull<u8>, layout: Layout);

    /// Grows or shrinks a non-empty block to `new_size` bytes where it is; false (and
    /// nothing changes) when it cannot.
    ///
    /// # Safety
    ///
    /// `ptr` is a live block of `self` allocated with `old`, and `old.size() != 0`.
    unsafe fn resize_in_place(&self, ptr: NonNull<u8>, old: Layout, new_size: usize) -> bool;

    /// Grows in place when the block is suitably aligned and can be extended, else
    /// moves it.
    ///
    /// # Safety
    ///
    /// `ptr` is a live block of `self` allocated with `old`; `new.size() >= old.size()`.
    unsafe fn grow_raw(
        &self,
        ptr: NonNull<u8>,
        old: Layout,
        new: Layout,
    ) -> Result<NonNull<u8>, AllocError> {
        let aligned = ptr.addr().get() & (new.align() - 1) == 0;
        // SAFETY: the caller guarantees `ptr` is live with `old`, checked non-empty.
        if old.size() != 0 && aligned && unsafe { self.resize_in_place(ptr, old, new.size()) } {
            return Ok(ptr);
        }
        // SAFETY: the caller guarantees `ptr` is live with `old`.
        unsafe { self.relocate(ptr, old, new) }
    }

    /// Shrinks in place (giving the tail back when the allocator can), frees the block
    /// for a zero size, and moves it only for a stricter alignment.
    ///
    /// # Safety
    ///
    /// `ptr` is a live block of `self` allocated with `old`; `new.size() <= old.size()`.
    unsafe fn shrink_raw(
        &self,
        ptr: NonNull<u8>,
        old: Layout,
        new: Layout,
    ) -> Result<NonNull<u8>, AllocError> {
        if new.size() == 0 {
            // SAFETY: the caller guarantees `ptr` is live with `old`.
            unsafe { self.dealloc_raw(ptr, old) };
            return Ok(dangling(new));
        }
        if ptr.addr().get() & (new.align() - 1) != 0 {
            // SAFETY: the caller guarantees `ptr` is live with `old`.
            return unsafe { self.relocate(ptr, old, new) };
        }
        // A block that cannot give its tail back keeps it; the pointer stays valid.
        // SAFETY: live with `old`, and `old.size() >= new.size() > 0`.
        unsafe { self.resize_in_place(ptr, old, new.size()) };
        Ok(ptr)
    }

    /// Moves a block that cannot be resized in place: allocates for `new`, copies the
    /// first `min(old, new)` bytes, frees the old block. On `Err` nothing changes.
    ///
    /// # Safety
    ///
    /// `ptr` is a live block of `self` allocated with `old`.
    unsafe fn relocate(
        &self,
        ptr: NonNull<u8>,
        old: Layout,
        new: Layout,
    ) -> Result<NonNull<u8>, AllocError> {
        let fresh = self.alloc_raw(new)?;
        // SAFETY: `ptr` holds `old.size()` bytes (the caller's contract) and `fresh`
        // `new.size()`; a fresh block never overlaps a live one. Then `ptr` is freed
        // with the layout it was allocated with.
        unsafe {
            core::ptr::copy_nonoverlapping(
                ptr.as_ptr(),
                fresh.as_ptr(),
                old.size().min(new.size()),
            );
            self.dealloc_raw(ptr, old);
        }
        Ok(fresh)
    }
}

/// Writes `unsafe impl Allocator for $ty` for each enabled allocator-api2 version, for
/// a `$ty` that is `&T` (with `T: RawAlloc`) or a `Copy` handle that is itself
/// `RawAlloc`. Written as `impl_allocator!(impl['a, 'buf] for &'a Stack<'buf>)`.
macro_rules! impl_allocator {
    (impl[$($gen:tt)*] for $ty:ty) => {
        #[cfg(feature = "api2-02")]
        $crate::alloc_api::impl_allocator!(@one allocator_api2, [$($gen)*], $ty);
        #[cfg(feature = "api2-04")]
        $crate::alloc_api::impl_allocator!(@one allocator_api2_04, [$($gen)*], $ty);
    };
    (@one $api:ident, [$($gen:tt)*], $ty:ty) => {
        // SAFETY: forwards to `RawAlloc`, whose contract is `Allocator`'s; the caller
        // obligations of each method are passed on unchanged. A handle type refers to
        // its allocator, so moving the handle moves no memory.
        unsafe impl<$($gen)*> $api::alloc::Allocator for $ty {
            #[inline]
            fn allocate(
                &self,
                layout: core::alloc::Layout,
            ) -> Result<core::ptr::NonNull<[u8]>, $api::alloc::AllocError> {
                use $crate::alloc_api::RawAlloc as _;
                match self.alloc_raw(layout) {
                    Ok(p) => Ok(core::ptr::NonNull::slice_from_raw_parts(p, layout.size())),
                    Err(_) => Err($api::alloc::AllocError),
                }
            }

            #[inline]
            unsafe fn deallocate(&self, ptr: core::ptr::NonNull<u8>, layout: core::alloc::Layout) {
                use $crate::alloc_api::RawAlloc as _;
                // SAFETY: the caller's `Allocator::deallocate` contract.
                unsafe { self.dealloc_raw(ptr, layout) }
            }

            unsafe fn grow(
                &self,
                ptr: core::ptr::NonNull<u8>,
                old: core::alloc::Layout,
                new: core::alloc::Layout,
            ) -> Result<core::ptr::NonNull<[u8]>, $api::alloc::AllocError> {
                use $crate::alloc_api::RawAlloc as _;
                // SAFETY: the caller's `Allocator::grow` contract.
                match unsafe { self.grow_raw(ptr, old, new) } {
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
                use $crate::alloc_api::RawAlloc as _;
                // SAFETY: the caller's `Allocator::shrink` contract.
                match unsafe { self.shrink_raw(ptr, old, new) } {
                    Ok(p) => Ok(core::ptr::NonNull::slice_from_raw_parts(p, new.size())),
                    Err(_) => Err($api::alloc::AllocError),
                }
            }
        }
    };
}

pub(crate) use impl_allocator;

/// The dangling, aligned pointer a zero-size request gets.
#[inline]
pub(crate) fn dangling(layout: Layout) -> NonNull<u8> {
    // `Layout` guarantees a non-zero power-of-two alignment.
    NonNull::without_provenance(
        core::num::NonZeroUsize::new(layout.align()).expect("align is non-zero"),
    )
}
