//! [`TraceReader`]: a trace in, records out, and [`TraceError`].

use std::io::{self, BufReader, Read};

use crate::format::{ALLOC, Event, FRAME, FREE, MAGIC, MAX_PHASE, PHASE, REALLOC, Record, VERSION};

/// What is wrong with a trace: every error but `BadMagic` names the byte offset where
/// the record or the value at fault starts.
///
/// ```
/// use bento_trace::{TraceError, TraceReader};
///
/// let err = TraceReader::new(&b"BENTOTRC\x01\x02"[..]).unwrap().next().unwrap().unwrap_err();
/// assert!(matches!(err, TraceError::Truncated { offset: 9 }));
/// assert_eq!(err.to_string(), "truncated trace: it ends inside the record at byte 9");
/// ```
#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    /// The input does not start with [`MAGIC`](crate::MAGIC).
    #[error("not a bento trace: the first 8 bytes are not \"BENTOTRC\"")]
    BadMagic,
    /// The trace's version is not one this build reads.
    #[error("trace version {version} is not supported (this build reads version 1)")]
    Version {
        /// The version the trace says.
        version: u64,
    },
    /// The input ends inside the record (or header) at `offset`.
    #[error("truncated trace: it ends inside the record at byte {offset}")]
    Truncated {
        /// Where the incomplete record starts.
        offset: u64,
    },
    /// A value at `offset` is not what the format allows.
    #[error("corrupt trace at byte {offset}: {what}")]
    Corrupt {
        /// Where the bad value starts.
        offset: u64,
        /// What is wrong.
        what: &'static str,
    },
    /// Reading failed.
    #[error("cannot read the trace at byte {offset}: {source}")]
    Io {
        /// Where reading stopped.
        offset: u64,
        /// The reader's error.
        source: io::Error,
    },
}

impl TraceError {
    /// The byte offset the error names, if any.
    #[must_use]
    pub fn offset(&self) -> Option<u64> {
        match *self {
            Self::BadMagic => None,
            Self::Version { .. } => Some(MAGIC.len() as u64),
            Self::Truncated { offset } | Self::Corrupt { offset, .. } | Self::Io { offset, .. } => {
                Some(offset)
            }
        }
    }
}

/// Reads a trace from `R` as a stream, one record at a time, in constant memory
/// (beyond the name of a phase). An iterator of `Result<Record, TraceError>` that ends
/// after the last record, or after the first error.
///
/// An empty input (0 bytes) reads as a trace with no records: a recorder whose process
/// ended before its buffered header reached the file (by `_exit`, say) leaves one.
/// Any other input must start with the whole header.
///
/// ```
/// use bento_trace::{Event, TraceReader, TraceWriter};
///
/// let mut w = TraceWriter::new(Vec::new()).unwrap();
/// w.frame().unwrap();
/// let bytes = w.finish().unwrap();
/// let mut r = TraceReader::new(&bytes[..]).unwrap();
/// assert_eq!(r.next_record().unwrap().unwrap().event, Event::Frame);
/// assert!(r.next_record().unwrap().is_none());
/// ```
#[derive(Debug)]
pub struct TraceReader<R: Read> {
    input: BufReader<R>,
    // Invariant: bytes consumed from the input.
    offset: u64,
    // Invariant: the sequence number the next record has when its gap is 0.
    next: u64,
    // Invariant: set when the input was empty, so that it stays a trace of no
    // records whatever the input holds later.
    empty: bool,
    /// Set after an error, so the iterator stops.
    failed: bool,
}

/// What a read of one byte found.
enum Byte {
    One(u8),
    End,
}

impl<R: Read> TraceReader<R> {
    /// Reads and checks the header; an empty input is a trace of no records.
    ///
    /// # Errors
    ///
    /// [`TraceError::BadMagic`], [`TraceError::Version`], or a truncated, corrupt or
    /// unreadable header.
    ///
    /// ```
    /// use bento_trace::{TraceError, TraceReader};
    ///
    /// assert_eq!(TraceReader::new(&b""[..]).unwrap().count(), 0);
    /// assert_eq!(TraceReader::new(&b"BENTOTRC\x01"[..]).unwrap().count(), 0);
    /// assert!(matches!(TraceReader::new(&b"BENTO"[..]), Err(TraceError::BadMagic)));
    /// ```
    pub fn new(input: R) -> Result<Self, TraceError> {
        let mut reader = Self {
            input: BufReader::new(input),
            offset: 0,
            next: 0,
            empty: false,
            failed: false,
        };
        for (i, &want) in MAGIC.iter().enumerate() {
            match reader.byte()? {
                Byte::One(b) if b == want => {}
                Byte::End if i == 0 => {
                    reader.empty = true;
                    return Ok(reader);
                }
                _ => return Err(TraceError::BadMagic),
            }
        }
        let version = reader.varint(0)?;
        if version != VERSION {
            return Err(TraceError::Version { version });
        }
        Ok(reader)
    }

