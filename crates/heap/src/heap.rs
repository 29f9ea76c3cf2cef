//! [`Heap`] and [`HeapBuilder`].

use alloc::boxed::Box;
use alloc::sync::Arc;
use alloc::vec::Vec;
use core::alloc::Layout;
use core::fmt;
use core::panic::Location;
use core::ptr::NonNull;

use allocator_api2::alloc::Allocator;
use bento_pages::{AllocError, Misuse, MisuseHook, RawAlloc, dangling, panic_on_misuse};

use crate::figures::{Account, HeapStats};
use crate::policy::{
    FillPattern, Guards, NoGuards, OnLeak, Retry, Tag, broken_guard, write_guards,
};
use crate::report;
use crate::sink::{EventKind, EventSink, HeapEvent, tag_name};
use crate::sync::{AtomicUsize, Ordering};
use crate::track::{Leak, NoTracking, TagStats, Track, Tracked, Tracking};

/// The callback a heap calls before it refuses a request over its budget.
type BudgetFn = dyn Fn(&HeapStats, Layout) -> Retry + Send + Sync;

/// A named heap over the allocator `A` (any allocator-api2 0.2 `Allocator`: a
/// `&MemorySpace`, a `&CommonAllocator`, a `&Bump`, `Global`), with a budget, figures,
/// and the debug policies an engine turns on per subsystem: guards `G`
/// ([`NoGuards`] or [`Canaries`](crate::Canaries)), tracking `T` ([`NoTracking`] or
/// [`Tracked`]), a [`FillPattern`], tags, a parent heap, an [`EventSink`].
///
/// Every block is allocated from `A` and freed back to it; the heap adds its guards
/// around it and counts it. `&Heap` is an allocator-api2 0.2 and 0.4 `Allocator`, so
/// `Vec`, `Box` and `HashMap` live in it. A heap over a `Sync` allocator is `Sync`.
///
/// ```
/// use allocator_api2::vec::Vec;
/// use bento_heap::{Canaries, FillPattern, HeapBuilder, Track};
/// use bento_pages::HeapPages;
/// use bento_space::{MemorySpace, SpaceConfig};
///
/// let space = MemorySpace::new(HeapPages::new(), SpaceConfig::DEFAULT).unwrap();
/// let audio = HeapBuilder::new("doc-audio")
///     .budget(32 << 20)
///     .guards(Canaries::<16>)
///     .fill(FillPattern::DEBUG)
///     .tracking(Track::Sites)
///     .build(&space);
/// let mut samples: Vec<i16, _> = Vec::new_in(&audio);
/// samples.extend(0..1000);
/// assert_eq!(audio.stats().live_bytes, samples.capacity() * 2);
/// drop(samples);
/// assert_eq!(audio.stats().live_blocks, 0);
/// ```
pub struct Heap<A, G: Guards = NoGuards, T: Tracking = NoTracking> {
    inner: A,
    pub(crate) account: Arc<Account>,
    guards: G,
    tracking: T,
    // Invariant: `Some` exactly when a fill pattern, a sink or Tracy is on: the one
    // branch the hot path takes for all three.
    extras: Option<Box<Extras>>,
    // Invariant: `SHARED * LANE_BYTES` (of `slot`) when the heap has no guards, no
    // tracking, no extras and no parent (its hot path is the account's lane and the
    // inner allocator), else 0: a thread whose lane's offset is below it takes the
    // hot path.
    fast_below: usize,
    on_budget: Option<Box<BudgetFn>>,
    hook: MisuseHook,
    on_leak: OnLeak,
    #[cfg(not(feature = "std"))]
    tag: crate::sync::AtomicPtr<Tag>,
}

/// The per-call work that only some heaps do.
struct Extras {
    fill: FillPattern,
    sink: Option<Arc<dyn EventSink>>,
    seq: AtomicUsize,
    #[cfg(feature = "tracy")]
    tracy: Option<&'static core::ffi::CStr>,
}

#[cfg(feature = "tracy")]
impl Extras {
    /// Tells a running Tracy client that the heap's pool gained the block at `ptr`.
    fn tracy_alloc(&self, ptr: NonNull<u8>, size: usize) {
        if let Some(name) = self.tracy
            && tracy_client::Client::is_running()
        {
            // SAFETY: `name` is a leaked C string, valid for the program.
            unsafe {
                tracy_client::sys::___tracy_emit_memory_alloc_named(
                    ptr.as_ptr().cast(),
                    size,
                    name.as_ptr(),
                );
            }
        }
    }

    /// Tells a running Tracy client that the heap's pool lost the block at `ptr`.
    fn tracy_free(&self, ptr: NonNull<u8>) {
        if let Some(name) = self.tracy
            && tracy_client::Client::is_running()
        {
            // SAFETY: `name` is a leaked C string, valid for the program.
            unsafe {
                tracy_client::sys::___tracy_emit_memory_free_named(
                    ptr.as_ptr().cast(),
                    name.as_ptr(),
                );
            }
        }
    }
}

impl<A, G: Guards, T: Tracking> fmt::Debug for Heap<A, G, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Heap")
            .field("name", &self.account.name)
            .field("guards", &self.guards)
            .field("tracking", &self.tracking)
            .field("stats", &self.account.stats())
            .finish_non_exhaustive()
    }
}

