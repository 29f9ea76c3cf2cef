//! What can go wrong asking for pages.

/// Why a page source refused a request.
///
/// ```
/// use bento_align::Alignment;
/// use bento_pages::{Invalid, PageError, PageSource, SystemPages};
///
/// let pages = SystemPages::new();
/// let err = pages.reserve(1, Alignment::MIN).unwrap_err();
/// assert!(matches!(err, PageError::Invalid(Invalid::NotPageMultiple { size: 1, .. })));
/// assert!(err.to_string().contains("not a multiple of the page size"));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PageError {
    /// No address range of the size (and alignment) asked for is left.
    #[error("out of address space: cannot reserve {size} bytes")]
    OutOfAddressSpace {
        /// The size asked for.
        size: usize,
    },
    /// The system (or callback) refused to commit memory.
    #[error("commit of {size} bytes refused (error code {code})")]
    CommitRefused {
        /// The size asked for.
        size: usize,
        /// The OS error number, or the callback's return value; 0 when injected.
        code: i32,
    },
    /// A commit would take the bytes committed past a fixed limit
    /// ([`LimitedPages`](crate::LimitedPages)).
    #[error("commit of {size} bytes refused: over the limit of {limit} bytes committed")]
    OverLimit {
        /// The size asked for.
        size: usize,
        /// The limit.
        limit: usize,
    },
    /// Huge pages were asked for where the system does not offer them
    /// (`SystemPages::with_huge_pages`).
    #[error("huge pages are not offered here: {why}")]
    HugePagesUnavailable {
        /// Why not.
        why: &'static str,
    },
    /// The arguments break the page contract.
    #[error(transparent)]
    Invalid(#[from] Invalid),
}

/// The ways an argument breaks the page contract.
///
/// ```
/// use bento_pages::Invalid;
///
/// let e = Invalid::Misaligned { addr: 0x1001, page: 4096 };
/// assert_eq!(e.to_string(), "address 0x1001 is not aligned to the page size 4096");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Invalid {
    /// A size of zero.
    #[error("size is zero")]
    ZeroSize,
    /// A size that is not a multiple of the page size.
    #[error("size {size} is not a multiple of the page size {page}")]
    NotPageMultiple {
        /// The size given.
        size: usize,
        /// The source's page size.
        page: usize,
    },
    /// A pointer that is not page-aligned.
    #[error("address {addr:#x} is not aligned to the page size {page}")]
    Misaligned {
        /// The address given.
        addr: usize,
        /// The source's page size.
        page: usize,
    },
    /// A range that is not inside a live reservation of this source.
    #[error("range {addr:#x}+{size} is not inside a live reservation")]
    OutsideReservation {
        /// The start of the range.
        addr: usize,
        /// Its size.
        size: usize,
    },
    /// An alignment the source cannot give (callbacks reserve page-aligned memory only).
    #[error("alignment {align} is larger than this source can give ({max})")]
    AlignmentTooLarge {
        /// The alignment asked for.
        align: usize,
        /// The largest this source gives.
        max: usize,
    },
}
