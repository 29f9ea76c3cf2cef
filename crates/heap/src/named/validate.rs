//! [`Heap::validate`]: every tracked block's guards and the table against the stats,
//! and [`HeapCorruption`], what it finds.

use core::fmt;

use allocator_api2::alloc::Allocator;
use bento_pages::Misuse;

use crate::named::Heap;
use crate::policy::Guards;
use crate::stats::HeapStats;
use crate::track::Tracking;

impl<A: Allocator, G: Guards, T: Tracking> Heap<A, G, T> {
    /// Checks the heap: every tracked block's guards (a broken one is also reported
    /// through the misuse hook), and the stats against the table (with tracking) or
    /// against each other. Returns the stats.
    ///
    /// # Errors
    ///
    /// [`HeapCorruption`] naming the first problem found.
    ///
    /// ```
    /// use allocator_api2::alloc::Global;
    /// use bento_heap::{Canaries, HeapBuilder, Track};
    /// use core::alloc::Layout;
    ///
    /// let heap = HeapBuilder::new("doc-check")
    ///     .guards(Canaries::<8>)
    ///     .tracking(Track::Sites)
    ///     .misuse_hook(|_| {})
    ///     .build(Global);
    /// let layout = Layout::new::<[u8; 10]>();
    /// let p = heap.alloc(layout).unwrap();
    /// assert!(heap.validate().is_ok());
    /// // SAFETY: one byte past the block: its back guard (a deliberate overrun).
    /// unsafe { p.add(10).write(0) };
    /// assert!(heap.validate().is_err());
    /// // SAFETY: repairs the guard; live, with its layout.
    /// unsafe {
    ///     p.add(10).write(0xFD);
    ///     heap.free(p, layout);
    /// }
    /// ```
    pub fn validate(&self) -> Result<HeapStats, HeapCorruption> {
        let stats = self.stats();
        let name = self.account.name;
        let stat = |what, counted: usize, recorded: usize| {
            if counted == recorded {
                Ok(())
            } else {
                Err(HeapCorruption::Stats {
                    heap: name,
                    what,
                    counted,
                    recorded,
                })
            }
        };
        stat(
            "live blocks (allocs - frees) within allocs",
            stats.live_blocks.min(stats.total_allocs),
            stats.live_blocks,
        )?;
        stat(
            "peak at least live",
            stats.peak_bytes.max(stats.live_bytes),
            stats.peak_bytes,
        )?;
        // Threads allocating at once may pass the budget by the slack each.
        if let Some(budget) = stats.budget
            && stats.live_bytes > budget.saturating_add(self.account.slack() * crate::slot::LANES)
        {
            return Err(HeapCorruption::OverBudget {
                heap: name,
                live: stats.live_bytes,
                budget,
            });
        }
        if let Some(table) = self.tracking.table() {
            let mut broken = None;
            if G::BYTES != 0 {
                table.for_each(|ptr, size, site| {
                    if broken.is_none() {
                        // SAFETY: a live block of this heap (the table holds only those).
                        broken = unsafe { self.guard_misuse(ptr, size, site) };
                    }
                });
            }
            if let Some(misuse) = broken {
                (self.hook)(&misuse);
                return Err(HeapCorruption::Guard(misuse));
            }
            let (blocks, bytes) = table.live();
            let (own_bytes, own_blocks) = self.account.own_live();
            stat("live blocks of its own", blocks, own_blocks)?;
            stat("live bytes of its own", bytes, own_bytes)?;
            let tags = table.tag_stats();
            let tagged: usize = tags.iter().map(|t| t.live_bytes).sum();
            stat(
                "bytes of the tags within the live bytes",
                tagged.min(bytes),
                tagged,
            )?;
        }
        if let Some(sampler) = &self.sampler {
            sampler.validate().map_err(|c| HeapCorruption::GuardPool {
                heap: name,
                corruption: c,
            })?;
        }
        Ok(stats)
    }
}

/// What [`Heap::validate`] found wrong.
#[derive(Debug)]
#[non_exhaustive]
pub enum HeapCorruption {
    /// A block's guard was overwritten.
    Guard(Misuse<'static>),
    /// Two stats that must agree do not.
    Stats {
        /// The heap.
        heap: &'static str,
        /// Which stat.
        what: &'static str,
        /// What the check counted.
        counted: usize,
        /// What the heap recorded.
        recorded: usize,
    },
    /// The guard pool the heaps share broke one of its rules.
    GuardPool {
        /// The heap whose check found it.
        heap: &'static str,
        /// What the pool's check found.
        corruption: bento_pages::GuardCorruption,
    },
    /// More bytes are live than the budget allows.
    OverBudget {
        /// The heap.
        heap: &'static str,
        /// Bytes live.
        live: usize,
        /// The budget.
        budget: usize,
    },
}

impl fmt::Display for HeapCorruption {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Guard(misuse) => write!(f, "{misuse}"),
            Self::Stats {
                heap,
                what,
                counted,
                recorded,
            } => write!(
                f,
                "heap \"{heap}\": {what}: counted {counted}, recorded {recorded}"
            ),
            Self::GuardPool { heap, corruption } => {
                write!(f, "heap \"{heap}\": the guard pool: {corruption}")
            }
            Self::OverBudget { heap, live, budget } => write!(
                f,
                "heap \"{heap}\": {live} bytes live, over its budget of {budget}"
            ),
        }
    }
}

impl core::error::Error for HeapCorruption {}
