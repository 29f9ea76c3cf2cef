//! The allocator a trace or a workload runs against: the [`ReplayTarget`] adaptor,
//! the adaptors of allocator-api2 and `GlobalAlloc` allocators to it, and
//! [`Wrapper`], a target made of another.

use std::alloc::{GlobalAlloc, Layout};
use std::ptr::NonNull;

use allocator_api2::alloc::Allocator;

/// What an allocator holds, by its own stats.
///
/// ```
/// use bento_trace::Footprint;
///
/// let f = Footprint { committed: 1 << 20, peak_committed: 2 << 20, reserved: 4 << 20, os_calls: 12 };
/// assert!(f.committed <= f.peak_committed && f.peak_committed <= f.reserved);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Footprint {
    /// Bytes committed (or otherwise held in memory) for the allocator.
    pub committed: usize,
    /// The most `committed` has been, as the allocator counts it (between samples
    /// too).
    pub peak_committed: usize,
    /// Bytes of address space it holds.
    pub reserved: usize,
    /// Calls it made to the operating system (reserve, commit, decommit, release).
    pub os_calls: u64,
}

/// An allocator a trace or a workload runs against: the one adaptor every allocator
/// is replayed through. [`ApiTarget`] makes any allocator-api2 `Allocator` one.
///
/// Every block is asked for with its tag (what it is for: see
/// [`workload::tags`](crate::workload::tags)) and given back with the layout and tag it
/// was made with, so that a target made of several allocators can route on the tag.
///
/// ```
/// use std::alloc::{GlobalAlloc, Layout, System};
/// use std::ptr::NonNull;
/// use bento_trace::ReplayTarget;
///
/// /// The system allocator as a target.
/// struct Sys;
///
/// impl ReplayTarget for Sys {
///     fn alloc(&mut self, layout: Layout, _tag: u32) -> Option<NonNull<u8>> {
///         // SAFETY: the trait promises a non-zero size.
///         NonNull::new(unsafe { System.alloc(layout) })
///     }
///     unsafe fn realloc(&mut self, p: NonNull<u8>, old: Layout, new: usize, _tag: u32) -> Option<NonNull<u8>> {
///         // SAFETY: the caller's contract: `p` is live with `old`; `new` is not zero.
///         NonNull::new(unsafe { System.realloc(p.as_ptr(), old, new) })
///     }
///     unsafe fn free(&mut self, p: NonNull<u8>, layout: Layout, _tag: u32) {
///         // SAFETY: the caller's contract.
///         unsafe { System.dealloc(p.as_ptr(), layout) }
///     }
/// }
///
/// let layout = Layout::from_size_align(100, 8).unwrap();
/// let p = Sys.alloc(layout, 0).unwrap();
/// // SAFETY: live with `layout`.
/// unsafe { Sys.free(p, layout, 0) };
/// ```
pub trait ReplayTarget {
    /// A block for `layout` (whose size is never zero), or `None`.
    fn alloc(&mut self, layout: Layout, tag: u32) -> Option<NonNull<u8>>;

    /// Resizes a block to `new` bytes (never zero) with the same alignment, keeping
    /// its first `min(old.size(), new)` bytes; `None` leaves the block as it was.
    ///
    /// # Safety
    ///
    /// The caller must pass a live block of this target made for `old` and `tag`.
    unsafe fn realloc(
        &mut self,
        ptr: NonNull<u8>,
        old: Layout,
        new: usize,
        tag: u32,
    ) -> Option<NonNull<u8>>;

    /// Frees a block.
    ///
    /// # Safety
    ///
    /// The caller must pass a live block of this target made for `layout` and `tag`,
    /// and not use it afterwards.
    unsafe fn free(&mut self, ptr: NonNull<u8>, layout: Layout, tag: u32);

    /// A frame ended. A target with per-frame memory recycles it here; it returns an
    /// error, and changes nothing, when memory it would recycle is still live.
    ///
    /// # Errors
    ///
    /// A sentence naming what is still live.
    fn frame(&mut self) -> Result<(), String> {
        Ok(())
    }

