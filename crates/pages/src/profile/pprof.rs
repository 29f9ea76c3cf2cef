//! The profiler's dump: pprof's `profile.proto`, written uncompressed and streamed
//! through a callback, message by message from stack buffers (nothing allocates, so
//! bento-malloc can dump from inside the program). Strings, functions and locations
//! are not shared between samples: each sample writes its own, numbered as they
//! come (the format allows repeats), which keeps the writer free of tables.

use core::fmt::Write;

use super::table::{Entry, Table};

/// A message under construction: up to 1 KiB, the most a sample's message takes
/// (32 location ids, two values, five labels).
struct Msg {
    buf: [u8; 1024],
    len: usize,
}

impl Msg {
    fn new() -> Self {
        Self {
            buf: [0; 1024],
            len: 0,
        }
    }

    fn byte(&mut self, b: u8) {
        if self.len < self.buf.len() {
            self.buf[self.len] = b;
            self.len += 1;
        }
    }

    fn varint(&mut self, mut v: u64) {
        while v >= 0x80 {
            self.byte(v as u8 | 0x80);
            v >>= 7;
        }
        self.byte(v as u8);
    }

    /// A varint field.
    fn int(&mut self, field: u32, v: u64) {
        self.varint(u64::from(field) << 3);
        self.varint(v);
    }

    /// A length-delimited field holding `bytes`.
    fn bytes(&mut self, field: u32, bytes: &[u8]) {
        self.varint(u64::from(field) << 3 | 2);
        self.varint(bytes.len() as u64);
        for &b in bytes {
            self.byte(b);
        }
    }

    fn as_bytes(&self) -> &[u8] {
        &self.buf[..self.len]
    }
}

/// The writer: the callback and the next string, function and location numbers.
struct Out<'a> {
    out: &'a mut dyn FnMut(&[u8]),
    strings: u64,
    functions: u64,
    locations: u64,
}

impl Out<'_> {
    /// Writes a top-level field `field` holding `msg`.
    fn message(&mut self, field: u32, msg: &Msg) {
        let mut head = Msg::new();
        head.varint(u64::from(field) << 3 | 2);
        head.varint(msg.len as u64);
        (self.out)(head.as_bytes());
        (self.out)(msg.as_bytes());
    }

    /// Writes string `s` to the table; its index.
    fn string(&mut self, s: &[u8]) -> u64 {
        let mut head = Msg::new();
        head.varint(6 << 3 | 2);
        head.varint(s.len() as u64);
        (self.out)(head.as_bytes());
        (self.out)(s);
        self.strings += 1;
        self.strings - 1
    }

    /// Writes a function named `name` (in `file`, from `line`) and a location of
    /// it at `address`; the location's id.
    fn frame(&mut self, name: &[u8], file: &[u8], line: u64, address: u64) -> u64 {
        let name = self.string(name);
        let file = if file.is_empty() {
            0
        } else {
            self.string(file)
        };
        self.functions += 1;
        let mut f = Msg::new();
        f.int(1, self.functions);
        f.int(2, name);
        f.int(3, name);
        f.int(4, file);
        f.int(5, line);
        self.message(5, &f);
        let mut l = Msg::new();
        let mut at = Msg::new();
        at.int(1, self.functions);
        at.int(2, line);
        self.locations += 1;
        l.int(1, self.locations);
        l.int(3, address);
        l.bytes(4, at.as_bytes());
        self.message(4, &l);
        self.locations
    }
}

/// A fixed buffer for names made with `write!`.
struct Name {
    buf: [u8; 256],
    len: usize,
}

impl Name {
    fn new() -> Self {
        Self {
            buf: [0; 256],
            len: 0,
        }
    }

    fn push(&mut self, bytes: &[u8]) {
        let n = bytes.len().min(self.buf.len() - self.len);
        self.buf[self.len..self.len + n].copy_from_slice(&bytes[..n]);
        self.len += n;
    }

    fn as_bytes(&self) -> &[u8] {
        &self.buf[..self.len]
    }
}

impl Write for Name {
    fn write_str(&mut self, s: &str) -> core::fmt::Result {
        self.push(s.as_bytes());
        Ok(())
    }
}

