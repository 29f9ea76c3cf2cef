//! The common allocator as `RawAlloc` (hence allocator-api2's `Allocator`, through
//! `&CommonAllocator`) and as a `#[global_allocator]`.

use core::alloc::{GlobalAlloc, Layout};
use core::ptr::NonNull;

use bento_pages::{AllocError, PageSource, RawAlloc};

use crate::allocator::CommonAllocator;

// SAFETY: every method keeps `Allocator`'s promises through the allocator's own:
// `alloc` returns a fresh block of the layout's size and alignment; `resize_in_place`
// says true only when the block stays in its region and holds `new_size` where it is.
unsafe impl<P: PageSource> RawAlloc for CommonAllocator<P> {
    #[inline]
    fn alloc_raw(&self, layout: Layout) -> Result<NonNull<u8>, AllocError> {
        self.alloc(layout)
    }

    #[inline]
    unsafe fn dealloc_raw(&self, ptr: NonNull<u8>, layout: Layout) {
        // SAFETY: the caller's contract.
        unsafe { self.dealloc(ptr, layout) }
    }

    unsafe fn resize_in_place(&self, ptr: NonNull<u8>, old: Layout, new_size: usize) -> bool {
        let (Ok(inner), Ok(new)) = (self.block(), Layout::from_size_align(new_size, old.align()))
        else {
            return false;
        };
        // SAFETY: the caller's contract.
        unsafe { inner.resize_in_place(ptr, old, new) }
    }

    unsafe fn resize_raw(
        &self,
        ptr: NonNull<u8>,
        old: Layout,
        new: Layout,
    ) -> Result<NonNull<u8>, AllocError> {
        // SAFETY: the caller's contract.
        unsafe { self.resize(ptr, old, new) }
    }
}

bento_pages::impl_allocator!(impl['a, P: PageSource] for &'a CommonAllocator<P>);

// SAFETY: `alloc` returns a fresh block of the layout (never unwinding: misuse goes to
// the hook, which aborts by default), `dealloc` frees one given its layout, and
// `realloc` keeps the first `min(old, new)` bytes; a zero size never reaches a region.
unsafe impl<P: PageSource + Send + Sync> GlobalAlloc for CommonAllocator<P> {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        CommonAllocator::alloc(self, layout).map_or(core::ptr::null_mut(), NonNull::as_ptr)
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if let Some(ptr) = NonNull::new(ptr) {
            // SAFETY: `GlobalAlloc::dealloc`'s contract is ours.
            unsafe { CommonAllocator::dealloc(self, ptr, layout) }
        }
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        CommonAllocator::alloc_zeroed(self, layout).map_or(core::ptr::null_mut(), NonNull::as_ptr)
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let (Some(ptr), Ok(new)) = (
            NonNull::new(ptr),
            Layout::from_size_align(new_size, layout.align()),
        ) else {
            return core::ptr::null_mut();
        };
        // SAFETY: `GlobalAlloc::realloc`'s contract: live with `layout`, sizes
        // non-zero.
        unsafe { self.resize(ptr, layout, new) }.map_or(core::ptr::null_mut(), NonNull::as_ptr)
    }
}
