//! What the interpreter drives: the [`Target`] trait, and adaptors that make any
//! allocator-api2 `Allocator` (0.2 or 0.4) a target.

use alloc::string::String;
use core::alloc::Layout;
use core::fmt;
use core::ptr::NonNull;

/// Which end of a two-ended allocator (a double stack) an operation addresses. Targets
/// with one end only ever see [`End::Low`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, arbitrary::Arbitrary)]
pub enum End {
    /// The only end, or the lower end of a double stack.
    Low,
    /// The upper end of a double stack.
    High,
}

/// Figures an allocator reports about itself, compared with the model's by
/// [`run`](crate::run). `None` means "not reported".
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Figures {
    /// Live blocks of non-zero size, as the allocator counts them.
    pub live_blocks: Option<usize>,
    /// Bytes in live blocks; at least what was asked for (allocators may round up).
    pub live_bytes: Option<usize>,
}

/// An allocator under test, as the interpreter sees it.
///
/// Only `allocate`, `deallocate`, `grow` and `shrink` are required; the rest have
/// defaults for allocators without markers, resets or self-checks. The interpreter
/// only issues an optional operation when the [`Caps`](crate::Caps) it is given
/// enable it.
pub trait Target {
    /// Allocates a block at `end`, zeroed when asked; `None` on failure.
    fn allocate(&mut self, end: End, layout: Layout, zeroed: bool) -> Option<NonNull<[u8]>>;

    /// Frees a block.
    ///
    /// # Safety
    ///
    /// The caller must ensure that `ptr` is a live block of this target from `end`,
    /// allocated (or last resized) with a layout of `layout`'s alignment and a size
    /// between `layout.size()` and the length it was returned with.
    unsafe fn deallocate(&mut self, end: End, ptr: NonNull<u8>, layout: Layout);

    /// Grows a block, zeroing the new bytes when asked; `None` leaves it unchanged.
    ///
    /// # Safety
    ///
    /// The caller must ensure what [`Target::deallocate`] requires of `ptr` and `old`,
    /// and `new.size() >= old.size()`.
    unsafe fn grow(
        &mut self,
        end: End,
        ptr: NonNull<u8>,
        old: Layout,
        new: Layout,
        zeroed: bool,
    ) -> Option<NonNull<[u8]>>;

    /// Shrinks a block; `None` leaves it unchanged.
    ///
    /// # Safety
    ///
    /// The caller must ensure what [`Target::deallocate`] requires of `ptr` and `old`,
    /// and `new.size() <= old.size()`.
    unsafe fn shrink(
        &mut self,
        end: End,
        ptr: NonNull<u8>,
        old: Layout,
        new: Layout,
    ) -> Option<NonNull<[u8]>>;

    /// Resizes a block to `new_size` bytes without moving it (`Ops::IN_PLACE`):
    /// `Some` with the block (same address) and its new length, `None` when it
    /// cannot (the block is unchanged).
    ///
    /// # Safety
    ///
    /// The caller must ensure what [`Target::deallocate`] requires of `ptr` and `old`.
    unsafe fn resize_in_place(
        &mut self,
        end: End,
        ptr: NonNull<u8>,
        old: Layout,
        new_size: usize,
    ) -> Option<NonNull<[u8]>> {
        let _ = (end, ptr, old, new_size);
        unimplemented_op("resize_in_place")
    }

    /// Frees every block at once (`Ops::RESET`).
    fn reset(&mut self) {
        unimplemented_op("reset");
    }

    /// Takes a marker at `end` and returns a handle for it (`Ops::MARKERS`).
    fn marker(&mut self, end: End) -> usize {
        let _ = end;
        unimplemented_op("marker")
    }

    /// Rolls `end` back to the marker with handle `marker`: `Ok` frees every block
    /// allocated after it; `Err` changes nothing (a stale or foreign marker).
    fn rollback(&mut self, end: End, marker: usize) -> Result<(), String> {
        let _ = (end, marker);
        unimplemented_op("rollback")
    }

