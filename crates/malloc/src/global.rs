//! [`COMMON`], the allocator behind every entry point, and the retention calls the
//! purger makes of it.

use bento_common::{CommonAllocator, CommonConfig};

use crate::policy::{DEFAULT, Policy, retention};

/// The allocator behind every entry point, and Rust's global allocator inside this
/// library, so that Rust code here never goes through the interposed `malloc`.
/// With its per-thread front end, whose cache lives in initial-exec TLS (bento-common's
/// `static-tls`: on x86-64; elsewhere the front end is off and every call takes its
/// region's lock). Its commit cache keeps freed pages and segments under
/// the retention `BENTO_RETAIN` sets (see `retain`: a decay of 1 s by default; under
/// `eager`, the large region's last segment and up to 8 MiB of pages), so that a loop
/// of multi-megabyte blocks neither maps a segment nor faults its pages in again each
/// time (glibc keeps such memory too).
#[global_allocator]
pub(crate) static COMMON: CommonAllocator = CommonAllocator::with_config(
    CommonConfig::DEFAULT
        .with_commit_cache(COMMIT_CACHE)
        .with_commit_floor(COMMIT_FLOOR)
        .with_retention(retention(DEFAULT)),
);

/// The commit cache's capacity: the most it keeps for reuse, whatever the peak (under
/// a decay it also keeps no more than the peak in use leaves room for). After a large
/// free, up to this much stays resident until the decay gives it back. 64 MiB, as
/// much as glibc keeps of a trimmed heap top at most (its trim threshold grows to
/// twice its largest mmap threshold, 32 MiB): a whole segment of the large region
/// (32 MiB) fits, so the large region's last segment, released when its last block
/// goes, is kept as a spare and taken back by the next large allocation without a
/// system call; and a program whose threads come and go (each freeing its blocks
/// before it exits) takes up to this much of their runs' pages back without faulting
/// them in again.
const COMMIT_CACHE: usize = 64 << 20;
/// The pages the commit cache may keep committed however little is reserved, under
/// `BENTO_RETAIN=eager`.
const COMMIT_FLOOR: usize = 8 << 20;

/// Sets the retention of `COMMON`.
pub(crate) fn set_retention(policy: Policy) {
    COMMON.set_retention(retention(policy));
}

/// One tick of `COMMON`'s decay: what is due goes back.
pub(crate) fn tick() {
    COMMON.tick();
}

/// Bytes `COMMON` keeps committed for reuse now.
#[inline]
pub(crate) fn kept() -> usize {
    COMMON.kept()
}
