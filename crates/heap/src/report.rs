//! The registry of heaps and its [`report`]; the leak report a heap gives when it is
//! dropped.

use alloc::sync::Arc;
#[cfg(not(bento_loom))]
use alloc::sync::Weak;
use alloc::vec::Vec;
use core::fmt;
use core::ptr::NonNull;

#[cfg(not(bento_loom))]
use crate::sync::Lock;
use bento_pages::{ByteSize, Leaks, Misuse, MisuseHook};

use crate::policy::OnLeak;
use crate::stats::{Account, HeapStats};
use crate::sync::Ordering;
use crate::track::Leak;

/// Every registered heap's account, weakly: a dropped heap leaves a dead entry, swept
/// out at the next registration. The table lives in the global allocator, never in a
/// heap.
#[cfg(not(bento_loom))]
static REGISTRY: Lock<Vec<Weak<Account>>> = Lock::new(Vec::new());

/// Adds `account` to the registry (under loom, whose locks cannot be `static`,
/// there is none).
pub(crate) fn register(account: &Arc<Account>) {
    #[cfg(not(bento_loom))]
    {
        let mut heaps = REGISTRY.lock();
        heaps.retain(|w| w.strong_count() > 0);
        heaps.push(Arc::downgrade(account));
    }
    #[cfg(bento_loom)]
    let _ = account;
}

/// The registered accounts still held.
fn registered() -> Vec<Arc<Account>> {
    #[cfg(not(bento_loom))]
    {
        REGISTRY.lock().iter().filter_map(Weak::upgrade).collect()
    }
    #[cfg(bento_loom)]
    {
        Vec::new()
    }
}

/// One heap of a [`Report`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReportRow {
    /// How deep in the tree of parents: 0 for a heap without one.
    pub depth: usize,
    /// The heap's name.
    pub name: &'static str,
    /// Its stats.
    pub stats: HeapStats,
}

/// Every registered heap's stats, as a tree (children under their parent), siblings
/// sorted by live bytes, most first. Its `Display` is a table with the live and peak
/// bytes, the budget and the share of it in use: what a programmer prints on a debug
/// key or at shutdown.
///
/// ```
/// use allocator_api2::alloc::Global;
/// use bento_heap::HeapBuilder;
/// use core::alloc::Layout;
///
/// let game = HeapBuilder::new("doc-report-game").budget(1 << 20).build(Global);
/// let level = HeapBuilder::new("doc-report-level").parent(&game).build(Global);
/// let layout = Layout::new::<[u8; 4096]>();
/// let p = level.alloc(layout).unwrap();
/// let report = bento_heap::report();
/// let rows: Vec<_> = report.rows().iter().filter(|r| r.name.starts_with("doc-report")).collect();
/// assert_eq!((rows[0].name, rows[0].depth), ("doc-report-game", 0));
/// assert_eq!((rows[1].name, rows[1].depth), ("doc-report-level", 1));
/// assert!(report.to_string().contains("doc-report-level"));
/// // SAFETY: live, with its layout.
/// unsafe { level.free(p, layout) };
/// ```
#[derive(Clone, Debug, Default)]
pub struct Report {
    rows: Vec<ReportRow>,
}

impl Report {
    /// The heaps, in the table's order.
    #[must_use]
    pub fn rows(&self) -> &[ReportRow] {
        &self.rows
    }
}

/// The stats of every registered heap alive, as one [`Report`].
#[must_use]
pub fn report() -> Report {
    let mut accounts = registered();
    accounts.retain(|a| a.alive.load(Ordering::Relaxed));
    let listed = |a: &Arc<Account>| accounts.iter().any(|b| Arc::ptr_eq(a, b));
    let mut rows = Vec::with_capacity(accounts.len());
    // Roots: heaps without a parent, or whose parent is not listed.
    let roots: Vec<&Arc<Account>> = accounts
        .iter()
        .filter(|a| a.parent.as_ref().is_none_or(|p| !listed(p)))
        .collect();
    add_level(&accounts, roots, 0, &mut rows);
    Report { rows }
}

