//! How the record thread groups a pipeline's records ([`Grouping`]: one
//! logical stream's share of it with `per_stream`), and what it is given
//! with it ([`RecordWork`]): how it measures records for buckets and
//! packing, and the parsed steps the fingerprint covers.
//!
//! A *grouping* decides which records make each batch; a *group* is one
//! batch's records. The names say which, and what role: the user's words
//! ([`GroupingWords`], `batching/`), checked on a host count into the
//! record thread's plan (this [`Grouping`]) and the workers' (`batching/`'s
//! `GroupAssembly`); a grouping running (a [`Grouper`](super::Grouper),
//! with its waiting records); and how one group's records lie, which each
//! group tells its worker ([`GroupLayout`](super::raw_batch::GroupLayout)).
//!
//! [`GroupingWords`]: crate::pipeline::batching::GroupingWords

use std::sync::Arc;

use crate::batch::{Bucketer, Overflow, PackRule};
use crate::pipeline::checkpoint::{Identity, StepWriter};
use crate::pipeline::error::PipelineError;
use crate::pipeline::item::{Item, LengthScan};
use crate::pipeline::parsed::Step;

use super::raw_batch::RawBatch;
use super::schedule::Schedule;

/// How the record thread groups records into batches, checked: from the
/// builder's [`GroupingWords`](crate::pipeline::batching::GroupingWords)
/// and the host count (the workers' side of the same check, how each group
/// is assembled, is `batching/`'s `GroupAssembly`).
#[derive(Clone, Debug)]
pub(crate) enum Grouping {
    /// `batch_size` records in arrival order.
    Rows {
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
        rule: PackRule,
        /// The packed feature named in a too-long error.
        feature: String,
        drop_remainder: bool,
    },
}

impl Grouping {
    /// Keeps every partly filled batch (`drop_remainder` off).
    pub fn keep_remainder(&mut self) {
        match self {
            Grouping::Rows { drop_remainder, .. }
            | Grouping::Bucket { drop_remainder, .. }
            | Grouping::Scheduled { drop_remainder, .. }
            | Grouping::Pack { drop_remainder, .. } => *drop_remainder = false,
        }
    }

    /// The grouping of one of `per_host` logical streams that share a
    /// host's batches: each takes `1/per_host` of every batch's rows.
    pub fn per_stream(&self, per_host: usize) -> Result<Grouping, PipelineError> {
        if per_host == 1 {
            return Ok(self.clone());
        }
        let share = |rows: usize| {
            if rows.is_multiple_of(per_host) {
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
            Grouping::Rows {
                batch_size,
                drop_remainder,
            } => Grouping::Rows {
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
                rule,
                feature,
                drop_remainder,
            } => Grouping::Pack {
                row_length: *row_length,
                batch_size: share(*batch_size)?,
                overflow: *overflow,
                rule: *rule,
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
    /// The steps on parsed columns, in builder order (for the
    /// fingerprint: each writes its own entry).
    pub column_steps: Vec<Step>,
    /// The mask settings, empty when default (for the fingerprint: a state
    /// saved with other masks is refused).
    pub masks: String,
}

impl RecordWork {
    /// Batches of `batch_size` records in arrival order, nothing measured
    /// (raw batches, and the base of every other output).
    pub fn fixed(batch_size: usize, drop_remainder: bool) -> Self {
        RecordWork {
            grouping: Grouping::Rows {
                batch_size,
                drop_remainder,
            },
            measure: None,
            scan: None,
            prefilter: None,
            length_feature: None,
            column_steps: Vec::new(),
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
            column_steps: self.column_steps.clone(),
            masks: self.masks.clone(),
        })
    }
}

impl RecordWork {
    /// The column steps' entries in a stream's fingerprint, in builder
    /// order (they decide which records are grouped and their lengths),
    /// then the grouping's: how records are grouped (with the bucket
    /// schedule) and the feature measured; then the masks when they are
    /// not the default (masks move no record, but a state restored under
    /// other masks would feed a step tensors it was not saved with).
    pub fn identity(&self, id: &mut Identity) {
        for step in &self.column_steps {
            step.identity(id);
        }
        let name = match &self.grouping {
            Grouping::Rows { .. } => "batch",
            Grouping::Bucket { .. } => "bucket_by_length",
            Grouping::Scheduled { .. } => "scheduled_buckets",
            Grouping::Pack { .. } => "pack",
        };
        let mut w = id.step(name);
        match &self.length_feature {
            None => w.bool(false),
            Some(f) => w.bool(true).str(f),
        };
        match &self.grouping {
            Grouping::Rows {
                batch_size,
                drop_remainder,
            } => {
                w.u64(*batch_size as u64).bool(*drop_remainder);
            }
            Grouping::Bucket {
                bucketer,
                drop_remainder,
            } => {
                write_buckets(&mut w, bucketer);
                w.bool(*drop_remainder);
            }
            Grouping::Scheduled {
                bucketer,
                schedule,
                drop_remainder,
            } => {
                write_buckets(&mut w, bucketer);
                w.bool(*drop_remainder);
                let (seed, shares, tail) =
                    schedule.as_ref().map_or((0, &[][..], None), |s| s.key());
                w.u64(seed).u64(shares.len() as u64);
                for &share in shares {
                    w.u64(share);
                }
                w.opt(tail);
            }
            Grouping::Pack {
                row_length,
                batch_size,
                overflow,
                rule,
                feature: _, // the length feature above
                drop_remainder,
            } => {
                let (strategy, cap) = rule.key();
                w.u64(*row_length as u64)
                    .u64(*batch_size as u64)
                    .u64(match overflow {
                        Overflow::Error => 0,
                        Overflow::KeepStart => 1,
                        Overflow::KeepEnd => 2,
                        Overflow::Split => 3,
                    })
                    .bool(*drop_remainder)
                    .u64(strategy)
                    .u64(cap);
            }
        }
        drop(w);
        if !self.masks.is_empty() {
            id.step("masks").str(&self.masks);
        }
    }
}

/// A bucketer's boundaries, then its batch sizes.
fn write_buckets<T>(w: &mut StepWriter<'_>, bucketer: &Bucketer<T>) {
    let n = bucketer.num_buckets();
    let boundaries: Vec<usize> = (0..n).filter_map(|b| bucketer.pad_to(b)).collect();
    let batch_sizes: Vec<usize> = (0..n).map(|b| bucketer.batch_size(b)).collect();
    w.list(&boundaries).list(&batch_sizes);
}

/// How a record's length is measured (for bucketing and packing).
pub(crate) type MeasureFn = Arc<dyn Fn(&Item) -> Result<usize, PipelineError> + Send + Sync>;

/// `item`'s length: as its shard thread measured it, else by `measure`
/// now. An unread record is measured where it is framed, so one with no
/// length has nothing here to measure.
#[inline]
pub(crate) fn length_of(measure: &MeasureFn, item: &Item) -> Result<usize, PipelineError> {
    match (item.measured(), item.unread) {
        (Some(len), _) => Ok(len),
        (None, false) => measure(item),
        (None, true) => Err(PipelineError::Config(format!(
            "the record at byte {} came unread and unmeasured (an infeed bug)",
            item.offset
        ))),
    }
}

/// Runs parsed ops on a chunk of records: for each record, `None` if it is
/// filtered out, else its length (0 when no length is needed).
pub(crate) type PrefilterFn =
    Arc<dyn Fn(&RawBatch) -> Result<Vec<Option<usize>>, PipelineError> + Send + Sync>;
