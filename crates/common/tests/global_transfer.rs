//! The common allocator as `#[global_allocator]` under a transfer stress: a
//! producer allocates blocks of every class and some large ones, fills each with a
//! pattern, and consumers on other threads check the pattern and free them. Under
//! Miri it runs over a page source of the system allocator, with small counts.

use std::sync::mpsc;

use bento_common::CommonAllocator;

#[cfg(not(miri))]
#[global_allocator]
static GLOBAL: CommonAllocator = CommonAllocator::new();

#[cfg(miri)]
#[global_allocator]
static GLOBAL: CommonAllocator<miri_pages::SystemHeap> = CommonAllocator::with_config(
    bento_common::CommonConfig::DEFAULT
        .with_pages(miri_pages::SystemHeap)
        .with_large(
            bento_common::LargeConfig::DEFAULT
                .with_page_size(4096)
                .with_segment_granularity(256 << 10)
                .with_segment_threshold(64 << 10),
        )
        .with_commit_cache(256 << 10),
);

const BLOCKS: usize = if cfg!(miri) {
    300
} else if cfg!(debug_assertions) {
    50_000
} else {
    500_000
};

/// The pattern of block `i`.
fn pattern(i: usize) -> u8 {
    (i * 131 % 251) as u8 | 1
}

fn main() {
    // Started now, so that the baseline below has every region in it (some
    // targets' runtimes allocate nothing before `main`).
    GLOBAL.init().expect("the allocator starts");
    // A short run first, and a send that surely blocks: what the standard library
    // keeps once (thread bookkeeping, the main thread's cached channel context, made
    // the first time it blocks) is then in the baseline.
    transfer(16);
    let (tx, rx) = mpsc::sync_channel::<u8>(0);
    let late = std::thread::spawn(move || {
        std::thread::sleep(std::time::Duration::from_millis(50));
        rx.recv().unwrap()
    });
    tx.send(1).unwrap();
    late.join().unwrap();
    let base = GLOBAL.stats();
    transfer(BLOCKS);
    GLOBAL.validate().expect("the allocator validates");
    assert_eq!(
        GLOBAL.stats().live_blocks,
        base.live_blocks,
        "{}",
        GLOBAL.report()
    );
    println!("global_transfer: ok");
}

/// Sends `blocks` blocks through two consumers, which check and free them.
fn transfer(blocks: usize) {
    let (tx_a, rx_a) = mpsc::sync_channel::<(usize, Vec<u8>)>(64);
    let (tx_b, rx_b) = mpsc::sync_channel::<(usize, Vec<u8>)>(64);
    let consumer = |rx: mpsc::Receiver<(usize, Vec<u8>)>| {
        std::thread::spawn(move || {
            let mut n = 0;
            for (i, block) in rx {
                assert!(
                    block.iter().all(|&b| b == pattern(i)),
                    "block {i} was overwritten"
                );
                n += 1;
            }
            n
        })
    };
    let (a, b) = (consumer(rx_a), consumer(rx_b));
    for i in 0..blocks {
        let len = match i % 16 {
            15 => 300 + i % 70_000,
            _ => 1 + i % 256,
        };
        let block = vec![pattern(i); len];
        if i % 2 == 0 { &tx_a } else { &tx_b }
            .send((i, block))
            .unwrap();
    }
    drop((tx_a, tx_b));
    assert_eq!(a.join().unwrap() + b.join().unwrap(), blocks);
}

#[cfg(miri)]
mod miri_pages {
    //! Pages from the system allocator (not the global one), for Miri, which has no
    //! `mmap`: each reservation remembers its alignment in a fixed table.

    use core::alloc::{GlobalAlloc, Layout};
    use core::ptr::NonNull;
    use std::alloc::System;

    use bento_align::Alignment;
    use bento_pages::lock::SpinMutex;
    use bento_pages::{PageError, PageSource};

    const PAGE: usize = 4096;

    /// Live reservations: base address and alignment.
    static LIVE: SpinMutex<[(usize, usize); 256]> = SpinMutex::new([(0, 0); 256]);

    #[derive(Clone, Copy, Debug)]
    pub(crate) struct SystemHeap;

    // SAFETY: reservations are fresh system-allocator blocks, page-aligned and owned
    // by the caller until released with their own layout; commit and decommit do
    // nothing (the memory is usable at once), and nothing calls the global allocator.
    unsafe impl PageSource for SystemHeap {
        fn page_size(&self) -> usize {
            PAGE
        }

        fn reserve(&self, size: usize, align: Alignment) -> Result<NonNull<u8>, PageError> {
            let align = align.get().max(PAGE);
            let layout = Layout::from_size_align(size, align)
                .map_err(|_| PageError::OutOfAddressSpace { size })?;
            if size == 0 || size % PAGE != 0 {
                return Err(PageError::OutOfAddressSpace { size });
            }
            let mut live = LIVE.lock();
            let slot = live
                .iter_mut()
                .find(|(base, _)| *base == 0)
                .ok_or(PageError::OutOfAddressSpace { size })?;
            // SAFETY: a non-zero size.
            let p = NonNull::new(unsafe { System.alloc(layout) })
                .ok_or(PageError::OutOfAddressSpace { size })?;
            *slot = (p.addr().get(), align);
            Ok(p)
        }

        unsafe fn release(&self, base: NonNull<u8>, size: usize) {
            let mut live = LIVE.lock();
            let slot = live
                .iter_mut()
                .find(|(b, _)| *b == base.addr().get())
                .expect("a live reservation");
            let align = core::mem::take(slot).1;
            // SAFETY: allocated by `reserve` with this size and alignment.
            unsafe {
                System.dealloc(
                    base.as_ptr(),
                    Layout::from_size_align_unchecked(size, align),
                )
            };
        }
    }
}
