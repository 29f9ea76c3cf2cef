//! The callgrind driver: runs one allocation loop so that
//! `valgrind --tool=callgrind --toggle-collect=<loop>` counts its instructions.
//!
//! ```sh
//! cargo build --release -p bento-benches --bin insns
//! valgrind --tool=callgrind --callgrind-out-file=/tmp/cg.out \
//!     --toggle-collect='bento_benches::bento_bump_16' target/release/insns bento 1000000
//! callgrind_annotate /tmp/cg.out | head
//! ```
//! Instructions per allocation = the loop's total / n.

use bento_benches::heap::{
    Api, GlobalHeap, Heap, LIFO_BATCH, Rlsf, Talc, frame_free_all, lifo_batches, mixed_drain,
    mixed_fill, mixed_replace,
};
use bento_benches::{
    BATCH, BareFreeList, CHUNK, Chunks, bento_arena_16, bento_bump_16, bento_bump_layout_16,
    bento_double_16, bento_stack_16, buffer, bumpalo_16, frame_arena, frame_bump, lifo_bare,
    lifo_mimalloc, lifo_pool, lifo_shared_cache, lifo_shared_pool, lifo_slab, lifo_system,
    mixed_sizes, random_bare, random_order, random_pool, system_16,
};
use bento_primitives::{Arena, Bump, DoubleStack, Pool, SharedPool, Stack};

/// Allocations in one frame of the frame modes (as in the criterion bench).
const FRAME: usize = 10_000;
/// Chunks live in the random pool modes (as in the criterion bench).
const LIVE: usize = 10_000;

/// The space modes, `space-<workload>-<peer>` (peers: bento (the space), common,
/// glibc, dlmalloc, rlsf, talc, mimalloc, jemalloc; heap (a bento-heap over the
/// space), commonapi (the common allocator through `Allocator`) and heapcommon (a
/// heap over it)), each counting one loop of
/// `bento_benches::heap` (`--toggle-collect='bento_benches::heap::<loop>*'`):
/// - `mixed`: `n` steps of the mixed workload, 10k live (`mixed_replace`; two
///   operations a step);
/// - `small`: the same with 1–256 B (`replace_with`);
/// - `lifo`: `n / 100` LIFO batches of 100 × 64 B on an empty heap (`lifo_batches`;
///   per pair = total / n);
/// - `pinned`: the same with one block kept live;
/// - `frame`: `n / 10k` frames of 10k × 16 B freed in order (`frame_free_all`; per
///   allocation and its free = total / n);
/// - `freeall`: `n` × 16 B, then every one freed in order (one `frame_free_all`);
/// - `random64`: `n` steps of 64 B blocks replaced at random, 10k live.
///
/// Peer `commonfree` is the common allocator freeing without a layout
/// (`CommonAllocator::free`, the C `free` path).
fn space_mode(which: &str, n: usize) -> Option<u64> {
    let (workload, peer) = which.strip_prefix("space-")?.split_once('-')?;
    let space = bento_space::MemorySpace::new(
        bento_pages::SystemPages::new(),
        bento_space::SpaceConfig::DEFAULT,
    )
    .expect("a space");
    fn go<H: Heap>(mut heap: H, workload: &str, n: usize) -> u64 {
        match workload {
            "lifo" => lifo_batches(&mut heap, n / LIFO_BATCH),
            "pinned" => {
                let layout = core::alloc::Layout::new::<[u8; 64]>();
                let anchor = heap.allocate(layout);
                let sum = lifo_batches(&mut heap, n / LIFO_BATCH);
                // SAFETY: the anchor is live and freed once.
                unsafe { heap.deallocate(anchor, layout) };
                sum
            }
            "frame" => {
                let mut held = vec![core::ptr::NonNull::dangling(); FRAME];
                (0..n / FRAME).fold(0, |acc, _| acc ^ frame_free_all(&mut heap, &mut held, 16))
            }
            "mixed" => {
                let mut rng = bento_benches::Rng::new(0x9E37_79B9_7F4A_7C15);
                let mut live = mixed_fill(&mut heap, &mut rng, 10_000);
                let sum = mixed_replace(&mut heap, &mut live, &mut rng, n);
                mixed_drain(&mut heap, live);
                sum
            }
            "small" => {
                let mut rng = bento_benches::Rng::new(0x9E37_79B9_7F4A_7C15);
                let size = bento_benches::heap::small_size;
                let mut live = bento_benches::heap::fill_with(&mut heap, &mut rng, 10_000, size);
                let sum =
                    bento_benches::heap::replace_with(&mut heap, &mut live, &mut rng, n, size);
                mixed_drain(&mut heap, live);
                sum
            }
            "freeall" => {
                let mut held = vec![core::ptr::NonNull::dangling(); n];
                frame_free_all(&mut heap, &mut held, 16)
            }
            "random64" => {
                let mut rng = bento_benches::Rng::new(0x9E37_79B9_7F4A_7C15);
                let size = |_| 64;
                let mut live = bento_benches::heap::fill_with(&mut heap, &mut rng, 10_000, size);
                let sum =
                    bento_benches::heap::replace_with(&mut heap, &mut live, &mut rng, n, size);
                mixed_drain(&mut heap, live);
                sum
            }
            other => panic!(
                "unknown space workload {other}: mixed, small, lifo, pinned, frame, freeall \
                 or random64"
            ),
        }
    }
    Some(match peer {
        "bento" => go(Api(&space), workload, n),
        "heap" => go(
            Api(&bento_heap::HeapBuilder::new("insns").build(&space)),
            workload,
            n,
        ),
        "commonapi" => go(Api(&started_common()), workload, n),
        "heapcommon" => {
            let common = started_common();
            go(
                Api(&bento_heap::HeapBuilder::new("insns").build(&common)),
                workload,
                n,
            )
        }
        "common" => go(GlobalHeap(started_common()), workload, n),
        "commonfree" => go(FreeHeap(started_common()), workload, n),
        "glibc" => go(GlobalHeap(std::alloc::System), workload, n),
        "dlmalloc" => go(GlobalHeap(dlmalloc::GlobalDlmalloc), workload, n),
        "rlsf" => go(Rlsf::new(512 << 20), workload, n),
        "talc" => go(Talc::new(512 << 20), workload, n),
        "mimalloc" => go(GlobalHeap(mimalloc::MiMalloc), workload, n),
        "jemalloc" => go(GlobalHeap(tikv_jemallocator::Jemalloc), workload, n),
        _ => return None,
    })
}