/// Builds a [`Heap`]: a name, then the budget and policies, then
/// [`build`](Self::build) over an inner allocator.
///
/// ```
/// use allocator_api2::alloc::Global;
/// use bento_heap::{HeapBuilder, Retry};
/// use core::alloc::Layout;
///
/// let game = HeapBuilder::new("doc-game").budget(1 << 20).build(Global);
/// let level = HeapBuilder::new("doc-level")
///     .parent(&game)
///     .on_budget_exceeded(|stats, layout| {
///         assert!(stats.live_bytes + layout.size() > 4096);
///         Retry::Fail
///     })
///     .budget(4096)
///     .build(Global);
/// let layout = Layout::from_size_align(4096, 8).unwrap();
/// let p = level.alloc(layout).unwrap();
/// assert!(level.alloc(Layout::new::<u8>()).is_err());
/// assert_eq!(game.stats().live_bytes, 4096); // a child's blocks count in its parent
/// // SAFETY: live, with its layout.
/// unsafe { level.free(p, layout) };
/// ```
#[must_use]
pub struct HeapBuilder<G: Guards = NoGuards, T: Tracking = NoTracking> {
    name: &'static str,
    budget: Option<usize>,
    guards: G,
    tracking: T,
    fill: FillPattern,
    sink: Option<Arc<dyn EventSink>>,
    on_budget: Option<Box<BudgetFn>>,
    parent: Option<Arc<Account>>,
    hook: MisuseHook,
    on_leak: OnLeak,
    register: bool,
}

impl<G: Guards, T: Tracking> fmt::Debug for HeapBuilder<G, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HeapBuilder")
            .field("name", &self.name)
            .field("budget", &self.budget)
            .field("guards", &self.guards)
            .field("fill", &self.fill)
            .finish_non_exhaustive()
    }
}

impl HeapBuilder {
    /// A heap named `name`: no budget, no guards, no tracking, no fill, registered
    /// for [`report`](crate::report), misuse reported by
    /// [`panic_on_misuse`](bento_pages::panic_on_misuse).
    pub fn new(name: &'static str) -> Self {
        Self {
            name,
            budget: None,
            guards: NoGuards,
            tracking: NoTracking,
            fill: FillPattern::NONE,
            sink: None,
            on_budget: None,
            parent: None,
            hook: panic_on_misuse,
            on_leak: OnLeak::Hook,
            register: true,
        }
    }
}

impl<G: Guards, T: Tracking> HeapBuilder<G, T> {
    /// At most `bytes` live at once (as requested, guards not counted); a request
    /// that would pass it fails with `AllocError`.
    ///
    /// One thread alone is held to the budget exactly. Threads allocating at once
    /// each compare their own bytes (exact) with a view of the others' that is at
    /// most a *slack* old — a 256th of the budget, at most 64 KiB, allocated by that
    /// thread since it last read the others — so together they may pass the budget
    /// by at most the slack per thread, and `peak_bytes` may miss a maximum by as
    /// much. It is never below a `live_bytes` that `stats` returned — which, read
    /// while threads allocate and free, may count a block freed on one thread and one
    /// allocated on another at once, a little above any instant's total.
    pub fn budget(mut self, bytes: usize) -> Self {
        self.budget = Some(bytes);
        self
    }

    /// Guard bytes around every block.
    pub fn guards<G2: Guards>(self, guards: G2) -> HeapBuilder<G2, T> {
        HeapBuilder {
            name: self.name,
            budget: self.budget,
            guards,
            tracking: self.tracking,
            fill: self.fill,
            sink: self.sink,
            on_budget: self.on_budget,
            parent: self.parent,
            hook: self.hook,
            on_leak: self.on_leak,
            register: self.register,
        }
    }

    /// A table of live blocks, for [`leaks`](Heap::leaks), tags and
    /// [`check`](Heap::check).
    pub fn tracking(self, track: Track) -> HeapBuilder<G, Tracked> {
        HeapBuilder {
            name: self.name,
            budget: self.budget,
            guards: self.guards,
            tracking: Tracked::new(track),
            fill: self.fill,
            sink: self.sink,
            on_budget: self.on_budget,
            parent: self.parent,
            hook: self.hook,
            on_leak: self.on_leak,
            register: self.register,
        }
    }

    /// Bytes written over fresh and freed blocks.
    pub fn fill(mut self, fill: FillPattern) -> Self {
        self.fill = fill;
        self
    }

    /// Where every allocation, free and resize is told.
    pub fn sink(mut self, sink: Arc<dyn EventSink>) -> Self {
        self.sink = Some(sink);
        self
    }

    /// Called before a request over the budget (this heap's or an ancestor's) is
    /// refused, with the heap's figures and the request: it may free memory (flush a
    /// cache) and answer [`Retry::Again`] for one more try.
    ///
    /// The callback may allocate, from this heap too; but a request it makes that
    /// passes the budget again is refused without calling it again (it is not
    /// re-entered on its own thread, nor while this thread is in four callbacks
    /// already). Without `std` (no thread-locals) a request made while any thread
    /// runs this heap's callback is refused without it.
    pub fn on_budget_exceeded(
        mut self,
        f: impl Fn(&HeapStats, Layout) -> Retry + Send + Sync + 'static,
    ) -> Self {
        self.on_budget = Some(Box::new(f));
        self
    }

