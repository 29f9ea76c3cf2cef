//! Subsystem heaps over a memory space: each with a name and a budget, its stats,
//! and one report of them all.
//!
//! `cargo run -p bento-alloc --example subsystem_heaps`

use allocator_api2::boxed::Box;
use allocator_api2::vec::Vec;
use bento_alloc::heap::HeapBuilder;
use bento_alloc::pages::SystemPages;
use bento_alloc::space::{MemorySpace, SpaceConfig};

fn main() {
    let space = MemorySpace::new(SystemPages::new(), SpaceConfig::DEFAULT).unwrap();
    let audio = HeapBuilder::new("audio").budget(2 << 20).build(&space);
    let physics = HeapBuilder::new("physics").budget(8 << 20).build(&space);

    let mut voices: Vec<[f32; 256], _> = Vec::new_in(&audio);
    voices.resize(32, [0.0; 256]);
    let bodies: Vec<Box<[f64; 16], _>> = (0..1000)
        .map(|i| Box::new_in([i as f64; 16], &physics))
        .collect();

    // Over budget: an error, not an abort, and the heap is unchanged.
    let live = audio.stats().live_bytes;
    let mut samples: Vec<u8, _> = Vec::new_in(&audio);
    assert!(samples.try_reserve(4 << 20).is_err());
    assert_eq!(audio.stats().live_bytes, live);

    println!("{}", bento_alloc::heap::report());
    drop(bodies);
    drop(voices);
    assert_eq!(physics.stats().live_bytes, 0);
    space.validate().unwrap();
}
