//! What a guard pool is made of and reports: [`GuardConfig`], [`Label`],
//! [`GuardFault`], [`GuardStats`].

use core::fmt;
use core::mem::size_of;

/// The pages of a slot: the largest block a pool guards is this many pages.
pub const SLOT_PAGES: usize = 2;

/// The most slots a pool has.
pub const MAX_SLOTS: u32 = 4096;

/// The table's room for the pool itself and for a slot's record (checked by the
/// pool).
pub(super) const POOL_BYTES: usize = 256;
pub(super) const SLOT_BYTES: usize = 384;

/// How a [`GuardPool`](crate::GuardPool) samples: one allocation in `every` on average (a uniform draw
/// between 1 and `2 * every - 1`, so that no allocation pattern falls in step with
/// it), up to `slots` blocks guarded or in quarantine at once.
///
/// ```
/// use bento_pages::GuardConfig;
///
/// let config = GuardConfig::DEFAULT.every(1000).slots(16);
/// assert_eq!(config.every, 1000);
/// assert_eq!(GuardConfig::parse("500,8"), Some(GuardConfig::DEFAULT.every(500).slots(8)));
/// // Committed at most: the table and every slot full.
/// assert!(config.committed_bound(4096) <= 16 * 2 * 4096 + 3 * 4096);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GuardConfig {
    /// One allocation in this many (on average) is guarded; at least 1.
    pub every: u32,
    /// The most blocks guarded or in quarantine at once, 1 to [`MAX_SLOTS`].
    pub slots: u32,
    /// The allocator's name, for the reports.
    pub name: &'static str,
}

impl GuardConfig {
    /// One allocation in 4096, 64 slots: with 4 KiB pages 800 KiB of address space
    /// and at most 540 KiB committed (512 KiB of slots, 28 KiB of table).
    pub const DEFAULT: Self = Self {
        every: 4096,
        slots: 64,
        name: "bento",
    };

    /// This config guarding one allocation in `every` (0 is taken as 1).
    #[must_use]
    pub const fn every(mut self, every: u32) -> Self {
        self.every = if every == 0 { 1 } else { every };
        self
    }

    /// This config with `slots` slots (clamped to 1..=[`MAX_SLOTS`]).
    #[must_use]
    pub const fn slots(mut self, slots: u32) -> Self {
        self.slots = if slots == 0 {
            1
        } else if slots > MAX_SLOTS {
            MAX_SLOTS
        } else {
            slots
        };
        self
    }

    /// This config with `name` in its reports.
    #[must_use]
    pub const fn named(mut self, name: &'static str) -> Self {
        self.name = name;
        self
    }

    /// Reads `EVERY` or `EVERY,SLOTS` (decimal, `EVERY` at least 1, `SLOTS` 1 to
    /// [`MAX_SLOTS`]); `None` for anything else.
    #[must_use]
    pub fn parse(value: &str) -> Option<Self> {
        let (every, slots) = match value.split_once(',') {
            Some((every, slots)) => (every, Some(slots)),
            None => (value, None),
        };
        let every: u32 = every.trim().parse().ok().filter(|&n| n > 0)?;
        let mut config = Self::DEFAULT.every(every);
        if let Some(slots) = slots {
            let slots: u32 = slots
                .trim()
                .parse()
                .ok()
                .filter(|n| (1..=MAX_SLOTS).contains(n))?;
            config = config.slots(slots);
        }
        Some(config)
    }

    /// The pool's table: the pool, a record per slot and the quarantine's ring,
    /// rounded up to pages.
    pub(super) fn table_bytes(&self, page: usize) -> usize {
        let slots = self.slots as usize;
        (POOL_BYTES + slots * (SLOT_BYTES + size_of::<u32>())).next_multiple_of(page)
    }

    /// The address space a pool of this config reserves with pages of `page` bytes.
    #[must_use]
    pub fn reserved_bytes(&self, page: usize) -> usize {
        self.table_bytes(page) + (self.slots as usize * (SLOT_PAGES + 1) + 1) * page
    }

    /// The most memory a pool of this config commits: its table and every slot's
    /// pages.
    #[must_use]
    pub fn committed_bound(&self, page: usize) -> usize {
        self.table_bytes(page) + self.slots as usize * SLOT_PAGES * page
    }
}

