//! Pool, TypedPool, GrowingPool and SharedPool: model runs, the debug checks, page
//! stats, interop, and a threaded stress of the shared pool.

use core::alloc::Layout;
use core::cell::{Cell, RefCell};
use core::mem::MaybeUninit;
use core::num::NonZeroU32;
use core::ptr::NonNull;
use std::sync::atomic::{AtomicPtr, Ordering};

use allocator_api2::alloc::Allocator;
use allocator_api2::boxed::Box;
use allocator_api2::vec::Vec as ApiVec;
use bento_align::Alignment;
use bento_pages::{FaultyPages, HeapPages, Metered, PageSource};
use bento_primitives::{
    GROWING_POOL_COMMIT_STEP, GrowingPool, Misuse, Pool, PoolBox, PoolReport,
    SHARED_POOL_CACHE_BATCH, SharedPool, SharedPoolCache, TypedPool,
};
use bento_testkit::{
    Api02, Caps, End, Ops, SizeGen, Stats, Target, cases, forward_to_api02, run, seeded,
};

use crate::Buffer;

thread_local! {
    /// The misuse the debug checks reported on this thread, as messages.
    static SEEN: RefCell<Vec<String>> = const { RefCell::new(Vec::new()) };
    /// The most chunks in use a model run's validations saw.
    static PEAK_IN_USE: Cell<usize> = const { Cell::new(0) };
}

/// The stats of a pool's report, noting the peak in use.
fn stats(report: PoolReport) -> Stats {
    PEAK_IN_USE.with(|p| p.set(p.get().max(report.in_use)));
    Stats {
        live_blocks: Some(report.in_use),
        live_bytes: None,
    }
}

/// A misuse hook that records instead of panicking.
fn record(misuse: &Misuse<'_>) {
    SEEN.with(|s| s.borrow_mut().push(misuse.to_string()));
}

/// The misuse recorded since the last call.
fn seen() -> Vec<String> {
    SEEN.with(|s| s.take())
}

/// Asserts one misuse was recorded and its message contains `what`.
#[track_caller]
fn assert_seen(what: &str) {
    let seen = seen();
    assert!(
        seen.len() == 1 && seen[0].contains(what),
        "expected one report containing {what:?}, got {seen:?}"
    );
}

// ---------------------------------------------------------------------------------------
// Pool

#[test]
fn creation_touches_no_chunk_and_chunks_come_back_last_freed_first() {
    let mut buf = Buffer::pages(1);
    for b in buf.bytes().iter_mut() {
        b.write(0xAB);
    }
    let bytes = buf.bytes();
    let base_addr = bytes.as_ptr().addr();
    let pool = Pool::new(bytes, Layout::new::<[u8; 64]>()).unwrap();
    assert_eq!(
        (pool.capacity(), pool.in_use(), pool.available()),
        (64, 0, 64)
    );
    let a = pool.alloc().unwrap();
    let b = pool.alloc().unwrap();
    assert_eq!(a.addr().get(), base_addr, "the buffer is 4096-aligned");
    // Chunk 0 carries the pool's provenance, the whole buffer.
    let base = a;
    // SAFETY: chunks 2.. of the buffer, which the pool has not handed out, read as the
    // bytes the test wrote before creating it.
    let untouched = (128..4096).all(|i| unsafe { base.add(i).read() } == 0xAB);
    assert!(
        untouched,
        "creating the pool or taking two chunks wrote past them"
    );
    // SAFETY: inside the buffer.
    assert_eq!(b, unsafe { base.add(64) });
    // SAFETY: live chunks of `pool`, each freed once.
    unsafe {
        pool.free(a);
        pool.free(b);
    }
    assert_eq!(pool.alloc(), Some(b));
    assert_eq!(pool.alloc(), Some(a));
    let c = pool.alloc().unwrap();
    // SAFETY: inside the buffer.
    let third = unsafe { base.add(128) };
    assert_eq!(c, third, "then the high-water mark");
    // SAFETY: live chunks, freed once.
    unsafe {
        for p in [a, b, c] {
            pool.free(p);
        }
    }
    let report = pool.validate().unwrap();
    assert_eq!((report.free_listed, report.untouched), (3, 61));
}

#[test]
fn every_chunk_is_handed_out_once_then_none() {
    let mut buf = Buffer::pages(1);
    let pool = Pool::new(buf.bytes(), Layout::from_size_align(48, 16).unwrap()).unwrap();
    let mut chunks: Vec<_> = core::iter::from_fn(|| pool.alloc()).collect();
    assert_eq!(chunks.len(), 4096 / 48);
    assert_eq!(pool.available(), 0);
    chunks.sort();
    for pair in chunks.windows(2) {
        assert!(
            pair[1].addr().get() - pair[0].addr().get() >= 48,
            "chunks overlap"
        );
    }
    assert!(chunks.iter().all(|c| c.addr().get() % 16 == 0));
    for c in chunks {
        // SAFETY: live chunks, freed once.
        unsafe { pool.free(c) };
    }
    assert_eq!(pool.validate().unwrap().free_listed, 4096 / 48);
}

#[test]
fn bad_pool_shapes_are_errors() {
    let mut small = [MaybeUninit::uninit(); 7];
    assert!(Pool::new(&mut small, Layout::new::<u8>()).is_err());
    let mut buf = Buffer::pages(1);
    assert!(Pool::new(buf.bytes(), Layout::new::<[u8; 4097]>()).is_err());
    // An alignment above the buffer's: the first chunk starts further in, or none fits.
    let big = Layout::from_size_align(64, 8192).unwrap();
    let mut two = Buffer::pages(3);
    let pool = Pool::new(two.bytes(), big).unwrap();
    let c = pool.alloc().unwrap();
    assert_eq!(c.addr().get() % 8192, 0);
    // SAFETY: a live chunk, freed once.
    unsafe { pool.free(c) };
}

