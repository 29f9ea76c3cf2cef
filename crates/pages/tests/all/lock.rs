use std::sync::Arc;

use bento_pages::lock::{RawSpinLock, SpinMutex};

#[test]
fn try_lock_fails_while_held() {
    let lock = RawSpinLock::new();
    lock.lock();
    assert!(lock.is_locked());
    assert!(!lock.try_lock());
    // SAFETY: this thread holds the lock.
    unsafe { lock.unlock() };
    assert!(lock.try_lock());
    // SAFETY: as above.
    unsafe { lock.unlock() };
}

#[test]
fn the_mutex_serialises_threads() {
    let threads = 4;
    let per_thread = if cfg!(miri) { 50 } else { 20_000 };
    let counter = Arc::new(SpinMutex::new(0u64));
    let handles: Vec<_> = (0..threads)
        .map(|_| {
            let counter = Arc::clone(&counter);
            std::thread::spawn(move || {
                for _ in 0..per_thread {
                    // A read-modify-write that loses updates without mutual exclusion.
                    let mut guard = counter.lock();
                    let v = *guard;
                    std::hint::black_box(&v);
                    *guard = v + 1;
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    assert_eq!(*counter.lock(), threads * per_thread);
}

#[test]
fn a_static_mutex_needs_no_allocation() {
    static TABLE: SpinMutex<[u32; 4]> = SpinMutex::new([0; 4]);
    TABLE.lock()[2] = 5;
    assert_eq!(TABLE.lock()[2], 5);
    assert!(TABLE.try_lock().is_some());
}
