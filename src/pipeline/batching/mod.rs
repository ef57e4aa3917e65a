//! The parsed half of a pipeline: its settings checked into a batch plan
//! (shapes, rows, length buckets or packed rows), the grouping the record
//! thread follows, and the job each worker runs on a group (parse, map,
//! pad, assemble).
//!
//! Here the settings and their checks; `measure.rs` how the record thread
//! measures (or prefilters) records for the grouping, `work.rs` the
//! workers' job, `parsers.rs` the pool of parsers the workers reuse,
//! `errors.rs` errors placed at the record they name.

mod errors;
mod measure;
mod parsers;
mod work;

use std::sync::Arc;

use crate::batch::MAX_SHAPES;
use crate::batch::{
    Assembler, BatchPlan, BatchShape, Bucketer, LengthPolicy, MaskType, Overflow, PackPlan,
    PackRule, PlanError, TensorType,
};
use crate::pipeline::error::PipelineError;
use crate::pipeline::group::grouping::{Grouping, RecordWork};
use crate::pipeline::images;
use crate::pipeline::item::Item;
use crate::pipeline::limits;
use crate::pipeline::parsed::{self, Stage, Step};
use crate::pipeline::stats::StageStats;
use crate::spec::{FeatureKind, FeatureSpec, SequenceKind, SequenceSpec, WireKind};
use measure::scan_fn;

/// How the user asked parsed records to make batches (`batch`,
/// `bucket_by_length`, `pack`), as the builder collected it; checked, on a
/// given host count, into the record thread's [`Grouping`] and the workers'
/// [`GroupAssembly`].
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum GroupingWords {
    /// `batch` records per batch.
    Rows,
    /// By the length of `feature` into buckets.
    Bucket {
        feature: String,
        boundaries: Vec<usize>,
        batch_sizes: Vec<usize>,
    },
    /// Packed into rows of `row_length`.
    Pack {
        row_length: usize,
        overflow: Overflow,
        rule: PackRule,
    },
}

/// What the user said about parsing and batching, as the builder
/// collected it.
#[derive(Clone)]
pub(crate) struct ParsedSettings {
    /// The features of an Example, or the context of a SequenceExample.
    pub spec: FeatureSpec,
    /// With `SequenceExample` records: the whole spec (context and feature
    /// lists); the lists are padded along time like var-len features.
    pub sequence: Option<SequenceSpec>,
    pub batch_size: Option<usize>,
    pub drop_remainder: bool,
    pub length: Option<LengthPolicy>,
    /// The mask of every padded feature (`None`: the default).
    pub masks: Option<MaskType>,
    /// Per feature, over `masks`.
    pub mask_of: Vec<(String, MaskType)>,
    pub cast: Option<TensorType>,
    pub decode: Vec<(String, Vec<usize>)>,
    pub batching: GroupingWords,
    /// The steps on parsed batches, in builder order (`parsed.rs`): on the
    /// columns (map_batch, filter_rows, tokenize), then, after assembly, on
    /// the batch (normalize, inputs_targets). The spec's own step (its
    /// images decoded) joins them when the workers start
    /// ([`worker_steps`](Self::worker_steps)).
    pub steps: Vec<Step>,
}

/// The batching a pipeline runs with on a host count (see
/// [`ParsedSettings::decide`]).
struct Decided {
    batching: GroupingWords,
    /// Buckets in the order of the shared schedule, not as they fill.
    scheduled: bool,
    /// The features whose longest length buckets a record.
    features: Vec<String>,
}

/// How a worker assembles each group into a batch, checked: the workers'
/// side of the check whose record-thread side is the [`Grouping`] (see
/// [`ParsedSettings::record_work`]).
enum GroupAssembly {
    Rows(Assembler),
    Bucket {
        assembler: Assembler,
        /// Per bucket: rows, and the length to pad to (`None`: the bound).
        buckets: Vec<(usize, Option<usize>)>,
        shapes: Vec<BatchShape>,
        /// The record thread's bucketer, checked with the rest.
        bucketer: Bucketer<Item>,
    },
    Pack {
        plan: PackPlan,
        shapes: Vec<BatchShape>,
    },
}

