//! The guard pool's type: bento-pages' `GuardPool` where the system has one, else
//! an uninhabited stand-in with the same calls, so that the allocator's code has
//! no `cfg` of its own.

#[cfg(not(all(feature = "os", unix, not(bento_loom))))]
use core::alloc::Layout;
#[cfg(not(all(feature = "os", unix, not(bento_loom))))]
use core::ptr::NonNull;

#[cfg(not(all(feature = "os", unix, not(bento_loom))))]
use bento_pages::{GuardStats, Label, Trace};

/// The pool type, or where the system has none an uninhabited stand-in.
#[cfg(all(feature = "os", unix, not(bento_loom)))]
pub(crate) type Pool = bento_pages::GuardPool;

/// No guard pool on this system: the type has no value.
#[cfg(not(all(feature = "os", unix, not(bento_loom))))]
pub(crate) enum Pool {}

#[cfg(not(all(feature = "os", unix, not(bento_loom))))]
impl Pool {
    pub(crate) fn draw(&self) -> u32 {
        match *self {}
    }
    pub(crate) fn sample(&self) -> bool {
        match *self {}
    }
    pub(crate) fn alloc(&self, _: Layout, _: Label, _: &Trace) -> Option<NonNull<u8>> {
        match *self {}
    }
    pub(crate) unsafe fn free(&self, _: NonNull<u8>, _: &Trace) -> usize {
        match *self {}
    }
    pub(crate) fn size_of(&self, _: NonNull<u8>) -> Option<usize> {
        match *self {}
    }
    pub(crate) fn stats(&self) -> GuardStats {
        match *self {}
    }
    pub(crate) fn validate(&self) -> Result<GuardStats, bento_pages::GuardCorruption> {
        match *self {}
    }
    pub(crate) fn range(&self) -> (usize, usize) {
        match *self {}
    }
    pub(crate) fn lock_for_fork(&self) {
        match *self {}
    }
    pub(crate) unsafe fn unlock_after_fork(&self) {
        match *self {}
    }
}

/// The pool `config` asks for, where the system has one.
pub(crate) fn make_pool(
    config: Option<bento_pages::GuardConfig>,
) -> Result<Option<&'static Pool>, bento_pages::PageError> {
    #[cfg(all(feature = "os", unix, not(bento_loom)))]
    {
        config.map(Pool::new).transpose()
    }
    #[cfg(not(all(feature = "os", unix, not(bento_loom))))]
    {
        let _ = config;
        Ok(None)
    }
}
