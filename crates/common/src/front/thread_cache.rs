//! One thread's cache of freed blocks ([`ThreadCache`]): a list and count per bin,
//! the owner it belongs to, and [`leave`], which gives it back as the thread exits.

use core::cell::Cell;
use core::ptr::{self, NonNull};

use crate::front::bins::{BINS, Bin};
use crate::region::run::FREED;
use crate::sync::{AtomicPtr, AtomicU32, Ordering};

/// The states of a thread's cache: `FREE` → `ATTACHING` → `LIVE` → `FREE` (detached)
/// or `DEAD` (the thread is exiting, or its exit flush could not be armed).
const FREE: u8 = 0;
const ATTACHING: u8 = 1;
const LIVE: u8 = 2;
const DEAD: u8 = 3;

/// One thread's cache. It lives in a thread-local (with a `const` initialiser and no
/// destructor, so that it never allocates and stays reachable while the thread's
/// other destructors run); a second thread-local's destructor flushes it.
#[repr(C)]
pub(crate) struct ThreadCache {
    /// The owning allocator's block (`Inner<P>`), null while unattached.
    owner: Cell<*const ()>,
    /// `Inner::<P>::detach_erased` of the owner.
    detach: Cell<Option<DetachFn>>,
    state: Cell<u8>,
    // Invariant: `bins[b].head` is a list of `bins[b].count` blocks of bin `b` of the owner,
    // each free (taken from the owner's regions, not handed to the user), linked
    // through its first word; in debug builds each holds `FREED` in its second word.
    bins: [BinList; BINS + 1],
    /// The next cache in the owner's registry (under the registry's lock).
    next: AtomicPtr<ThreadCache>,
    /// The owner's allocations until its next guard sample; 0: the next one is due
    /// (a zeroed cache samples its first, on the full path).
    countdown: Cell<u32>,
    /// Bytes the owner allocates until its next profile sample; 0: due (a zeroed
    /// cache draws its first wait on the full path).
    prof_left: Cell<usize>,
}

/// How a cache finds its way back to its owner: `Inner::<P>::detach_erased`.
pub(crate) type DetachFn = unsafe fn(*const (), &ThreadCache);

/// One bin of a cache: its list and count side by side, in one cache line.
struct BinList {
    head: Cell<*mut u8>,
    /// Written by the owning thread only (so a load and a store, never a locked
    /// instruction); read by the owner's `stats` through the registry.
    count: AtomicU32,
    /// The blocks the next refill takes: about 4 KiB of them at first (0 until the
    /// first refill), doubling each refill up to half the bin's capacity, so that a
    /// size a thread uses once costs it a page or so, not a batch.
    batch: Cell<u32>,
}

impl BinList {
    #[cfg(not(bento_loom))]
    const fn new() -> Self {
        Self {
            head: Cell::new(ptr::null_mut()),
            count: AtomicU32::new(0),
            batch: Cell::new(0),
        }
    }

    #[cfg(bento_loom)]
    fn new() -> Self {
        Self {
            head: Cell::new(ptr::null_mut()),
            count: AtomicU32::new(0),
            batch: Cell::new(0),
        }
    }
}

