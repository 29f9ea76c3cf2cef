//! The live-block oracle: a model of every block the target has handed out, checked
//! against the target after each operation.

use alloc::collections::BTreeMap;
use alloc::string::String;
use alloc::vec::Vec;
use core::alloc::Layout;
use core::fmt;
use core::ops::AddAssign;
use core::ptr::NonNull;

use arbitrary::Unstructured;
use bento_align::{Alignment, is_aligned};

use crate::bytes::{fill_pattern, find_mismatch, first_nonzero, pattern};
use crate::op::{Caps, Op, Ops};
use crate::target::{End, Target};

/// What went wrong, at which step of the program.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Failure {
    /// The index of the operation (the final clean-up counts as one past the last).
    pub step: usize,
    /// The operation, when one was running.
    pub op: Option<Op>,
    /// The rule broken.
    pub kind: FailureKind,
}

/// The rules the oracle checks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FailureKind {
    /// A block's address is not a multiple of the alignment asked for.
    Misaligned {
        /// The block's address.
        addr: usize,
        /// The alignment asked for.
        align: usize,
    },
    /// A block is shorter than the size asked for.
    TooShort {
        /// The length returned.
        len: usize,
        /// The size asked for.
        size: usize,
    },
    /// A new block overlaps a live one.
    Overlap {
        /// The new block, `start..end`.
        new: (usize, usize),
        /// The live block it overlaps.
        live: (usize, usize),
    },
    /// A live block's fill pattern changed: something wrote into it, or a resize
    /// lost its contents.
    Corrupted {
        /// The block's address.
        addr: usize,
        /// The first byte that differs.
        offset: usize,
        /// What the pattern says.
        expected: u8,
        /// What was there.
        found: u8,
    },
    /// Memory promised zeroed was not.
    NotZeroed {
        /// The block's address.
        addr: usize,
        /// The first non-zero byte.
        offset: usize,
    },
    /// A request near `isize::MAX` bytes succeeded.
    HugeSucceeded {
        /// The size asked for.
        size: usize,
    },
    /// A rollback to a marker made stale by an earlier rollback or reset succeeded.
    StaleMarkerAccepted,
    /// An in-place resize returned a different address.
    MovedInPlace {
        /// The block's address.
        from: usize,
        /// The address returned.
        to: usize,
    },
    /// The target's own `validate` reported corruption.
    Invalid(String),
    /// A stat the target reports disagrees with the model.
    Stats {
        /// Which stat.
        what: &'static str,
        /// The model's value (a lower bound for byte counts).
        model: usize,
        /// The target's value.
        reported: usize,
    },
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "step {}", self.step)?;
        if let Some(op) = &self.op {
            write!(f, " ({op:?})")?;
        }
        f.write_str(": ")?;
        match &self.kind {
            FailureKind::Misaligned { addr, align } => {
                write!(f, "block {addr:#x} is not aligned to {align}")
            }
            FailureKind::TooShort { len, size } => {
                write!(f, "block of {len} bytes returned for {size} asked")
            }
            FailureKind::Overlap { new, live } => write!(
                f,
                "new block {:#x}..{:#x} overlaps live block {:#x}..{:#x}",
                new.0, new.1, live.0, live.1
            ),
            FailureKind::Corrupted {
                addr,
                offset,
                expected,
                found,
            } => write!(
                f,
                "block {addr:#x} corrupted at offset {offset}: expected {expected:#04x}, found {found:#04x}"
            ),
            FailureKind::NotZeroed { addr, offset } => {
                write!(f, "block {addr:#x} not zeroed at offset {offset}")
            }
            FailureKind::HugeSucceeded { size } => {
                write!(f, "a request of {size} bytes succeeded")
            }
            FailureKind::StaleMarkerAccepted => {
                f.write_str("a rollback to a stale marker succeeded")
            }
            FailureKind::MovedInPlace { from, to } => {
                write!(f, "an in-place resize moved block {from:#x} to {to:#x}")
            }
            FailureKind::Invalid(msg) => write!(f, "validate failed: {msg}"),
            FailureKind::Stats {
                what,
                model,
                reported,
            } => write!(
                f,
                "{what}: the model has {model}, the target reports {reported}"
            ),
        }
    }
}

impl core::error::Error for Failure {}

