//! The operations the interpreter runs, and the capabilities that enable them.

use arbitrary::{Arbitrary, Unstructured};
use bento_align::Alignment;

use crate::generate::{AlignGen, SizeGen};
use crate::target::End;

/// One operation of a test program. Raw numbers are turned into sizes, alignments and
/// block indices by the interpreter, so every value is meaningful.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Arbitrary)]
pub enum Op {
    /// Allocate a block (`size` and `align` go through the [`Caps`] generators).
    Alloc {
        /// Raw size selector.
        size: u32,
        /// Raw alignment selector.
        align: u8,
        /// Ask for zeroed memory.
        zeroed: bool,
        /// Which end (only with [`Ops::TWO_ENDS`]).
        end: End,
    },
    /// Free the live block `index % live`, with a layout of its alignment and a
    /// size between what it asked for and the length it was given (`fit` chooses:
    /// mostly the size asked, sometimes the length given or a size between).
    Free {
        /// Raw block selector.
        index: u16,
        /// Raw selector of the size the free passes.
        fit: u8,
    },
    /// Free the most recently allocated live block (the top of a stack).
    FreeNewest,
    /// Grow the live block `index % live` by a generated amount. allocator-api2
    /// lets a resize change the alignment: an odd `align` asks for a new one (drawn
    /// as for an allocation), an even one keeps the block's.
    Grow {
        /// Raw block selector.
        index: u16,
        /// Raw selector of the growth.
        by: u32,
        /// Zero the new bytes.
        zeroed: bool,
        /// Raw selector of the new alignment.
        align: u8,
    },
    /// Shrink the live block `index % live` to `to % (size + 1)` bytes, with a new
    /// alignment when `align` is odd (as for [`Op::Grow`]).
    Shrink {
        /// Raw block selector.
        index: u16,
        /// Raw selector of the new size.
        to: u32,
        /// Raw selector of the new alignment.
        align: u8,
    },
    /// Resize the live block `index % live` without moving it ([`Ops::IN_PLACE`]):
    /// grow it by a generated amount, or shrink it to `size % (old size + 1)` bytes.
    /// A grow whose `size` has its top bit set asks for a size drawn afresh, which
    /// may be below the block's (an in-place grow to a size a block already holds
    /// succeeds without change on some allocators; the block's layout is then the
    /// smaller one).
    ResizeInPlace {
        /// Raw block selector.
        index: u16,
        /// Raw selector of the growth, or of the new size for a shrink.
        size: u32,
        /// Grow (else shrink).
        grow: bool,
    },
    /// Free everything at once ([`Ops::RESET`]).
    Reset,
    /// Take a marker ([`Ops::MARKERS`]).
    Marker {
        /// Which end.
        end: End,
    },
    /// Roll back to marker `marker % markers` ([`Ops::MARKERS`]).
    Rollback {
        /// Raw marker selector.
        marker: u8,
    },
    /// Give cached memory back ([`Ops::TRIM`]).
    Trim,
    /// Make the memory source fail after `after % 8` more requests ([`Ops::FAIL_NEXT`]).
    FailNext {
        /// Raw count.
        after: u8,
    },
    /// Ask for a block whose size is near `isize::MAX` ([`Ops::HUGE`]); must fail.
    AllocHuge {
        /// Raw selector of how near.
        below: u8,
    },
    /// Run the allocator's self-check and compare stats.
    Validate,
}