impl ThreadCache {
    #[cfg(not(bento_loom))]
    #[cfg_attr(
        not(all(feature = "std", not(feature = "static-tls"))),
        expect(dead_code, reason = "only the `std` provider's initialiser")
    )]
    pub(crate) const fn new() -> Self {
        Self {
            owner: Cell::new(ptr::null()),
            detach: Cell::new(None),
            state: Cell::new(FREE),
            bins: [const { BinList::new() }; BINS + 1],
            next: AtomicPtr::new(ptr::null_mut()),
            countdown: Cell::new(0),
            prof_left: Cell::new(0),
        }
    }

    #[cfg(bento_loom)]
    pub(crate) fn new() -> Self {
        Self {
            owner: Cell::new(ptr::null()),
            detach: Cell::new(None),
            state: Cell::new(FREE),
            bins: core::array::from_fn(|_| BinList::new()),
            next: AtomicPtr::new(ptr::null_mut()),
            countdown: Cell::new(0),
            prof_left: Cell::new(0),
        }
    }

    /// The owner's allocations until its next guard sample (0: this one is due).
    #[inline(always)]
    pub(crate) fn countdown(&self) -> u32 {
        self.countdown.get()
    }

    /// Sets [`countdown`](Self::countdown).
    #[inline(always)]
    pub(crate) fn set_countdown(&self, left: u32) {
        self.countdown.set(left);
    }

    /// Bytes until the owner's next profile sample (0: due).
    #[inline(always)]
    pub(crate) fn prof_left(&self) -> usize {
        self.prof_left.get()
    }

    /// Sets [`prof_left`](Self::prof_left).
    #[inline(always)]
    pub(crate) fn set_prof_left(&self, left: usize) {
        self.prof_left.set(left);
    }

    /// Whether the cache is attached to the allocator whose block is `owner`.
    #[inline(always)]
    pub(crate) fn owned_by(&self, owner: *const ()) -> bool {
        self.owner.get() == owner
    }

    /// Whether the cache is attached to `owner` and in use (not being attached, nor
    /// left by its exiting thread).
    pub(crate) fn live_for(&self, owner: *const ()) -> bool {
        self.owned_by(owner) && self.state.get() == LIVE
    }

    /// The first step of an attach: true (the cache now `ATTACHING`) when the cache
    /// is free; false when it is attached already, being attached (a re-entrant
    /// call), or dead.
    pub(crate) fn begin_attach(&self) -> bool {
        if self.state.get() != FREE {
            return false;
        }
        self.state.set(ATTACHING);
        true
    }

    /// An attach that cannot go on (the thread's exit flush could not be armed):
    /// the cache is never used.
    pub(crate) fn abandon(&self) {
        self.state.set(DEAD);
    }

    /// The attach's second step: the cache belongs to `owner`, whose `detach`
    /// gives it back.
    pub(crate) fn bind(&self, owner: *const (), detach: DetachFn) {
        debug_assert_eq!(self.state.get(), ATTACHING);
        self.owner.set(owner);
        self.detach.set(Some(detach));
    }

    /// The attach's last step, once the cache is in its owner's registry.
    pub(crate) fn go_live(&self) {
        self.state.set(LIVE);
    }

    /// After a detach (its bins empty, out of the registry): free for the next
    /// allocator.
    pub(crate) fn unbind(&self) {
        self.owner.set(ptr::null());
        self.detach.set(None);
        self.state.set(FREE);
    }

    /// The next cache in the owner's registry.
    pub(super) fn next(&self) -> &AtomicPtr<ThreadCache> {
        &self.next
    }

    /// The blocks in `bin`. Read by other threads through the registry (a relaxed
    /// load: a stat, not a synchronisation).
    #[inline]
    pub(crate) fn count(&self, bin: Bin) -> u32 {
        self.bins[bin.index()].count.load(Ordering::Relaxed)
    }

    #[inline]
    pub(crate) fn set_count(&self, bin: Bin, n: u32) {
        self.bins[bin.index()].count.store(n, Ordering::Relaxed);
    }

    /// The size of `bin`'s next refill: `first` at the first, then doubling up to
    /// `most`.
    pub(crate) fn next_batch(&self, bin: Bin, first: u32, most: u32) -> u32 {
        let batch = &self.bins[bin.index()].batch;
        let want = match batch.get() {
            0 => first,
            b => b.min(most),
        };
        batch.set((want * 2).min(most));
        want
    }

    /// Cuts `bin`'s list after its first `keep` blocks (at most all of them) and
    /// returns the rest (a chain of `count - keep` blocks through their first words,
    /// ending in null). The count stays: the caller sets it once the rest is given
    /// back.
    pub(crate) fn cut(&self, bin: Bin, keep: u32) -> *mut u8 {
        // At most the blocks listed: the walk below follows `keep` links.
        let keep = keep.min(self.count(bin));
        let list = &self.bins[bin.index()];
        let mut rest = list.head.get();
        let mut last: *mut u8 = ptr::null_mut();
        for _ in 0..keep {
            last = rest;
            // SAFETY: one of the first `count` listed blocks (`keep` is at most the
            // count): it holds its link in its first word (the field's invariant).
            rest = unsafe { rest.cast::<*mut u8>().read() };
        }
        if last.is_null() {
            list.head.set(ptr::null_mut());
        } else {
            // SAFETY: `last` is a listed block; it now ends the list.
            unsafe { last.cast::<*mut u8>().write(ptr::null_mut()) };
        }
        rest
    }

    /// Takes the first block of `bin`.
    #[inline]
    pub(crate) fn pop(&self, bin: Bin) -> Option<NonNull<u8>> {
        let list = &self.bins[bin.index()];
        let head = NonNull::new(list.head.get())?;
        // SAFETY: a listed block holds its link in its first word (the invariant).
        list.head.set(unsafe { head.cast::<*mut u8>().read() });
        self.set_count(bin, self.count(bin) - 1);
        // The freed mark goes (a free without a layout checks it). SAFETY: every
        // block holds at least 16 bytes.
        unsafe { head.cast::<usize>().add(1).write(0) };
        Some(head)
    }

    /// Puts a free block on `bin`.
    ///
    /// # Safety
    ///
    /// `block` is a free block of the owner of bin `bin`, given up by the caller.
    #[inline]
    pub(crate) unsafe fn push(&self, bin: Bin, block: NonNull<u8>) {
        // SAFETY: the caller gives the block up; it holds at least 24 bytes.
        unsafe {
            block
                .cast::<*mut u8>()
                .write(self.bins[bin.index()].head.get());
            if cfg!(debug_assertions) {
                block.cast::<usize>().add(1).write(FREED);
            }
        }
        self.bins[bin.index()].head.set(block.as_ptr());
        self.set_count(bin, self.count(bin) + 1);
    }

    /// Makes a chain of `n` free blocks the whole of the empty `bin`.
    ///
    /// # Safety
    ///
    /// `head` starts a chain of `n` free blocks of the owner's bin `bin`, linked
    /// through their first words (the last to null), given up by the caller; the bin
    /// is empty.
    pub(crate) unsafe fn install(&self, bin: Bin, head: *mut u8, n: u32) {
        debug_assert_eq!(self.count(bin), 0);
        if cfg!(debug_assertions) {
            let mut p = head;
            for _ in 0..n {
                // SAFETY: the caller's contract: each block holds at least 16 bytes.
                unsafe {
                    p.cast::<usize>().add(1).write(FREED);
                    p = p.cast::<*mut u8>().read();
                }
            }
        }
        self.bins[bin.index()].head.set(head);
        self.set_count(bin, n);
    }

    /// Whether `block` is on `bin` (a debug check).
    pub(crate) fn holds(&self, bin: Bin, block: NonNull<u8>) -> bool {
        let mut p = self.bins[bin.index()].head.get();
        for _ in 0..self.count(bin) {
            if p == block.as_ptr() {
                return true;
            }
            // SAFETY: a listed block holds its link in its first word.
            p = unsafe { p.cast::<*mut u8>().read() };
        }
        false
    }
}

