//! C23's sized frees, `free_sized` and `free_aligned_sized`, and glibc's `mallinfo2`
//! (with the older `mallinfo`).
//!
//! A sized free is checked, not trusted: the size must be one the block can have
//! been allocated (or last resized) with, judged from its usable size, which the
//! region map gives as it does for `free`. A block of the front end's sizes (up to
//! 4 KiB) holds a size class, at most twice the size asked (16 bytes for the
//! smallest); a larger one holds the size asked rounded to its chunk, and at most a
//! page more. A size outside that, or an alignment the block's address does not
//! meet, is misuse: one line on stderr naming the pointer, the size given and the
//! block's, then the process aborts, as for a pointer `free` does not own; so is an
//! alignment that is no power of two.

use core::alloc::Layout;
use core::ffi::{c_int, c_void};
use core::fmt::Write;
use core::ptr::NonNull;

use bento_common::{Misuse, abort_on_misuse};

use crate::global::COMMON;
use crate::sys::{Buf, stderr, write_all};
use crate::{MIN_ALIGN, free};

/// The largest size the front end's size classes serve: above it, a block's usable
/// size is its request's rounded to the large region's chunk (or page).
const CLASSES_MOST: usize = 4096;
/// What a large block may hold beyond the size it was asked for: a dedicated
/// segment's last page, and the chunk's rounding.
const LARGE_SLACK: usize = 4096 + 64;

/// Whether a block of `usable` bytes may have been allocated (or last resized) with
/// `size` bytes: `size` fits, and the block is not larger than any block for `size`
/// can be.
pub(crate) const fn size_fits(size: usize, usable: usize) -> bool {
    // `malloc(0)` allocates one byte.
    let size = if size == 0 { 1 } else { size };
    if size > usable {
        return false;
    }
    let over = usable - size;
    if usable <= CLASSES_MOST {
        over <= if size < 16 { 16 } else { size }
    } else {
        over <= LARGE_SLACK
    }
}

/// Checks `p`, a live block (the caller's contract), against the `size` and
/// `align` it is freed with; misuse aborts with one line.
///
/// # Safety
///
/// `p` is a live block of this allocator.
unsafe fn check(p: NonNull<u8>, size: usize, align: usize) {
    if !align.is_power_of_two() {
        not_an_alignment(p, size, align);
    }
    // SAFETY: the caller's contract.
    let usable = unsafe { COMMON.usable_size(p) };
    if !p.addr().get().is_multiple_of(align) || !size_fits(size, usable) {
        let block_align = 1 << p.addr().get().trailing_zeros().min(usize::BITS - 1);
        // A size no layout holds is shown at the largest one that does.
        let layout = Layout::from_size_align(size.min(isize::MAX as usize + 1 - align), align)
            .unwrap_or(Layout::new::<u8>());
        abort_on_misuse(&Misuse::WrongLayout {
            ptr: p,
            layout,
            block_size: usable,
            block_align,
        });
    }
}

/// Reports a sized free whose alignment is no power of two, in one line on stderr,
/// and aborts.
#[cold]
fn not_an_alignment(p: NonNull<u8>, size: usize, align: usize) -> ! {
    let mut line = Buf::<256>::new();
    let _ = writeln!(
        line,
        "bento-malloc: free_aligned_sized({p:p}, {align}, {size}): the alignment {align} is \
         no power of two"
    );
    if let Some(fd) = stderr() {
        write_all(fd, line.as_bytes());
    }
    // SAFETY: ending the process, as a misuse report does.
    unsafe { libc::abort() }
}

/// `free_sized(p, size)` (C23): frees a block that `malloc`, `calloc` or `realloc`
/// allocated (or last resized) with `size` bytes; `free_sized(NULL, size)` does
/// nothing; `errno` is kept. A size the block cannot have is reported on stderr
/// (one line) and the process aborts.
///
/// # Safety
///
/// The caller must pass null or a live block of this allocator of `size` bytes, and
/// not use it after it is freed.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn free_sized(p: *mut c_void, size: usize) {
    if let Some(q) = NonNull::new(p.cast::<u8>()) {
        // SAFETY: C's contract: `q` is a live block from this allocator.
        unsafe {
            check(q, size, MIN_ALIGN);
            free(p);
        }
    }
}

/// `free_aligned_sized(p, alignment, size)` (C23): frees a block that
/// `aligned_alloc(alignment, size)` allocated; `free_aligned_sized(NULL, ..)` does
/// nothing; `errno` is kept. A size the block cannot have, or an alignment its
/// address does not meet, is reported on stderr (one line) and the process aborts.
///
/// # Safety
///
/// The caller must pass null or a live block of this allocator, and not use it after
/// it is freed.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn free_aligned_sized(p: *mut c_void, alignment: usize, size: usize) {
    if let Some(q) = NonNull::new(p.cast::<u8>()) {
        // SAFETY: C's contract: `q` is a live block from this allocator.
        unsafe {
            check(q, size, alignment);
            free(p);
        }
    }
}

