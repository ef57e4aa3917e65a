//! What the record thread hands the workers: a raw batch of serialized
//! records, with the layout a worker gives it, and the function a worker
//! turns it into the pipeline's output with.

use std::ops::Range;
use std::sync::Arc;

use bytes::Bytes;

use crate::pipeline::error::PipelineError;
use crate::pipeline::item::Item;

/// How the records of a raw batch are to be laid out by the worker.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum GroupLayout {
    /// One row per record.
    #[default]
    Rows,
    /// One row per record: as many rows as bucket `rows`'s batches have,
    /// padded to bucket `length`'s length. The two are the same bucket
    /// except at the end of a scheduled stream's input, where its waiting
    /// records may all be longer than its step's bucket
    /// (`group/scheduled.rs`).
    Bucket { rows: usize, length: usize },
    /// Packed rows.
    Pack(Packed),
}

impl GroupLayout {
    /// Bucket `b`'s rows, padded to its length.
    pub fn bucket(b: usize) -> GroupLayout {
        GroupLayout::Bucket { rows: b, length: b }
    }
}

/// How a packed group's records lie in its rows.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Packed {
    /// For each record, the part of its kept values to pack (see
    /// [`kept_span`](crate::batch::kept_span)).
    pub parts: Vec<Range<usize>>,
    /// Rows up to the last that holds values.
    pub rows: usize,
    /// The rows of one logical stream's group (its packer's batch size).
    pub stream_rows: usize,
    /// With several logical streams on a host, where each stream after the
    /// first begins: (its first record, its first row). Each stream's
    /// records are packed apart, into rows of its own
    /// (`threads/streams.rs`).
    pub fences: Vec<(usize, usize)>,
}

/// A batch of serialized records as the record thread cut it.
pub struct RawBatch {
    /// The records, in order, each with its file and offset (for errors)
    /// and whether it is still to read: the record thread moves its items
    /// in whole, so a batch costs it nothing per record. An unread record
    /// is a view whose length only is known; the worker reads and checks
    /// it before the batch is made (`read/in_workers.rs`).
    pub(crate) items: Vec<Item>,
    /// The host's files, to name them in errors.
    pub(crate) files: Arc<Vec<String>>,
    /// How the worker lays the records out (rows, a bucket, packed rows).
    pub(crate) layout: GroupLayout,
    /// The batch's number in the whole run, counting the batches before a
    /// restore (0 for chunks that are not batches): with the row, it keys
    /// a record's random image crop, the same at any thread count.
    pub(crate) number: u64,
    /// The records whose first piece is in this batch: all but one a
    /// packed record cut over from the batch before (for the record
    /// account, `accounting.rs`).
    pub(crate) starts: usize,
}

impl RawBatch {
    /// A chunk of `items` that is not a batch (number 0, no records
    /// counted as placed): what a prefilter or a sample parses.
    pub(crate) fn chunk(items: Vec<Item>, files: Arc<Vec<String>>) -> Self {
        RawBatch {
            items,
            files,
            layout: GroupLayout::Rows,
            number: 0,
            starts: 0,
        }
    }

    /// How many records the batch holds.
    pub fn len(&self) -> usize {
        self.items.len()
    }

    /// Whether the batch holds no record.
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// The serialized records, in order.
    pub fn records(&self) -> impl ExactSizeIterator<Item = &Bytes> {
        self.items.iter().map(|item| &item.data)
    }

    /// The serialized records, in order, taken out of the batch.
    pub fn into_records(self) -> Vec<Bytes> {
        self.items.into_iter().map(|item| item.data).collect()
    }

    /// How the records are to be laid out: one row each, padded to a
    /// bucket's length, or packed.
    pub fn layout(&self) -> &GroupLayout {
        &self.layout
    }

    /// The batch's number in the whole run (0, 1, …, counting the batches
    /// delivered before a restore); 0 for a chunk that is not a batch.
    pub fn number(&self) -> u64 {
        self.number
    }

    /// File and byte offset of record `i` of the batch.
    pub fn origin(&self, i: usize) -> (&str, u64) {
        match self.items.get(i) {
            Some(item) => (file_name(&self.files, item.file), item.offset),
            None => ("?", 0),
        }
    }

    /// Each record's file (its index in the host's list) and byte offset.
    pub(crate) fn provenance(&self) -> Vec<(u32, u64)> {
        self.items.iter().map(|i| (i.file, i.offset)).collect()
    }
}

/// The path of file `file` of the host's `files` (as a raw batch's
/// provenance numbers them), `?` for a number it has not.
pub(crate) fn file_name(files: &[String], file: u32) -> &str {
    files.get(file as usize).map_or("?", String::as_str)
}

/// Turns a raw batch into the pipeline's output; runs on the worker pool.
pub type BatchFn<T> = Arc<dyn Fn(RawBatch) -> Result<T, PipelineError> + Send + Sync>;
