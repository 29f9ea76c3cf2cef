//! What every bento allocator shares on its `Allocator` side: the one [`AllocError`],
//! the [`RawAlloc`] operations an allocator implements once, and the
//! [`impl_allocator!`](crate::impl_allocator) macro that turns them into the
//! allocator-api2 0.2 and 0.4 `Allocator` impls.

use core::alloc::Layout;
use core::num::NonZeroUsize;
use core::ptr::NonNull;

/// A request a bento allocator cannot satisfy: out of room, or an alignment it cannot
/// give. Every bento allocator returns this one type; the `Allocator` impls turn it
/// into each allocator-api2 version's `AllocError`.
///
/// ```
/// use bento_pages::AllocError;
///
/// assert_eq!(AllocError.to_string(), "out of memory in a bento allocator");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("out of memory in a bento allocator")]
pub struct AllocError;

/// The dangling, aligned pointer a zero-size request gets.
///
/// ```
/// use core::alloc::Layout;
///
/// let p = bento_pages::dangling(Layout::new::<u64>());
/// assert_eq!(p.addr().get(), 8);
/// ```
#[inline]
#[must_use]
pub const fn dangling(layout: Layout) -> NonNull<u8> {
    // `Layout` guarantees a non-zero power-of-two alignment.
    match NonZeroUsize::new(layout.align()) {
        Some(align) => NonNull::without_provenance(align),
        None => unreachable!(),
    }
}

/// The operations a bento allocator implements once;
/// [`impl_allocator!`](crate::impl_allocator) makes them allocator-api2 `Allocator`
/// impls. The impls keep zero sizes to themselves: a zero-size request gets
/// [`dangling`] and is never passed on, so every method here sees a non-zero size.
///
/// # Safety
///
/// Implementations must guarantee what allocator-api2's `Allocator` does:
/// `alloc_raw` returns a block of at least `layout.size()` bytes aligned to
/// `layout.align()`, which overlaps no other live block and stays valid until it is
/// deallocated (or the allocator is reset, which takes `&mut`); `resize_in_place`
/// returns true only when the block, where it is, now holds `new_size` bytes, keeping
/// its first `min(old, new)` bytes; on `Err` or `false` nothing changes.
///
/// # Example
///
/// ```
/// use bento_pages::{AllocError, RawAlloc};
/// use core::alloc::Layout;
/// use core::ptr::NonNull;
///
/// /// An allocator that never has room.
/// struct Empty;
///
/// // SAFETY: it hands out no block, so it breaks no promise.
/// unsafe impl RawAlloc for Empty {
///     fn alloc_raw(&self, _: Layout) -> Result<NonNull<u8>, AllocError> {
///         Err(AllocError)
///     }
///     unsafe fn dealloc_raw(&self, _: NonNull<u8>, _: Layout) {}
///     unsafe fn resize_in_place(&self, _: NonNull<u8>, _: Layout, _: usize) -> bool {
///         false
///     }
/// }
///
/// assert_eq!(Empty.alloc_raw(Layout::new::<u32>()), Err(AllocError));
/// ```
pub unsafe trait RawAlloc {
    /// A block for `layout` (`layout.size() > 0`).
    ///
    /// # Errors
    ///
    /// [`AllocError`] when the allocator has no room or cannot give the alignment.
    fn alloc_raw(&self, layout: Layout) -> Result<NonNull<u8>, AllocError>;

    /// Frees a block.
    ///
    /// # Safety
    ///
    /// `ptr` is a live block of `self`, allocated with `layout` (a non-zero size) or
    /// resized to it last; the block is not used again.
    unsafe fn dealloc_raw(&self, ptr: NonNull<u8>, layout: Layout);

    /// Grows or shrinks a block to `new_size > 0` bytes where it is; false (and nothing
    /// changes) when it cannot.
    ///
    /// # Safety
    ///
    /// `ptr` is a live block of `self` allocated (or last resized) with `old`, a
    /// non-zero size.
    unsafe fn resize_in_place(&self, ptr: NonNull<u8>, old: Layout, new_size: usize) -> bool;

    /// Whether a block that cannot shrink in place stays where it is (it still fits
    /// the smaller layout): true, the default, where moving it would free nothing (a
    /// linear allocator); false where moving gives memory back (a block alone in its
    /// segment, whose segment goes back once it moves out).
    ///
    /// ```
    /// use bento_pages::{AllocError, RawAlloc};
    /// use core::alloc::Layout;
    /// use core::ptr::NonNull;
    ///
    /// struct Empty;
    ///
    /// // SAFETY: it hands out no block, so it breaks no promise.
    /// unsafe impl RawAlloc for Empty {
    ///     fn alloc_raw(&self, _: Layout) -> Result<NonNull<u8>, AllocError> {
    ///         Err(AllocError)
    ///     }
    ///     unsafe fn dealloc_raw(&self, _: NonNull<u8>, _: Layout) {}
    ///     unsafe fn resize_in_place(&self, _: NonNull<u8>, _: Layout, _: usize) -> bool {
    ///         false
    ///     }
    /// }
    ///
    /// assert!(Empty.keeps_unshrunk_blocks()); // the default
    /// ```
    #[inline]
    fn keeps_unshrunk_blocks(&self) -> bool {
        true
    }