/// What a program did, so tests can show they were not vacuous.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RunReport {
    /// Operations run.
    pub steps: usize,
    /// Allocations that succeeded.
    pub allocs: usize,
    /// Allocations that failed (exhaustion, injected failure, refused alignment).
    pub allocs_failed: usize,
    /// Blocks freed one by one (the final clean-up included).
    pub frees: usize,
    /// Grows and shrinks that succeeded.
    pub resizes: usize,
    /// Of those, the ones that kept the block where it was.
    pub resizes_in_place: usize,
    /// Grows and shrinks that failed.
    pub resizes_failed: usize,
    /// Resets.
    pub resets: usize,
    /// Rollbacks that succeeded.
    pub rollbacks: usize,
    /// Rollbacks to live markers the target refused.
    pub rollbacks_refused: usize,
    /// Rollbacks to stale markers, refused as they must be.
    pub stale_rollbacks_refused: usize,
    /// Validations run.
    pub validations: usize,
    /// Most blocks live at once.
    pub peak_live_blocks: usize,
    /// Most bytes (as asked) live at once.
    pub peak_live_bytes: usize,
}

impl RunReport {
    /// Checks that a run with failure injection (`Ops::FAIL_NEXT`) was not vacuous:
    /// the source reports `injected` failures injected, and some allocations failed.
    /// Not under Miri, whose runs are too short to count on either.
    ///
    /// # Panics
    ///
    /// When no failure was injected or no allocation failed.
    ///
    /// ```
    /// use bento_testkit::RunReport;
    ///
    /// let report = RunReport { allocs_failed: 3, ..RunReport::default() };
    /// report.assert_failures_injected(2);
    /// ```
    #[track_caller]
    pub fn assert_failures_injected(&self, injected: usize) {
        if cfg!(miri) {
            return;
        }
        assert!(injected > 0, "no failure was injected");
        assert!(self.allocs_failed > 0, "no allocation failed: {self:?}");
    }
}

impl AddAssign for RunReport {
    fn add_assign(&mut self, rhs: Self) {
        self.steps += rhs.steps;
        self.allocs += rhs.allocs;
        self.allocs_failed += rhs.allocs_failed;
        self.frees += rhs.frees;
        self.resizes += rhs.resizes;
        self.resizes_in_place += rhs.resizes_in_place;
        self.resizes_failed += rhs.resizes_failed;
        self.resets += rhs.resets;
        self.rollbacks += rhs.rollbacks;
        self.rollbacks_refused += rhs.rollbacks_refused;
        self.stale_rollbacks_refused += rhs.stale_rollbacks_refused;
        self.validations += rhs.validations;
        self.peak_live_blocks = self.peak_live_blocks.max(rhs.peak_live_blocks);
        self.peak_live_bytes = self.peak_live_bytes.max(rhs.peak_live_bytes);
    }
}

/// A live block as the model knows it.
#[derive(Clone, Copy, Debug)]
struct Block {
    ptr: NonNull<u8>,
    /// The size asked for (the layout passed back on free).
    size: usize,
    /// The bytes this block owns: the length returned, or 0 for a zero-size request.
    extent: usize,
    align: Alignment,
    /// Seed of the fill pattern.
    seed: u8,
    end: End,
    /// When it was allocated (or moved), on the model's clock.
    born: u64,
}

impl Block {
    fn layout(&self) -> Layout {
        Layout::from_size_align(self.size, self.align.get()).expect("a layout that was valid")
    }

    fn range(&self) -> (usize, usize) {
        (self.ptr.addr().get(), self.ptr.addr().get() + self.extent)
    }
}

#[derive(Clone, Copy, Debug)]
struct MarkerRec {
    end: End,
    handle: usize,
    /// The clock when it was taken: blocks born later die when it is rolled back to.
    taken: u64,
    /// Invalidated by a rollback to an earlier marker, or by a reset.
    stale: bool,
}

/// Which way a resize goes (a resize to the same size is valid either way).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Resize {
    Grow { zeroed: bool },
    Shrink,
    InPlace,
}

/// How many markers the model remembers; older ones are forgotten (not stale).
const MAX_MARKERS: usize = 64;

/// The interpreter: a target, its model, and the stats of the run.
pub(crate) struct Interp<'t, T: Target + ?Sized> {
    target: &'t mut T,
    caps: &'t Caps,
    /// Live blocks in order of birth.
    blocks: Vec<Block>,
    /// `start -> end` of every live block that owns bytes; never overlapping.
    ranges: BTreeMap<usize, usize>,
    markers: Vec<MarkerRec>,
    clock: u64,
    next_seed: u8,
    live_bytes: usize,
    step: usize,
    op: Option<Op>,
    report: RunReport,
}

