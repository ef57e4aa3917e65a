//! A pipeline as one value: where its records come from, the record steps
//! in the order given, how records are parsed, the steps on parsed batches
//! in the order given, and the run's options. Every face builds this value
//! and the engine runs it: the Rust builder pushes steps onto it
//! (`builder.rs`), the Python package hands it over as JSON in one call,
//! and `infeed bench --pipeline FILE` reads it (JSON or TOML);
//! [`Pipeline::describe`](super::Pipeline::describe) and `infeed bench
//! --print-pipeline` give it back. The same value gives the same batches
//! through every face.
//!
//! What the engine computes when a pipeline starts (a glob's listing, loaded
//! indexes, token means, schedules, record counts) is not part of it.
//! User code (a Rust closure, a Python function) is named in it as a
//! [`Callable`] step, and refused where a description is run without it.
//!
//! # Version
//!
//! [`VERSION`] is written into every description. A reader reads every
//! version up to its own and refuses a later one by name. A new setting
//! with a default that keeps the old behaviour does not change the version;
//! a change of what a written description means does. Settings at their
//! default are left out when written (read and source options, each field),
//! so a description that uses none of a later build's new settings reads
//! in an earlier build of its version; one that uses one is refused there by
//! the setting's name (an unknown field), never read without it.

mod spec_form;

use serde::{Deserialize, Serialize};

pub use spec_form::{
    Default as FeatureDefault, DefaultItem, Feature, Features, Parse, SequenceFeature, SpecProblem,
};

use super::error::{PipelineError, SettingError};
use super::limits;
use super::settings::EqualBatches;
use super::{MixChoice, OnExhausted};
use crate::batch::{MaskType, Overflow, PackStrategy, TensorType, Truncation};
use crate::record::ReadOptions;
use crate::source::SourceOptions;

/// The version of the description this build writes, and the latest it
/// reads.
pub const VERSION: u32 = 1;

/// A whole pipeline (see the [module](self)).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Description {
    /// [`VERSION`] when written.
    pub version: u32,
    pub source: Source,
    /// Steps on serialized records, in the order given (the engine runs
    /// them in its fixed order; see [`Pipeline`](super::Pipeline)).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub records: Vec<RecordStep>,
    #[serde(default)]
    pub options: Options,
    /// How records are parsed; absent, batches are of serialized records.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parse: Option<Parse>,
    /// Steps that make batches: on parsed batches, padding, grouping (only
    /// `batch` without `parse`), in the order given.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub batches: Vec<BatchStep>,
    /// What a face that runs the description delivers: assembled tensors,
    /// or (`columns`) parsed columns as they are.
    #[serde(default, skip_serializing_if = "Output::is_tensors")]
    pub output: Output,
}

/// Where the records come from.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Source {
    /// These files, read in this order (before any shuffle).
    Files(Vec<String>),
    /// The shards a glob matches (`*`, `?`, `[…]`; a comma separates
    /// patterns), listed when the pipeline is made, in sorted order.
    Glob(String),
    /// A split of a prepared TFDS dataset directory.
    Tfds { dir: String, split: String },
    /// A mixture of record-level pipelines.
    Mix(Mix),
}

/// A mixture's sources, weights and how it draws (see
/// [`Pipeline::mix`](super::Pipeline::mix)).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Mix {
    /// Named record-level pipelines, in order.
    pub sources: Vec<MixSource>,
    /// One per source.
    pub weights: Vec<f64>,
    #[serde(default, with = "crate::words::as_word")]
    pub by: MixChoice,
    #[serde(default, with = "crate::words::as_word")]
    pub on_exhausted: OnExhausted,
    /// `(step, a weight per source)`, steps increasing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule: Option<Vec<(u64, Vec<f64>)>>,
    #[serde(default, skip_serializing_if = "is_false")]
    pub interpolate: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub records_per_step: Option<u64>,
    #[serde(default, skip_serializing_if = "is_false")]
    pub by_tokens: bool,
}

/// One source of a mixture.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MixSource {
    pub name: String,
    /// A record-level pipeline: no `parse`, no `batches`.
    pub pipeline: Description,
}

/// A step on serialized records, written as a table of one key, the
/// step's name: `{"shuffle": {"buffer": 10000}}`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum RecordStep {
    ShuffleFiles {},
    Interleave {
        cycle_length: usize,
        block_length: usize,
    },
    Skip {
        records: u64,
    },
    Take {
        records: u64,
    },
    /// A filter on serialized records: user code.
    Filter(Callable),
    /// A map of serialized records: user code.
    Map(Callable),
    /// A global shuffle, of records, or (with `block_bytes`) of blocks.
    GlobalShuffle {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        block_bytes: Option<u64>,
    },
    Shuffle {
        buffer: usize,
    },
    /// `None`: forever.
    Repeat {
        #[serde(default)]
        epochs: Option<u64>,
    },
}

