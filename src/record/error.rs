//! Typed errors for reading TFRecord files: every error names the file, the
//! byte offset (and, for a record, its index in the file) and what was
//! wrong, so a bad shard can be found and inspected.

use std::fmt;
use std::sync::Arc;

use super::compression::{Compression, Detection};
use super::inflate::{InflateCause, InflateError};

/// An error while reading records, with the file and byte offset it happened at.
///
/// `offset` is the byte offset in the *uncompressed* stream of the header of
/// the bad record for framing errors (including [`ErrorKind::Truncated`]); for
/// [`ErrorKind::Decompress`] and [`ErrorKind::Io`] it is the offset in the file
/// as stored (compressed) where the problem was detected.
#[derive(Debug)]
#[non_exhaustive]
pub struct RecordError {
    /// The file (or URL) being read, as given by the caller.
    pub path: String,
    /// Byte offset; see the type's documentation for which stream it counts.
    pub offset: u64,
    /// What was wrong.
    pub kind: ErrorKind,
    /// For a framing error: the index in the file of the bad record (how
    /// many records come before it), when the file was read from its start.
    pub index: Option<u64>,
    /// The compression the file was read with and what chose it, once known.
    pub read_as: Option<Detection>,
}

impl RecordError {
    /// An error at `offset` of `path`, with no record index or compression known.
    pub fn new(path: impl Into<String>, offset: u64, kind: ErrorKind) -> Self {
        RecordError {
            path: path.into(),
            offset,
            kind,
            index: None,
            read_as: None,
        }
    }

    /// What a wrong guess of the compression would explain, when the
    /// compression was guessed and this error is what a wrong guess causes
    /// (the file fails before its first record).
    pub fn compression_hint(&self) -> Option<String> {
        let read_as = self.read_as?;
        let early = match &self.kind {
            ErrorKind::NotTfRecord => true,
            ErrorKind::Decompress { .. } | ErrorKind::Truncated { .. } => {
                self.index.unwrap_or(0) == 0
            }
            _ => false,
        };
        if early { read_as.hint() } else { None }
    }
}

impl fmt::Display for RecordError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: ", self.path)?;
        let compressed = self
            .read_as
            .is_some_and(|d| d.compression != Compression::None);
        match &self.kind {
            ErrorKind::Decompress { .. } => write!(f, "compressed byte {}", self.offset)?,
            ErrorKind::Io { .. } => write!(f, "byte {}", self.offset)?,
            kind => {
                if let Some(index) = self.index
                    && *kind != ErrorKind::NotTfRecord
                {
                    write!(f, "record {index} at ")?;
                }
                write!(f, "byte {}", self.offset)?;
                if compressed {
                    f.write_str(" of the uncompressed stream")?;
                }
            }
        }
        write!(f, ": {}", self.kind)?;
        if let Some(hint) = self.compression_hint() {
            write!(f, " ({hint})")?;
        }
        Ok(())
    }
}

impl std::error::Error for RecordError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.kind)
    }
}

/// What was wrong with a record or a file.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The file ends inside a record. `have` and `need` count bytes of the
    /// named part only: a header needs 12, a payload its length, a footer 4.
    #[error("truncated record {part}: the file ends after {have} of its {need} bytes")]
    Truncated {
        /// The part of the record the file ends in.
        part: RecordPart,
        /// Bytes of that part present in the file.
        have: u64,
        /// Bytes that part should have.
        need: u64,
    },
    /// The masked CRC32C of the 8-byte length does not match the stored one.
    #[error("length CRC mismatch (stored {stored:#010x}, computed {computed:#010x})")]
    LengthCrc {
        /// The masked CRC stored in the file.
        stored: u32,
        /// The masked CRC of the length bytes as read.
        computed: u32,
    },
    /// The masked CRC32C of the payload does not match the stored footer.
    #[error("data CRC mismatch (stored {stored:#010x}, computed {computed:#010x})")]
    DataCrc {
        /// The masked CRC stored in the footer.
        stored: u32,
        /// The masked CRC of the payload as read.
        computed: u32,
    },
    /// The very first header is not a valid TFRecord header.
    #[error(
        "not a TFRecord file, or wrong ReadOptions::compression (the length CRC of the first record does not match)"
    )]
    NotTfRecord,
    /// A (CRC-valid) length larger than the configured maximum record size.
    #[error("record length {length} exceeds the maximum record size {max}")]
    TooLarge {
        /// The length the header claims.
        length: u64,
        /// The configured maximum ([`super::ReadOptions::max_record_size`]).
        max: u64,
    },
    /// Skip policy: a CRC-valid header whose record would run past the end
    /// of the data, with valid records after it. Not a record: the scan for
    /// the next one goes on from the byte after its start.
    #[error("record length {length} runs past the end of the data ({left} bytes left)")]
    PastEnd {
        /// The length the header claims.
        length: u64,
        /// Bytes after the header to the end of the data.
        left: u64,
    },
    /// The GZIP or ZLIB stream is corrupt or ends early; nothing after this
    /// point can be decoded.
    #[error("corrupt {compression} stream: {cause}")]
    Decompress {
        /// The compression the file was read with.
        compression: Compression,
        /// What the decoder found.
        #[source]
        cause: InflateCause,
    },
    /// Reading by index: the shard holds another record at this offset
    /// than its index says. The shard changed after it was indexed, keeping
    /// its size and modification time (the index is checked against both);
    /// `infeed index` builds the index again.
    #[error(
        "the shard changed since it was indexed: its index gives a record of {indexed} bytes here, the file one of {found}"
    )]
    IndexMismatch {
        /// The payload length the index gives.
        indexed: u64,
        /// The payload length the record's header in the file gives.
        found: u64,
    },
    /// The file was cut short while read through a memory map
    /// (`ReadOptions::mmap`): a read past its new end, turned into this
    /// error instead of a SIGBUS.
    #[error(
        "the file was cut short while it was read (mapped): it is {len} bytes now, and this record was past its end"
    )]
    CutWhileMapped {
        /// The file's length when the cut was found.
        len: u64,
    },
    /// The underlying reader failed.
    #[error("I/O error ({kind}): {source}")]
    Io {
        /// The kind of the I/O error.
        kind: std::io::ErrorKind,
        /// The error itself (shared: an [`ErrorKind`] is `Clone`).
        #[source]
        source: Arc<std::io::Error>,
    },
}

