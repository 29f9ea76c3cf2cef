//! bento-primitives' integration tests: one binary, a module per allocator.

mod arena;
mod bump;
mod double;
mod pool;
mod stack;

use core::mem::MaybeUninit;

/// A heap buffer aligned to 4096 (so that Miri's symbolic alignment check sees the
/// alignment the allocators compute from addresses), freed when dropped.
pub(crate) struct Buffer(Vec<Page>);

#[repr(C, align(4096))]
pub(crate) struct Page([MaybeUninit<u8>; 4096]);

impl Buffer {
    pub(crate) fn pages(n: usize) -> Self {
        Self(
            (0..n)
                .map(|_| Page([MaybeUninit::uninit(); 4096]))
                .collect(),
        )
    }

    pub(crate) fn bytes(&mut self) -> &mut [MaybeUninit<u8>] {
        let len = self.0.len() * 4096;
        // SAFETY: the pages are contiguous `MaybeUninit<u8>` arrays; the slice borrows
        // `self` exclusively.
        unsafe { core::slice::from_raw_parts_mut(self.0.as_mut_ptr().cast(), len) }
    }
}

/// Checks that `pages` holds nothing any more: after an allocator over it is dropped,
/// every reservation released and every commit given back.
#[track_caller]
pub(crate) fn assert_all_given_back<P: bento_pages::PageSource>(pages: &bento_pages::Metered<P>) {
    let s = pages.stats();
    assert_eq!(
        (s.reserved, s.committed),
        (0, 0),
        "the drop gives everything back"
    );
}