impl RecordStep {
    /// Its values: each size within its limit, no zero that means nothing
    /// (a typed error naming the setting, the value and the limit).
    pub fn validate(&self) -> Result<(), SettingError> {
        match self {
            RecordStep::Interleave {
                cycle_length,
                block_length,
            } => {
                limits::positive("interleave cycle_length", *cycle_length as u64)?;
                limits::at_most("interleave", *cycle_length as u64, limits::MAX_CYCLE_LENGTH)?;
                limits::positive("interleave block_length", *block_length as u64)
            }
            RecordStep::GlobalShuffle {
                block_bytes: Some(bytes),
            } => limits::positive("global_shuffle block_bytes", *bytes),
            RecordStep::Repeat { epochs: Some(0) } => Err(SettingError {
                setting: "repeat",
                value: "0".into(),
                limit: "at least 1 epoch (none: forever)".into(),
            }),
            _ => Ok(()),
        }
    }
}

/// User code a step runs, by the name its face gave it: it travels with
/// the description only as that name.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Callable {
    pub callable: String,
}

/// How the pipeline runs: settings whose order does not matter.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Options {
    #[serde(skip_serializing_if = "is_zero")]
    pub seed: u64,
    /// This host's part: `(index, count)`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shard: Option<(u64, u64)>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub streams: Option<u64>,
    /// Worker threads (absent: one per core, or per core of `cpu_affinity`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub threads: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu_affinity: Option<Vec<usize>>,
    #[serde(skip_serializing_if = "is_two")]
    pub prefetch: usize,
    #[serde(skip_serializing_if = "is_false")]
    pub unordered: bool,
    #[serde(
        skip_serializing_if = "Option::is_none",
        with = "optional_word",
        default
    )]
    pub equal_batches: Option<EqualBatches>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub skip_steps: Vec<(u64, u64)>,
    /// Where the shards' indexes are (absent: beside the shards).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub index_dir: Option<String>,
    /// Read and ignored: the word `worker_reads` of descriptions written
    /// while it was one ([`Pipeline::worker_reads`](crate::pipeline::Pipeline::worker_reads)
    /// changes nothing now); never written.
    #[serde(skip_serializing)]
    pub worker_reads: bool,
    #[serde(skip_serializing_if = "is_default")]
    pub read: ReadOptions,
    #[serde(skip_serializing_if = "is_default")]
    pub source: SourceOptions,
}

impl std::default::Default for Options {
    fn default() -> Self {
        Options {
            seed: 0,
            shard: None,
            streams: None,
            threads: None,
            cpu_affinity: None,
            prefetch: 2,
            unordered: false,
            equal_batches: None,
            skip_steps: Vec::new(),
            index_dir: None,
            worker_reads: false,
            read: ReadOptions::default(),
            source: SourceOptions::default(),
        }
    }
}

impl Options {
    /// Each size within its limit, no zero that means nothing.
    pub fn validate(&self) -> Result<(), SettingError> {
        if let Some(threads) = self.threads {
            limits::positive("threads", threads as u64)?;
            limits::at_most("threads", threads as u64, limits::MAX_THREADS)?;
        }
        limits::positive("prefetch", self.prefetch as u64)?;
        limits::at_most("prefetch", self.prefetch as u64, limits::MAX_PREFETCH)?;
        // Each read holds a chunk, and `readahead` of them are in flight.
        let (read, source) = (&self.read, &self.source);
        limits::at_most(
            "read chunk_size",
            read.chunk_size as u64,
            limits::MAX_CHUNK_BYTES,
        )?;
        limits::positive("source chunk_size", source.chunk_size as u64)?;
        limits::positive("readahead", source.readahead as u64)?;
        limits::at_most(
            "source chunk_size",
            source.chunk_size as u64,
            limits::MAX_CHUNK_BYTES,
        )?;
        limits::at_most("readahead", source.readahead as u64, limits::MAX_READAHEAD)
    }
}