    /// Makes the heap a child of `parent`: its blocks count in `parent`'s figures and
    /// against its budget, and every ancestor's; its leak report goes to `parent` when
    /// it is dropped.
    pub fn parent<A2, G2: Guards, T2: Tracking>(mut self, parent: &Heap<A2, G2, T2>) -> Self {
        self.parent = Some(parent.account.clone());
        self
    }

    /// What misuse the heap detects is reported to (a broken guard, a pointer it does
    /// not hold, a wrong size, leaks).
    pub fn misuse_hook(mut self, hook: MisuseHook) -> Self {
        self.hook = hook;
        self
    }

    /// What dropping the heap with live blocks does.
    pub fn on_leak(mut self, on_leak: OnLeak) -> Self {
        self.on_leak = on_leak;
        self
    }

    /// Whether [`report`](crate::report) lists the heap (it does by default).
    pub fn register(mut self, register: bool) -> Self {
        self.register = register;
        self
    }

    /// The heap, over `inner`.
    pub fn build<A: Allocator>(self, inner: A) -> Heap<A, G, T> {
        let account = Arc::new(Account::new(self.name, self.budget, self.parent));
        if self.register {
            report::register(&account);
        }
        #[cfg(feature = "tracy")]
        let tracy = Some(&*Box::leak(
            alloc::ffi::CString::new(self.name)
                .unwrap_or_default()
                .into_boxed_c_str(),
        ));
        #[cfg(feature = "tracy")]
        let tracy_on = true;
        #[cfg(not(feature = "tracy"))]
        let tracy_on = false;
        let extras = (!self.fill.is_none() || self.sink.is_some() || tracy_on).then(|| {
            Box::new(Extras {
                fill: self.fill,
                sink: self.sink,
                seq: AtomicUsize::new(0),
                #[cfg(feature = "tracy")]
                tracy,
            })
        });
        let plain = !T::ON && G::BYTES == 0 && extras.is_none() && account.parent.is_none();
        let fast_below = if plain {
            crate::slot::SHARED * crate::slot::LANE_BYTES
        } else {
            0
        };
        Heap {
            inner,
            account,
            guards: self.guards,
            tracking: self.tracking,
            extras,
            fast_below,
            on_budget: self.on_budget,
            hook: self.hook,
            on_leak: self.on_leak,
            #[cfg(not(feature = "std"))]
            tag: crate::sync::AtomicPtr::new(core::ptr::null_mut()),
        }
    }
}

#[cfg(feature = "std")]
std::thread_local! {
    /// This thread's `with_tag` scope: the account it is for (its address) and the tag.
    static SCOPE: core::cell::Cell<(usize, Option<&'static Tag>)> =
        const { core::cell::Cell::new((0, None)) };
    /// The accounts (their addresses; 0 for none) whose budget callback runs on this
    /// thread, innermost last.
    static IN_CALLBACK: core::cell::Cell<[usize; CALLBACK_DEPTH]> =
        const { core::cell::Cell::new([0; CALLBACK_DEPTH]) };
}

/// Budget callbacks of different heaps that may run inside each other on a thread.
#[cfg(feature = "std")]
const CALLBACK_DEPTH: usize = 4;

/// A budget callback running: while it lives, a request over the same heap's budget
/// does not call the callback again (on this thread; without `std`, on any).
struct CallbackScope<'a> {
    #[cfg(feature = "std")]
    slot: usize,
    #[cfg(feature = "std")]
    _account: core::marker::PhantomData<&'a Account>,
    #[cfg(not(feature = "std"))]
    account: &'a Account,
}

impl<'a> CallbackScope<'a> {
    /// Enters `account`'s callback; `None` when this thread is in it already (or
    /// cannot say: its thread-locals are gone, or it is in `CALLBACK_DEPTH` callbacks).
    #[cfg(feature = "std")]
    fn enter(account: &'a Arc<Account>) -> Option<Self> {
        let me = Arc::as_ptr(account).addr();
        IN_CALLBACK
            .try_with(|inside| {
                let mut keys = inside.get();
                if keys.contains(&me) {
                    return None;
                }
                let slot = keys.iter().position(|&k| k == 0)?;
                keys[slot] = me;
                inside.set(keys);
                Some(Self {
                    slot,
                    _account: core::marker::PhantomData,
                })
            })
            .ok()
            .flatten()
    }

    /// Enters `account`'s callback; `None` when any thread is in it.
    #[cfg(not(feature = "std"))]
    fn enter(account: &'a Arc<Account>) -> Option<Self> {
        (!account.in_callback.swap(true, Ordering::Acquire)).then_some(Self {
            account: &**account,
        })
    }
}

impl Drop for CallbackScope<'_> {
    fn drop(&mut self) {
        #[cfg(feature = "std")]
        let _ = IN_CALLBACK.try_with(|inside| {
            let mut keys = inside.get();
            keys[self.slot] = 0;
            inside.set(keys);
        });
        #[cfg(not(feature = "std"))]
        self.account.in_callback.store(false, Ordering::Release);
    }
}