    /// `Allocator::grow` and `shrink` for non-zero sizes: in place when the block
    /// meets `new`'s alignment and can be resized where it is, else moved by
    /// [`relocate`](Self::relocate) — except a shrink that cannot give its tail back,
    /// which stays where it is when [`keeps_unshrunk_blocks`](Self::keeps_unshrunk_blocks)
    /// says so. On `Err` nothing changes.
    ///
    /// # Errors
    ///
    /// [`AllocError`] when the block must move and no new one can be allocated.
    ///
    /// # Safety
    ///
    /// `ptr` is a live block of `self` allocated (or last resized) with `old`; both
    /// sizes are non-zero.
    unsafe fn resize_raw(
        &self,
        ptr: NonNull<u8>,
        old: Layout,
        new: Layout,
    ) -> Result<NonNull<u8>, AllocError> {
        if ptr.addr().get() & (new.align() - 1) == 0 {
            // SAFETY: the caller guarantees `ptr` is live with `old`, both sizes
            // non-zero.
            if unsafe { self.resize_in_place(ptr, old, new.size()) }
                || (new.size() <= old.size() && self.keeps_unshrunk_blocks())
            {
                return Ok(ptr);
            }
        }
        // SAFETY: the caller's contract.
        unsafe { self.relocate(ptr, old, new) }
    }

    /// Moves a block: allocates for `new`, copies the first `min(old, new)` bytes,
    /// frees the old block. On `Err` nothing changes.
    ///
    /// # Errors
    ///
    /// [`AllocError`] when no block for `new` can be allocated.
    ///
    /// # Safety
    ///
    /// `ptr` is a live block of `self` allocated (or last resized) with `old`; both
    /// sizes are non-zero.
    unsafe fn relocate(
        &self,
        ptr: NonNull<u8>,
        old: Layout,
        new: Layout,
    ) -> Result<NonNull<u8>, AllocError> {
        let fresh = self.alloc_raw(new)?;
        // SAFETY: `ptr` holds `old.size()` bytes (the caller's contract) and `fresh`
        // `new.size()`; a fresh block overlaps no live one.
        unsafe {
            core::ptr::copy_nonoverlapping(
                ptr.as_ptr(),
                fresh.as_ptr(),
                old.size().min(new.size()),
            );
        }
        // SAFETY: `ptr` is live with `old` (the caller's contract) and its bytes are
        // copied; the caller gives it up.
        unsafe { self.dealloc_raw(ptr, old) };
        Ok(fresh)
    }
}

/// Writes the `RawAlloc` methods named, of those that may move a block (`resize_raw`
/// and `relocate`), for `&T`: each forwards to `T`'s.
macro_rules! forward_moves {
    ($($method:ident)*) => {$(
        #[inline]
        unsafe fn $method(
            &self,
            ptr: NonNull<u8>,
            old: Layout,
            new: Layout,
        ) -> Result<NonNull<u8>, AllocError> {
            // SAFETY: the caller's contract, for the same allocator.
            unsafe { (**self).$method(ptr, old, new) }
        }
    )*};
}

// SAFETY: forwards every operation to `T`, which keeps the promises.
unsafe impl<T: RawAlloc + ?Sized> RawAlloc for &T {
    #[inline]
    fn alloc_raw(&self, layout: Layout) -> Result<NonNull<u8>, AllocError> {
        (**self).alloc_raw(layout)
    }

    #[inline]
    unsafe fn dealloc_raw(&self, ptr: NonNull<u8>, layout: Layout) {
        // SAFETY: the caller's contract, for the same allocator.
        unsafe { (**self).dealloc_raw(ptr, layout) }
    }

    #[inline]
    unsafe fn resize_in_place(&self, ptr: NonNull<u8>, old: Layout, new_size: usize) -> bool {
        // SAFETY: the caller's contract, for the same allocator.
        unsafe { (**self).resize_in_place(ptr, old, new_size) }
    }

    #[inline]
    fn keeps_unshrunk_blocks(&self) -> bool {
        (**self).keeps_unshrunk_blocks()
    }

    forward_moves!(resize_raw relocate);
}