#[test]
fn pool_model() {
    // Four chunks, so that programs fill the pool as well.
    let mut buf = Buffer::pages(1);
    let pool = Pool::new(&mut buf.bytes()[..4 * 96], Layout::new::<[u8; 96]>()).unwrap();
    // Sizes around the chunk size (96): the ones above it must fail.
    let caps = Caps::default()
        .with_sizes(SizeGen::new(200).with_boundaries(&[96]))
        .with_max_align(Alignment::new(32).unwrap())
        .with_max_live(cases(200, 20))
        .with_validate_every(3);
    let r = seeded(cases(200, 1), |u| {
        run(
            &mut Api02::with_validate(&&pool, |p| {
                p.validate().map(stats).map_err(|e| e.to_string())
            }),
            &caps,
            u,
        )
    });
    if !cfg!(miri) {
        assert!(
            r.allocs > 1000 && r.allocs_failed > 0 && r.resizes_in_place > 0,
            "{r:?}"
        );
        assert_eq!(PEAK_IN_USE.get(), 4, "never filled: {r:?}");
    }
    assert_eq!(pool.in_use(), 0);
}

#[test]
fn pool_interop_box_and_vec() {
    let mut buf = Buffer::pages(1);
    let pool = Pool::new(buf.bytes(), Layout::new::<[u64; 32]>()).unwrap();
    let b = Box::new_in([7u64; 4], &pool);
    let mut v: ApiVec<u64, &Pool<'_>> = ApiVec::with_capacity_in(8, &pool);
    v.extend(0..32);
    assert_eq!(v.iter().sum::<u64>(), 31 * 32 / 2);
    assert!(v.try_reserve(1).is_err(), "33 u64s do not fit a chunk");
    v.shrink_to_fit();
    assert_eq!(b.iter().sum::<u64>(), 28);
    assert_eq!(pool.in_use(), 2);
    drop((b, v));
    assert_eq!(pool.in_use(), 0);
    let map_pool_buf = &mut Buffer::pages(4);
    let map_pool = Pool::new(
        map_pool_buf.bytes(),
        Layout::from_size_align(2048, 16).unwrap(), // hashbrown aligns its table to 16
    )
    .unwrap();
    let mut map = hashbrown::HashMap::new_in(&map_pool);
    for i in 0..40u32 {
        map.insert(i, i * i);
    }
    assert_eq!(map[&7], 49);
    assert_eq!(map_pool.in_use(), 1);
}

#[cfg(debug_assertions)]
#[test]
fn pool_debug_checks_report_each_misuse_and_change_nothing() {
    let mut buf = Buffer::pages(1);
    let mut pool = Pool::new(buf.bytes(), Layout::new::<[u8; 32]>()).unwrap();
    pool.set_misuse_hook(record);
    let a = pool.alloc().unwrap();
    let b = pool.alloc().unwrap();
    let before = pool.validate().unwrap();
    let outside = 0u64;
    // SAFETY: the misuse under test (this free and the ones below); the debug checks refuse it
    // before anything is written.
    unsafe { pool.free(NonNull::from(&outside).cast()) };
    assert_seen("is not in this allocator's memory");
    // SAFETY: as above; the debug checks refuse this misuse before any write.
    unsafe { pool.free(a.add(8)) };
    assert_seen("points inside the block");
    // SAFETY: as above; the debug checks refuse this misuse before any write.
    unsafe { pool.free(a.add(5 * 32)) };
    assert_seen("never handed out");
    assert_eq!(pool.validate().unwrap(), before);

    // SAFETY: `a` is live; then freed again (the misuse).
    unsafe { pool.free(a) };
    // SAFETY: as above; the debug checks refuse this misuse before any write.
    unsafe { pool.free(a) };
    assert_seen("double free");
    assert_eq!(pool.validate().unwrap().free_listed, 1);

    // A write after free: `validate` sees it, and so does the next alloc.
    // SAFETY: `a` is free; the write is the misuse under test (to our own buffer).
    unsafe { a.add(10).write(0) };
    assert!(
        pool.validate()
            .unwrap_err()
            .to_string()
            .contains("offset 10")
    );
    assert_eq!(pool.alloc(), Some(a));
    assert_seen("write after free");

    // An overwritten link: the rest of the list is dropped, never followed.
    // SAFETY: `b` and then `a` live, freed once each; then `a`'s link is overwritten.
    unsafe {
        pool.free(b);
        pool.free(a);
        a.cast::<usize>().write(0x1234);
    }
    let c = pool.alloc().unwrap();
    assert_seen("the rest of the free list is dropped");
    assert_ne!(c, a);
    assert_ne!(c, b);
    // SAFETY: `c` is live.
    unsafe { pool.free(c) };

    // A wrong layout through the `Allocator` interface.
    let d = (&pool).allocate(Layout::new::<u64>()).unwrap().cast::<u8>();
    // SAFETY: the misuse under test: a layout larger than any chunk.
    unsafe { (&pool).deallocate(d, Layout::new::<[u8; 64]>()) };
    assert_seen("which a block of 32 bytes");
    // SAFETY: `d` is live, with its real layout.
    unsafe { (&pool).deallocate(d, Layout::new::<u64>()) };
    assert!(seen().is_empty());
}

