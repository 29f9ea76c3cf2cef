//! What the linear allocators' `validate` returns: [`BumpReport`], the stats of a
//! bump allocator ([`Bump`](crate::Bump), [`Arena`](crate::Arena)), and
//! [`LinearCorruption`], the broken invariant of any linear allocator (the stacks
//! report a [`StackReport`](crate::StackReport) when whole).

/// What `validate()` of a bump allocator recomputed.
///
/// ```
/// use bento_primitives::{Bump, BumpReport};
/// use core::mem::MaybeUninit;
///
/// let mut buf = [MaybeUninit::uninit(); 64];
/// let bump = Bump::new(&mut buf);
/// bump.alloc(7u32).unwrap();
/// assert_eq!(bump.validate(), Ok(BumpReport { used_bytes: 8 }));
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BumpReport {
    /// Bytes from the start of the buffer (or reservation) to the top, alignment
    /// padding included.
    pub used_bytes: usize,
}

/// The invariant a linear allocator's `validate()` found broken.
///
/// ```
/// use bento_primitives::Stack;
/// use core::mem::MaybeUninit;
///
/// let mut buf = [MaybeUninit::uninit(); 256];
/// let stack = Stack::new(&mut buf);
/// // A whole stack has nothing to report; a broken one names the invariant.
/// assert!(stack.validate().is_ok());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{what}")]
pub struct LinearCorruption {
    what: &'static str,
}

impl LinearCorruption {
    /// A broken invariant, described by `what`.
    pub(crate) const fn new(what: &'static str) -> Self {
        Self { what }
    }

    /// What is broken.
    ///
    /// ```
    /// use bento_primitives::Bump;
    /// use core::mem::MaybeUninit;
    ///
    /// let mut buf = [MaybeUninit::uninit(); 64];
    /// let bump = Bump::new(&mut buf);
    /// assert!(bump.validate().map_err(|e| e.what()).is_ok());
    /// ```
    #[must_use]
    pub const fn what(&self) -> &'static str {
        self.what
    }
}