impl ParsedSettings {
    /// Checks that the largest batch of `shapes` fits the machine's memory.
    fn check_bytes(shapes: &[BatchShape]) -> Result<(), PipelineError> {
        let bytes = |shape: &BatchShape| -> u64 {
            shape
                .tensors
                .iter()
                .map(|t| {
                    t.shape
                        .iter()
                        .fold(t.dtype.size() as u64, |n, &d| n.saturating_mul(d as u64))
                })
                .fold(0u64, u64::saturating_add)
        };
        if let Some(largest) = shapes.iter().max_by_key(|s| bytes(s)) {
            limits::batch_fits(bytes(largest), &largest.to_string())?;
        }
        Ok(())
    }

    fn has_filter(&self) -> bool {
        self.steps.iter().any(|s| s.filter().is_some())
    }

    fn has_map(&self) -> bool {
        self.steps.iter().any(|s| s.maps())
    }

    /// Adds a step on parsed batches, in place of an earlier one of its
    /// slot.
    pub(crate) fn push(&mut self, step: Step) {
        if let Some(slot) = step.slot() {
            self.steps.retain(|s| s.slot().as_ref() != Some(&slot));
        }
        self.steps.push(step);
    }

    /// The steps of `stage`, in builder order.
    pub(crate) fn steps_of(&self, stage: Stage) -> Vec<Step> {
        parsed::of_stage(&self.steps, stage)
    }

    /// The features as the parsed ops leave them, what batches are made
    /// of: the parse spec with each tokenized feature a variable-length
    /// int32 one.
    pub(crate) fn batch_spec(&self) -> Result<FeatureSpec, PipelineError> {
        self.steps
            .iter()
            .try_fold(self.spec.clone(), |spec, step| step.out_spec(spec))
    }

    fn assembler(&self, batch_size: usize) -> Result<Assembler, PipelineError> {
        let spec = self.batch_spec()?;
        let mut plan = match &self.sequence {
            Some(seq) => {
                BatchPlan::for_sequence(&seq.clone().with_context(spec.clone()), batch_size)
            }
            None => BatchPlan::new(&spec, batch_size),
        };
        let has_lists = self
            .sequence
            .as_ref()
            .is_some_and(|s| !s.sequence().is_empty());
        let has_var_len = has_lists || spec.features().iter().any(|f| f.fixed_count().is_none());
        if let (Some(length), true) = (&self.length, has_var_len) {
            let length = match self.masks {
                Some(m) => length.clone().mask(m),
                None => length.clone(),
            };
            plan = plan.pad_all(length);
        }
        for (feature, mask) in &self.mask_of {
            plan = plan.mask(feature, *mask);
        }
        if let Some(dtype) = self.cast {
            plan = plan.cast_ints(dtype);
        }
        for (feature, shape) in &self.decode {
            plan = plan.decode_raw(feature, shape);
        }
        Ok(plan.build()?)
    }

    /// The variable-length feature `name`, checked for bucketing.
    fn var_len_feature(&self, name: &str) -> Result<WireKind, PipelineError> {
        let list = self
            .sequence
            .as_ref()
            .and_then(|s| s.sequence().iter().find(|l| l.name == name));
        if let Some(list) = list {
            // A feature list's length is its number of steps.
            return match list.kind {
                SequenceKind::FixedLen { .. } => Ok(list.dtype.wire_kind()),
                SequenceKind::VarLen => Err(PlanError::RaggedSteps {
                    feature: name.to_owned(),
                }
                .into()),
            };
        }
        let spec = self.batch_spec()?;
        let def = spec.get(name).ok_or_else(|| PlanError::UnknownFeature {
            feature: name.to_owned(),
        })?;
        if let FeatureKind::FixedLen { .. } = def.kind {
            return Err(PlanError::NotVarLen {
                feature: name.to_owned(),
            }
            .into());
        }
        Ok(def.dtype.wire_kind())
    }