#[cfg(debug_assertions)]
#[test]
fn dropping_a_pool_reports_the_leak_list() {
    let mut buf = Buffer::pages(1);
    let mut pool = Pool::new(buf.bytes(), Layout::new::<[u8; 16]>()).unwrap();
    pool.set_misuse_hook(record);
    let chunks: Vec<_> = (0..5).map(|_| pool.alloc().unwrap()).collect();
    // SAFETY: live chunks, freed once.
    unsafe {
        pool.free(chunks[3]);
        pool.free(chunks[0]);
    }
    let live: Vec<_> = pool.live_chunks().iter().collect();
    assert_eq!(live, [chunks[1], chunks[2], chunks[4]]);
    drop(pool);
    let seen = seen();
    assert_eq!(seen.len(), 1, "{seen:?}");
    assert!(
        seen[0].contains("3 chunk(s) in use")
            && seen[0].contains(&format!("{:p} {:p} {:p}", chunks[1], chunks[2], chunks[4])),
        "{seen:?}"
    );
}

#[cfg(debug_assertions)]
#[test]
#[should_panic(expected = "double free")]
fn the_default_hook_panics() {
    let mut buf = Buffer::pages(1);
    let pool = Pool::new(buf.bytes(), Layout::new::<u64>()).unwrap();
    let a = pool.alloc().unwrap();
    // SAFETY: the double free under test.
    unsafe {
        pool.free(a);
        pool.free(a);
    }
}

#[cfg(debug_assertions)]
#[test]
fn freed_chunks_are_poisoned() {
    let mut buf = Buffer::pages(1);
    let pool = Pool::new(buf.bytes(), Layout::new::<[u8; 32]>()).unwrap();
    let a = pool.alloc().unwrap();
    // SAFETY: `a` is live, then freed; reading our own buffer after that is the check.
    unsafe {
        a.write_bytes(0x11, 32);
        pool.free(a);
        assert!((8..32).all(|i| a.add(i).read() == 0xDD));
    }
}

// ---------------------------------------------------------------------------------------
// TypedPool

#[test]
fn values_with_padding_and_uninit_bytes_come_and_go() {
    // The debug free check must not read a chunk in use: these hold uninitialised
    // bytes (padding, `MaybeUninit`), which Miri reports if read.
    let mut buf = Buffer::pages(1);
    let pool = TypedPool::<(u32, u8)>::new(buf.bytes()).unwrap();
    let a = pool.alloc((1, 2)).ok().unwrap();
    let b = pool.alloc((3, 4)).ok().unwrap();
    assert_eq!((a.0 + b.0, a.1 + b.1), (4, 6));
    drop((a, b));
    let mut buf = Buffer::pages(1);
    let pool = TypedPool::<MaybeUninit<[u64; 4]>>::new(buf.bytes()).unwrap();
    drop(pool.alloc(MaybeUninit::uninit()).ok().unwrap());
    assert_eq!(pool.validate().unwrap().in_use, 0);
}

#[test]
fn a_value_whose_drop_panics_still_frees_its_chunk() {
    struct Bomb;
    impl Drop for Bomb {
        fn drop(&mut self) {
            panic!("boom");
        }
    }
    let mut buf = Buffer::pages(1);
    let pool = TypedPool::<Bomb>::new(buf.bytes()).unwrap();
    let b = pool.alloc(Bomb).ok().unwrap();
    let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| drop(b)));
    assert!(caught.is_err());
    assert_eq!(pool.in_use(), 0);
}

/// A `TypedPool` of 64-byte values as a testkit target: every block is one value,
/// resized in place within it.
struct TypedTarget<'p, 'buf>(&'p TypedPool<'buf, [u8; 64]>);

impl Target for TypedTarget<'_, '_> {
    fn allocate(&mut self, _: End, layout: Layout, _zeroed: bool) -> Option<NonNull<[u8]>> {
        if layout.size() == 0 {
            let p = NonNull::without_provenance(layout.align().try_into().unwrap());
            return Some(NonNull::slice_from_raw_parts(p, 0));
        }
        if layout.size() > 64 || layout.align() > 8 {
            return None;
        }
        // The value is zeroes, so the block is zeroed whether asked or not.
        let b = self.0.alloc([0; 64]).ok()?;
        Some(NonNull::slice_from_raw_parts(
            PoolBox::into_raw(b).cast(),
            64,
        ))
    }

    unsafe fn deallocate(&mut self, _: End, ptr: NonNull<u8>, layout: Layout) {
        if layout.size() != 0 {
            // SAFETY: `ptr` came from `into_raw` on a box of this pool, freed once.
            drop(unsafe { PoolBox::from_raw(self.0, ptr.cast()) });
        }
    }

    unsafe fn grow(
        &mut self,
        _: End,
        ptr: NonNull<u8>,
        old: Layout,
        new: Layout,
        zeroed: bool,
    ) -> Option<NonNull<[u8]>> {
        if old.size() == 0 || new.size() > 64 || new.align() > 8 {
            return None;
        }
        if zeroed {
            // SAFETY: the block is 64 bytes; `[old, 64)` lies inside it (the block is
            // returned whole, so all of it past the old size reads as zero).
            unsafe { ptr.add(old.size()).write_bytes(0, 64 - old.size()) };
        }
        Some(NonNull::slice_from_raw_parts(ptr, 64))
    }

    unsafe fn shrink(
        &mut self,
        _: End,
        ptr: NonNull<u8>,
        old: Layout,
        new: Layout,
    ) -> Option<NonNull<[u8]>> {
        if new.size() == 0 || new.align() > 8 {
            return None;
        }
        let _ = old;
        Some(NonNull::slice_from_raw_parts(ptr, 64))
    }

    fn validate(&mut self) -> Result<Stats, String> {
        self.0.validate().map(stats).map_err(|e| e.to_string())
    }
}