    /// A phase record was replayed: the phase `name` begins. bento's game sessions
    /// name three a level, in this order: "level N loading" before the level's data
    /// is allocated, "level N loaded" once it is, and "level N unloading" before it
    /// is freed; a recorded trace may hold any names. A target whose allocator
    /// follows the program's phases (keeping freed pages committed while a level
    /// loads, giving them back as it plays) tells it here. Nothing by default.
    ///
    /// [`replay`](fn@crate::replay) calls it before its observer sees the phase's
    /// [`Moment`](crate::Moment), and [`workload::play`](crate::workload::play) with
    /// the names a trace of the workload would hold.
    ///
    /// ```
    /// use std::alloc::Layout;
    /// use std::ptr::NonNull;
    /// use allocator_api2::alloc::Global;
    /// use bento_trace::workload::{record, Session, SessionConfig};
    /// use bento_trace::{replay, ApiTarget, ReplayOptions, ReplayTarget, TraceReader, TraceWriter};
    ///
    /// /// The global allocator, with the phases it was told.
    /// struct Phases(Vec<String>);
    ///
    /// impl ReplayTarget for Phases {
    ///     fn alloc(&mut self, layout: Layout, tag: u32) -> Option<NonNull<u8>> {
    ///         ApiTarget(&Global).alloc(layout, tag)
    ///     }
    ///     unsafe fn realloc(&mut self, p: NonNull<u8>, old: Layout, new: usize, tag: u32) -> Option<NonNull<u8>> {
    ///         // SAFETY: the caller's contract, passed on.
    ///         unsafe { ApiTarget(&Global).realloc(p, old, new, tag) }
    ///     }
    ///     unsafe fn free(&mut self, p: NonNull<u8>, layout: Layout, tag: u32) {
    ///         // SAFETY: the caller's contract, passed on.
    ///         unsafe { ApiTarget(&Global).free(p, layout, tag) }
    ///     }
    ///     fn phase(&mut self, name: &str) {
    ///         self.0.push(name.to_owned());
    ///     }
    /// }
    ///
    /// let config = SessionConfig { levels: 2, frames_per_level: 3, ..SessionConfig::DEMO };
    /// let mut w = TraceWriter::new(Vec::new()).unwrap();
    /// record(Session::new(config), &mut w).unwrap();
    /// let bytes = w.finish().unwrap();
    ///
    /// let mut target = Phases(Vec::new());
    /// let reader = TraceReader::new(&bytes[..]).unwrap();
    /// replay(&mut target, reader, ReplayOptions::default(), |_, _| {}).unwrap();
    /// assert_eq!(target.0, [
    ///     "level 0 loading", "level 0 loaded", "level 0 unloading",
    ///     "level 1 loading", "level 1 loaded", "level 1 unloading",
    /// ]);
    /// ```
    fn phase(&mut self, name: &str) {
        let _ = name;
    }

    /// What the allocator holds by its own stats, when it keeps them.
    fn footprint(&self) -> Option<Footprint> {
        None
    }

    /// The largest free block the allocator holds in memory it has reserved: the
    /// biggest request it could place with no new segment or arena (`None` when it
    /// does not tell). A soak samples it as each level has loaded, to show whether
    /// free memory splinters with play.
    ///
    /// ```
    /// use allocator_api2::alloc::Global;
    /// use bento_trace::{ApiTarget, ReplayTarget};
    ///
    /// assert_eq!(ApiTarget(&Global).largest_free(), None);
    /// ```
    fn largest_free(&self) -> Option<usize> {
        None
    }
}

