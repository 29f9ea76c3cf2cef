#![doc = include_str!("../README.md")]
#![cfg_attr(docsrs, feature(doc_cfg), doc(auto_cfg(hide(bento_loom))))]
#![no_std]

use core::alloc::Layout;
use core::fmt;
use core::num::NonZeroUsize;

/// A power of two, used as an alignment or a granule.
///
/// The invariant (a non-zero power of two) is checked once, at construction, so the
/// functions of this crate need no further checks. `Option<Alignment>` is the size of
/// a `usize`.
///
/// ```
/// use bento_align::Alignment;
///
/// let a = Alignment::new(64).unwrap();
/// assert_eq!(a.get(), 64);
/// assert_eq!(a.mask(), 63);
/// assert_eq!(a.log2(), 6);
/// assert!(Alignment::new(48).is_none());
/// assert_eq!(core::mem::size_of::<Option<Alignment>>(), core::mem::size_of::<usize>());
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Alignment(
    // Invariant: a power of two.
    NonZeroUsize,
);

const _: () = assert!(size_of::<Option<Alignment>>() == size_of::<usize>());

impl Alignment {
    /// The smallest alignment, 1.
    ///
    /// ```
    /// assert_eq!(bento_align::Alignment::MIN.get(), 1);
    /// ```
    pub const MIN: Self = Self::of::<u8>();

    /// A 4 KiB page, the smallest page size of the platforms bento runs on.
    ///
    /// ```
    /// assert_eq!(bento_align::Alignment::PAGE_4K.get(), 4096);
    /// ```
    pub const PAGE_4K: Self = match Self::new(4096) {
        Some(a) => a,
        None => unreachable!(),
    };

    /// The largest alignment a `usize` can hold, `2^(usize::BITS - 1)`.
    ///
    /// ```
    /// assert_eq!(bento_align::Alignment::MAX.log2(), usize::BITS - 1);
    /// ```
    pub const MAX: Self = match Self::new(1 << (usize::BITS - 1)) {
        Some(a) => a,
        None => unreachable!(),
    };

    /// Returns the alignment `value`, or `None` when `value` is not a power of two.
    ///
    /// ```
    /// use bento_align::Alignment;
    ///
    /// assert!(Alignment::new(8).is_some());
    /// assert!(Alignment::new(0).is_none());
    /// assert!(Alignment::new(12).is_none());
    /// ```
    #[inline]
    #[must_use]
    pub const fn new(value: usize) -> Option<Self> {
        if value.is_power_of_two() {
            // SAFETY: `value` is a power of two, the only precondition.
            Some(unsafe { Self::new_unchecked(value) })
        } else {
            None
        }
    }

    /// Returns the alignment `value` without checking it.
    ///
    /// # Safety
    ///
    /// The caller must ensure that `value` is a power of two.
    ///
    /// ```
    /// use bento_align::Alignment;
    ///
    /// // SAFETY: 32 is a power of two.
    /// let a = unsafe { Alignment::new_unchecked(32) };
    /// assert_eq!(a.get(), 32);
    /// ```
    #[inline]
    #[must_use]
    pub const unsafe fn new_unchecked(value: usize) -> Self {
        debug_assert!(
            value.is_power_of_two(),
            "Alignment::new_unchecked: not a power of two"
        );
        // SAFETY: the caller guarantees a power of two, which is never zero.
        Self(unsafe { NonZeroUsize::new_unchecked(value) })
    }

    /// The alignment of `T`.
    ///
    /// ```
    /// use bento_align::Alignment;
    ///
    /// assert_eq!(Alignment::of::<u64>().get(), core::mem::align_of::<u64>());
    /// ```
    #[inline]
    #[must_use]
    pub const fn of<T>() -> Self {
        // SAFETY: the alignment of a type is always a power of two.
        unsafe { Self::new_unchecked(align_of::<T>()) }
    }

    /// The alignment of a layout.
    ///
    /// ```
    /// use bento_align::Alignment;
    /// use core::alloc::Layout;
    ///
    /// let layout = Layout::from_size_align(24, 8).unwrap();
    /// assert_eq!(Alignment::from_layout(&layout).get(), 8);
    /// ```
    #[inline]
    #[must_use]
    pub const fn from_layout(layout: &Layout) -> Self {
        // SAFETY: `Layout` guarantees its alignment is a power of two.
        unsafe { Self::new_unchecked(layout.align()) }
    }

    /// The alignment as a `usize`.
    ///
    /// ```
    /// assert_eq!(bento_align::Alignment::new(2).unwrap().get(), 2);
    /// ```
    #[inline]
    #[must_use]
    pub const fn get(self) -> usize {
        self.0.get()
    }

