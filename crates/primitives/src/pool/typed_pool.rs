//! `TypedPool<T>`: a pool of chunks for `T`, handing out boxes that drop their value
//! and return their chunk.

use core::alloc::Layout;
use core::fmt;
use core::marker::PhantomData;
use core::mem::{ManuallyDrop, MaybeUninit};
use core::ops::{Deref, DerefMut};
use core::ptr::NonNull;

use bento_pages::MisuseHook;

use crate::pool::fixed_pool::Pool;
use crate::pool::free_list::{PoolCorruption, PoolReport};
use crate::pool::geometry::PoolError;
use crate::pool::leaks::LeakList;

/// A pool of chunks that each hold one `T`: [`alloc`](Self::alloc) moves a value in and
/// returns a [`PoolBox`], which drops the value and gives the chunk back when it is
/// dropped. The boxes borrow the pool, so the pool outlives them.
///
/// ```
/// use bento_primitives::TypedPool;
/// use core::mem::MaybeUninit;
///
/// struct Bullet { x: f32, y: f32, speed: f32 }
///
/// let mut buf = [MaybeUninit::uninit(); 4096];
/// let pool = TypedPool::<Bullet>::new(&mut buf).unwrap();
/// let mut b = pool.alloc(Bullet { x: 0.0, y: 0.0, speed: 2.0 }).ok().unwrap();
/// b.x += b.speed;
/// assert_eq!(b.x, 2.0);
/// assert_eq!(pool.in_use(), 1);
/// drop(b);
/// assert_eq!(pool.in_use(), 0);
/// ```
///
/// A box cannot outlive its pool:
///
/// ```compile_fail,E0597
/// use bento_primitives::TypedPool;
/// use core::mem::MaybeUninit;
///
/// let mut buf = [MaybeUninit::uninit(); 256];
/// let b = {
///     let pool = TypedPool::<u32>::new(&mut buf).unwrap();
///     pool.alloc(7).ok().unwrap() // error: `pool` does not live long enough
/// };
/// ```
pub struct TypedPool<'buf, T> {
    pool: Pool<'buf>,
    _values: PhantomData<T>,
}

impl<'buf, T> TypedPool<'buf, T> {
    /// A pool of chunks for `T` in `buf` (at least a pointer each, aligned for `T`).
    ///
    /// # Errors
    ///
    /// [`PoolError::NoChunkFits`] when not one `T` fits.
    ///
    /// ```
    /// use bento_primitives::TypedPool;
    /// use core::mem::MaybeUninit;
    ///
    /// let mut buf = [MaybeUninit::uninit(); 8];
    /// assert!(TypedPool::<[u64; 2]>::new(&mut buf).is_err());
    /// ```
    pub fn new(buf: &'buf mut [MaybeUninit<u8>]) -> Result<Self, PoolError> {
        Ok(Self {
            pool: Pool::new(buf, Layout::new::<T>())?,
            _values: PhantomData,
        })
    }