/// Adds `level` (sorted) and, under each, its children, depth first.
fn add_level(
    all: &[Arc<Account>],
    mut level: Vec<&Arc<Account>>,
    depth: usize,
    rows: &mut Vec<ReportRow>,
) {
    let mut with_stats: Vec<(&Arc<Account>, HeapStats)> =
        level.drain(..).map(|a| (a, a.stats())).collect();
    with_stats.sort_by(|a, b| {
        b.1.live_bytes
            .cmp(&a.1.live_bytes)
            .then(a.0.name.cmp(b.0.name))
    });
    for (account, stats) in with_stats {
        rows.push(ReportRow {
            depth,
            name: account.name,
            stats,
        });
        let children = all
            .iter()
            .filter(|c| c.parent.as_ref().is_some_and(|p| Arc::ptr_eq(p, account)))
            .collect();
        add_level(all, children, depth + 1, rows);
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let width = self
            .rows
            .iter()
            .map(|r| 2 * r.depth + r.name.len())
            .max()
            .unwrap_or(4)
            .max(4);
        writeln!(
            f,
            "{:<width$}  {:>10}  {:>8}  {:>10}  {:>10}  {:>6}  {:>10}  {:>10}  {:>8}",
            "heap", "live", "blocks", "peak", "budget", "used", "allocs", "frees", "failures"
        )?;
        for r in &self.rows {
            let s = &r.stats;
            let name = alloc::format!("{:indent$}{}", "", r.name, indent = 2 * r.depth);
            let (budget, used) = match s.budget {
                Some(b) => (
                    alloc::format!("{}", ByteSize::of(b)),
                    alloc::format!("{:.0}%", percent(s.live_bytes, b)),
                ),
                None => ("-".into(), "-".into()),
            };
            writeln!(
                f,
                "{name:<width$}  {:>10}  {:>8}  {:>10}  {budget:>10}  {used:>6}  {:>10}  {:>10}  {:>8}",
                ByteSize::of(s.live_bytes),
                s.live_blocks,
                ByteSize::of(s.peak_bytes),
                s.total_allocs,
                s.total_frees,
                s.failures,
            )?;
        }
        Ok(())
    }
}

/// `part` as a percentage of `whole`.
#[expect(
    clippy::cast_precision_loss,
    reason = "a percentage for display: a few digits are enough"
)]
fn percent(part: usize, whole: usize) -> f64 {
    if whole == 0 {
        100.0
    } else {
        part as f64 * 100.0 / whole as f64
    }
}

/// The blocks a dropped heap still held, as its misuse hook sees them.
#[derive(Debug)]
pub(crate) struct LeakReport {
    heap: &'static str,
    leaks: Vec<Leak>,
}

impl fmt::Display for LeakReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let blocks: usize = self.leaks.iter().map(|l| l.blocks).sum();
        let bytes: usize = self.leaks.iter().map(|l| l.size).sum();
        write!(
            f,
            "heap \"{}\" dropped with {blocks} live blocks ({bytes} bytes):",
            self.heap
        )?;
        for leak in self.leaks.iter().take(16) {
            write!(f, "\n  {leak}")?;
        }
        if self.leaks.len() > 16 {
            write!(f, "\n  ... and {} more", self.leaks.len() - 16)?;
        }
        Ok(())
    }
}

impl Leaks for LeakReport {
    fn count(&self) -> usize {
        self.leaks.iter().map(|l| l.blocks).sum()
    }

    fn for_each(&self, visit: &mut dyn FnMut(NonNull<u8>)) {
        for ptr in self.leaks.iter().filter_map(|l| l.ptr) {
            visit(ptr);
        }
    }
}

/// Whether the thread is unwinding already (a panic now would abort).
fn panicking() -> bool {
    #[cfg(feature = "std")]
    {
        std::thread::panicking()
    }
    #[cfg(not(feature = "std"))]
    {
        false
    }
}

/// Reports the blocks a dropped heap without a parent still held, as `on_leak` says.
pub(crate) fn leaked(heap: &'static str, leaks: Vec<Leak>, on_leak: OnLeak, hook: MisuseHook) {
    let report = LeakReport { heap, leaks };
    match on_leak {
        OnLeak::Ignore => {}
        OnLeak::Panic if !panicking() => panic!("{report}"),
        OnLeak::Hook if !panicking() => hook(&Misuse::Leaked(&report)),
        #[cfg(not(feature = "std"))]
        OnLeak::Log => hook(&Misuse::Leaked(&report)),
        _ => {
            #[cfg(feature = "std")]
            std::eprintln!("{report}");
        }
    }
}
