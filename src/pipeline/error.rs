//! What a pipeline can fail with.

use crate::record::RecordError;

/// A pipeline error, naming the file and byte offset where data is at fault.
#[derive(Debug, thiserror::Error)]
pub enum PipelineError {
    /// Reading, decompressing or framing a shard failed.
    #[error(transparent)]
    Record(#[from] RecordError),
    /// A record does not match the feature spec.
    #[error("{path}: record at byte {offset}: {error}")]
    Parse {
        path: String,
        offset: u64,
        error: crate::example::ParseError,
    },
    /// Listing or reaching the shards failed (bad URL, empty glob,
    /// unreachable bucket).
    #[error(transparent)]
    Source(#[from] crate::source::SourceError),
    /// The pattern matched no file, or the file list is empty.
    #[error("no input files match {0:?}")]
    NoFiles(String),
    /// An input file could not be listed or opened.
    #[error("{path}: {message}")]
    Open { path: String, message: String },
    /// A whole epoch produced no record, so `repeat` would never end.
    #[error("epoch {epoch} produced no records (empty files, or everything filtered out)")]
    EmptyEpoch { epoch: u64 },
    /// A record's values do not fit the batch plan (too long under the
    /// error truncation policy, an int32 overflow, a wrong byte count).
    #[error("{path}: record at byte {offset}: {error}")]
    Batch {
        path: String,
        offset: u64,
        error: crate::batch::BatchError,
    },
    /// A record's length could not be read for bucketing or packing.
    #[error("{path}: record at byte {offset}: length of feature {feature:?}: {error}")]
    Length {
        path: String,
        offset: u64,
        feature: String,
        error: crate::example::LengthError,
    },
    /// A `map_batch` function failed, or changed the number of records.
    #[error("{path}: batch starting with the record at byte {offset}: map_batch: {message}")]
    Map {
        path: String,
        offset: u64,
        message: String,
    },
    /// Bucket boundaries or batch sizes are unusable.
    #[error("invalid buckets: {0}")]
    Bucket(#[from] crate::batch::BucketError),
    /// The batch plan cannot give static shapes.
    #[error("invalid batch plan: {0}")]
    Plan(#[from] crate::batch::PlanError),
    /// The pipeline was described inconsistently.
    #[error("invalid pipeline: {0}")]
    Config(String),
    /// A checkpoint could not be restored.
    #[error("cannot restore the pipeline state: {0}")]
    BadState(String),
    /// A worker thread died (a panic in a user's map or filter).
    #[error("a pipeline worker thread died: {0}")]
    Worker(String),
}
