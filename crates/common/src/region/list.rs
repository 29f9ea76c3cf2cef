//! An intrusive doubly linked list ([`List`]) of nodes whose first field is their
//! [`Links`]: the runs and spans of a class region.

use core::ptr::{self, NonNull};

/// The links of a node of a [`List`].
#[repr(C)]
pub(crate) struct Links<T> {
    pub(crate) next: *mut T,
    pub(crate) prev: *mut T,
}

/// A node of an intrusive doubly linked list: its `Links` are its first field.
pub(crate) trait Node: Sized {}

/// An intrusive doubly linked list of runs or spans, null-terminated.
pub(crate) struct List<T> {
    // Invariant: null or the first of `len` valid nodes linked through their `Links`,
    // each on this list only.
    pub(crate) head: *mut T,
    pub(crate) len: usize,
}

impl<T: Node> List<T> {
    pub(crate) const fn new() -> Self {
        Self {
            head: ptr::null_mut(),
            len: 0,
        }
    }

    /// Puts `node` first.
    ///
    /// # Safety
    ///
    /// `node` is a valid node on no list.
    pub(crate) unsafe fn push(&mut self, node: *mut T) {
        let links = node.cast::<Links<T>>();
        // SAFETY: `node` is valid (the caller's contract), and so is the head (the
        // list's invariant); a node's links are its first field (`repr(C)`).
        unsafe {
            (*links).next = self.head;
            (*links).prev = ptr::null_mut();
            if !self.head.is_null() {
                (*self.head.cast::<Links<T>>()).prev = node;
            }
        }
        self.head = node;
        self.len += 1;
    }

    /// Takes `node` off.
    ///
    /// # Safety
    ///
    /// `node` is on this list.
    pub(crate) unsafe fn remove(&mut self, node: *mut T) {
        // SAFETY: `node` and its neighbours are nodes of this list (its invariant).
        unsafe {
            let links = node.cast::<Links<T>>();
            let (next, prev) = ((*links).next, (*links).prev);
            if prev.is_null() {
                self.head = next;
            } else {
                (*prev.cast::<Links<T>>()).next = next;
            }
            if !next.is_null() {
                (*next.cast::<Links<T>>()).prev = prev;
            }
        }
        self.len -= 1;
    }

    /// The nodes, first to last (at most `len`, so a broken list ends the walk).
    pub(crate) fn iter(&self) -> impl Iterator<Item = *mut T> + '_ {
        let mut p = self.head;
        (0..self.len).map_while(move |_| {
            let node = NonNull::new(p)?;
            // SAFETY: a node of this list (its invariant).
            p = unsafe { (*node.as_ptr().cast::<Links<T>>()).next };
            Some(node.as_ptr())
        })
    }
}