/// glibc's `struct mallinfo2`: the allocator's figures in glibc's fields.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Mallinfo2 {
    /// Bytes the allocator's regions have committed (blocks in use, free space in
    /// their runs and segments).
    pub arena: usize,
    /// Freed blocks kept for reuse (in the threads' caches and the regions' runs).
    pub ordblks: usize,
    /// 0: no fast bins.
    pub smblks: usize,
    /// 0: blocks are not mapped one by one.
    pub hblks: usize,
    /// 0: as `hblks`.
    pub hblkhd: usize,
    /// 0, as glibc's.
    pub usmblks: usize,
    /// 0: no fast bins.
    pub fsmblks: usize,
    /// Bytes in blocks in use.
    pub uordblks: usize,
    /// Committed bytes not in use (`arena - uordblks`).
    pub fordblks: usize,
    /// Bytes `malloc_trim` would give back: the pages and spare segments the
    /// allocator keeps committed for reuse.
    pub keepcost: usize,
}

/// glibc's `struct mallinfo`: [`Mallinfo2`] in `int`s, each at most `INT_MAX`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Mallinfo {
    /// As [`Mallinfo2::arena`].
    pub arena: c_int,
    /// As [`Mallinfo2::ordblks`].
    pub ordblks: c_int,
    /// As [`Mallinfo2::smblks`].
    pub smblks: c_int,
    /// As [`Mallinfo2::hblks`].
    pub hblks: c_int,
    /// As [`Mallinfo2::hblkhd`].
    pub hblkhd: c_int,
    /// As [`Mallinfo2::usmblks`].
    pub usmblks: c_int,
    /// As [`Mallinfo2::fsmblks`].
    pub fsmblks: c_int,
    /// As [`Mallinfo2::uordblks`].
    pub uordblks: c_int,
    /// As [`Mallinfo2::fordblks`].
    pub fordblks: c_int,
    /// As [`Mallinfo2::keepcost`].
    pub keepcost: c_int,
}

/// The allocator's figures now, in glibc's fields.
fn figures() -> Mallinfo2 {
    crate::setup();
    let s = COMMON.stats();
    Mallinfo2 {
        arena: s.committed,
        ordblks: s.cached_blocks,
        uordblks: s.live_bytes,
        fordblks: s.committed.saturating_sub(s.live_bytes),
        keepcost: s.cache.parked + s.cache.spare_bytes,
        ..Mallinfo2::default()
    }
}

/// `mallinfo2()` (glibc 2.33): the allocator's figures (see [`Mallinfo2`]). It walks
/// no block: each region's counts are read under its lock.
///
/// # Safety
///
/// None: it reads the allocator's stats.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mallinfo2() -> Mallinfo2 {
    figures()
}

/// `mallinfo()`: [`mallinfo2`] with each figure at most `INT_MAX` (glibc's wraps).
///
/// # Safety
///
/// None: it reads the allocator's stats.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mallinfo() -> Mallinfo {
    let m = figures();
    let int = |v: usize| c_int::try_from(v).unwrap_or(c_int::MAX);
    Mallinfo {
        arena: int(m.arena),
        ordblks: int(m.ordblks),
        smblks: int(m.smblks),
        hblks: int(m.hblks),
        hblkhd: int(m.hblkhd),
        usmblks: int(m.usmblks),
        fsmblks: int(m.fsmblks),
        uordblks: int(m.uordblks),
        fordblks: int(m.fordblks),
        keepcost: int(m.keepcost),
    }
}

#[cfg(test)]
mod tests {
    use super::size_fits;

    #[test]
    fn a_size_fits_the_blocks_it_can_have() {
        // malloc(0) and the smallest class.
        assert!(size_fits(0, 16));
        assert!(size_fits(1, 16));
        assert!(size_fits(16, 16));
        assert!(!size_fits(17, 16));
        // A class is at most twice the size asked.
        assert!(size_fits(70, 80));
        assert!(size_fits(2049, 2560));
        assert!(!size_fits(8, 3072));
        assert!(!size_fits(1000, 3072));
        // Large blocks: their rounding and a page.
        assert!(size_fits(100_000, 100_016));
        assert!(size_fits(100_000, 104_096));
        assert!(!size_fits(100_000, 200_000));
        assert!(!size_fits(usize::MAX, 4096));
    }
}