/// A common allocator started before the loop (as mimalloc and jemalloc start
/// before `main`), so that the count is of its paths, not of its start.
fn started_common() -> bento_common::CommonAllocator {
    let common = bento_common::CommonAllocator::new();
    common.init().expect("the common allocator starts");
    common
}

/// The common allocator driven as C drives it: `free` without a layout.
struct FreeHeap(bento_common::CommonAllocator);

impl Heap for FreeHeap {
    #[inline]
    fn allocate(&mut self, layout: core::alloc::Layout) -> core::ptr::NonNull<u8> {
        self.0.alloc(layout).expect("the heap has room")
    }

    #[inline]
    unsafe fn deallocate(&mut self, ptr: core::ptr::NonNull<u8>, _: core::alloc::Layout) {
        // SAFETY: the caller's contract: a live block of this allocator.
        unsafe { self.0.free(ptr) }
    }
}

fn main() {
    let mut args = std::env::args().skip(1);
    let which = args.next().unwrap_or_else(|| "bento".into());
    let n: usize = args
        .next()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1_000_000);
    if let Some(sum) = space_mode(&which, n) {
        println!("{which}: {n} steps, checksum {sum}");
        return;
    }
    let sum = match which.as_str() {
        "bento" => {
            let mut buf = buffer(16 * n + 64);
            let bump = Bump::new(&mut buf);
            bento_bump_16(&bump, n)
        }
        "bumpalo" => {
            let bump = bumpalo::Bump::with_capacity(16 * n + 64);
            bumpalo_16(&bump, n)
        }
        "system" => system_16(n),
        "bump-layout" => {
            let mut buf = buffer(16 * n + 64);
            bento_bump_layout_16(&mut Bump::new(&mut buf), n)
        }
        "stack" => {
            let mut buf = buffer(32 * n + 64);
            bento_stack_16(&mut Stack::new(&mut buf), n)
        }
        "double-lower" | "double-upper" => {
            let mut buf = buffer(32 * n + 64);
            bento_double_16(&mut DoubleStack::new(&mut buf), which == "double-upper", n)
        }
        "arena" => {
            let mut arena = Arena::new(16 * n + 4096).expect("address space for the run");
            // Commit once, outside the counted loop's steady state.
            bento_arena_16(&mut arena, n);
            bento_arena_16(&mut arena, n)
        }
        // The frame modes run `n` frames of 10k allocations, 8-256 B (count with
        // `--toggle-collect='bento_benches::frame_*'`; per allocation = total / 10k / n).
        "frame-bump" => {
            let sizes = mixed_sizes(FRAME);
            let mut buf = buffer(sizes.iter().sum::<usize>() + 8 * FRAME + 64);
            let mut bump = Bump::new(&mut buf);
            (0..n).for_each(|_| frame_bump(&mut bump, &sizes));
            0
        }
        "frame-arena" => {
            let sizes = mixed_sizes(FRAME);
            let mut arena = Arena::new(sizes.iter().sum::<usize>() + 8 * FRAME + 4096)
                .expect("address space for the frame");
            (0..n).for_each(|_| frame_arena(&mut arena, &sizes));
            0
        }
        // The pool modes run `n / 100` LIFO batches of 100 pairs (64-byte chunks):
        // instructions per pair = the loop's total / n.
        "pool-bare" => {
            let mut buf = buffer(CHUNK * BATCH + 4096);
            lifo_bare(&mut BareFreeList::new(&mut buf), n / BATCH)
        }
        "pool" => {
            let mut buf = buffer(CHUNK * BATCH + 4096);
            let pool = Pool::new(&mut buf, core::alloc::Layout::new::<[u8; CHUNK]>()).unwrap();
            lifo_pool(&pool, n / BATCH)
        }
        "pool-shared" => {
            let mut buf = buffer((CHUNK + 4) * BATCH + 4096);
            let pool =
                SharedPool::new(&mut buf, core::alloc::Layout::new::<[u8; CHUNK]>()).unwrap();
            lifo_shared_pool(&pool, n / BATCH)
        }
        "pool-cache" => {
            let mut buf = buffer((CHUNK + 4) * BATCH + 4096);
            let pool =
                SharedPool::new(&mut buf, core::alloc::Layout::new::<[u8; CHUNK]>()).unwrap();
            lifo_shared_cache(&pool.cache(), n / BATCH)
        }
        // The random modes: 10k chunks live, then `n` replacements in random order
        // (count with `--toggle-collect='bento_benches::random_bare'` and
        // `--toggle-collect='bento_benches::random_pool'`; `random_*` would count the
        // order's generator too).
        "random-bare" | "random-pool" => {
            let order = random_order(n, LIVE);
            let mut buf = buffer(CHUNK * (LIVE + 1) + 4096);
            if which == "random-bare" {
                let mut list = BareFreeList::new(&mut buf);
                let mut live: Vec<_> = (0..LIVE).map(|i| list.take(i as u64)).collect();
                random_bare(&mut list, &mut live, &order)
            } else {
                let pool = Pool::new(&mut buf, core::alloc::Layout::new::<[u8; CHUNK]>()).unwrap();
                let mut live: Vec<_> = (0..LIVE).map(|i| (&pool).take(i as u64)).collect();
                random_pool(&pool, &mut live, &order)
            }
        }
        "pool-slab" => lifo_slab(&mut slab::Slab::with_capacity(BATCH), n / BATCH),
        "pool-system" => lifo_system(n / BATCH),
        "pool-mimalloc" => lifo_mimalloc(n / BATCH),
        other => panic!(
            "unknown allocator `{other}`: bento, bumpalo, system, bump-layout, stack, arena, \
             frame-bump, frame-arena, \
             pool-bare, pool, pool-shared, pool-cache, pool-slab, pool-system, pool-mimalloc, random-bare, random-pool, or \
             space-{{mixed,lifo,pinned,frame}}-{{bento,glibc,dlmalloc,rlsf,talc,mimalloc,jemalloc}}"
        ),
    };
    println!("{which}: {n} allocations, checksum {sum}");
}
