//! infeed keeps XLA accelerators fed: it reads TFRecord shards, parses
//! `tf.train.Example` records by a feature spec straight into typed columns,
//! and (in later layers) turns them into static-shape batches.
//!
//! Layers, each depending only on those above it:
//! - [`record`]: TFRecord framing, masked CRC32C, GZIP/ZLIB, corruption policy.
//! - [`example`]: `tf.train.Example` / `SequenceExample` types and the fast
//!   schema-directed batch parser.
//! - [`batch`]: static-shape batches: padding, masks, bucketing, packing,
//!   aligned pooled buffers.
//! - [`spec`]: feature specs with the meaning of `tf.io.parse_example`.
//! - `image` (feature `images`, on by default): PNG and JPEG features
//!   decoded, cropped and resized to static shapes on the workers.
//! - `convert` (feature `convert`): JSONL, CSV, Parquet and text to TFRecord
//!   shards (`infeed convert`); its writing half alone with feature `encode`
//!   (plus `tokenize` for a tokenizer), for rows from another engine.
//! - [`tfds`]: prepared TensorFlow Datasets directories (dataset_info.json,
//!   features.json, split strings) without TensorFlow.
//! - [`source`]: shard discovery (globs by prefix listing) and reading of
//!   local files and gs://, s3://, az:// objects with readahead and retries.
//! - `xla` (feature `xla`): PJRT plugins, compiled StableHLO programs,
//!   zero-copy upload of batches and a device feeder for training loops.
//!
//! Features: `cloud` (gs://, s3://, az://, http(s):// sources), `convert`,
//! `images` and `cli` (the `infeed` binary) are on by default; `xla` is opt-in. A
//! training program that wants only the pipeline depends on
//! `infeed = { version = "0.1", default-features = false, features = ["cloud"] }`.

pub mod batch;
#[cfg(feature = "encode")]
pub mod convert;
pub mod example;
#[cfg(feature = "images")]
pub mod image;
#[doc(hidden)]
pub mod kernels;
pub mod pipeline;
mod prefetch;
pub mod record;
pub mod source;
pub mod spec;
pub mod tfds;
#[cfg(feature = "xla")]
pub mod xla;