    /// The next record; `None` at the end of the trace.
    ///
    /// # Errors
    ///
    /// [`TraceError`] for a truncated, corrupt or unreadable record.
    pub fn next_record(&mut self) -> Result<Option<Record>, TraceError> {
        if self.empty {
            return Ok(None);
        }
        let start = self.offset;
        let kind = match self.byte()? {
            Byte::End => return Ok(None),
            Byte::One(k) => k,
        };
        let corrupt = |what| TraceError::Corrupt {
            offset: start,
            what,
        };
        if !(ALLOC..=PHASE).contains(&kind) {
            return Err(corrupt("unknown record kind"));
        }
        let at = self.offset;
        let gap = self.varint(start)?;
        let seq = self
            .next
            .checked_add(gap)
            .filter(|s| *s != u64::MAX)
            .ok_or(TraceError::Corrupt {
                offset: at,
                what: "the sequence number overflows",
            })?;
        let event = match kind {
            ALLOC => {
                let id = self.varint(start)?;
                let size = self.varint(start)?;
                let at = self.offset;
                let shift = self.required(start)?;
                if shift > 63 {
                    return Err(TraceError::Corrupt {
                        offset: at,
                        what: "an alignment above 2^63",
                    });
                }
                let at = self.offset;
                let tag = u32::try_from(self.varint(start)?).map_err(|_| TraceError::Corrupt {
                    offset: at,
                    what: "a tag above u32::MAX",
                })?;
                Event::Alloc {
                    id,
                    size,
                    align: 1 << shift,
                    tag,
                }
            }
            FREE => Event::Free {
                id: self.varint(start)?,
            },
            REALLOC => Event::Realloc {
                id: self.varint(start)?,
                new_size: self.varint(start)?,
            },
            FRAME => Event::Frame,
            _ => {
                let at = self.offset;
                let len = self.varint(start)?;
                if len > MAX_PHASE as u64 {
                    return Err(TraceError::Corrupt {
                        offset: at,
                        what: "a phase name over 4096 bytes",
                    });
                }
                let at = self.offset;
                let mut name = vec![0; len as usize];
                for slot in &mut name {
                    *slot = self.required(start)?;
                }
                Event::Phase(String::from_utf8(name).map_err(|_| TraceError::Corrupt {
                    offset: at,
                    what: "a phase name that is not UTF-8",
                })?)
            }
        };
        self.next = seq + 1;
        Ok(Some(Record { seq, event }))
    }

    /// One byte, or the end of the input.
    fn byte(&mut self) -> Result<Byte, TraceError> {
        let mut b = [0];
        loop {
            match self.input.read(&mut b) {
                Ok(0) => return Ok(Byte::End),
                Ok(_) => {
                    self.offset += 1;
                    return Ok(Byte::One(b[0]));
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(source) => {
                    return Err(TraceError::Io {
                        offset: self.offset,
                        source,
                    });
                }
            }
        }
    }

    /// One byte of the record that starts at `start`: its end is a truncation.
    fn required(&mut self, start: u64) -> Result<u8, TraceError> {
        match self.byte()? {
            Byte::One(b) => Ok(b),
            Byte::End => Err(TraceError::Truncated { offset: start }),
        }
    }

    /// A varint of the record that starts at `start`.
    fn varint(&mut self, start: u64) -> Result<u64, TraceError> {
        let at = self.offset;
        let mut value = 0u64;
        for i in 0..10 {
            let b = self.required(start)?;
            let bits = u64::from(b & 0x7F);
            if i == 9 && b > 1 {
                return Err(TraceError::Corrupt {
                    offset: at,
                    what: "a varint above u64::MAX",
                });
            }
            value |= bits << (7 * i);
            if b & 0x80 == 0 {
                return Ok(value);
            }
        }
        unreachable!("the tenth byte either ends the varint or is rejected")
    }
}

impl<R: Read> Iterator for TraceReader<R> {
    type Item = Result<Record, TraceError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed {
            return None;
        }
        let result = self.next_record().transpose();
        if matches!(result, Some(Err(_))) {
            self.failed = true;
        }
        result
    }
}
