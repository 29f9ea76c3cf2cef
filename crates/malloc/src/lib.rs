#![doc = include_str!("../README.md")]

#[cfg(not(all(unix, target_env = "gnu")))]
compile_error!("bento-malloc replaces glibc's malloc: it builds for Linux with glibc only");

mod fork;
mod global;
mod guard;
mod huge;
mod policy;
pub mod prof;
mod retain;
mod setup;
pub mod sized;
mod stats;
mod sys;
mod trace;

use core::alloc::Layout;
use core::ffi::{c_int, c_void};
use core::ptr::{self, NonNull};
use core::sync::atomic::Ordering;

use crate::global::COMMON;
use crate::setup::{NOT_SET, SET, SETTING, SETUP, START_PURGER};
use crate::sys::{errno, set_errno};

/// The alignment of every block, as glibc's on 64-bit targets.
const MIN_ALIGN: usize = 16;

/// Sets the process up on the first call, and starts the purger when a `free` asked
/// for it. A call made meanwhile (by the set-up itself, which may reach `malloc`
/// through glibc, or by another thread) goes on without waiting.
#[inline]
fn setup() {
    if SETUP.load(Ordering::Acquire) != SET {
        setup_slow();
    }
}

/// The set-up also runs when the library is loaded, for a program that exits before
/// its first allocation (its trace then exists, empty). It cannot be relied on to run
/// first: the dynamic linker may call `malloc` before any initialiser.
#[used]
#[unsafe(link_section = ".init_array")]
static SETUP_AT_LOAD: extern "C" fn() = setup_at_load;

extern "C" fn setup_at_load() {
    setup();
}

#[cold]
#[inline(never)]
fn setup_slow() {
    match SETUP.compare_exchange(NOT_SET, SETTING, Ordering::AcqRel, Ordering::Acquire) {
        Ok(_) => {
            sys::note_stderr();
            // Before anything that may start `COMMON`: the source is chosen first.
            huge::arm();
            guard::arm();
            prof::arm();
            retain::arm();
            fork::register();
            stats::arm();
            trace::arm();
            SETUP.store(SET, Ordering::Release);
        }
        Err(START_PURGER) => {
            // Back to `SET` before the thread is created: `pthread_create` allocates,
            // and those calls must take the fast path.
            if SETUP
                .compare_exchange(START_PURGER, SET, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
            {
                retain::start();
            }
        }
        Err(_) => {}
    }
}

/// A block of `size` bytes (at least one) aligned to `align`, or null with `ENOMEM`.
/// Out of line, so that `malloc`'s fast path saves no registers.
#[inline(never)]
fn alloc(size: usize, align: usize, zeroed: bool) -> *mut c_void {
    setup();
    let Ok(layout) = Layout::from_size_align(size.max(1), align.max(MIN_ALIGN)) else {
        set_errno(libc::ENOMEM);
        return ptr::null_mut();
    };
    let block = trace::traced_alloc(layout, |layout| {
        if zeroed {
            COMMON.alloc_zeroed(layout)
        } else {
            COMMON.alloc(layout)
        }
    });
    match block {
        Ok(p) => p.as_ptr().cast(),
        Err(_) => {
            set_errno(libc::ENOMEM);
            ptr::null_mut()
        }
    }
}

/// Frees `p` (not null) keeping `errno`; `tried` says that the thread's cache was
/// tried already and did not take it, so the hot path is not run again.
///
/// # Safety
///
/// `p` is a live block of this allocator. A pointer the allocator does not own is
/// reported on stderr and the process aborts. Out of line, so that `free`'s fast path
/// saves no registers.
#[inline(never)]
unsafe fn free_block(p: NonNull<u8>, tried: bool) {
    let saved = errno();
    let watching = retain::watching();
    let kept = if watching { retain::kept() } else { 0 };
    trace::traced_free(p, || {
        // SAFETY: the caller's contract.
        unsafe {
            if tried {
                COMMON.free_uncached(p);
            } else {
                COMMON.free(p);
            }
        }
    });
    if watching {
        // No bento lock is held here.
        retain::after_free(kept);
    }
    set_errno(saved);
}

/// Whether `align` is a power of two (and so a valid alignment).
fn power_of_two(align: usize) -> bool {
    align.is_power_of_two()
}

/// `malloc(size)`: a block of `size` bytes aligned to 16, or null with `ENOMEM`.
/// `malloc(0)` returns a unique block that `free` accepts.
///
/// # Safety
///
/// None beyond C's: the caller frees the block once (with `free`), and uses it only
/// while it is live.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn malloc(size: usize) -> *mut c_void {
    if size <= FAST_MOST && fast() {
        // SAFETY: a size of at most 4 KiB and an alignment of 16 make a layout.
        let layout = unsafe { Layout::from_size_align_unchecked(size.max(1), MIN_ALIGN) };
        if let Some(p) = COMMON.alloc_cached(layout) {
            return p.as_ptr().cast();
        }
    }
    alloc(size, MIN_ALIGN, false)
}

