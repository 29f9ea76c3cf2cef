//! Level loading with a double-ended stack: the level's resident data grows from one
//! end of one buffer, the loader's temporaries from the other; when the load is done
//! the temporaries go in O(1) and the level's data stays.
//!
//! `cargo run -p bento-alloc --example level_loading`

use allocator_api2::vec::Vec;
use bento_alloc::primitives::DoubleStack;
use core::mem::MaybeUninit;

fn main() {
    let mut buf = vec![MaybeUninit::uninit(); 1 << 20];
    let mut stack = DoubleStack::new(&mut buf);
    let loaded: usize;
    {
        let (resident, mut scratch) = stack.split();
        let start = scratch.marker();
        // The loader decompresses into scratch memory and keeps what the level needs.
        let mut meshes: Vec<Vec<f32, _>, _> = Vec::new_in(&resident);
        for mesh in 0..16 {
            let mut compressed: Vec<u8, _> = Vec::new_in(&scratch);
            compressed.resize(4096, mesh as u8);
            let mut vertices = Vec::with_capacity_in(compressed.len() / 4, &resident);
            vertices.extend(compressed.chunks(4).map(|c| f32::from(c[0])));
            meshes.push(vertices);
        }
        loaded = meshes.iter().map(Vec::len).sum();
        assert_eq!(loaded, 16 * 1024);
        // The load is over: every temporary goes at once.
        scratch
            .rollback(start)
            .expect("the marker is the scratch end's own");
        assert_eq!(scratch.used(), 0);
        std::mem::forget(meshes); // the level's data lives until the level unloads
    }
    println!(
        "level loaded: {loaded} vertices resident, {} KiB free between the ends",
        stack.free_between() >> 10
    );
    stack.reset(); // the level unloads: both ends empty
    assert_eq!(stack.free_between(), stack.capacity());
}
