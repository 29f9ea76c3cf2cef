//! The sink: events in the order the blocks changed hands, a resize announced before
//! the inner allocator may free the old address.

use core::alloc::Layout;
use core::ptr::NonNull;
use std::sync::{Arc, Mutex};

use allocator_api2::alloc::{AllocError, Allocator, Global};
use bento_heap::{EventKind, EventSink, HeapEvent};

use crate::unregistered;

/// What happened, in order: the sink's calls and the inner allocator's.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Step {
    Begin(usize),
    Failed(usize),
    HeapEvent(EventKind, usize),
    InnerGrow(usize),
    InnerShrink(usize),
}

#[derive(Default)]
struct Log(Mutex<Vec<Step>>);

impl Log {
    fn push(&self, step: Step) {
        self.0.lock().unwrap().push(step);
    }

    fn take(&self) -> Vec<Step> {
        core::mem::take(&mut *self.0.lock().unwrap())
    }
}

impl EventSink for Log {
    fn event(&self, event: &HeapEvent) {
        self.push(Step::HeapEvent(event.kind, event.addr));
    }

    fn resize_begin(&self, _heap: &'static str, addr: usize) {
        self.push(Step::Begin(addr));
    }

    fn resize_failed(&self, _heap: &'static str, addr: usize) {
        self.push(Step::Failed(addr));
    }
}

/// `Global`, writing its grows and shrinks in the log; a grow to `refuse` bytes fails.
struct Logged<'a> {
    log: &'a Log,
    refuse: usize,
}

// SAFETY: every block comes from `Global` and goes back to it.
unsafe impl Allocator for &Logged<'_> {
    fn allocate(&self, layout: Layout) -> Result<NonNull<[u8]>, AllocError> {
        Global.allocate(layout)
    }

    unsafe fn deallocate(&self, ptr: NonNull<u8>, layout: Layout) {
        // SAFETY: the caller's contract.
        unsafe { Global.deallocate(ptr, layout) }
    }

    unsafe fn grow(
        &self,
        ptr: NonNull<u8>,
        old: Layout,
        new: Layout,
    ) -> Result<NonNull<[u8]>, AllocError> {
        self.log.push(Step::InnerGrow(ptr.addr().get()));
        if new.size() == self.refuse {
            return Err(AllocError);
        }
        // SAFETY: the caller's contract.
        unsafe { Global.grow(ptr, old, new) }
    }

    unsafe fn shrink(
        &self,
        ptr: NonNull<u8>,
        old: Layout,
        new: Layout,
    ) -> Result<NonNull<[u8]>, AllocError> {
        self.log.push(Step::InnerShrink(ptr.addr().get()));
        // SAFETY: the caller's contract.
        unsafe { Global.shrink(ptr, old, new) }
    }
}

#[test]
fn a_resize_is_announced_before_the_inner_allocator_may_free_the_old_address() {
    let log = Arc::new(Log::default());
    let inner = Logged {
        log: &log,
        refuse: 4000,
    };
    let heap = unregistered("sink-order").sink(log.clone()).build(&inner);
    let small = Layout::from_size_align(16, 8).unwrap();
    let big = Layout::from_size_align(2000, 8).unwrap();
    let p = heap.alloc(small).unwrap();
    let a = p.addr().get();
    // SAFETY: live with `small`.
    let q = unsafe { (&heap).grow(p, small, big) }.unwrap().cast::<u8>();
    let b = q.addr().get();
    // SAFETY: live with `big`.
    let r = unsafe { (&heap).shrink(q, big, small) }
        .unwrap()
        .cast::<u8>();
    let c = r.addr().get();
    let realloc = |old_addr, old_size| EventKind::Realloc { old_addr, old_size };
    assert_eq!(
        log.take(),
        [
            Step::HeapEvent(EventKind::Alloc, a),
            Step::Begin(a),
            Step::InnerGrow(a),
            Step::HeapEvent(realloc(a, 16), b),
            Step::Begin(b),
            Step::InnerShrink(b),
            Step::HeapEvent(realloc(b, 2000), c),
        ]
    );
    // A refused grow: announced, then called off; the block is where it was.
    let huge = Layout::from_size_align(4000, 8).unwrap();
    // SAFETY: live with `small`.
    assert!(unsafe { (&heap).grow(r, small, huge) }.is_err());
    assert_eq!(
        log.take(),
        [Step::Begin(c), Step::InnerGrow(c), Step::Failed(c)]
    );
    // SAFETY: live with `small`.
    unsafe { heap.free(r, small) };
    assert_eq!(log.take(), [Step::HeapEvent(EventKind::Free, c)]);
}