/// The largest request the fast paths of `malloc` try: what a thread's cache holds.
const FAST_MOST: usize = 4096;

/// Whether a call may take the common allocator's hot path alone: the process is set
/// up (and no purger is waiting to start) and nothing is traced.
#[inline(always)]
fn fast() -> bool {
    SETUP.load(Ordering::Relaxed) == SET && !trace::tracing()
}

/// `free(p)`: gives a block back; `free(NULL)` does nothing; `errno` is kept.
///
/// # Safety
///
/// The caller must pass null or a live block of this allocator, and not use it after
/// it is freed. A pointer this allocator does not own is reported on stderr and the
/// process aborts.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn free(p: *mut c_void) {
    if let Some(p) = NonNull::new(p.cast::<u8>()) {
        let tried = fast();
        // SAFETY: C's contract: `p` is a live block from this allocator; the hot
        // path makes no system call, so `errno` stays as it is.
        if tried && unsafe { COMMON.free_cached(p) } {
            return;
        }
        // SAFETY: C's contract: `p` is a live block from this allocator.
        unsafe { free_block(p, tried) }
    }
}

/// `cfree(p)`: `free`.
///
/// # Safety
///
/// The caller must pass null or a live block of this allocator, and not use it after
/// it is freed. A pointer this allocator does not own is reported on stderr and the
/// process aborts.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cfree(p: *mut c_void) {
    // SAFETY: C's contract, as for `free`.
    unsafe { free(p) }
}

/// `calloc(n, size)`: `n * size` zeroed bytes; an overflowing product gives null with
/// `ENOMEM`.
///
/// # Safety
///
/// None beyond C's: the caller frees the block once (with `free`), and uses it only
/// while it is live.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn calloc(n: usize, size: usize) -> *mut c_void {
    match n.checked_mul(size) {
        Some(total) => alloc(total, MIN_ALIGN, true),
        None => {
            set_errno(libc::ENOMEM);
            ptr::null_mut()
        }
    }
}

/// `realloc(p, size)`: `realloc(NULL, n)` is `malloc(n)`; `realloc(p, 0)` frees `p`
/// and returns null (as glibc does); otherwise the block keeps its first
/// `min(old, size)` bytes, where it is when it can, and on failure it is left as it
/// was and null comes back with `ENOMEM`.
///
/// # Safety
///
/// The caller must pass null or a live block of this allocator, and not use it after
/// it is freed. A pointer this allocator does not own is reported on stderr and the
/// process aborts.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn realloc(p: *mut c_void, size: usize) -> *mut c_void {
    let Some(old) = NonNull::new(p.cast::<u8>()) else {
        return alloc(size, MIN_ALIGN, false);
    };
    if size == 0 {
        // SAFETY: C's contract: `p` is a live block from this allocator.
        unsafe { free_block(old, false) };
        return ptr::null_mut();
    }
    setup();
    // SAFETY: as above.
    unsafe { resize(old, size) }
}

/// Resizes a live block to `size > 0` bytes.
///
/// # Safety
///
/// `old` is a live block of this allocator.
unsafe fn resize(old: NonNull<u8>, size: usize) -> *mut c_void {
    let Ok(new_layout) = Layout::from_size_align(size, MIN_ALIGN) else {
        set_errno(libc::ENOMEM);
        return ptr::null_mut();
    };
    let watching = retain::watching();
    let kept = if watching { retain::kept() } else { 0 };
    let result = trace::traced_realloc(old, new_layout, || {
        // SAFETY: the caller's contract.
        let usable = unsafe { COMMON.usable_size(old) };
        if size <= usable && size >= usable / 2 {
            return Ok(old);
        }
        // SAFETY: the caller's contract: `old` is live (and was checked just above).
        unsafe { COMMON.realloc(old, new_layout) }.map_err(|_| ())
    });
    if watching {
        // A block moved or shrunk may have left pages kept; no bento lock is held.
        retain::after_free(kept);
    }
    match result {
        Ok(p) => p.as_ptr().cast(),
        Err(()) => {
            set_errno(libc::ENOMEM);
            ptr::null_mut()
        }
    }
}