/// Writes `unsafe impl Allocator for $ty`, for allocator-api2 0.2 and 0.4, from
/// `$ty`'s [`RawAlloc`] operations. `$ty` is `&T` with `T: RawAlloc`, or a `Copy`
/// handle that is itself `RawAlloc`. Written as
/// `bento_pages::impl_allocator!(impl['a, 'buf] for &'a Stack<'buf>)`.
///
/// The macro expands in the calling crate, which names the allocator-api2 versions it
/// supports the way every bento crate does: 0.2 as the dependency `allocator_api2`
/// behind the feature `allocator-api2`, 0.4 as the dependency `allocator_api2_04` behind the
/// feature `allocator-api2-04`; its feature `nightly` adds `core::alloc::Allocator`, which
/// needs Rust 1.100 or later (today's nightly toolchain).
/// Zero sizes never reach the [`RawAlloc`] operations: they get [`dangling`] pointers,
/// and growing from or shrinking to zero allocates or frees.
///
/// ```ignore
/// // In an allocator crate with the two features and dependencies:
/// bento_pages::impl_allocator!(impl['a] for &'a MyAllocator);
/// ```
#[macro_export]
macro_rules! impl_allocator {
    (impl[$($gen:tt)*] for $ty:ty) => {
        #[cfg(feature = "allocator-api2")]
        $crate::impl_allocator!(@one allocator_api2, "allocator-api2", [$($gen)*], $ty);
        #[cfg(feature = "allocator-api2-04")]
        $crate::impl_allocator!(@one allocator_api2_04, "allocator-api2-04", [$($gen)*], $ty);
        #[cfg(feature = "nightly")]
        $crate::impl_allocator!(@one core, "nightly", [$($gen)*], $ty);
    };
    (@one $api:ident, $feature:literal, [$($gen:tt)*], $ty:ty) => {
        // SAFETY: forwards to `RawAlloc`, whose contract is `Allocator`'s; zero sizes
        // get dangling pointers and are never passed on; the caller obligations of
        // each method are passed on unchanged. A handle type refers to its allocator,
        // so moving the handle moves no memory.
        // (The feature's badge on docs.rs: the `cfg` above is on the invocation, which
        // rustdoc does not see.)
        #[cfg_attr(docsrs, doc(cfg(feature = $feature)))]
        unsafe impl<$($gen)*> $api::alloc::Allocator for $ty {
            #[inline(always)]
            fn allocate(
                &self,
                layout: core::alloc::Layout,
            ) -> Result<core::ptr::NonNull<[u8]>, $api::alloc::AllocError> {
                let ptr = if layout.size() == 0 {
                    $crate::dangling(layout)
                } else {
                    $crate::RawAlloc::alloc_raw(self, layout)
                        .map_err(|_| $api::alloc::AllocError)?
                };
                Ok(core::ptr::NonNull::slice_from_raw_parts(ptr, layout.size()))
            }

            #[inline(always)]
            unsafe fn deallocate(&self, ptr: core::ptr::NonNull<u8>, layout: core::alloc::Layout) {
                if layout.size() != 0 {
                    // SAFETY: the caller's `Allocator::deallocate` contract; a
                    // non-zero size means a real block.
                    unsafe { $crate::RawAlloc::dealloc_raw(self, ptr, layout) }
                }
            }

            $crate::impl_allocator!(@resize $api, grow);
            $crate::impl_allocator!(@resize $api, shrink);
        }
    };
    // `Allocator::grow` or `shrink`, whichever `$method` names: both resize through
    // `resize`, which handles zero sizes.
    (@resize $api:ident, $method:ident) => {
        unsafe fn $method(
            &self,
            ptr: core::ptr::NonNull<u8>,
            old: core::alloc::Layout,
            new: core::alloc::Layout,
        ) -> Result<core::ptr::NonNull<[u8]>, $api::alloc::AllocError> {
            // SAFETY: the caller's `Allocator::grow` or `Allocator::shrink` contract,
            // which is `resize`'s.
            unsafe { $crate::resize(self, ptr, old, new) }
                .map(|p| core::ptr::NonNull::slice_from_raw_parts(p, new.size()))
                .map_err(|_| $api::alloc::AllocError)
        }
    };
}

/// `Allocator::grow` and `shrink` with zero sizes handled: from zero it allocates, to
/// zero it frees, between non-zero sizes [`RawAlloc::resize_raw`]. Used by
/// [`impl_allocator!`](crate::impl_allocator); not for direct use.
///
/// # Errors
///
/// [`AllocError`] when a block must be allocated and cannot be.
///
/// # Safety
///
/// `ptr` is a block of `alloc` allocated (or last resized) with `old`: live when
/// `old.size() > 0`, dangling otherwise.
#[doc(hidden)]
#[inline]
pub unsafe fn resize<A: RawAlloc + ?Sized>(
    alloc: &A,
    ptr: NonNull<u8>,
    old: Layout,
    new: Layout,
) -> Result<NonNull<u8>, AllocError> {
    match (old.size(), new.size()) {
        (0, 0) => Ok(dangling(new)),
        (0, _) => alloc.alloc_raw(new),
        (_, 0) => {
            // SAFETY: the caller's contract: `ptr` is live with `old`, non-zero.
            unsafe { alloc.dealloc_raw(ptr, old) };
            Ok(dangling(new))
        }
        // SAFETY: the caller's contract, both sizes non-zero.
        _ => unsafe { alloc.resize_raw(ptr, old, new) },
    }
}
