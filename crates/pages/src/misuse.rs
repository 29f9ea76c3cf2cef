//! The misuse every bento allocator's debug checks report, and the hook they report
//! it to.

use core::alloc::Layout;
use core::fmt;
use core::ptr::NonNull;

/// A misuse a bento allocator's checks found, given to its [`MisuseHook`]: a pointer
/// freed that is not one of its blocks, freed twice, freed with a layout it cannot
/// have, a free block written to, or blocks left live when the allocator is dropped.
///
/// The checks run in debug builds (and `validate()` looks in every build). When the
/// hook returns instead of panicking, the call that misused the allocator does
/// nothing (a bad free frees nothing), so nothing overlaps.
///
/// ```
/// use bento_pages::Misuse;
/// use core::ptr::NonNull;
///
/// let m = Misuse::DoubleFree { ptr: NonNull::dangling() };
/// assert!(m.to_string().contains("already free"));
/// ```
#[derive(Clone, Copy, Debug)]
#[non_exhaustive]
pub enum Misuse<'a> {
    /// A pointer freed that is not in the allocator's memory: another allocator's,
    /// or (in a memory space) a block whose segment was released when it was freed,
    /// which makes this a double free.
    Foreign {
        /// The pointer given.
        ptr: NonNull<u8>,
    },
    /// A pointer freed that points into the allocator's memory but not at the start
    /// of a live block: an interior pointer, or a corrupted block header.
    Interior {
        /// The pointer given.
        ptr: NonNull<u8>,
        /// The start of the block it points into, where the allocator knows it.
        block: Option<NonNull<u8>>,
    },
    /// A pointer freed that the allocator never handed out (a pool chunk above its
    /// high-water mark).
    NeverAllocated {
        /// The pointer given.
        ptr: NonNull<u8>,
    },
    /// A block freed that is already free.
    DoubleFree {
        /// The pointer given.
        ptr: NonNull<u8>,
    },
    /// A free block's fill was overwritten: something wrote to it after it was freed.
    WriteAfterFree {
        /// The block.
        ptr: NonNull<u8>,
        /// The first byte found changed, from the block's start.
        offset: usize,
    },
    /// A free block's free-list link was overwritten with something that is not a
    /// free block: the rest of that free list cannot be trusted and is dropped (its
    /// blocks stay unused rather than risk being handed out twice).
    BrokenLink {
        /// The block whose link was overwritten.
        ptr: NonNull<u8>,
    },
    /// A block freed with a layout it cannot have: more bytes than it holds, or an
    /// alignment its address does not meet.
    WrongLayout {
        /// The pointer given.
        ptr: NonNull<u8>,
        /// The layout given.
        layout: Layout,
        /// The bytes the block holds.
        block_size: usize,
        /// The alignment the block is known to have.
        block_align: usize,
    },
    /// A guard byte in front of or behind a block was overwritten (a heap's
    /// canaries): a write out of the block's bounds.
    GuardOverwritten {
        /// The name of the heap that owns the block.
        heap: &'static str,
        /// The block, as its user sees it.
        ptr: NonNull<u8>,
        /// The block's size.
        size: usize,
        /// Which guard was overwritten.
        side: GuardSide,
        /// How far out from the block's edge the changed byte nearest to it lies: 1
        /// for the byte right before its start (front) or right after its end (back).
        offset: usize,
        /// Where the block was allocated, when the heap tracks it.
        site: Option<&'static core::panic::Location<'static>>,
    },
    /// The allocator was dropped with blocks still live.
    Leaked(&'a dyn Leaks),
}

/// Which guard of a block a [`Misuse::GuardOverwritten`] names.
///
/// ```
/// use bento_pages::GuardSide;
///
/// assert_eq!(GuardSide::Front.to_string(), "front");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GuardSide {
    /// The bytes just before the block: an underrun.
    Front,
    /// The bytes just after the block: an overrun.
    Back,
}

impl fmt::Display for GuardSide {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Front => "front",
            Self::Back => "back",
        })
    }
}