/// `reallocarray(p, n, size)`: `realloc(p, n * size)`, with an overflowing product
/// giving null and `ENOMEM` (the block left as it was).
///
/// # Safety
///
/// The caller must pass null or a live block of this allocator, and not use it after
/// it is freed. A pointer this allocator does not own is reported on stderr and the
/// process aborts.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn reallocarray(p: *mut c_void, n: usize, size: usize) -> *mut c_void {
    match n.checked_mul(size) {
        // SAFETY: C's contract, as for `realloc`.
        Some(total) => unsafe { realloc(p, total) },
        None => {
            set_errno(libc::ENOMEM);
            ptr::null_mut()
        }
    }
}

/// `posix_memalign(memptr, align, size)`: 0 and a block in `*memptr`; `EINVAL` for an
/// alignment that is not a power of two or not a multiple of `sizeof(void *)`,
/// `ENOMEM` when there is no memory, in both cases with `*memptr` untouched.
///
/// # Safety
///
/// The caller must pass a `memptr` valid for writing a pointer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn posix_memalign(
    memptr: *mut *mut c_void,
    align: usize,
    size: usize,
) -> c_int {
    if !power_of_two(align) || !align.is_multiple_of(size_of::<*mut c_void>()) {
        return libc::EINVAL;
    }
    let saved = errno();
    let p = alloc(size, align, false);
    if p.is_null() {
        set_errno(saved);
        return libc::ENOMEM;
    }
    // SAFETY: C's contract: `memptr` is writable.
    unsafe { memptr.write(p) };
    0
}

/// `aligned_alloc(align, size)`: a block aligned to `align`, a power of two; another
/// alignment gives null with `EINVAL` (as glibc 2.38 and later do).
///
/// # Safety
///
/// None beyond C's: the caller frees the block once (with `free`), and uses it only
/// while it is live.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aligned_alloc(align: usize, size: usize) -> *mut c_void {
    if !power_of_two(align) {
        set_errno(libc::EINVAL);
        return ptr::null_mut();
    }
    alloc(size, align, false)
}

/// `memalign(align, size)`: as glibc's, an alignment of 16 or less (0 included) is
/// `malloc`'s, any other rounds up to a power of two, and one above `SIZE_MAX / 2 + 1`
/// gives null with `EINVAL`.
///
/// # Safety
///
/// None beyond C's: the caller frees the block once (with `free`), and uses it only
/// while it is live.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn memalign(align: usize, size: usize) -> *mut c_void {
    match align.max(MIN_ALIGN).checked_next_power_of_two() {
        Some(align) => alloc(size, align, false),
        None => {
            set_errno(libc::EINVAL);
            ptr::null_mut()
        }
    }
}

/// The size of a page.
fn page() -> usize {
    // SAFETY: `sysconf` reads a constant of the system.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    usize::try_from(page).unwrap_or(4096)
}

/// `valloc(size)`: a page-aligned block.
///
/// # Safety
///
/// None beyond C's: the caller frees the block once (with `free`), and uses it only
/// while it is live.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn valloc(size: usize) -> *mut c_void {
    alloc(size, page(), false)
}

/// `pvalloc(size)`: a page-aligned block of whole pages (one for 0).
///
/// # Safety
///
/// None beyond C's: the caller frees the block once (with `free`), and uses it only
/// while it is live.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pvalloc(size: usize) -> *mut c_void {
    let page = page();
    match size.max(1).checked_next_multiple_of(page) {
        Some(rounded) => alloc(rounded, page, false),
        None => {
            set_errno(libc::ENOMEM);
            ptr::null_mut()
        }
    }
}

/// `malloc_usable_size(p)`: the bytes the block can hold (0 for null).
///
/// # Safety
///
/// The caller must pass null or a live block of this allocator, and not use it after
/// it is freed. A pointer this allocator does not own is reported on stderr and the
/// process aborts.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn malloc_usable_size(p: *mut c_void) -> usize {
    match NonNull::new(p.cast::<u8>()) {
        // SAFETY: C's contract: `p` is a live block from this allocator.
        Some(p) => unsafe { COMMON.usable_size(p) },
        None => 0,
    }
}