impl<'t, T: Target + ?Sized> Interp<'t, T> {
    pub(crate) fn new(target: &'t mut T, caps: &'t Caps) -> Self {
        Self {
            target,
            caps,
            blocks: Vec::new(),
            ranges: BTreeMap::new(),
            markers: Vec::new(),
            clock: 0,
            next_seed: 1,
            live_bytes: 0,
            step: 0,
            op: None,
            report: RunReport::default(),
        }
    }

    /// Runs operations drawn from `u` until it runs dry or `max_steps` is reached.
    pub(crate) fn run_drawn(mut self, u: &mut Unstructured<'_>) -> Result<RunReport, Failure> {
        while self.step < self.caps.max_steps {
            let Some(op) = self.caps.draw(u) else { break };
            self.one(op)?;
        }
        self.finish()
    }

    /// Runs the operations of `ops` that the caps allow.
    pub(crate) fn run_list(mut self, ops: &[Op]) -> Result<RunReport, Failure> {
        for op in ops.iter().filter(|op| self.caps.allows(op)) {
            self.one(*op)?;
        }
        self.finish()
    }

    fn fail(&self, kind: FailureKind) -> Failure {
        Failure {
            step: self.step,
            op: self.op,
            kind,
        }
    }

    fn one(&mut self, op: Op) -> Result<(), Failure> {
        self.op = Some(op);
        match op {
            Op::Alloc {
                size,
                align,
                zeroed,
                end,
            } => self.alloc(size, align, zeroed, end)?,
            Op::Free { index, fit } => {
                if !self.blocks.is_empty() {
                    self.free(usize::from(index) % self.blocks.len(), fit)?;
                }
            }
            Op::FreeNewest => {
                if !self.blocks.is_empty() {
                    self.free(self.blocks.len() - 1, 0)?;
                }
            }
            Op::Grow {
                index,
                by,
                zeroed,
                align,
            } => {
                if !self.blocks.is_empty() {
                    let i = usize::from(index) % self.blocks.len();
                    let b = self.blocks[i];
                    let align = self.new_align(&b, align);
                    let cap = self.caps.sizes.max().max(b.size);
                    let to = b
                        .size
                        .saturating_add(self.caps.sizes.pick(by, align.get()))
                        .min(cap);
                    self.resize(i, to, align, Resize::Grow { zeroed })?;
                }
            }
            Op::Shrink { index, to, align } => {
                if !self.blocks.is_empty() {
                    let i = usize::from(index) % self.blocks.len();
                    let b = self.blocks[i];
                    let align = self.new_align(&b, align);
                    let to = to as usize % (b.size + 1);
                    self.resize(i, to, align, Resize::Shrink)?;
                }
            }
            Op::ResizeInPlace { index, size, grow } => {
                if !self.blocks.is_empty() {
                    let i = usize::from(index) % self.blocks.len();
                    let b = self.blocks[i];
                    let to = if grow && size >> 31 != 0 {
                        self.caps.sizes.pick(size, b.align.get())
                    } else if grow {
                        let cap = self.caps.sizes.max().max(b.size);
                        b.size
                            .saturating_add(self.caps.sizes.pick(size, b.align.get()))
                            .min(cap)
                    } else {
                        size as usize % (b.size + 1)
                    };
                    self.resize(i, to, b.align, Resize::InPlace)?;
                }
            }
            Op::Reset => self.reset(),
            Op::Marker { end } => self.marker(self.end(end)),
            Op::Rollback { marker } => self.rollback(marker)?,
            Op::Trim => self.target.trim(),
            Op::FailNext { after } => self.target.fail_next(u32::from(after % 8)),
            Op::AllocHuge { below } => self.alloc_huge(below)?,
            Op::Validate => self.validate()?,
        }
        self.step += 1;
        self.report.steps += 1;
        if self.caps.validate_every != 0 && self.step.is_multiple_of(self.caps.validate_every) {
            self.op = Some(Op::Validate);
            self.validate()?;
        }
        Ok(())
    }

    fn end(&self, end: End) -> End {
        if self.caps.has(Ops::TWO_ENDS) {
            end
        } else {
            End::Low
        }
    }

