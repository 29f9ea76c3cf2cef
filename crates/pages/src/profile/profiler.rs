//! [`Profiler`]: the table, its lock and filter, the draw, and the dump's entry.

use core::cell::UnsafeCell;
use core::fmt;
use core::mem::size_of;
use core::ptr::NonNull;
use core::sync::atomic::{AtomicU8, AtomicU32, AtomicU64, Ordering};

use bento_align::Alignment;

use super::config::{ProfileConfig, ProfileStats};
use super::pprof;
use super::table::{Entry, Table};
use crate::guard::{Label, Trace};
use crate::lock::RawSpinLock;
use crate::{PageError, PageSource, SystemPages};

/// A sampled allocation profile of live blocks: a fixed table in one reservation
/// of the system's pages, a lock, and the game's current frame and phase. A
/// profiler lives for the program. The allocators that feed it (bento-heap's
/// `profile`, the common allocator's `CommonConfig::profile`, bento-malloc's
/// `BENTO_PROF`) count bytes down per thread and call [`record`](Self::record) for
/// the allocation the draw picks and [`forget`](Self::forget) for the free of a
/// block it may hold ([`may_hold`](Self::may_hold), a filter of a few loads).
///
/// ```
/// use core::alloc::Layout;
/// use bento_pages::{Label, ProfileConfig, Profiler, Trace};
///
/// let profiler = Profiler::new(ProfileConfig::DEFAULT.every(4096)).unwrap();
/// profiler.set_frame(12, Some("level 3"));
/// let block = Box::new([0u8; 64 << 10]);
/// let p = core::ptr::NonNull::from(&*block).cast::<u8>();
/// profiler.record(p, 64 << 10, Label::default(), &Trace::EMPTY);
/// assert!(profiler.may_hold(p));
/// let mut dump = Vec::new();
/// profiler.write_pprof(false, &mut |bytes| dump.extend_from_slice(bytes));
/// assert!(!dump.is_empty());
/// assert!(profiler.forget(p));
/// assert_eq!(profiler.stats().live_samples, 0);
/// ```
pub struct Profiler {
    every: usize,
    backtrace: bool,
    lock: RawSpinLock,
    // Invariant: reached only under `lock`.
    state: UnsafeCell<State>,
    /// A counter per hash bucket of the samples' addresses (changed under the lock):
    /// a free whose counter is 0 needs no lock.
    filter: NonNull<AtomicU8>,
    mark: AtomicU32,
    rng: AtomicU64,
    sampled: AtomicU64,
    dropped: AtomicU64,
    /// The countdown of [`count`](Profiler::count), for callers with none per thread.
    left: AtomicU64,
}

/// What the lock guards: the table, and the frame and phase new samples carry.
struct State {
    table: Table,
    frame: u64,
    phase: Option<&'static str>,
}

// SAFETY: the state is reached only under the lock; the filter and the rest are
// atomics or read-only after `new`.
unsafe impl Sync for Profiler {}
// SAFETY: as above.
unsafe impl Send for Profiler {}

impl fmt::Debug for Profiler {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Profiler")
            .field("every", &self.every)
            .field("stats", &self.stats())
            .finish_non_exhaustive()
    }
}

/// Filter counters: 2^16 bytes.
const FILTER: usize = 1 << 16;

/// Releases the profiler's lock when dropped.
struct Held<'a>(&'a Profiler);

impl Drop for Held<'_> {
    fn drop(&mut self) {
        // SAFETY: made only by `Profiler::hold`, which took the lock.
        unsafe { self.0.lock.unlock() }
    }
}

impl Held<'_> {
    fn state(&mut self) -> &mut State {
        // SAFETY: the lock is held (the field's invariant), and this `&mut` borrows
        // the guard.
        unsafe { &mut *self.0.state.get() }
    }
}

