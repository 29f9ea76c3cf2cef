//! `fork` with other threads running: every lock of the allocator (and the trace's)
//! is taken before the fork and given back on both sides after it, so that the child,
//! whose only thread is the one that forked, never finds a lock held by a thread it
//! does not have. The purger (see `retain`) is a thread of the parent's: the child
//! starts its own when it keeps memory.

use crate::global::COMMON;
use crate::{retain, trace};

/// Registers the handlers (once, from the first call's set-up).
pub(crate) fn register() {
    // SAFETY: three handlers that live as long as the process; `pthread_atfork` may
    // allocate, which reaches this library's `malloc` re-entrantly: the set-up is
    // marked in progress, so that call goes on without it.
    unsafe { libc::pthread_atfork(Some(prepare), Some(parent), Some(child)) };
}

/// Before `fork`: the trace's lock, then the allocator's (the order the traced paths
/// take them in).
extern "C" fn prepare() {
    trace::lock();
    COMMON.lock_all();
}

/// After `fork`, in the parent.
extern "C" fn parent() {
    // SAFETY: `prepare` took every lock on this thread.
    unsafe { COMMON.unlock_all() };
    trace::unlock();
}

/// After `fork`, in the child: the locks the forking thread took are the child's,
/// and it has no purger.
extern "C" fn child() {
    // SAFETY: `prepare` took every lock on the thread that is now the child's only
    // one.
    unsafe { COMMON.unlock_all() };
    trace::forked_child();
    retain::forked_child();
}