    /// Gives cached memory back (`Ops::TRIM`); no block changes.
    fn trim(&mut self) {
        unimplemented_op("trim");
    }

    /// Makes the allocator's source of memory fail after `k` more requests
    /// (`Ops::FAIL_NEXT`), by failure injection.
    fn fail_next(&mut self, k: u32) {
        let _ = k;
        unimplemented_op("fail_next");
    }

    /// Checks the allocator's structures and returns its figures; `Err` describes the
    /// corruption found.
    fn validate(&mut self) -> Result<Figures, String> {
        Ok(Figures::default())
    }
}

#[cold]
#[track_caller]
fn unimplemented_op(name: &str) -> ! {
    panic!("the Caps given to bento_testkit::run enable `{name}`, which this Target lacks")
}

/// A self-check an adaptor can run in [`Target::validate`].
pub type ValidateFn<A> = fn(&A) -> Result<Figures, String>;

macro_rules! api_adaptor {
    ($(#[$meta:meta])* $name:ident, $api:ident) => {
        $(#[$meta])*
        pub struct $name<'a, A: ?Sized> {
            alloc: &'a A,
            validate: Option<ValidateFn<A>>,
        }

        impl<'a, A: ?Sized> $name<'a, A> {
            /// Drives `alloc` through its `Allocator` methods.
            #[must_use]
            pub fn new(alloc: &'a A) -> Self {
                Self { alloc, validate: None }
            }

            /// Also runs `validate` on the allocator at each check.
            #[must_use]
            pub fn with_validate(alloc: &'a A, validate: ValidateFn<A>) -> Self {
                Self { alloc, validate: Some(validate) }
            }
        }

        impl<A: ?Sized> fmt::Debug for $name<'_, A> {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.debug_struct(stringify!($name))
                    .field("validate", &self.validate.is_some())
                    .finish_non_exhaustive()
            }
        }

        impl<A: $api::alloc::Allocator + ?Sized> Target for $name<'_, A> {
            fn allocate(&mut self, _: End, layout: Layout, zeroed: bool) -> Option<NonNull<[u8]>> {
                if zeroed {
                    self.alloc.allocate_zeroed(layout).ok()
                } else {
                    self.alloc.allocate(layout).ok()
                }
            }

            unsafe fn deallocate(&mut self, _: End, ptr: NonNull<u8>, layout: Layout) {
                // SAFETY: the caller upholds `Target::deallocate`'s contract, which is
                // `Allocator::deallocate`'s.
                unsafe { self.alloc.deallocate(ptr, layout) }
            }

            unsafe fn grow(
                &mut self,
                _: End,
                ptr: NonNull<u8>,
                old: Layout,
                new: Layout,
                zeroed: bool,
            ) -> Option<NonNull<[u8]>> {
                if zeroed {
                    // SAFETY: the caller upholds `Target::grow`'s contract, which is
                    // `Allocator::grow_zeroed`'s.
                    unsafe { self.alloc.grow_zeroed(ptr, old, new) }.ok()
                } else {
                    // SAFETY: as above, for `Allocator::grow`.
                    unsafe { self.alloc.grow(ptr, old, new) }.ok()
                }
            }

            unsafe fn shrink(
                &mut self,
                _: End,
                ptr: NonNull<u8>,
                old: Layout,
                new: Layout,
            ) -> Option<NonNull<[u8]>> {
                // SAFETY: the caller upholds `Target::shrink`'s contract, which is
                // `Allocator::shrink`'s.
                unsafe { self.alloc.shrink(ptr, old, new) }.ok()
            }

            fn validate(&mut self) -> Result<Figures, String> {
                match self.validate {
                    Some(check) => check(self.alloc),
                    None => Ok(Figures::default()),
                }
            }
        }
    };
}

