//! How the record thread groups a pipeline's records: the grouping mode
//! it follows (one logical stream's share of it with `per_stream`), and how
//! it measures records for buckets and packing.

use std::sync::Arc;

use crate::batch::{Bucketer, Overflow};
use crate::pipeline::error::PipelineError;
use crate::pipeline::ops::{Item, LengthScan};

use super::raw_batch::RawBatch;
use super::schedule::Schedule;

/// How the record thread groups records into batches: its half of the
/// pipeline's checked plan (the workers' half, how each group is laid out,
/// comes from the same check: see `batching/`).
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

/// How a record's length is measured (for bucketing and packing).
pub(crate) type MeasureFn = Arc<dyn Fn(&Item) -> Result<usize, PipelineError> + Send + Sync>;

/// Runs parsed ops on a chunk of records: for each record, `None` if it is
/// filtered out, else its length (0 when no length is needed).
pub(crate) type PrefilterFn =
    Arc<dyn Fn(&RawBatch) -> Result<Vec<Option<usize>>, PipelineError> + Send + Sync>;