bitflags::bitflags! {
    /// Optional operations a target supports.
    ///
    /// ```
    /// use bento_testkit::Ops;
    ///
    /// let ops = Ops::MARKERS | Ops::RESET;
    /// assert!(ops.contains(Ops::RESET));
    /// ```
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
    pub struct Ops: u16 {
        /// [`Op::Reset`]: the target frees everything at once.
        const RESET = 1 << 0;
        /// [`Op::Marker`] and [`Op::Rollback`].
        const MARKERS = 1 << 1;
        /// Two ends ([`End::High`] as well as [`End::Low`]).
        const TWO_ENDS = 1 << 2;
        /// [`Op::Trim`].
        const TRIM = 1 << 3;
        /// [`Op::FailNext`].
        const FAIL_NEXT = 1 << 4;
        /// [`Op::AllocHuge`].
        const HUGE = 1 << 5;
        /// [`Op::Grow`] and [`Op::Shrink`] (on by default).
        const RESIZE = 1 << 6;
        /// [`Op::ResizeInPlace`]: some of the grows and shrinks become in-place
        /// resizes (programs for targets without it are unchanged).
        const IN_PLACE = 1 << 7;
    }
}

/// What the interpreter may do to a target, and how it chooses sizes.
///
/// ```
/// use bento_testkit::{Caps, Ops, SizeGen};
///
/// let caps = Caps::default()
///     .with_ops(Ops::MARKERS | Ops::RESET)
///     .with_sizes(SizeGen::new(4096).with_boundaries(&[64, 256]));
/// assert!(caps.has(Ops::MARKERS));
/// assert!(!caps.has(Ops::TRIM));
/// ```
#[derive(Clone, Debug)]
pub struct Caps {
    /// The optional operations enabled.
    pub ops: Ops,
    /// How sizes are chosen.
    pub sizes: SizeGen,
    /// How alignments are chosen.
    pub aligns: AlignGen,
    /// Run [`Op::Validate`] after every this many operations (0: never on its own).
    pub validate_every: usize,
    /// Most operations of one program.
    pub max_steps: usize,
    /// Refuse new allocations while this many blocks are live (frees still happen).
    pub max_live: usize,
}

impl Caps {
    /// The caps of a general-purpose allocator: the default ones with the optional
    /// operations `ops`, and the huge requests and in-place resizes such an allocator
    /// always has; sizes from `sizes`.
    ///
    /// ```
    /// use bento_testkit::{Caps, Ops, SizeGen};
    ///
    /// let caps = Caps::general_purpose(Ops::TRIM, SizeGen::new(1 << 20));
    /// assert!(caps.has(Ops::TRIM | Ops::HUGE | Ops::IN_PLACE | Ops::RESIZE));
    /// ```
    #[must_use]
    pub fn general_purpose(ops: Ops, sizes: SizeGen) -> Self {
        Self::default()
            .with_ops(ops | Ops::HUGE | Ops::IN_PLACE)
            .with_sizes(sizes)
    }

    /// Replace the optional operations (resizing stays as set).
    #[must_use]
    pub fn with_ops(mut self, ops: Ops) -> Self {
        self.ops = ops | (self.ops & Ops::RESIZE);
        self
    }

    /// Turn resizing off, for allocators without `grow` and `shrink`.
    #[must_use]
    pub fn without_resize(mut self) -> Self {
        self.ops.remove(Ops::RESIZE);
        self
    }

    /// Use `sizes` to choose sizes.
    #[must_use]
    pub fn with_sizes(mut self, sizes: SizeGen) -> Self {
        self.sizes = sizes;
        self
    }

    /// Use alignments from 1 to `max`.
    #[must_use]
    pub fn with_max_align(mut self, max: Alignment) -> Self {
        self.aligns = AlignGen::new(max);
        self
    }

    /// Validate every `n` operations.
    #[must_use]
    pub fn with_validate_every(mut self, n: usize) -> Self {
        self.validate_every = n;
        self
    }

    /// At most `n` operations per program.
    #[must_use]
    pub fn with_max_steps(mut self, n: usize) -> Self {
        self.max_steps = n;
        self
    }

    /// At most `n` live blocks.
    #[must_use]
    pub fn with_max_live(mut self, n: usize) -> Self {
        self.max_live = n;
        self
    }

    /// Whether every operation of `ops` is enabled.
    #[must_use]
    pub fn has(&self, ops: Ops) -> bool {
        self.ops.contains(ops)
    }

