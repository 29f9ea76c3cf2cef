//! A guard report: what went wrong with which block, its allocation and free sites,
//! written to stderr with `write(2)` from a fixed buffer (nothing allocates, so it
//! runs in the fault handler), then the abort.

use core::ffi::{CStr, c_void};
use core::fmt::{self, Write};

use super::config::GuardFault;
use super::slot::{Slot, State};
use super::trace::Trace;

/// Reports a misuse found in a free (the caller holds the pool's lock) and aborts.
pub(super) fn misuse(
    name: &str,
    kind: GuardFault,
    addr: usize,
    slot: Option<&Slot>,
    this_free: &Trace,
) -> ! {
    let mut out = Out::new();
    headline(&mut out, name, kind, addr, slot);
    if let Some(slot) = slot {
        sites(&mut out, slot);
    }
    trace(&mut out, "this free", this_free);
    finish(out)
}

/// Reports a fault at `addr` about `slot` (if any) of the pool `name`, and aborts.
/// It runs on the signal stack, a few KiB: it copies no slot record.
pub(super) fn fault(name: &str, kind: GuardFault, addr: usize, slot: Option<&Slot>) -> ! {
    let mut out = Out::new();
    headline(&mut out, name, kind, addr, slot);
    if let Some(slot) = slot {
        sites(&mut out, slot);
    }
    finish(out)
}

/// The report's first line.
fn headline(out: &mut Out, name: &str, kind: GuardFault, addr: usize, slot: Option<&Slot>) {
    let _ = write!(out, "bento: {kind}");
    if let Some(s) = slot {
        let _ = write!(out, " of a {}-byte block at {:#x}", s.size, s.start);
    }
    let _ = match (kind, slot) {
        (GuardFault::DoubleFree, _) => write!(out, ": freed twice"),
        (GuardFault::InvalidFree, _) => write!(out, ": a free of {addr:#x}, no block's start"),
        (GuardFault::OverrunAtFree, Some(s)) => write!(
            out,
            ": the byte at {addr:#x}, {} bytes past its end, was written",
            addr - (s.start + s.size)
        ),
        (_, Some(s)) if addr < s.start => write!(
            out,
            ": an access at {addr:#x}, {} bytes before its start",
            s.start - addr
        ),
        (_, Some(s)) if addr >= s.start + s.size => write!(
            out,
            ": an access at {addr:#x}, {} bytes past its end",
            addr - (s.start + s.size)
        ),
        (_, Some(s)) => write!(
            out,
            ": an access at {addr:#x}, {} bytes into it",
            addr - s.start
        ),
        (_, None) => write!(out, ": an access at {addr:#x}"),
    };
    let label = slot.map(|s| s.label).unwrap_or_default();
    let _ = write!(out, " (heap \"{}\"", label.heap.unwrap_or(name));
    if let Some(tag) = label.tag {
        let _ = write!(out, ", tag \"{tag}\"");
    }
    let _ = writeln!(out, ")");
}

/// A block's allocation and free sites.
fn sites(out: &mut Out, slot: &Slot) {
    trace(out, "allocated", &slot.alloc);
    if slot.state == State::Freed {
        trace(out, "freed", &slot.free);
    }
}

/// One site: its source location and frames.
fn trace(out: &mut Out, what: &str, trace: &Trace) {
    if trace.is_empty() {
        let _ = writeln!(out, "bento: {what} at: (no stack in this build)");
        return;
    }
    let _ = writeln!(out, "bento: {what} at:");
    if let Some(at) = trace.caller() {
        let _ = writeln!(out, "    {}:{}:{}", at.file(), at.line(), at.column());
    }
    for (k, &ip) in trace.frames().iter().enumerate() {
        let _ = write!(out, "    #{k} {ip:#018x}");
        symbol(out, ip);
        let _ = writeln!(out);
    }
}

/// The object and nearest exported symbol of a return address, from the dynamic
/// linker's tables.
fn symbol(out: &mut Out, ip: usize) {
    // SAFETY: `Dl_info` is plain data; all zero is a valid value.
    let mut info: libc::Dl_info = unsafe { core::mem::zeroed() };
    // SAFETY: `dladdr` only reads the linker's tables and writes `info`; an address
    // outside every object gives 0. The address is used as a number only.
    if unsafe { libc::dladdr(ip as *const c_void, &raw mut info) } == 0 {
        return;
    }
    if !info.dli_sname.is_null() {
        // SAFETY: a non-null name is a C string of the loaded object's.
        let name = unsafe { CStr::from_ptr(info.dli_sname) };
        out.bytes(b" ");
        out.bytes(name.to_bytes());
        let _ = write!(out, "+{:#x}", ip.wrapping_sub(info.dli_saddr.addr()));
    }
    if !info.dli_fname.is_null() {
        // SAFETY: as above.
        let file = unsafe { CStr::from_ptr(info.dli_fname) };
        out.bytes(b" (");
        out.bytes(file.to_bytes());
        let _ = write!(out, "+{:#x})", ip.wrapping_sub(info.dli_fbase.addr()));
    }
}

/// The last line, then the abort.
fn finish(mut out: Out) -> ! {
    let _ = writeln!(out, "bento: aborting");
    out.flush();
    // SAFETY: `abort` ends the process; it is async-signal-safe.
    unsafe { libc::abort() }
}

/// A fixed buffer written to stderr as it fills and at each line's end.
struct Out {
    buf: [u8; 256],
    len: usize,
}

impl Out {
    fn new() -> Self {
        Self {
            buf: [0; 256],
            len: 0,
        }
    }

    fn bytes(&mut self, mut bytes: &[u8]) {
        while !bytes.is_empty() {
            let n = bytes.len().min(self.buf.len() - self.len);
            self.buf[self.len..self.len + n].copy_from_slice(&bytes[..n]);
            self.len += n;
            bytes = &bytes[n..];
            if self.len == self.buf.len() || self.buf[self.len - 1] == b'\n' {
                self.flush();
            }
        }
    }

    fn flush(&mut self) {
        let mut done = 0;
        while done < self.len {
            // SAFETY: writes initialised bytes of the buffer to stderr.
            let n = unsafe { libc::write(2, self.buf[done..].as_ptr().cast(), self.len - done) };
            if n <= 0 {
                break;
            }
            done += n as usize;
        }
        self.len = 0;
    }
}

impl Write for Out {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        self.bytes(s.as_bytes());
        Ok(())
    }
}
