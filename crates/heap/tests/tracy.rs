//! The `tracy` feature: a heap's allocations and frees go to the Tracy client as a
//! memory pool named after the heap. No server is needed for the client to accept
//! the events; this runs a heap through every path that emits one with the client
//! started.

#![cfg(feature = "tracy")]

use core::alloc::Layout;

use allocator_api2::alloc::Global;
use allocator_api2::vec::Vec;
use bento_heap::HeapBuilder;

#[test]
fn a_heap_reports_to_a_running_tracy_client() {
    let _client = tracy_client::Client::start();
    assert!(tracy_client::Client::is_running());
    let heap = HeapBuilder::new("tracy-audio")
        .register(false)
        .build(Global);
    let layout = Layout::new::<[u8; 256]>();
    let p = heap.alloc(layout).unwrap();
    let mut v: Vec<u32, _> = Vec::new_in(&heap);
    v.extend(0..1000); // grows: a realloc event each time
    v.shrink_to_fit();
    // SAFETY: live, with its layout.
    unsafe { heap.free(p, layout) };
    drop(v);
    let s = heap.validate().unwrap();
    assert_eq!((s.live_blocks, s.total_allocs, s.total_frees), (0, 2, 2));
}

#[test]
fn a_heaps_discard_reaches_a_running_tracy_client() {
    let _client = tracy_client::Client::start();
    let mut buf = vec![core::mem::MaybeUninit::uninit(); 1 << 12];
    let mut bump = bento_primitives::Bump::new(&mut buf);
    for _ in 0..3 {
        let mut heap = HeapBuilder::new("tracy-frame").register(false).build(&bump);
        for n in 1..10 {
            core::mem::forget(Vec::<u8, _>::with_capacity_in(n * 8, &heap));
        }
        // Tracy's memory view drops the pool's blocks: no free arrives for them.
        heap.discard_all();
        assert_eq!(heap.stats().live_blocks, 0);
        drop(heap);
        bump.reset();
    }
}
