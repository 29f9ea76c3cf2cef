//! The chunks a pool still has in use ([`LeakList`]), found from its free list sorted
//! in place (also how `GrowingPool::shrink` finds the free tail).

use core::fmt;
use core::ptr::NonNull;

use bento_pages::Leaks;

/// Access to a free list threaded through chunk indices, for the in-place sort.
pub(crate) trait Links {
    /// The chunk after `index` in the list.
    fn next(&self, index: usize) -> Option<usize>;
    /// Makes `next` follow `index`.
    fn set_next(&self, index: usize, next: Option<usize>);
    /// The chunk at `index` (for leak lists).
    fn chunk(&self, index: usize) -> NonNull<u8>;
}

/// Sorts the list starting at `head` by index, in place and with O(1) extra memory (a
/// bottom-up merge sort of linked runs), and returns the new head. O(n log n).
pub(crate) fn sort_list(links: &dyn Links, head: Option<usize>) -> Option<usize> {
    let mut list = head;
    let mut run = 1usize;
    loop {
        let mut rest = list;
        let mut tail: Option<usize> = None;
        list = None;
        let mut merges = 0usize;
        while let Some(first) = rest {
            merges += 1;
            // `left` is the run from `first`, `right` the run after it.
            let mut left = Some(first);
            let mut left_len = 0usize;
            let mut right = Some(first);
            while left_len < run {
                left_len += 1;
                right = links.next(right.expect("inside the left run"));
                if right.is_none() {
                    break;
                }
            }
            let mut right_len = run;
            loop {
                let right_open = right_len > 0 && right.is_some();
                let take = match (left_len > 0, right_open) {
                    (false, false) => break,
                    (true, false) => left,
                    (false, true) => right,
                    (true, true) => {
                        if left <= right {
                            left
                        } else {
                            right
                        }
                    }
                };
                let node = take.expect("an open run has a node");
                if take == left && left_len > 0 {
                    left = links.next(node);
                    left_len -= 1;
                } else {
                    right = links.next(node);
                    right_len -= 1;
                }
                match tail {
                    Some(t) => links.set_next(t, Some(node)),
                    None => list = Some(node),
                }
                tail = Some(node);
            }
            rest = right;
        }
        if let Some(t) = tail {
            links.set_next(t, None);
        }
        if merges <= 1 {
            return list;
        }
        run *= 2;
    }
}

/// The chunks of a pool still in use, computed from its free list sorted by address:
/// every chunk below the high-water mark that the list skips. Borrowing the pool
/// exclusively (or from its `Drop`), so nothing changes while it is read.
///
/// ```
/// use bento_primitives::Pool;
/// use core::alloc::Layout;
/// use core::mem::MaybeUninit;
///
/// let mut buf = [MaybeUninit::uninit(); 1024];
/// let mut pool = Pool::new(&mut buf, Layout::new::<u64>()).unwrap();
/// let a = pool.alloc().unwrap();
/// let b = pool.alloc().unwrap();
/// // SAFETY: `a` is a live chunk of `pool`.
/// unsafe { pool.free(a) };
/// let live = pool.live_chunks();
/// assert_eq!(live.len(), 1);
/// assert_eq!(live.iter().collect::<Vec<_>>(), [b]);
/// # unsafe { pool.free(b) };
/// ```
#[derive(Clone, Copy)]
pub struct LeakList<'a> {
    links: &'a dyn Links,
    // Invariant: the pool's free list, sorted by index, every index below `touched`.
    first_free: Option<usize>,
    touched: usize,
    count: usize,
}

impl<'a> LeakList<'a> {
    /// The leak list of the `touched` chunks of `links` whose free list, sorted, starts
    /// at `first_free` and holds `touched - count` chunks.
    pub(crate) fn new(
        links: &'a dyn Links,
        first_free: Option<usize>,
        touched: usize,
        count: usize,
    ) -> Self {
        Self {
            links,
            first_free,
            touched,
            count,
        }
    }

    /// How many chunks are in use.
    #[must_use]
    pub fn len(&self) -> usize {
        self.count
    }

    /// Whether no chunk is in use.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// The chunks in use, in address order.
    #[must_use]
    pub fn iter(&self) -> LeakIter<'a> {
        LeakIter {
            links: self.links,
            next_free: self.first_free,
            index: 0,
            touched: self.touched,
        }
    }
}

impl fmt::Debug for LeakList<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

/// Names the count and the first few chunks.
impl fmt::Display for LeakList<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const SHOWN: usize = 8;
        write!(f, "pool dropped with {} chunk(s) in use:", self.count)?;
        for chunk in self.iter().take(SHOWN) {
            write!(f, " {chunk:p}")?;
        }
        if self.count > SHOWN {
            write!(f, " and {} more", self.count - SHOWN)?;
        }
        Ok(())
    }
}

/// A pool's [`Misuse::Leaked`](bento_pages::Misuse::Leaked) report.
impl Leaks for LeakList<'_> {
    fn count(&self) -> usize {
        self.count
    }

    fn for_each(&self, visit: &mut dyn FnMut(NonNull<u8>)) {
        self.iter().for_each(visit);
    }
}

/// The iterator of [`LeakList::iter`].
#[derive(Clone)]
pub struct LeakIter<'a> {
    links: &'a dyn Links,
    next_free: Option<usize>,
    index: usize,
    touched: usize,
}

impl fmt::Debug for LeakIter<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LeakIter")
            .field("index", &self.index)
            .field("touched", &self.touched)
            .finish_non_exhaustive()
    }
}

impl Iterator for LeakIter<'_> {
    type Item = NonNull<u8>;

    fn next(&mut self) -> Option<NonNull<u8>> {
        while self.index < self.touched {
            let index = self.index;
            self.index += 1;
            if self.next_free == Some(index) {
                self.next_free = self.links.next(index);
            } else {
                return Some(self.links.chunk(index));
            }
        }
        None
    }
}

#[cfg(test)]
mod tests;
