//! [`Trace`]: where a guarded block was allocated or freed — the caller's source
//! location when the allocator has one, and the return addresses on the stack
//! (through the system's unwinder, in std builds on Linux).

use core::fmt;
use core::panic::Location;

/// The return addresses a trace keeps.
const FRAMES: usize = 16;

/// Where a guarded block was allocated or freed: the caller's source location
/// (`#[track_caller]`) and up to 16 return addresses, innermost first. A report
/// prints each with the object file and the nearest exported symbol.
///
/// ```
/// use bento_pages::Trace;
///
/// let here = Trace::here(Some(core::panic::Location::caller()));
/// assert!(here.caller().is_some());
/// // Frames where the build can walk the stack (std builds on Linux).
/// assert_eq!(here.frames().is_empty(), !cfg!(target_os = "linux"));
/// ```
#[derive(Clone, Copy)]
pub struct Trace {
    caller: Option<&'static Location<'static>>,
    frames: [usize; FRAMES],
    len: u8,
}

impl fmt::Debug for Trace {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Trace")
            .field("caller", &self.caller)
            .field("frames", &self.frames())
            .finish()
    }
}

impl Trace {
    /// No site known.
    pub const EMPTY: Self = Self {
        caller: None,
        frames: [0; FRAMES],
        len: 0,
    };

    /// The current stack (from this call's caller outwards) and `caller`. It does
    /// not allocate.
    #[inline(never)]
    #[must_use]
    pub fn here(caller: Option<&'static Location<'static>>) -> Self {
        let mut trace = Self {
            caller,
            ..Self::EMPTY
        };
        walk(&mut trace);
        trace
    }

    /// `caller` alone, without walking the stack (no cost beyond the copy).
    #[must_use]
    pub const fn at(caller: Option<&'static Location<'static>>) -> Self {
        Self {
            caller,
            frames: [0; FRAMES],
            len: 0,
        }
    }

    /// The caller's source location, if the allocator knew it.
    #[must_use]
    pub fn caller(&self) -> Option<&'static Location<'static>> {
        self.caller
    }

    /// The return addresses, innermost first.
    #[must_use]
    pub fn frames(&self) -> &[usize] {
        &self.frames[..usize::from(self.len)]
    }

    /// Whether nothing is known.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.caller.is_none() && self.len == 0
    }
}

#[cfg(all(feature = "std", target_os = "linux"))]
#[inline(always)]
fn walk(trace: &mut Trace) {
    use core::ffi::{c_int, c_void};

    /// `_URC_NO_REASON`: go on; `_URC_NORMAL_STOP`: stop.
    const GO_ON: c_int = 0;
    const STOP: c_int = 4;

    unsafe extern "C" {
        // libgcc's unwinder, which std links on Linux.
        fn _Unwind_Backtrace(
            step: extern "C" fn(*mut c_void, *mut c_void) -> c_int,
            arg: *mut c_void,
        ) -> c_int;
        fn _Unwind_GetIP(context: *mut c_void) -> usize;
    }

    /// Keeps one frame's address; skips `here`'s own (`walk` is inlined in it).
    extern "C" fn step(context: *mut c_void, arg: *mut c_void) -> c_int {
        // SAFETY: `arg` is the `(Trace, skip)` pair `walk` passes, alive during the
        // walk and reached by nothing else meanwhile.
        let (trace, skip) = unsafe { &mut *arg.cast::<(&mut Trace, u8)>() };
        // SAFETY: `context` is the unwinder's, valid during this call.
        let ip = unsafe { _Unwind_GetIP(context) };
        if ip == 0 {
            return STOP;
        }
        if *skip > 0 {
            *skip -= 1;
            return GO_ON;
        }
        trace.frames[usize::from(trace.len)] = ip;
        trace.len += 1;
        if usize::from(trace.len) == FRAMES {
            STOP
        } else {
            GO_ON
        }
    }

    let mut state: (&mut Trace, u8) = (trace, 1);
    // SAFETY: `step` matches the unwinder's callback type and reads `arg` as the
    // pair passed here, which outlives the call.
    unsafe { _Unwind_Backtrace(step, (&raw mut state).cast()) };
}

#[cfg(not(all(feature = "std", target_os = "linux")))]
fn walk(_trace: &mut Trace) {}