    /// The grouping the pipeline runs with on `hosts` hosts: as the user
    /// said, except that on several hosts a length-dependent shape is
    /// scheduled (see `group/schedule.rs`): `pad_to_multiple_of` becomes
    /// one bucket per multiple up to `max_length`, measured on every padded
    /// feature. Also gives the features whose length groups records.
    fn decide(&self, hosts: u64) -> Result<Decided, PipelineError> {
        let scheduled = hosts > 1;
        let batching = self.batching.clone();
        let GroupingWords::Rows = batching else {
            let features = match &batching {
                GroupingWords::Bucket { feature, .. } => vec![feature.clone()],
                _ => Vec::new(),
            };
            let scheduled = scheduled && matches!(batching, GroupingWords::Bucket { .. });
            return Ok(Decided {
                batching,
                scheduled,
                features,
            });
        };
        let padded: Vec<String> = self
            .batch_spec()?
            .features()
            .iter()
            .filter(|f| f.fixed_count().is_none())
            .map(|f| f.name.clone())
            .collect();
        let has_lists = self
            .sequence
            .as_ref()
            .is_some_and(|s| !s.sequence().is_empty());
        let policy = self.length.clone().unwrap_or_default();
        if !scheduled || (padded.is_empty() && !has_lists) || policy.fixed.is_some() {
            return Ok(Decided {
                batching,
                scheduled: false,
                features: Vec::new(),
            });
        }
        if has_lists {
            return Err(PipelineError::Config(
                "on several hosts, SequenceExample batches padded to their longest record \
                 would differ in shape between hosts: use fixed_length, or bucket_by_length \
                 on a feature list"
                    .into(),
            ));
        }
        let Some(bound) = policy.bound() else {
            return Err(PipelineError::Config(format!(
                "on several hosts every host must use the same shapes, so padded lengths \
                 need a bound: set max_length (or fixed_length) for {}",
                padded.join(", ")
            )));
        };
        // Counted before they are listed: a typo'd bound lists billions.
        let count = policy.length_count().unwrap_or(0);
        if count > MAX_SHAPES {
            return Err(PlanError::TooManyShapes { count }.into());
        }
        let multiple = policy.multiple.max(1);
        let boundaries: Vec<usize> = (1..)
            .map(|k| k * multiple)
            .take_while(|&b| b < bound)
            .collect();
        let batch_size = self.batch_size.unwrap_or(1);
        Ok(Decided {
            batching: GroupingWords::Bucket {
                feature: padded[0].clone(),
                batch_sizes: vec![batch_size; boundaries.len() + 1],
                boundaries,
            },
            scheduled: true,
            features: padded,
        })
    }

    /// The steps the workers run: the builder's, then the spec's own (its
    /// images decoded, seeded by the run's `seed`; `skips`: where, under
    /// the skip policy, the records they leave out are counted). A build
    /// that cannot run one refuses here.
    fn worker_steps(
        &self,
        seed: u64,
        skips: Option<Arc<StageStats>>,
    ) -> Result<Vec<Step>, PipelineError> {
        let mut steps = self.steps.clone();
        steps.extend(images::step(&self.spec, seed, skips)?);
        Ok(steps)
    }