impl<A: Allocator, G: Guards, T: Tracking> Heap<A, G, T> {
    /// The heap's name.
    #[must_use]
    pub fn name(&self) -> &'static str {
        self.account.name
    }

    /// The allocator the heap allocates from.
    #[must_use]
    pub fn inner(&self) -> &A {
        &self.inner
    }

    /// The heap's figures (its children's blocks included).
    #[must_use]
    pub fn stats(&self) -> HeapStats {
        self.account.stats()
    }

    /// A block for `layout`, tagged with the current [`with_tag`](Self::with_tag)
    /// scope's tag; a tracking heap records the caller as its allocation site. A zero
    /// size gets a dangling pointer and is not counted.
    ///
    /// # Errors
    ///
    /// [`AllocError`] over the budget (after the `on_budget_exceeded` callback), or
    /// when the inner allocator refuses.
    #[track_caller]
    #[inline]
    pub fn alloc(&self, layout: Layout) -> Result<NonNull<u8>, AllocError> {
        self.alloc_at(layout, None, Some(Location::caller()))
    }

    /// [`alloc`](Self::alloc) with the tag `tag`.
    ///
    /// # Errors
    ///
    /// As for `alloc`.
    ///
    /// ```
    /// use allocator_api2::alloc::Global;
    /// use bento_heap::{HeapBuilder, Tag, Track};
    /// use core::alloc::Layout;
    ///
    /// static MESHES: Tag = Tag::new("meshes");
    /// let heap = HeapBuilder::new("doc-tagged").tracking(Track::Sites).build(Global);
    /// let layout = Layout::new::<[u8; 64]>();
    /// let p = heap.alloc_tagged(layout, &MESHES).unwrap();
    /// assert_eq!(heap.tag_stats()[0].live_bytes, 64);
    /// // SAFETY: live, with its layout.
    /// unsafe { heap.free(p, layout) };
    /// ```
    #[track_caller]
    #[inline]
    pub fn alloc_tagged(
        &self,
        layout: Layout,
        tag: &'static Tag,
    ) -> Result<NonNull<u8>, AllocError> {
        self.alloc_at(layout, Some(tag), Some(Location::caller()))
    }

    /// Frees a block of this heap.
    ///
    /// # Safety
    ///
    /// The caller must ensure `ptr` is a live block of this heap allocated (or last
    /// resized) with `layout`. A tracking heap reports a pointer it does not hold, or
    /// a wrong size, through its misuse hook and frees nothing.
    #[inline(always)]
    pub unsafe fn free(&self, ptr: NonNull<u8>, layout: Layout) {
        let size = layout.size();
        if size == 0 {
            return;
        }
        if self.account.release_fast(size, self.fast_below) {
            // SAFETY: `ptr` is a live block (the caller's contract) of the inner
            // allocator, with `layout` (a plain heap adds no guards).
            unsafe { self.inner.deallocate(ptr, layout) };
            return;
        }
        // SAFETY: the caller's contract.
        unsafe { self.free_slow(ptr, layout) };
    }

    /// [`free`](Self::free) of a block of a heap that is not plain, or on a thread
    /// without a lane of its own.
    ///
    /// # Safety
    ///
    /// As for `free`.
    #[inline(never)]
    unsafe fn free_slow(&self, ptr: NonNull<u8>, layout: Layout) {
        let size = layout.size();
        if T::ON || G::BYTES != 0 || self.extras.is_some() {
            // SAFETY: the caller's contract.
            let held = unsafe { self.note_free(ptr, layout) };
            if !held {
                return;
            }
        }
        self.account.release(size, 1);
        let (outer, front) = Self::outer(layout).unwrap_or((layout, 0));
        // SAFETY: `ptr` is a live block (the caller's contract), `front` bytes into the
        // inner block allocated with `outer` (both as at its allocation: the same
        // layout gives the same ones).
        unsafe { self.inner.deallocate(ptr.sub(front), outer) };
    }

    /// Runs `f` with `tag` as this heap's current tag on this thread (heap-wide without
    /// `std`): blocks allocated without a tag of their own carry it. The innermost
    /// scope on a thread wins; a scope for another heap hides it meanwhile.
    ///
    /// ```
    /// use allocator_api2::{alloc::Global, boxed::Box};
    /// use bento_heap::{HeapBuilder, Tag, Track};
    ///
    /// static PHYSICS: Tag = Tag::new("physics");
    /// let heap = HeapBuilder::new("doc-with-tag").tracking(Track::Sites).build(Global);
    /// let body = heap.with_tag(&PHYSICS, || Box::new_in([0f32; 16], &heap));
    /// assert_eq!(heap.tag_stats()[0].live_blocks, 1);
    /// drop(body);
    /// ```
    pub fn with_tag<R>(&self, tag: &'static Tag, f: impl FnOnce() -> R) -> R {
        #[cfg(feature = "std")]
        {
            struct Restore((usize, Option<&'static Tag>));
            impl Drop for Restore {
                fn drop(&mut self) {
                    SCOPE.with(|s| s.set(self.0));
                }
            }
            let me = Arc::as_ptr(&self.account).addr();
            let _restore = Restore(SCOPE.with(|s| s.replace((me, Some(tag)))));
            f()
        }
        #[cfg(not(feature = "std"))]
        {
            let new = core::ptr::from_ref(tag).cast_mut();
            let old = self.tag.swap(new, Ordering::Relaxed);
            let r = f();
            self.tag.store(old, Ordering::Relaxed);
            r
        }
    }

    /// The tag of the current [`with_tag`](Self::with_tag) scope, if any.
    fn current_tag(&self) -> Option<&'static Tag> {
        #[cfg(feature = "std")]
        {
            let me = Arc::as_ptr(&self.account).addr();
            SCOPE.with(|s| {
                let (who, tag) = s.get();
                if who == me { tag } else { None }
            })
        }
        #[cfg(not(feature = "std"))]
        {
            // SAFETY: the pointer is null or was made from a `&'static Tag`.
            unsafe { self.tag.load(Ordering::Relaxed).as_ref() }
        }
    }

    /// The inner layout of a block of `layout` and where the block starts in it.
    #[inline]
    fn outer(layout: Layout) -> Result<(Layout, usize), AllocError> {
        if G::BYTES == 0 {
            return Ok((layout, 0));
        }
        let front = G::BYTES.next_multiple_of(layout.align());
        let size = front
            .checked_add(layout.size())
            .and_then(|s| s.checked_add(G::BYTES))
            .ok_or(AllocError)?;
        let outer = Layout::from_size_align(size, layout.align()).map_err(|_| AllocError)?;
        Ok((outer, front))
    }

    #[inline(always)]
    fn alloc_at(
        &self,
        layout: Layout,
        tag: Option<&'static Tag>,
        site: Option<&'static Location<'static>>,
    ) -> Result<NonNull<u8>, AllocError> {
        let size = layout.size();
        if size == 0 {
            return Ok(dangling(layout));
        }
        if self.account.charge_fast(size, self.fast_below) {
            return match self.inner.allocate(layout) {
                Ok(block) => Ok(block.cast()),
                Err(_) => Err(self.undo(size, 1)),
            };
        }
        self.alloc_slow(layout, tag, site)
    }

    /// [`alloc_at`](Self::alloc_at) for a heap that is not plain, a charge that
    /// needs the slow path, or a thread without a lane of its own.
    #[inline(never)]
    fn alloc_slow(
        &self,
        layout: Layout,
        tag: Option<&'static Tag>,
        site: Option<&'static Location<'static>>,
    ) -> Result<NonNull<u8>, AllocError> {
        let size = layout.size();
        if !self.account.charge(size, 1) && !self.refused(layout, size, 1) {
            return Err(AllocError);
        }
        let got = Self::outer(layout).and_then(|(outer, front)| {
            let base = self.inner.allocate(outer).map_err(|_| AllocError)?;
            // SAFETY: `front + size <= outer.size()`: inside the inner block.
            Ok(unsafe { base.cast::<u8>().add(front) })
        });
        let Ok(user) = got else {
            return Err(self.undo(size, 1));
        };
        if G::BYTES != 0 {
            // SAFETY: the guards lie in the inner block just allocated: `front >=
            // G::BYTES` before `user`, `G::BYTES` after `user + size`.
            unsafe { write_guards::<G>(user, size) };
        }
        if T::ON || self.extras.is_some() {
            self.note_alloc(user, layout, tag, site);
        }
        Ok(user)
    }

    /// Takes back the charge of a request the inner allocator refused, and counts the
    /// failure.
    #[cold]
    #[inline(never)]
    fn undo(&self, bytes: usize, blocks: usize) -> AllocError {
        self.account.uncharge(bytes, blocks);
        self.account.fail();
        AllocError
    }

    /// A request of `bytes` (and `blocks`) passed a budget: calls the callback
    /// (unless this is a request the callback itself made) and retries once when it
    /// asks; true when the retry charged it. Otherwise counts the failure.
    #[cold]
    #[inline(never)]
    fn refused(&self, layout: Layout, bytes: usize, blocks: usize) -> bool {
        if let Some(callback) = &self.on_budget
            && let Some(_inside) = CallbackScope::enter(&self.account)
            && callback(&self.stats(), layout) == Retry::Again
            && self.account.charge(bytes, blocks)
        {
            return true;
        }
        self.account.fail();
        false
    }

    /// Tracking, fill, sink and Tracy for a fresh block.
    #[inline(never)]
    fn note_alloc(
        &self,
        user: NonNull<u8>,
        layout: Layout,
        tag: Option<&'static Tag>,
        site: Option<&'static Location<'static>>,
    ) {
        let tag = tag.or_else(|| self.current_tag());
        if let Some(table) = self.tracking.table() {
            table.insert(user, layout.size(), layout.align(), tag, site);
        }
        if let Some(x) = &self.extras {
            if let Some(byte) = x.fill.on_alloc {
                // SAFETY: the block's `size` bytes, just allocated.
                unsafe { user.write_bytes(byte, layout.size()) };
            }
            self.emit(x, EventKind::Alloc, user, layout, tag);
            #[cfg(feature = "tracy")]
            x.tracy_alloc(user, layout.size());
        }
    }

    /// Sends `kind` to the sink, if any.
    fn emit(
        &self,
        x: &Extras,
        kind: EventKind,
        user: NonNull<u8>,
        layout: Layout,
        tag: Option<&'static Tag>,
    ) {
        if let Some(sink) = &x.sink {
            sink.event(&HeapEvent {
                heap: self.account.name,
                seq: x.seq.fetch_add(1, Ordering::Relaxed) as u64,
                kind,
                addr: user.addr().get(),
                size: layout.size(),
                align: layout.align(),
                tag: tag_name(tag),
            });
        }
    }

    /// Tracking, guards, fill, sink and Tracy for a block being freed: false when the
    /// tracking table does not hold it as given (reported; nothing is freed).
    ///
    /// # Safety
    ///
    /// The caller must ensure `ptr` is a live block of this heap allocated with
    /// `layout` (checked against the table, when there is one).
    #[inline(never)]
    unsafe fn note_free(&self, ptr: NonNull<u8>, layout: Layout) -> bool {
        let mut site = None;
        let mut tag = None;
        if let Some(table) = self.tracking.table() {
            if !self.held(table, ptr, layout) {
                return false;
            }
            let record = table.remove(ptr);
            site = record.as_ref().and_then(|r| r.site);
            tag = record.as_ref().and_then(|r| r.tag);
        }
        if G::BYTES != 0 {
            // SAFETY: a live block of this heap has its guards (the caller's contract).
            unsafe { self.check_guards(ptr, layout.size(), site) };
        }
        if let Some(x) = &self.extras {
            if let Some(byte) = x.fill.on_free {
                // SAFETY: the block's bytes, live until the inner free below.
                unsafe { ptr.write_bytes(byte, layout.size()) };
            }
            self.emit(x, EventKind::Free, ptr, layout, tag);
            #[cfg(feature = "tracy")]
            x.tracy_free(ptr);
        }
        true
    }

    /// Whether the table holds `ptr` with `layout`'s size; reports it when not.
    fn held(&self, table: &Tracked, ptr: NonNull<u8>, layout: Layout) -> bool {
        match table.get(ptr) {
            None => {
                (self.hook)(&Misuse::Foreign { ptr });
                false
            }
            Some((size, align, _)) if size != layout.size() || align < layout.align() => {
                (self.hook)(&Misuse::WrongLayout {
                    ptr,
                    layout,
                    block_size: size,
                    block_align: align,
                });
                false
            }
            Some(_) => true,
        }
    }

    /// Reports a broken guard of the block at `ptr` through the hook; returns it.
    ///
    /// # Safety
    ///
    /// `ptr` is a live block of this heap of `size` bytes.
    unsafe fn check_guards(
        &self,
        ptr: NonNull<u8>,
        size: usize,
        site: Option<&'static Location<'static>>,
    ) -> Option<Misuse<'static>> {
        // SAFETY: a live block has `G::BYTES` guard bytes on each side.
        let (side, offset) = unsafe { broken_guard::<G>(ptr, size) }?;
        let misuse = Misuse::GuardOverwritten {
            heap: self.account.name,
            ptr,
            size,
            side,
            offset,
            site,
        };
        (self.hook)(&misuse);
        Some(misuse)
    }

    /// Grows or shrinks a block (both sizes non-zero): through the inner allocator's
    /// `grow` or `shrink`, or by hand when a new alignment moves the block within its
    /// guards. On `Err` nothing changes.
    ///
    /// # Safety
    ///
    /// The caller must ensure `ptr` is a live block of this heap with `old`.
    unsafe fn resize_block(
        &self,
        ptr: NonNull<u8>,
        old: Layout,
        new: Layout,
    ) -> Result<NonNull<u8>, AllocError> {
        let mut site = None;
        if let Some(table) = self.tracking.table() {
            if !self.held(table, ptr, old) {
                return Err(AllocError);
            }
            site = table.get(ptr).and_then(|r| r.2);
        }
        if G::BYTES != 0 {
            // SAFETY: a live block of this heap (the caller's contract).
            unsafe { self.check_guards(ptr, old.size(), site) };
        }
        let (old_outer, old_front) = Self::outer(old)?;
        let (new_outer, new_front) = Self::outer(new)?;
        let grows = new.size() > old.size();
        let delta = new.size().abs_diff(old.size());
        if grows && !self.account.charge(delta, 0) && !self.refused(new, delta, 0) {
            return Err(AllocError);
        }
        // From here the inner allocator may free `ptr`'s address and give it to another
        // thread before this resize's event is sent: the sink hears of it first.
        if let Some(x) = &self.extras {
            self.before_resize(x, ptr, old, new);
        }
        // SAFETY: `ptr` is `old_front` bytes into the inner block of `old_outer`.
        let base = unsafe { ptr.sub(old_front) };
        // SAFETY: the inner block is live with `old_outer` (the caller's contract).
        let moved = unsafe {
            if old_front != new_front {
                self.inner.allocate(new_outer).map(|fresh| {
                    let fresh = fresh.cast::<u8>();
                    fresh
                        .add(new_front)
                        .copy_from_nonoverlapping(ptr, old.size().min(new.size()));
                    self.inner.deallocate(base, old_outer);
                    fresh
                })
            } else if new_outer.size() >= old_outer.size() {
                self.inner
                    .grow(base, old_outer, new_outer)
                    .map(NonNull::cast)
            } else {
                self.inner
                    .shrink(base, old_outer, new_outer)
                    .map(NonNull::cast)
            }
        };
        let Ok(fresh) = moved else {
            if grows {
                self.account.uncharge(delta, 0);
            }
            self.account.fail();
            if let Some(x) = &self.extras {
                self.resize_failed(x, ptr, old);
            }
            return Err(AllocError);
        };
        if !grows {
            self.account.release(delta, 0);
        }
        // SAFETY: `new_front + new.size() <= new_outer.size()`.
        let user = unsafe { fresh.add(new_front) };
        if G::BYTES != 0 {
            // SAFETY: the new block's guards, inside its inner block.
            unsafe { write_guards::<G>(user, new.size()) };
        }
        if let Some(table) = self.tracking.table() {
            table.moved(ptr, user, new.size(), new.align());
        }
        if let Some(x) = &self.extras {
            if grows && let Some(byte) = x.fill.on_alloc {
                // SAFETY: the grown bytes of the new block.
                unsafe { user.add(old.size()).write_bytes(byte, delta) };
            }
            let tag = self.tracking.table().and_then(|t| t.tag_of(user));
            self.emit(
                x,
                EventKind::Realloc {
                    old_addr: ptr.addr().get(),
                    old_size: old.size(),
                },
                user,
                new,
                tag,
            );
            #[cfg(feature = "tracy")]
            x.tracy_alloc(user, new.size());
        }
        Ok(user)
    }

    /// Before the inner allocator resizes the block at `ptr` from `old` to `new`:
    /// tells the sink and Tracy that the address may go, and fills the bytes a
    /// shrink drops with the free pattern while they are still the block's.
    fn before_resize(&self, x: &Extras, ptr: NonNull<u8>, old: Layout, new: Layout) {
        if let Some(sink) = &x.sink {
            sink.resize_begin(self.account.name, ptr.addr().get());
        }
        #[cfg(feature = "tracy")]
        x.tracy_free(ptr);
        // Only a shrink that keeps its alignment: one that needs a stricter alignment
        // may have to move and fail, and a failed resize leaves the block unchanged.
        if new.size() < old.size()
            && new.align() <= old.align()
            && let Some(byte) = x.fill.on_free
        {
            // SAFETY: bytes `new.size()..old.size()` of the live block at `ptr`.
            unsafe {
                ptr.add(new.size())
                    .write_bytes(byte, old.size() - new.size());
            }
        }
    }

    /// The inner allocator refused the resize begun by `before_resize`: the block is
    /// still at `ptr` with `old`.
    #[cold]
    fn resize_failed(&self, x: &Extras, ptr: NonNull<u8>, old: Layout) {
        if let Some(sink) = &x.sink {
            sink.resize_failed(self.account.name, ptr.addr().get());
        }
        #[cfg(feature = "tracy")]
        x.tracy_alloc(ptr, old.size());
        #[cfg(not(feature = "tracy"))]
        let _ = old;
    }

    /// Checks the heap: every tracked block's guards (a broken one is also reported
    /// through the misuse hook), and the figures against the table (with tracking) or
    /// against each other. Returns the figures.
    ///
    /// # Errors
    ///
    /// [`CheckError`] naming the first problem found.
    ///
    /// ```
    /// use allocator_api2::alloc::Global;
    /// use bento_heap::{Canaries, HeapBuilder, Track};
    /// use core::alloc::Layout;
    ///
    /// let heap = HeapBuilder::new("doc-check")
    ///     .guards(Canaries::<8>)
    ///     .tracking(Track::Sites)
    ///     .misuse_hook(|_| {})
    ///     .build(Global);
    /// let layout = Layout::new::<[u8; 10]>();
    /// let p = heap.alloc(layout).unwrap();
    /// assert!(heap.check().is_ok());
    /// // SAFETY: one byte past the block: its back guard (a deliberate overrun).
    /// unsafe { p.add(10).write(0) };
    /// assert!(heap.check().is_err());
    /// // SAFETY: repairs the guard; live, with its layout.
    /// unsafe {
    ///     p.add(10).write(0xFD);
    ///     heap.free(p, layout);
    /// }
    /// ```
    pub fn check(&self) -> Result<HeapStats, CheckError> {
        let stats = self.stats();
        let name = self.account.name;
        let figure = |what, counted: usize, recorded: usize| {
            if counted == recorded {
                Ok(())
            } else {
                Err(CheckError::Figures {
                    heap: name,
                    what,
                    counted,
                    recorded,
                })
            }
        };
        figure(
            "live blocks (allocs - frees) within allocs",
            stats.live_blocks.min(stats.total_allocs),
            stats.live_blocks,
        )?;
        figure(
            "peak at least live",
            stats.peak_bytes.max(stats.live_bytes),
            stats.peak_bytes,
        )?;
        // Threads allocating at once may pass the budget by the slack each.
        if let Some(budget) = stats.budget
            && stats.live_bytes > budget.saturating_add(self.account.slack() * crate::slot::LANES)
        {
            return Err(CheckError::OverBudget {
                heap: name,
                live: stats.live_bytes,
                budget,
            });
        }
        if let Some(table) = self.tracking.table() {
            let mut broken = None;
            if G::BYTES != 0 {
                table.for_each(|ptr, size, site| {
                    if broken.is_none() {
                        // SAFETY: a live block of this heap (the table holds only those).
                        broken =
                            unsafe { broken_guard::<G>(ptr, size) }.map(|b| (ptr, size, site, b));
                    }
                });
            }
            if let Some((ptr, size, site, (side, offset))) = broken {
                let misuse = Misuse::GuardOverwritten {
                    heap: name,
                    ptr,
                    size,
                    side,
                    offset,
                    site,
                };
                (self.hook)(&misuse);
                return Err(CheckError::Guard(misuse));
            }
            let (blocks, bytes) = table.live();
            let (own_bytes, own_blocks) = self.account.own_live();
            figure("live blocks of its own", blocks, own_blocks)?;
            figure("live bytes of its own", bytes, own_bytes)?;
            let tags = table.tag_stats();
            let tagged: usize = tags.iter().map(|t| t.live_bytes).sum();
            figure(
                "bytes of the tags within the live bytes",
                tagged.min(bytes),
                tagged,
            )?;
        }
        Ok(stats)
    }
}

