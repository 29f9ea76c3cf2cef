//! Where a thread's cache lives, and how it is flushed when the thread exits: one
//! provider is compiled in.
//!
//! - `static-tls` on x86-64 Linux: the cache is a zero-initialised block of the
//!   initial-exec TLS model (declared in assembly: stable Rust has no TLS-model
//!   switch), reached in two instructions, never through `__tls_get_addr` — which
//!   may call `malloc` (to grow a thread's TLS vector after a `dlopen`) and so must
//!   not be reached from inside one. A `pthread` key's destructor flushes the cache
//!   at thread exit; setting a key of the first 32 allocates nothing. For a malloc
//!   replacement (bento-malloc); with `static-tls` on any other target the front end
//!   is off.
//! - `std`: a `const` `thread_local!` without a destructor holds the cache, and a
//!   second one's destructor flushes it.
//! - loom: one `loom::thread_local!` does both.
//! - none of these: the front end is off.

use crate::front::thread_cache::ThreadCache;

/// Whether a thread-local cache is compiled in (each provider says).
pub(crate) const AVAILABLE: bool = provider::AVAILABLE;

#[cfg(all(
    feature = "static-tls",
    target_os = "linux",
    target_arch = "x86_64",
    not(bento_loom),
    not(miri)
))]
mod provider {
    pub(crate) const AVAILABLE: bool = true;

    use core::ffi::c_void;
    use core::sync::atomic::{AtomicU8, AtomicU32, Ordering};

    use crate::front::thread_cache::{ThreadCache, leave};

    // The cache: `size_of::<ThreadCache>()` zero bytes of `.tbss` (a zeroed
    // `ThreadCache` is `ThreadCache::new()`, checked by a test), global so that
    // every codegen unit's accessor reaches it, hidden so that it stays this
    // library's. The name carries the crate's version: two versions of bento-common
    // in one program keep two caches.
    core::arch::global_asm!(
        concat!(
            ".pushsection .tbss,\"awT\",@nobits\n",
            ".p2align 6\n",
            ".globl bento_common_cache_", env!("CARGO_PKG_VERSION_MAJOR"), "_",
            env!("CARGO_PKG_VERSION_MINOR"), "\n",
            ".hidden bento_common_cache_", env!("CARGO_PKG_VERSION_MAJOR"), "_",
            env!("CARGO_PKG_VERSION_MINOR"), "\n",
            ".type bento_common_cache_", env!("CARGO_PKG_VERSION_MAJOR"), "_",
            env!("CARGO_PKG_VERSION_MINOR"), ", @object\n",
            ".size bento_common_cache_", env!("CARGO_PKG_VERSION_MAJOR"), "_",
            env!("CARGO_PKG_VERSION_MINOR"), ", {size}\n",
            "bento_common_cache_", env!("CARGO_PKG_VERSION_MAJOR"), "_",
            env!("CARGO_PKG_VERSION_MINOR"), ":\n",
            ".zero {size}\n",
            ".popsection\n",
        ),
        size = const size_of::<ThreadCache>(),
    );

    /// This thread's cache: the thread pointer plus the block's offset, read from
    /// the GOT (the initial-exec model).
    #[inline(always)]
    pub(crate) fn cache() -> *const ThreadCache {
        let p: *const ThreadCache;
        // SAFETY: reads the GOT entry the linker made for the symbol and the thread
        // pointer (`fs:0` holds its own address on x86-64 Linux); writes only `p`.
        unsafe {
            core::arch::asm!(
                concat!(
                    "mov {p}, qword ptr [rip + bento_common_cache_",
                    env!("CARGO_PKG_VERSION_MAJOR"), "_", env!("CARGO_PKG_VERSION_MINOR"),
                    "@GOTTPOFF]\n",
                    "add {p}, qword ptr fs:[0]",
                ),
                p = out(reg) p,
                options(pure, readonly, nostack, preserves_flags),
            );
        }
        p
    }

    /// The key whose destructor flushes a thread's cache, once made.
    static KEY: AtomicU32 = AtomicU32::new(0);
    static KEY_STATE: AtomicU8 = AtomicU8::new(NONE);
    const NONE: u8 = 0;
    const MAKING: u8 = 1;
    const MADE: u8 = 2;
    const FAILED: u8 = 3;

    /// The key, made by the first caller (the others wait: making it allocates
    /// nothing).
    fn key() -> Option<libc::pthread_key_t> {
        loop {
            match KEY_STATE.compare_exchange(NONE, MAKING, Ordering::Acquire, Ordering::Acquire) {
                Ok(_) => {
                    let mut key: libc::pthread_key_t = 0;
                    // SAFETY: `key` is ours to write; the destructor is an
                    // `extern "C" fn` taking the value set.
                    let made = unsafe { libc::pthread_key_create(&raw mut key, Some(flush)) } == 0;
                    KEY.store(key, Ordering::Relaxed);
                    KEY_STATE.store(if made { MADE } else { FAILED }, Ordering::Release);
                }
                Err(MADE) => return Some(KEY.load(Ordering::Relaxed)),
                Err(FAILED) => return None,
                Err(_) => core::hint::spin_loop(),
            }
        }
    }

