//! Conversion to TFRecord shards of `tf.train.Example`, optionally tokenized,
//! with a manifest: `infeed convert` (JSONL, CSV, Parquet and plain text,
//! `task`), and the writing half alone for rows that come from another
//! engine ([`bundle`]: the Beam transform of the Python package).
//!
//! Features: `encode` is the writing half (encoder, schema, shards, sinks,
//! commit, TFDS files; no heavy dependency); `tokenize` adds the tokenizer
//! (the `tokenizers` crate); `read` adds the JSONL, CSV and text readers
//! and [`files`] (one file, or a byte range of one, into a bundle writer);
//! `convert` adds Parquet (arrow) and the conversion task.
//!
//! Shards are written under temporary names and committed (renamed) only
//! when the whole task succeeded; then the manifest is written and shards of
//! an earlier run of the same task that this run did not write are removed.
//! So rerunning a task, finished or crashed, replaces its output exactly.

pub mod bundle;
#[cfg(feature = "read")]
mod byte_range;
mod commit;
mod encode;
mod error;
#[cfg(feature = "read")]
pub mod files;
#[cfg(feature = "read")]
mod input;
#[cfg(feature = "read")]
mod object_input;
#[cfg(feature = "cloud")]
mod object_sink;
#[cfg(feature = "read")]
mod row;
pub mod schema;
mod shard;
mod sink;
#[cfg(feature = "read")]
mod split;
#[cfg(feature = "convert")]
mod task;
mod tfds_out;
mod tokenize;

use std::path::PathBuf;
use std::sync::Arc;

pub use commit::{Committed, OutputLayout};
pub use encode::ColBuf;
pub use error::{BadKind, BadRecord, ConvertError, Location};
#[cfg(feature = "read")]
pub use input::Format;
pub use schema::{FeatureArg, Schema, SchemaColumn, Shape, ValueType};
pub use shard::{Closed, CommittedShard, Naming, ShardLimit};
pub use sink::{ShardSink, ShardWrite};
#[cfg(feature = "convert")]
pub use task::{ConvertOptions, ConvertSummary, NoProgress, Progress, ProgressSnapshot, convert};
pub use tfds_out::TfdsTarget;
pub use tokenize::{TokenMode, TokenizeOptions};

#[cfg(feature = "cloud")]
use object_sink::ObjectSink;
use sink::LocalSink;

/// The default `--shard-size`: 100 MB.
pub const DEFAULT_SHARD_BYTES: u64 = 100_000_000;
/// The default number of records read to infer a schema.
pub const DEFAULT_INFER_RECORDS: usize = 1000;
/// Records per `--group-to` block, as in the Hugging Face script (`batch_size=1000`).
pub const DEFAULT_GROUP_BLOCK: u64 = 1000;
/// How many bad records a summary lists (all are counted).
pub const MAX_BAD_LISTED: usize = 20;

/// The sink for an output given on the command line: a bucket URL
/// (gs://, s3://, az://) or a local folder.
pub fn output_sink(output: &str) -> Result<Arc<dyn ShardSink>, ConvertError> {
    #[cfg(feature = "cloud")]
    if output.contains("://") && !output.starts_with("file://") {
        let sink = ObjectSink::new(output).map_err(|e| ConvertError::output(output, e))?;
        return Ok(Arc::new(sink));
    }
    local_sink(output.strip_prefix("file://").unwrap_or(output))
}

/// Where a local output folder is: a helper for callers that take a path.
pub(crate) fn local_sink(dir: impl Into<PathBuf>) -> Result<Arc<dyn ShardSink>, ConvertError> {
    let dir = dir.into();
    let sink = LocalSink::new(&dir).map_err(|e| ConvertError::output(dir.display(), e))?;
    Ok(Arc::new(sink))
}
