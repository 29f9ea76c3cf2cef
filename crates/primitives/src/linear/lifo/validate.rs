//! An end's validation: its header chain walked against its stats, as a
//! [`StackReport`].

use crate::linear::corruption::LinearCorruption;

use crate::linear::lifo::{Dir, FREED, GRAIN, HEADER, Lifo, MARK_ID, NONE};

/// What `validate()` counted by walking the blocks of a stack (or of both ends of a
/// double stack).
///
/// ```
/// use bento_primitives::Stack;
/// use core::mem::MaybeUninit;
///
/// let mut buf = [MaybeUninit::uninit(); 256];
/// let stack = Stack::new(&mut buf);
/// stack.alloc_layout(core::alloc::Layout::new::<u64>()).unwrap();
/// let report = stack.validate().unwrap();
/// assert_eq!(report.live_blocks, 1);
/// assert!(report.live_bytes >= 8);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StackReport {
    /// Blocks allocated and not freed.
    pub live_blocks: usize,
    /// Their bytes, each from its start to where the next block's header may begin
    /// (rounding and alignment slack included).
    pub live_bytes: usize,
    /// Blocks freed out of order and not reclaimed yet.
    pub deferred_blocks: usize,
}

impl core::ops::Add for StackReport {
    type Output = Self;

    fn add(self, other: Self) -> Self {
        Self {
            live_blocks: self.live_blocks + other.live_blocks,
            live_bytes: self.live_bytes + other.live_bytes,
            deferred_blocks: self.deferred_blocks + other.deferred_blocks,
        }
    }
}

impl Lifo {
    /// Walks every block from the newest down and checks the chain: headers inside the
    /// used part and in order, mark identities decreasing down the chain and below the
    /// next one to be given, and the chain ending at the origin. Each header's place is
    /// checked before it is read.
    pub(crate) fn validate(&self) -> Result<StackReport, LinearCorruption> {
        let mut report = StackReport::default();
        let mut boundary = self.top();
        let mut mark_above = self.next_mark.get();
        if !(boundary as usize).is_multiple_of(GRAIN) {
            return Err(LinearCorruption::new("top not 8-aligned"));
        }
        if self.waits_at(boundary) {
            // SAFETY: the top, 8-aligned (checked), where the end keeps its waiting
            // header.
            let waiting = unsafe { self.header(boundary) };
            let gap_ok = match boundary == self.origin {
                true => waiting.gap() == NONE,
                false => self.gap_fits(boundary, waiting.gap()),
            };
            if waiting.pad() != 0 || waiting.mark != 0 || !gap_ok {
                return Err(LinearCorruption::new(
                    "the header waiting at the top is not blank",
                ));
            }
        }
        if self.floor.get() > self.epoch.get() || mark_above == 0 || mark_above > FREED {
            return Err(LinearCorruption::new(
                "the epoch is below the last reset's, or the next mark out of range",
            ));
        }
        // Only now that the waiting header is known sound.
        let mut at = self.last();
        while at != NONE {
            // Up, the header and the payload lie below the boundary (the top, or the
            // start of the block above's padding); down, the header is the boundary.
            // In `u32`, so that a wrapped offset cannot pass.
            let inside = match self.dir {
                Dir::Up => {
                    at < boundary
                        && boundary - at >= HEADER as u32
                        && at.is_multiple_of(GRAIN as u32)
                }
                Dir::Down => at == boundary && self.origin - at >= HEADER as u32,
            };
            let payload = at as usize + HEADER;
            if !inside {
                return Err(LinearCorruption::new(
                    "a header lies outside the part its block was placed in",
                ));
            }
            // SAFETY: `at` is 8-aligned with its 16 bytes in the part in use (checked).
            let h = unsafe { self.header(at) };
            let below = self.below(at, h);
            let prev_top = below.top;
            // The block's room: from its payload to the boundary above it (up), or to
            // the top it was placed under (down).
            let room_end = match self.dir {
                Dir::Up if prev_top > at || !prev_top.is_multiple_of(GRAIN as u32) => {
                    return Err(LinearCorruption::new(
                        "a header lies outside the part its block was placed in",
                    ));
                }
                Dir::Down
                    if payload > prev_top as usize
                        || prev_top > self.origin
                        || !prev_top.is_multiple_of(GRAIN as u32) =>
                {
                    return Err(LinearCorruption::new(
                        "a header lies outside the part its block was placed in",
                    ));
                }
                Dir::Up => boundary as usize,
                Dir::Down => prev_top as usize,
            };
            let mark = h.mark & MARK_ID;
            if mark != 0 {
                if mark >= mark_above {
                    return Err(LinearCorruption::new(
                        "a block's mark is not below the next mark or the mark of a newer block",
                    ));
                }
                mark_above = mark;
            }
            if h.mark & FREED == 0 {
                report.live_blocks += 1;
                report.live_bytes += room_end - payload;
            } else {
                report.deferred_blocks += 1;
            }
            boundary = prev_top;
            at = self.last_at(below);
        }
        if boundary != self.origin {
            return Err(LinearCorruption::new(
                "the chain does not end at the bottom of the stack",
            ));
        }
        Ok(report)
    }
}