/// The name of the code at return address `ip`: the nearest exported symbol
/// (`name+0xOFF`), else its object and offset, else the address.
fn frame_name(ip: usize) -> Name {
    let mut name = Name::new();
    #[cfg(unix)]
    {
        use core::ffi::{CStr, c_void};
        // SAFETY: `Dl_info` is plain data; all zero is a valid value.
        let mut info: libc::Dl_info = unsafe { core::mem::zeroed() };
        // SAFETY: `dladdr` reads the linker's tables and writes `info`; the address
        // is used as a number only.
        if unsafe { libc::dladdr(ip as *const c_void, &raw mut info) } != 0 {
            if !info.dli_sname.is_null() {
                // SAFETY: a non-null name is a C string of the loaded object's.
                name.push(unsafe { CStr::from_ptr(info.dli_sname) }.to_bytes());
                let _ = write!(name, "+{:#x}", ip.wrapping_sub(info.dli_saddr.addr()));
                return name;
            }
            if !info.dli_fname.is_null() {
                // SAFETY: as above.
                let file = unsafe { CStr::from_ptr(info.dli_fname) }.to_bytes();
                let base = file.rsplit(|&b| b == b'/').next().unwrap_or(file);
                name.push(base);
                let _ = write!(name, "+{:#x}", ip.wrapping_sub(info.dli_fbase.addr()));
                return name;
            }
        }
    }
    let _ = write!(name, "{ip:#x}");
    name
}

/// Writes `table`'s samples (those of mark `since` and later, with `Some`) as a
/// profile of sampling period `every` bytes.
pub(super) fn write(table: &Table, every: usize, since: Option<u32>, out: &mut dyn FnMut(&[u8])) {
    let mut w = Out {
        out,
        strings: 0,
        functions: 0,
        locations: 0,
    };
    w.string(b"");
    let mut types = [0u64; 4];
    for (i, s) in [&b"inuse_objects"[..], b"count", b"inuse_space", b"bytes"]
        .into_iter()
        .enumerate()
    {
        types[i] = w.string(s);
    }
    for pair in types.chunks(2) {
        let mut t = Msg::new();
        t.int(1, pair[0]);
        t.int(2, pair[1]);
        w.message(1, &t);
    }
    let mut period = Msg::new();
    period.int(1, types[2]);
    period.int(2, types[3]);
    w.message(11, &period);
    let mut p = Msg::new();
    p.int(12, every as u64);
    (w.out)(p.as_bytes());
    table.for_each(|e| {
        if since.is_none_or(|m| e.mark >= m) {
            sample(&mut w, e);
        }
    });
}

/// One sample: its frames' functions and locations, its labels' strings, then the
/// sample itself.
fn sample(w: &mut Out<'_>, e: &Entry) {
    let mut stack = [0u64; 32];
    let mut depth = 0;
    let mut push = |id: u64| {
        if depth < stack.len() {
            stack[depth] = id;
            depth += 1;
        }
    };
    if let Some(at) = e.trace.caller() {
        let mut name = Name::new();
        let _ = write!(name, "{}:{}", at.file(), at.line());
        push(w.frame(
            name.as_bytes(),
            at.file().as_bytes(),
            u64::from(at.line()),
            0,
        ));
    }
    for &ip in e.trace.frames() {
        push(w.frame(frame_name(ip).as_bytes(), b"", 0, ip as u64));
    }
    let heap = e.label.heap.unwrap_or("");
    let tag = e.label.tag.unwrap_or("");
    if !tag.is_empty() {
        let mut name = Name::new();
        let _ = write!(name, "tag {tag}");
        push(w.frame(name.as_bytes(), b"", 0, 0));
    }
    if !heap.is_empty() {
        let mut name = Name::new();
        let _ = write!(name, "heap {heap}");
        push(w.frame(name.as_bytes(), b"", 0, 0));
    }
    let mut labels = [(0u64, Label::Num(0)); 5];
    let mut n = 0;
    for (key, value) in [
        ("heap", heap),
        ("tag", tag),
        ("phase", e.phase.unwrap_or("")),
    ] {
        if !value.is_empty() {
            labels[n] = (
                w.string(key.as_bytes()),
                Label::Str(w.string(value.as_bytes())),
            );
            n += 1;
        }
    }
    labels[n] = (w.string(b"frame"), Label::Num(e.frame));
    labels[n + 1] = (w.string(b"bytes"), Label::Num(e.size as u64));
    n += 2;
    let mut s = Msg::new();
    let mut ids = Msg::new();
    for &id in &stack[..depth] {
        ids.varint(id);
    }
    s.bytes(1, ids.as_bytes());
    let mut values = Msg::new();
    values.varint(e.weight.round() as u64);
    values.varint((e.weight * e.size as f64).round() as u64);
    s.bytes(2, values.as_bytes());
    for &(key, value) in &labels[..n] {
        let mut l = Msg::new();
        l.int(1, key);
        match value {
            Label::Str(v) => l.int(2, v),
            Label::Num(v) => l.int(3, v),
        }
        s.bytes(3, l.as_bytes());
    }
    w.message(2, &s);
}

/// A label's value: a string's index or a number.
#[derive(Clone, Copy)]
enum Label {
    Str(u64),
    Num(u64),
}
