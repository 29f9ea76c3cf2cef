//! Real containers on a space: `Vec`, `Box` and `hashbrown::HashMap` on `&MemorySpace`
//! and, across threads, on `&LockedSpace`.

use allocator_api2::boxed::Box;
use allocator_api2::vec::Vec;
use bento_pages::{HeapPages, Metered};
use bento_space::{MemorySpace, SpinSpace};
use bento_testkit::cases;
use hashbrown::HashMap;

use crate::SMALL;

#[test]
fn containers_on_a_space() {
    let pages = Metered::new(HeapPages::new());
    let space = MemorySpace::new(&pages, SMALL).unwrap();
    {
        let n = cases(20_000, 100) as u64;
        let mut map: HashMap<u64, Vec<u64, &MemorySpace<_>>, _, _> =
            HashMap::with_capacity_in(4, &space);
        for i in 0..n {
            let mut v = Vec::new_in(&space);
            v.extend(0..i % 17);
            map.insert(i, v);
        }
        let boxed = Box::new_in([7u8; 30_000], &space);
        assert_eq!(map.len() as u64, n);
        assert!((0..n).all(|i| map[&i].len() as u64 == i % 17));
        assert_eq!(boxed[29_999], 7);
        space.validate().unwrap();
        assert!(space.stats().live_blocks as u64 > n / 2);
    }
    assert_eq!(space.stats().live_blocks, 0);
    assert_eq!(pages.stats().reserved, 0);
}

#[test]
fn containers_on_a_locked_space_across_four_threads() {
    let pages = Metered::new(HeapPages::new());
    let space = SpinSpace::new(MemorySpace::new(&pages, SMALL).unwrap());
    let n = cases(5_000, 50) as u32;
    std::thread::scope(|s| {
        for t in 0..4u32 {
            let space = &space;
            s.spawn(move || {
                let mut map = HashMap::new_in(space);
                let mut v: Vec<u32, _> = Vec::new_in(space);
                for i in 0..n {
                    map.insert(i, i * t);
                    v.push(i);
                    if i % 64 == 0 {
                        v.shrink_to_fit();
                    }
                }
                assert!((0..n).all(|i| map[&i] == i * t));
                assert_eq!(v.iter().sum::<u32>(), (0..n).sum::<u32>());
            });
        }
    });
    let space = space.into_inner();
    space.validate().unwrap();
    assert_eq!(space.stats().live_blocks, 0);
    assert_eq!(pages.stats().reserved, 0);
}
