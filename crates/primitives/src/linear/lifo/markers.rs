//! Markers: a [`Marker`] of an end's top, checked as it rolls the end back
//! ([`MarkerError`]), and the reset of an end.

use crate::linear::lifo::{Dir, Header, Lifo, MARK_ID, NONE, Pos};

/// A position in a [`Stack`](crate::Stack) (or one end of a
/// [`DoubleStack`](crate::DoubleStack) or [`DoubleArena`](crate::DoubleArena)) to roll
/// back to: the end's identity, its epoch when the marker was taken, its top and
/// newest block then, and the mark identity written into that block. Identities are
/// 32-bit and never reused: creating more than 2³² − 1 stack ends (`Stack`, or either
/// end of a `DoubleStack` or `DoubleArena`) in one process panics.
///
/// ```
/// use bento_primitives::Stack;
/// use core::mem::MaybeUninit;
///
/// let mut buf = [MaybeUninit::uninit(); 1024];
/// let mut stack = Stack::new(&mut buf);
/// let m = stack.marker();
/// stack.alloc_layout(core::alloc::Layout::new::<[u64; 4]>()).unwrap();
/// stack.rollback(m).unwrap();
/// assert_eq!(stack.used(), 0);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Marker {
    end: u32,
    used: u32,
    epoch: u64,
    pos: Pos,
    // The `MARK_ID` bits of the newest block's header when the marker was taken (0
    // when the end had no block).
    mark: u64,
}

impl Marker {
    /// What `used()` of its end was when the marker was taken, and will be after a
    /// rollback to it.
    ///
    /// ```
    /// use bento_primitives::Stack;
    /// use core::mem::MaybeUninit;
    ///
    /// let mut buf = [MaybeUninit::uninit(); 256];
    /// let mut stack = Stack::new(&mut buf);
    /// stack.alloc_layout(core::alloc::Layout::new::<u64>()).unwrap();
    /// let m = stack.marker();
    /// stack.alloc_layout(core::alloc::Layout::new::<u64>()).unwrap();
    /// stack.rollback(m).unwrap();
    /// assert_eq!(stack.used(), m.used());
    /// ```
    #[must_use]
    pub fn used(&self) -> usize {
        self.used as usize
    }

    /// The identity of the end the marker was taken on.
    pub(crate) fn end_id(&self) -> u32 {
        self.end
    }
}

/// Why a rollback was refused; the allocator is unchanged.
///
/// ```
/// use bento_primitives::{MarkerError, Stack};
/// use core::mem::MaybeUninit;
///
/// let (mut a, mut b) = ([MaybeUninit::uninit(); 256], [MaybeUninit::uninit(); 256]);
/// let mut one = Stack::new(&mut a);
/// let two = Stack::new(&mut b);
/// assert_eq!(one.rollback(two.marker()), Err(MarkerError::Foreign));
/// assert_eq!(MarkerError::Foreign.to_string(), "the marker belongs to another stack");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum MarkerError {
    /// The marker was taken on another stack (or the other end of a double stack).
    #[error("the marker belongs to another stack")]
    Foreign,
    /// The marker lies above the current top (what was below it has been freed).
    #[error("the marker lies above the current top")]
    AboveTop,
    /// A rollback to an earlier marker, a reset, or a change to the block below the
    /// marker has invalidated it. Also what a release build says when the check walks
    /// into a block header that a block written past its end overwrote (debug builds
    /// panic naming it).
    #[error("the marker was invalidated by an earlier rollback or reset")]
    Stale,
}

impl Lifo {
    /// A marker at the current top. Marks the newest block (once: later markers on
    /// the same block share its mark).
    pub(crate) fn marker(&self) -> Marker {
        let pos = self.pos();
        let last = self.last_at(pos);
        let mark = if last == NONE {
            0
        } else {
            // SAFETY: the newest block's header.
            let h = unsafe { self.header(last) };
            if h.mark & MARK_ID == 0 {
                let id = self.next_mark.get();
                self.next_mark.set(id + 1);
                // SAFETY: as above.
                unsafe {
                    self.set_header(
                        last,
                        Header {
                            mark: h.mark | id,
                            ..h
                        },
                    );
                }
                id
            } else {
                h.mark & MARK_ID
            }
        };
        Marker {
            end: self.id,
            used: self.used() as u32,
            epoch: self.epoch.get(),
            pos,
            mark,
        }
    }

    /// Whether a block whose header is at `at` was placed above a marker at `top`.
    #[inline]
    pub(super) fn above(&self, at: u32, top: u32) -> bool {
        at != NONE
            && match self.dir {
                Dir::Up => at >= top,
                Dir::Down => at < top,
            }
    }

    /// Frees every block allocated after `marker` was taken, and the blocks beneath it
    /// that were freed out of order (now that nothing above them is left).
    ///
    /// O(1) when the end has only placed blocks since the marker was taken; otherwise
    /// the marker is checked by walking the blocks above it (the ones it frees), at
    /// O(1) per block.
    pub(crate) fn rollback(&self, marker: Marker) -> Result<(), MarkerError> {
        if marker.end != self.id {
            return Err(MarkerError::Foreign);
        }
        if marker.epoch < self.floor.get() {
            return Err(MarkerError::Stale);
        }
        if marker.used as usize > self.used() {
            return Err(MarkerError::AboveTop);
        }
        if marker.epoch != self.epoch.get() {
            // Pop, on paper, the blocks placed above the marker's top; if nothing below
            // it changed, that gives back its position, with its newest block still the
            // one it marked.
            let mut pos = self.pos();
            while self.above(self.last_at(pos), marker.pos.top) {
                let last = self.last_at(pos);
                // SAFETY: the newest block's header, then each one `step_down` returned.
                match self.step_down(last, unsafe { self.header(last) }) {
                    Some(next) => pos = next,
                    None => return Err(MarkerError::Stale),
                }
            }
            let last = self.last_at(pos);
            let marked = last == NONE || {
                // SAFETY: `last` is the newest header at a position the walk reached.
                let h = unsafe { self.header(last) };
                h.mark & MARK_ID == marker.mark
            };
            if pos != marker.pos || !marked {
                return Err(MarkerError::Stale);
            }
        }
        // Blocks beneath the marker freed out of order go too: nothing above them is
        // left.
        // SAFETY: the marker's position is one of the chain: checked by the walk
        // above, or of the current epoch, in which the end has only placed blocks.
        unsafe { self.set_pos(self.reclaim(marker.pos)) };
        self.next_epoch();
        Ok(())
    }

    /// Frees everything and invalidates every marker.
    pub(crate) fn reset(&self) {
        // SAFETY: the origin.
        unsafe {
            self.set_pos(Pos {
                top: self.origin,
                gap: NONE,
            });
        }
        self.next_epoch();
        self.floor.set(self.epoch.get());
    }
}
