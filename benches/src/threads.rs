//! Threads replacing blocks and freeing each other's: the `threads` workload of the
//! common allocator's and the heaps' benchmarks.

use std::sync::{Barrier, Mutex};
use std::time::{Duration, Instant};

use bento_pages::RawAlloc;

use crate::Rng;
use crate::heap::{GlobalHeap, Heap, fill_with};

/// Steps each thread runs per measured round.
pub const THREAD_STEPS: usize = 50_000;
const THREAD_LIVE: usize = 1000;
/// One block in this many goes to the other thread.
const HANDOFF: usize = 16;

/// A block on its way to another thread (the pointer is only freed there).
struct Sent(std::ptr::NonNull<u8>, usize);
// SAFETY: a block of a `Sync` allocator, owned by whoever holds the `Sent`.
unsafe impl Send for Sent {}

/// `threads` threads replacing blocks of 1–512 B and freeing each other's; returns
/// the time of `rounds` rounds.
pub fn threaded<A: std::alloc::GlobalAlloc + Sync>(
    alloc: &A,
    threads: usize,
    rounds: u64,
) -> Duration {
    let inboxes: Vec<Mutex<Vec<Sent>>> = (0..threads).map(|_| Mutex::new(Vec::new())).collect();
    let start = Barrier::new(threads + 1);
    let done = Barrier::new(threads + 1);
    let elapsed = std::thread::scope(|s| {
        for t in 0..threads {
            let (inboxes, start, done) = (&inboxes, &start, &done);
            s.spawn(move || {
                let mut heap = GlobalHeap(Shared(alloc));
                let mut rng = Rng::new(0x9E37_79B9_7F4A_7C15 ^ (t as u64 + 1));
                let size = |r: u64| 1 + (r as usize & 511);
                let mut live = fill_with(&mut heap, &mut rng, THREAD_LIVE, size);
                let mut outbox = Vec::with_capacity(THREAD_STEPS / HANDOFF + 1);
                start.wait();
                for _ in 0..rounds {
                    for step in 0..THREAD_STEPS {
                        let r = rng.next_u64();
                        let slot = &mut live[crate::heap::below(r, THREAD_LIVE)];
                        if step % HANDOFF == 0 {
                            outbox.push(Sent(slot.0, slot.1));
                        } else {
                            // SAFETY: a live block of its recorded size.
                            unsafe { heap.deallocate(slot.0, layout(slot.1)) };
                        }
                        let n = size(r.rotate_left(32));
                        let p = heap.allocate(layout(n));
                        // SAFETY: a fresh block of at least 1 byte.
                        unsafe { p.as_ptr().write(n as u8) };
                        *slot = (p, n);
                        if outbox.len() == 64 {
                            let to = (t + 1) % threads;
                            inboxes[to].lock().unwrap().append(&mut outbox);
                            let mine = std::mem::take(&mut *inboxes[t].lock().unwrap());
                            for Sent(p, n) in mine {
                                // SAFETY: a live block another thread gave up.
                                unsafe { heap.deallocate(p, layout(n)) };
                            }
                        }
                    }
                }
                done.wait();
                for (p, n) in live
                    .drain(..)
                    .chain(outbox.drain(..).map(|Sent(p, n)| (p, n)))
                {
                    // SAFETY: live blocks of their sizes.
                    unsafe { heap.deallocate(p, layout(n)) };
                }
            });
        }
        start.wait();
        let t0 = Instant::now();
        done.wait();
        t0.elapsed()
    });
    // The inboxes' leftovers, once every thread has stopped sending.
    for inbox in &inboxes {
        for Sent(p, n) in inbox.lock().unwrap().drain(..) {
            // SAFETY: live blocks nobody else holds now.
            unsafe { alloc.dealloc(p.as_ptr(), layout(n)) };
        }
    }
    elapsed
}

fn layout(size: usize) -> std::alloc::Layout {
    std::alloc::Layout::from_size_align(size, 8).expect("a small size")
}

/// A shared reference to a `GlobalAlloc`, as a `GlobalAlloc`.
struct Shared<'a, A>(&'a A);

// SAFETY: forwards to `A`.
unsafe impl<A: std::alloc::GlobalAlloc> std::alloc::GlobalAlloc for Shared<'_, A> {
    unsafe fn alloc(&self, layout: std::alloc::Layout) -> *mut u8 {
        // SAFETY: the caller's contract.
        unsafe { self.0.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: std::alloc::Layout) {
        // SAFETY: the caller's contract.
        unsafe { self.0.dealloc(ptr, layout) }
    }
}

/// Any bento [`RawAlloc`] (a heap) as a `GlobalAlloc`, for [`threaded`].
#[derive(Debug)]
pub struct RawGlobal<A>(pub A);

// SAFETY: forwards to `A`'s `RawAlloc`, whose contract is `GlobalAlloc`'s for
// non-zero sizes (the workloads never ask for zero bytes).
unsafe impl<A: RawAlloc> std::alloc::GlobalAlloc for RawGlobal<A> {
    unsafe fn alloc(&self, layout: std::alloc::Layout) -> *mut u8 {
        self.0
            .alloc_raw(layout)
            .map_or(std::ptr::null_mut(), std::ptr::NonNull::as_ptr)
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: std::alloc::Layout) {
        if let Some(ptr) = std::ptr::NonNull::new(ptr) {
            // SAFETY: the caller's contract.
            unsafe { self.0.dealloc_raw(ptr, layout) }
        }
    }
}