impl PartialEq for ErrorKind {
    /// Structural equality; I/O errors compare by kind and message.
    fn eq(&self, other: &Self) -> bool {
        use ErrorKind::*;
        match (self, other) {
            (
                Truncated { part, have, need },
                Truncated {
                    part: p,
                    have: h,
                    need: n,
                },
            ) => (part, have, need) == (p, h, n),
            (
                LengthCrc { stored, computed },
                LengthCrc {
                    stored: s,
                    computed: c,
                },
            )
            | (
                DataCrc { stored, computed },
                DataCrc {
                    stored: s,
                    computed: c,
                },
            ) => (stored, computed) == (s, c),
            (NotTfRecord, NotTfRecord) => true,
            (TooLarge { length, max }, TooLarge { length: l, max: m }) => (length, max) == (l, m),
            (PastEnd { length, left }, PastEnd { length: l, left: r }) => (length, left) == (l, r),
            (
                IndexMismatch { indexed, found },
                IndexMismatch {
                    indexed: i,
                    found: f,
                },
            ) => (indexed, found) == (i, f),
            (CutWhileMapped { len }, CutWhileMapped { len: l }) => len == l,
            (
                Decompress { compression, cause },
                Decompress {
                    compression: c,
                    cause: k,
                },
            ) => compression == c && cause == k,
            (Io { kind, source }, Io { kind: k, source: s }) => {
                kind == k && source.to_string() == s.to_string()
            }
            _ => false,
        }
    }
}

impl ErrorKind {
    /// Builds an [`ErrorKind::Io`] from a `std::io::Error`, keeping it.
    pub fn from_io(err: std::io::Error) -> ErrorKind {
        ErrorKind::Io {
            kind: err.kind(),
            source: Arc::new(err),
        }
    }

    /// Builds an [`ErrorKind::Decompress`] from an [`InflateError`].
    pub fn from_inflate(err: InflateError) -> ErrorKind {
        ErrorKind::Decompress {
            compression: err.compression,
            cause: err.cause,
        }
    }
}

/// The three parts of a framed record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum RecordPart {
    /// The 12 bytes `u64 length | u32 masked CRC of the length`.
    Header,
    /// The record's data.
    Payload,
    /// The 4-byte masked CRC of the data.
    Footer,
}

impl fmt::Display for RecordPart {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            RecordPart::Header => "header",
            RecordPart::Payload => "payload",
            RecordPart::Footer => "footer",
        })
    }
}

impl From<RecordError> for std::io::Error {
    fn from(err: RecordError) -> Self {
        let kind = match &err.kind {
            ErrorKind::Io { kind, .. } => *kind,
            ErrorKind::Truncated { .. } => std::io::ErrorKind::UnexpectedEof,
            _ => std::io::ErrorKind::InvalidData,
        };
        std::io::Error::new(kind, err)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_names_file_offset_and_problem() {
        let err = RecordError::new(
            "data/train-0.tfrecord",
            4096,
            ErrorKind::Truncated {
                part: RecordPart::Payload,
                have: 10,
                need: 100,
            },
        );
        assert_eq!(
            err.to_string(),
            "data/train-0.tfrecord: byte 4096: truncated record payload: the file ends after 10 of its 100 bytes"
        );
        let err = RecordError::new("x", 0, ErrorKind::NotTfRecord);
        assert!(err.to_string().contains("wrong ReadOptions::compression"));
        let err = RecordError::new(
            "x",
            16,
            ErrorKind::LengthCrc {
                stored: 0x3e04_b2ea,
                computed: 1,
            },
        );
        assert_eq!(
            err.to_string(),
            "x: byte 16: length CRC mismatch (stored 0x3e04b2ea, computed 0x00000001)"
        );
    }

    #[test]
    fn converts_to_io_error() {
        let err = RecordError::new(
            "x",
            3,
            ErrorKind::Truncated {
                part: RecordPart::Header,
                have: 3,
                need: 12,
            },
        );
        let io: std::io::Error = err.into();
        assert_eq!(io.kind(), std::io::ErrorKind::UnexpectedEof);
    }
}
