//! N arenas in rotation, one per frame in flight.

use core::cell::Cell;
use core::fmt;
use core::ops::Deref;

use bento_pages::{PageError, PageSource};

use crate::linear::arena::{Arena, ArenaConfig};

/// [`FrameArena::next_frame`] refused: the handle of the frame it would recycle (the
/// oldest) is still alive, so its memory may still be in use.
///
/// ```
/// use bento_primitives::FrameBusy;
///
/// assert_eq!(
///     FrameBusy { frame: 3 }.to_string(),
///     "frame 3 is still in use: drop its handle before its arena comes round again"
/// );
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("frame {frame} is still in use: drop its handle before its arena comes round again")]
pub struct FrameBusy {
    /// The number of the frame whose handle is alive.
    pub frame: u64,
}

/// `N` [`Arena`]s in rotation for memory that lives a few frames (the GPU reading what
/// the CPU wrote, results read back one frame later): [`next_frame`](Self::next_frame)
/// resets the oldest arena and hands out a [`Frame`] handle for it, so memory from
/// frame `k` stays valid until frame `k + N` begins.
///
/// Blocks borrow their `Frame` handle, so the borrow checker keeps every block within
/// its handle's life; `next_frame` refuses ([`FrameBusy`]) to recycle an arena whose
/// handle is still alive. Keep at most `N - 1` older handles.
///
/// ```
/// use bento_pages::HeapPages;
/// use bento_primitives::{ArenaConfig, FrameArena};
///
/// let pages = HeapPages::new();
/// let frames = FrameArena::<_, 2>::with_source(&pages, ArenaConfig::default()).unwrap();
/// let mut previous = None;
/// for k in 0..10u64 {
///     let frame = frames.next_frame().unwrap();
///     let ticks = frame.alloc(k).unwrap();
///     if let Some(prev) = &previous {
///         let prev: &bento_primitives::Frame<'_, _> = prev;
///         assert_eq!(prev.number() + 1, frame.number());
///     }
///     assert_eq!(*ticks, k);
///     previous = Some(frame); // frame k - 1 is dropped here, before k + 1 begins
/// }
/// ```
///
/// A block cannot outlive its frame handle:
///
/// ```compile_fail,E0597
/// use bento_pages::HeapPages;
/// use bento_primitives::{ArenaConfig, FrameArena};
///
/// let pages = HeapPages::new();
/// let frames = FrameArena::<_, 2>::with_source(&pages, ArenaConfig::default()).unwrap();
/// let kept;
/// {
///     let frame = frames.next_frame().unwrap();
///     kept = frame.alloc(1u32).unwrap(); // error: `frame` does not live long enough
/// }
/// assert_eq!(*kept, 1);
/// ```
pub struct FrameArena<P: PageSource, const N: usize> {
    arenas: [Arena<P>; N],
    // Whether each arena's `Frame` handle is alive.
    busy: [Cell<bool>; N],
    // The number of each arena's current frame.
    numbers: [Cell<u64>; N],
    // The number of the next frame; it goes to arena `next % N`.
    next: Cell<u64>,
}

impl<P: PageSource + Clone, const N: usize> FrameArena<P, N> {
    /// `N` arenas, each reserving `config.reserve` bytes from a clone of `source`.
    ///
    /// # Errors
    ///
    /// [`PageError`] when a reservation fails (those already made are given back).
    ///
    /// # Panics
    ///
    /// When `N` is 0.
    ///
    /// ```
    /// use bento_pages::SystemPages;
    /// use bento_primitives::{ArenaConfig, FrameArena};
    ///
    /// let config = ArenaConfig { reserve: 8 << 20, ..ArenaConfig::default() };
    /// let frames = FrameArena::<_, 3>::with_source(SystemPages::new(), config).unwrap();
    /// assert_eq!(frames.reserved(), 3 * (8 << 20));
    /// ```
    pub fn with_source(source: P, config: ArenaConfig) -> Result<Self, PageError> {
        assert!(N > 0, "FrameArena needs at least one arena");
        let arenas = try_array(|_| Arena::with_source(source.clone(), config))?;
        Ok(Self {
            arenas,
            busy: core::array::from_fn(|_| Cell::new(false)),
            numbers: core::array::from_fn(|_| Cell::new(0)),
            next: Cell::new(0),
        })
    }
}

/// `[f(0), .., f(N - 1)]`, or the first error (the values made so far are dropped).
fn try_array<T, E, const N: usize>(mut f: impl FnMut(usize) -> Result<T, E>) -> Result<[T; N], E> {
    let mut made: [Option<T>; N] = core::array::from_fn(|_| None);
    for (i, slot) in made.iter_mut().enumerate() {
        *slot = Some(f(i)?);
    }
    Ok(made.map(|t| t.expect("every slot was filled")))
}

