//! Everything the user said about the record-level pipeline, as the builder
//! collected it: read by the plan that starts the threads and by the
//! counting that `equal_batches` does first.

use super::group::plan::EqualBatches;
use std::sync::Arc;

use super::ops::{RecordFilter, RecordMap, RecordRange};
use crate::record::ReadOptions;
use crate::source::SourceOptions;
use crate::tfds::TfdsDataset;

/// The record-level settings.
#[derive(Clone)]
pub(crate) struct RecordSettings {
    pub source: String,
    pub files: Vec<String>,
    /// Per file, the records to read (a TFDS split slice); empty: every
    /// file whole.
    pub ranges: Vec<Option<RecordRange>>,
    /// Per file, its records (after its range) when known without reading
    /// (a TFDS dataset_info.json): `equal_batches` then counts nothing.
    pub record_counts: Option<Vec<u64>>,
    /// The TFDS dataset the files come from (its features give the spec).
    pub tfds: Option<Arc<TfdsDataset>>,
    pub host: Option<(u64, u64)>,
    /// The job's logical streams, when set (`streams(n)`).
    pub streams: Option<u64>,
    pub seed: u64,
    pub shuffle_files: bool,
    pub cycle_length: usize,
    pub block_length: usize,
    pub skip: u64,
    pub take: Option<u64>,
    pub filter: Option<RecordFilter>,
    pub map: Option<RecordMap>,
    pub shuffle_buffer: usize,
    pub repeat: Option<Option<u64>>,
    pub repeat_before_shuffle: bool,
    pub read: ReadOptions,
    /// How shards are listed and fetched (retries, timeouts, range size).
    pub source_options: SourceOptions,
    pub workers: usize,
    pub prefetch: usize,
    pub unordered: bool,
    pub equal_batches: Option<EqualBatches>,
    pub resume: Option<Vec<u8>>,
}
