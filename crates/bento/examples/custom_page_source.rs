//! A memory space over a fixed buffer, as a console's carve-out of memory: the space
//! reserves and commits inside the buffer and never calls the OS.
//!
//! `cargo run -p bento-alloc --example custom_page_source`

use core::alloc::Layout;
use core::mem::MaybeUninit;

use bento_alloc::align::Alignment;
use bento_alloc::pages::FixedPages;
use bento_alloc::space::{MemorySpace, SpaceConfig};

fn main() {
    // 8 MiB set aside at start-up (a console would name a physical range).
    let carve_out: &'static mut [MaybeUninit<u8>] =
        Box::leak(vec![MaybeUninit::uninit(); 8 << 20].into_boxed_slice());
    let pages = FixedPages::new(carve_out, Alignment::new(4096).unwrap());
    let config = SpaceConfig::DEFAULT
        .with_page_size(4096)
        .with_segment_granularity(1 << 20)
        .with_segment_threshold(512 << 10);
    let space = MemorySpace::new(&pages, config).unwrap();
    let mut blocks = Vec::new();
    while let Ok(p) = space.alloc(Layout::from_size_align(64 << 10, 16).unwrap()) {
        blocks.push(p);
    }
    let filled = blocks.len();
    // The carve-out is full: allocation fails cleanly, it does not abort.
    assert!(filled > 64 && filled < 128);
    for p in blocks {
        // SAFETY: each block is live and freed once.
        unsafe { space.free(p) };
    }
    assert_eq!(space.stats().segments, 0);
    // The commit cache keeps a few emptied segments for the next allocation; trimmed,
    // every byte is the carve-out's again.
    space.trim();
    println!(
        "{filled} blocks of 64 KiB filled the 8 MiB carve-out; {} KiB free again",
        pages.available() >> 10
    );
}
