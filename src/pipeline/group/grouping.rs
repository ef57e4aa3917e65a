//! How the record thread groups a pipeline's records ([`Grouping`], the
//! one grouping type: one logical stream's share of it with `per_stream`),
//! and what it is given with it ([`RecordWork`]): how it measures records
//! for buckets and packing, and the parsed settings the fingerprint covers.
//!
//! The user's words for it are the builder's (`batching/`: [`Batching`]
//! there); the workers' side of the same check is an `Assembly` there, and
//! each batch tells its worker its [`Layout`](super::raw_batch::Layout).
//!
//! [`Batching`]: crate::pipeline::batching::Batching

use std::sync::Arc;

use crate::batch::{Bucketer, Overflow};
use crate::pipeline::error::PipelineError;
use crate::pipeline::ops::{Item, LengthScan};

use super::raw_batch::RawBatch;
use super::schedule::Schedule;

/// How the record thread groups records into batches, checked: from the
/// builder's [`Batching`](crate::pipeline::batching::Batching) and the
/// host count (the workers' side of the same check, how each group is laid
/// out, is `batching/`'s `Assembly`).
#[derive(Clone, Debug)]
pub(crate) enum Grouping {
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

impl Grouping {
    /// The grouping of one of `per_host` logical streams that share a
    /// host's batches: each takes `1/per_host` of every batch's rows.
    pub fn per_stream(&self, per_host: usize) -> Result<Grouping, PipelineError> {
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
            Grouping::Fixed {
                batch_size,
                drop_remainder,
            } => Grouping::Fixed {
                batch_size: share(*batch_size)?,
                drop_remainder: *drop_remainder,
            },
            Grouping::Bucket {
                bucketer: b,
                drop_remainder,
            } => Grouping::Bucket {
                bucketer: bucketer(b)?,
                drop_remainder: *drop_remainder,
            },
            Grouping::Scheduled {
                bucketer: b,
                schedule,
                drop_remainder,
            } => Grouping::Scheduled {
                bucketer: bucketer(b)?,
                schedule: schedule.clone(),
                drop_remainder: *drop_remainder,
            },
            // Each stream packs its own rows; the streams thread puts them
            // side by side (`threads/streams.rs`).
            Grouping::Pack {
                row_length,
                batch_size,
                overflow,
                feature,
                drop_remainder,
            } => Grouping::Pack {
                row_length: *row_length,
                batch_size: share(*batch_size)?,
                overflow: *overflow,
                feature: feature.clone(),
                drop_remainder: *drop_remainder,
            },
        })
    }
}

/// What the record thread is given besides its record ops (the workers
/// are given a [`BatchFn`](super::raw_batch::BatchFn)): the grouping, how it
/// measures records for it, and the parsed settings its fingerprint covers.
pub(crate) struct RecordWork {
    pub grouping: Grouping,
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

impl RecordWork {
    /// Batches of `batch_size` records in arrival order, nothing measured
    /// (raw batches, and the base of every other output).
    pub fn fixed(batch_size: usize, drop_remainder: bool) -> Self {
        RecordWork {
            grouping: Grouping::Fixed {
                batch_size,
                drop_remainder,
            },
            measure: None,
            scan: None,
            prefilter: None,
            length_feature: None,
            parsed_ops: String::new(),
            masks: String::new(),
        }
    }

    /// The work of one of `per_host` logical streams that share a host's
    /// batches: the same, grouping each stream's share of the rows
    /// ([`Grouping::per_stream`]).
    pub fn per_stream(&self, per_host: usize) -> Result<RecordWork, PipelineError> {
        Ok(RecordWork {
            grouping: self.grouping.per_stream(per_host)?,
            measure: self.measure.clone(),
            scan: self.scan.clone(),
            prefilter: self.prefilter.clone(),
            length_feature: self.length_feature.clone(),
            parsed_ops: self.parsed_ops.clone(),
            masks: self.masks.clone(),
        })
    }
}

/// How a record's length is measured (for bucketing and packing).
pub(crate) type MeasureFn = Arc<dyn Fn(&Item) -> Result<usize, PipelineError> + Send + Sync>;

/// Runs parsed ops on a chunk of records: for each record, `None` if it is
/// filtered out, else its length (0 when no length is needed).
pub(crate) type PrefilterFn =
    Arc<dyn Fn(&RawBatch) -> Result<Vec<Option<usize>>, PipelineError> + Send + Sync>;
