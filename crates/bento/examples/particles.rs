//! Particles in a pool of fixed-size chunks: O(1) allocation and free, each box
//! giving its chunk back when the particle dies.
//!
//! `cargo run -p bento-alloc --example particles`

use bento_alloc::primitives::TypedPool;
use core::mem::MaybeUninit;

struct Particle {
    pos: [f32; 3],
    vel: [f32; 3],
    life: f32,
}

fn main() {
    let mut buf = vec![MaybeUninit::uninit(); 64 << 10];
    let pool = TypedPool::<Particle>::new(&mut buf).unwrap();
    let mut alive = Vec::new();
    let mut spawned = 0;
    for frame in 0..200 {
        // Spawn a burst while there is room.
        for i in 0..20 {
            let p = Particle {
                pos: [0.0; 3],
                vel: [i as f32 * 0.1, 1.0, 0.0],
                life: 1.0 + (frame % 5) as f32,
            };
            match pool.alloc(p) {
                Ok(b) => {
                    alive.push(b);
                    spawned += 1;
                }
                Err(_) => break, // the pool is full this frame
            }
        }
        // Simulate; the dead give their chunks back as their boxes drop.
        for p in &mut alive {
            for k in 0..3 {
                p.pos[k] += p.vel[k] * 0.016;
            }
            p.life -= 0.25;
        }
        alive.retain(|p| p.life > 0.0);
    }
    println!(
        "{spawned} particles spawned, {} alive, pool of {} chunks",
        alive.len(),
        pool.capacity()
    );
    drop(alive);
    assert_eq!(pool.in_use(), 0);
}
