//! The guard pool's and the profiler's types: bento-pages' `GuardPool` and
//! `Profiler` where the build has them, else uninhabited stand-ins with the same
//! calls, so that the allocator's code has no `cfg` of its own.

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
    pub(crate) fn alloc(
        &self,
        _: core::alloc::Layout,
        _: bento_pages::Label,
        _: &bento_pages::Trace,
    ) -> Option<core::ptr::NonNull<u8>> {
        match *self {}
    }
    pub(crate) unsafe fn free(&self, _: core::ptr::NonNull<u8>, _: &bento_pages::Trace) -> usize {
        match *self {}
    }
    pub(crate) fn size_of(&self, _: core::ptr::NonNull<u8>) -> Option<usize> {
        match *self {}
    }
    pub(crate) fn stats(&self) -> bento_pages::GuardStats {
        match *self {}
    }
    pub(crate) fn validate(&self) -> Result<bento_pages::GuardStats, bento_pages::GuardCorruption> {
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

/// The profiler's type, or where the build has none an uninhabited stand-in.
#[cfg(all(feature = "profile", any(unix, windows), not(bento_loom)))]
pub(crate) type Prof = bento_pages::Profiler;

/// No profiler in this build: the type has no value.
#[cfg(not(all(feature = "profile", any(unix, windows), not(bento_loom))))]
pub(crate) enum Prof {}

#[cfg(not(all(feature = "profile", any(unix, windows), not(bento_loom))))]
impl Prof {
    pub(crate) fn draw(&self) -> usize {
        match *self {}
    }
    pub(crate) fn count(&self, _: usize) -> bool {
        match *self {}
    }
    pub(crate) fn backtrace(&self) -> bool {
        match *self {}
    }
    pub(crate) fn may_hold(&self, _: core::ptr::NonNull<u8>) -> bool {
        match *self {}
    }
    pub(crate) fn forget(&self, _: core::ptr::NonNull<u8>) -> bool {
        match *self {}
    }
    pub(crate) fn record(
        &self,
        _: core::ptr::NonNull<u8>,
        _: usize,
        _: bento_pages::Label,
        _: &bento_pages::Trace,
    ) {
        match *self {}
    }
    pub(crate) fn lock_for_fork(&self) {
        match *self {}
    }
    pub(crate) unsafe fn unlock_after_fork(&self) {
        match *self {}
    }
}

/// The profiler `config` asks for, where the build has one.
pub(crate) fn make_profiler(
    config: Option<bento_pages::ProfileConfig>,
) -> Result<Option<&'static Prof>, bento_pages::PageError> {
    #[cfg(all(feature = "profile", any(unix, windows), not(bento_loom)))]
    {
        config.map(Prof::new).transpose()
    }
    #[cfg(not(all(feature = "profile", any(unix, windows), not(bento_loom))))]
    {
        let _ = config;
        Ok(None)
    }
}
