//! The purger: a thread that gives kept memory back while the program is idle, for an
//! allocator nobody ticks and whose slow paths stop running (a tool waiting for
//! input, a server between requests).

use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::{self, JoinHandle};
use std::time::Duration;

use bento_pages::{Decay, PageSource, Retention};

use super::CommonAllocator;

/// How long the purger sleeps while nothing is kept, or when the retention reads no
/// clock: memory kept later waits at most this much more than the decay time.
const IDLE_WAIT_MS: u64 = 1000;

/// The stack of the purger's thread: it calls [`CommonAllocator::decay`] and sleeps.
const STACK: usize = 64 << 10;

/// A running purger (see [`CommonAllocator::spawn_purger`]). Dropping it stops the
/// thread and waits for it; [`detach`](Self::detach) leaves it running for the life
/// of the process.
#[derive(Debug)]
#[must_use = "dropping a `Purger` stops it at once; call `detach()` to keep it running"]
pub struct Purger {
    stop: Arc<AtomicBool>,
    // Invariant: `Some` until `drop` joins it or `detach` lets it go.
    thread: Option<JoinHandle<()>>,
}

impl Purger {
    /// Leaves the thread running until the process ends.
    ///
    /// ```
    /// use bento_common::CommonAllocator;
    ///
    /// static COMMON: CommonAllocator = CommonAllocator::new();
    /// COMMON.spawn_purger().expect("a thread").detach();
    /// ```
    pub fn detach(mut self) {
        drop(self.thread.take());
    }
}

impl Drop for Purger {
    fn drop(&mut self) {
        if let Some(thread) = self.thread.take() {
            self.stop.store(true, Ordering::Release);
            thread.thread().unpark();
            // The thread only calls `decay` and sleeps: it returns once woken.
            let _ = thread.join();
        }
    }
}

impl<P: PageSource + Send + Sync + 'static> CommonAllocator<P> {
    /// Starts a thread named `bento-purge` that calls [`decay`](Self::decay) while the
    /// program runs: what stays unused for the decay time goes back even when the
    /// program makes no allocation. It wakes every quarter of the decay's
    /// milliseconds while memory is kept (at least once a millisecond), once a decay
    /// time (at most a second) while none is, and once a second under a retention
    /// that reads no clock; it allocates nothing once started, and takes the
    /// allocator's locks only inside `decay`.
    ///
    /// A program that ticks ([`tick`](Self::tick)) under a decay counted in frames
    /// needs no purger (once it ticks, frames rule and `decay` does nothing); a
    /// program that never waits gets the same from the allocator's slow paths.
    ///
    /// # Errors
    ///
    /// The OS's error when the thread cannot be created.
    ///
    /// ```
    /// use core::alloc::Layout;
    /// use bento_common::{CommonAllocator, CommonConfig};
    /// use bento_pages::{Decay, Retention};
    ///
    /// static COMMON: CommonAllocator = CommonAllocator::with_config(
    ///     CommonConfig::DEFAULT.with_retention(Retention::Decay(Decay::millis(20))),
    /// );
    ///
    /// let purger = COMMON.spawn_purger().unwrap();
    /// let layout = Layout::from_size_align(4 << 20, 16).unwrap();
    /// let p = COMMON.alloc(layout).unwrap();
    /// // SAFETY: live, freed once.
    /// unsafe { COMMON.dealloc(p, layout) };
    /// // The program waits; the purger gives the megabytes back.
    /// while COMMON.kept() > 0 {
    ///     std::thread::sleep(std::time::Duration::from_millis(5));
    /// }
    /// drop(purger);
    /// ```
    pub fn spawn_purger(&'static self) -> io::Result<Purger> {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let thread = thread::Builder::new()
            .name("bento-purge".into())
            .stack_size(STACK)
            .spawn(move || {
                while !flag.load(Ordering::Acquire) {
                    thread::park_timeout(self.purge_wait());
                    if flag.load(Ordering::Acquire) {
                        break;
                    }
                    self.decay();
                }
            })?;
        Ok(Purger {
            stop,
            thread: Some(thread),
        })
    }

    /// How long the purger sleeps before its next look at the clock.
    fn purge_wait(&self) -> Duration {
        let retention = self.started().map(|inner| inner.layer.cache.retention());
        let millis = match retention {
            Some(Retention::Decay(Decay {
                millis,
                clock: Some(_),
                ..
            })) if millis > 0 => u64::from(millis),
            // No clock to read: a look once a second, should the policy change.
            _ => return Duration::from_millis(IDLE_WAIT_MS),
        };
        let wait = if self.kept() > 0 {
            (millis / 4).max(1)
        } else {
            millis.min(IDLE_WAIT_MS)
        };
        Duration::from_millis(wait)
    }
}
