use std::prelude::rust_2024::*;

use core::cell::Cell;
use core::ptr::NonNull;

use super::*;

/// A free list over plain indices, as `Links` sees it.
struct VecLinks(Vec<Cell<Option<usize>>>);

impl Links for VecLinks {
    fn next(&self, index: usize) -> Option<usize> {
        self.0[index].get()
    }

    fn set_next(&self, index: usize, next: Option<usize>) {
        self.0[index].set(next);
    }

    fn chunk(&self, index: usize) -> NonNull<u8> {
        NonNull::without_provenance(core::num::NonZeroUsize::new(0x1000 + index * 16).unwrap())
    }
}

/// Threads `order` into a list and returns the links and its head.
fn list(len: usize, order: &[usize]) -> (VecLinks, Option<usize>) {
    let links = VecLinks((0..len).map(|_| Cell::new(None)).collect());
    for pair in order.windows(2) {
        links.set_next(pair[0], Some(pair[1]));
    }
    (links, order.first().copied())
}

fn collect(links: &VecLinks, mut head: Option<usize>) -> Vec<usize> {
    let mut out = Vec::new();
    while let Some(i) = head {
        out.push(i);
        head = links.next(i);
        assert!(out.len() <= links.0.len(), "the sorted list has a cycle");
    }
    out
}

#[test]
#[cfg_attr(miri, ignore = "safe code: nothing for Miri to check")]
fn sort_orders_every_permutation_of_small_lists() {
    // Every length up to 6, every order: the sort is exact on all of them.
    fn permutations(items: &mut Vec<usize>, k: usize, out: &mut Vec<Vec<usize>>) {
        if k == items.len() {
            out.push(items.clone());
            return;
        }
        for i in k..items.len() {
            items.swap(k, i);
            permutations(items, k + 1, out);
            items.swap(k, i);
        }
    }
    for len in 0..=6 {
        let mut all = Vec::new();
        permutations(&mut (0..len).collect(), 0, &mut all);
        for order in all {
            let (links, head) = list(len, &order);
            let sorted = collect(&links, sort_list(&links, head));
            assert_eq!(sorted, (0..len).collect::<Vec<_>>(), "from {order:?}");
        }
    }
}

#[test]
fn sort_keeps_a_sparse_subset() {
    // A free list holding some chunks only, in a scrambled order.
    let order: Vec<usize> = (0..cases(300, 40)).map(|i| (i * 7919) % 1000).collect();
    let (links, head) = list(1000, &order);
    let sorted = collect(&links, sort_list(&links, head));
    let mut expect = order.clone();
    expect.sort_unstable();
    assert_eq!(sorted, expect);
}

#[test]
fn leak_list_skips_the_sorted_free_chunks() {
    let (links, head) = list(8, &[1, 4, 5, 7]);
    let leaks = LeakList::new(&links, head, 8, 4);
    let found: Vec<usize> = leaks
        .iter()
        .map(|p| (p.addr().get() - 0x1000) / 16)
        .collect();
    assert_eq!(found, [0, 2, 3, 6]);
    assert_eq!(leaks.len(), 4);
    let message = leaks.to_string();
    assert!(
        message.starts_with("pool dropped with 4 chunk(s) in use: 0x1000"),
        "{message}"
    );
}

const fn cases(native: usize, miri: usize) -> usize {
    if cfg!(miri) { miri } else { native }
}