impl<P: PageSource, const N: usize> FrameArena<P, N> {
    /// Begins the next frame: resets the oldest arena (in O(1)) and returns the handle
    /// to allocate the frame's memory from.
    ///
    /// # Errors
    ///
    /// [`FrameBusy`] when the handle of the frame that arena held is still alive;
    /// nothing changes then.
    ///
    /// ```
    /// use bento_pages::HeapPages;
    /// use bento_primitives::{ArenaConfig, FrameArena, FrameBusy};
    ///
    /// let pages = HeapPages::new();
    /// let frames = FrameArena::<_, 2>::with_source(&pages, ArenaConfig::default()).unwrap();
    /// let f0 = frames.next_frame().unwrap();
    /// let f1 = frames.next_frame().unwrap();
    /// assert_eq!(frames.next_frame().unwrap_err(), FrameBusy { frame: 0 });
    /// drop(f0);
    /// let f2 = frames.next_frame().unwrap();
    /// assert_eq!((f1.number(), f2.number()), (1, 2));
    /// ```
    pub fn next_frame(&self) -> Result<Frame<'_, P>, FrameBusy> {
        let number = self.next.get();
        // `N > 0` (checked at construction); the remainder is below `N`.
        let slot = (number % N as u64) as usize;
        if self.busy[slot].get() {
            return Err(FrameBusy {
                frame: self.numbers[slot].get(),
            });
        }
        // SAFETY: the arena's handle is gone, and every block of it borrowed the
        // handle, so none is in use.
        unsafe { self.arenas[slot].reset_shared() };
        self.busy[slot].set(true);
        self.numbers[slot].set(number);
        self.next.set(number + 1);
        Ok(Frame {
            arena: &self.arenas[slot],
            busy: &self.busy[slot],
            number,
        })
    }

    /// Bytes committed by all arenas.
    ///
    /// ```
    /// use bento_pages::HeapPages;
    /// use bento_primitives::{ArenaConfig, FrameArena};
    ///
    /// let pages = HeapPages::new();
    /// let frames = FrameArena::<_, 2>::with_source(&pages, ArenaConfig::default()).unwrap();
    /// assert_eq!(frames.committed(), 0);
    /// ```
    #[must_use]
    pub fn committed(&self) -> usize {
        self.arenas.iter().map(Arena::committed).sum()
    }

    /// Bytes reserved by all arenas.
    ///
    /// ```
    /// use bento_pages::HeapPages;
    /// use bento_primitives::{ArenaConfig, FrameArena};
    ///
    /// let config = ArenaConfig { reserve: 1 << 20, ..ArenaConfig::default() };
    /// let pages = HeapPages::new();
    /// let frames = FrameArena::<_, 2>::with_source(&pages, config).unwrap();
    /// assert_eq!(frames.reserved(), 2 << 20);
    /// ```
    #[must_use]
    pub fn reserved(&self) -> usize {
        self.arenas.iter().map(Arena::reserved).sum()
    }

    /// The most bytes any one frame has used.
    ///
    /// ```
    /// use bento_pages::HeapPages;
    /// use bento_primitives::{ArenaConfig, FrameArena};
    ///
    /// let pages = HeapPages::new();
    /// let frames = FrameArena::<_, 2>::with_source(&pages, ArenaConfig::default()).unwrap();
    /// frames.next_frame().unwrap().alloc([0u8; 24]).unwrap();
    /// assert_eq!(frames.peak(), 24);
    /// ```
    #[must_use]
    pub fn peak(&self) -> usize {
        self.arenas.iter().map(Arena::peak).max().unwrap_or(0)
    }
}

impl<P: PageSource, const N: usize> fmt::Debug for FrameArena<P, N> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FrameArena")
            .field("next", &self.next.get())
            .field("arenas", &self.arenas)
            .finish()
    }
}

/// The handle of one frame of a [`FrameArena`]: derefs to its [`Arena`] for
/// allocation, and `&Frame` is an allocator-api2 `Allocator`. Blocks borrow the handle;
/// dropping it lets the arena be recycled `N` frames on.
///
/// ```
/// use bento_pages::HeapPages;
/// use bento_primitives::{ArenaConfig, FrameArena};
///
/// let pages = HeapPages::new();
/// let frames = FrameArena::<_, 2>::with_source(&pages, ArenaConfig::default()).unwrap();
/// let frame = frames.next_frame().unwrap();
/// let mut v = allocator_api2::vec::Vec::new_in(&frame);
/// v.extend(0..100u32);
/// assert_eq!(v[99], 99);
/// ```
pub struct Frame<'a, P: PageSource> {
    arena: &'a Arena<P>,
    busy: &'a Cell<bool>,
    number: u64,
}

impl<P: PageSource> Frame<'_, P> {
    /// The frame's number: 0 for the first `next_frame`, then counting up.
    ///
    /// ```
    /// use bento_pages::HeapPages;
    /// use bento_primitives::{ArenaConfig, FrameArena};
    ///
    /// let pages = HeapPages::new();
    /// let frames = FrameArena::<_, 1>::with_source(&pages, ArenaConfig::default()).unwrap();
    /// assert_eq!(frames.next_frame().unwrap().number(), 0);
    /// assert_eq!(frames.next_frame().unwrap().number(), 1);
    /// ```
    #[must_use]
    pub fn number(&self) -> u64 {
        self.number
    }
}

impl<P: PageSource> Deref for Frame<'_, P> {
    type Target = Arena<P>;

    fn deref(&self) -> &Arena<P> {
        self.arena
    }
}

impl<P: PageSource> Drop for Frame<'_, P> {
    fn drop(&mut self) {
        self.busy.set(false);
    }
}

impl<P: PageSource> fmt::Debug for Frame<'_, P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Frame")
            .field("number", &self.number)
            .field("arena", self.arena)
            .finish()
    }
}

crate::linear::arena::arena_handle!(Frame);
