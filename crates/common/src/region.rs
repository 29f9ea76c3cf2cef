//! A region: one memory space behind its own lock; a small class carves its blocks
//! from runs instead (`run.rs`), and the large region keeps per-size free lists.

use core::alloc::Layout;
use core::cell::UnsafeCell;
use core::ptr::NonNull;

use bento_pages::lock::RawSpinLock;
use bento_space::{MemorySpace, SpaceStats};

use crate::config::SMALL_ALIGN;
use crate::layer::RegionPages;
use crate::run::Runs;
use crate::sync::{AtomicUsize, Ordering};
use crate::{AllocError, MisuseHook, PageSource};

/// Lists a region keeps: one per medium bin of the front end (a small region uses
/// the first).
pub(crate) const LISTS: usize = crate::thread::MEDIUM_BINS;

/// The unit a small region takes from (and gives back to) the shared block budget.
pub(crate) const QUANTUM: usize = 8 << 10;

/// What a block on a region's free list holds in its second word (and one on a
/// thread's cache, in debug builds), so that a second free of it is caught.
pub(crate) const FREED: usize = 0x_f7ee_b10c_f7ee_b10c_u64 as usize;

/// One region. Aligned to two cache lines so that threads working in different
/// regions never share a line.
#[repr(align(128))]
pub(crate) struct Region<P: PageSource> {
    lock: RawSpinLock,
    /// The block size of a small region; 0 for a general one.
    pub(crate) block: usize,
    /// The region's id in the map.
    pub(crate) id: u8,
    // Invariant: reached only by the thread holding `lock` (through `Held`).
    state: UnsafeCell<State<P>>,
    /// Lock acquisitions that had to wait (written under the lock).
    contended: AtomicUsize,
}

/// What the lock guards.
pub(crate) struct State<P: PageSource> {
    /// The space of a general region (a small region's stays empty).
    pub(crate) space: MemorySpace<RegionPages<P>>,
    /// The runs of a small region (a general region's stay empty).
    pub(crate) runs: Runs,
    // Invariant: lists of blocks of one size each (a small region uses list 0; the
    // large region one per medium bin of the front end), `counts[l]` blocks on list
    // `l`, each a live block of `space` (freed from the user's point of view)
    // linked through its first word, holding `FREED` in its second word.
    free: [Option<NonNull<u8>>; LISTS],
    counts: [u32; LISTS],
    /// Blocks on all lists.
    cached: usize,
    /// Bytes of those blocks (at their lists' sizes).
    cached_bytes: usize,
    /// Bytes of the shared budget this region holds: at least `cached_bytes`.
    quota: usize,
}

// SAFETY: the state is reached only under the lock, one thread at a time; the space
// and its source move between threads (`Send`) with the page source's blessing.
unsafe impl<P: PageSource + Send + Sync> Sync for Region<P> {}
// SAFETY: as above.
unsafe impl<P: PageSource + Send + Sync> Send for Region<P> {}

/// The lock held on a region: its state, for one operation.
pub(crate) struct Held<'a, P: PageSource> {
    region: &'a Region<P>,
}

impl<P: PageSource> core::ops::Deref for Held<'_, P> {
    type Target = State<P>;

    #[inline]
    fn deref(&self) -> &State<P> {
        // SAFETY: this thread holds the lock (the state's invariant).
        unsafe { &*self.region.state.get() }
    }
}

impl<P: PageSource> core::ops::DerefMut for Held<'_, P> {
    #[inline]
    fn deref_mut(&mut self) -> &mut State<P> {
        // SAFETY: as for `deref`; `&mut self` makes this the only reference.
        unsafe { &mut *self.region.state.get() }
    }
}

impl<P: PageSource> Drop for Held<'_, P> {
    #[inline]
    fn drop(&mut self) {
        // SAFETY: a `Held` exists only while its thread holds the lock.
        unsafe { self.region.lock.unlock() }
    }
}

impl<P: PageSource> Region<P> {
    /// A region over `space`, serving blocks of `block` bytes (0: any request) from
    /// runs in spans of `span` bytes.
    pub(crate) fn new(
        space: MemorySpace<RegionPages<P>>,
        block: usize,
        span: usize,
        id: u8,
    ) -> Self {
        Self {
            lock: RawSpinLock::new(),
            block,
            id,
            state: UnsafeCell::new(State {
                space,
                runs: Runs::new(block, span),
                free: [None; LISTS],
                counts: [0; LISTS],
                cached: 0,
                cached_bytes: 0,
                quota: 0,
            }),
            contended: AtomicUsize::new(0),
        }
    }

