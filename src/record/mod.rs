//! TFRecord framing: a sans-IO deframer, sync and async readers, writers,
//! masked CRC32C, GZIP/ZLIB, and the policy for corrupt records.
//!
//! On disk each record is
//! `u64 length (LE) | u32 masked_crc32c(length) | data | u32 masked_crc32c(data)`.
//!
//! - [`Deframer`]: push uncompressed chunks, pull records (no I/O); the
//!   readers and the pipeline's worker pool build on it.
//! - [`Inflater`]: push compressed chunks, pull decompressed `Bytes` (no I/O).
//! - [`RecordReader`] (`std::io::Read`), [`RecordStream`] (a stream of
//!   `Bytes`, or a tokio `AsyncRead` through [`stream_async_read`]).
//! - [`RecordWriter`], [`AsyncRecordWriter`].
//!
//! Records are zero-copy `Bytes` with their offset in the uncompressed
//! stream. Both CRCs are verified by default; under [`CorruptPolicy::Skip`]
//! corrupt regions are skipped and counted in a [`SkipReport`].

mod chunk_ring;
mod compression;
mod crc;
mod deframe;
mod error;
mod options;
mod read_core;
mod reader;
mod stream;
mod writer;

pub use compression::{Compression, InflateError, Inflater};
pub use crc::{mask_crc, masked_crc32c, unmask_crc};
pub use deframe::{Deframer, FOOTER_LEN, HEADER_LEN, Record};
pub use error::{ErrorKind, RecordError, RecordPart};
pub use options::{
    CorruptPolicy, DEFAULT_CHUNK_SIZE, DEFAULT_MAX_RECORD_SIZE, MAX_SKIP_EVENTS, ReadOptions,
    SkipEvent, SkipReport,
};
pub use reader::RecordReader;
pub use stream::{RecordStream, async_read_chunks, stream_async_read};
pub use writer::{AsyncRecordWriter, RecordWriter, encode_footer, encode_header};
