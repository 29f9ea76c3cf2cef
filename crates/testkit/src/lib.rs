#![doc = include_str!("../README.md")]

extern crate alloc;

mod bytes;
mod generate;
#[cfg(bento_loom)]
pub mod loom;
mod op;
mod oracle;
mod seed;
mod target;

pub use arbitrary::{self, Arbitrary, Unstructured};
/// The long-running workloads (a game session, an open world, the synthetic ones),
/// from bento-trace: the space's footprint tests and the benches play them.
pub use bento_trace::{Rng, workload};

pub use crate::generate::{AlignGen, SizeGen};
pub use crate::op::{Caps, Op, Ops};
pub use crate::oracle::{Failure, FailureKind, RunReport};
pub use crate::seed::{cases, seeded, seeded_bytes};
pub use crate::target::{
    AllocateFn, Api02, Api04, DeallocateFn, End, EntryPoints, InPlaceFn, ResizeFn, Stats, Takes,
    Target, Turns, ValidateFn,
};

/// Runs one program drawn from `u` against `target` and checks every step against the
/// live-block model; at the end frees every block and checks the target is empty.
///
/// Operations are drawn by [`Caps::draw`] until `u` runs dry or `caps.max_steps`
/// operations have run. The first broken rule stops the run and is returned; the
/// blocks live at that moment are then left allocated.
///
/// ```
/// use allocator_api2::alloc::Global;
/// use bento_testkit::{run, seeded_bytes, Api02, Caps, Unstructured};
///
/// let bytes = seeded_bytes(0, 4096);
/// let report = run(&mut Api02::new(&Global), &Caps::default(), &mut Unstructured::new(&bytes))
///     .unwrap();
/// assert!(report.allocs > 0 && report.frees == report.allocs);
/// ```
pub fn run<T: Target + ?Sized>(
    target: &mut T,
    caps: &Caps,
    u: &mut Unstructured<'_>,
) -> Result<RunReport, Failure> {
    oracle::Interp::new(target, caps).run_drawn(u)
}

/// Runs the operations of `ops` that `caps` allow, as [`run`] does: the form a fuzz
/// target with an `arbitrary` `Vec<Op>` uses.
///
/// ```
/// use allocator_api2::alloc::Global;
/// use bento_testkit::{run_ops, Api02, Caps, End, Op};
///
/// let ops = [
///     Op::Alloc { size: 100, align: 3, zeroed: true, end: End::Low },
///     Op::Grow { index: 0, by: 1000, zeroed: false, align: 0 },
///     Op::FreeNewest,
/// ];
/// let report = run_ops(&mut Api02::new(&Global), &Caps::default(), &ops).unwrap();
/// assert_eq!((report.allocs, report.resizes, report.frees), (1, 1, 1));
/// ```
pub fn run_ops<T: Target + ?Sized>(
    target: &mut T,
    caps: &Caps,
    ops: &[Op],
) -> Result<RunReport, Failure> {
    oracle::Interp::new(target, caps).run_list(ops)
}

#[cfg(test)]
mod tests;

/// The workspace README's examples run as doctests here, so they stay true.
#[cfg(doctest)]
#[doc = include_str!("../../../README.md")]
struct WorkspaceReadme;
