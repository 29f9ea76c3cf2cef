//! [`Heap`]: the allocation, free and tag paths; its builder in [`builder`], resizing
//! in [`resize`], the guard and table check in [`check`].

pub(crate) mod builder;
mod resize;
pub(crate) mod validate;

use alloc::boxed::Box;
use alloc::sync::Arc;
use alloc::vec::Vec;
use core::alloc::Layout;
use core::fmt;
use core::panic::Location;
use core::ptr::NonNull;

use allocator_api2::alloc::Allocator;
use bento_pages::{AllocError, Misuse, MisuseHook, RawAlloc, dangling};

use crate::policy::{
    FillPattern, Guards, NoGuards, OnLeak, Retry, Tag, broken_guard, write_guards,
};
use crate::profiled::HeapProfile;
use crate::sampled::HeapGuard;
use crate::sink::{EventKind, EventSink, HeapEvent, tag_name};
use crate::stats::{Account, HeapStats};
use crate::sync::{AtomicUsize, Ordering};
use crate::track::{Leak, NoTracking, TagStats, Tracked, Tracking};

/// The callback a heap calls before it refuses a request over its budget.
type BudgetFn = dyn Fn(&HeapStats, Layout) -> Retry + Send + Sync;

/// A named heap over the allocator `A` (any allocator-api2 0.2 `Allocator`: a
/// `&MemorySpace`, a `&CommonAllocator`, a `&Bump`, `Global`), with a budget, stats,
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
    /// Sampled guard pages (`HeapBuilder::guard_pages`), on the hot path too.
    sampler: Option<HeapGuard>,
    /// The sampled allocation profile (`HeapBuilder::profile`), on the hot path too.
    profile: Option<HeapProfile>,
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

    /// Tells a running Tracy client that the heap's pool lost every block.
    fn tracy_discard(&self) {
        if let Some(name) = self.tracy
            && tracy_client::Client::is_running()
        {
            // SAFETY: `name` is a leaked C string, valid for the program.
            unsafe { tracy_client::sys::___tracy_emit_memory_discard(name.as_ptr()) };
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

    /// The heap's stats (its children's blocks included).
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
            if let Some(profile) = &self.profile {
                profile.freed(ptr);
            }
            // SAFETY: `ptr` is a live block (the caller's contract) of the pool or the
            // inner allocator, with `layout` (a plain heap adds no guards).
            unsafe { self.release_base(ptr, layout) };
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
        if let Some(profile) = &self.profile {
            profile.freed(ptr);
        }
        let (outer, front) = Self::outer(layout).unwrap_or((layout, 0));
        // SAFETY: `ptr` is a live block (the caller's contract), `front` bytes into the
        // inner block allocated with `outer` (both as at its allocation: the same
        // layout gives the same ones).
        unsafe { self.release_base(ptr.sub(front), outer) };
    }

    /// A guarded block for the inner layout `outer` when guard pages are on and the
    /// heap's sampler picks this allocation.
    #[inline(always)]
    fn guarded_alloc(
        &self,
        outer: Layout,
        tag: Option<&'static Tag>,
        site: Option<&'static Location<'static>>,
    ) -> Option<NonNull<u8>> {
        let guard = self.sampler.as_ref()?;
        if !guard.due() {
            return None;
        }
        self.take_sample(guard, outer, tag, site)
    }

    /// Counts a new block of `layout` at `user` for the profile, and records it when
    /// the sample falls in it.
    #[inline(always)]
    pub(super) fn note_profile(
        &self,
        user: NonNull<u8>,
        layout: Layout,
        tag: Option<&'static Tag>,
        site: Option<&'static Location<'static>>,
    ) {
        if let Some(profile) = &self.profile
            && profile.due(layout.size())
        {
            let tag = tag.or_else(|| self.current_tag());
            let owner = Arc::as_ptr(&self.account).addr();
            profile.record(
                user,
                layout,
                self.account.name,
                tag.map(Tag::name),
                site,
                owner,
            );
        }
    }

    /// The sampled allocation: a block of the guard pool, labelled.
    #[cold]
    #[inline(never)]
    fn take_sample(
        &self,
        guard: &HeapGuard,
        outer: Layout,
        tag: Option<&'static Tag>,
        site: Option<&'static Location<'static>>,
    ) -> Option<NonNull<u8>> {
        let tag = tag.or_else(|| self.current_tag());
        let owner = Arc::as_ptr(&self.account).addr();
        guard.alloc(outer, self.account.name, tag.map(Tag::name), site, owner)
    }

    /// Gives an inner block back: to the guard pool that holds it, else to the inner
    /// allocator.
    ///
    /// # Safety
    ///
    /// `base` is a live inner block of this heap, allocated (or last resized) with
    /// `outer`, not used afterwards.
    #[inline(always)]
    pub(super) unsafe fn release_base(&self, base: NonNull<u8>, outer: Layout) {
        if let Some(guard) = &self.sampler
            && guard.owns(base)
        {
            // SAFETY: the caller's contract; the pool holds it.
            return unsafe { guard.free(base) };
        }
        // SAFETY: the caller's contract.
        unsafe { self.inner.deallocate(base, outer) }
    }

    /// Whether the inner block at `base` is a guarded one.
    pub(super) fn is_guarded(&self, base: NonNull<u8>) -> bool {
        self.sampler.as_ref().is_some_and(|g| g.owns(base))
    }

    /// Forgets every live block of the heap at once, for an inner allocator that frees
    /// them wholesale: a [`Bump`]'s reset, a frame arena's next frame. The heap's live
    /// figures drop to zero (counted as frees), its tracking table empties, its sink
    /// hears one [`EventKind::Discard`], Tracy (feature `tracy`) the discard of the
    /// heap's memory pool, and its guarded blocks go back to the guard pool (so a use
    /// of one after the reset faults). Its children's blocks are theirs. Call it as
    /// the inner allocator resets; `&mut self`: no container borrows the heap.
    ///
    /// [`Bump`]: https://docs.rs/bento-primitives
    ///
    /// ```
    /// use allocator_api2::vec::Vec;
    /// use bento_heap::HeapBuilder;
    /// use bento_primitives::Bump;
    /// use core::mem::MaybeUninit;
    ///
    /// let mut buf = [MaybeUninit::uninit(); 4096];
    /// let mut bump = Bump::new(&mut buf);
    /// for frame in 0..3 {
    ///     let mut heap = HeapBuilder::new("doc-frame-temps").register(false).build(&bump);
    ///     let mut v: Vec<u32, _> = Vec::new_in(&heap);
    ///     v.extend(0..100);
    ///     core::mem::forget(v); // frame memory is never freed one by one
    ///     heap.discard_all();
    ///     assert_eq!(heap.stats().live_bytes, 0);
    ///     drop(heap);
    ///     bump.reset();
    /// #   let _ = frame;
    /// }
    /// ```
    pub fn discard_all(&mut self) {
        let (bytes, blocks) = self.account.own_live();
        if let Some(table) = self.tracking.table() {
            table.clear();
        }
        let owner = Arc::as_ptr(&self.account).addr();
        if let Some(guard) = &self.sampler {
            // SAFETY: `&mut self`: no borrow of the heap lives, and the caller gives
            // the blocks up with the inner allocator's reset.
            unsafe { guard.free_owned(owner) };
        }
        if let Some(profile) = &self.profile {
            profile.discarded(owner);
        }
        self.account.release(bytes, blocks);
        if let Some(x) = &self.extras {
            self.discarded(x, bytes);
        }
    }

    /// Tells the sink and Tracy that every block (`bytes` of them) went.
    fn discarded(&self, x: &Extras, bytes: usize) {
        if let Some(sink) = &x.sink {
            sink.event(&HeapEvent {
                heap: self.account.name,
                seq: x.seq.fetch_add(1, Ordering::Relaxed) as u64,
                kind: EventKind::Discard,
                addr: 0,
                size: bytes,
                align: 0,
                tag: None,
            });
        }
        #[cfg(feature = "tracy")]
        x.tracy_discard();
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
            // A plain heap's block is the inner one: a sampled block is the pool's.
            let block = match self.guarded_alloc(layout, tag, site) {
                Some(p) => p,
                None => match self.inner.allocate(layout) {
                    Ok(block) => block.cast(),
                    Err(_) => return Err(self.undo(size, 1)),
                },
            };
            self.note_profile(block, layout, tag, site);
            return Ok(block);
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
            let base = match self.guarded_alloc(outer, tag, site) {
                Some(base) => base,
                None => self.inner.allocate(outer).map_err(|_| AllocError)?.cast(),
            };
            // SAFETY: `front + size <= outer.size()`: inside the inner block.
            Ok(unsafe { base.add(front) })
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
        self.note_profile(user, layout, tag, site);
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

    /// Reports a broken guard of the block at `ptr`, if one is, through the hook.
    ///
    /// # Safety
    ///
    /// `ptr` is a live block of this heap of `size` bytes.
    unsafe fn check_guards(
        &self,
        ptr: NonNull<u8>,
        size: usize,
        site: Option<&'static Location<'static>>,
    ) {
        // SAFETY: the caller's contract.
        if let Some(misuse) = unsafe { self.guard_misuse(ptr, size, site) } {
            (self.hook)(&misuse);
        }
    }

    /// The broken guard of the block at `ptr`, if one is, as a misuse (not reported).
    ///
    /// # Safety
    ///
    /// `ptr` is a live block of this heap of `size` bytes.
    unsafe fn guard_misuse(
        &self,
        ptr: NonNull<u8>,
        size: usize,
        site: Option<&'static Location<'static>>,
    ) -> Option<Misuse<'static>> {
        // SAFETY: a live block has `G::BYTES` guard bytes on each side.
        let (side, offset) = unsafe { broken_guard::<G>(ptr, size) }?;
        Some(Misuse::GuardOverwritten {
            heap: self.account.name,
            ptr,
            size,
            side,
            offset,
            site,
        })
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

    /// Stats per tag, in the order the tags first appeared.
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