impl Profiler {
    /// Reserves a profiler of `config`'s shape (its table is committed as it
    /// fills). It lives until the program ends.
    ///
    /// # Errors
    ///
    /// The [`PageError`] of a refused reservation.
    pub fn new(config: ProfileConfig) -> Result<&'static Self, PageError> {
        let config = config.every(config.every).capacity(config.capacity);
        let pages = SystemPages::new();
        let page = pages.page_size();
        let slots = (config.capacity as usize * 2).next_power_of_two();
        let filter_at = size_of::<Profiler>().next_multiple_of(64);
        let index_at = filter_at + FILTER;
        let entries_at = (index_at + slots * 4).next_multiple_of(64);
        let bytes =
            (entries_at + config.capacity as usize * size_of::<Entry>()).next_multiple_of(page);
        let align = Alignment::new(page).expect("the page size is a power of two");
        let base = pages.reserve(bytes, align)?;
        // SAFETY: the whole reservation, fresh (commit is implicit: first touch).
        if let Err(e) = unsafe { pages.commit(base, bytes) } {
            // SAFETY: the whole reservation, unused.
            unsafe { pages.release(base, bytes) };
            return Err(e);
        }
        let me = base.cast::<Profiler>();
        // SAFETY: the reservation holds the profiler, the filter, the index and the
        // entries (sized above), each aligned by the page-aligned base; its pages
        // read as zero: an empty filter and index.
        unsafe {
            let table = Table::new(
                base.add(index_at).cast(),
                slots,
                base.add(entries_at).cast(),
                config.capacity,
            );
            me.write(Profiler {
                every: config.every,
                backtrace: config.backtrace,
                lock: RawSpinLock::new(),
                state: UnsafeCell::new(State {
                    table,
                    frame: 0,
                    phase: None,
                }),
                filter: base.add(filter_at).cast(),
                mark: AtomicU32::new(0),
                rng: AtomicU64::new(
                    (base.addr().get() as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1,
                ),
                sampled: AtomicU64::new(0),
                dropped: AtomicU64::new(0),
                left: AtomicU64::new(config.every as u64),
            });
            Ok(me.as_ref())
        }
    }

