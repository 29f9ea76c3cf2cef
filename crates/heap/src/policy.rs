//! The policies a heap takes as type parameters ([`Guards`]) or values
//! ([`FillPattern`], [`Retry`], [`OnLeak`]), and [`Tag`].

use core::fmt;
use core::ptr::NonNull;

use bento_pages::GuardSide;

/// The guard bytes a heap puts around every block: [`NoGuards`] or [`Canaries`].
/// A type parameter of [`Heap`](crate::Heap), so a heap without guards has no guard
/// code at all.
///
/// # Safety
///
/// Implementations must ensure `BYTES` is the number of guard bytes on each side, the
/// same for every block (the heap lays blocks out by it).
///
/// ```
/// use bento_heap::{Canaries, Guards, NoGuards};
///
/// assert_eq!(NoGuards::BYTES, 0);
/// assert_eq!(Canaries::<16>::BYTES, 16);
/// ```
pub unsafe trait Guards: Copy + Default + fmt::Debug + Send + Sync + 'static {
    /// Guard bytes before and after each block; 0 for none.
    const BYTES: usize;
}

/// No guard bytes: the default, which costs nothing.
///
/// ```
/// use allocator_api2::alloc::Global;
/// use bento_heap::{Heap, HeapBuilder, NoGuards};
///
/// let heap: Heap<Global, NoGuards> = HeapBuilder::new("doc-noguards").build(Global);
/// assert_eq!(heap.name(), "doc-noguards");
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NoGuards;

// SAFETY: no guard bytes, for every block.
unsafe impl Guards for NoGuards {
    const BYTES: usize = 0;
}

/// `N` guard bytes of [`Canaries::PATTERN`] before and after every block, checked
/// when the block is freed or resized and by [`Heap::validate`](crate::Heap::validate). The
/// block keeps its alignment: the front guard is padded to it. A broken guard is
/// reported through the heap's misuse hook as
/// [`Misuse::GuardOverwritten`](bento_pages::Misuse::GuardOverwritten), naming the
/// heap, the block, its size, the side, and where it was allocated when the heap
/// tracks it.
///
/// ```
/// use allocator_api2::alloc::Global;
/// use bento_heap::{Canaries, HeapBuilder};
/// use core::alloc::Layout;
///
/// let heap = HeapBuilder::new("doc-canaries").guards(Canaries::<16>).build(Global);
/// let layout = Layout::from_size_align(40, 8).unwrap();
/// let p = heap.alloc(layout).unwrap();
/// // SAFETY: the 16 bytes after the block are its back guard, inside the inner block.
/// let guard = unsafe { core::slice::from_raw_parts(p.as_ptr().add(40), 16) };
/// assert!(guard.iter().all(|&b| b == Canaries::<16>::PATTERN));
/// // SAFETY: live, with its layout.
/// unsafe { heap.free(p, layout) };
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Canaries<const N: usize>;

impl<const N: usize> Canaries<N> {
    /// The byte guards hold (Microsoft's debug heap uses the same for its "no man's
    /// land").
    pub const PATTERN: u8 = 0xFD;
}

// SAFETY: `N` bytes on each side of every block.
unsafe impl<const N: usize> Guards for Canaries<N> {
    const BYTES: usize = N;
}

/// The guard byte every [`Canaries`] writes.
pub(crate) const GUARD: u8 = 0xFD;

/// Writes `G`'s guards around the block of `size` bytes at `user`.
///
/// # Safety
///
/// `G::BYTES` bytes before `user` and after `user + size` are the block's guards,
/// writable.
#[inline]
pub(crate) unsafe fn write_guards<G: Guards>(user: NonNull<u8>, size: usize) {
    // SAFETY: the caller's contract.
    unsafe {
        user.sub(G::BYTES).write_bytes(GUARD, G::BYTES);
        user.add(size).write_bytes(GUARD, G::BYTES);
    }
}