impl Default for GuardConfig {
    fn default() -> Self {
        Self::DEFAULT
    }
}

/// What reports say a block belongs to: its allocator or heap, and its tag.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Label {
    /// The heap's or allocator's name; `None` for the pool's own.
    pub heap: Option<&'static str>,
    /// The block's tag.
    pub tag: Option<&'static str>,
    /// Who owns the block (a heap's address; 0 for nobody), for
    /// [`GuardPool::free_owned`](crate::GuardPool::free_owned).
    pub owner: usize,
}

/// What a guard report is about.
///
/// ```
/// use bento_pages::GuardFault;
///
/// assert_eq!(GuardFault::UseAfterFree.to_string(), "use after free");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum GuardFault {
    /// An access past a guarded block's end.
    Overrun,
    /// An access before a guarded block's start.
    Underrun,
    /// An access to a guarded block after its free.
    UseAfterFree,
    /// A write past a block's end inside its alignment's slack, found at its free.
    OverrunAtFree,
    /// A guarded block freed a second time.
    DoubleFree,
    /// A free of a pointer into the pool that is no block's start.
    InvalidFree,
    /// An access to a guard page or slot of no block.
    Wild,
}

impl fmt::Display for GuardFault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Overrun => "overrun",
            Self::Underrun => "underrun",
            Self::UseAfterFree => "use after free",
            Self::OverrunAtFree => "overrun (found at its free)",
            Self::DoubleFree => "double free",
            Self::InvalidFree => "invalid free",
            Self::Wild => "wild access",
        })
    }
}

/// A pool's figures.
///
/// ```
/// # #[cfg(target_os = "linux")] {
/// use bento_pages::{GuardConfig, GuardPool};
///
/// let pool = GuardPool::new(GuardConfig::DEFAULT.slots(2)).unwrap();
/// let stats = pool.stats();
/// assert_eq!((stats.slots, stats.live, stats.quarantined), (2, 0, 0));
/// # }
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GuardStats {
    /// The pool's slots.
    pub slots: u32,
    /// Blocks live in it.
    pub live: u32,
    /// Freed blocks whose slot is kept inaccessible until reused.
    pub quarantined: u32,
    /// Blocks it has guarded.
    pub guarded: u64,
    /// Samples it could not take: every slot live.
    pub refused: u64,
    /// Its address space.
    pub reserved_bytes: usize,
    /// Its committed memory: the table and the live blocks' pages.
    pub committed_bytes: usize,
    /// The most it had committed at once.
    pub peak_committed_bytes: usize,
    /// The system calls it made for its blocks' pages: a commit per block, and on
    /// Linux a decommit and a protection change per free (its reservation and its
    /// table's commit are two more).
    pub os_calls: u64,
}

/// What [`GuardPool::validate`](crate::GuardPool::validate) found wrong.
///
/// ```
/// use bento_pages::GuardCorruption;
///
/// assert_eq!(
///     GuardCorruption::Quarantine { slot: 3 }.to_string(),
///     "slot 3 is in the quarantine without a freed block, or twice"
/// );
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum GuardCorruption {
    /// The live or freed slots do not match the counts.
    #[error(
        "{live} live and {freed} freed slots, the counts say {counted_live} and {counted_freed}"
    )]
    Count {
        /// Live slots found.
        live: u32,
        /// Freed slots found.
        freed: u32,
        /// Live slots counted.
        counted_live: u32,
        /// Freed slots counted (the quarantine's length).
        counted_freed: u32,
    },
    /// A quarantine entry that is no freed slot, or one listed twice.
    #[error("slot {slot} is in the quarantine without a freed block, or twice")]
    Quarantine {
        /// The slot.
        slot: u32,
    },
    /// A live block outside its slot, or a slot used past the fresh mark.
    #[error("slot {slot}'s block lies outside it")]
    Block {
        /// The slot.
        slot: u32,
    },
    /// The committed bytes do not add up to the table and the live blocks' pages.
    #[error("{counted} bytes committed by the count, {found} by the blocks")]
    Committed {
        /// The count.
        counted: usize,
        /// The table and the live blocks' pages.
        found: usize,
    },
}
