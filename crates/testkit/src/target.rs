//! What the interpreter drives: the [`Target`] trait, adaptors that make any
//! allocator-api2 `Allocator` (0.2 or 0.4) a target, and [`EntryPoints`], which makes
//! one allocator a target through each of its entry points in turn.

use alloc::string::String;
use alloc::vec::Vec;
use core::alloc::{GlobalAlloc, Layout};
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

/// Stats an allocator reports about itself, compared with the model's by
/// [`run`](crate::run). `None` means "not reported".
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
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

    /// Checks the allocator's structures and returns its stats; `Err` describes the
    /// corruption found.
    fn validate(&mut self) -> Result<Stats, String> {
        Ok(Stats::default())
    }
}

#[cold]
#[track_caller]
fn unimplemented_op(name: &str) -> ! {
    panic!("the Caps given to bento_testkit::run enable `{name}`, which this Target lacks")
}

/// A self-check an adaptor can run in [`Target::validate`].
pub type ValidateFn<A> = fn(&A) -> Result<Stats, String>;

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

            fn validate(&mut self) -> Result<Stats, String> {
                match self.validate {
                    Some(check) => check(self.alloc),
                    None => Ok(Stats::default()),
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
/// use bento_testkit::{Caps, Stats, Target, Unstructured, forward_to_api02, run};
///
/// /// The global allocator, with a validate that finds nothing to check.
/// struct Checked(Global);
///
/// impl Target for Checked {
///     forward_to_api02!(|self, end| self.0);
///
///     fn validate(&mut self) -> Result<Stats, String> {
///         Ok(Stats::default())
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

/// A counter that takes turns between `n` choices: [`Turns::next_of`] returns `0, 1,
/// …, n - 1` and round again.
///
/// ```
/// use bento_testkit::Turns;
///
/// let mut turns = Turns::default();
/// let picks: Vec<usize> = (0..5).map(|_| turns.next_of(3)).collect();
/// assert_eq!(picks, [0, 1, 2, 0, 1]);
/// assert_eq!(turns.taken(), 5);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Turns(usize);

impl Turns {
    /// Takes a turn: the next of `n` choices.
    ///
    /// # Panics
    ///
    /// If `n` is 0.
    pub fn next_of(&mut self, n: usize) -> usize {
        let turn = self.0 % n;
        self.0 = self.0.wrapping_add(1);
        turn
    }

    /// How many turns were taken.
    #[must_use]
    pub fn taken(self) -> usize {
        self.0
    }
}

/// The calls one entry point of an [`EntryPoints`] target takes; a call it does not
/// take goes to the next entry point that does.
///
/// ```
/// use bento_testkit::Takes;
///
/// // `GlobalAlloc::realloc`: non-zero sizes, the block's own alignment, no zeroing.
/// let realloc = Takes::SIZED;
/// // A `realloc` that moves blocks to 16-byte alignment, and no further.
/// let realloc16 = Takes::SIZED.realign().max_align(16);
/// assert_ne!(realloc, realloc16);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Takes {
    zero_size: bool,
    zeroed: bool,
    realign: bool,
    max_align: usize,
}

impl Takes {
    /// Every call, as an allocator-api2 `Allocator` does.
    pub const ANY: Self = Self {
        zero_size: true,
        zeroed: true,
        realign: true,
        max_align: usize::MAX,
    };

    /// Blocks of non-zero size only (before and after a resize), no zeroing, and
    /// resizes that keep the block's alignment: what `GlobalAlloc::dealloc` and
    /// `GlobalAlloc::realloc` take.
    pub const SIZED: Self = Self {
        zero_size: false,
        zeroed: false,
        realign: false,
        max_align: usize::MAX,
    };

    /// Also zeroed allocations and grows.
    #[must_use]
    pub const fn zeroed(self) -> Self {
        Self {
            zeroed: true,
            ..self
        }
    }

    /// Also resizes to a new alignment.
    #[must_use]
    pub const fn realign(self) -> Self {
        Self {
            realign: true,
            ..self
        }
    }

    /// Only blocks of alignment up to `align`, before and after a resize.
    #[must_use]
    pub const fn max_align(self, align: usize) -> Self {
        Self {
            max_align: align,
            ..self
        }
    }

    /// Whether a block of `layout` (zeroed when asked) is one to take.
    fn block(self, layout: Layout, zeroed: bool) -> bool {
        (self.zero_size || layout.size() != 0)
            && (self.zeroed || !zeroed)
            && layout.align() <= self.max_align
    }

    /// Whether a resize from `old` to `new` is one to take.
    fn resize(self, old: Layout, new: Layout, zeroed: bool) -> bool {
        self.block(old, false)
            && self.block(new, zeroed)
            && (self.realign || old.align() == new.align())
    }
}

/// An allocation through one entry point of `A`: the layout, and whether zeroed.
pub type AllocateFn<A> = fn(&A, Layout, bool) -> Option<NonNull<[u8]>>;

/// A free through one entry point of `A`.
///
/// # Safety
///
/// The caller must ensure what [`Target::deallocate`] requires.
pub type DeallocateFn<A> = unsafe fn(&A, NonNull<u8>, Layout);

/// A grow or shrink through one entry point of `A`: the block, its layout, the new
/// layout, and whether grown bytes are zeroed.
///
/// # Safety
///
/// The caller must ensure what [`Target::grow`] (or [`Target::shrink`], with `false`)
/// requires.
pub type ResizeFn<A> = unsafe fn(&A, NonNull<u8>, Layout, Layout, bool) -> Option<NonNull<[u8]>>;

/// A resize without moving through one entry point of `A`: the block, its layout and
/// the new size.
///
/// # Safety
///
/// The caller must ensure what [`Target::resize_in_place`] requires.
pub type InPlaceFn<A> = unsafe fn(&A, NonNull<u8>, Layout, usize) -> Option<NonNull<[u8]>>;

/// The entry points of one kind of call, and the turns taken between them.
struct Rota<F> {
    entries: Vec<(Takes, F)>,
    turns: Turns,
}

impl<F: Copy> Rota<F> {
    const fn new() -> Self {
        Self {
            entries: Vec::new(),
            turns: Turns(0),
        }
    }

    /// The entry point whose turn it is, or the first after it that takes the call;
    /// `None` when none does.
    #[track_caller]
    fn pick(&mut self, what: &str, takes: impl Fn(Takes) -> bool) -> Option<F> {
        let n = self.entries.len();
        if n == 0 {
            unimplemented_op(what);
        }
        let start = self.turns.next_of(n);
        (0..n)
            .map(|i| self.entries[(start + i) % n])
            .find(|&(t, _)| takes(t))
            .map(|(_, f)| f)
    }

    /// As [`Rota::pick`], for a call some entry point must take.
    #[track_caller]
    fn must_pick(&mut self, what: &str, takes: impl Fn(Takes) -> bool) -> F {
        self.pick(what, takes).unwrap_or_else(|| {
            panic!("no entry point of this EntryPoints target takes this `{what}`")
        })
    }
}

/// One allocator as a [`Target`] through every entry point it has, in turn: each kind
/// of call (allocate, free, grow, shrink, resize in place) goes round the entry points
/// added for it, skipping those that do not take the call (a zero size, zeroing or a
/// new alignment, as each entry point's [`Takes`] says).
///
/// For single-ended allocators: the [`End`] of a call is not passed on. Trim, failure
/// injection, validation and a hook before each free are added with the `with_` methods
/// as well; markers and resets are not supported.
///
/// ```
/// use allocator_api2::alloc::Global;
/// use bento_testkit::{Caps, EntryPoints, Takes, Unstructured, run};
///
/// // allocator-api2 for every call, and every other free straight through
/// // `Allocator::deallocate`.
/// let mut target = EntryPoints::new(&Global).with_api02().with_deallocate(
///     Takes::ANY,
///     |global, ptr, layout| {
///         // SAFETY: the caller upholds `Target::deallocate`'s contract, which is
///         // `Allocator::deallocate`'s.
///         unsafe { allocator_api2::alloc::Allocator::deallocate(global, ptr, layout) }
///     },
/// );
/// let report = run(&mut target, &Caps::default(), &mut Unstructured::new(&[5; 512])).unwrap();
/// assert!(report.frees > 0);
/// ```
pub struct EntryPoints<'a, A: ?Sized> {
    alloc: &'a A,
    allocate: Rota<AllocateFn<A>>,
    deallocate: Rota<DeallocateFn<A>>,
    grow: Rota<ResizeFn<A>>,
    shrink: Rota<ResizeFn<A>>,
    in_place: Rota<InPlaceFn<A>>,
    frees: usize,
    before_free: Option<fn(&A, usize)>,
    trim: Option<fn(&A)>,
    fail_next: Option<fn(&A, u32)>,
    validate: Option<ValidateFn<A>>,
}

