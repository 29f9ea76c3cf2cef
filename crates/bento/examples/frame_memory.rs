//! Per-frame memory: a `FrameArena` of two arenas in rotation, so what frame `k`
//! writes (a command list the GPU reads during the next frame) stays valid until
//! frame `k + 2` begins, and nothing is ever freed block by block.
//!
//! `cargo run -p bento-alloc --example frame_memory`

use allocator_api2::vec::Vec;
use bento_alloc::pages::SystemPages;
use bento_alloc::primitives::{ArenaConfig, FrameArena};

fn main() {
    let config = ArenaConfig {
        reserve: 16 << 20,
        ..ArenaConfig::default()
    };
    let frames = FrameArena::<_, 2>::with_source(SystemPages::new(), config).unwrap();
    // The frame the GPU is still reading, and the one being recorded.
    let mut reading = None;
    let mut recording = None;
    let mut drawn = 0;
    for _ in 0..100 {
        // Frame k - 1's arena comes round again: its handle goes first.
        drop(reading.take());
        reading = recording.take();
        let frame = frames
            .next_frame()
            .expect("the oldest frame's handle was dropped");
        let mut commands: Vec<[f32; 4], _> = Vec::new_in(&*frame);
        commands.extend((0..500).map(|i| [i as f32; 4]));
        drawn += commands.len();
        drop(commands);
        recording = Some(frame);
    }
    drop((reading, recording));
    assert_eq!(drawn, 100 * 500);
    println!(
        "100 frames, {drawn} commands; {} KiB committed, peak {} KiB in a frame",
        frames.committed() >> 10,
        frames.peak() >> 10
    );
}