impl<A: Allocator, G: Guards> Heap<A, G, Tracked> {
    /// Every block the heap holds, with its size, tag and allocation site, in address
    /// order, then the blocks its dropped children left.
    ///
    /// ```
    /// use allocator_api2::alloc::Global;
    /// use bento_heap::{HeapBuilder, OnLeak, Track};
    /// use core::alloc::Layout;
    ///
    /// let heap = HeapBuilder::new("doc-leaks")
    ///     .tracking(Track::Sites)
    ///     .on_leak(OnLeak::Ignore)
    ///     .build(Global);
    /// let p = heap.alloc(Layout::new::<[u8; 32]>()).unwrap();
    /// let leaks = heap.leaks();
    /// assert_eq!((leaks[0].ptr, leaks[0].size), (Some(p), 32));
    /// assert_eq!(leaks[0].site.unwrap().file(), file!());
    /// ```
    #[must_use]
    pub fn leaks(&self) -> Vec<Leak> {
        let mut leaks = self.own_leaks();
        leaks.extend(self.account.orphans.lock().iter().cloned());
        leaks
    }

    /// Figures per tag, in the order the tags first appeared.
    #[must_use]
    pub fn tag_stats(&self) -> Vec<TagStats> {
        self.tracking.tag_stats()
    }
}