    /// The low bits an aligned address has clear: `self.get() - 1`.
    ///
    /// ```
    /// assert_eq!(bento_align::Alignment::new(16).unwrap().mask(), 0b1111);
    /// ```
    #[inline]
    #[must_use]
    pub const fn mask(self) -> usize {
        self.0.get() - 1
    }

    /// The base-2 logarithm: `1 << self.log2() == self.get()`.
    ///
    /// ```
    /// assert_eq!(bento_align::Alignment::new(4096).unwrap().log2(), 12);
    /// ```
    #[inline]
    #[must_use]
    pub const fn log2(self) -> u32 {
        self.0.trailing_zeros()
    }

    /// The larger of two alignments (usable in `const` contexts, unlike `Ord::max`).
    ///
    /// ```
    /// use bento_align::Alignment;
    ///
    /// let a = Alignment::new(8).unwrap();
    /// let b = Alignment::new(64).unwrap();
    /// assert_eq!(a.max_with(b), b);
    /// ```
    #[inline]
    #[must_use]
    pub const fn max_with(self, other: Self) -> Self {
        if self.get() >= other.get() {
            self
        } else {
            other
        }
    }
}

impl fmt::Debug for Alignment {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Alignment({})", self.get())
    }
}

impl fmt::Display for Alignment {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.get(), f)
    }
}

/// The error of `Alignment::try_from` on a value that is not a power of two.
///
/// ```
/// use bento_align::Alignment;
///
/// let err = Alignment::try_from(6).unwrap_err();
/// assert_eq!(err.value(), 6);
/// assert_eq!(err.to_string(), "6 is not a power of two");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NotPowerOfTwo(usize);

impl NotPowerOfTwo {
    /// The value that was refused.
    ///
    /// ```
    /// let err = bento_align::Alignment::try_from(0).unwrap_err();
    /// assert_eq!(err.value(), 0);
    /// ```
    #[must_use]
    pub const fn value(self) -> usize {
        self.0
    }
}

impl fmt::Display for NotPowerOfTwo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} is not a power of two", self.0)
    }
}

impl core::error::Error for NotPowerOfTwo {}

impl TryFrom<usize> for Alignment {
    type Error = NotPowerOfTwo;

    #[inline]
    fn try_from(value: usize) -> Result<Self, Self::Error> {
        Self::new(value).ok_or(NotPowerOfTwo(value))
    }
}

impl From<Alignment> for usize {
    #[inline]
    fn from(a: Alignment) -> usize {
        a.get()
    }
}

/// The smallest multiple of `align` that is `>= addr`, or `None` when it does not fit
/// in a `usize`.
///
/// ```
/// use bento_align::{align_up, Alignment};
///
/// let a = Alignment::new(8).unwrap();
/// assert_eq!(align_up(0, a), Some(0));
/// assert_eq!(align_up(1, a), Some(8));
/// assert_eq!(align_up(8, a), Some(8));
/// assert_eq!(align_up(usize::MAX - 3, a), None);
/// ```
#[inline]
#[must_use]
pub const fn align_up(addr: usize, align: Alignment) -> Option<usize> {
    match addr.checked_add(align.mask()) {
        Some(bumped) => Some(bumped & !align.mask()),
        None => None,
    }
}

/// The largest multiple of `align` that is `<= addr`.
///
/// ```
/// use bento_align::{align_down, Alignment};
///
/// assert_eq!(align_down(4097, Alignment::PAGE_4K), 4096);
/// assert_eq!(align_down(4095, Alignment::PAGE_4K), 0);
/// ```
#[inline]
#[must_use]
pub const fn align_down(addr: usize, align: Alignment) -> usize {
    addr & !align.mask()
}

/// Whether `addr` is a multiple of `align`.
///
/// ```
/// use bento_align::{is_aligned, Alignment};
///
/// let a = Alignment::new(16).unwrap();
/// assert!(is_aligned(32, a));
/// assert!(!is_aligned(40, a));
/// ```
#[inline]
#[must_use]
pub const fn is_aligned(addr: usize, align: Alignment) -> bool {
    addr & align.mask() == 0
}

/// How many bytes must be added to `addr` to reach the next multiple of `align`
/// (0 when it is aligned already). Always less than `align`.
///
/// Unlike [`align_up`] this never fails: the padding itself always fits, even where
/// `addr + padding` would not.
///
/// ```
/// use bento_align::{padding_for, Alignment};
///
/// let a = Alignment::new(16).unwrap();
/// assert_eq!(padding_for(33, a), 15);
/// assert_eq!(padding_for(48, a), 0);
/// ```
#[inline]
#[must_use]
pub const fn padding_for(addr: usize, align: Alignment) -> usize {
    addr.wrapping_neg() & align.mask()
}