/// Adds, in an `EntryPoints` builder method, the four plain calls through the
/// allocator-api2 adaptor `$adaptor` on `&A`.
macro_rules! api_entry_points {
    ($self:ident, $adaptor:ident) => {
        $self
            .with_allocate(Takes::ANY, |a, layout, zeroed| {
                $adaptor::new(&a).allocate(End::Low, layout, zeroed)
            })
            .with_deallocate(Takes::ANY, |a, ptr, layout| {
                // SAFETY: the caller upholds `Target::deallocate`'s contract.
                unsafe { $adaptor::new(&a).deallocate(End::Low, ptr, layout) }
            })
            .with_grow(Takes::ANY, |a, ptr, old, new, zeroed| {
                // SAFETY: the caller upholds `Target::grow`'s contract.
                unsafe { $adaptor::new(&a).grow(End::Low, ptr, old, new, zeroed) }
            })
            .with_shrink(Takes::ANY, |a, ptr, old, new, _| {
                // SAFETY: the caller upholds `Target::shrink`'s contract.
                unsafe { $adaptor::new(&a).shrink(End::Low, ptr, old, new) }
            })
    };
}

impl<'a, A: ?Sized> EntryPoints<'a, A> {
    /// `alloc` with no entry point yet: add them with the `with_` methods.
    #[must_use]
    pub const fn new(alloc: &'a A) -> Self {
        Self {
            alloc,
            allocate: Rota::new(),
            deallocate: Rota::new(),
            grow: Rota::new(),
            shrink: Rota::new(),
            in_place: Rota::new(),
            frees: 0,
            before_free: None,
            trim: None,
            fail_next: None,
            validate: None,
        }
    }