/// A step that makes batches, written as a table of one key, the step's
/// name: `{"pad_to_multiple_of": {"multiple": 64}}`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum BatchStep {
    Batch {
        size: usize,
        drop_remainder: bool,
    },
    DropRemainder {
        drop: bool,
    },
    PadToMultipleOf {
        multiple: usize,
    },
    MaxLength {
        length: usize,
    },
    FixedLength {
        length: usize,
    },
    Truncation {
        #[serde(with = "crate::words::as_word")]
        policy: Truncation,
    },
    Masks {
        #[serde(with = "crate::words::as_word")]
        mask: MaskType,
    },
    Mask {
        feature: String,
        #[serde(with = "crate::words::as_word")]
        mask: MaskType,
    },
    Cast {
        #[serde(with = "crate::words::as_word")]
        dtype: TensorType,
    },
    DecodeRaw {
        feature: String,
        shape: Vec<usize>,
    },
    Normalize {
        feature: String,
        mean: Vec<f32>,
        std: Vec<f32>,
        #[serde(default = "f32_type", with = "crate::words::as_word")]
        dtype: TensorType,
    },
    InputsTargets {
        feature: String,
        #[serde(default)]
        bos: i64,
    },
    BucketByLength {
        feature: String,
        boundaries: Vec<usize>,
        batch_sizes: Vec<usize>,
    },
    Pack {
        row_length: usize,
    },
    PackOverflow {
        #[serde(with = "crate::words::as_word")]
        overflow: Overflow,
    },
    PackStrategy {
        #[serde(with = "crate::words::as_word")]
        strategy: PackStrategy,
    },
    PackMaxSegments {
        segments: usize,
    },
    Tokenize {
        feature: String,
        tokenizer: String,
        #[serde(default)]
        add_bos: bool,
        #[serde(default = "yes")]
        add_eos: bool,
    },
    /// Keeps the records whose `feature` holds `min` to `max` values.
    FilterLength {
        feature: String,
        min: u64,
        max: u64,
    },
    /// A map of parsed batches: user code.
    MapBatch(Callable),
    /// A filter of parsed records: user code.
    FilterRows(Callable),
    /// A map of the batches as delivered, run by the face that delivers
    /// them (the Python package's `map_batch`, on numpy arrays): user code,
    /// never run by the engine.
    MapDelivered(Callable),
}

impl BatchStep {
    /// Its values: each size within its limit (rows per batch and per
    /// bucket, how many buckets), no zero that means nothing, bounds in
    /// order.
    pub fn validate(&self) -> Result<(), SettingError> {
        let rows = |setting: &'static str, rows: usize| {
            limits::positive(setting, rows as u64)?;
            limits::at_most(setting, rows as u64, limits::MAX_BATCH_ROWS)
        };
        match self {
            BatchStep::Batch { size, .. } => rows("batch", *size),
            BatchStep::BucketByLength {
                boundaries,
                batch_sizes,
                ..
            } => {
                limits::at_most(
                    "bucket boundaries",
                    boundaries.len() as u64,
                    crate::batch::MAX_SHAPES as u64,
                )?;
                for &size in batch_sizes {
                    limits::at_most("bucket batch size", size as u64, limits::MAX_BATCH_ROWS)?;
                }
                Ok(())
            }
            BatchStep::FilterLength { min, max, .. } if min > max => Err(SettingError {
                setting: "filter_length",
                value: format!("{min}..={max}"),
                limit: "min at most max".into(),
            }),
            _ => Ok(()),
        }
    }
}

/// What a face that runs a description delivers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Output {
    /// Static-shape batches of tensors (`ParsedPipeline::build`).
    #[default]
    Tensors,
    /// Parsed columns, unpadded (`ParsedPipeline::build_columns`).
    Columns,
}

impl Output {
    fn is_tensors(&self) -> bool {
        *self == Output::Tensors
    }
}

impl Description {
    /// A description of a pipeline over `source`, with no steps yet.
    pub fn new(source: Source) -> Self {
        Description {
            version: VERSION,
            source,
            records: Vec::new(),
            options: Options::default(),
            parse: None,
            batches: Vec::new(),
            output: Output::Tensors,
        }
    }

    /// Reads a description from JSON; an error names the place of the bad
    /// value (`records[2].buffer`) or the version.
    pub fn from_json(text: &str) -> Result<Self, PipelineError> {
        let d = &mut serde_json::Deserializer::from_str(text);
        let description: Description = serde_path_to_error::deserialize(d)
            .map_err(|e| PipelineError::Description(placed(&e)))?;
        description.check_version()?;
        Ok(description)
    }

    /// The description as pretty JSON.
    pub fn to_json(&self) -> String {
        // Plain data, string keys: serializing cannot fail.
        serde_json::to_string_pretty(self).unwrap_or_default()
    }