impl<A, G: Guards, T: Tracking> Heap<A, G, T> {
    /// The heap's own live blocks as leaks: listed when it tracks them, else one
    /// summary line (none when it holds no block).
    fn own_leaks(&self) -> Vec<Leak> {
        if let Some(table) = self.tracking.table() {
            return table.leaks(self.account.name);
        }
        let (bytes, blocks) = self.account.own_live();
        if blocks == 0 {
            return Vec::new();
        }
        alloc::vec![Leak {
            heap: self.account.name,
            ptr: None,
            size: bytes,
            blocks,
            tag: None,
            site: None,
            #[cfg(feature = "std")]
            backtrace: None,
        }]
    }
}

impl<A, G: Guards, T: Tracking> Drop for Heap<A, G, T> {
    fn drop(&mut self) {
        self.account.alive.store(false, Ordering::Relaxed);
        let mut leaks = self.own_leaks();
        leaks.append(&mut self.account.orphans.lock());
        if leaks.is_empty() {
            return;
        }
        // A parent dropped already reports nothing more: the child reports itself.
        match &self.account.parent {
            Some(parent) if parent.alive.load(Ordering::Relaxed) => {
                parent.orphans.lock().extend(leaks);
            }
            _ => crate::report::leaked(self.account.name, leaks, self.on_leak, self.hook),
        }
    }
}

