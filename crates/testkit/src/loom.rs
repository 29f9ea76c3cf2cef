//! What the loom models of every crate share (only under `--cfg bento_loom`, which
//! `cargo xtask loom` sets): running a body on several model threads and joining them.

use std::rc::Rc;
use std::vec::Vec;

/// A value that crosses between loom's model threads, which all run on one OS
/// thread: loom's `Builder::spawn` asks for `Send`, which it does not need.
struct OneOsThread<T>(T);

// SAFETY: loom runs every thread of a model as a coroutine on the OS thread that
// called `loom::model`, so the value never reaches another OS thread.
unsafe impl<T> Send for OneOsThread<T> {}

/// The stack of a model thread: loom's default (32 KiB) is too small for an
/// allocator that builds its tables on the first call.
const STACK: usize = 1 << 20;

/// Runs `body(i)` for `i` in `1..=n`, each on its own loom thread of the current model
/// (with a stack of 1 MiB),
/// and returns the results in that order once every thread has joined. A panic in a
/// thread fails the model. Loom runs a model's threads on one OS thread, so neither
/// `body` nor its results need be `Send`.
///
/// ```ignore
/// loom::model(|| {
///     let counter = loom::sync::Arc::new(loom::sync::atomic::AtomicU32::new(0));
///     let c = counter.clone();
///     bento_testkit::loom::in_threads(2, move |_| c.fetch_add(1, Ordering::Relaxed));
///     assert_eq!(counter.load(Ordering::Relaxed), 2);
/// });
/// ```
pub fn in_threads<T, F>(n: usize, body: F) -> Vec<T>
where
    T: 'static,
    F: Fn(usize) -> T + 'static,
{
    let body = Rc::new(body);
    let handles: Vec<_> = (1..=n)
        .map(|i| {
            let body = OneOsThread(Rc::clone(&body));
            loom::thread::Builder::new()
                .stack_size(STACK)
                .spawn(move || {
                    // The whole wrapper moves in, not its field alone.
                    let body = body;
                    OneOsThread((body.0)(i))
                })
                .expect("loom spawns a model thread")
        })
        .collect();
    handles
        .into_iter()
        .map(|h| h.join().expect("a model thread panicked").0)
        .collect()
}