    /// Refuses a description written by a later version, or with no
    /// version, by name; and checks a mixture's sources the same way.
    pub fn check_version(&self) -> Result<(), PipelineError> {
        if self.version == 0 || self.version > VERSION {
            return Err(PipelineError::Description(format!(
                "version {}: this infeed reads descriptions of versions 1 to {VERSION}",
                self.version
            )));
        }
        if let Source::Mix(mix) = &self.source {
            for s in &mix.sources {
                s.pipeline.check_version()?;
            }
        }
        Ok(())
    }

    /// Checks what the description says before anything runs: every size
    /// within its limit (`limits.rs`), a zero only where it means something
    /// (`shuffle 0`: no shuffle), a modifier only with what it modifies; a
    /// mixture's sources alike. Each step checks its own values
    /// ([`RecordStep::validate`], [`BatchStep::validate`],
    /// [`Options::validate`]); what is checked here is how they go
    /// together. Each face's pipeline is checked here when it starts, with
    /// the same error.
    pub fn validate(&self) -> Result<(), PipelineError> {
        self.check_version()?;
        for step in &self.records {
            step.validate()?;
        }
        self.options.validate()?;
        let packs = self
            .batches
            .iter()
            .any(|s| matches!(s, BatchStep::Pack { .. }));
        for step in &self.batches {
            step.validate()?;
            let word = match step {
                BatchStep::PackOverflow { .. } => "pack_overflow",
                BatchStep::PackStrategy { .. } => "pack_strategy",
                BatchStep::PackMaxSegments { .. } => "pack_max_segments",
                _ => continue,
            };
            if !packs {
                return Err(PipelineError::Config(format!(
                    "{word} without pack: it says how pack(row_length) packs"
                )));
            }
        }
        let unparsed = |s: &&BatchStep| !matches!(s, BatchStep::Batch { .. });
        if let (None, Some(step)) = (&self.parse, self.batches.iter().find(unparsed)) {
            return Err(PipelineError::Description(format!(
                "{step:?} without parse: a pipeline of serialized records only makes batches"
            )));
        }
        if let Source::Mix(mix) = &self.source {
            for s in &mix.sources {
                s.pipeline.validate()?;
            }
        }
        Ok(())
    }

    /// The user code the description names, in order, with its step.
    pub fn callables(&self) -> Vec<(&'static str, &str)> {
        let records = self.records.iter().filter_map(|s| match s {
            RecordStep::Filter(c) => Some(("filter", c.callable.as_str())),
            RecordStep::Map(c) => Some(("map", c.callable.as_str())),
            _ => None,
        });
        let batches = self.batches.iter().filter_map(|s| match s {
            BatchStep::MapBatch(c) => Some(("map_batch", c.callable.as_str())),
            BatchStep::FilterRows(c) => Some(("filter_rows", c.callable.as_str())),
            BatchStep::MapDelivered(c) => Some(("map_delivered", c.callable.as_str())),
            _ => None,
        });
        records.chain(batches).collect()
    }
}

/// A deserializing error with the place of the bad value (the line and
/// column serde_json adds left out: a description is data, often one line).
pub fn placed<E: std::fmt::Display>(e: &serde_path_to_error::Error<E>) -> String {
    let inner = e.inner().to_string();
    let inner = match inner.rsplit_once(" at line ") {
        Some((message, at)) if at.contains(" column ") => message.to_owned(),
        _ => inner,
    };
    match e.path().to_string().as_str() {
        "." => inner,
        path => format!("{path}: {inner}"),
    }
}

fn is_false(b: &bool) -> bool {
    !*b
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// The default prefetch.
fn is_two(n: &usize) -> bool {
    *n == 2
}

fn is_default<T: std::default::Default + PartialEq>(value: &T) -> bool {
    *value == T::default()
}

fn yes() -> bool {
    true
}

fn f32_type() -> TensorType {
    TensorType::F32
}

/// serde's form of an optional [`Words`](crate::words::Words) setting.
mod optional_word {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    use crate::words::Words;

    #[derive(Serialize, Deserialize)]
    #[serde(bound = "T: Words")]
    struct Word<T: Words>(#[serde(with = "crate::words::as_word")] T);

    pub fn serialize<T: Words, S: Serializer>(value: &Option<T>, s: S) -> Result<S::Ok, S::Error> {
        value.map(Word).serialize(s)
    }

    pub fn deserialize<'de, T: Words, D: Deserializer<'de>>(d: D) -> Result<Option<T>, D::Error> {
        Ok(Option::<Word<T>>::deserialize(d)?.map(|Word(v)| v))
    }
}