    /// Adds allocator-api2 **0.2**'s `Allocator` on `&A` for every plain call.
    #[must_use]
    pub fn with_api02(self) -> Self
    where
        for<'x> &'x A: allocator_api2::alloc::Allocator,
    {
        api_entry_points!(self, Api02)
    }

    /// Adds allocator-api2 **0.4**'s `Allocator` on `&A` for every plain call.
    #[must_use]
    pub fn with_api04(self) -> Self
    where
        for<'x> &'x A: allocator_api2_04::alloc::Allocator,
    {
        api_entry_points!(self, Api04)
    }

    /// Adds `GlobalAlloc`: `alloc` and `alloc_zeroed`, `dealloc`, and `realloc` for
    /// grows and shrinks, each for the calls `GlobalAlloc` allows ([`Takes::SIZED`]).
    #[must_use]
    pub fn with_global_alloc(self) -> Self
    where
        A: GlobalAlloc,
    {
        self.with_allocate(Takes::SIZED.zeroed(), |a, layout, zeroed| {
            // SAFETY: a non-zero size (`Takes::SIZED`).
            let p = unsafe {
                if zeroed {
                    a.alloc_zeroed(layout)
                } else {
                    a.alloc(layout)
                }
            };
            NonNull::new(p).map(|p| NonNull::slice_from_raw_parts(p, layout.size()))
        })
        .with_deallocate(Takes::SIZED, |a, ptr, layout| {
            // SAFETY: a live block of `layout`, of non-zero size (the caller's
            // contract and `Takes::SIZED`).
            unsafe { a.dealloc(ptr.as_ptr(), layout) }
        })
        .with_resize(Takes::SIZED, |a, ptr, old, new, _| {
            // SAFETY: a live block of `old`; `new` has its alignment and a non-zero
            // size (the caller's contract and `Takes::SIZED`).
            let p = unsafe { a.realloc(ptr.as_ptr(), old, new.size()) };
            NonNull::new(p).map(|p| NonNull::slice_from_raw_parts(p, new.size()))
        })
    }

    /// Adds `allocate` for the allocations `takes` allows.
    #[must_use]
    pub fn with_allocate(mut self, takes: Takes, allocate: AllocateFn<A>) -> Self {
        self.allocate.entries.push((takes, allocate));
        self
    }

    /// Adds `deallocate` for the frees `takes` allows.
    #[must_use]
    pub fn with_deallocate(mut self, takes: Takes, deallocate: DeallocateFn<A>) -> Self {
        self.deallocate.entries.push((takes, deallocate));
        self
    }

    /// Adds `grow` for the grows `takes` allows.
    #[must_use]
    pub fn with_grow(mut self, takes: Takes, grow: ResizeFn<A>) -> Self {
        self.grow.entries.push((takes, grow));
        self
    }

    /// Adds `shrink` for the shrinks `takes` allows (it is passed `false` for
    /// zeroing).
    #[must_use]
    pub fn with_shrink(mut self, takes: Takes, shrink: ResizeFn<A>) -> Self {
        self.shrink.entries.push((takes, shrink));
        self
    }

    /// Adds `resize` for the grows and the shrinks `takes` allows.
    #[must_use]
    pub fn with_resize(self, takes: Takes, resize: ResizeFn<A>) -> Self {
        self.with_grow(takes, resize).with_shrink(takes, resize)
    }