/// Any allocator-api2 0.2 `Allocator` as a [`ReplayTarget`]: `realloc` is `grow` or
/// `shrink` (so the block keeps its alignment and the allocator's in-place paths are
/// tried first). Tags are ignored.
///
/// ```
/// use std::alloc::Layout;
/// use allocator_api2::alloc::Global;
/// use bento_trace::{ApiTarget, ReplayTarget};
///
/// let mut target = ApiTarget(&Global);
/// let layout = Layout::from_size_align(64, 16).unwrap();
/// let p = target.alloc(layout, 0).unwrap();
/// // SAFETY: live with `layout`.
/// let q = unsafe { target.realloc(p, layout, 4096, 0) }.unwrap();
/// // SAFETY: live with the new size.
/// unsafe { target.free(q, Layout::from_size_align(4096, 16).unwrap(), 0) };
/// ```
#[derive(Debug)]
pub struct ApiTarget<'a, A: ?Sized>(pub &'a A);

impl<A: Allocator + ?Sized> ReplayTarget for ApiTarget<'_, A> {
    fn alloc(&mut self, layout: Layout, _tag: u32) -> Option<NonNull<u8>> {
        Some(self.0.allocate(layout).ok()?.cast())
    }

    unsafe fn realloc(
        &mut self,
        ptr: NonNull<u8>,
        old: Layout,
        new: usize,
        _tag: u32,
    ) -> Option<NonNull<u8>> {
        let new_layout = Layout::from_size_align(new, old.align()).ok()?;
        // SAFETY: the caller's contract: `ptr` is live with `old`; the new layout's
        // size is on the side of `old`'s that each call asks for.
        let block = unsafe {
            if new >= old.size() {
                self.0.grow(ptr, old, new_layout)
            } else {
                self.0.shrink(ptr, old, new_layout)
            }
        };
        Some(block.ok()?.cast())
    }

    unsafe fn free(&mut self, ptr: NonNull<u8>, layout: Layout, _tag: u32) {
        // SAFETY: the caller's contract.
        unsafe { self.0.deallocate(ptr, layout) }
    }
}

/// Any `GlobalAlloc` (the system allocator, mimalloc, jemalloc) as a
/// [`ReplayTarget`]. Tags are ignored.
///
/// ```
/// use std::alloc::{Layout, System};
/// use bento_trace::{GlobalTarget, ReplayTarget};
///
/// let mut target = GlobalTarget(System);
/// let layout = Layout::from_size_align(64, 16).unwrap();
/// let p = target.alloc(layout, 0).unwrap();
/// // SAFETY: live with `layout`.
/// unsafe { target.free(p, layout, 0) };
/// ```
#[derive(Debug)]
pub struct GlobalTarget<A>(pub A);

impl<A: GlobalAlloc> ReplayTarget for GlobalTarget<A> {
    fn alloc(&mut self, layout: Layout, _tag: u32) -> Option<NonNull<u8>> {
        // SAFETY: the trait's promise: `layout`'s size is not zero.
        NonNull::new(unsafe { self.0.alloc(layout) })
    }

    unsafe fn realloc(
        &mut self,
        ptr: NonNull<u8>,
        old: Layout,
        new: usize,
        _tag: u32,
    ) -> Option<NonNull<u8>> {
        // `GlobalAlloc::realloc` needs the new layout to be valid.
        Layout::from_size_align(new, old.align()).ok()?;
        // SAFETY: the caller's contract: `ptr` is live in this allocator with `old`;
        // `new` is not zero and forms a valid layout with `old`'s alignment.
        NonNull::new(unsafe { self.0.realloc(ptr.as_ptr(), old, new) })
    }

    unsafe fn free(&mut self, ptr: NonNull<u8>, layout: Layout, _tag: u32) {
        // SAFETY: the caller's contract.
        unsafe { self.0.dealloc(ptr.as_ptr(), layout) }
    }
}