    fn alloc(&mut self, size: u32, align: u8, zeroed: bool, end: End) -> Result<(), Failure> {
        if self.blocks.len() >= self.caps.max_live {
            return Ok(());
        }
        let align = self.caps.aligns.pick(align);
        let size = self.caps.sizes.pick(size, align.get());
        let end = self.end(end);
        let Ok(layout) = Layout::from_size_align(size, align.get()) else {
            return Ok(());
        };
        let Some(block) = self.target.allocate(end, layout, zeroed) else {
            self.report.allocs_failed += 1;
            return Ok(());
        };
        let block = self.admit(block, size, align, end)?;
        if zeroed {
            self.check_zero(&block, 0)?;
        }
        self.fill(block);
        self.report.allocs += 1;
        Ok(())
    }

    /// Checks a block the target returned (alignment, length, overlap) and makes a
    /// model block of it, not yet filled or inserted.
    fn admit(
        &mut self,
        block: NonNull<[u8]>,
        size: usize,
        align: Alignment,
        end: End,
    ) -> Result<Block, Failure> {
        let ptr = block.cast::<u8>();
        let len = block.len();
        if !is_aligned(ptr.addr().get(), align) {
            return Err(self.fail(FailureKind::Misaligned {
                addr: ptr.addr().get(),
                align: align.get(),
            }));
        }
        if len < size {
            return Err(self.fail(FailureKind::TooShort { len, size }));
        }
        self.clock += 1;
        self.next_seed = self.next_seed.wrapping_add(1).max(1);
        let b = Block {
            ptr,
            size,
            extent: if size == 0 { 0 } else { len },
            align,
            seed: self.next_seed,
            end,
            born: self.clock,
        };
        let (start, stop) = b.range();
        if b.extent > 0
            && let Some((&s, &e)) = self.ranges.range(..stop).next_back()
            && e > start
        {
            return Err(self.fail(FailureKind::Overlap {
                new: (start, stop),
                live: (s, e),
            }));
        }
        Ok(b)
    }

    /// Fills `b` with its pattern and adds it to the model.
    fn fill(&mut self, b: Block) {
        // SAFETY: `admit` checked that `b` lies in memory the target handed out (a live
        // block of `extent` bytes) that overlaps no other live block, so nothing else
        // reads or writes it while this slice lives.
        let bytes = unsafe { core::slice::from_raw_parts_mut(b.ptr.as_ptr(), b.extent) };
        fill_pattern(bytes, b.seed);
        if b.extent > 0 {
            let (s, e) = b.range();
            self.ranges.insert(s, e);
        }
        self.live_bytes += b.size;
        self.blocks.push(b);
        self.report.peak_live_blocks = self.report.peak_live_blocks.max(self.blocks.len());
        self.report.peak_live_bytes = self.report.peak_live_bytes.max(self.live_bytes);
    }

    /// Checks that the first `upto` bytes of `b` still hold its pattern.
    fn check_pattern(&self, b: &Block, upto: usize) -> Result<(), Failure> {
        // SAFETY: `b` is a live block the model filled; its first `extent >= upto`
        // bytes are initialised and no other reference to them exists.
        let bytes = unsafe { core::slice::from_raw_parts(b.ptr.as_ptr(), upto.min(b.extent)) };
        match find_mismatch(bytes, b.seed) {
            None => Ok(()),
            Some((offset, found)) => Err(self.fail(FailureKind::Corrupted {
                addr: b.ptr.addr().get(),
                offset,
                expected: pattern(b.seed, offset),
                found,
            })),
        }
    }

    /// Checks that `b`'s bytes from `from` to its extent are zero.
    fn check_zero(&self, b: &Block, from: usize) -> Result<(), Failure> {
        if from >= b.extent {
            return Ok(());
        }
        // SAFETY: the target promised these bytes zeroed, so they are initialised;
        // `admit` checked the block overlaps no other.
        let bytes =
            unsafe { core::slice::from_raw_parts(b.ptr.as_ptr().add(from), b.extent - from) };
        match first_nonzero(bytes) {
            None => Ok(()),
            Some(i) => Err(self.fail(FailureKind::NotZeroed {
                addr: b.ptr.addr().get(),
                offset: from + i,
            })),
        }
    }

    /// Takes block `i` out of the model.
    fn forget(&mut self, i: usize) -> Block {
        let b = self.blocks.remove(i);
        if b.extent > 0 {
            self.ranges.remove(&b.ptr.addr().get());
        }
        self.live_bytes -= b.size;
        b
    }

