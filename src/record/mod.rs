//! TFRecord framing: a sans-IO deframer, a reader, a writer, masked CRC32C,
//! GZIP/ZLIB, and the policy for corrupt records.
//!
//! On disk each record is
//! `u64 length (LE) | u32 masked_crc32c(length) | data | u32 masked_crc32c(data)`.
//!
//! - [`Deframer`]: push uncompressed chunks, pull records (no I/O); the
//!   reader and the pipeline's shard threads build on it.
//! - [`Inflater`]: push compressed chunks, pull decompressed `Bytes` (no I/O).
//! - [`Detection`]: which compression a file is read with, and whether that
//!   was told, certain or guessed.
//! - [`RecordReader`] (`std::io::Read`), [`RecordWriter`] (`std::io::Write`).
//!
//! Records are zero-copy `Bytes` with their offset in the uncompressed
//! stream. Both CRCs are verified by default; under [`CorruptPolicy::Skip`]
//! corrupt regions are skipped and counted in a [`SkipReport`].
//!
//! - `mapped`: local files mapped into memory, a file cut short under its
//!   map an error rather than a SIGBUS (the deframer checks its chunks).
//!
//! Files depend one way: `frame`, `crc` ← `compression` ← `inflate` ←
//! `error` ← `options` ← `mapped` ← `deframe` ← `read_core` ← `reader`
//! (which reads a `std::io::Read` into its `chunk_ring`, or takes a
//! `chunk_source`'s chunks); `writer` uses `frame` and `compression`.

pub(crate) mod chunk_ring;
pub(crate) mod chunk_source;
mod compression;
mod crc;
mod deframe;
mod error;
mod frame;
mod inflate;
pub(crate) mod mapped;
mod options;
mod ramp;
mod read_core;
mod reader;
mod writer;

pub use compression::{Compression, DETECT_LEN, DetectedBy, Detection};
pub use crc::{mask_crc, masked_crc32c, unmask_crc};
pub use deframe::{Deframer, Record};
pub use error::{ErrorKind, RecordError, RecordPart};
pub(crate) use frame::parse_header;
pub use frame::{FOOTER_LEN, HEADER_LEN, encode_footer, encode_header};
pub use inflate::{InflateCause, InflateError, Inflater};
pub use options::{
    CorruptPolicy, DEFAULT_CHUNK_SIZE, DEFAULT_MAX_RECORD_SIZE, MAX_SKIP_EVENTS, ReadOptions,
    SkipEvent, SkipReport,
};
pub(crate) use ramp::SizeRamp;
pub use reader::RecordReader;
pub use writer::RecordWriter;