#[test]
fn typed_pool_model() {
    let mut buf = Buffer::pages(1);
    let pool = TypedPool::<[u8; 64]>::new(&mut buf.bytes()[..4 * 64]).unwrap();
    let caps = Caps::default()
        .with_sizes(SizeGen::new(80).with_boundaries(&[64]))
        .with_max_align(Alignment::new(16).unwrap())
        .with_max_live(cases(200, 20))
        .with_validate_every(3);
    let r = seeded(cases(200, 1), |u| run(&mut TypedTarget(&pool), &caps, u));
    if !cfg!(miri) {
        assert!(
            r.allocs > 1000 && r.allocs_failed > 0 && r.resizes > 0,
            "{r:?}"
        );
        assert_eq!(PEAK_IN_USE.get(), 4, "never filled: {r:?}");
    }
    assert_eq!(pool.in_use(), 0);
}

// ---------------------------------------------------------------------------------------
// GrowingPool

type Faulty = FaultyPages<HeapPages>;

/// A `GrowingPool` as a testkit target: `trim` is `shrink`, `fail_next` injects
/// commit failures.
struct GrowingTarget<'a>(&'a GrowingPool<Faulty>);

impl Target for GrowingTarget<'_> {
    forward_to_api02!(|self, end| self.0);

    fn trim(&mut self) {
        let before = self.0.committed();
        let given = self.0.shrink();
        assert_eq!(self.0.committed(), before - given);
    }

    fn fail_next(&mut self, k: u32) {
        self.0.source().fail_commit(k as usize);
    }

    fn validate(&mut self) -> Result<Stats, String> {
        self.0.validate().map(stats).map_err(|e| e.to_string())
    }
}

#[test]
fn growing_pool_model_with_shrinks_and_commit_failures() {
    let pages = Faulty::new(HeapPages::new());
    let max = cases(2000, 200);
    let pool = GrowingPool::with_source(pages, Layout::new::<[u8; 200]>(), max).unwrap();
    let caps = Caps::default()
        .with_ops(Ops::TRIM | Ops::FAIL_NEXT)
        .with_sizes(SizeGen::new(300).with_boundaries(&[200]))
        .with_max_align(Alignment::new(16).unwrap())
        .with_max_live(cases(1000, 40))
        .with_validate_every(4);
    let r = seeded(cases(150, 1), |u| {
        pool.source().heal();
        run(&mut GrowingTarget(&pool), &caps, u)
    });
    if !cfg!(miri) {
        assert!(r.allocs > 1000 && r.allocs_failed > 0, "{r:?}");
        assert!(
            pool.source().injected() > 0,
            "no commit failure was injected"
        );
    }
    pool.source().heal();
    pool.shrink();
    assert_eq!(
        pool.committed(),
        0,
        "everything free: every page given back"
    );
}

#[test]
fn growing_pool_commits_as_it_grows_and_shrink_gives_whole_pages_back() {
    // Under Miri, where each debug free walks the free list, 1 KiB chunks: a sixteenth
    // of the chunks per commit step, so of the frees.
    let size = cases(64, 1024);
    // Chunks `0..keep` span two pages (6400 or 5120 bytes); `holes` are freed among them.
    let keep = cases(100, 5);
    let holes = [keep / 10, keep / 5];
    let pages = Metered::new(HeapPages::new());
    let layout = Layout::from_size_align(size, 8).unwrap();
    let pool = GrowingPool::with_source(&pages, layout, 10_000).unwrap();
    assert_eq!(pool.reserved(), (10_000 * size).div_ceil(4096) * 4096);
    assert_eq!((pool.committed(), pages.stats().committed), (0, 0));
    let step_chunks = GROWING_POOL_COMMIT_STEP / size;
    let mut chunks: Vec<_> = (0..step_chunks).map(|_| pool.alloc().unwrap()).collect();
    assert_eq!(
        pool.committed(),
        GROWING_POOL_COMMIT_STEP,
        "one step covers them"
    );
    chunks.push(pool.alloc().unwrap());
    assert_eq!(pool.committed(), 2 * GROWING_POOL_COMMIT_STEP);
    assert_eq!(pages.stats().committed, pool.committed());
    for (i, c) in chunks.iter().enumerate() {
        // SAFETY: live chunks of `size` bytes.
        unsafe { c.write_bytes(i as u8, size) };
    }
    // Free everything from chunk `keep` on (and the holes below): two pages stay.
    for c in chunks.drain(keep..) {
        // SAFETY: live chunks, freed once.
        unsafe { pool.free(c) };
    }
    for h in holes {
        // SAFETY: a live chunk, freed once.
        unsafe { pool.free(chunks[h]) };
    }
    let given = pool.shrink();
    assert_eq!(pool.committed(), 2 * 4096);
    assert_eq!(given, 2 * GROWING_POOL_COMMIT_STEP - 2 * 4096);
    assert_eq!(pages.stats().committed, 2 * 4096);
    let report = pool.validate().unwrap();
    assert_eq!((report.in_use, report.free_listed), (keep - 2, 2));
    for (i, c) in chunks.iter().enumerate() {
        if !holes.contains(&i) {
            // SAFETY: live chunks; the shrink left them alone.
            let last = unsafe { c.add(size - 1).read() };
            assert_eq!(last, i as u8, "chunk {i} changed");
        }
    }
    // Growing again: the sorted list first (the holes), then the high-water mark.
    assert_eq!(pool.alloc(), Some(chunks[holes[0]]));
    assert_eq!(pool.alloc(), Some(chunks[holes[1]]));
    let next = pool.alloc().unwrap();
    // SAFETY: chunk 0 and the chunk `keep` places on are both in the reservation.
    assert_eq!(next, unsafe { chunks[0].add(keep * size) });
    // SAFETY: a live chunk of `size` bytes.
    unsafe { next.write_bytes(1, size) };
    // SAFETY: live chunks, freed once.
    unsafe {
        pool.free(next);
        for c in chunks {
            pool.free(c);
        }
    }
    drop(pool);
    crate::assert_all_given_back(&pages);
}

