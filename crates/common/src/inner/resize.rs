//! Resizing: in place where the block stays in its region (the same class, or a
//! general region's space growing or shrinking it), else a new block, a copy and a
//! free.

use core::alloc::Layout;
use core::ptr::NonNull;

use bento_pages::{AllocError, PageSource};

use crate::config::Routing;
use crate::inner::{Inner, Owner};

impl<P: PageSource> Inner<P> {
    /// # Safety
    ///
    /// As for [`CommonAllocator::resize`].
    pub(crate) unsafe fn resize(
        &self,
        ptr: NonNull<u8>,
        old: Layout,
        new: Layout,
    ) -> Result<NonNull<u8>, AllocError> {
        // SAFETY: the caller's contract.
        if unsafe { self.resize_in_place(ptr, old, new) } {
            return Ok(ptr);
        }
        let fresh = self.alloc(new)?;
        // SAFETY: `ptr` holds `old.size()` bytes and `fresh` `new.size()`; a fresh
        // block overlaps no live one. Then the old block goes (the caller's contract).
        unsafe {
            core::ptr::copy_nonoverlapping(
                ptr.as_ptr(),
                fresh.as_ptr(),
                old.size().min(new.size()),
            );
            self.dealloc(ptr, old);
        }
        Ok(fresh)
    }

    /// # Safety
    ///
    /// As for [`CommonAllocator::realloc`].
    pub(crate) unsafe fn realloc_unsized(
        &self,
        ptr: NonNull<u8>,
        new: Layout,
    ) -> Result<NonNull<u8>, AllocError> {
        // SAFETY: the caller's contract; 0 is a misuse, reported.
        let usable = unsafe { self.usable_size(ptr) };
        if usable == 0 {
            return Err(AllocError);
        }
        let in_place = match self.owner(ptr) {
            Some(Owner::Class(bin, _)) => {
                self.routing == Routing::BySize && self.route(new) == Some(bin)
            }
            Some(Owner::General(region)) => {
                (self.routing != Routing::BySize || self.route(new).is_none())
                    && ptr.addr().get().is_multiple_of(new.align())
                    // SAFETY: live in this region (checked above).
                    && unsafe { region.lock().realloc_in_place(ptr, new.size()) }
            }
            None => false,
        };
        if in_place {
            return Ok(ptr);
        }
        let fresh = self.alloc(new)?;
        // SAFETY: `ptr` holds `usable` bytes and `fresh` `new.size()`; a fresh block
        // overlaps no live one. Then the old block goes (the caller's contract).
        unsafe {
            core::ptr::copy_nonoverlapping(ptr.as_ptr(), fresh.as_ptr(), usable.min(new.size()));
            if !self.fast_free_unsized(ptr) {
                self.free(ptr);
            }
        }
        Ok(fresh)
    }

    /// Resizes where the block is, when it stays in its region: the same class, or
    /// a general region's in-place resize. False changes nothing.
    ///
    /// # Safety
    ///
    /// As for [`CommonAllocator::resize`].
    pub(crate) unsafe fn resize_in_place(
        &self,
        ptr: NonNull<u8>,
        old: Layout,
        new: Layout,
    ) -> bool {
        if self.guarded(ptr) {
            return false;
        }
        let region = match self.routing {
            Routing::BySize => match (self.route(old), self.route(new)) {
                // The same class: the block already holds `new`, aligned to it.
                (Some(a), Some(b)) => return a == b,
                (None, None) => self.large(),
                _ => return false,
            },
            Routing::Contention { .. } => match self.owner(ptr) {
                Some(Owner::General(region)) => region,
                _ => return false,
            },
        };
        ptr.addr().get().is_multiple_of(new.align())
            // SAFETY: the caller's contract: live in this region.
            && unsafe { region.lock().realloc_in_place(ptr, new.size()) }
    }
}
