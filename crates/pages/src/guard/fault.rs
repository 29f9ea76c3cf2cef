//! The fault handler of the guard pools: `SIGSEGV` and `SIGBUS`, installed once
//! when the first pool is made. It asks the pools' hook about the address (a
//! fault inside a pool's slots is reported there, and the program aborts); any
//! other fault goes to the handler that was installed before, or to the default
//! action.

use core::cell::UnsafeCell;
use core::ffi::{c_int, c_void};
use core::mem::MaybeUninit;
use core::sync::atomic::{AtomicBool, AtomicPtr, Ordering};

/// The signals a fault in a pool raises (`SIGBUS` on some systems).
const SIGNALS: [c_int; 2] = [libc::SIGSEGV, libc::SIGBUS];

static INSTALLED: AtomicBool = AtomicBool::new(false);

/// The pools' hook, `fn(usize)`: set before the handler is installed.
static HOOK: AtomicPtr<()> = AtomicPtr::new(core::ptr::null_mut());

/// The actions in place before ours, one per signal of [`SIGNALS`].
struct Previous(UnsafeCell<[MaybeUninit<libc::sigaction>; 2]>);

// SAFETY: written once, by the thread that sets `INSTALLED`, inside the
// `sigaction` call that installs our handler (which runs only after it); read only
// by the handler.
unsafe impl Sync for Previous {}

static PREVIOUS: Previous = Previous(UnsafeCell::new([MaybeUninit::zeroed(); 2]));

/// Installs the handler for both signals, once for the program, with `hook` as
/// the question it asks of each fault's address (the first call's hook stays).
pub(super) fn install(hook: fn(usize)) {
    if INSTALLED.swap(true, Ordering::AcqRel) {
        return;
    }
    HOOK.store((hook as *const ()).cast_mut(), Ordering::Release);
    for (k, &signal) in SIGNALS.iter().enumerate() {
        // SAFETY: `sigaction` is plain data; all zero is a valid value.
        let mut action: libc::sigaction = unsafe { core::mem::zeroed() };
        action.sa_sigaction = on_fault as extern "C" fn(c_int, *mut libc::siginfo_t, *mut c_void)
            as libc::sighandler_t;
        action.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK;
        // SAFETY: `sigemptyset` writes the mask it is given; `sigaction` installs a
        // handler of the `SA_SIGINFO` type and stores the old action in this
        // signal's entry, written by this thread alone (`INSTALLED`).
        unsafe {
            libc::sigemptyset(&raw mut action.sa_mask);
            let old = PREVIOUS.0.get().cast::<libc::sigaction>().add(k);
            libc::sigaction(signal, &raw const action, old);
        }
    }
}

/// The handler: a report for a fault in a pool, else the previous handler.
extern "C" fn on_fault(signal: c_int, info: *mut libc::siginfo_t, context: *mut c_void) {
    // SAFETY: the kernel passes a valid `siginfo_t` to an `SA_SIGINFO` handler.
    let addr = unsafe { (*info).si_addr() }.addr();
    let hook = HOOK.load(Ordering::Acquire);
    if !hook.is_null() {
        // SAFETY: a non-null hook is the `fn(usize)` `install` stored.
        let hook: fn(usize) = unsafe { core::mem::transmute::<*mut (), fn(usize)>(hook) };
        hook(addr);
    }
    chain(signal, info, context);
}

/// Passes a fault that is not ours to the action installed before ours.
fn chain(signal: c_int, info: *mut libc::siginfo_t, context: *mut c_void) {
    let k = SIGNALS.iter().position(|&s| s == signal).unwrap_or(0);
    // SAFETY: written before our handler could run (`install`), never again.
    let previous = unsafe { (*PREVIOUS.0.get())[k].assume_init_ref() };
    let handler = previous.sa_sigaction;
    if handler == libc::SIG_DFL || handler == libc::SIG_IGN {
        // The default action: restored, the access faults again when this returns
        // and the signal ends the program as it would have without us.
        // SAFETY: reinstalls the action that was in place.
        unsafe { libc::sigaction(signal, previous, core::ptr::null_mut()) };
    } else if previous.sa_flags & libc::SA_SIGINFO != 0 {
        // SAFETY: an `SA_SIGINFO` action's handler has this type; it gets the
        // arguments the kernel gave us.
        let handler: extern "C" fn(c_int, *mut libc::siginfo_t, *mut c_void) =
            unsafe { core::mem::transmute(handler) };
        handler(signal, info, context);
    } else {
        // SAFETY: a plain action's handler takes the signal number.
        let handler: extern "C" fn(c_int) = unsafe { core::mem::transmute(handler) };
        handler(signal);
    }
}
