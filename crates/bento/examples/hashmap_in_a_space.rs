//! A hashbrown `HashMap` in a memory space of its own: when the map is dropped, its
//! memory goes back to the OS at once.
//!
//! `cargo run -p bento-alloc --example hashmap_in_a_space`

use bento_alloc::pages::SystemPages;
use bento_alloc::space::{MemorySpace, SpaceConfig};
use hashbrown::{DefaultHashBuilder, HashMap};

fn main() {
    let space = MemorySpace::new(SystemPages::new(), SpaceConfig::DEFAULT).unwrap();
    let mut names = HashMap::with_hasher_in(DefaultHashBuilder::default(), &space);
    for id in 0..100_000u32 {
        names.insert(id, id.wrapping_mul(2_654_435_761));
    }
    assert_eq!(names[&7], 7u32.wrapping_mul(2_654_435_761));
    let held = space.stats();
    space.validate().unwrap();
    drop(names);
    let after = space.stats();
    println!(
        "100,000 entries: {} KiB committed in {} segments; dropped: {} segments left",
        held.committed >> 10,
        held.segments,
        after.segments
    );
    assert_eq!(after.segments, 0);
}
