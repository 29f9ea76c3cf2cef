//! What the loom models of every crate share (only under `--cfg bento_loom`, which
//! `cargo xtask loom` sets): running a body on several model threads and joining them.

use std::rc::Rc;
use std::vec::Vec;

/// Runs `body(i)` for `i` in `1..=n`, each on its own loom thread of the current model,
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
            let body = Rc::clone(&body);
            loom::thread::spawn(move || body(i))
        })
        .collect();
    handles
        .into_iter()
        .map(|h| h.join().expect("a model thread panicked"))
        .collect()
}