    /// Moves `value` into a chunk, or hands it back when every chunk is in use.
    ///
    /// # Errors
    ///
    /// `Err(value)` when the pool is full.
    ///
    /// ```
    /// use bento_primitives::TypedPool;
    /// use core::mem::MaybeUninit;
    ///
    /// let mut buf = [MaybeUninit::uninit(); 16];
    /// let pool = TypedPool::<u64>::new(&mut buf).unwrap();
    /// let _a = pool.alloc(1).ok().unwrap();
    /// # let _b = pool.alloc(2).ok();
    /// # let _c = pool.alloc(3).ok();
    /// assert!(matches!(pool.alloc(9).map(|_| ()), Err(9)));
    /// ```
    #[inline]
    pub fn alloc(&self, value: T) -> Result<PoolBox<'_, T>, T> {
        match self.pool.alloc() {
            Some(chunk) => {
                let ptr = chunk.cast::<T>();
                // SAFETY: a fresh chunk of ours, sized and aligned for `T`.
                unsafe { ptr.write(value) };
                Ok(PoolBox {
                    ptr,
                    pool: &self.pool,
                    _value: PhantomData,
                })
            }
            None => Err(value),
        }
    }

    /// How many values the pool holds.
    ///
    /// ```
    /// use bento_primitives::TypedPool;
    /// use core::mem::MaybeUninit;
    ///
    /// # #[repr(align(8))] struct Buf([MaybeUninit<u8>; 64]);
    /// let mut buf = Buf([MaybeUninit::uninit(); 64]);
    /// assert_eq!(TypedPool::<u64>::new(&mut buf.0).unwrap().capacity(), 8);
    /// ```
    #[must_use]
    pub fn capacity(&self) -> usize {
        self.pool.capacity()
    }

    /// How many chunks are free.
    ///
    /// O(1) in debug builds and with the `counters` feature, which count every
    /// allocation and free; otherwise the pool keeps no count (it would cost each
    /// operation a read-modify-write) and this walks the free list, O(free chunks).
    ///
    /// ```
    /// use bento_primitives::TypedPool;
    /// use core::mem::MaybeUninit;
    ///
    /// let mut buf = [MaybeUninit::uninit(); 64];
    /// let pool = TypedPool::<u64>::new(&mut buf).unwrap();
    /// let _a = pool.alloc(1).ok().unwrap();
    /// assert_eq!(pool.available(), pool.capacity() - 1);
    /// ```
    #[must_use]
    pub fn available(&self) -> usize {
        self.pool.available()
    }

    /// How many values are alive.
    ///
    /// O(1) in debug builds and with the `counters` feature, which count every
    /// allocation and free; otherwise the pool keeps no count (it would cost each
    /// operation a read-modify-write) and this walks the free list, O(free chunks).
    ///
    /// ```
    /// use bento_primitives::TypedPool;
    /// use core::mem::MaybeUninit;
    ///
    /// let mut buf = [MaybeUninit::uninit(); 64];
    /// let pool = TypedPool::<u64>::new(&mut buf).unwrap();
    /// assert_eq!(pool.in_use(), 0);
    /// ```
    #[must_use]
    pub fn in_use(&self) -> usize {
        self.pool.in_use()
    }

    /// Sets what the debug checks call on misuse (see [`Pool::set_misuse_hook`]).
    ///
    /// ```
    /// use bento_primitives::{Misuse, TypedPool};
    /// use core::mem::MaybeUninit;
    ///
    /// fn quiet(_: &Misuse<'_>) {}
    /// let mut buf = [MaybeUninit::uninit(); 64];
    /// let mut pool = TypedPool::<u64>::new(&mut buf).unwrap();
    /// pool.set_misuse_hook(quiet);
    /// ```
    pub fn set_misuse_hook(&mut self, hook: MisuseHook) {
        self.pool.set_misuse_hook(hook);
    }

    /// Checks the pool's free list (see [`Pool::validate`]).
    ///
    /// # Errors
    ///
    /// [`PoolCorruption`] naming what is broken.
    ///
    /// ```
    /// use bento_primitives::TypedPool;
    /// use core::mem::MaybeUninit;
    ///
    /// let mut buf = [MaybeUninit::uninit(); 64];
    /// let pool = TypedPool::<u64>::new(&mut buf).unwrap();
    /// let _a = pool.alloc(5).ok().unwrap();
    /// assert_eq!(pool.validate().unwrap().in_use, 1);
    /// ```
    pub fn validate(&self) -> Result<PoolReport, PoolCorruption> {
        self.pool.validate()
    }

    /// The chunks whose values are alive (leaked boxes, raw pointers not yet turned
    /// back into boxes), in address order; see [`Pool::live_chunks`].
    ///
    /// ```
    /// use bento_primitives::{PoolBox, TypedPool};
    /// use core::mem::MaybeUninit;
    ///
    /// let mut buf = [MaybeUninit::uninit(); 64];
    /// let mut pool = TypedPool::<u64>::new(&mut buf).unwrap();
    /// let raw = PoolBox::into_raw(pool.alloc(5).ok().unwrap());
    /// assert_eq!(pool.live_chunks().iter().next(), Some(raw.cast()));
    /// // SAFETY: `raw` came from `into_raw` on a box of this pool.
    /// drop(unsafe { PoolBox::from_raw(&pool, raw) });
    /// ```
    pub fn live_chunks(&mut self) -> LeakList<'_> {
        self.pool.live_chunks()
    }
}

impl<T> fmt::Debug for TypedPool<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TypedPool")
            .field("type", &core::any::type_name::<T>())
            .field("pool", &self.pool)
            .finish()
    }
}

/// A value in a chunk of a [`TypedPool`]; dropping it drops the value and gives the
/// chunk back.
///
/// ```
/// use bento_primitives::TypedPool;
/// use core::mem::MaybeUninit;
///
/// let mut buf = [MaybeUninit::uninit(); 256];
/// let pool = TypedPool::<String>::new(&mut buf).unwrap();
/// let mut name = pool.alloc(String::from("ada")).ok().unwrap();
/// name.push_str(" lovelace");
/// assert_eq!(*name, "ada lovelace");
/// ```
pub struct PoolBox<'a, T> {
    // Invariant: a chunk of `pool` holding an initialised `T` that this box owns.
    ptr: NonNull<T>,
    pool: &'a Pool<'a>,
    _value: PhantomData<T>,
}

