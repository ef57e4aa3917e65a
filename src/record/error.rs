//! Typed errors for reading TFRecord files: every error names the file, the
//! byte offset and what was wrong, so a bad shard can be found and inspected.

use std::fmt;

use super::compression::Compression;

/// An error while reading records, with the file and byte offset it happened at.
///
/// `offset` is the byte offset in the *uncompressed* stream of the header of
/// the bad record for framing errors (including [`ErrorKind::Truncated`]); for
/// [`ErrorKind::Decompress`] and [`ErrorKind::Io`] it is the offset in the file
/// as stored (compressed) where the problem was detected.
#[derive(Debug, thiserror::Error)]
#[error("{path}: byte {offset}: {kind}")]
pub struct RecordError {
    /// The file (or URL) being read, as given by the caller.
    pub path: String,
    /// Byte offset; see the type's documentation for which stream it counts.
    pub offset: u64,
    /// What was wrong.
    pub kind: ErrorKind,
}

/// What was wrong with a record or a file.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
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
        "not a TFRecord file, or wrong --compression (the length CRC of the first record does not match)"
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
    /// The GZIP or ZLIB stream is corrupt or ends early; nothing after this
    /// point can be decoded.
    #[error("corrupt {compression} stream: {message}")]
    Decompress {
        /// The compression the file was read with.
        compression: Compression,
        /// The decoder's description of the problem.
        message: String,
    },
    /// The underlying reader failed.
    #[error("I/O error ({kind}): {message}")]
    Io {
        /// The kind of the I/O error.
        kind: std::io::ErrorKind,
        /// Its message.
        message: String,
    },
}

impl ErrorKind {
    /// Builds an [`ErrorKind::Io`] from a `std::io::Error`.
    pub fn from_io(err: &std::io::Error) -> ErrorKind {
        ErrorKind::Io {
            kind: err.kind(),
            message: err.to_string(),
        }
    }
}

/// The three parts of a framed record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
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
        let err = RecordError {
            path: "data/train-0.tfrecord".into(),
            offset: 4096,
            kind: ErrorKind::Truncated {
                part: RecordPart::Payload,
                have: 10,
                need: 100,
            },
        };
        assert_eq!(
            err.to_string(),
            "data/train-0.tfrecord: byte 4096: truncated record payload: the file ends after 10 of its 100 bytes"
        );
        let err = RecordError {
            path: "x".into(),
            offset: 0,
            kind: ErrorKind::NotTfRecord,
        };
        assert!(err.to_string().contains("wrong --compression"));
        let err = RecordError {
            path: "x".into(),
            offset: 16,
            kind: ErrorKind::LengthCrc {
                stored: 0x3e04_b2ea,
                computed: 1,
            },
        };
        assert_eq!(
            err.to_string(),
            "x: byte 16: length CRC mismatch (stored 0x3e04b2ea, computed 0x00000001)"
        );
    }

    #[test]
    fn converts_to_io_error() {
        let err = RecordError {
            path: "x".into(),
            offset: 3,
            kind: ErrorKind::Truncated {
                part: RecordPart::Header,
                have: 3,
                need: 12,
            },
        };
        let io: std::io::Error = err.into();
        assert_eq!(io.kind(), std::io::ErrorKind::UnexpectedEof);
    }
}