    /// Draws the next operation from `u`, weighted towards allocation and free, never
    /// one these caps disable. `None` when `u` is exhausted.
    pub fn draw(&self, u: &mut Unstructured<'_>) -> Option<Op> {
        if u.is_empty() {
            return None;
        }
        // Draw a kind by weight, then its fields.
        let weight: u8 = u.arbitrary().ok()?;
        let op = match weight {
            0..=89 => Op::Alloc {
                size: u.arbitrary().ok()?,
                align: u.arbitrary().ok()?,
                zeroed: u.ratio(1, 8).ok()?,
                end: u.arbitrary().ok()?,
            },
            90..=149 => Op::Free {
                index: u.arbitrary().ok()?,
                fit: u.arbitrary().ok()?,
            },
            150..=169 => Op::FreeNewest,
            170..=189 => {
                let (index, by, zeroed, align) = (
                    u.arbitrary().ok()?,
                    u.arbitrary().ok()?,
                    u.ratio(1, 4).ok()?,
                    u.arbitrary().ok()?,
                );
                if weight >= 184 && self.has(Ops::IN_PLACE) {
                    Op::ResizeInPlace {
                        index,
                        size: by,
                        grow: true,
                    }
                } else {
                    Op::Grow {
                        index,
                        by,
                        zeroed,
                        align,
                    }
                }
            }
            190..=209 => {
                let (index, to, align) = (
                    u.arbitrary().ok()?,
                    u.arbitrary().ok()?,
                    u.arbitrary().ok()?,
                );
                if weight >= 204 && self.has(Ops::IN_PLACE) {
                    Op::ResizeInPlace {
                        index,
                        size: to,
                        grow: false,
                    }
                } else {
                    Op::Shrink { index, to, align }
                }
            }
            210..=213 => Op::Reset,
            214..=225 => Op::Marker {
                end: u.arbitrary().ok()?,
            },
            226..=237 => Op::Rollback {
                marker: u.arbitrary().ok()?,
            },
            238..=241 => Op::Trim,
            242..=245 => Op::FailNext {
                after: u.arbitrary().ok()?,
            },
            246..=248 => Op::AllocHuge {
                below: u.arbitrary().ok()?,
            },
            _ => Op::Validate,
        };
        Some(if self.allows(&op) { op } else { Op::FreeNewest })
    }

    /// Whether these caps enable `op`.
    #[must_use]
    pub fn allows(&self, op: &Op) -> bool {
        match op {
            Op::Alloc { end, .. } => *end == End::Low || self.has(Ops::TWO_ENDS),
            Op::Free { .. } | Op::FreeNewest | Op::Validate => true,
            Op::Grow { .. } | Op::Shrink { .. } => self.has(Ops::RESIZE),
            Op::ResizeInPlace { .. } => self.has(Ops::IN_PLACE),
            Op::Reset => self.has(Ops::RESET),
            Op::Marker { end } => {
                self.has(Ops::MARKERS) && (*end == End::Low || self.has(Ops::TWO_ENDS))
            }
            Op::Rollback { .. } => self.has(Ops::MARKERS),
            Op::Trim => self.has(Ops::TRIM),
            Op::FailNext { .. } => self.has(Ops::FAIL_NEXT),
            Op::AllocHuge { .. } => self.has(Ops::HUGE),
        }
    }
}

impl Default for Caps {
    /// Allocate, free, grow and shrink; sizes up to 64 KiB; alignments up to 4096;
    /// validation every 16 operations; programs of up to 2000 operations.
    fn default() -> Self {
        Self {
            ops: Ops::RESIZE,
            sizes: SizeGen::new(64 * 1024),
            aligns: AlignGen::new(Alignment::PAGE_4K),
            validate_every: 16,
            max_steps: 2000,
            max_live: 512,
        }
    }
}