// SAFETY: `alloc_raw` returns a block of the inner allocator (which keeps the
// `Allocator` promises), `front` bytes in, with `layout.size()` bytes and the
// alignment (the inner block is aligned to `layout.align()` and `front` is a multiple
// of it) before the back guard; `resize_raw` goes through the inner `grow`/`shrink`
// or a copy; `resize_in_place` never claims a resize.
unsafe impl<A: Allocator, G: Guards, T: Tracking> RawAlloc for Heap<A, G, T> {
    #[inline]
    fn alloc_raw(&self, layout: Layout) -> Result<NonNull<u8>, AllocError> {
        self.alloc_at(layout, None, None)
    }

    #[inline]
    unsafe fn dealloc_raw(&self, ptr: NonNull<u8>, layout: Layout) {
        // SAFETY: the caller's contract.
        unsafe { self.free(ptr, layout) }
    }

    unsafe fn resize_in_place(&self, _: NonNull<u8>, _: Layout, _: usize) -> bool {
        false
    }

    unsafe fn resize_raw(
        &self,
        ptr: NonNull<u8>,
        old: Layout,
        new: Layout,
    ) -> Result<NonNull<u8>, AllocError> {
        // SAFETY: the caller's contract.
        unsafe { self.resize_block(ptr, old, new) }
    }
}

