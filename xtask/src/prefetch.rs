//! What the later CI steps install (the nightly toolchain with Miri and its sysroot,
//! the declared `rust-version`, the cross targets, Wine and MinGW), installed in the
//! background while the first steps build: on a fresh machine the downloads then
//! overlap with compiling instead of adding to it. Each step that needs a tool
//! [`wait`]s for the prefetch first, then checks (and installs) as it always does,
//! so a failed prefetch only costs the time it took.

use std::sync::Mutex;
use std::thread::JoinHandle;
use std::time::Instant;

/// One tool's installation: what it could not do, if anything.
type Part = fn() -> Result<(), String>;

/// The background thread, while it runs.
static PREFETCH: Mutex<Option<JoinHandle<()>>> = Mutex::new(None);

/// Starts the prefetch (once; `cargo xtask ci` does).
pub(crate) fn start() {
    let mut slot = PREFETCH
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if slot.is_some() {
        return;
    }
    *slot = Some(std::thread::spawn(|| {
        let start = Instant::now();
        // Each part says why it could not install, if it could not: the step that
        // needs it tries again and reports.
        let parts: [(&str, Part); 4] = [
            ("miri", crate::miri::prepare),
            ("msrv", crate::msrv::prepare),
            ("windows", crate::windows::prepare),
            ("nostd", crate::nostd::prepare),
        ];
        for (name, part) in parts {
            if let Err(why) = part() {
                println!("xtask: prefetch for {name}: {why}");
            }
        }
        println!(
            "xtask: prefetch done in {:.1} s",
            start.elapsed().as_secs_f64()
        );
    }));
}

/// Waits for the prefetch to end, if one was started.
pub(crate) fn wait() {
    let handle = PREFETCH
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .take();
    if let Some(handle) = handle {
        let _ = handle.join();
    }
}
