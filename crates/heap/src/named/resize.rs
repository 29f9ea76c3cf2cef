//! Resizing a heap's block: through the inner allocator's `grow` or `shrink`, with
//! the budget, guards, fill pattern, table and sink kept right.

use core::alloc::Layout;
use core::ptr::NonNull;

use allocator_api2::alloc::Allocator;
use bento_pages::AllocError;

use crate::named::{Extras, Heap};
use crate::policy::{Guards, write_guards};
use crate::sink::EventKind;
use crate::track::Tracking;

impl<A: Allocator, G: Guards, T: Tracking> Heap<A, G, T> {
    /// Grows or shrinks a block (both sizes non-zero): through the inner allocator's
    /// `grow` or `shrink`, or by hand when a new alignment moves the block within its
    /// guards. On `Err` nothing changes.
    ///
    /// # Safety
    ///
    /// The caller must ensure `ptr` is a live block of this heap with `old`.
    pub(super) unsafe fn resize_block(
        &self,
        ptr: NonNull<u8>,
        old: Layout,
        new: Layout,
    ) -> Result<NonNull<u8>, AllocError> {
        let mut site = None;
        if let Some(table) = self.tracking.table() {
            if !self.held(table, ptr, old) {
                return Err(AllocError);
            }
            site = table.get(ptr).and_then(|r| r.2);
        }
        if G::BYTES != 0 {
            // SAFETY: a live block of this heap (the caller's contract).
            unsafe { self.check_guards(ptr, old.size(), site) };
        }
        let (old_outer, old_front) = Self::outer(old)?;
        let (new_outer, new_front) = Self::outer(new)?;
        let grows = new.size() > old.size();
        let delta = new.size().abs_diff(old.size());
        if grows && !self.account.charge(delta, 0) && !self.refused(new, delta, 0) {
            return Err(AllocError);
        }
        // From here the inner allocator may free `ptr`'s address and give it to another
        // thread before this resize's event is sent: the sink hears of it first.
        if let Some(x) = &self.extras {
            self.before_resize(x, ptr, old, new);
        }
        // SAFETY: `ptr` is `old_front` bytes into the inner block of `old_outer`.
        let base = unsafe { ptr.sub(old_front) };
        // SAFETY: the inner block is live with `old_outer` (the caller's contract).
        let moved = unsafe {
            // A guarded block moves to the inner allocator (resizes are not sampled).
            if old_front != new_front || self.is_guarded(base) {
                self.inner.allocate(new_outer).map(|fresh| {
                    let fresh = fresh.cast::<u8>();
                    fresh
                        .add(new_front)
                        .copy_from_nonoverlapping(ptr, old.size().min(new.size()));
                    self.release_base(base, old_outer);
                    fresh
                })
            } else if new_outer.size() >= old_outer.size() {
                self.inner
                    .grow(base, old_outer, new_outer)
                    .map(NonNull::cast)
            } else {
                self.inner
                    .shrink(base, old_outer, new_outer)
                    .map(NonNull::cast)
            }
        };
        let Ok(fresh) = moved else {
            if grows {
                self.account.uncharge(delta, 0);
            }
            self.account.fail();
            if let Some(x) = &self.extras {
                self.resize_failed(x, ptr, old);
            }
            return Err(AllocError);
        };
        if !grows {
            self.account.release(delta, 0);
        }
        // SAFETY: `new_front + new.size() <= new_outer.size()`.
        let user = unsafe { fresh.add(new_front) };
        // For the profile a resize is a free and an allocation: the sample, if it
        // was one, goes, and the new size is counted.
        if let Some(profile) = &self.profile {
            profile.freed(ptr);
        }
        self.note_profile(user, new, None, None);
        if G::BYTES != 0 {
            // SAFETY: the new block's guards, inside its inner block.
            unsafe { write_guards::<G>(user, new.size()) };
        }
        if let Some(table) = self.tracking.table() {
            table.moved(ptr, user, new.size(), new.align());
        }
        if let Some(x) = &self.extras {
            if grows && let Some(byte) = x.fill.on_alloc {
                // SAFETY: the grown bytes of the new block.
                unsafe { user.add(old.size()).write_bytes(byte, delta) };
            }
            let tag = self.tracking.table().and_then(|t| t.tag_of(user));
            self.emit(
                x,
                EventKind::Realloc {
                    old_addr: ptr.addr().get(),
                    old_size: old.size(),
                },
                user,
                new,
                tag,
            );
            #[cfg(feature = "tracy")]
            x.tracy_alloc(user, new.size());
        }
        Ok(user)
    }

    /// Before the inner allocator resizes the block at `ptr` from `old` to `new`:
    /// tells the sink and Tracy that the address may go, and fills the bytes a
    /// shrink drops with the free pattern while they are still the block's.
    pub(super) fn before_resize(&self, x: &Extras, ptr: NonNull<u8>, old: Layout, new: Layout) {
        if let Some(sink) = &x.sink {
            sink.resize_begin(self.account.name, ptr.addr().get());
        }
        #[cfg(feature = "tracy")]
        x.tracy_free(ptr);
        // Only a shrink that keeps its alignment: one that needs a stricter alignment
        // may have to move and fail, and a failed resize leaves the block unchanged.
        if new.size() < old.size()
            && new.align() <= old.align()
            && let Some(byte) = x.fill.on_free
        {
            // SAFETY: bytes `new.size()..old.size()` of the live block at `ptr`.
            unsafe {
                ptr.add(new.size())
                    .write_bytes(byte, old.size() - new.size());
            }
        }
    }

    /// The inner allocator refused the resize begun by `before_resize`: the block is
    /// still at `ptr` with `old`.
    #[cold]
    pub(super) fn resize_failed(&self, x: &Extras, ptr: NonNull<u8>, old: Layout) {
        if let Some(sink) = &x.sink {
            sink.resize_failed(self.account.name, ptr.addr().get());
        }
        #[cfg(feature = "tracy")]
        x.tracy_alloc(ptr, old.size());
        #[cfg(not(feature = "tracy"))]
        let _ = old;
    }
}
