//! The registry of the thread caches attached to one allocator ([`Registry`]): a
//! list through the caches' own links, changed under a lock, walked by the stats
//! and the fork guard.

use core::ptr::{self, NonNull};

use bento_pages::lock::RawSpinLock;

use crate::front::bins::Bin;
use crate::front::thread_cache::ThreadCache;
use crate::sync::{AtomicPtr, Ordering};

/// The caches attached to one allocator.
pub(crate) struct Registry {
    lock: RawSpinLock,
    // Invariant: a list, through `ThreadCache::next`, of the caches attached to this
    // allocator (thread-locals of live threads), changed only under `lock`.
    head: AtomicPtr<ThreadCache>,
}

impl Registry {
    pub(crate) fn new() -> Self {
        Self {
            lock: RawSpinLock::new(),
            head: AtomicPtr::new(ptr::null_mut()),
        }
    }

    /// Runs `f` with the registry's lock held.
    fn locked<R>(&self, f: impl FnOnce() -> R) -> R {
        self.lock.lock();
        let r = f();
        // SAFETY: taken just above by this thread.
        unsafe { self.lock.unlock() };
        r
    }

    /// Puts `cache` (this thread's, being attached) at the head of the list.
    pub(crate) fn add(&self, cache: &ThreadCache) {
        self.locked(|| {
            cache
                .next()
                .store(self.head.load(Ordering::Relaxed), Ordering::Relaxed);
            self.head
                .store(ptr::from_ref(cache).cast_mut(), Ordering::Release);
        });
    }

    /// Takes `cache` (this thread's, being detached) out of the list.
    pub(crate) fn remove(&self, cache: &ThreadCache) {
        let me = ptr::from_ref(cache).cast_mut();
        self.locked(|| {
            let mut link = &self.head;
            loop {
                let p = link.load(Ordering::Relaxed);
                if p == me {
                    link.store(cache.next().load(Ordering::Relaxed), Ordering::Release);
                    break;
                }
                let Some(node) = NonNull::new(p) else { break };
                // SAFETY: a registered cache of a live thread (the field's invariant).
                link = unsafe { node.as_ref() }.next();
            }
        });
    }

    /// Runs `f` on every attached cache, under the registry's lock.
    pub(crate) fn each(&self, mut f: impl FnMut(&ThreadCache)) {
        self.locked(|| {
            let mut p = self.head.load(Ordering::Relaxed);
            while let Some(cache) = NonNull::new(p) {
                // SAFETY: a registered cache is the thread-local of a live thread (it
                // leaves the list before its thread's locals go).
                let cache = unsafe { cache.as_ref() };
                f(cache);
                p = cache.next().load(Ordering::Relaxed);
            }
        });
    }

    /// Whether any cache is attached.
    pub(crate) fn attached(&self) -> bool {
        !self.head.load(Ordering::Acquire).is_null()
    }

    /// Blocks the attached caches hold in `bin`.
    pub(crate) fn held(&self, bin: Bin) -> usize {
        let mut held = 0;
        self.each(|c| held += c.count(bin) as usize);
        held
    }

    /// The registry's lock, for the fork guard (`CommonAllocator::lock_all`).
    pub(crate) fn raw_lock(&self) -> &RawSpinLock {
        &self.lock
    }
}