/// The thread is exiting: its cache goes back to its owner, and is used no more.
pub(crate) fn leave(cache: &ThreadCache) {
    if cache.state.get() == LIVE
        && let Some(detach) = cache.detach.get()
    {
        // SAFETY: `detach` is the owner's own `detach_erased`, and a live cache's
        // owner is alive (an allocator with caches attached is never torn down).
        unsafe { detach(cache.owner.get(), cache) };
    }
    cache.state.set(DEAD);
}

#[cfg(test)]
mod tests {
    use super::{FREE, ThreadCache};
    use crate::sync::Ordering;

    /// The static-TLS provider's cache starts as zeroed memory: that must read as a
    /// fresh cache, unattached with empty bins.
    #[test]
    fn a_zeroed_cache_is_a_new_one() {
        // SAFETY: every field is a pointer, an integer, a cell or atomic of one, or
        // an `Option` of a function pointer, for which zero bytes are valid (`None`).
        let cache: ThreadCache = unsafe { core::mem::zeroed() };
        assert!(cache.owner.get().is_null());
        assert!(cache.detach.get().is_none());
        assert_eq!(cache.state.get(), FREE);
        for bin in &cache.bins {
            assert!(bin.head.get().is_null());
            assert_eq!(bin.count.load(Ordering::Relaxed), 0);
            assert_eq!(bin.batch.get(), 0);
        }
        assert!(cache.next.load(Ordering::Relaxed).is_null());
    }
}
