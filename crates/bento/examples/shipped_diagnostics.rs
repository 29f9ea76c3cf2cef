//! What a shipped build keeps on to find memory bugs: sampled guard pages and a
//! sampled allocation profile on a game's level heap. Twelve levels load and unload;
//! level 7 leaves 2 MiB behind. The profile's dump since level 7's start, beside the
//! one before it, names the site (`bento diff before.pb after.pb` shows the same).
//!
//! `cargo run -p bento-alloc --example shipped_diagnostics`

use allocator_api2::vec::Vec;
use bento_alloc::common::CommonAllocator;
use bento_alloc::heap::{HeapBuilder, Tag};
use bento_alloc::pages::{GuardConfig, ProfileConfig, Profiler};

static MESHES: Tag = Tag::new("meshes");

static COMMON: CommonAllocator = CommonAllocator::new();

fn main() {
    let profiler = Profiler::new(ProfileConfig::DEFAULT).expect("the profile's pages");
    let level = HeapBuilder::new("level")
        .guard_pages(GuardConfig::DEFAULT)
        .profile(profiler)
        .build(&COMMON);
    let mut left_behind = Vec::new_in(&level);
    let mut dumps = std::vec::Vec::new();
    for n in 1..=12u64 {
        const NAMES: [&str; 12] = [
            "level 1", "level 2", "level 3", "level 4", "level 5", "level 6", "level 7", "level 8",
            "level 9", "level 10", "level 11", "level 12",
        ];
        profiler.set_frame(n * 1000, Some(NAMES[n as usize - 1]));
        profiler.mark();
        // The level: meshes loaded, used, unloaded.
        let meshes: Vec<Vec<u8, _>, _> = level.with_tag(&MESHES, || {
            let mut v = Vec::new_in(&level);
            for i in 0..400 {
                let mut mesh = Vec::with_capacity_in(1000 + i * 37, &level);
                mesh.resize(1000 + i * 37, 1u8);
                v.push(mesh);
            }
            v
        });
        if n == 7 {
            // The bug: 32 blocks of 64 KiB nobody frees.
            level.with_tag(&MESHES, || {
                for _ in 0..32 {
                    left_behind.push(Vec::<u8, _>::with_capacity_in(64 << 10, &level));
                }
            });
        }
        drop(meshes);
        // After the unload: what this level allocated that is still live.
        let mut dump = std::vec::Vec::new();
        profiler.write_pprof(true, &mut |b| dump.extend_from_slice(b));
        dumps.push(dump.len());
    }
    let estimate =
        profiler.estimate(|l, phase| l.heap == Some("level") && phase == Some("level 7"));
    println!(
        "level 7 left about {} KiB live (in truth {} KiB); dumps of {:?} bytes",
        estimate >> 10,
        (32 * (64 << 10)) >> 10,
        dumps
    );
    // 32 blocks at the mean rate: some 20 samples, so the estimate is within about a
    // sixth (one standard error) of the truth.
    assert!((1 << 20..=3 << 20).contains(&estimate), "{estimate}");
    println!(
        "guard pages: {:?}",
        bento_alloc::heap::guard_stats().map(|s| (s.guarded, s.committed_bytes))
    );
}