/// The smallest `r >= addr` such that `r + offset` is a multiple of `align`, or `None`
/// when `r + offset` does not fit in a `usize`.
///
/// This leaves room for a header of `offset` bytes in front of an aligned block: the
/// header starts at `r`, the block at `r + offset`.
///
/// ```
/// use bento_align::{align_up_with_offset, Alignment};
///
/// let a = Alignment::new(16).unwrap();
/// assert_eq!(align_up_with_offset(0, a, 8), Some(8)); // header 8..16, block at 16
/// assert_eq!(align_up_with_offset(9, a, 8), Some(24)); // header 24..32, block at 32
/// assert_eq!(align_up_with_offset(usize::MAX, a, 1), None);
/// ```
#[inline]
#[must_use]
pub const fn align_up_with_offset(addr: usize, align: Alignment, offset: usize) -> Option<usize> {
    let Some(start) = addr.checked_add(offset) else {
        return None;
    };
    match align_up(start, align) {
        // `block >= start = addr + offset`, so the subtraction cannot wrap.
        Some(block) => Some(block - offset),
        None => None,
    }
}

/// The smallest multiple of `granule` that is `>= size`, or `None` when it does not fit
/// in a `usize`. The granule need not be a power of two.
///
/// ```
/// use bento_align::round_up_to;
/// use core::num::NonZeroUsize;
///
/// let g = NonZeroUsize::new(24).unwrap();
/// assert_eq!(round_up_to(0, g), Some(0));
/// assert_eq!(round_up_to(25, g), Some(48));
/// assert_eq!(round_up_to(usize::MAX, g), None);
/// ```
#[inline]
#[must_use]
pub const fn round_up_to(size: usize, granule: NonZeroUsize) -> Option<usize> {
    let g = granule.get();
    let rem = size % g;
    if rem == 0 {
        Some(size)
    } else {
        size.checked_add(g - rem)
    }
}

/// The largest multiple of `granule` that is `<= size`. The granule need not be a power
/// of two.
///
/// ```
/// use bento_align::round_down_to;
/// use core::num::NonZeroUsize;
///
/// assert_eq!(round_down_to(47, NonZeroUsize::new(24).unwrap()), 24);
/// ```
#[inline]
#[must_use]
pub const fn round_down_to(size: usize, granule: NonZeroUsize) -> usize {
    size - size % granule.get()
}

/// The first pointer at or after `ptr` whose address is a multiple of `align`, with
/// `ptr`'s provenance; `None` when the address would overflow or the alignment cannot
/// be computed (see the crate's Drawbacks).
///
/// The result is computed with `wrapping_byte_add`, so it is only dereferenceable if
/// it is still inside the allocation `ptr` points into.
///
/// ```
/// use bento_align::{align_ptr_up, is_ptr_aligned, Alignment};
///
/// #[repr(align(64))]
/// struct Buf([u8; 256]);
/// let mut buf = Buf([0; 256]);
/// let p = buf.0.as_mut_ptr().wrapping_add(3);
/// let a = Alignment::new(16).unwrap();
/// let q = align_ptr_up(p, a).unwrap();
/// assert!(is_ptr_aligned(q, a));
/// assert_eq!(q.addr() - p.addr(), 13);
/// ```
#[inline]
#[must_use]
pub fn align_ptr_up<T>(ptr: *mut T, align: Alignment) -> Option<*mut T> {
    let pad = ptr.cast::<u8>().align_offset(align.get());
    if pad == usize::MAX || ptr.addr().checked_add(pad).is_none() {
        return None;
    }
    Some(ptr.wrapping_byte_add(pad))
}

/// The last pointer at or before `ptr` whose address is a multiple of `align`, with
/// `ptr`'s provenance.
///
/// The result is computed with `wrapping_byte_sub`, so it is only dereferenceable if
/// it is still inside the allocation `ptr` points into.
///
/// ```
/// use bento_align::{align_ptr_down, Alignment};
///
/// #[repr(align(64))]
/// struct Buf([u8; 128]);
/// let mut buf = Buf([0; 128]);
/// let base = buf.0.as_mut_ptr();
/// let a = Alignment::new(64).unwrap();
/// assert_eq!(align_ptr_down(base.wrapping_add(70), a), base.wrapping_add(64));
/// ```
#[inline]
#[must_use]
pub fn align_ptr_down<T>(ptr: *mut T, align: Alignment) -> *mut T {
    ptr.wrapping_byte_sub(ptr.addr() & align.mask())
}

/// Whether the address of `ptr` is a multiple of `align`.
///
/// ```
/// use bento_align::{is_ptr_aligned, Alignment};
///
/// let x = 0u64;
/// assert!(is_ptr_aligned(&raw const x, Alignment::of::<u64>()));
/// ```
#[inline]
#[must_use]
pub fn is_ptr_aligned<T>(ptr: *const T, align: Alignment) -> bool {
    is_aligned(ptr.addr(), align)
}

#[cfg(test)]
mod tests;