impl Misuse<'_> {
    /// The pointer the misuse is about: the one freed, or the free block found
    /// damaged; `None` for [`Leaked`](Self::Leaked).
    ///
    /// ```
    /// use bento_pages::Misuse;
    /// use core::ptr::NonNull;
    ///
    /// let ptr = NonNull::dangling();
    /// assert_eq!(Misuse::DoubleFree { ptr }.ptr(), Some(ptr));
    /// ```
    #[must_use]
    pub fn ptr(&self) -> Option<NonNull<u8>> {
        match *self {
            Self::Foreign { ptr }
            | Self::Interior { ptr, .. }
            | Self::NeverAllocated { ptr }
            | Self::DoubleFree { ptr }
            | Self::WriteAfterFree { ptr, .. }
            | Self::BrokenLink { ptr }
            | Self::WrongLayout { ptr, .. }
            | Self::GuardOverwritten { ptr, .. } => Some(ptr),
            Self::Leaked(_) => None,
        }
    }

    /// The misuse as a value that outlives the hook call, to record it: every variant
    /// but [`Leaked`](Self::Leaked), whose list borrows the allocator (`None`).
    ///
    /// ```
    /// use bento_pages::Misuse;
    /// use core::ptr::NonNull;
    ///
    /// fn keep(misuse: &Misuse<'_>) -> Option<Misuse<'static>> {
    ///     misuse.detach()
    /// }
    /// assert!(keep(&Misuse::DoubleFree { ptr: NonNull::dangling() }).is_some());
    /// ```
    #[must_use]
    pub fn detach(&self) -> Option<Misuse<'static>> {
        Some(match *self {
            Self::Foreign { ptr } => Misuse::Foreign { ptr },
            Self::Interior { ptr, block } => Misuse::Interior { ptr, block },
            Self::NeverAllocated { ptr } => Misuse::NeverAllocated { ptr },
            Self::DoubleFree { ptr } => Misuse::DoubleFree { ptr },
            Self::WriteAfterFree { ptr, offset } => Misuse::WriteAfterFree { ptr, offset },
            Self::BrokenLink { ptr } => Misuse::BrokenLink { ptr },
            Self::WrongLayout {
                ptr,
                layout,
                block_size,
                block_align,
            } => Misuse::WrongLayout {
                ptr,
                layout,
                block_size,
                block_align,
            },
            Self::GuardOverwritten {
                heap,
                ptr,
                size,
                side,
                offset,
                site,
            } => Misuse::GuardOverwritten {
                heap,
                ptr,
                size,
                side,
                offset,
                site,
            },
            Self::Leaked(_) => return None,
        })
    }
}

impl fmt::Display for Misuse<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Self::Foreign { ptr } => write!(
                f,
                "{ptr:p} freed is not in this allocator's memory (another allocator's \
                 block, or one freed already whose memory was given back)"
            ),
            Self::Interior {
                ptr,
                block: Some(block),
            } => write!(
                f,
                "{ptr:p} freed points inside the block at {block:p}, not at its start"
            ),
            Self::Interior { ptr, block: None } => write!(
                f,
                "{ptr:p} freed points into this allocator but not at the start of a live block"
            ),
            Self::NeverAllocated { ptr } => {
                write!(f, "{ptr:p} freed was never handed out by this allocator")
            }
            Self::DoubleFree { ptr } => {
                write!(f, "double free of {ptr:p}: the block is already free")
            }
            Self::WriteAfterFree { ptr, offset } => write!(
                f,
                "write after free: the free block at {ptr:p} was changed at offset {offset}"
            ),
            Self::BrokenLink { ptr } => write!(
                f,
                "the free block at {ptr:p} was overwritten (its free-list link is not a free \
                 block); the rest of the free list is dropped"
            ),
            Self::WrongLayout {
                ptr,
                layout,
                block_size,
                block_align,
            } => write!(
                f,
                "{ptr:p} freed with size {} and alignment {}, which a block of {block_size} \
                 bytes aligned to {block_align} at that address cannot have",
                layout.size(),
                layout.align()
            ),
            Self::GuardOverwritten {
                heap,
                ptr,
                size,
                side,
                offset,
                site,
            } => {
                write!(
                    f,
                    "heap \"{heap}\": the {side} guard of the block at {ptr:p} ({size} bytes) \
                     was overwritten {offset} byte(s) {}",
                    match side {
                        GuardSide::Front => "before its start",
                        GuardSide::Back => "past its end",
                    }
                )?;
                if let Some(site) = site {
                    write!(f, "; allocated at {site}")?;
                }
                Ok(())
            }
            Self::Leaked(leaks) => write!(f, "{leaks}"),
        }
    }
}

/// The blocks an allocator still has live when it is dropped, as
/// [`Misuse::Leaked`] hands them to the hook. Its `Display` names the count and the
/// first few blocks.
///
/// ```
/// use bento_pages::Leaks;
/// use core::fmt;
/// use core::ptr::NonNull;
///
/// /// One leaked block.
/// #[derive(Debug)]
/// struct One(NonNull<u8>);
///
/// impl fmt::Display for One {
///     fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
///         write!(f, "1 block leaked: {:p}", self.0)
///     }
/// }
///
/// impl Leaks for One {
///     fn count(&self) -> usize {
///         1
///     }
///     fn for_each(&self, visit: &mut dyn FnMut(NonNull<u8>)) {
///         visit(self.0);
///     }
/// }
///
/// let mut seen = 0;
/// One(NonNull::dangling()).for_each(&mut |_| seen += 1);
/// assert_eq!(seen, 1);
/// ```
pub trait Leaks: fmt::Display + fmt::Debug {
    /// How many blocks are live.
    fn count(&self) -> usize;

    /// Calls `visit` with each live block, in address order.
    fn for_each(&self, visit: &mut dyn FnMut(NonNull<u8>));
}

/// What an allocator calls on misuse its checks detect. The default,
/// [`panic_on_misuse`], panics with the misuse's message; a hook that returns makes
/// the call that misused the allocator do nothing.
pub type MisuseHook = fn(&Misuse<'_>);

/// The default [`MisuseHook`]: panics with the message of `misuse`.
///
/// ```should_panic
/// use bento_pages::{Misuse, panic_on_misuse};
/// use core::ptr::NonNull;
///
/// panic_on_misuse(&Misuse::DoubleFree { ptr: NonNull::dangling() });
/// ```
#[track_caller]
pub fn panic_on_misuse(misuse: &Misuse<'_>) {
    panic!("bento allocator misuse: {misuse}")
}