    /// The alignment a grow or shrink of `b` asks for: an odd `raw` draws a new one
    /// (allocator-api2 lets a resize change it), an even one keeps `b`'s.
    fn new_align(&self, b: &Block, raw: u8) -> Alignment {
        if raw & 1 == 0 {
            b.align
        } else {
            self.caps.aligns.pick(raw)
        }
    }

    /// Frees block `i` with a layout of its alignment whose size `fit` picks between
    /// the size it asked for and the length it was given (both fit the block, as
    /// allocator-api2 defines it): mostly the size asked, one time in four the length,
    /// one in eight a size between.
    fn free(&mut self, i: usize, fit: u8) -> Result<(), Failure> {
        self.check_pattern(&self.blocks[i], usize::MAX)?;
        let b = self.forget(i);
        let size = match fit % 8 {
            _ if b.extent <= b.size => b.size,
            0..=4 => b.size,
            5 => b.size + usize::from(fit / 8) % (b.extent - b.size + 1),
            _ => b.extent,
        };
        let layout = Layout::from_size_align(size, b.align.get()).expect("fits its block");
        // SAFETY: `b` is live in the model, so it is live in the target, from `b.end`,
        // allocated (or last resized) with `b.layout()`; `layout` has its alignment
        // and a size between `b.size` and the length it was given.
        unsafe { self.target.deallocate(b.end, b.ptr, layout) };
        self.report.frees += 1;
        Ok(())
    }

    /// Resizes block `i` to `to` bytes aligned to `align` (an in-place resize keeps
    /// the block's alignment).
    fn resize(
        &mut self,
        i: usize,
        to: usize,
        align: Alignment,
        how: Resize,
    ) -> Result<(), Failure> {
        let old = self.blocks[i];
        self.check_pattern(&old, usize::MAX)?;
        let Ok(new_layout) = Layout::from_size_align(to, align.get()) else {
            return Ok(());
        };
        // Take it out of the overlap map: a resize may extend it in place.
        if old.extent > 0 {
            self.ranges.remove(&old.ptr.addr().get());
        }
        let zeroed = how == (Resize::Grow { zeroed: true });
        let result = match how {
            // SAFETY: `old` is live, from `old.end`, with `old.layout()`, and the
            // callers pick `to >= old.size` for a grow.
            Resize::Grow { zeroed } => unsafe {
                self.target
                    .grow(old.end, old.ptr, old.layout(), new_layout, zeroed)
            },
            // SAFETY: as above, with `to <= old.size` for a shrink.
            Resize::Shrink => unsafe {
                self.target
                    .shrink(old.end, old.ptr, old.layout(), new_layout)
            },
            // SAFETY: as above.
            Resize::InPlace => unsafe {
                self.target
                    .resize_in_place(old.end, old.ptr, old.layout(), to)
            },
        };
        let Some(block) = result else {
            if old.extent > 0 {
                let (s, e) = old.range();
                self.ranges.insert(s, e);
            }
            self.report.resizes_failed += 1;
            // A failed resize leaves the block as it was.
            return self.check_pattern(&old, usize::MAX);
        };
        self.blocks.remove(i);
        self.live_bytes -= old.size;
        let mut new = self.admit(block, to, align, old.end)?;
        let moved = new.ptr != old.ptr;
        if moved && how == Resize::InPlace {
            return Err(self.fail(FailureKind::MovedInPlace {
                from: old.ptr.addr().get(),
                to: new.ptr.addr().get(),
            }));
        }
        if !moved {
            // In place: the block keeps its birth (a marker taken after it does not
            // cover it). It is re-inserted at the end, so "newest" is approximate for
            // resized blocks, which stacks only resize at the top anyway.
            new.born = old.born;
        }
        // The common prefix keeps the old pattern.
        let keep = old.size.min(to);
        let probe = Block {
            seed: old.seed,
            ..new
        };
        self.check_pattern(&probe, keep)?;
        if zeroed {
            self.check_zero(&new, old.size)?;
        }
        self.fill(new);
        if !moved {
            self.sort_newest_last();
        }
        self.report.resizes += 1;
        self.report.resizes_in_place += usize::from(!moved);
        Ok(())
    }