#[test]
fn a_refused_commit_is_none_and_changes_nothing() {
    let pages = Faulty::new(HeapPages::new());
    let pool = GrowingPool::with_source(pages, Layout::new::<[u8; 4096]>(), 64).unwrap();
    let a = pool.alloc().unwrap();
    let before = pool.validate().unwrap();
    let held: Vec<_> = (1..16).map(|_| pool.alloc().unwrap()).collect();
    assert_eq!(pool.committed(), GROWING_POOL_COMMIT_STEP);
    // The step is refused, and then the single page as well.
    pool.source().fail_commits_from(0);
    assert_eq!(pool.alloc(), None);
    assert_eq!(pool.committed(), GROWING_POOL_COMMIT_STEP);
    // Only the step refused: the retry commits just the page needed.
    pool.source().heal();
    pool.source().fail_commit(0);
    let b = pool.alloc().unwrap();
    assert_eq!(pool.committed(), GROWING_POOL_COMMIT_STEP + 4096);
    // SAFETY: live chunks, freed once.
    unsafe {
        pool.free(b);
        for c in held {
            pool.free(c);
        }
    }
    pool.shrink();
    assert_eq!((pool.committed(), pool.validate().unwrap()), (4096, before));
    // SAFETY: live, freed once.
    unsafe { pool.free(a) };
}

#[cfg(debug_assertions)]
#[test]
fn a_panicking_leak_report_still_gives_the_memory_back() {
    let pages = Metered::new(HeapPages::new());
    let pool = GrowingPool::with_source(&pages, Layout::new::<u64>(), 100).unwrap();
    let _leaked = pool.alloc().unwrap();
    // The default hook panics on the leak.
    let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| drop(pool)));
    assert!(caught.is_err(), "the leak was not reported");
    let stats = pages.stats();
    assert_eq!((stats.committed, stats.reserved), (0, 0));
}

#[test]
fn growing_pool_bad_shapes_are_errors() {
    let pages = Faulty::new(HeapPages::new());
    assert!(GrowingPool::with_source(&pages, Layout::new::<u64>(), 0).is_err());
    assert!(GrowingPool::with_source(&pages, Layout::new::<u64>(), usize::MAX / 4).is_err());
    pages.fail_reserve(0);
    assert!(GrowingPool::with_source(&pages, Layout::new::<u64>(), 10).is_err());
    // A chunk aligned above the page: the reservation is aligned for it.
    let big = Layout::from_size_align(100, 2 * pages.page_size()).unwrap();
    let pool = GrowingPool::with_source(&pages, big, 3).unwrap();
    let c = pool.alloc().unwrap();
    assert_eq!(c.addr().get() % big.align(), 0);
    // SAFETY: live, freed once.
    unsafe { pool.free(c) };
}

// ---------------------------------------------------------------------------------------
// SharedPool

#[test]
fn shared_pool_single_thread_basics() {
    let mut buf = Buffer::pages(1);
    for b in buf.bytes().iter_mut() {
        b.write(0xAB);
    }
    let mut pool = SharedPool::new(buf.bytes(), Layout::new::<[u8; 60]>()).unwrap();
    assert_eq!(pool.capacity(), 60);
    let a = pool.alloc().unwrap();
    let b = pool.alloc().unwrap();
    assert_eq!(b.addr().get() - a.addr().get(), 64);
    // SAFETY: live chunks, freed once.
    unsafe {
        pool.free(a);
        pool.free(b);
    }
    assert_eq!((pool.alloc(), pool.alloc()), (Some(b), Some(a)));
    let rest: Vec<_> = core::iter::from_fn(|| pool.alloc()).collect();
    assert_eq!(rest.len(), 58);
    let report = pool.validate().unwrap();
    assert_eq!((report.in_use, report.untouched), (60, 0));
    // SAFETY: live chunks, freed once.
    unsafe {
        pool.free(a);
        pool.free(b);
        for c in rest {
            pool.free(c);
        }
    }
    assert_eq!(pool.in_use(), 0);
    assert_eq!(pool.validate().unwrap().free_listed, 60);
}

#[test]
fn shared_pool_model_and_interop() {
    let mut buf = Buffer::pages(cases(4, 1));
    let mut pool = SharedPool::new(buf.bytes(), Layout::new::<[u8; 128]>()).unwrap();
    let caps = Caps::default()
        .with_sizes(SizeGen::new(200).with_boundaries(&[128]))
        .with_max_align(Alignment::new(16).unwrap())
        .with_max_live(cases(200, 20));
    let r = seeded(cases(100, 1), |u| run(&mut Api02::new(&&pool), &caps, u));
    if !cfg!(miri) {
        assert!(r.allocs > 500 && r.allocs_failed > 0, "{r:?}");
    }
    assert_eq!(pool.in_use(), 0);
    pool.validate().unwrap();
    let b = Box::new_in(5u32, &pool);
    assert_eq!(*b, 5);
}