    /// The key's destructor: the thread is exiting.
    extern "C" fn flush(cache: *mut c_void) {
        // SAFETY: the value `arm_exit_flush` set: this thread's cache, alive until
        // the thread's TLS goes (after its keys' destructors).
        leave(unsafe { &*cache.cast::<ThreadCache>() });
    }

    /// Registers the flush at thread exit; false when no key can be had. Setting a
    /// value may allocate (past the first 32 keys of a thread): the cache is
    /// `ATTACHING` meanwhile, so such a call takes the locked path.
    pub(crate) fn arm_exit_flush(cache: &ThreadCache) -> bool {
        let Some(key) = key() else {
            return false;
        };
        let value = core::ptr::from_ref(cache).cast_mut().cast::<c_void>();
        // SAFETY: a key made by `pthread_key_create`; the value is this thread's.
        unsafe { libc::pthread_setspecific(key, value) == 0 }
    }
}

#[cfg(all(feature = "std", not(feature = "static-tls"), not(bento_loom)))]
mod provider {
    pub(crate) const AVAILABLE: bool = true;

    use crate::front::thread_cache::{ThreadCache, leave};

    std::thread_local! {
        static CACHE: ThreadCache = const { ThreadCache::new() };
        static EXIT: ExitFlush = const { ExitFlush };
    }

    /// Flushes the thread's cache when the thread exits.
    struct ExitFlush;

    impl Drop for ExitFlush {
        fn drop(&mut self) {
            // SAFETY: this thread's cache, alive while the thread runs.
            leave(unsafe { &*cache() });
        }
    }

    /// This thread's cache. The thread-local gives only its address (so that its
    /// accessor inlines to one instruction), which stays valid as long as the thread
    /// runs: it has a `const` initialiser and no destructor.
    #[inline(always)]
    pub(crate) fn cache() -> *const ThreadCache {
        CACHE.with(core::ptr::from_ref)
    }

    /// Registers the flush at thread exit. Registering can allocate through the
    /// global allocator, which may be this one: the cache is `ATTACHING` meanwhile,
    /// so such a call takes the locked path.
    pub(crate) fn arm_exit_flush(_: &ThreadCache) -> bool {
        // Fails while the thread's locals are being destroyed: no cache then.
        EXIT.try_with(|_| ()).is_ok()
    }
}

#[cfg(bento_loom)]
mod provider {
    pub(crate) const AVAILABLE: bool = true;

    use crate::front::thread_cache::{ThreadCache, leave};

    /// Under loom one thread-local holds the cache and flushes it (loom runs a
    /// thread's thread-local destructors together, after which none can be reached).
    struct LoomCache(ThreadCache);

    loom::thread_local! {
        static CACHE: LoomCache = LoomCache(ThreadCache::new());
    }

    impl Drop for LoomCache {
        fn drop(&mut self) {
            leave(&self.0);
        }
    }

    /// This thread's cache (the loom thread-local's address, valid while the
    /// model's thread runs).
    pub(crate) fn cache() -> *const ThreadCache {
        CACHE.with(|c| core::ptr::from_ref(&c.0))
    }

    pub(crate) fn arm_exit_flush(_: &ThreadCache) -> bool {
        true
    }
}

#[cfg(not(any(
    all(
        feature = "static-tls",
        target_os = "linux",
        target_arch = "x86_64",
        not(bento_loom),
        not(miri)
    ),
    all(feature = "std", not(feature = "static-tls"), not(bento_loom)),
    bento_loom
)))]
mod provider {
    pub(crate) const AVAILABLE: bool = false;

    use super::ThreadCache;

    /// Never called: without a provider the front end is off (`AVAILABLE`).
    pub(crate) fn cache() -> *const ThreadCache {
        unreachable!("the front end needs a thread-local")
    }

    pub(crate) fn arm_exit_flush(_: &ThreadCache) -> bool {
        false
    }
}

pub(crate) use provider::arm_exit_flush;

/// Runs `f` on this thread's cache.
#[inline(always)]
pub(crate) fn with_cache<R>(f: impl FnOnce(&ThreadCache) -> R) -> R {
    // SAFETY: the provider's cache of this thread, alive while the thread runs; only
    // shared references to it exist (its fields are cells and atomics).
    f(unsafe { &*provider::cache() })
}