    /// Takes the lock, counting a wait.
    #[inline]
    pub(crate) fn lock(&self) -> Held<'_, P> {
        if !self.lock.try_lock() {
            self.lock.lock();
            let n = self.contended.load(Ordering::Relaxed);
            self.contended.store(n + 1, Ordering::Relaxed);
        }
        Held { region: self }
    }

    /// The lock itself, for the fork guard (`CommonAllocator::lock_all`).
    pub(crate) fn raw_lock(&self) -> &RawSpinLock {
        &self.lock
    }

    /// Takes the lock if it is free.
    #[inline]
    pub(crate) fn try_lock(&self) -> Option<Held<'_, P>> {
        self.lock.try_lock().then(|| Held { region: self })
    }

    /// Lock acquisitions that had to wait.
    pub(crate) fn contended(&self) -> usize {
        self.contended.load(Ordering::Relaxed)
    }

    /// A block of a small region, from its runs.
    #[inline]
    pub(crate) fn alloc_small(&self) -> Result<NonNull<u8>, AllocError> {
        self.lock().take_small().ok_or(AllocError)
    }

    /// Frees a block of a small region into its run.
    ///
    /// # Safety
    ///
    /// `ptr` is a live block of this region, not used afterwards.
    #[inline]
    pub(crate) unsafe fn free_small(&self, ptr: NonNull<u8>, hook: MisuseHook) {
        let mut held = self.lock();
        if cfg!(debug_assertions) && !held.check_small(ptr, hook) {
            return;
        }
        // SAFETY: the caller's contract.
        unsafe { held.give_small(ptr) };
    }
}

/// Takes a quantum from the shared budget, if one is left.
fn take_quantum(budget: &AtomicUsize) -> bool {
    budget
        .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |b| {
            b.checked_sub(QUANTUM)
        })
        .is_ok()
}

impl<P: PageSource> State<P> {
    /// A block of a small region from its runs; `None` when no run can be had.
    #[inline]
    pub(crate) fn take_small(&mut self) -> Option<NonNull<u8>> {
        let pages = self.space.pages().expect("a region's space has a source");
        self.runs.take(pages)
    }

    /// Up to `want` blocks of a small region as a chain linked through their first
    /// words; its first block and length (0: no run could be had).
    #[inline]
    pub(crate) fn take_small_chain(&mut self, want: usize) -> (*mut u8, usize) {
        let pages = self.space.pages().expect("a region's space has a source");
        self.runs.take_chain(pages, want)
    }

    /// Gives a block of a small region back to its run.
    ///
    /// # Safety
    ///
    /// `ptr` is a block `take_small` handed out, given back once.
    #[inline]
    pub(crate) unsafe fn give_small(&mut self, ptr: NonNull<u8>) {
        let pages = self.space.pages().expect("a region's space has a source");
        // SAFETY: the caller's contract.
        unsafe { self.runs.give(ptr, pages) }
    }

    /// Makes a small region's empty runs idle; returns their bytes.
    pub(crate) fn trim_runs(&mut self) -> usize {
        let pages = self.space.pages().expect("a region's space has a source");
        self.runs.trim(pages)
    }

    /// Takes a block off list `list`, of `block`-byte blocks, giving budget back
    /// when the region holds much more than its lists use.
    #[inline]
    pub(crate) fn pop(
        &mut self,
        list: usize,
        block: usize,
        budget: &AtomicUsize,
    ) -> Option<NonNull<u8>> {
        let b = self.free[list]?;
        // SAFETY: a block on a list is a live block of the space with its link in its
        // first word (the lists' invariant).
        self.free[list] = unsafe { b.cast::<Option<NonNull<u8>>>().read() };
        self.counts[list] -= 1;
        self.cached -= 1;
        self.cached_bytes -= block;
        // SAFETY: every block holds at least 24 bytes (the space's smallest).
        unsafe { b.cast::<usize>().add(1).write(0) };
        if self.quota - self.cached_bytes >= 2 * QUANTUM {
            self.quota -= QUANTUM;
            budget.fetch_add(QUANTUM, Ordering::Relaxed);
        }
        Some(b)
    }