/// `malloc_trim(pad)`: gives back to the system what the allocator keeps for reuse
/// (free lists, cached blocks, parked pages and spare segments), whatever `pad`
/// asks; returns 1 when memory was given back, 0 otherwise, as glibc's does. The
/// allocator's own tables (about 0.85 MiB) and the region map's address space stay.
///
/// # Safety
///
/// None: it touches no block of the caller's.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn malloc_trim(pad: usize) -> c_int {
    let _ = pad;
    setup();
    c_int::from(COMMON.trim() > 0)
}

/// glibc's internal names, which some programs and libraries call directly.
pub mod aliases {
    use core::ffi::{c_int, c_void};

    /// `__libc_malloc`: `malloc`.
    ///
    /// # Safety
    ///
    /// None beyond C's: the caller frees the block once (with `free`), and uses it only
    /// while it is live.
    #[unsafe(no_mangle)]
    pub unsafe extern "C" fn __libc_malloc(size: usize) -> *mut c_void {
        // SAFETY: C's contract.
        unsafe { super::malloc(size) }
    }

    /// `__libc_free`: `free`.
    ///
    /// # Safety
    ///
    /// The caller must pass null or a live block of this allocator, and not use it after
    /// it is freed. A pointer this allocator does not own is reported on stderr and the
    /// process aborts.
    #[unsafe(no_mangle)]
    pub unsafe extern "C" fn __libc_free(p: *mut c_void) {
        // SAFETY: C's contract.
        unsafe { super::free(p) }
    }

    /// `__libc_calloc`: `calloc`.
    ///
    /// # Safety
    ///
    /// None beyond C's: the caller frees the block once (with `free`), and uses it only
    /// while it is live.
    #[unsafe(no_mangle)]
    pub unsafe extern "C" fn __libc_calloc(n: usize, size: usize) -> *mut c_void {
        // SAFETY: C's contract.
        unsafe { super::calloc(n, size) }
    }

    /// `__libc_realloc`: `realloc`.
    ///
    /// # Safety
    ///
    /// The caller must pass null or a live block of this allocator, and not use it after
    /// it is freed. A pointer this allocator does not own is reported on stderr and the
    /// process aborts.
    #[unsafe(no_mangle)]
    pub unsafe extern "C" fn __libc_realloc(p: *mut c_void, size: usize) -> *mut c_void {
        // SAFETY: C's contract.
        unsafe { super::realloc(p, size) }
    }

    /// `__libc_memalign`: `memalign`.
    ///
    /// # Safety
    ///
    /// None beyond C's: the caller frees the block once (with `free`), and uses it only
    /// while it is live.
    #[unsafe(no_mangle)]
    pub unsafe extern "C" fn __libc_memalign(align: usize, size: usize) -> *mut c_void {
        // SAFETY: C's contract.
        unsafe { super::memalign(align, size) }
    }

    /// `__libc_valloc`: `valloc`.
    ///
    /// # Safety
    ///
    /// None beyond C's: the caller frees the block once (with `free`), and uses it only
    /// while it is live.
    #[unsafe(no_mangle)]
    pub unsafe extern "C" fn __libc_valloc(size: usize) -> *mut c_void {
        // SAFETY: C's contract.
        unsafe { super::valloc(size) }
    }

    /// `__libc_pvalloc`: `pvalloc`.
    ///
    /// # Safety
    ///
    /// None beyond C's: the caller frees the block once (with `free`), and uses it only
    /// while it is live.
    #[unsafe(no_mangle)]
    pub unsafe extern "C" fn __libc_pvalloc(size: usize) -> *mut c_void {
        // SAFETY: C's contract.
        unsafe { super::pvalloc(size) }
    }

    /// `__posix_memalign`: `posix_memalign`.
    ///
    /// # Safety
    ///
    /// The caller must pass a `memptr` valid for writing a pointer.
    #[unsafe(no_mangle)]
    pub unsafe extern "C" fn __posix_memalign(
        memptr: *mut *mut c_void,
        align: usize,
        size: usize,
    ) -> c_int {
        // SAFETY: C's contract.
        unsafe { super::posix_memalign(memptr, align, size) }
    }
}