    /// Adds `in_place` for the resizes in place (`Ops::IN_PLACE`) `takes` allows.
    #[must_use]
    pub fn with_in_place(mut self, takes: Takes, in_place: InPlaceFn<A>) -> Self {
        self.in_place.entries.push((takes, in_place));
        self
    }

    /// Calls `hook` before each free, with the number of frees before it.
    #[must_use]
    pub fn with_before_free(mut self, hook: fn(&A, usize)) -> Self {
        self.before_free = Some(hook);
        self
    }

    /// Runs `trim` for `Ops::TRIM`.
    #[must_use]
    pub fn with_trim(mut self, trim: fn(&A)) -> Self {
        self.trim = Some(trim);
        self
    }

    /// Runs `fail_next` for `Ops::FAIL_NEXT`.
    #[must_use]
    pub fn with_fail_next(mut self, fail_next: fn(&A, u32)) -> Self {
        self.fail_next = Some(fail_next);
        self
    }

    /// Runs `validate` at each check.
    #[must_use]
    pub fn with_validate(mut self, validate: ValidateFn<A>) -> Self {
        self.validate = Some(validate);
        self
    }
}

impl<A: ?Sized> fmt::Debug for EntryPoints<'_, A> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EntryPoints")
            .field("allocate", &self.allocate.entries.len())
            .field("deallocate", &self.deallocate.entries.len())
            .field("grow", &self.grow.entries.len())
            .field("shrink", &self.shrink.entries.len())
            .field("in_place", &self.in_place.entries.len())
            .field("frees", &self.frees)
            .finish_non_exhaustive()
    }
}

impl<A: ?Sized> Target for EntryPoints<'_, A> {
    fn allocate(&mut self, _: End, layout: Layout, zeroed: bool) -> Option<NonNull<[u8]>> {
        let allocate = self
            .allocate
            .must_pick("allocate", |t| t.block(layout, zeroed));
        allocate(self.alloc, layout, zeroed)
    }

    unsafe fn deallocate(&mut self, _: End, ptr: NonNull<u8>, layout: Layout) {
        if let Some(hook) = self.before_free {
            hook(self.alloc, self.frees);
        }
        self.frees += 1;
        let deallocate = self
            .deallocate
            .must_pick("deallocate", |t| t.block(layout, false));
        // SAFETY: the caller upholds `Target::deallocate`'s contract, which is the
        // entry point's.
        unsafe { deallocate(self.alloc, ptr, layout) }
    }

    unsafe fn grow(
        &mut self,
        _: End,
        ptr: NonNull<u8>,
        old: Layout,
        new: Layout,
        zeroed: bool,
    ) -> Option<NonNull<[u8]>> {
        let grow = self.grow.must_pick("grow", |t| t.resize(old, new, zeroed));
        // SAFETY: the caller upholds `Target::grow`'s contract, which is the entry
        // point's.
        unsafe { grow(self.alloc, ptr, old, new, zeroed) }
    }

    unsafe fn shrink(
        &mut self,
        _: End,
        ptr: NonNull<u8>,
        old: Layout,
        new: Layout,
    ) -> Option<NonNull<[u8]>> {
        let shrink = self
            .shrink
            .must_pick("shrink", |t| t.resize(old, new, false));
        // SAFETY: the caller upholds `Target::shrink`'s contract, which is the entry
        // point's.
        unsafe { shrink(self.alloc, ptr, old, new, false) }
    }

    unsafe fn resize_in_place(
        &mut self,
        _: End,
        ptr: NonNull<u8>,
        old: Layout,
        new_size: usize,
    ) -> Option<NonNull<[u8]>> {
        let new = Layout::from_size_align(new_size, old.align()).ok()?;
        // An entry point that does not take the sizes cannot resize the block.
        let in_place = self
            .in_place
            .pick("resize_in_place", |t| t.resize(old, new, false))?;
        // SAFETY: the caller upholds `Target::resize_in_place`'s contract, which is the
        // entry point's.
        unsafe { in_place(self.alloc, ptr, old, new_size) }
    }

    fn trim(&mut self) {
        let trim = self.trim.unwrap_or_else(|| unimplemented_op("trim"));
        trim(self.alloc);
    }

    fn fail_next(&mut self, k: u32) {
        let fail_next = self
            .fail_next
            .unwrap_or_else(|| unimplemented_op("fail_next"));
        fail_next(self.alloc, k);
    }

    fn validate(&mut self) -> Result<Stats, String> {
        match self.validate {
            Some(check) => check(self.alloc),
            None => Ok(Stats::default()),
        }
    }
}
