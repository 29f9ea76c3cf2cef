//! How long `MemorySpace::validate` takes on a 1 GiB heap: 256 KiB segments filled
//! with 1 KiB blocks, every other one freed (about 4,200 segments and 512k free
//! chunks between live blocks), printed as JSON for the report (`cargo xtask bench`
//! writes it to `target/bench-report/validate.json`): `{"rows": [{"time_ns": N,
//! "segments": N, "reserved_bytes": N, "live_blocks": N, "free_chunks": N}]}`.
//!
//! ```sh
//! cargo run --release -p bento-benches --bin validate
//! ```

use std::alloc::Layout;
use std::time::Instant;

use bento_pages::SystemPages;
use bento_space::{MemorySpace, SpaceConfig};

fn main() {
    let config = SpaceConfig::DEFAULT
        .with_page_size(4096)
        .with_segment_granularity(256 << 10)
        .with_segment_threshold(128 << 10)
        .with_block_cache(0);
    let space = MemorySpace::new(SystemPages::new(), config).expect("a space");
    let layout = Layout::from_size_align(1000, 8).expect("a layout");
    let blocks: Vec<_> = (0..(1usize << 30) / 1024)
        .map(|_| space.alloc(layout).expect("1 GiB of address space"))
        .collect();
    for b in blocks.iter().step_by(2) {
        // SAFETY: live blocks of the space, each freed once.
        unsafe { space.free(*b) };
    }
    let s = space.stats();
    let start = Instant::now();
    let report = space.validate().expect("a valid space");
    let took = start.elapsed();
    let row = serde_json::json!({
        "time_ns": took.as_nanos() as u64,
        "segments": s.segments,
        "reserved_bytes": s.reserved,
        "live_blocks": report.live_blocks,
        "free_chunks": report.free_blocks,
    });
    println!("{}", serde_json::json!({ "rows": [row] }));
    for b in blocks.iter().skip(1).step_by(2) {
        // SAFETY: as above.
        unsafe { space.free(*b) };
    }
    assert_eq!(space.stats().segments, 0);
}
