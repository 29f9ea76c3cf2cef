//! [`HeapBuilder`]: a heap's name, budget, policies and parent, then `build`.

use alloc::boxed::Box;
use alloc::sync::Arc;
use core::alloc::Layout;
use core::fmt;

use allocator_api2::alloc::Allocator;
use bento_pages::{GuardConfig, MisuseHook, panic_on_misuse};

use crate::named::{BudgetFn, Extras, Heap};
use crate::policy::{FillPattern, Guards, NoGuards, OnLeak, Retry};
use crate::report;
use crate::sampled::HeapGuard;
use crate::sink::EventSink;
use crate::stats::{Account, HeapStats};
use crate::sync::AtomicUsize;
use crate::track::{NoTracking, Track, Tracked, Tracking};

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
    guard: Option<GuardConfig>,
    profile: Option<crate::profiled::HeapProfile>,
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
            guard: None,
            profile: None,
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
        self.with_policies(|_, tracking| (guards, tracking))
    }

    /// A table of live blocks, for [`leaks`](Heap::leaks), tags and
    /// [`validate`](Heap::validate).
    pub fn tracking(self, track: Track) -> HeapBuilder<G, Tracked> {
        self.with_policies(|guards, _| (guards, Tracked::new(track)))
    }

    /// The builder with the guards and tracking `swap` makes of its own, and all else
    /// kept.
    fn with_policies<G2: Guards, T2: Tracking>(
        self,
        swap: impl FnOnce(G, T) -> (G2, T2),
    ) -> HeapBuilder<G2, T2> {
        let (guards, tracking) = swap(self.guards, self.tracking);
        HeapBuilder {
            name: self.name,
            budget: self.budget,
            guards,
            tracking,
            fill: self.fill,
            sink: self.sink,
            on_budget: self.on_budget,
            parent: self.parent,
            hook: self.hook,
            on_leak: self.on_leak,
            register: self.register,
            guard: self.guard,
            profile: self.profile,
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
    /// refused, with the heap's stats and the request: it may free memory (flush a
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

    /// Makes the heap a child of `parent`: its blocks count in `parent`'s stats and
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

    /// Sampled guard pages: one allocation in [`GuardConfig::every`] (of up to two
    /// pages, guards included) goes to a slot of its own between inaccessible pages,
    /// so that an overrun or a use after free faults at the access and the program
    /// aborts with one report naming the block, its heap and tag, and where it was
    /// allocated and freed. For a shipped build: the sampled blocks alone pay (a
    /// few system calls each). The heaps of a process share one pool, made with the
    /// first such heap's [`slots`](GuardConfig::slots) and never given back; a heap
    /// of another allocation path or on a system without one (Unix with `std`) is
    /// built without it.
    ///
    /// ```
    /// use allocator_api2::{alloc::Global, boxed::Box};
    /// use bento_heap::HeapBuilder;
    /// use bento_pages::GuardConfig;
    ///
    /// let heap = HeapBuilder::new("doc-guarded")
    ///     .guard_pages(GuardConfig::DEFAULT.every(1000))
    ///     .build(Global);
    /// let b = Box::new_in([0u8; 64], &heap);
    /// assert_eq!(heap.stats().live_blocks, 1);
    /// drop(b);
    /// ```
    pub fn guard_pages(mut self, config: GuardConfig) -> Self {
        self.guard = Some(config);
        self
    }

    /// A sampled allocation profile: one allocation every
    /// [`every`](bento_pages::ProfileConfig::every) bytes on average (counted per
    /// thread, an exponential draw) is recorded in `profiler` with this heap's name,
    /// its tag, its site (`#[track_caller]`, and the stack with
    /// [`backtrace`](bento_pages::ProfileConfig::backtrace)) and the frame and phase
    /// [`Profiler::set_frame`](bento_pages::Profiler::set_frame) set, until its free.
    /// Heaps may share a profiler; its pprof dump shows them side by side.
    ///
    /// ```
    /// use allocator_api2::{alloc::Global, vec::Vec};
    /// use bento_heap::HeapBuilder;
    /// use bento_pages::{ProfileConfig, Profiler};
    ///
    /// let profiler = Profiler::new(ProfileConfig::DEFAULT.every(4096).backtrace(false)).unwrap();
    /// let heap = HeapBuilder::new("doc-profiled").profile(profiler).build(Global);
    /// let mut v: Vec<u8, _> = Vec::new_in(&heap);
    /// v.resize(1 << 20, 0); // far above the mean: surely sampled
    /// assert_eq!(profiler.estimate(|l, _| l.heap == Some("doc-profiled")), 1 << 20);
    /// drop(v);
    /// assert_eq!(profiler.stats().live_samples, 0);
    /// ```
    #[cfg(all(feature = "std", any(unix, windows), not(bento_loom)))]
    pub fn profile(mut self, profiler: &'static bento_pages::Profiler) -> Self {
        self.profile = Some(crate::profiled::HeapProfile::new(profiler));
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
        let on = !self.fill.is_none() || self.sink.is_some() || tracy_on;
        let extras = on.then(|| {
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
            sampler: self.guard.and_then(HeapGuard::new),
            profile: self.profile,
            hook: self.hook,
            on_leak: self.on_leak,
            #[cfg(not(feature = "std"))]
            tag: crate::sync::AtomicPtr::new(core::ptr::null_mut()),
        }
    }
}
