//! What the grouping hands between threads: the grouping mode the record
//! thread follows, the layout a worker gives each group, and the raw batch
//! that carries both.

use std::ops::Range;
use std::sync::Arc;

use bytes::Bytes;

use crate::batch::{Bucketer, Overflow};
use crate::pipeline::error::PipelineError;
use crate::pipeline::ops::{Item, LengthScan};

use super::schedule::Schedule;

/// How the record thread groups records into batches: its half of the
/// pipeline's checked plan (the workers' half, how each group is laid out,
/// comes from the same check: see `batch_plan.rs`).
#[derive(Clone, Debug)]
pub(crate) enum GroupMode {
    /// `batch_size` records in arrival order.
    Fixed {
        batch_size: usize,
        drop_remainder: bool,
    },
    /// By length into buckets: an empty, checked bucketer.
    Bucket {
        bucketer: Bucketer<Item>,
        drop_remainder: bool,
    },
    /// By length into buckets, the bucket of each step set by a schedule
    /// every host shares (see `schedule.rs`): the same shapes on every host.
    Scheduled {
        bucketer: Bucketer<Item>,
        /// Set when the pipeline starts, from the shared sample.
        schedule: Option<Arc<Schedule>>,
        drop_remainder: bool,
    },
    /// Packed into `batch_size` rows of `row_length` (see
    /// [`RowPlanner`](crate::batch::RowPlanner)).
    Pack {
        row_length: usize,
        batch_size: usize,
        overflow: Overflow,
        /// The packed feature named in a too-long error.
        feature: String,
        drop_remainder: bool,
    },
}

impl GroupMode {
    /// The grouping of one of `per_host` logical streams that share a
    /// host's batches: each takes `1/per_host` of every batch's rows.
    pub fn per_stream(&self, per_host: usize) -> Result<GroupMode, PipelineError> {
        if per_host == 1 {
            return Ok(self.clone());
        }
        let share = |rows: usize| {
            if rows % per_host == 0 {
                Ok(rows / per_host)
            } else {
                Err(PipelineError::Config(format!(
                    "a host running {per_host} logical streams takes the same rows from \
                     each: its batch sizes must be multiples of {per_host}, and {rows} is not"
                )))
            }
        };
        let bucketer = |b: &Bucketer<Item>| -> Result<Bucketer<Item>, PipelineError> {
            let n = b.num_buckets();
            let sizes = (0..n)
                .map(|i| share(b.batch_size(i)))
                .collect::<Result<Vec<_>, _>>()?;
            let boundaries = (0..n).filter_map(|i| b.pad_to(i)).collect();
            Ok(Bucketer::new(boundaries, sizes)?)
        };
        Ok(match self {
            GroupMode::Fixed {
                batch_size,
                drop_remainder,
            } => GroupMode::Fixed {
                batch_size: share(*batch_size)?,
                drop_remainder: *drop_remainder,
            },
            GroupMode::Bucket {
                bucketer: b,
                drop_remainder,
            } => GroupMode::Bucket {
                bucketer: bucketer(b)?,
                drop_remainder: *drop_remainder,
            },
            GroupMode::Scheduled {
                bucketer: b,
                schedule,
                drop_remainder,
            } => GroupMode::Scheduled {
                bucketer: bucketer(b)?,
                schedule: schedule.clone(),
                drop_remainder: *drop_remainder,
            },
            // First-fit placement would pack one stream's records into
            // another's rows, and the global batch would depend on the
            // host count.
            GroupMode::Pack { .. } => {
                return Err(PipelineError::Config(format!(
                    "pack cannot yet run several logical streams on one host ({per_host} \
                     here): run as many hosts as streams"
                )));
            }
        })
    }
}

/// How a pipeline groups its records, with what the record thread needs.
pub(crate) struct Grouping {
    pub mode: GroupMode,
    pub measure: Option<MeasureFn>,
    /// `measure`'s wire scan alone, for the shard readers (`None` where
    /// the grouping measures nothing, or parses to measure).
    pub scan: Option<LengthScan>,
    pub prefilter: Option<PrefilterFn>,
    /// The feature whose length buckets or packs records (for the
    /// checkpoint's fingerprint).
    pub length_feature: Option<String>,
    /// The parsed ops in builder order, `m` a map and `f` a filter (for the
    /// fingerprint).
    pub parsed_ops: String,
    /// The mask settings, empty when default (for the fingerprint: a state
    /// saved with other masks is refused).
    pub masks: String,
}

