//! infeed keeps XLA accelerators fed: it reads TFRecord shards, parses
//! `tf.train.Example` records by a feature spec straight into typed columns,
//! and turns them into static-shape batches for a compiled program.
//!
//! The modules, from those that use nothing of the crate to the engine that
//! uses them all:
//! - [`record`]: TFRecord framing, masked CRC32C, GZIP/ZLIB, corruption
//!   policy. Uses nothing of ours.
//! - [`spec`]: feature specs with the meaning of `tf.io.parse_example`.
//!   Uses nothing of ours.
//! - `words`: the settings given as words (`keep_start`, `int32`, `drop`),
//!   parsed once for the CLI and the Python package. Uses nothing of ours.
//! - [`example`]: `tf.train.Example` / `SequenceExample` types and the fast
//!   schema-directed batch parser. Uses `spec`.
//! - `image` (feature `images`, opt-in): PNG and JPEG features decoded,
//!   cropped and resized to static shapes on the workers. Uses `spec`.
//! - [`batch`]: static-shape batches: padding, masks, bucketing, packing,
//!   aligned pooled buffers. Uses `example` and `spec`.
//! - [`source`]: shard discovery (globs by prefix listing) and reading of
//!   local files and gs://, s3://, az:// objects with readahead and retries.
//!   Uses `record`.
//! - [`index`]: random access into TFRecord shards: an index per shard
//!   (offsets, and inflate access points for GZIP/ZLIB), records read by
//!   their index. Uses `record` and `source`.
//! - [`tfds`]: prepared TensorFlow Datasets directories (dataset_info.json,
//!   features.json, split strings) without TensorFlow. Uses `source` and
//!   `spec`.
//! - [`text`]: tokenizers (a `tokenizer.json` with feature `tokenize`, a
//!   SentencePiece `.model` with feature `sentencepiece`), read through
//!   `source`.
//! - `convert` (feature `convert`): JSONL, CSV, Parquet and text to TFRecord
//!   shards (`infeed convert`); its writing half alone with feature `encode`
//!   (plus `tokenize` for a tokenizer), for rows from another engine. Uses
//!   `record`, `example`, `source`, `index` and `tfds`.
//! - `xla` (feature `xla`): PJRT plugins, compiled StableHLO programs,
//!   zero-copy upload of batches and a device feeder for training loops.
//!   Uses `batch`.
//! - [`pipeline`]: the engine and its builder. Uses all of the above but
//!   `convert` and `xla`.
//!
//! Features: `cloud` (gs://, s3://, az://, http(s):// sources), `convert`
//! and `cli` (the `infeed` binary) are on by default; `images`,
//! `sentencepiece` and `xla` are opt-in. A training program that wants only the pipeline depends on
//! `infeed = { version = "0.1", default-features = false, features = ["cloud"] }`.

pub mod batch;
#[cfg(feature = "encode")]
pub mod convert;
pub mod example;
mod fill;
#[cfg(feature = "images")]
pub mod image;
pub mod index;
#[doc(hidden)]
pub mod kernels;
pub mod pipeline;
mod prefetch;
pub mod record;
pub mod source;
pub mod spec;
pub mod text;
pub mod tfds;
pub mod words;
#[cfg(feature = "xla")]
pub mod xla;