    fn hold(&self) -> Held<'_> {
        self.lock.lock();
        Held(self)
    }

    /// The mean bytes between samples.
    #[must_use]
    pub fn every(&self) -> usize {
        self.every
    }

    /// Whether samples keep their stacks.
    #[must_use]
    pub fn backtrace(&self) -> bool {
        self.backtrace
    }

    /// The bytes to allocate until the next sample: an exponential draw of mean
    /// [`every`](Self::every) (at least 1).
    #[must_use]
    pub fn draw(&self) -> usize {
        let mut x = self.rng.load(Ordering::Relaxed);
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.rng.store(x, Ordering::Relaxed);
        // A uniform in (0, 1] from the top 53 bits.
        let u = ((x.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 11) + 1) as f64 / (1u64 << 53) as f64;
        ((-u.ln() * self.every as f64) as usize).max(1)
    }

    /// The profiler's own countdown, for a caller without one per thread: counts an
    /// allocation of `size` bytes, true when the sample falls in it.
    pub fn count(&self, size: usize) -> bool {
        let size = size as u64;
        let left = self.left.fetch_sub(size.min(1 << 62), Ordering::Relaxed);
        if left > size {
            return false;
        }
        self.left.store(self.draw() as u64, Ordering::Relaxed);
        true
    }

    /// Sets the game's current frame and phase, which samples taken from now on
    /// carry (a level's name, say: "what level 7 left behind").
    pub fn set_frame(&self, frame: u64, phase: Option<&'static str>) {
        let mut held = self.hold();
        let state = held.state();
        state.frame = frame;
        state.phase = phase;
    }

    /// Starts a new generation: [`write_pprof`](Self::write_pprof) with `since_mark`
    /// then shows only blocks allocated after this call. Returns the mark's number.
    pub fn mark(&self) -> u32 {
        self.mark.fetch_add(1, Ordering::Relaxed) + 1
    }

    /// The filter's counter of the blocks whose address hashes as `addr`'s.
    fn counter(&self, addr: usize) -> &AtomicU8 {
        let h = (addr >> 4).wrapping_mul(0x9E37_79B9_7F4A_7C15_u64 as usize) >> 24;
        // SAFETY: `h & (FILTER - 1) < FILTER`: inside the filter, initialised (zero
        // pages).
        unsafe { self.filter.add(h & (FILTER - 1)).as_ref() }
    }

    /// One more sample under `addr`'s counter (a full one stays full: "maybe").
    fn count_in(&self, addr: usize) {
        let c = self.counter(addr);
        let n = c.load(Ordering::Relaxed);
        if n < u8::MAX {
            c.store(n + 1, Ordering::Relaxed);
        }
    }

    /// One sample fewer under `addr`'s counter (a full one is never lowered).
    fn count_out(&self, addr: usize) {
        let c = self.counter(addr);
        let n = c.load(Ordering::Relaxed);
        if n > 0 && n < u8::MAX {
            c.store(n - 1, Ordering::Relaxed);
        }
    }

    /// Whether the block at `ptr` may be a sample (false: surely not): a hash and a
    /// load, no lock. A free calls [`forget`](Self::forget) only when it says yes.
    #[inline]
    #[must_use]
    pub fn may_hold(&self, ptr: NonNull<u8>) -> bool {
        self.counter(ptr.addr().get()).load(Ordering::Relaxed) != 0
    }

    /// Records a sampled block of `size` bytes at `ptr` (the allocation a draw
    /// picked), with its label and site; the current frame, phase and mark go with
    /// it. A full table drops the sample (counted).
    pub fn record(&self, ptr: NonNull<u8>, size: usize, label: Label, trace: &Trace) {
        self.sampled.fetch_add(1, Ordering::Relaxed);
        let mut held = self.hold();
        let state = held.state();
        let entry = Entry {
            addr: ptr.addr().get(),
            size,
            weight: weight(size, self.every),
            frame: state.frame,
            phase: state.phase,
            mark: self.mark.load(Ordering::Relaxed),
            label,
            trace: *trace,
        };
        match state.table.insert(entry) {
            // Counted under the lock: the counters change only with it held.
            Some(true) => self.count_in(ptr.addr().get()),
            Some(false) => {}
            None => {
                self.dropped.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// Forgets the sample of the block at `ptr` (its free); false when none was held.
    pub fn forget(&self, ptr: NonNull<u8>) -> bool {
        let mut held = self.hold();
        let found = held.state().table.remove(ptr.addr().get());
        if found {
            self.count_out(ptr.addr().get());
        }
        found
    }

    /// Forgets every sample whose label names `owner` (a heap's discard).
    pub fn forget_owned(&self, owner: usize) {
        let mut held = self.hold();
        held.state()
            .table
            .retain(|e| e.label.owner != owner, |addr| self.count_out(addr));
    }

    /// Takes the profiler's lock for a `fork` (a child forked while another thread
    /// held it would wait forever); nothing is taken under it.
    /// [`unlock_after_fork`](Self::unlock_after_fork) gives it back.
    pub fn lock_for_fork(&self) {
        self.lock.lock();
    }

    /// Gives back the lock [`lock_for_fork`](Self::lock_for_fork) took.
    ///
    /// # Safety
    ///
    /// This thread took it with `lock_for_fork`, or is a child's only thread forked
    /// while it was held.
    pub unsafe fn unlock_after_fork(&self) {
        // SAFETY: the caller's contract.
        unsafe { self.lock.unlock() }
    }

    /// The figures.
    #[must_use]
    pub fn stats(&self) -> ProfileStats {
        let mut held = self.hold();
        let table = &held.state().table;
        let mut estimated = 0f64;
        table.for_each(|e| estimated += e.weight * e.size as f64);
        ProfileStats {
            live_samples: table.len(),
            sampled: self.sampled.load(Ordering::Relaxed),
            dropped: self.dropped.load(Ordering::Relaxed),
            estimated_live_bytes: estimated as u64,
            marks: self.mark.load(Ordering::Relaxed),
        }
    }

    /// The estimated live bytes of the samples `pick` keeps (each sample's size
    /// times its weight), given each one's label and phase: per heap, tag or level.
    ///
    /// ```
    /// use bento_pages::{Label, ProfileConfig, Profiler, Trace};
    ///
    /// let profiler = Profiler::new(ProfileConfig::DEFAULT.every(4096)).unwrap();
    /// let block = vec![0u8; 1 << 20];
    /// let label = Label { tag: Some("meshes"), ..Label::default() };
    /// profiler.record(core::ptr::NonNull::from(&block[0]), 1 << 20, label, &Trace::EMPTY);
    /// // A block far larger than the mean is sampled surely: its weight is 1.
    /// assert_eq!(profiler.estimate(|l, _| l.tag == Some("meshes")), 1 << 20);
    /// # profiler.forget(core::ptr::NonNull::from(&block[0]));
    /// ```
    pub fn estimate(&self, mut pick: impl FnMut(&Label, Option<&'static str>) -> bool) -> u64 {
        let mut held = self.hold();
        let mut estimated = 0f64;
        held.state().table.for_each(|e| {
            if pick(&e.label, e.phase) {
                estimated += e.weight * e.size as f64;
            }
        });
        estimated as u64
    }

    /// Writes the live samples as a pprof heap profile (uncompressed `profile.proto`,
    /// which `go tool pprof` reads as it reads a gzipped one) through `out`, piece by
    /// piece, allocating nothing: with `since_mark`, only the blocks allocated since
    /// the last [`mark`](Self::mark). Values: `inuse_objects` and `inuse_space`, each
    /// sample weighted; the stack, leaf first: the frames (named by the nearest
    /// exported symbol where there is one), the caller's source location, the tag,
    /// the heap; labels `heap`, `tag`, `phase`, and `frame` and `bytes` as numbers.
    pub fn write_pprof(&self, since_mark: bool, out: &mut dyn FnMut(&[u8])) {
        let mark = self.mark.load(Ordering::Relaxed);
        let mut held = self.hold();
        pprof::write(
            &held.state().table,
            self.every,
            since_mark.then_some(mark),
            out,
        );
    }
}

/// The inverse probability that a block of `size` bytes is sampled at a mean of
/// `every` bytes.
fn weight(size: usize, every: usize) -> f64 {
    let p = 1.0 - (-(size as f64) / every as f64).exp();
    if p > 0.0 { 1.0 / p } else { 1.0 }
}