#[cfg(debug_assertions)]
#[test]
fn shared_pool_debug_checks() {
    let mut buf = Buffer::pages(1);
    let mut pool = SharedPool::new(buf.bytes(), Layout::new::<[u8; 32]>()).unwrap();
    pool.set_misuse_hook(record);
    let a = pool.alloc().unwrap();
    let outside = 0u64;
    // SAFETY: the misuse under test (this free and the ones below), refused before any write.
    unsafe { pool.free(NonNull::from(&outside).cast()) };
    assert_seen("is not in this allocator's memory");
    // SAFETY: as above; the debug checks refuse this misuse before any write.
    unsafe { pool.free(a.add(1)) };
    assert_seen("points inside");
    // SAFETY: as above; the debug checks refuse this misuse before any write.
    unsafe { pool.free(a.add(32)) };
    assert_seen("never handed out");
    // SAFETY: `a` is live; the second free is the misuse.
    unsafe {
        pool.free(a);
        pool.free(a);
    }
    assert_seen("double free");
    assert_eq!(pool.validate().unwrap().free_listed, 1);
    // SAFETY: `a` is free; the write is the misuse under test.
    unsafe { a.add(3).write(1) };
    assert_eq!(pool.alloc(), Some(a));
    assert_seen("offset 3");
    let _leak = pool.alloc().unwrap();
    drop(pool);
    assert_seen("2 chunk(s) in use");
}

/// Threads pass chunks to each other through shared slots and check, before freeing
/// one, that it holds the fill its writer left: a chunk handed out twice would be
/// overwritten by its second owner.
/// With `batch`, each thread allocates and frees through its own cache of that batch,
/// so chunks taken by one cache are freed into another.
fn transfer_stress(
    pool: &SharedPool<'_>,
    threads: usize,
    rounds: usize,
    batch: Option<NonZeroU32>,
) {
    const CHUNK: usize = 64;
    let slots: Vec<AtomicPtr<u8>> = (0..8)
        .map(|_| AtomicPtr::new(core::ptr::null_mut()))
        .collect();
    std::thread::scope(|s| {
        for t in 0..threads {
            let slots = &slots;
            s.spawn(move || {
                let cache = batch.map(|b| pool.cache_with_batch(b));
                let alloc = || match &cache {
                    Some(cache) => cache.alloc(),
                    None => pool.alloc(),
                };
                let mut rng = bento_testkit::Rng::mixed(t as u64);
                for round in 0..rounds {
                    let Some(c) = alloc() else { continue };
                    let fill = (t * 31 + round) as u8;
                    // SAFETY: `c` is a 64-byte chunk this thread owns.
                    unsafe { c.write_bytes(fill, CHUNK) };
                    let slot = &slots[rng.below(slots.len() as u64) as usize];
                    let got = slot.swap(c.as_ptr(), Ordering::AcqRel);
                    if let Some(got) = NonNull::new(got) {
                        // SAFETY: the swap handed this thread sole ownership of `got`,
                        // written before its owner's release swap.
                        let first = unsafe { got.read() };
                        let whole = (1..CHUNK).all(|i| {
                            // SAFETY: inside the chunk this thread now owns.
                            unsafe { got.add(i).read() == first }
                        });
                        assert!(whole, "a chunk was written by two owners");
                        // SAFETY: a live chunk of `pool`, freed once.
                        unsafe {
                            match &cache {
                                Some(cache) => cache.free(got),
                                None => pool.free(got),
                            }
                        }
                    }
                }
                if let Some(cache) = &cache {
                    assert_eq!(cache.validate().map(|r| r.held), Ok(cache.held()));
                }
            });
        }
    });
    for slot in slots {
        if let Some(c) = NonNull::new(slot.into_inner()) {
            // SAFETY: left in a slot: a live chunk, freed once.
            unsafe { pool.free(c) };
        }
    }
}

/// Every chunk came back exactly once: nothing in use, and taking them all gives each
/// chunk once.
fn every_chunk_came_back_once(pool: &mut SharedPool<'_>) {
    assert_eq!(pool.validate().unwrap().in_use, 0);
    let mut all: Vec<_> = core::iter::from_fn(|| pool.alloc()).collect();
    assert_eq!(all.len(), pool.capacity());
    all.sort();
    all.dedup();
    assert_eq!(all.len(), pool.capacity(), "a chunk came out twice");
    for c in all {
        // SAFETY: live, freed once.
        unsafe { pool.free(c) };
    }
}

#[test]
fn shared_pool_stress_four_threads() {
    let mut buf = Buffer::pages(cases(64, 1));
    let mut pool = SharedPool::new(buf.bytes(), Layout::new::<[u8; 64]>()).unwrap();
    transfer_stress(&pool, 4, cases(1_000_000, 60), None);
    every_chunk_came_back_once(&mut pool);
}

#[test]
fn shared_pool_stress_with_a_tiny_pool() {
    // Four chunks for three threads: the list is empty most of the time and every
    // chunk is reused constantly, the ABA-prone regime.
    let mut buf = Buffer::pages(1);
    let bytes = &mut buf.bytes()[..4 * (64 + 4) + 64];
    let mut pool = SharedPool::new(bytes, Layout::new::<[u8; 64]>()).unwrap();
    assert!(pool.capacity() >= 4);
    transfer_stress(&pool, 3, cases(200_000, 100), None);
    assert_eq!(pool.validate().unwrap().in_use, 0);
}

// ---------------------------------------------------------------------------------------
// SharedPoolCache

/// `n` batch as a `NonZeroU32`.
fn batch(n: u32) -> NonZeroU32 {
    NonZeroU32::new(n).expect("a non-zero batch")
}