    fn assembly(&self, hosts: u64) -> Result<GroupAssembly, PipelineError> {
        let decided = self.decide(hosts)?;
        if let Some(seq) = &self.sequence {
            if let Some(name) = seq
                .required()
                .iter()
                .find(|n| !seq.sequence().iter().any(|l| &l.name == *n))
            {
                return Err(PlanError::UnknownFeature {
                    feature: name.clone(),
                }
                .into());
            }
            if let GroupingWords::Pack { .. } = self.batching {
                return Err(PipelineError::Config(
                    "pack is not supported for SequenceExample records (parse_sequence): \
                     use batch or bucket_by_length"
                        .into(),
                ));
            }
        }
        match &decided.batching {
            GroupingWords::Rows => Ok(GroupAssembly::Rows(
                self.assembler(self.batch_size.unwrap_or(1))?,
            )),
            GroupingWords::Bucket {
                feature,
                boundaries,
                batch_sizes,
            } => {
                let converted = matches!(self.batching, GroupingWords::Rows);
                if self.batch_size.is_some() && !converted {
                    return Err(PipelineError::Config(
                        "bucket_by_length sets a batch size per bucket: leave out batch() \
                         (drop_remainder() says what to do with partial buckets)"
                            .into(),
                    ));
                }
                for feature in decided.features.iter().chain([feature]) {
                    self.var_len_feature(feature)?;
                }
                // Validated once: the record thread groups with this bucketer.
                let bucketer: Bucketer<Item> =
                    Bucketer::new(boundaries.clone(), batch_sizes.clone())?;
                let policy = self.length.clone().unwrap_or_default();
                if policy.fixed.is_some() {
                    return Err(PipelineError::Config(
                        "bucket_by_length pads each bucket to its boundary: it cannot be \
                         combined with fixed_length"
                            .into(),
                    ));
                }
                let largest = batch_sizes.iter().copied().max().unwrap_or(1);
                let assembler = self.assembler(largest)?;
                let bound = policy.bound().ok_or_else(|| PlanError::Unbounded {
                    feature: feature.clone(),
                })?;
                let multiple = policy.multiple.max(1);
                let mut buckets = Vec::with_capacity(bucketer.num_buckets());
                for bucket in 0..bucketer.num_buckets() {
                    let pad = match bucketer.pad_to(bucket) {
                        Some(b) if b > bound => {
                            return Err(PlanError::BoundaryAboveBound {
                                feature: feature.clone(),
                                boundary: b,
                                bound,
                            }
                            .into());
                        }
                        Some(b) => Some(b.div_ceil(multiple).saturating_mul(multiple).min(bound)),
                        None => None,
                    };
                    buckets.push((bucketer.batch_size(bucket), pad));
                }
                // Each bucket's rows at its length; scheduled, also at the
                // last bucket's (a stream's tail: `group/scheduled.rs`).
                let last = buckets.last().and_then(|&(_, pad)| pad);
                let tails = buckets.iter().map(|&(rows, _)| (rows, last));
                let mut shapes: Vec<BatchShape> = (buckets.iter().copied())
                    .chain(tails.filter(|_| decided.scheduled))
                    .map(|(rows, pad)| {
                        let lengths: Vec<usize> = assembler
                            .groups
                            .iter()
                            .map(|g| pad.unwrap_or(g.bound))
                            .collect();
                        assembler.shape_for(rows, &lengths)
                    })
                    .collect();
                shapes.sort();
                shapes.dedup();
                Ok(GroupAssembly::Bucket {
                    assembler,
                    buckets,
                    shapes,
                    bucketer,
                })
            }
            GroupingWords::Pack {
                row_length,
                overflow,
                rule,
            } => {
                if self.length.is_some() || !self.decode.is_empty() {
                    return Err(PipelineError::Config(
                        "pack lays sequences into rows of its row length: padding \
                         (pad_to_multiple_of, max_length, fixed_length, truncation) and \
                         decode_raw do not apply"
                            .into(),
                    ));
                }
                let spec = self.batch_spec()?;
                if let Some(def) = spec.features().iter().find(|f| f.fixed_count().is_some()) {
                    return Err(PipelineError::Config(format!(
                        "pack lays variable-length features end to end; feature {:?} has a \
                         fixed length (leave it out of the spec)",
                        def.name
                    )));
                }
                let names: Vec<&str> = spec.features().iter().map(|f| f.name.as_str()).collect();
                let mut plan =
                    PackPlan::new(&spec, &names, *row_length, self.batch_size.unwrap_or(1))
                        .overflow(*overflow)
                        .rule(*rule)
                        .masks(true);
                if let Some(m) = self.masks {
                    for name in &names {
                        plan = plan.mask(name, m);
                    }
                }
                for (feature, mask) in &self.mask_of {
                    plan = plan.mask(feature, *mask);
                }
                if let Some(dtype) = self.cast {
                    plan = plan.cast_ints(dtype);
                }
                let shapes = plan.clone().build()?.shapes();
                Ok(GroupAssembly::Pack { plan, shapes })
            }
        }
    }

    /// Every shape a batch can have (see [`ParsedPipeline::shapes`](super::ParsedPipeline::shapes)).
    pub(crate) fn shapes(&self, hosts: u64) -> Result<Vec<BatchShape>, PipelineError> {
        self.assembly_shapes(&self.assembly(hosts)?)
    }

    /// The shapes of `assembly`'s batches after the assembled steps
    /// (normalize, inputs_targets), each checked against the shape before
    /// it.
    fn assembly_shapes(&self, assembly: &GroupAssembly) -> Result<Vec<BatchShape>, PipelineError> {
        let mut shapes = match assembly {
            GroupAssembly::Rows(assembler) => assembler.shapes(),
            GroupAssembly::Bucket { shapes, .. } | GroupAssembly::Pack { shapes, .. } => {
                shapes.clone()
            }
        };
        let spec = self.batch_spec()?;
        for step in self.steps_of(Stage::Assembled) {
            for shape in &mut shapes {
                step.shape(&spec, shape)?;
            }
        }
        Self::check_bytes(&shapes)?;
        Ok(shapes)
    }