bento_pages::impl_allocator!(impl['a, A: Allocator, G: Guards, T: Tracking] for &'a Heap<A, G, T>);

/// What [`Heap::check`] found wrong.
#[derive(Debug)]
#[non_exhaustive]
pub enum CheckError {
    /// A block's guard was overwritten.
    Guard(Misuse<'static>),
    /// Two figures that must agree do not.
    Figures {
        /// The heap.
        heap: &'static str,
        /// Which figure.
        what: &'static str,
        /// What the check counted.
        counted: usize,
        /// What the heap recorded.
        recorded: usize,
    },
    /// More bytes are live than the budget allows.
    OverBudget {
        /// The heap.
        heap: &'static str,
        /// Bytes live.
        live: usize,
        /// The budget.
        budget: usize,
    },
}

impl fmt::Display for CheckError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Guard(misuse) => write!(f, "{misuse}"),
            Self::Figures {
                heap,
                what,
                counted,
                recorded,
            } => write!(
                f,
                "heap \"{heap}\": {what}: counted {counted}, recorded {recorded}"
            ),
            Self::OverBudget { heap, live, budget } => write!(
                f,
                "heap \"{heap}\": {live} bytes live, over its budget of {budget}"
            ),
        }
    }
}

impl core::error::Error for CheckError {}