/// How the records of a raw batch are to be laid out by the worker.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Layout {
    /// One row per record.
    #[default]
    Rows,
    /// One row per record, padded to bucket `bucket`'s length.
    Bucket(usize),
    /// Packed: for each record, the part of its kept values to pack
    /// (see [`kept_span`](crate::batch::kept_span)); `rows` rows are used.
    Pack {
        parts: Vec<Range<usize>>,
        rows: usize,
    },
}

/// A batch of serialized records as the record thread cut it.
pub struct RawBatch {
    /// The records, in order.
    pub records: Vec<Bytes>,
    /// For each record: its file's path index and byte offset (for errors).
    pub(crate) provenance: Vec<(u32, u64)>,
    /// The host's files, to name them in errors.
    pub(crate) files: Arc<Vec<String>>,
    /// How the worker lays the records out (rows, a bucket, packed rows).
    pub(crate) layout: Layout,
    /// The batch's number in the whole run, counting the batches before a
    /// restore (0 for chunks that are not batches): with the row, it keys
    /// a record's random image crop, the same at any thread count.
    pub(crate) number: u64,
}

impl RawBatch {
    /// How the records are to be laid out: one row each, padded to a
    /// bucket's length, or packed.
    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// The batch's number in the whole run (0, 1, …, counting the batches
    /// delivered before a restore); 0 for a chunk that is not a batch.
    pub fn number(&self) -> u64 {
        self.number
    }

    /// File and byte offset of record `i` of the batch.
    pub fn origin(&self, i: usize) -> (&str, u64) {
        match self.provenance.get(i) {
            Some(&(file, offset)) => (
                self.files.get(file as usize).map_or("?", |s| s.as_str()),
                offset,
            ),
            None => ("?", 0),
        }
    }
}

/// Turns a raw batch into the pipeline's output; runs on the worker pool.
pub type BatchFn<T> = Arc<dyn Fn(RawBatch) -> Result<T, PipelineError> + Send + Sync>;

/// How hosts reading disjoint parts of the data come to emit the same number
/// of batches, so that an SPMD step never waits on a host that ran dry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EqualBatches {
    /// Every host stops after as many full batches as the poorest host has.
    Drop,
    /// Every host emits as many batches as the richest host (a last partial
    /// batch is kept); hosts that run out send fully masked padding batches
    /// (`real_rows == 0`).
    Pad,
}

/// How a record's length is measured (for bucketing and packing).
pub(crate) type MeasureFn = Arc<dyn Fn(&Item) -> Result<usize, PipelineError> + Send + Sync>;

/// Runs parsed ops on a chunk of records: for each record, `None` if it is
/// filtered out, else its length (0 when no length is needed).
pub(crate) type PrefilterFn =
    Arc<dyn Fn(&RawBatch) -> Result<Vec<Option<usize>>, PipelineError> + Send + Sync>;

/// A group ready for a worker, with the replay list right after it.
pub(crate) struct Emitted {
    pub items: Vec<Item>,
    pub layout: Layout,
    pub replay: Vec<(u32, u64)>,
    pub replay_skip: u64,
    /// The grouper's waiting records (`replay`) are fed back quietly on a
    /// restore, then settled (scheduled buckets: see `schedule.rs`).
    pub replay_quiet: bool,
}

impl Emitted {
    /// A group with nothing left to replay after it.
    pub fn plain(items: Vec<Item>, layout: Layout) -> Self {
        Emitted {
            items,
            layout,
            replay: Vec::new(),
            replay_skip: 0,
            replay_quiet: false,
        }
    }
}

/// A buffered record must not pin the read chunk it was sliced from (a
/// view of a mapped file pins no heap memory: kept as it is).
pub(crate) fn compact(mut item: Item) -> Item {
    if !item.mapped {
        item.data = Bytes::copy_from_slice(&item.data);
    }
    item
}