impl<'a, T> PoolBox<'a, T> {
    /// Gives up the box without dropping the value or freeing the chunk; the pointer
    /// goes back into a box with [`from_raw`](Self::from_raw).
    ///
    /// ```
    /// use bento_primitives::{PoolBox, TypedPool};
    /// use core::mem::MaybeUninit;
    ///
    /// let mut buf = [MaybeUninit::uninit(); 64];
    /// let pool = TypedPool::<u32>::new(&mut buf).unwrap();
    /// let raw = PoolBox::into_raw(pool.alloc(41).ok().unwrap());
    /// // SAFETY: `raw` came from `into_raw` on a box of this pool, and is used once.
    /// let b = unsafe { PoolBox::from_raw(&pool, raw) };
    /// assert_eq!(*b + 1, 42);
    /// ```
    #[must_use = "the value and its chunk leak unless the pointer goes back into a box"]
    pub fn into_raw(b: Self) -> NonNull<T> {
        ManuallyDrop::new(b).ptr
    }

    /// Takes back a pointer from [`into_raw`](Self::into_raw).
    ///
    /// # Safety
    ///
    /// The caller must ensure that `ptr` was returned by `into_raw` on a box of `pool`
    /// and has not been turned back into a box since.
    ///
    /// ```
    /// use bento_primitives::{PoolBox, TypedPool};
    /// use core::mem::MaybeUninit;
    ///
    /// let mut buf = [MaybeUninit::uninit(); 64];
    /// let pool = TypedPool::<u8>::new(&mut buf).unwrap();
    /// let raw = PoolBox::into_raw(pool.alloc(1).ok().unwrap());
    /// // SAFETY: from `into_raw` on this pool, once.
    /// drop(unsafe { PoolBox::from_raw(&pool, raw) });
    /// assert_eq!(pool.in_use(), 0);
    /// ```
    pub unsafe fn from_raw(pool: &'a TypedPool<'_, T>, ptr: NonNull<T>) -> Self {
        debug_assert!(
            pool.pool.contains(ptr.cast()),
            "PoolBox::from_raw: {ptr:p} is not a chunk of this pool"
        );
        Self {
            ptr,
            pool: &pool.pool,
            _value: PhantomData,
        }
    }
}

impl<T> Deref for PoolBox<'_, T> {
    type Target = T;

    fn deref(&self) -> &T {
        // SAFETY: the box owns an initialised `T` in its chunk.
        unsafe { self.ptr.as_ref() }
    }
}

impl<T> DerefMut for PoolBox<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: the box owns an initialised `T` in its chunk, and `&mut self` makes
        // this the only reference.
        unsafe { self.ptr.as_mut() }
    }
}

impl<T> Drop for PoolBox<'_, T> {
    fn drop(&mut self) {
        /// Frees the chunk when dropped, so that it comes back even if `T::drop`
        /// panics.
        struct FreeChunk<'a>(&'a Pool<'a>, NonNull<u8>);

        impl Drop for FreeChunk<'_> {
            fn drop(&mut self) {
                // SAFETY: the box's chunk, given up with the box and never used again.
                unsafe { self.0.free(self.1) };
            }
        }

        let _free = FreeChunk(self.pool, self.ptr.cast());
        // SAFETY: the box owns the initialised `T`, dropped once here.
        unsafe { self.ptr.drop_in_place() };
    }
}

impl<T: fmt::Debug> fmt::Debug for PoolBox<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&**self, f)
    }
}

#[cfg(test)]
mod tests {
    use core::cell::Cell;
    use std::prelude::rust_2024::*;

    use super::*;

    /// Counts its drops.
    struct Counted<'c>(&'c Cell<usize>);

    impl Drop for Counted<'_> {
        fn drop(&mut self) {
            self.0.set(self.0.get() + 1);
        }
    }

    #[test]
    fn dropping_a_box_drops_the_value_once_and_frees_the_chunk() {
        let drops = Cell::new(0);
        let mut buf = [MaybeUninit::uninit(); 256];
        let pool = TypedPool::<Counted<'_>>::new(&mut buf).unwrap();
        let a = pool.alloc(Counted(&drops)).ok().unwrap();
        let b = pool.alloc(Counted(&drops)).ok().unwrap();
        drop(a);
        assert_eq!((drops.get(), pool.in_use()), (1, 1));
        let raw = PoolBox::into_raw(b);
        assert_eq!((drops.get(), pool.in_use()), (1, 1));
        // SAFETY: from `into_raw` on this pool, once.
        drop(unsafe { PoolBox::from_raw(&pool, raw) });
        assert_eq!((drops.get(), pool.in_use()), (2, 0));
        assert_eq!(pool.validate().unwrap().free_listed, 2);
    }

    #[test]
    fn a_full_pool_hands_the_value_back() {
        let drops = Cell::new(0);
        let mut buf = [MaybeUninit::uninit(); 64];
        let pool = TypedPool::<Counted<'_>>::new(&mut buf).unwrap();
        let held: Vec<_> = (0..pool.capacity())
            .map(|_| pool.alloc(Counted(&drops)).ok().expect("a chunk is free"))
            .collect();
        let back = pool.alloc(Counted(&drops)).err().expect("the pool is full");
        assert_eq!(drops.get(), 0, "the value handed back is not dropped");
        drop(back);
        drop(held);
        assert_eq!(drops.get(), pool.capacity() + 1);
    }
}
