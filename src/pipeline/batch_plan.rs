//! The parsed half of a pipeline: its settings checked into a batch plan
//! (shapes, rows, length buckets or packed rows), the grouping the record
//! thread follows, and the job each worker runs on a group (parse, map,
//! pad, assemble).

use std::sync::{Arc, Mutex};

use super::error::PipelineError;
use super::group::plan::Grouping;
use super::group::plan::{BatchFn, RawBatch};
use super::group::plan::{GroupMode, Layout, MeasureFn, PrefilterFn};
#[cfg(feature = "images")]
use super::images::ImageStage;
use super::normalize::Normalize;
use super::ops::{Item, LengthScan};
use super::parsed::{self, ColumnPool, OpError, ParsedOp};
use super::stats::StageStats;
use crate::batch::{
    Assembler, Batch, BatchError, BatchErrorKind, BatchPlan, BatchShape, BucketGroup, Bucketer,
    LengthPolicy, MaskType, Overflow, PackPlan, Packer, PlanError, Remainder, TensorType,
};
use crate::example::{
    ExampleParser, ParseError, ParsedBatch, SequenceBatch, SequenceParser, longest_feature_length,
};
use crate::spec::{FeatureKind, FeatureSpec, SequenceKind, SequenceSpec, WireKind};

/// How parsed records are grouped into batches.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum ParsedGrouping {
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
    pub grouping: ParsedGrouping,
    pub ops: Vec<ParsedOp>,
    /// Features normalized to float after assembly, in order.
    pub normalize: Vec<Normalize>,
}

/// The grouping a pipeline runs with (see [`ParsedSettings::decide`]).
struct Decided {
    grouping: ParsedGrouping,
    /// Buckets in the order of the shared schedule, not as they fill.
    scheduled: bool,
    /// The features whose longest length buckets a record.
    features: Vec<String>,
}

/// A checked description of the batches: how a worker makes each one.
enum Plan {
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
    fn has_filter(&self) -> bool {
        self.ops.iter().any(|op| matches!(op, ParsedOp::Filter(_)))
    }

    fn has_map(&self) -> bool {
        self.ops.iter().any(|op| matches!(op, ParsedOp::Map(_)))
    }