#[test]
fn shared_pool_cache_takes_and_gives_back_in_batches() {
    let mut buf = Buffer::pages(4);
    let mut pool = SharedPool::new(buf.bytes(), Layout::new::<[u8; 64]>()).unwrap();
    let cap = pool.capacity();
    {
        let cache = pool.cache_with_batch(batch(4));
        // An empty list: the first refill takes four never-used chunks, in order.
        let a = cache.alloc().unwrap();
        assert_eq!(cache.held(), 3);
        let rest: Vec<_> = (0..3).map(|_| cache.alloc().unwrap()).collect();
        assert_eq!(rest[0].addr().get() - a.addr().get(), 64);
        assert_eq!(cache.held(), 0);
        // LIFO inside the cache.
        // SAFETY: live chunks, freed once.
        unsafe { cache.free(rest[2]) };
        assert_eq!(cache.alloc(), Some(rest[2]));
        // Eight held (twice the batch): the four freed first go to the shared list,
        // the four freed last stay.
        let more: Vec<_> = (0..4).map(|_| cache.alloc().unwrap()).collect();
        let all: Vec<_> = core::iter::once(a).chain(rest).chain(more).collect();
        for (i, &c) in all.iter().enumerate() {
            // SAFETY: live chunks, freed once.
            unsafe { cache.free(c) };
            assert_eq!(cache.held(), if i < 7 { i + 1 } else { 4 });
            assert_eq!(cache.validate().map(|r| r.held), Ok(cache.held()));
        }
        // The pool hands out the older half, newest first: chunks 3, 2, 1, 0 of `all`.
        for &c in all[..4].iter().rev() {
            assert_eq!(pool.alloc(), Some(c));
        }
        // The cache hands out the newer half, newest first.
        for &c in all[4..].iter().rev() {
            assert_eq!(cache.alloc(), Some(c));
        }
        for &c in &all {
            // SAFETY: live chunks (from the pool or the cache), freed once.
            unsafe { cache.free(c) };
        }
        assert_eq!(cache.held(), 4);
        // The next refill takes from the shared list, not from the untouched chunks.
        let touched_before = pool_touched(&cache);
        cache.flush();
        assert_eq!(cache.held(), 0);
        let c = cache.alloc().unwrap();
        assert!(all.contains(&c));
        assert_eq!(pool_touched(&cache), touched_before);
        // SAFETY: live, freed once.
        unsafe { cache.free(c) };
    }
    // Dropping the cache gave back everything.
    let report = pool.validate().unwrap();
    assert_eq!((report.in_use, report.free_listed), (0, 8));
    assert_eq!(report.untouched, cap - 8);
}

/// The chunks the cache's pool has handed out at least once, from outside: a fresh
/// chunk taken and given back through the pool moves it by one.
fn pool_touched(cache: &SharedPoolCache<'_, '_>) -> usize {
    format!("{:?}", cache.pool())
        .split("touched: ")
        .nth(1)
        .and_then(|s| s.split([',', ' ']).next())
        .and_then(|s| s.parse().ok())
        .expect("the Debug output names `touched`")
}

#[test]
fn a_shared_pool_cache_moves_to_another_thread() {
    let mut buf = Buffer::pages(4);
    let mut pool = SharedPool::new(buf.bytes(), Layout::new::<[u8; 64]>()).unwrap();
    // Made here, holding chunks, then used and dropped on another thread (`Send`).
    let cache = pool.cache_with_batch(batch(4));
    let first = cache.alloc().unwrap();
    assert_eq!(cache.held(), 3);
    let first_addr = first.addr();
    std::thread::scope(|s| {
        s.spawn(move || {
            let c = cache.alloc().unwrap();
            assert_ne!(c.addr(), first_addr);
            // SAFETY: a live chunk of the pool, freed once, not used after.
            unsafe { cache.free(c) };
            assert_eq!(cache.validate().map(|r| r.held), Ok(3));
        });
    });
    // SAFETY: a live chunk of the pool, freed once.
    unsafe { pool.free(first) };
    assert_eq!(
        pool.in_use(),
        0,
        "the cache gave everything back on its thread"
    );
}

#[test]
fn shared_pool_cache_runs_dry_cleanly() {
    // Ten chunks, two caches of batch 4: the first finds nothing while the last free
    // chunk rests in the second, and gets it once the second flushes.
    let mut buf = Buffer::pages(1);
    let bytes = &mut buf.bytes()[..10 * (64 + 4) + 64];
    let mut pool = SharedPool::new(bytes, Layout::new::<[u8; 64]>()).unwrap();
    let cap = pool.capacity();
    assert!((10..=11).contains(&cap));
    {
        let one = pool.cache_with_batch(batch(4));
        let two = pool.cache_with_batch(batch(4));
        let mut mine: Vec<_> = (0..cap - 1).map(|_| two.alloc().unwrap()).collect();
        assert_eq!(two.held(), 1);
        assert!(one.alloc().is_none() && pool.alloc().is_none());
        // SAFETY: a live chunk, freed once (into the other cache).
        unsafe { one.free(mine[0]) };
        assert_eq!(one.alloc(), Some(mine[0]));
        assert!(
            one.alloc().is_none(),
            "the last chunk rests in the other cache"
        );
        two.flush();
        mine.push(one.alloc().expect("the flushed chunk"));
        assert!(one.alloc().is_none() && two.alloc().is_none());
        mine.sort();
        mine.dedup();
        assert_eq!(mine.len(), cap, "a chunk came out twice");
        for c in mine {
            // SAFETY: live chunks, freed once.
            unsafe { two.free(c) };
        }
    }
    assert_eq!(pool.in_use(), 0);
    pool.validate().unwrap();
}