/// A replay target made of another, its inner target: each allocation, resize and free
/// passes to the inner target through [`around`](Wrapper::around), where a wrapper may
/// time or count it; frame ends, phases and the footprint pass to the inner target
/// unless the wrapper has its own ([`on_frame`](Wrapper::on_frame),
/// [`on_phase`](Wrapper::on_phase), [`report_footprint`](Wrapper::report_footprint)).
/// Every `Wrapper` is a [`ReplayTarget`].
///
/// ```
/// use std::alloc::{Layout, System};
/// use bento_trace::{GlobalTarget, ReplayTarget, Wrapper};
///
/// /// The system allocator, counting the calls made of it.
/// struct Calls {
///     system: GlobalTarget<System>,
///     calls: u64,
/// }
///
/// impl Wrapper for Calls {
///     type Inner = GlobalTarget<System>;
///
///     fn inner(&mut self) -> &mut Self::Inner {
///         &mut self.system
///     }
///
///     fn inner_ref(&self) -> &Self::Inner {
///         &self.system
///     }
///
///     fn around<R>(&mut self, call: impl FnOnce(&mut Self::Inner) -> R) -> R {
///         self.calls += 1;
///         call(&mut self.system)
///     }
/// }
///
/// let mut target = Calls { system: GlobalTarget(System), calls: 0 };
/// let layout = Layout::from_size_align(64, 8).unwrap();
/// let p = target.alloc(layout, 0).unwrap();
/// // SAFETY: live with `layout`.
/// let q = unsafe { target.realloc(p, layout, 128, 0) }.unwrap();
/// // SAFETY: live with the new size.
/// unsafe { target.free(q, Layout::from_size_align(128, 8).unwrap(), 0) };
/// assert_eq!(target.calls, 3);
/// assert_eq!(target.footprint(), None);
/// ```
pub trait Wrapper {
    /// The target wrapped.
    type Inner: ReplayTarget + ?Sized;

    /// The target wrapped.
    fn inner(&mut self) -> &mut Self::Inner;

    /// The target wrapped, to read its stats.
    fn inner_ref(&self) -> &Self::Inner;

    /// Runs one allocation, resize or free (`call`) on the inner target, and returns
    /// what it returns. By default, just that.
    fn around<R>(&mut self, call: impl FnOnce(&mut Self::Inner) -> R) -> R {
        call(self.inner())
    }

    /// The wrapper's [`ReplayTarget::frame`]: by default, the inner target's.
    ///
    /// # Errors
    ///
    /// A sentence naming what is still live.
    fn on_frame(&mut self) -> Result<(), String> {
        self.inner().frame()
    }

    /// The wrapper's [`ReplayTarget::phase`]: by default, the inner target's.
    fn on_phase(&mut self, name: &str) {
        self.inner().phase(name);
    }

    /// The wrapper's [`ReplayTarget::footprint`]: by default, the inner target's.
    fn report_footprint(&self) -> Option<Footprint> {
        self.inner_ref().footprint()
    }

    /// The wrapper's [`ReplayTarget::largest_free`]: by default, the inner target's.
    fn report_largest_free(&self) -> Option<usize> {
        self.inner_ref().largest_free()
    }
}

impl<W: Wrapper + ?Sized> ReplayTarget for W {
    fn alloc(&mut self, layout: Layout, tag: u32) -> Option<NonNull<u8>> {
        self.around(|t| t.alloc(layout, tag))
    }

    unsafe fn realloc(
        &mut self,
        ptr: NonNull<u8>,
        old: Layout,
        new: usize,
        tag: u32,
    ) -> Option<NonNull<u8>> {
        // SAFETY: the caller's contract, passed on: the inner target made the block.
        self.around(|t| unsafe { t.realloc(ptr, old, new, tag) })
    }

    unsafe fn free(&mut self, ptr: NonNull<u8>, layout: Layout, tag: u32) {
        // SAFETY: as for `realloc`.
        self.around(|t| unsafe { t.free(ptr, layout, tag) });
    }

    fn frame(&mut self) -> Result<(), String> {
        self.on_frame()
    }

    fn phase(&mut self, name: &str) {
        self.on_phase(name);
    }

    fn footprint(&self) -> Option<Footprint> {
        self.report_footprint()
    }

    fn largest_free(&self) -> Option<usize> {
        self.report_largest_free()
    }
}