    fn assembler(&self, batch_size: usize) -> Result<Assembler, PipelineError> {
        let mut plan = match &self.sequence {
            Some(seq) => BatchPlan::for_sequence(seq, batch_size),
            None => BatchPlan::new(&self.spec, batch_size),
        };
        let has_lists = self
            .sequence
            .as_ref()
            .is_some_and(|s| !s.sequence().is_empty());
        let has_var_len = has_lists
            || self
                .spec
                .features()
                .iter()
                .any(|f| f.fixed_count().is_none());
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
        let def = self
            .spec
            .get(name)
            .ok_or_else(|| PlanError::UnknownFeature {
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
        let grouping = self.grouping.clone();
        let ParsedGrouping::Rows = grouping else {
            let features = match &grouping {
                ParsedGrouping::Bucket { feature, .. } => vec![feature.clone()],
                _ => Vec::new(),
            };
            let scheduled = scheduled && matches!(grouping, ParsedGrouping::Bucket { .. });
            return Ok(Decided {
                grouping,
                scheduled,
                features,
            });
        };
        let padded: Vec<String> = self
            .spec
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
                grouping,
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
        let multiple = policy.multiple.max(1);
        let boundaries: Vec<usize> = (1..)
            .map(|k| k * multiple)
            .take_while(|&b| b < bound)
            .collect();
        let batch_size = self.batch_size.unwrap_or(1);
        Ok(Decided {
            grouping: ParsedGrouping::Bucket {
                feature: padded[0].clone(),
                batch_sizes: vec![batch_size; boundaries.len() + 1],
                boundaries,
            },
            scheduled: true,
            features: padded,
        })
    }

    /// The workers' image decoding, if the spec has image features.
    #[cfg(feature = "images")]
    fn images(
        &self,
        seed: u64,
        skips: Option<Arc<StageStats>>,
    ) -> Result<Option<Arc<ImageStage>>, PipelineError> {
        Ok(ImageStage::new(&self.spec, seed, skips).map(Arc::new))
    }

    /// Without the `images` feature a spec with images cannot run.
    #[cfg(not(feature = "images"))]
    fn images(
        &self,
        _seed: u64,
        _skips: Option<Arc<StageStats>>,
    ) -> Result<Option<Arc<NoImages>>, PipelineError> {
        match self.spec.images().first() {
            Some((name, _)) => Err(PipelineError::Config(format!(
                "feature {name:?} is an image: this build of infeed has no image \
                 decoders (cargo feature `images`)"
            ))),
            None => Ok(None),
        }
    }

    fn plan(&self, hosts: u64) -> Result<Plan, PipelineError> {
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
            if let ParsedGrouping::Pack { .. } = self.grouping {
                return Err(PipelineError::Config(
                    "pack is not supported for SequenceExample records (parse_sequence): \
                     use batch or bucket_by_length"
                        .into(),
                ));
            }
        }
        match &decided.grouping {
            ParsedGrouping::Rows => Ok(Plan::Rows(self.assembler(self.batch_size.unwrap_or(1))?)),
            ParsedGrouping::Bucket {
                feature,
                boundaries,
                batch_sizes,
            } => {
                let converted = matches!(self.grouping, ParsedGrouping::Rows);
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
                let mut shapes: Vec<BatchShape> = buckets
                    .iter()
                    .map(|&(rows, pad)| {
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
                Ok(Plan::Bucket {
                    assembler,
                    buckets,
                    shapes,
                    bucketer,
                })
            }
            ParsedGrouping::Pack {
                row_length,
                overflow,
            } => {
                if self.length.is_some() || !self.decode.is_empty() {
                    return Err(PipelineError::Config(
                        "pack lays sequences into rows of its row length: padding \
                         (pad_to_multiple_of, max_length, fixed_length, truncation) and \
                         decode_raw do not apply"
                            .into(),
                    ));
                }
                if let Some(def) = self
                    .spec
                    .features()
                    .iter()
                    .find(|f| f.fixed_count().is_some())
                {
                    return Err(PipelineError::Config(format!(
                        "pack lays variable-length features end to end; feature {:?} has a \
                         fixed length (leave it out of the spec)",
                        def.name
                    )));
                }
                let names: Vec<&str> = self
                    .spec
                    .features()
                    .iter()
                    .map(|f| f.name.as_str())
                    .collect();
                let mut plan = PackPlan::new(
                    &self.spec,
                    &names,
                    *row_length,
                    self.batch_size.unwrap_or(1),
                )
                .overflow(*overflow)
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
                Ok(Plan::Pack { plan, shapes })
            }
        }
    }

    /// Every shape a batch can have (see [`ParsedPipeline::shapes`](super::ParsedPipeline::shapes)).
    pub(crate) fn shapes(&self, hosts: u64) -> Result<Vec<BatchShape>, PipelineError> {
        self.plan_shapes(&self.plan(hosts)?)
    }

    /// The shapes of `plan`'s batches after `normalize`, which is checked
    /// against them.
    fn plan_shapes(&self, plan: &Plan) -> Result<Vec<BatchShape>, PipelineError> {
        let mut shapes = match plan {
            Plan::Rows(assembler) => assembler.shapes(),
            Plan::Bucket { shapes, .. } | Plan::Pack { shapes, .. } => shapes.clone(),
        };
        for n in &self.normalize {
            for shape in &mut shapes {
                n.check(&self.spec, shape)?;
                n.reshape(shape);
            }
        }
        Ok(shapes)
    }

    /// The features whose length (the longest of them) groups records, with
    /// their wire kinds.
    fn length_features(&self, decided: &Decided) -> Result<Vec<(String, WireKind)>, PipelineError> {
        Ok(match &decided.grouping {
            ParsedGrouping::Rows => Vec::new(),
            ParsedGrouping::Bucket { .. } => decided
                .features
                .iter()
                .map(|f| Ok((f.clone(), self.var_len_feature(f)?)))
                .collect::<Result<_, PipelineError>>()?,
            ParsedGrouping::Pack { .. } => match self.spec.features().first() {
                Some(f) => vec![(f.name.clone(), f.dtype.wire_kind())],
                None => return Err(PlanError::NoFeatures.into()),
            },
        })
    }

    /// How the record thread groups records for this pipeline: the record
    /// thread's half of `plan` (`None` only for rows, which need no plan).
    fn grouping(&self, plan: Option<&Plan>, hosts: u64) -> Result<Grouping, PipelineError> {
        let drop_remainder = self.drop_remainder;
        let decided = self.decide(hosts)?;
        let mode = match &decided.grouping {
            ParsedGrouping::Rows => {
                let batch_size = self.batch_size.unwrap_or(1);
                if batch_size == 0 {
                    return Err(PipelineError::Config("batch size 0".into()));
                }
                GroupMode::Fixed {
                    batch_size,
                    drop_remainder,
                }
            }
            ParsedGrouping::Bucket { .. } => match plan {
                Some(Plan::Bucket { bucketer, .. }) if decided.scheduled => GroupMode::Scheduled {
                    bucketer: bucketer.clone(),
                    schedule: None,
                    drop_remainder,
                },
                Some(Plan::Bucket { bucketer, .. }) => GroupMode::Bucket {
                    bucketer: bucketer.clone(),
                    drop_remainder,
                },
                _ => {
                    return Err(PipelineError::Config(
                        "bucket_by_length gives assembled batches: use build()".into(),
                    ));
                }
            },
            ParsedGrouping::Pack {
                row_length,
                overflow,
            } => GroupMode::Pack {
                row_length: *row_length,
                batch_size: self.batch_size.unwrap_or(1),
                overflow: *overflow,
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
        let parsed_ops = self
            .ops
            .iter()
            .map(|op| match op {
                ParsedOp::Map(_) => 'm',
                ParsedOp::Filter(_) => 'f',
            })
            .collect();
        Ok(Grouping {
            mode,
            measure,
            scan,
            prefilter,
            length_feature,
            parsed_ops,
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

    /// Reads a record's length (the longest of `features`) with the wire
    /// scan; a record it cannot read is parsed to name what is wrong with it.
    fn measure_fn(&self, features: Vec<(String, WireKind)>) -> MeasureFn {
        let spec = self.spec.clone();
        Arc::new(move |item| {
            longest_feature_length(&item.data, &features).map_err(|(i, error)| {
                match ExampleParser::new(&spec).parse(std::slice::from_ref(&item.data)) {
                    Err(error) => PipelineError::Parse {
                        path: String::new(),
                        offset: item.offset,
                        at: None,
                        error,
                    },
                    Ok(_) => PipelineError::Length {
                        path: String::new(),
                        offset: item.offset,
                        at: None,
                        feature: features[i].0.clone(),
                        error,
                    },
                }
            })
        })
    }

    /// Parses a chunk, runs the parsed ops, and gives each record's fate.
    fn prefilter_fn(&self, length: Option<Vec<(String, WireKind)>>) -> PrefilterFn {
        let parsers = Arc::new(ParserPool::new(&self.spec, self.sequence.as_ref(), None));
        let ops = self.ops.clone();
        let features: Vec<String> = length.into_iter().flatten().map(|f| f.0).collect();
        Arc::new(move |raw: &RawBatch| {
            let (parser, batch) = parsers.parse(raw)?;
            let n = batch.num_records;
            let (kept, origin) = parsed::apply_all(&ops, batch).map_err(|e| map_error(raw, e))?;
            let mut verdicts = vec![None; n];
            let columns = features
                .iter()
                .map(|f| {
                    kept.get(f).ok_or_else(|| PipelineError::Batch {
                        path: raw.origin(0).0.to_owned(),
                        offset: raw.origin(0).1,
                        at: None,
                        error: BatchError {
                            record: None,
                            feature: Some(f.clone()),
                            kind: BatchErrorKind::MissingColumn,
                        },
                    })
                })
                .collect::<Result<Vec<_>, _>>()?;
            for (row, &i) in origin.iter().enumerate() {
                let len = columns
                    .iter()
                    .map(|c| parsed::row_length(c, row).unwrap_or(0))
                    .max()
                    .unwrap_or(0);
                if let Some(v) = verdicts.get_mut(i) {
                    *v = Some(len);
                }
            }
            parsers.put(parser, kept);
            Ok(verdicts)
        })
    }

    /// The grouping and the workers' job for assembled batches. `skips`:
    /// under the skip policy, where the workers count the records they
    /// leave out (a corrupt image); `None`, such a record is an error.
    pub(crate) fn batches(
        &self,
        hosts: u64,
        seed: u64,
        skips: Option<Arc<StageStats>>,
    ) -> Result<(Grouping, BatchFn<Batch>), PipelineError> {
        let plan = self.plan(hosts)?;
        self.plan_shapes(&plan)?;
        let grouping = self.grouping(Some(&plan), hosts)?;
        let images = self.images(seed, skips)?;
        let parsers = ParserPool::new(&self.spec, self.sequence.as_ref(), images.clone());
        let ops = self.ops.clone();
        // Images are decoded between the parse and the assembly: no direct path.
        let direct = self.sequence.is_none() && images.is_none();
        let spec = self.spec.clone();
        let work: BatchFn<Batch> = match plan {
            Plan::Rows(assembler) if ops.is_empty() && direct => Arc::new(move |raw: RawBatch| {
                // Fixed-length features (img): straight from the records.
                if let Some(batch) = assembler.assemble_dense_direct(&spec, &raw.records) {
                    return Ok(batch);
                }
                // Straight into the padded tensors when the plan allows;
                // anything else (and every error) takes the two-step path.
                if let Some(batch) = parsers.with_parser(|parser| match parser {
                    AnyParser::Example(parser) => assembler.assemble_direct(parser, &raw.records),
                    AnyParser::Sequence(..) => None,
                }) {
                    return Ok(batch);
                }
                parsers.with(&raw, |parsed| {
                    assembler
                        .assemble(parsed)
                        .map_err(|error| batch_error(&raw, error))
                })
            }),
            Plan::Rows(assembler) => Arc::new(move |raw: RawBatch| {
                let parsed = parsers.parse_mapped(&raw, &ops)?;
                let out = assembler
                    .assemble(&parsed.1)
                    .map_err(|error| batch_error(&raw, error));
                parsers.put(parsed.0, parsed.1);
                out
            }),
            Plan::Bucket {
                assembler, buckets, ..
            } => Arc::new(move |raw: RawBatch| {
                let bucket = match raw.layout {
                    Layout::Bucket(b) => b,
                    _ => 0,
                };
                let (batch_size, pad_to) = buckets.get(bucket).copied().unwrap_or((1, None));
                // Straight into the padded tensors when the plan allows (as
                // for rows); anything else, and every error, takes two steps.
                if ops.is_empty()
                    && direct
                    && let Some(batch) = parsers.with_parser(|parser| match parser {
                        AnyParser::Example(parser) => assembler.assemble_direct_bucket(
                            parser,
                            &raw.records,
                            batch_size,
                            pad_to,
                        ),
                        AnyParser::Sequence(..) => None,
                    })
                {
                    return Ok(batch);
                }
                let (parser, parsed) = parsers.parse_mapped(&raw, &ops)?;
                let group = BucketGroup {
                    bucket,
                    batch_size,
                    pad_to,
                    items: (0..parsed.num_records).map(|r| (&parsed, r)).collect(),
                };
                let out = assembler
                    .assemble_bucket(&group)
                    .map_err(|error| batch_error(&raw, error));
                drop(group);
                parsers.put(parser, parsed);
                out
            }),
            Plan::Pack { plan, .. } => {
                let packers = Arc::new(Mutex::new(Vec::<Packer>::new()));
                Arc::new(move |raw: RawBatch| {
                    let (parser, parsed) = parsers.parse_mapped(&raw, &ops)?;
                    let taken = packers.lock().unwrap_or_else(|e| e.into_inner()).pop();
                    let mut packer = match taken {
                        Some(p) => p,
                        None => plan.clone().build()?,
                    };
                    let out = pack_group(&mut packer, &raw, &parsed);
                    packers
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .push(packer);
                    parsers.put(parser, parsed);
                    out
                })
            }
        };
        if self.normalize.is_empty() {
            return Ok((grouping, work));
        }
        let normalize = self.normalize.clone();
        let pool = crate::batch::BufferPool::default();
        let assemble = work;
        let work: BatchFn<Batch> = Arc::new(move |raw: RawBatch| {
            let mut batch = assemble(raw)?;
            for n in &normalize {
                n.apply(&mut batch, &pool);
            }
            Ok(batch)
        });
        Ok((grouping, work))
    }

    /// The grouping and the workers' job for parsed columns, and the pool
    /// the consumer gives batches back to for their columns to be reused.
    pub(crate) fn columns(
        &self,
        seed: u64,
        skips: Option<Arc<StageStats>>,
    ) -> Result<(Grouping, BatchFn<ParsedBatch>, Arc<ColumnPool>), PipelineError> {
        if self.grouping != ParsedGrouping::Rows {
            return Err(PipelineError::Config(
                "bucket_by_length and pack give assembled batches: use build()".into(),
            ));
        }
        if !self.normalize.is_empty() {
            return Err(PipelineError::Config(
                "normalize applies to assembled batches: use build()".into(),
            ));
        }
        // Ragged columns have no padded shape for hosts to agree on.
        let grouping = self.grouping(None, 1)?;
        // The columns are handed over: they are parsed into the buffers of
        // a batch the consumer gave back, else new ones (a reused parser
        // sizes them from the last batch, so none regrows).
        let images = self.images(seed, skips)?;
        let parsers = ParserPool::new(&self.spec, self.sequence.as_ref(), None);
        let pool = ColumnPool::new(COLUMN_SPARES);
        let spare = pool.clone();
        let ops = self.ops.clone();
        let work: BatchFn<ParsedBatch> = Arc::new(move |raw: RawBatch| {
            let mut parsed = spare.take();
            parsers
                .with_parser(|parser| parser.parse_into(&raw.records, &mut parsed))
                .map_err(|error| parse_error(&raw, error))?;
            let mut parsed = parsed::apply_maps(&ops, parsed).map_err(|e| map_error(&raw, e))?;
            if let Some(images) = &images {
                images.apply(&raw, &mut parsed)?;
            }
            Ok(parsed)
        });
        Ok((grouping, work, pool))
    }
}

/// The wire scan of [`ParsedSettings::measure_fn`] without its error
/// report, for the shard readers: a record it cannot read is measured
/// again on the record thread, which names it.
fn scan_fn(features: Vec<(String, WireKind)>) -> LengthScan {
    Arc::new(move |data: &[u8]| longest_feature_length(data, &features).ok())
}

/// Packs the records of a planned group into one batch.
fn pack_group(
    packer: &mut Packer,
    raw: &RawBatch,
    parsed: &ParsedBatch,
) -> Result<Batch, PipelineError> {
    let (parts, rows) = match &raw.layout {
        Layout::Pack { parts, rows } => (parts.as_slice(), *rows),
        _ => (&[][..], 0),
    };
    // An empty group: a host padding to its batch count.
    if parsed.num_records == 0 {
        packer.finish(Remainder::Drop);
        return Ok(packer.empty_batch());
    }
    let mut out = Vec::new();
    for r in 0..parsed.num_records {
        let pushed = match parts.get(r) {
            Some(part) => packer.push_part(parsed, r, part.clone(), &mut out),
            None => packer.push(parsed, r, &mut out),
        };
        if let Err(error) = pushed {
            packer.finish(Remainder::Drop);
            return Err(batch_error(raw, error));
        }
    }
    let batch = packer.finish(Remainder::Pad);
    match batch {
        Some(batch) if out.is_empty() && batch.real_rows == rows => Ok(batch),
        _ => {
            let (path, offset) = raw.origin(0);
            Err(PipelineError::Batch {
                path: path.to_owned(),
                offset,
                at: None,
                error: BatchError {
                    record: None,
                    feature: None,
                    kind: BatchErrorKind::ColumnMismatch {
                        reason: "parsed lengths differ from the lengths the records were \
                                 planned by (packed features of unequal length?)",
                    },
                },
            })
        }
    }
}

/// A batch error, placed at the file and offset of the record it names.
fn batch_error(raw: &RawBatch, error: BatchError) -> PipelineError {
    let (path, offset) = raw.origin(error.record.unwrap_or(0));
    PipelineError::Batch {
        path: path.to_owned(),
        offset,
        at: None,
        error,
    }
}

/// A parse error, placed at the file and offset of the record it names.
fn parse_error(raw: &RawBatch, error: crate::example::ParseError) -> PipelineError {
    let (path, offset) = raw.origin(error.record);
    PipelineError::Parse {
        path: path.to_owned(),
        offset,
        at: None,
        error,
    }
}

/// A parsed op's failure, placed at the batch's first record.
fn map_error(raw: &RawBatch, error: OpError) -> PipelineError {
    let (path, offset) = raw.origin(0);
    let message = match error {
        OpError::Map(e) => e.to_string(),
        OpError::Count { before, after } => format!(
            "it returned {after} records for {before}: a map must keep every record \
             (filter_rows drops records)"
        ),
    };
    PipelineError::Map {
        path: path.to_owned(),
        offset,
        at: None,
        message,
    }
}

/// Stands in for the image stage in a build without image decoders (a
/// spec with images is refused before any worker starts).
#[cfg(not(feature = "images"))]
pub(crate) struct NoImages;

#[cfg(not(feature = "images"))]
type ImageStage = NoImages;

#[cfg(not(feature = "images"))]
impl NoImages {
    fn apply(&self, _raw: &RawBatch, _parsed: &mut ParsedBatch) -> Result<(), PipelineError> {
        Ok(())
    }
}

/// Parsed batches given back that the pool keeps: enough for the workers
/// and the batches in flight to find one.
const COLUMN_SPARES: usize = 8;

/// Parsers with reusable column buffers, one per worker at a time: writing
/// fresh memory costs more than parsing here (page faults on this VM), so
/// each batch reuses the buffers of an earlier one.
struct ParserPool {
    spec: FeatureSpec,
    sequence: Option<SequenceSpec>,
    /// Image features, decoded after the parsed ops (`parse_mapped`).
    images: Option<Arc<ImageStage>>,
    idle: Mutex<Vec<(AnyParser, ParsedBatch)>>,
}

/// The parser of a pipeline's records: `Example`s, or `SequenceExample`s
/// whose context and feature-list columns go into one [`ParsedBatch`]
/// (context first, in spec order, then the lists).
enum AnyParser {
    Example(ExampleParser),
    /// The parser and its number of context features.
    Sequence(SequenceParser, usize),
}

impl AnyParser {
    fn parse_into<R: AsRef<[u8]>>(
        &mut self,
        records: &[R],
        out: &mut ParsedBatch,
    ) -> Result<(), ParseError> {
        match self {
            AnyParser::Example(parser) => parser.parse_into(records, out),
            AnyParser::Sequence(parser, context) => {
                // Hand the old columns back to the parser's halves for reuse.
                let mut columns = std::mem::take(&mut out.columns);
                let lists = columns.split_off((*context).min(columns.len()));
                let mut seq = SequenceBatch {
                    context: ParsedBatch {
                        num_records: 0,
                        columns,
                    },
                    sequence: ParsedBatch {
                        num_records: 0,
                        columns: lists,
                    },
                };
                out.num_records = 0;
                parser.parse_into(records, &mut seq)?;
                out.num_records = records.len();
                out.columns = seq.context.columns;
                out.columns.append(&mut seq.sequence.columns);
                Ok(())
            }
        }
    }
}

impl ParserPool {
    fn new(
        spec: &FeatureSpec,
        sequence: Option<&SequenceSpec>,
        images: Option<Arc<ImageStage>>,
    ) -> Self {
        ParserPool {
            spec: spec.clone(),
            sequence: sequence.cloned(),
            images,
            idle: Mutex::new(Vec::new()),
        }
    }

    fn fresh(&self) -> (AnyParser, ParsedBatch) {
        let parser = match &self.sequence {
            Some(seq) => AnyParser::Sequence(SequenceParser::new(seq), seq.context().len()),
            None => AnyParser::Example(ExampleParser::new(&self.spec)),
        };
        let parsed = ParsedBatch {
            num_records: 0,
            columns: Vec::new(),
        };
        (parser, parsed)
    }

    /// Runs `f` with an idle parser (its parsed buffers stay unused).
    fn with_parser<T>(&self, f: impl FnOnce(&mut AnyParser) -> T) -> T {
        let taken = self.idle.lock().unwrap_or_else(|e| e.into_inner()).pop();
        let (mut parser, parsed) = taken.unwrap_or_else(|| self.fresh());
        let result = f(&mut parser);
        self.put(parser, parsed);
        result
    }

    fn with<T>(
        &self,
        raw: &RawBatch,
        f: impl FnOnce(&ParsedBatch) -> Result<T, PipelineError>,
    ) -> Result<T, PipelineError> {
        let (parser, parsed) = self.parse_mapped(raw, &[])?;
        let result = f(&parsed);
        self.put(parser, parsed);
        result
    }

    /// Parses `raw` into recycled buffers; give them back with
    /// [`put`](Self::put).
    fn parse(&self, raw: &RawBatch) -> Result<(AnyParser, ParsedBatch), PipelineError> {
        let taken = self.idle.lock().unwrap_or_else(|e| e.into_inner()).pop();
        let (mut parser, mut parsed) = taken.unwrap_or_else(|| self.fresh());
        match parser.parse_into(&raw.records, &mut parsed) {
            Ok(()) => Ok((parser, parsed)),
            Err(error) => {
                self.put(parser, parsed);
                Err(parse_error(raw, error))
            }
        }
    }

    /// Parses `raw`, runs the maps of `ops` on it, then decodes its images.
    fn parse_mapped(
        &self,
        raw: &RawBatch,
        ops: &[ParsedOp],
    ) -> Result<(AnyParser, ParsedBatch), PipelineError> {
        let (parser, parsed) = self.parse(raw)?;
        let mut mapped = if ops.is_empty() {
            parsed
        } else {
            parsed::apply_maps(ops, parsed).map_err(|e| map_error(raw, e))?
        };
        if let Some(images) = &self.images
            && let Err(e) = images.apply(raw, &mut mapped)
        {
            self.put(parser, mapped);
            return Err(e);
        }
        Ok((parser, mapped))
    }

    fn put(&self, parser: AnyParser, parsed: ParsedBatch) {
        self.idle
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push((parser, parsed));
    }
}