/// Checks `G`'s guards around the block of `size` bytes at `user`: the side and
/// distance (1 for the byte next to the block) of the changed byte nearest to the
/// block, front first.
///
/// # Safety
///
/// As for [`write_guards`]: the guards are readable.
pub(crate) unsafe fn broken_guard<G: Guards>(
    user: NonNull<u8>,
    size: usize,
) -> Option<(GuardSide, usize)> {
    for k in 1..=G::BYTES {
        // SAFETY: `user - k` lies in the front guard (the caller's contract).
        if unsafe { user.sub(k).read() } != GUARD {
            return Some((GuardSide::Front, k));
        }
    }
    for k in 1..=G::BYTES {
        // SAFETY: `user + size + k - 1` lies in the back guard.
        if unsafe { user.add(size + k - 1).read() } != GUARD {
            return Some((GuardSide::Back, k));
        }
    }
    None
}

/// Bytes a heap writes into blocks: over a fresh block (so a read of memory never
/// written shows a known pattern) and over a freed one (so a use after free reads
/// garbage that stands out). `None` leaves the bytes alone.
///
/// ```
/// use allocator_api2::alloc::Global;
/// use bento_heap::{FillPattern, HeapBuilder};
/// use core::alloc::Layout;
///
/// let heap = HeapBuilder::new("doc-fill").fill(FillPattern::DEBUG).build(Global);
/// let layout = Layout::new::<[u8; 8]>();
/// let p = heap.alloc(layout).unwrap();
/// // SAFETY: 8 bytes the heap just filled.
/// assert_eq!(unsafe { p.cast::<[u8; 8]>().read() }, [0xCD; 8]);
/// // SAFETY: live, with its layout.
/// unsafe { heap.free(p, layout) };
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FillPattern {
    /// Written over every fresh block (and the new bytes of a grown one).
    pub on_alloc: Option<u8>,
    /// Written over every block as it is freed (not over the old place of a block a
    /// resize moves: the inner allocator frees it), and over the bytes a shrink that
    /// keeps the block's alignment drops (before the inner allocator shrinks the
    /// block, while they are still the block's; a shrink to a stricter alignment,
    /// which may move the block and fail, fills nothing). Should the inner allocator
    /// refuse such a shrink all the same (one that moves the block to another size
    /// class and finds no memory), the block keeps its size with those bytes filled.
    pub on_free: Option<u8>,
}

impl FillPattern {
    /// No fill: the default.
    pub const NONE: Self = Self {
        on_alloc: None,
        on_free: None,
    };
    /// 0xCD on allocation ("clean"), 0xDD on free ("dead"), as Microsoft's debug heap.
    pub const DEBUG: Self = Self {
        on_alloc: Some(0xCD),
        on_free: Some(0xDD),
    };

    /// Whether it writes anything.
    #[must_use]
    pub const fn is_none(&self) -> bool {
        self.on_alloc.is_none() && self.on_free.is_none()
    }
}

/// What a heap's `on_budget_exceeded` callback answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Retry {
    /// Memory was freed: try the request once more.
    Again,
    /// Fail the request.
    Fail,
}

/// What a heap does when it is dropped with blocks of its own still live (its
/// children's are theirs to report). A child heap hands its report to its parent
/// instead, whose [`leaks`](crate::Heap::leaks) then lists them, unless the parent
/// was dropped first.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum OnLeak {
    /// Calls the heap's misuse hook with
    /// [`Misuse::Leaked`](bento_pages::Misuse::Leaked) (by default
    /// [`panic_on_misuse`](bento_pages::panic_on_misuse), which panics unless the
    /// thread is panicking already).
    #[default]
    Hook,
    /// Panics with the report (unless the thread is panicking already).
    Panic,
    /// Writes the report to stderr (with `std`; through the hook without it).
    Log,
    /// Says nothing.
    Ignore,
}

/// A memory tag: a name that blocks carry, with stats per tag in
/// [`Heap::tag_stats`](crate::Heap::tag_stats). Declared once as a `static`; a tag is
/// known by its address.
///
/// ```
/// use bento_heap::Tag;
///
/// static TEXTURES: Tag = Tag::new("textures");
/// assert_eq!(TEXTURES.name(), "textures");
/// ```
#[derive(Debug)]
pub struct Tag {
    name: &'static str,
}

impl Tag {
    /// A tag named `name`.
    #[must_use]
    pub const fn new(name: &'static str) -> Self {
        Self { name }
    }

    /// Its name.
    #[must_use]
    pub const fn name(&self) -> &'static str {
        self.name
    }
}

impl fmt::Display for Tag {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name)
    }
}