    /// The features whose length (the longest of them) groups records, with
    /// their wire kinds.
    fn length_features(&self, decided: &Decided) -> Result<Vec<(String, WireKind)>, PipelineError> {
        Ok(match &decided.batching {
            GroupingWords::Rows => Vec::new(),
            GroupingWords::Bucket { .. } => decided
                .features
                .iter()
                .map(|f| Ok((f.clone(), self.var_len_feature(f)?)))
                .collect::<Result<_, PipelineError>>()?,
            GroupingWords::Pack { .. } => match self.batch_spec()?.features().first() {
                Some(f) => vec![(f.name.clone(), f.dtype.wire_kind())],
                None => return Err(PlanError::NoFeatures.into()),
            },
        })
    }

    /// What the record thread is given for this pipeline: its grouping, the
    /// record thread's side of `assembly` (`None` only for rows, which need
    /// none), and how it measures records.
    fn record_work(
        &self,
        assembly: Option<&GroupAssembly>,
        hosts: u64,
    ) -> Result<RecordWork, PipelineError> {
        let drop_remainder = self.drop_remainder;
        let decided = self.decide(hosts)?;
        let grouping = match &decided.batching {
            GroupingWords::Rows => {
                let batch_size = self.batch_size.unwrap_or(1);
                if batch_size == 0 {
                    return Err(PipelineError::Config("batch size 0".into()));
                }
                Grouping::Rows {
                    batch_size,
                    drop_remainder,
                }
            }
            GroupingWords::Bucket { .. } => match assembly {
                Some(GroupAssembly::Bucket { bucketer, .. }) if decided.scheduled => {
                    Grouping::Scheduled {
                        bucketer: bucketer.clone(),
                        schedule: None,
                        drop_remainder,
                    }
                }
                Some(GroupAssembly::Bucket { bucketer, .. }) => Grouping::Bucket {
                    bucketer: bucketer.clone(),
                    drop_remainder,
                },
                _ => {
                    return Err(PipelineError::Config(
                        "bucket_by_length gives assembled batches: use build()".into(),
                    ));
                }
            },
            GroupingWords::Pack {
                row_length,
                overflow,
                rule,
            } => Grouping::Pack {
                row_length: *row_length,
                batch_size: self.batch_size.unwrap_or(1),
                overflow: *overflow,
                rule: *rule,
                feature: self
                    .length_features(&decided)?
                    .into_iter()
                    .next()
                    .map(|f| f.0)
                    .unwrap_or_default(),
                drop_remainder,
            },
        };
        let length = self.length_features(&decided)?;
        let length_feature = (!length.is_empty()).then(|| {
            length
                .iter()
                .map(|(f, _)| f.as_str())
                .collect::<Vec<_>>()
                .join(",")
        });
        let length = (!length.is_empty()).then_some(length);
        // Parsed ops decide which records survive or how long they are: a
        // prefilter pass must run them before grouping.
        // A SequenceExample's steps are counted by parsing, on the prefilter
        // threads (the wire scan reads Examples only).
        let prefilter =
            self.has_filter() || (length.is_some() && (self.has_map() || self.sequence.is_some()));
        let (measure, scan, prefilter) = if prefilter {
            (None, None, Some(self.prefilter_fn(length)))
        } else {
            let scan = length.clone().map(scan_fn);
            (length.map(|features| self.measure_fn(features)), scan, None)
        };
        let column_steps = self.steps_of(Stage::Columns);
        Ok(RecordWork {
            grouping,
            measure,
            scan,
            prefilter,
            length_feature,
            column_steps,
            masks: self.mask_key(),
        })
    }

    /// The mask settings for the checkpoint's fingerprint: empty when
    /// default (so other pipelines keep their fingerprints), else
    /// `*=<all>;` then `<feature>=<type>;` per feature setting in order.
    fn mask_key(&self) -> String {
        let mut key = String::new();
        if let Some(m) = self.masks {
            key.push_str(&format!("*={m};"));
        }
        for (feature, m) in &self.mask_of {
            key.push_str(&format!("{}:{feature}={m};", feature.len()));
        }
        key
    }
}