    /// Puts a freed block of `block` bytes on list `list` while the budget allows,
    /// else gives it back to the space.
    ///
    /// # Safety
    ///
    /// `ptr` is a live block of the space of at least `block` bytes, given up by the
    /// caller; `list` holds blocks of `block` bytes.
    #[inline]
    pub(crate) unsafe fn give(
        &mut self,
        ptr: NonNull<u8>,
        list: usize,
        block: usize,
        budget: &AtomicUsize,
    ) {
        if self.cached_bytes + block > self.quota {
            if block > QUANTUM || !take_quantum(budget) {
                let layout = Layout::from_size_align(block, SMALL_ALIGN).expect("a list's size");
                // SAFETY: the caller's contract.
                unsafe { self.space.dealloc(ptr, layout) };
                return;
            }
            self.quota += QUANTUM;
        }
        // SAFETY: a live block of at least 24 bytes, given up by the caller: its
        // first two words are ours.
        unsafe {
            ptr.cast::<Option<NonNull<u8>>>().write(self.free[list]);
            ptr.cast::<usize>().add(1).write(FREED);
        }
        self.free[list] = Some(ptr);
        self.counts[list] += 1;
        self.cached += 1;
        self.cached_bytes += block;
    }

    /// Whether `ptr`, which the region map gives to this small region, may be freed
    /// in it (debug builds): a block out of one of its runs. Reports the misuse
    /// otherwise.
    pub(crate) fn check_small(&self, ptr: NonNull<u8>, hook: MisuseHook) -> bool {
        // SAFETY: the map gives `ptr`'s granule to this region (the callers check it
        // in debug builds) and its lock is held.
        match unsafe { self.runs.probe(ptr) } {
            Ok(()) => true,
            Err(misuse) => {
                hook(&misuse);
                false
            }
        }
    }

    /// Whether `ptr`, a live block of the space, is on a list: it holds the mark
    /// (one read), and a walk of the lists finds it (only then).
    #[inline]
    pub(crate) fn listed_with_mark(&self, ptr: NonNull<u8>) -> bool {
        // SAFETY: a live block of the space holds at least 24 bytes.
        let marked = unsafe { ptr.cast::<usize>().add(1).read() } == FREED;
        marked && self.listed().any(|b| b == ptr)
    }

    /// The blocks on the lists.
    pub(crate) fn listed(&self) -> impl Iterator<Item = NonNull<u8>> + '_ {
        (0..LISTS).flat_map(move |list| {
            let mut next = self.free[list];
            (0..self.counts[list]).map_while(move |_| {
                let block = next?;
                // SAFETY: a listed block holds its link in its first word.
                next = unsafe { block.cast::<Option<NonNull<u8>>>().read() };
                Some(block)
            })
        })
    }

    /// Blocks on the lists.
    pub(crate) fn cached(&self) -> usize {
        self.cached
    }

    /// Bytes of the blocks on the lists, at their lists' sizes.
    pub(crate) fn cached_bytes(&self) -> usize {
        self.cached_bytes
    }

    /// Gives every listed block back to the space and the quota to the budget;
    /// returns the bytes of blocks given back. `size(list)` is each list's block size.
    pub(crate) fn flush(&mut self, size: impl Fn(usize) -> usize, budget: &AtomicUsize) -> usize {
        let mut freed = 0;
        for list in 0..LISTS {
            let block = size(list);
            let layout = Layout::from_size_align(block.max(1), SMALL_ALIGN).expect("a list's size");
            while let Some(b) = self.free[list] {
                // SAFETY: a listed block: live in the space, its link in its first word.
                unsafe {
                    self.free[list] = b.cast::<Option<NonNull<u8>>>().read();
                    self.space.dealloc(b, layout);
                }
                self.counts[list] -= 1;
                self.cached -= 1;
                self.cached_bytes -= block;
                freed += block;
            }
        }
        budget.fetch_add(core::mem::take(&mut self.quota), Ordering::Relaxed);
        freed
    }

    /// The space's figures.
    pub(crate) fn space_stats(&self) -> SpaceStats {
        self.space.stats()
    }
}

impl<P: PageSource> Drop for State<P> {
    fn drop(&mut self) {
        let pages = self.space.pages().expect("a region's space has a source");
        // SAFETY: the region goes with the allocator: no block is used again.
        unsafe { self.runs.release_all(pages) };
    }
}