api_adaptor!(
    /// Any allocator-api2 **0.2** `Allocator` as a [`Target`].
    ///
    /// ```
    /// use allocator_api2::alloc::Global;
    /// use bento_testkit::{run, Api02, Caps};
    /// use arbitrary::Unstructured;
    ///
    /// let report = run(&mut Api02::new(&Global), &Caps::default(), &mut Unstructured::new(&[7; 512]))
    ///     .expect("Global passes");
    /// assert!(report.steps > 0);
    /// ```
    Api02,
    allocator_api2
);

api_adaptor!(
    /// Any allocator-api2 **0.4** `Allocator` as a [`Target`].
    ///
    /// ```
    /// use allocator_api2_04::alloc::Global;
    /// use bento_testkit::{run, Api04, Caps};
    /// use arbitrary::Unstructured;
    ///
    /// let report = run(&mut Api04::new(&Global), &Caps::default(), &mut Unstructured::new(&[9; 512]))
    ///     .expect("Global passes");
    /// assert!(report.steps > 0);
    /// ```
    Api04,
    allocator_api2_04
);

/// Writes, inside an `impl Target for …` block, the four plain operations
/// (`allocate`, `deallocate`, `grow`, `shrink`) as calls through the allocator-api2
/// **0.2** `Allocator` that `$api` gives, an expression of `self` and the end:
/// `forward_to_api02!(|self, end| &*self.stack)` for a target holding `&mut Stack`,
/// `forward_to_api02!(|self, end| self.double.end(end))` for one handle per end. The
/// rest of the block adds what the allocator has beyond the trait (reset, markers,
/// validate).
///
/// ```
/// use allocator_api2::alloc::Global;
/// use bento_testkit::{Caps, Figures, Target, Unstructured, forward_to_api02, run};
///
/// /// The global allocator, with a validate that finds nothing to check.
/// struct Checked(Global);
///
/// impl Target for Checked {
///     forward_to_api02!(|self, end| self.0);
///
///     fn validate(&mut self) -> Result<Figures, String> {
///         Ok(Figures::default())
///     }
/// }
///
/// let report = run(&mut Checked(Global), &Caps::default(), &mut Unstructured::new(&[3; 256]))
///     .expect("Global passes");
/// assert!(report.steps > 0);
/// ```
#[macro_export]
macro_rules! forward_to_api02 {
    (|$self:ident, $end:ident| $api:expr) => {
        fn allocate(
            &mut $self,
            $end: $crate::End,
            layout: ::core::alloc::Layout,
            zeroed: bool,
        ) -> Option<::core::ptr::NonNull<[u8]>> {
            $crate::Target::allocate(&mut $crate::Api02::new(&$api), $end, layout, zeroed)
        }

        unsafe fn deallocate(
            &mut $self,
            $end: $crate::End,
            ptr: ::core::ptr::NonNull<u8>,
            layout: ::core::alloc::Layout,
        ) {
            // SAFETY: the caller upholds `Target::deallocate`'s contract, for the
            // allocator the block came from.
            unsafe {
                $crate::Target::deallocate(&mut $crate::Api02::new(&$api), $end, ptr, layout)
            }
        }

        unsafe fn grow(
            &mut $self,
            $end: $crate::End,
            ptr: ::core::ptr::NonNull<u8>,
            old: ::core::alloc::Layout,
            new: ::core::alloc::Layout,
            zeroed: bool,
        ) -> Option<::core::ptr::NonNull<[u8]>> {
            // SAFETY: the caller upholds `Target::grow`'s contract, for the allocator
            // the block came from.
            unsafe {
                $crate::Target::grow(&mut $crate::Api02::new(&$api), $end, ptr, old, new, zeroed)
            }
        }

        unsafe fn shrink(
            &mut $self,
            $end: $crate::End,
            ptr: ::core::ptr::NonNull<u8>,
            old: ::core::alloc::Layout,
            new: ::core::alloc::Layout,
        ) -> Option<::core::ptr::NonNull<[u8]>> {
            // SAFETY: the caller upholds `Target::shrink`'s contract, for the allocator
            // the block came from.
            unsafe { $crate::Target::shrink(&mut $crate::Api02::new(&$api), $end, ptr, old, new) }
        }
    };
}