    /// Keeps `blocks` in order of birth after an in-place resize re-inserted one.
    fn sort_newest_last(&mut self) {
        if let Some(last) = self.blocks.last().copied() {
            let pos = self.blocks.partition_point(|b| b.born < last.born);
            if pos < self.blocks.len() - 1 {
                self.blocks.pop();
                self.blocks.insert(pos, last);
            }
        }
    }

    fn reset(&mut self) {
        self.target.reset();
        self.blocks.clear();
        self.ranges.clear();
        self.live_bytes = 0;
        for m in &mut self.markers {
            m.stale = true;
        }
        self.report.resets += 1;
    }

    fn marker(&mut self, end: End) {
        let handle = self.target.marker(end);
        if self.markers.len() == MAX_MARKERS {
            self.markers.remove(0);
        }
        self.markers.push(MarkerRec {
            end,
            handle,
            taken: self.clock,
            stale: false,
        });
    }

    fn rollback(&mut self, raw: u8) -> Result<(), Failure> {
        if self.markers.is_empty() {
            return Ok(());
        }
        let m = self.markers[usize::from(raw) % self.markers.len()];
        match self.target.rollback(m.end, m.handle) {
            Ok(()) if m.stale => Err(self.fail(FailureKind::StaleMarkerAccepted)),
            Ok(()) => {
                // Every block of that end born after the marker is gone.
                let mut oldest_killed = u64::MAX;
                let mut i = 0;
                while i < self.blocks.len() {
                    let b = self.blocks[i];
                    if b.end == m.end && b.born > m.taken {
                        // A zero-size block owns no memory: losing it changes nothing
                        // an allocator could have recorded below a later marker.
                        if b.size > 0 {
                            oldest_killed = oldest_killed.min(b.born);
                        }
                        self.forget(i);
                    } else {
                        i += 1;
                    }
                }
                // A later marker is invalidated when the rollback freed a block that
                // already existed when it was taken: what lay below it has changed. A
                // later marker with nothing freed below it still names a valid state,
                // so an allocator may accept it (or refuse it).
                for later in &mut self.markers {
                    if later.end == m.end && later.taken > m.taken && oldest_killed <= later.taken {
                        later.stale = true;
                    }
                }
                self.report.rollbacks += 1;
                Ok(())
            }
            Err(_) if m.stale => {
                self.report.stale_rollbacks_refused += 1;
                Ok(())
            }
            Err(_) => {
                self.report.rollbacks_refused += 1;
                Ok(())
            }
        }
    }

    fn alloc_huge(&mut self, below: u8) -> Result<(), Failure> {
        let size = isize::MAX as usize - usize::from(below) * 4096;
        let layout = Layout::from_size_align(size, 1).expect("at most isize::MAX");
        // `black_box`: optimised, LLVM may elide an allocation whose pointer is never
        // used and assume it succeeded (seen with the system allocator at opt-level 3).
        match core::hint::black_box(self.target.allocate(End::Low, layout, false)) {
            None => Ok(()),
            Some(block) => {
                // SAFETY: the target just handed out this block with `layout`.
                unsafe { self.target.deallocate(End::Low, block.cast(), layout) };
                Err(self.fail(FailureKind::HugeSucceeded { size }))
            }
        }
    }

    fn validate(&mut self) -> Result<(), Failure> {
        self.report.validations += 1;
        let stats = self
            .target
            .validate()
            .map_err(|msg| self.fail(FailureKind::Invalid(msg)))?;
        for b in &self.blocks {
            self.check_pattern(b, usize::MAX)?;
        }
        let model_blocks = self.blocks.iter().filter(|b| b.size > 0).count();
        if let Some(reported) = stats.live_blocks
            && reported != model_blocks
        {
            return Err(self.fail(FailureKind::Stats {
                what: "live blocks",
                model: model_blocks,
                reported,
            }));
        }
        if let Some(reported) = stats.live_bytes
            && reported < self.live_bytes
        {
            return Err(self.fail(FailureKind::Stats {
                what: "live bytes (at least)",
                model: self.live_bytes,
                reported,
            }));
        }
        Ok(())
    }

    /// Checks everything, frees every block, and checks the target is empty.
    fn finish(mut self) -> Result<RunReport, Failure> {
        self.op = None;
        self.validate()?;
        while !self.blocks.is_empty() {
            self.free(self.blocks.len() - 1, 0)?;
        }
        self.validate()?;
        Ok(self.report)
    }
}