#[test]
fn shared_pool_cache_model_and_interop() {
    let mut buf = Buffer::pages(cases(4, 1));
    let mut pool = SharedPool::new(buf.bytes(), Layout::new::<[u8; 128]>()).unwrap();
    {
        let cache = pool.cache_with_batch(batch(3));
        let caps = Caps::default()
            .with_sizes(SizeGen::new(200).with_boundaries(&[128]))
            .with_max_align(Alignment::new(16).unwrap())
            .with_max_live(cases(200, 20))
            .with_validate_every(3);
        let r = seeded(cases(100, 1), |u| {
            run(
                &mut Api02::with_validate(&&cache, |c| {
                    let held = c.validate().map_err(|e| e.to_string())?.held;
                    assert!(held < 2 * 3, "a cache holds less than twice its batch");
                    Ok(Stats {
                        live_blocks: None,
                        live_bytes: None,
                    })
                }),
                &caps,
                u,
            )
        });
        if !cfg!(miri) {
            assert!(r.allocs > 500 && r.allocs_failed > 0, "{r:?}");
        }
        let mut v = ApiVec::new_in(&cache);
        v.extend(0..16u64);
        let b = Box::new_in(v, &cache);
        assert_eq!(b.iter().sum::<u64>(), 120);
    }
    assert_eq!(pool.in_use(), 0);
    pool.validate().unwrap();
}

#[cfg(debug_assertions)]
#[test]
fn shared_pool_cache_debug_checks() {
    let mut buf = Buffer::pages(1);
    let mut pool = SharedPool::new(buf.bytes(), Layout::new::<[u8; 32]>()).unwrap();
    pool.set_misuse_hook(record);
    {
        let cache = pool.cache_with_batch(batch(2));
        let a = cache.alloc().unwrap();
        let outside = 0u64;
        // SAFETY: the misuse under test, refused before any write.
        unsafe { cache.free(NonNull::from(&outside).cast()) };
        assert_seen("is not in this allocator's memory");
        // SAFETY: `a` is live; the second free is the misuse.
        unsafe {
            cache.free(a);
            cache.free(a);
        }
        assert_seen("double free");
        assert_eq!(cache.validate().map(|r| r.held), Ok(2));
        // SAFETY: `a` is free, resting in the cache; the write is the misuse.
        unsafe { a.add(5).write(1) };
        assert_eq!(cache.alloc(), Some(a));
        assert_seen("offset 5");
        // SAFETY: live, freed once.
        unsafe { cache.free(a) };
    }
    assert!(seen().is_empty());
    assert_eq!(pool.validate().unwrap().in_use, 0);
}

#[test]
fn shared_pool_stress_through_caches_four_threads() {
    let mut buf = Buffer::pages(cases(64, 1));
    let mut pool = SharedPool::new(buf.bytes(), Layout::new::<[u8; 64]>()).unwrap();
    transfer_stress(
        &pool,
        4,
        cases(1_000_000, 60),
        Some(batch(SHARED_POOL_CACHE_BATCH)),
    );
    every_chunk_came_back_once(&mut pool);
}

#[test]
fn shared_pool_stress_through_caches_with_a_tiny_pool() {
    // Six chunks, three threads with caches of batch 2 and one without: batches move
    // constantly and the list is empty most of the time.
    let mut buf = Buffer::pages(1);
    let bytes = &mut buf.bytes()[..6 * (64 + 4) + 64];
    let mut pool = SharedPool::new(bytes, Layout::new::<[u8; 64]>()).unwrap();
    std::thread::scope(|s| {
        let pool = &pool;
        s.spawn(move || transfer_stress(pool, 3, cases(200_000, 100), Some(batch(2))));
        s.spawn(move || transfer_stress(pool, 1, cases(200_000, 100), None));
    });
    assert_eq!(pool.validate().unwrap().in_use, 0);
}

/// Grows a block in a chunk of 40 bytes aligned to 8 that happens to sit on 64 bytes
/// to `{40, 64}` (in place: the trait keeps a block whose address meets the new
/// alignment), then frees it with that layout: the trait allows the sequence.
///
/// # Safety
///
/// `alloc` is a pool of 40-byte chunks aligned to 8 with at least 8 free (one in
/// eight sits on 64 bytes).
unsafe fn grow_to_a_stricter_alignment_then_free<A: Allocator>(alloc: A) {
    let small = Layout::from_size_align(32, 8).unwrap();
    let strict = Layout::from_size_align(40, 64).unwrap();
    let mut held = Vec::new();
    let p = loop {
        let p = alloc.allocate(small).unwrap().cast::<u8>();
        if p.addr().get().is_multiple_of(64) {
            break p;
        }
        held.push(p);
    };
    // SAFETY: `p` and the held blocks are live with the layouts they are freed with.
    unsafe {
        let q = alloc.grow(p, small, strict).unwrap().cast::<u8>();
        assert_eq!(q, p, "grown in place");
        alloc.deallocate(q, strict);
        for h in held {
            alloc.deallocate(h, small);
        }
    }
}

#[test]
fn a_chunk_resized_to_a_stricter_alignment_frees_with_it() {
    let chunk = Layout::from_size_align(40, 8).unwrap();
    let mut buf = Buffer::pages(1);
    let pool = Pool::new(buf.bytes(), chunk).unwrap();
    // SAFETY: 102 chunks of 40 bytes aligned to 8.
    unsafe { grow_to_a_stricter_alignment_then_free(&pool) };
    assert_eq!(pool.in_use(), 0);
    pool.validate().unwrap();

    let mut buf = Buffer::pages(1);
    let mut shared = SharedPool::new(buf.bytes(), chunk).unwrap();
    // SAFETY: as above.
    unsafe { grow_to_a_stricter_alignment_then_free(&shared) };
    assert_eq!(shared.in_use(), 0);
    {
        let cache = shared.cache();
        // SAFETY: as above.
        unsafe { grow_to_a_stricter_alignment_then_free(&cache) };
    }
    assert_eq!(shared.in_use(), 0);
    shared.validate().unwrap();

    let pages = HeapPages::new();
    let growing = GrowingPool::with_source(&pages, chunk, 1000).unwrap();
    // SAFETY: as above.
    unsafe { grow_to_a_stricter_alignment_then_free(&growing) };
    assert_eq!(growing.in_use(), 0);
    growing.validate().unwrap();
}
