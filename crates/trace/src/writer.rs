//! [`TraceWriter`]: events in, a trace out.

use std::io::{self, Write};

use crate::format::{
    ALLOC, Event, FRAME, FREE, MAGIC, MAX_PHASE, PHASE, REALLOC, VERSION, put_varint,
};

/// Writes a trace to `W` as a stream: each record is encoded into a small buffer and
/// written whole; nothing is kept. Sequence numbers count from 0, one a record, unless
/// [`record`](Self::record) gives them.
///
/// ```
/// use bento_trace::{TraceReader, TraceWriter};
///
/// let mut w = TraceWriter::new(Vec::new()).unwrap();
/// assert_eq!(w.alloc(1, 64, 8, 0).unwrap(), 0);
/// assert_eq!(w.free(1).unwrap(), 1);
/// let bytes = w.finish().unwrap();
/// assert_eq!(TraceReader::new(&bytes[..]).unwrap().count(), 2);
/// ```
#[derive(Debug)]
pub struct TraceWriter<W: Write> {
    out: W,
    // Invariant: the next sequence number `alloc`, `free`, ... use: one past the last
    // record's.
    next: u64,
    buf: Vec<u8>,
}

impl<W: Write> TraceWriter<W> {
    /// A trace on `out`: writes the header.
    ///
    /// # Errors
    ///
    /// The error of `out`.
    pub fn new(mut out: W) -> io::Result<Self> {
        let mut header = MAGIC.to_vec();
        put_varint(&mut header, VERSION);
        out.write_all(&header)?;
        Ok(Self {
            out,
            next: 0,
            buf: Vec::with_capacity(32),
        })
    }

    /// Records an allocation; returns its sequence number.
    ///
    /// # Errors
    ///
    /// The error of the output; `InvalidInput` when `align` is not a power of two.
    pub fn alloc(&mut self, id: u64, size: u64, align: u64, tag: u32) -> io::Result<u64> {
        self.push(&Event::Alloc {
            id,
            size,
            align,
            tag,
        })
    }

    /// Records a free; returns its sequence number.
    ///
    /// # Errors
    ///
    /// The error of the output.
    pub fn free(&mut self, id: u64) -> io::Result<u64> {
        self.push(&Event::Free { id })
    }

    /// Records a resize; returns its sequence number.
    ///
    /// # Errors
    ///
    /// The error of the output.
    pub fn realloc(&mut self, id: u64, new_size: u64) -> io::Result<u64> {
        self.push(&Event::Realloc { id, new_size })
    }

    /// Records the end of a frame; returns its sequence number.
    ///
    /// # Errors
    ///
    /// The error of the output.
    pub fn frame(&mut self) -> io::Result<u64> {
        self.push(&Event::Frame)
    }

    /// Records the start of a phase; returns its sequence number.
    ///
    /// # Errors
    ///
    /// The error of the output; `InvalidInput` when `name` is over [`MAX_PHASE`]
    /// bytes.
    pub fn phase(&mut self, name: &str) -> io::Result<u64> {
        self.push(&Event::Phase(name.to_owned()))
    }

    /// Records `event` with the next sequence number (for `TraceSink`).
    #[cfg(feature = "heap")]
    pub(crate) fn push_event(&mut self, event: &Event) -> io::Result<u64> {
        self.push(event)
    }

    /// Records `event` with the next sequence number.
    fn push(&mut self, event: &Event) -> io::Result<u64> {
        let seq = self.next;
        self.record(seq, event)?;
        Ok(seq)
    }

    /// Records `event` with sequence number `seq` (at least the next one: gaps are
    /// allowed, as when several recorders' events are merged).
    ///
    /// # Errors
    ///
    /// The error of the output; `InvalidInput` for a `seq` below the next one, an
    /// alignment that is not a power of two, or a phase name over [`MAX_PHASE`] bytes.
    /// Nothing is written then.
    pub fn record(&mut self, seq: u64, event: &Event) -> io::Result<()> {
        let invalid = |what: &str| io::Error::new(io::ErrorKind::InvalidInput, what.to_owned());
        let gap = seq
            .checked_sub(self.next)
            .filter(|_| seq != u64::MAX)
            .ok_or_else(|| invalid("sequence numbers must increase, below u64::MAX"))?;
        let buf = &mut self.buf;
        buf.clear();
        match event {
            Event::Alloc {
                id,
                size,
                align,
                tag,
            } => {
                if !align.is_power_of_two() {
                    return Err(invalid("an alignment must be a power of two"));
                }
                buf.push(ALLOC);
                put_varint(buf, gap);
                put_varint(buf, *id);
                put_varint(buf, *size);
                buf.push(align.trailing_zeros() as u8);
                put_varint(buf, u64::from(*tag));
            }
            Event::Free { id } => {
                buf.push(FREE);
                put_varint(buf, gap);
                put_varint(buf, *id);
            }
            Event::Realloc { id, new_size } => {
                buf.push(REALLOC);
                put_varint(buf, gap);
                put_varint(buf, *id);
                put_varint(buf, *new_size);
            }
            Event::Frame => {
                buf.push(FRAME);
                put_varint(buf, gap);
            }
            Event::Phase(name) => {
                if name.len() > MAX_PHASE {
                    return Err(invalid("a phase name is at most 4096 bytes"));
                }
                buf.push(PHASE);
                put_varint(buf, gap);
                put_varint(buf, name.len() as u64);
                buf.extend_from_slice(name.as_bytes());
            }
        }
        self.out.write_all(&self.buf)?;
        self.next = seq + 1;
        Ok(())
    }

    /// Flushes and returns the output.
    ///
    /// # Errors
    ///
    /// The error of the flush.
    pub fn finish(mut self) -> io::Result<W> {
        self.out.flush()?;
        Ok(self.out)
    }
}
