//! The user's words: [`Pipeline`] (records) and [`ParsedPipeline`] (parsed,
//! static-shape batches) collect settings; `build` checks them once and
//! starts the threads (see `start.rs`).

use std::sync::Arc;

use bytes::Bytes;

use super::batches::Batches;
use super::batching::{GroupingWords, ParsedSettings};
use super::description::{
    BatchStep, Callable, Description, Mix, MixSource, Output, Parse, RecordStep, Source,
};
use super::error::PipelineError;
use super::filter_length::FilterLength;
use super::group::grouping::RecordWork;
use super::group::raw_batch::{BatchFn, RawBatch};
use super::inputs_targets::InputsTargets;
use super::limits;
use super::normalize::Normalize;
use super::ops::chain::ChainSettings;
use super::ops::global_shuffle;
use super::ops::interleave::RecordRange;
use super::ops::shuffle::ShuffleSettings;
use super::parsed::{FilterStep, MapError, MapStep};
use super::settings::EqualBatches;
use super::settings::RecordSettings;
use super::start::start;
use super::stats::StageStats;
use super::threads::affinity::CpuAffinity;
use super::tokenize::TokenizeOp;
use crate::batch::{
    Batch, BatchShape, LengthPolicy, MaskType, Overflow, PackRule, PackStrategy, TensorType,
    Truncation,
};
use crate::example::ParsedBatch;
use crate::record::{CorruptPolicy, ReadOptions};
use crate::source::{SourceOptions, list_shards_blocking};
use crate::spec::{FeatureSpec, SequenceSpec};
use crate::tfds::TfdsDataset;

use super::ops::mix::{MixChoice, OnExhausted};
use super::ops::mix_schedule::MixSchedule;
use super::settings::MixSettings;

/// The files of a description's globs as listed before, by pattern (in
/// sorted order, as a listing gives them): a description run with them
/// lists none of these again. The Python package lists a glob once per
/// pipeline, then runs its description at every iterator's start; on a
/// bucket of many shards a listing is many requests.
pub type Listed = std::collections::BTreeMap<String, Vec<String>>;

/// A description of an input pipeline; `build` starts it.
///
/// Each word pushes a step onto its [`Description`]
/// ([`describe`](Self::describe)) and applies it to the settings the engine
/// starts from; [`from_description`](Self::from_description) makes the same
/// pipeline from the value.
#[derive(Clone)]
pub struct Pipeline {
    pub(crate) s: RecordSettings,
    d: Description,
    /// A word said where it means nothing (a mixture's word on a pipeline
    /// that is not one): refused when the pipeline starts.
    refused: Option<String>,
}

/// The name a step of user code has in a description when a Rust closure
/// gave it: such a description runs only where the closure is.
const RUST_CLOSURE: &str = "rust closure";

impl Pipeline {
    /// A pipeline over these files, read in this order (before any shuffle).
    pub fn from_files<S: Into<String>>(
        files: impl IntoIterator<Item = S>,
    ) -> Result<Self, PipelineError> {
        let files: Vec<String> = files.into_iter().map(Into::into).collect();
        if files.is_empty() {
            return Err(PipelineError::NoFiles("(an empty list)".into()));
        }
        let source = files.join(",");
        Ok(Self::with_files(
            source,
            files.clone(),
            Source::Files(files),
        ))
    }

    /// A mixture of record-level pipelines in set proportions: each source
    /// has its own files, host shard, file shuffle, interleave, shuffle
    /// buffer and repeat; the mixture takes `weights[i]` of its records from
    /// source `i` (positive, any scale) and is a record-level pipeline
    /// itself: it takes [`seed`](Self::seed) (of its draws), then `parse`,
    /// padding, bucketing, packing and batching as any other. Which source
    /// gives the `n`-th record is a pure function of the seed, `n` and the
    /// weights ([`mix_by`](Self::mix_by)); what happens when a source runs
    /// out is [`on_exhausted`](Self::on_exhausted). Sources are named: a
    /// state restores with other weights (continuing every source where it
    /// was, the new weights from there), a new source (from its start) or
    /// without a source (dropped). See docs/pipeline.md, Mixtures.
    pub fn mix<S: Into<String>>(
        sources: impl IntoIterator<Item = (S, Pipeline)>,
        weights: &[f64],
    ) -> Result<Self, PipelineError> {
        let sources: Vec<(String, Pipeline)> =
            sources.into_iter().map(|(n, p)| (n.into(), p)).collect();
        let bad = |m: String| Err(PipelineError::Config(format!("mix: {m}")));
        if sources.is_empty() {
            return bad("no source".into());
        }
        if weights.len() != sources.len() {
            return bad(format!(
                "{} weights for {} sources",
                weights.len(),
                sources.len()
            ));
        }
        if let Some((name, p)) = sources.iter().find(|(_, p)| p.d.parse.is_some()) {
            return bad(format!(
                "source {name:?} parses its records ({}); a source takes record-level steps only",
                p.s.source
            ));
        }
        if let Some(w) = weights.iter().find(|w| !w.is_finite() || **w <= 0.0) {
            return bad(format!("weight {w}: every weight must be positive"));
        }
        for (i, (name, _)) in sources.iter().enumerate() {
            if name.is_empty() || name.contains('/') {
                return bad(format!("source name {name:?}: not empty, without '/'"));
            }
            if sources[..i].iter().any(|(n, _)| n == name) {
                return bad(format!("source name {name:?} given twice"));
            }
        }
        let files: Vec<String> = sources
            .iter()
            .flat_map(|(_, p)| p.s.files.iter().cloned())
            .collect();
        let label = sources
            .iter()
            .map(|(n, p)| format!("{n}={}", p.s.source))
            .collect::<Vec<_>>()
            .join(";");
        let described = Mix {
            sources: sources
                .iter()
                .map(|(name, p)| MixSource {
                    name: name.clone(),
                    pipeline: p.d.clone(),
                })
                .collect(),
            weights: weights.to_vec(),
            by: MixChoice::Random,
            on_exhausted: OnExhausted::Stop,
            schedule: None,
            interpolate: false,
            records_per_step: None,
            by_tokens: false,
        };
        let mut p = Self::with_files(format!("mix({label})"), files, Source::Mix(described));
        // A word refused on a source is refused on the mixture.
        p.refused = sources.iter().find_map(|(_, s)| s.refused.clone());
        p.s.workers = sources[0].1.s.workers;
        p.s.mixture = Some(Arc::new(MixSettings {
            sources: sources.into_iter().map(|(n, p)| (n, p.s)).collect(),
            weights: weights.to_vec(),
            choice: MixChoice::Random,
            on_exhausted: OnExhausted::Stop,
            schedule: None,
            records_per_step: None,
            by_tokens: false,
        }));
        Ok(p)
    }

    /// How a mixture picks the source of each record: a random draw by
    /// weight (the default), or stratified so that every batch holds each
    /// source's share (see [`MixChoice`]).
    pub fn mix_by(self, choice: MixChoice) -> Self {
        self.mixture("mix_by", |m, d| {
            m.choice = choice;
            d.by = choice;
        })
    }

    /// What a mixture does when a source runs out: stop (the default),
    /// drop the source and renormalize the others' weights, or fail.
    pub fn on_exhausted(self, policy: OnExhausted) -> Self {
        self.mixture("on_exhausted", |m, d| {
            m.on_exhausted = policy;
            d.on_exhausted = policy;
        })
    }

    /// A mixture's weights on a schedule: from step `points[i].0` on, the
    /// weights `points[i].1` (one per source, not negative: a zero turns a
    /// source off), held until the next point, or with `interpolate`
    /// moving linearly to it (from the mixture's own weights at step 0).
    /// The weights of a step are a pure function of it: every host draws
    /// alike, a restore continues exactly, and a state restored under
    /// another schedule takes its weights from the saved step on. A step
    /// is the records a host's batch takes: its rows under plain `batch`;
    /// packed or bucketed batches take varying counts, so they need
    /// [`mix_records_per_step`](Self::mix_records_per_step). Checked when
    /// the pipeline is built.
    pub fn mix_schedule(self, points: &[(u64, Vec<f64>)], interpolate: bool) -> Self {
        self.mixture("mix_schedule", |m, d| {
            m.schedule = Some(MixSchedule {
                points: points.to_vec(),
                interpolate,
            });
            d.schedule = Some(points.to_vec());
            d.interpolate = interpolate;
        })
    }

    /// With `by_tokens`, a mixture's weights (and its schedule's) count
    /// tokens, not records: the length its grouping measures, after
    /// `tokenize` (so it needs `pack` or `bucket_by_length`). Each source's
    /// records are drawn by its weight over its mean tokens per record,
    /// measured when the pipeline starts on a sample every host reads alike
    /// (the first records of a few files of each source), so the token
    /// shares hold in expectation, as record shares do under random draws.
    pub fn mix_by_tokens(self, by_tokens: bool) -> Self {
        self.mixture("mix_by_tokens", |m, d| {
            m.by_tokens = by_tokens;
            d.by_tokens = by_tokens;
        })
    }

    /// The records drawn on a host that make one step of a
    /// [`mix_schedule`](Self::mix_schedule) (default: the rows of a host's
    /// batch under plain `batch`; needed with `pack` or buckets, e.g. the
    /// documents a packed batch holds on average).
    pub fn mix_records_per_step(self, records: u64) -> Self {
        self.mixture("mix_records_per_step", |m, d| {
            m.records_per_step = Some(records);
            d.records_per_step = Some(records);
        })
    }

    /// Changes a mixture's settings and its description alike; `word` on
    /// a pipeline that is not a mixture is refused when it starts.
    fn mixture(mut self, word: &str, f: impl FnOnce(&mut MixSettings, &mut Mix)) -> Self {
        match (self.s.mixture.as_mut(), &mut self.d.source) {
            (Some(m), Source::Mix(d)) => f(Arc::make_mut(m), d),
            _ => {
                self.refused.get_or_insert(format!(
                    "{word} on a pipeline that is not a mixture (Pipeline::mix makes one)"
                ));
            }
        }
        self
    }

    /// What every start checks first: the description
    /// ([`Description::validate`]) and the words refused where said.
    fn check(&self) -> Result<(), PipelineError> {
        if let Some(refused) = &self.refused {
            return Err(PipelineError::Config(refused.clone()));
        }
        self.d.validate()
    }

    /// A pipeline over the shards matching a glob (`*`, `?`, `[…]`) of local
    /// paths or gs://, s3://, az:// URLs, in sorted order; listed by prefix,
    /// never by a walk of the whole bucket. A comma separates several
    /// patterns. Listed with the default [`SourceOptions`]:
    /// [`from_glob_with`](Self::from_glob_with) lists with others.
    pub fn from_glob(pattern: &str) -> Result<Self, PipelineError> {
        Self::from_glob_with(pattern, SourceOptions::default())
    }

    /// [`from_glob`](Self::from_glob), listing with `source` (retries,
    /// timeouts), which the pipeline then reads with too (as if given to
    /// [`source_options`](Self::source_options)).
    pub fn from_glob_with(pattern: &str, source: SourceOptions) -> Result<Self, PipelineError> {
        let files: Vec<String> = list_shards_blocking(pattern, &source)?
            .into_iter()
            .map(|shard| shard.url)
            .collect();
        if files.is_empty() {
            return Err(PipelineError::NoFiles(pattern.to_owned()));
        }
        let described = Source::Glob(pattern.to_owned());
        Ok(Self::with_files(pattern.to_owned(), files, described).source_options(source))
    }

    /// A pipeline over a split of a prepared TensorFlow Datasets directory
    /// (`{data_dir}/{name}[/{config}]/{version}/`, local or gs://, s3://,
    /// az://), read without TensorFlow: `split` is a TFDS split string
    /// (`"train"`, `"train[:80%]"`, `"train[10%:]+test"`, `"train[-1000:]"`,
    /// `"all"`), with TFDS's rounding. The selected shards are read in shard
    /// order, a partly selected shard from its first selected record to its
    /// last; the record counts come from `dataset_info.json`, so
    /// [`equal_batches`](Self::equal_batches) reads nothing to count.
    /// [`tfds_spec`](Self::tfds_spec) gives the spec of the dataset's own
    /// features. Listed and read with the default [`SourceOptions`].
    pub fn from_tfds(dir: &str, split: &str) -> Result<Self, PipelineError> {
        Self::from_tfds_with(dir, split, SourceOptions::default())
    }

    /// [`from_tfds`](Self::from_tfds), reading the dataset's JSON files and
    /// shards with `source` (as [`from_glob_with`](Self::from_glob_with)).
    pub fn from_tfds_with(
        dir: &str,
        split: &str,
        source: SourceOptions,
    ) -> Result<Self, PipelineError> {
        let dataset = TfdsDataset::open_with(dir, &source)?;
        let shards = dataset.select(split)?;
        let files = shards.iter().map(|s| s.url.clone()).collect();
        let described = Source::Tfds {
            dir: dir.to_owned(),
            split: split.to_owned(),
        };
        let mut pipeline =
            Self::with_files(format!("{}[{split}]", dataset.dir()), files, described)
                .source_options(source);
        if shards.iter().any(|s| s.range.is_some()) {
            pipeline.s.ranges = shards
                .iter()
                .map(|s| s.range.map(|(first, count)| RecordRange { first, count }))
                .collect();
        }
        pipeline.s.record_counts = Some(shards.iter().map(|s| s.records).collect());
        pipeline.s.tfds = Some(Arc::new(dataset));
        Ok(pipeline)
    }

    /// The spec of the dataset's own features, for a pipeline made by
    /// [`from_tfds`](Self::from_tfds): `features.json` mapped as
    /// [`crate::tfds::spec_of`] says (an `Image` of static size is decoded
    /// to its `[H, W, C]`; one of unknown size comes as its encoded bytes,
    /// for a spec of your own to give an output size). Parse by it with
    /// `.parse(p.tfds_spec()?)`, or by a subset of it.
    pub fn tfds_spec(&self) -> Result<FeatureSpec, PipelineError> {
        match &self.s.tfds {
            Some(dataset) => Ok(dataset.spec()?),
            None => Err(PipelineError::Config(format!(
                "{}: not a TFDS dataset (tfds_spec needs a pipeline from from_tfds)",
                self.s.source
            ))),
        }
    }

    /// The TFDS dataset the pipeline reads, when made by
    /// [`from_tfds`](Self::from_tfds).
    pub fn tfds(&self) -> Option<&TfdsDataset> {
        self.s.tfds.as_deref()
    }

    fn with_files(source: String, files: Vec<String>, described: Source) -> Self {
        Pipeline {
            d: Description::new(described),
            refused: None,
            s: RecordSettings {
                source,
                files,
                ranges: Vec::new(),
                record_counts: None,
                tfds: None,
                host: None,
                streams: None,
                mixture: None,
                seed: 0,
                ops: ChainSettings::default(),
                read: ReadOptions::default(),
                source_options: SourceOptions::default(),
                workers: std::thread::available_parallelism().map_or(2, |n| n.get()),
                workers_given: false,
                affinity: Default::default(),
                prefetch: 2,
                unordered: false,
                equal_batches: None,
                resume: None,
                skip_steps: Vec::new(),
            },
        }
    }

    /// The seed of every random choice (file order, shuffle buffer). Under
    /// record sharding (see [`shard`](Self::shard)) the file order ignores
    /// it, so hosts may be seeded differently.
    pub fn seed(mut self, seed: u64) -> Self {
        self.d.options.seed = seed;
        self.s.seed = seed;
        self
    }

    /// Reads only this host's part: host `index` of `count`. With at least
    /// `count` files each host reads every `count`-th file of the listing;
    /// with fewer, each reads every file and keeps every `count`-th record
    /// of the interleaved stream, whose file order (with
    /// [`shuffle_files`](Self::shuffle_files)) is then drawn from a seed
    /// shared by all hosts. Either way the parts are disjoint and cover the
    /// data every epoch, whatever each host's [`seed`](Self::seed); the
    /// hosts must agree on the files and the interleave.
    ///
    /// With `count > 1`, a parsed pipeline whose shapes depend on record
    /// lengths (`pad_to_multiple_of` with `max_length`, `bucket_by_length`)
    /// gives every host the same shapes at every step: its length buckets
    /// follow a schedule all hosts compute alike (docs/many-hosts.md).
    pub fn shard(mut self, index: u64, count: u64) -> Self {
        self.d.options.shard = Some((index, count));
        self.s.host = Some((index, count));
        self
    }

    /// Splits the data into `count` logical streams, fixed for the life of
    /// the job, so that its state moves between host counts: each logical
    /// stream is the part [`shard(s, count)`](Self::shard) would give, with
    /// its own file order, interleave, shuffle buffer and seed (derived
    /// from [`seed`](Self::seed), which must then be the same on every
    /// host); host `i` of `n` runs streams `i·count/n .. (i+1)·count/n` and
    /// each step takes `batch / (count/n)` rows from each, in stream order.
    /// So a step's global batch — every host's rows together — is the same
    /// on any host count that divides `count`, and the states of all hosts
    /// ([`merge_states`](super::merge_states)) restore on any such count.
    /// Without it a job has one stream per host and restores on the same
    /// host count only. Shapes follow the shared schedule whenever `count >
    /// 1` (see docs/many-hosts.md).
    pub fn streams(mut self, count: u64) -> Self {
        self.d.options.streams = Some(count);
        self.s.streams = Some(count);
        self
    }

    /// Shuffles the file order, anew each epoch.
    pub fn shuffle_files(self) -> Self {
        self.step(RecordStep::ShuffleFiles {})
    }

    /// Reads `cycle_length` files at once, `block_length` records from each
    /// in turn (each at least 1, checked when the pipeline starts; streams
    /// per host × (`cycle_length` + 1) shard threads at most
    /// [`MAX_SHARD_THREADS`](super::limits::MAX_SHARD_THREADS)).
    pub fn interleave(self, cycle_length: usize, block_length: usize) -> Self {
        self.step(RecordStep::Interleave {
            cycle_length,
            block_length,
        })
    }

    /// Skips the first `n` records of each epoch.
    pub fn skip(self, n: u64) -> Self {
        self.step(RecordStep::Skip { records: n })
    }

    /// Keeps at most `n` records of each epoch.
    pub fn take(self, n: u64) -> Self {
        self.step(RecordStep::Take { records: n })
    }

    /// Keeps only the serialized records for which `keep` is true.
    pub fn filter(mut self, keep: impl Fn(&[u8]) -> bool + Send + Sync + 'static) -> Self {
        self.s.ops.record_map.filter = Some(Arc::new(keep));
        self.d.records.push(RecordStep::Filter(rust_closure()));
        self
    }

    /// Replaces each serialized record by `f(record)`; `f` must be
    /// deterministic (a restore applies it again).
    pub fn map(mut self, f: impl Fn(Bytes) -> Bytes + Send + Sync + 'static) -> Self {
        self.s.ops.record_map.map = Some(Arc::new(f));
        self.d.records.push(RecordStep::Map(rust_closure()));
        self
    }

    /// Reads each epoch's records in a permutation of every record of the
    /// dataset (Grain's global shuffle), through the shards' indexes
    /// (`infeed index`; a shard without one is indexed in memory first, and
    /// a log line says so). The permutation is a pure function of
    /// [`seed`](Self::seed) — which every host must then share — and the
    /// epoch; each host or logical stream takes every `n`-th position of
    /// it, so on any host count every record is read once per epoch, and a
    /// stream's state is the epoch and a count. Takes the place of
    /// [`shuffle_files`](Self::shuffle_files) and
    /// [`interleave`](Self::interleave); a buffer [`shuffle`](Self::shuffle)
    /// may still follow. Each record is a random read: for object stores,
    /// [`global_shuffle_blocks`](Self::global_shuffle_blocks). A plain
    /// local shard's records are read by the workers that assemble them,
    /// through the shard's map, unless a step before the workers needs
    /// their bytes (docs/pipeline.md, "Global shuffle").
    pub fn global_shuffle(self) -> Self {
        self.step(RecordStep::GlobalShuffle { block_bytes: None })
    }

    /// [`global_shuffle`](Self::global_shuffle) by blocks: the records of
    /// each file cut into blocks of about `block_bytes`, the blocks
    /// permuted, each stream's blocks read eight at a time and their
    /// records shuffled among them — reads stay large (for gs://, s3://,
    /// az://) at the cost of a less thorough shuffle (docs/random-access.md
    /// measures both). `block_bytes` 0 is refused when the pipeline starts.
    pub fn global_shuffle_blocks(self, block_bytes: u64) -> Self {
        self.step(RecordStep::GlobalShuffle {
            block_bytes: Some(block_bytes),
        })
    }

    /// Where the shards' indexes are (a local folder or a gs://, s3://,
    /// az:// prefix, as `infeed index --output` wrote them); default: the
    /// folder `.infeed-index` beside the shards (or, for an index written
    /// by a version before it, beside each shard).
    pub fn index_dir(mut self, dir: &str) -> Self {
        self.d.options.index_dir = Some(dir.to_owned());
        self.s.ops.global_shuffle.index_dir = Some(dir.to_owned());
        self
    }

    /// Accepted, and changes nothing: the workers read the records of
    /// every plain local shard by default, wherever no step before them
    /// needs the bytes. Each shard is framed by its index where one is
    /// found (`infeed index`, as [`index_dir`](Self::index_dir) says), else
    /// by a walk of its headers on its first pass and by what the walk
    /// learned on the next (docs/pipeline.md, "Records read by the
    /// workers"). This word once asked for that, building the missing
    /// indexes first, and was refused with the steps that need the bytes;
    /// programs and descriptions that give it still run.
    pub fn worker_reads(self) -> Self {
        self
    }

    /// Shuffles records through a buffer of `buffer` records.
    pub fn shuffle(self, buffer: usize) -> Self {
        self.step(RecordStep::Shuffle { buffer })
    }

    /// Reads the data `epochs` times (`None`: forever; `Some(0)` is refused
    /// when the pipeline starts).
    pub fn repeat(self, epochs: Option<u64>) -> Self {
        self.step(RecordStep::Repeat { epochs })
    }

    /// How shard files are read (compression, CRC checks, corrupt records).
    pub fn read_options(mut self, read: ReadOptions) -> Self {
        self.d.options.read = read.clone();
        self.s.read = read;
        self
    }

    /// How shards are fetched: range size, range reads in flight, retries,
    /// the retry deadline, backoff and request timeouts
    /// ([`SourceOptions`]). Every read of the pipeline uses them: the shard
    /// readers, a restore's reads, the record counts of
    /// [`equal_batches`](Self::equal_batches) and their manifests. (A glob
    /// is listed when the pipeline is made: list it with the same options
    /// through [`from_glob_with`](Self::from_glob_with).) A read that fails
    /// for good reaches the consumer as [`PipelineError::Source`], naming
    /// the shard and the byte.
    pub fn source_options(mut self, source: SourceOptions) -> Self {
        self.d.options.source = source.clone();
        self.s.source_options = source;
        self
    }

    /// Worker threads that parse and assemble batches (default: one per core
    /// the process may run on, or per core of [`cpu_affinity`](Self::cpu_affinity);
    /// 0 is refused when the pipeline starts).
    pub fn threads(mut self, workers: usize) -> Self {
        self.d.options.threads = Some(workers);
        self.s.workers = workers.max(1);
        self.s.workers_given = true;
        self
    }

    /// Keeps every thread of the pipeline on these cores (a CPU budget, so
    /// that a training step's own threads keep the others): the record
    /// threads, the workers and the threads they start pin themselves to
    /// the set. Without [`threads`](Self::threads), one worker per core of
    /// the set. Cores the process may not run on are refused when the
    /// pipeline starts. The I/O runtime of cloud reads (two threads, mostly
    /// waiting) is shared by the process and not pinned by this. Output is
    /// the same under any budget.
    pub fn cpu_affinity(mut self, cores: impl IntoIterator<Item = usize>) -> Self {
        let cores: Vec<usize> = cores.into_iter().collect();
        self.d.options.cpu_affinity = Some(cores.clone());
        self.s.affinity = CpuAffinity::of(cores);
        if !self.s.workers_given {
            self.s.workers = self.s.affinity.cores().map_or(1, |c| c.len().max(1));
        }
        self
    }

    /// Batches prepared ahead of the consumer (default 2; 0 is refused when
    /// the pipeline starts).
    pub fn prefetch(mut self, batches: usize) -> Self {
        self.d.options.prefetch = batches;
        self.s.prefetch = batches.max(1);
        self
    }

    /// Makes every host of [`Pipeline::shard`] emit the same number of
    /// batches over a finite run (`repeat(Some(n))` or none), for every
    /// grouping. Where each batch takes a fixed number of records it counts
    /// the records of every shard when the pipeline is built (from
    /// `infeed convert`'s manifests, else a read of the whole dataset);
    /// where it does not (`filter`, `filter_rows`, buckets, scheduled
    /// across hosts or with batch sizes of their own, `pack`) every host
    /// runs each host's record chain and grouping once on lengths alone,
    /// exactly as the run will: a pass over the whole dataset before the
    /// first batch, and every host must give the same seed. `Pad` keeps
    /// every host's last, partly filled batch whatever `drop_remainder`
    /// says. With `repeat(None)` no host runs dry and it does nothing.
    pub fn equal_batches(mut self, how: EqualBatches) -> Self {
        self.d.options.equal_batches = Some(how);
        self.s.equal_batches = Some(how);
        self
    }

    /// Delivers each batch as soon as a worker finishes it, not in order.
    /// Faster when batch costs vary; the sequence then depends on timing.
    /// A state is that of the longest run of batches delivered in order
    /// ([`Batches::batches_delivered`] counts those): a restore repeats
    /// the few batches delivered ahead of a slower one, and loses none.
    pub fn unordered(mut self) -> Self {
        self.d.options.unordered = true;
        self.s.unordered = true;
        self
    }

    /// Continues from a state taken with [`Batches::state`] of the same
    /// pipeline: the batches that follow are exactly those an uninterrupted
    /// run would have produced.
    pub fn resume_from(mut self, state: &[u8]) -> Self {
        self.s.resume = Some(state.to_vec());
        self
    }

    /// Leaves out the global batches of steps `a..b` (each range `(a, b)`,
    /// `b` not included), counted as an uninterrupted run counts them: the
    /// batches after them come with their own step numbers, identically on
    /// every host (each leaves out its own batch of those steps). Typically
    /// given with [`resume_from`](Self::resume_from) to run on past a loss
    /// spike. The ranges are part of the state, so a later restore keeps
    /// leaving them out (the state's ranges and these together). The steps
    /// left out are still read and assembled (the run must pass their
    /// records to stay exact), not delivered.
    pub fn skip_steps(mut self, ranges: &[(u64, u64)]) -> Self {
        self.d.options.skip_steps.extend_from_slice(ranges);
        self.s.skip_steps.extend_from_slice(ranges);
        self
    }

    /// The pipeline as one value: its source, steps and options (see
    /// [`Description`]). A Rust closure (`filter`, `map`) is named in it
    /// as such, and the description runs only where the closure is.
    pub fn describe(&self) -> Description {
        self.d.clone()
    }

    /// The record-level pipeline `d` describes (a mixture's source, or
    /// the record-level part of a pipeline that parses: see
    /// [`ParsedPipeline::from_description`]). A glob is listed, a TFDS
    /// split read, here. An error names the step: a description of a later
    /// version, one that parses or makes batches, or user code it only
    /// names.
    pub fn from_description(d: &Description) -> Result<Self, PipelineError> {
        Self::from_description_listed(d, &Listed::new())
    }

    /// [`from_description`](Self::from_description), with the files of
    /// the globs in `listed` as listed before (a glob not there is listed
    /// here).
    pub fn from_description_listed(
        d: &Description,
        listed: &Listed,
    ) -> Result<Self, PipelineError> {
        d.check_version()?;
        if d.parse.is_some() || !d.batches.is_empty() {
            return Err(PipelineError::Description(
                "it parses or makes batches: a record-level pipeline takes neither \
                 (ParsedPipeline::from_description runs it whole)"
                    .into(),
            ));
        }
        Self::records_of_description(d, listed)
    }

    /// Every glob of its source with the files it matched (a mixture's
    /// sources' too): what runs its description again without listing
    /// ([`from_description_listed`](Self::from_description_listed)).
    pub fn listed(&self) -> Listed {
        let mut listed = Listed::new();
        match (&self.d.source, &self.s.mixture) {
            (Source::Glob(pattern), _) => {
                listed.insert(pattern.clone(), self.s.files.clone());
            }
            (Source::Mix(mix), Some(settings)) => {
                for (source, (_, s)) in mix.sources.iter().zip(&settings.sources) {
                    if let Source::Glob(pattern) = &source.pipeline.source {
                        listed.insert(pattern.clone(), s.files.clone());
                    }
                }
            }
            _ => {}
        }
        listed
    }

    /// The record-level part of `d`: its source, options and record steps.
    fn records_of_description(d: &Description, listed: &Listed) -> Result<Self, PipelineError> {
        let o = &d.options;
        let mut p = match &d.source {
            Source::Files(files) => Self::from_files(files.iter().cloned())?,
            Source::Glob(pattern) => match listed.get(pattern) {
                Some(files) if !files.is_empty() => {
                    let described = Source::Glob(pattern.clone());
                    Self::with_files(pattern.clone(), files.clone(), described)
                }
                _ => Self::from_glob_with(pattern, o.source.clone())?,
            },
            Source::Tfds { dir, split } => Self::from_tfds_with(dir, split, o.source.clone())?,
            Source::Mix(mix) => {
                let source = |s: &MixSource| {
                    if s.pipeline.parse.is_some() || !s.pipeline.batches.is_empty() {
                        return Err(PipelineError::Config(format!(
                            "mix: source {:?} parses or makes batches; a source takes \
                             record-level steps only (parse, padding and batching go on the \
                             mixture)",
                            s.name
                        )));
                    }
                    let source = Self::from_description_listed(&s.pipeline, listed)?;
                    Ok((s.name.clone(), source))
                };
                let sources = mix
                    .sources
                    .iter()
                    .map(source)
                    .collect::<Result<Vec<_>, _>>()?;
                let mut p = Self::mix(sources, &mix.weights)?
                    .mix_by(mix.by)
                    .on_exhausted(mix.on_exhausted)
                    .mix_by_tokens(mix.by_tokens);
                if let Some(schedule) = &mix.schedule {
                    p = p.mix_schedule(schedule, mix.interpolate);
                }
                if let Some(records) = mix.records_per_step {
                    p = p.mix_records_per_step(records);
                }
                p
            }
        };
        p = p
            .read_options(o.read.clone())
            .source_options(o.source.clone())
            .seed(o.seed)
            .prefetch(o.prefetch)
            .skip_steps(&o.skip_steps);
        if let Some((index, count)) = o.shard {
            p = p.shard(index, count);
        }
        if let Some(count) = o.streams {
            p = p.streams(count);
        }
        if let Some(cores) = &o.cpu_affinity {
            p = p.cpu_affinity(cores.iter().copied());
        }
        if let Some(threads) = o.threads {
            p = p.threads(threads);
        }
        if o.unordered {
            p = p.unordered();
        }
        if let Some(how) = o.equal_batches {
            p = p.equal_batches(how);
        }
        if let Some(dir) = &o.index_dir {
            p = p.index_dir(dir);
        }
        for step in &d.records {
            if let RecordStep::Filter(c) | RecordStep::Map(c) = step {
                return Err(user_code(c));
            }
            p = p.step(step.clone());
        }
        Ok(p)
    }

    /// Applies a record step to the settings and pushes it onto the
    /// description: each step's meaning, in one place.
    fn step(mut self, step: RecordStep) -> Self {
        let ops = &mut self.s.ops;
        match &step {
            RecordStep::ShuffleFiles {} => ops.interleave.shuffle_files = true,
            RecordStep::Interleave {
                cycle_length,
                block_length,
            } => {
                ops.interleave.cycle_length = (*cycle_length).max(1);
                ops.interleave.block_length = (*block_length).max(1);
            }
            RecordStep::Skip { records } => ops.skip_take.skip = *records,
            RecordStep::Take { records } => ops.skip_take.take = Some(*records),
            // User code: applied by `filter` and `map`, which hold it.
            RecordStep::Filter(_) | RecordStep::Map(_) => {}
            RecordStep::GlobalShuffle { block_bytes } => {
                let g = &mut ops.global_shuffle;
                g.on = true;
                g.block_bytes = 0;
                if let Some(bytes) = block_bytes {
                    g.block_bytes = (*bytes).max(1);
                    g.window = global_shuffle::DEFAULT_WINDOW;
                }
            }
            RecordStep::Shuffle { buffer } => {
                ops.shuffle = ShuffleSettings {
                    buffer: *buffer,
                    across_epochs: ops.epochs.repeat.is_some(),
                }
            }
            RecordStep::Repeat { epochs } => ops.epochs.repeat = Some(*epochs),
        }
        self.d.records.push(step);
        self
    }

    /// Cuts batches of `batch_size` serialized records and hands each to
    /// `work` on the worker pool; the base of every other output.
    pub fn build_with<T: Send + 'static>(
        &self,
        batch_size: usize,
        drop_remainder: bool,
        work: BatchFn<T>,
    ) -> Result<Batches<T>, PipelineError> {
        self.check()?;
        limits::positive("batch", batch_size as u64)?;
        limits::at_most("batch", batch_size as u64, limits::MAX_BATCH_ROWS)?;
        start(
            &self.s,
            RecordWork::fixed(batch_size, drop_remainder),
            work,
            Arc::new(StageStats::default()),
        )
    }

    /// Cuts batches of serialized records (no parsing).
    pub fn build_raw(
        &self,
        batch_size: usize,
        drop_remainder: bool,
    ) -> Result<Batches<RawBatch>, PipelineError> {
        self.build_with(batch_size, drop_remainder, Arc::new(Ok))
    }

    /// The pattern or file list the pipeline reads.
    pub fn source(&self) -> &str {
        &self.s.source
    }

    /// The files matched, before host sharding.
    pub fn files(&self) -> &[String] {
        &self.s.files
    }
}

/// A step of user code named in a description run without it.
fn user_code(c: &Callable) -> PipelineError {
    PipelineError::Description(format!(
        "a step runs user code ({:?}), which a description names but does not hold: \
         run it where the code is (the builder that made it)",
        c.callable
    ))
}

/// How a description names a Rust closure.
fn rust_closure() -> Callable {
    Callable {
        callable: RUST_CLOSURE.into(),
    }
}

/// A pipeline that parses its records by a feature spec and assembles
/// static-shape batches.
#[derive(Clone)]
pub struct ParsedPipeline {
    pipeline: Pipeline,
    p: ParsedSettings,
}

impl Pipeline {
    /// Parses each batch of records by `spec`.
    pub fn parse(mut self, spec: FeatureSpec) -> ParsedPipeline {
        self.d.parse = Some(Parse::of(&spec));
        ParsedPipeline {
            pipeline: self,
            p: ParsedSettings {
                spec,
                sequence: None,
                batch_size: None,
                drop_remainder: false,
                length: None,
                masks: None,
                mask_of: Vec::new(),
                cast: None,
                decode: Vec::new(),
                batching: GroupingWords::Rows,
                steps: Vec::new(),
            },
        }
    }
}

impl Pipeline {
    /// Parses each batch of `tf.train.SequenceExample` records by `spec`
    /// (like `tf.io.parse_sequence_example`). Context features become
    /// tensors exactly as [`parse`](Self::parse) makes them. Each feature
    /// list of fixed-shape steps is padded along time like a variable-length
    /// feature: a tensor named after the list, `[batch, time, ..step shape]`
    /// (`[batch, time]` for scalar steps), and `<name>_mask` `[batch, time]`
    /// (1 for a real step, 0 for padding). The padding and batching words of
    /// [`ParsedPipeline`] apply (pad_to_multiple_of, max_length,
    /// fixed_length, truncation, cast, bucket_by_length on a list's step
    /// count, map_batch, filter_rows), all variable-length context features
    /// and feature lists sharing one time length per batch. Feature lists of
    /// ragged steps ([`SequenceSpec::var_len_sequence`]) and
    /// [`pack`](ParsedPipeline::pack) are refused when the pipeline is
    /// built. [`build_columns`](ParsedPipeline::build_columns) gives the
    /// context columns, then the lists' (steps as row splits).
    pub fn parse_sequence(self, spec: SequenceSpec) -> ParsedPipeline {
        let mut parsed = self.parse(spec.context().clone());
        parsed.pipeline.d.parse = Some(Parse::of_sequence(&spec));
        parsed.p.sequence = Some(spec);
        parsed
    }
}

impl ParsedPipeline {
    /// Batches of `batch_size` records (with [`pack`](Self::pack): rows). A
    /// last, smaller batch is dropped with `drop_remainder`; otherwise it
    /// keeps the static shape, filled with fully masked padding rows
    /// ([`Batch::real_rows`] says how many are real).
    pub fn batch(self, batch_size: usize, drop_remainder: bool) -> Self {
        self.step(BatchStep::Batch {
            size: batch_size,
            drop_remainder,
        })
    }

    /// Whether the last, partial batch (of each bucket, with
    /// [`bucket_by_length`](Self::bucket_by_length)) is dropped rather than
    /// padded with masked rows.
    pub fn drop_remainder(self, drop: bool) -> Self {
        self.step(BatchStep::DropRemainder { drop })
    }

    /// Pads every variable-length feature of a batch to the longest row,
    /// rounded up to a multiple of `n`; a `<name>_mask` marks real values.
    /// With buckets, each bucket's length is rounded up to a multiple of `n`.
    pub fn pad_to_multiple_of(self, n: usize) -> Self {
        self.step(BatchStep::PadToMultipleOf { multiple: n })
    }

    /// Caps the padded length at `len`; longer rows follow the truncation
    /// policy (default: an error naming the record). With buckets, the last
    /// bucket is padded to `len`.
    pub fn max_length(self, len: usize) -> Self {
        self.step(BatchStep::MaxLength { length: len })
    }

    /// Pads (or truncates) every variable-length feature to exactly `len`.
    pub fn fixed_length(self, len: usize) -> Self {
        self.step(BatchStep::FixedLength { length: len })
    }

    /// What to do with a row longer than the length cap.
    pub fn truncation(self, truncation: Truncation) -> Self {
        self.step(BatchStep::Truncation { policy: truncation })
    }

    /// The type of every `<name>_mask` (padded and packed features), or
    /// [`MaskType::None`] for no masks. Default [`MaskType::Auto`]: the
    /// feature's integer type (u8 for f32). `MaskType::Type(TensorType::U8)`
    /// writes one byte per position (numpy's and JAX's bool layout), 1/8 of
    /// an i64 mask; see [`MaskType`] for what suits XLA. Part of the
    /// checkpoint's fingerprint: a state saved with other masks is refused.
    pub fn masks(self, mask: MaskType) -> Self {
        self.step(BatchStep::Masks { mask })
    }

    /// The mask of one variable-length `feature`, over
    /// [`masks`](Self::masks): e.g. `.mask("input_ids", MaskType::None)`
    /// where `attention_mask` already marks the real tokens. A fixed-length
    /// or unknown feature is an error when the pipeline is built.
    pub fn mask(self, feature: &str, mask: MaskType) -> Self {
        let feature = feature.to_owned();
        self.step(BatchStep::Mask { feature, mask })
    }

    /// Casts every integer feature to `dtype` (an overflow is an error).
    pub fn cast(self, dtype: TensorType) -> Self {
        self.step(BatchStep::Cast { dtype })
    }

    /// Decodes a fixed-length bytes feature as raw u8 of `shape` per record
    /// (e.g. an image of `[32, 32, 3]`).
    pub fn decode_raw(self, feature: &str, shape: &[usize]) -> Self {
        let (feature, shape) = (feature.to_owned(), shape.to_vec());
        self.step(BatchStep::DecodeRaw { feature, shape })
    }

    /// Emits `feature` (an image, or a fixed-length numeric feature) as
    /// float32 `(x - mean) / std`, computed on the workers: `mean` and `std`
    /// hold one value, or one per channel (the last dimension, e.g. RGB).
    /// Checked when the pipeline is built (a zero std, a list of the wrong
    /// length, a variable-length feature: [`PipelineError::Config`]).
    pub fn normalize(self, feature: &str, mean: &[f32], std: &[f32]) -> Self {
        self.normalize_to(feature, mean, std, TensorType::F32)
    }

    /// [`normalize`](Self::normalize) with the output as `dtype`:
    /// [`TensorType::F32`] or [`TensorType::BF16`] (computed in f32, then
    /// rounded to nearest even: half the bytes for a device that computes
    /// in bfloat16 anyway).
    pub fn normalize_to(self, feature: &str, mean: &[f32], std: &[f32], dtype: TensorType) -> Self {
        self.step(BatchStep::Normalize {
            feature: feature.to_owned(),
            mean: mean.to_vec(),
            std: std.to_vec(),
            dtype,
        })
    }

    /// Makes next-token [`INPUTS`](super::INPUTS) and
    /// [`TARGETS`](super::TARGETS) of the integer token feature `feature`
    /// after packing or padding, so that a training step shifts nothing:
    /// the targets are the tokens, the inputs the tokens shifted right by
    /// one within each segment (a packed row's sequence or piece, a padded
    /// row's values), `bos` first (T5X's and MaxText's convention). With
    /// them [`TARGETS_MASK`](super::TARGETS_MASK) (1 on a real target), and
    /// [`SEGMENT_IDS`](crate::batch::SEGMENT_IDS) and
    /// [`POSITIONS`](crate::batch::POSITIONS), which a padded batch gets
    /// here. `feature` and its mask leave the batch. Checked when the
    /// pipeline is built ([`PipelineError::Config`]: not integer tokens, no
    /// packing and the mask turned off, a name taken).
    pub fn inputs_targets(self, feature: &str, bos: i64) -> Self {
        let feature = feature.to_owned();
        self.step(BatchStep::InputsTargets { feature, bos })
    }

    /// Groups records by the length of `feature` (tf.data's
    /// `bucket_by_sequence_length`, padded to the bucket boundary): bucket
    /// `i` takes lengths in `(boundaries[i-1], boundaries[i]]` and makes
    /// batches of `batch_sizes[i]` rows, every variable-length feature
    /// padded to `boundaries[i]` (rounded up to
    /// [`pad_to_multiple_of`](Self::pad_to_multiple_of)); the last bucket
    /// takes longer rows and pads to [`max_length`](Self::max_length),
    /// longer rows following the truncation policy. So each bucket has one
    /// shape, and [`shapes`](Self::shapes) lists them all.
    ///
    /// A boundary here is the longest length a bucket holds, i.e. tf.data's
    /// boundary minus one: `[64, 128]` here is `bucket_boundaries=[65, 129]`
    /// with `pad_to_bucket_boundary=True` there. A bucket emits a batch as
    /// soon as it is full; at the end of the data each partial bucket gives
    /// a padded batch, in bucket order (or none with
    /// [`drop_remainder`](Self::drop_remainder)). Leave out
    /// [`batch`](Self::batch): the buckets set the batch sizes.
    pub fn bucket_by_length(
        self,
        feature: &str,
        boundaries: &[usize],
        batch_sizes: &[usize],
    ) -> Self {
        self.step(BatchStep::BucketByLength {
            feature: feature.to_owned(),
            boundaries: boundaries.to_vec(),
            batch_sizes: batch_sizes.to_vec(),
        })
    }

    /// Packs the variable-length features of each record end to end into
    /// rows of `row_length` (first fit in arrival order unless
    /// [`pack_strategy`](Self::pack_strategy) says otherwise; see
    /// [`Packer`](crate::batch::Packer)), [`batch`](Self::batch) rows per batch, with
    /// [`SEGMENT_IDS`](crate::batch::SEGMENT_IDS) (1, 2, … per row, 0 on
    /// padding), [`POSITIONS`](crate::batch::POSITIONS) and a
    /// `<feature>_mask` per feature. Every variable-length feature of a
    /// record must have the same length (e.g. `input_ids` and
    /// `attention_mask`); the spec may hold no fixed-length feature. With
    /// `drop_remainder` the last, partly filled batch is dropped.
    pub fn pack(self, row_length: usize) -> Self {
        self.step(BatchStep::Pack { row_length })
    }

    /// What [`pack`](Self::pack) does with a record longer than a row
    /// (default [`Overflow::Error`], naming the file and offset; under
    /// [`PackStrategy::ConcatSplit`], which cuts records at row ends
    /// anyway, `Error` splits).
    pub fn pack_overflow(self, overflow: Overflow) -> Self {
        self.step(BatchStep::PackOverflow { overflow })
    }

    /// How [`pack`](Self::pack) chooses rows (default
    /// [`PackStrategy::FirstFit`]; `BestFit` takes the row a sequence
    /// fills most; `ConcatSplit` lays sequences end to end and cuts them at
    /// row ends, leaving no padding). Every strategy restores exactly and
    /// moves between host counts as first fit does.
    pub fn pack_strategy(self, strategy: PackStrategy) -> Self {
        self.step(BatchStep::PackStrategy { strategy })
    }

    /// At most `segments` sequences (or pieces of one) in a packed row
    /// (0 is refused when the pipeline is built).
    pub fn pack_max_segments(self, segments: usize) -> Self {
        self.step(BatchStep::PackMaxSegments { segments })
    }

    /// Changes the pack settings (a packing of row length 0, refused when
    /// built, if [`pack`](Self::pack) was not called).
    fn packing(&mut self, f: impl FnOnce(&mut usize, &mut Overflow, &mut PackRule)) {
        let (mut row_length, mut overflow, mut rule) = match self.p.batching {
            GroupingWords::Pack {
                row_length,
                overflow,
                rule,
            } => (row_length, overflow, rule),
            _ => (0, Overflow::Error, PackRule::default()),
        };
        f(&mut row_length, &mut overflow, &mut rule);
        self.p.batching = GroupingWords::Pack {
            row_length,
            overflow,
            rule,
        };
    }

    /// Applies a batch step to the settings and pushes it onto the
    /// description: each step's meaning, in one place.
    fn step(mut self, step: BatchStep) -> Self {
        let p = &mut self.p;
        let length = |p: &mut ParsedSettings, f: &dyn Fn(LengthPolicy) -> LengthPolicy| {
            p.length = Some(f(p.length.take().unwrap_or_default()));
        };
        match &step {
            BatchStep::Batch {
                size,
                drop_remainder,
            } => {
                p.batch_size = Some(*size);
                p.drop_remainder = *drop_remainder;
            }
            BatchStep::DropRemainder { drop } => p.drop_remainder = *drop,
            BatchStep::PadToMultipleOf { multiple } => {
                length(p, &|l| l.pad_to_multiple_of(*multiple))
            }
            BatchStep::MaxLength { length: n } => length(p, &|l| l.max_length(*n)),
            BatchStep::FixedLength { length: n } => length(p, &|l| l.fixed_length(*n)),
            BatchStep::Truncation { policy } => length(p, &|l| l.truncation(*policy)),
            BatchStep::Masks { mask } => p.masks = Some(*mask),
            BatchStep::Mask { feature, mask } => p.mask_of.push((feature.clone(), *mask)),
            BatchStep::Cast { dtype } => p.cast = Some(*dtype),
            BatchStep::DecodeRaw { feature, shape } => {
                p.decode.push((feature.clone(), shape.clone()))
            }
            BatchStep::Normalize {
                feature,
                mean,
                std,
                dtype,
            } => p.push(Arc::new(Normalize {
                feature: feature.clone(),
                mean: mean.clone(),
                std: std.clone(),
                dtype: *dtype,
            })),
            BatchStep::InputsTargets { feature, bos } => p.push(Arc::new(InputsTargets {
                feature: feature.clone(),
                bos: *bos,
            })),
            BatchStep::BucketByLength {
                feature,
                boundaries,
                batch_sizes,
            } => {
                p.batching = GroupingWords::Bucket {
                    feature: feature.clone(),
                    boundaries: boundaries.clone(),
                    batch_sizes: batch_sizes.clone(),
                }
            }
            BatchStep::Pack { row_length } => self.packing(|length, _, _| *length = *row_length),
            BatchStep::PackOverflow { overflow } => self.packing(|_, o, _| *o = *overflow),
            BatchStep::PackStrategy { strategy } => {
                self.packing(|_, _, rule| rule.strategy = *strategy)
            }
            BatchStep::PackMaxSegments { segments } => {
                self.packing(|_, _, rule| rule.max_segments = Some(*segments))
            }
            BatchStep::Tokenize {
                feature,
                tokenizer,
                add_bos,
                add_eos,
            } => {
                let op = TokenizeOp::new(feature, tokenizer, *add_bos, *add_eos);
                p.push(Arc::new(op));
            }
            BatchStep::FilterLength { feature, min, max } => {
                p.push(Arc::new(FilterLength::new(feature, *min, *max)))
            }
            // User code: applied by `map_batch` and `filter_rows`, which hold
            // it, or by the face that delivers the batches.
            BatchStep::MapBatch(_) | BatchStep::FilterRows(_) | BatchStep::MapDelivered(_) => {}
        }
        self.pipeline.d.batches.push(step);
        self
    }

    /// The pipeline `d` describes, whole (see
    /// [`Pipeline::from_description`]): it must parse.
    pub fn from_description(d: &Description) -> Result<Self, PipelineError> {
        Self::from_description_listed(d, &Listed::new())
    }

    /// [`from_description`](Self::from_description), with the files of
    /// the globs in `listed` as listed before
    /// ([`Pipeline::from_description_listed`]).
    pub fn from_description_listed(
        d: &Description,
        listed: &Listed,
    ) -> Result<Self, PipelineError> {
        d.check_version()?;
        let Some(parse) = &d.parse else {
            return Err(PipelineError::Description(
                "it has no parse: a ParsedPipeline parses its records (Pipeline::from_description \
                 runs a record-level one)"
                    .into(),
            ));
        };
        let (spec, sequence) = parse.specs()?;
        let records = Pipeline::records_of_description(d, listed)?;
        let mut p = match sequence {
            Some(sequence) => records.parse_sequence(sequence),
            None => records.parse(spec),
        };
        for step in &d.batches {
            if let BatchStep::MapBatch(c) | BatchStep::FilterRows(c) | BatchStep::MapDelivered(c) =
                step
            {
                return Err(user_code(c));
            }
            p = p.step(step.clone());
        }
        p.pipeline.d.output = d.output;
        Ok(p)
    }

    /// The pipeline as one value (see [`Pipeline::describe`]).
    pub fn describe(&self) -> Description {
        self.pipeline.d.clone()
    }

    /// What a face that runs this pipeline's description delivers
    /// ([`Output`]; default tensors): the command line follows it, the
    /// Python package delivers tensors only. In Rust, [`build`](Self::build)
    /// and [`build_columns`](Self::build_columns) choose for themselves.
    pub fn output(mut self, output: Output) -> Self {
        self.pipeline.d.output = output;
        self
    }

    /// Runs `f` on every parsed batch, on the worker pool, before padding,
    /// bucketing or packing (which see its output). `f` must keep the number
    /// of records, treat each record on its own and be deterministic: the
    /// pipeline may call it on other groupings of the same records (see
    /// [`ParsedMap`](super::ParsedMap)).
    pub fn map_batch(
        mut self,
        f: impl Fn(ParsedBatch) -> Result<ParsedBatch, MapError> + Send + Sync + 'static,
    ) -> Self {
        self.p.push(Arc::new(MapStep(Arc::new(f))));
        self.pipeline
            .d
            .batches
            .push(BatchStep::MapBatch(rust_closure()));
        self
    }

    /// Tokenizes the text feature `feature` (bytes: one text per record, or
    /// several, whose ids follow one another) with `tokenizer`, a Hugging
    /// Face `tokenizer.json` or a SentencePiece `.model` at a path or a
    /// gs://, s3://, az:// URL (read once, when the pipeline is built): the
    /// feature becomes a variable-length int32 feature of the token ids,
    /// which every later op (padding, buckets, packing, casts) takes as any
    /// other. `add_bos` / `add_eos` put the tokenizer's beginning- and
    /// end-of-sequence ids around each text ([`Tokenizer`](crate::text::Tokenizer)
    /// says which they are); asking for one the tokenizer lacks is a
    /// [`TokenizerError`](crate::text::TokenizerError) at build. Runs on the
    /// workers with the parsed ops, in builder order; part of the
    /// checkpoint's fingerprint (by the tokenizer's bytes, not its path).
    pub fn tokenize(self, feature: &str, tokenizer: &str, add_bos: bool, add_eos: bool) -> Self {
        self.step(BatchStep::Tokenize {
            feature: feature.to_owned(),
            tokenizer: tokenizer.to_owned(),
            add_bos,
            add_eos,
        })
    }

    /// Keeps only the records whose variable-length `feature` holds from
    /// `min` to `max` values (tokens, after [`tokenize`](Self::tokenize)),
    /// as [`filter_rows`](Self::filter_rows) keeps records, but as data:
    /// it is in the pipeline's [`Description`] (so any face and any machine
    /// runs it) and its bounds in the checkpoint's fingerprint. `min` above
    /// `max` is refused when the pipeline starts.
    pub fn filter_length(self, feature: &str, min: u64, max: u64) -> Self {
        let feature = feature.to_owned();
        self.step(BatchStep::FilterLength { feature, min, max })
    }

    /// Reads what the steps on parsed batches read once (a tokenizer;
    /// clones of the pipeline share it).
    fn load_tokenizers(&self) -> Result<(), PipelineError> {
        for step in &self.p.steps {
            step.load(&self.pipeline.s.source_options)?;
        }
        Ok(())
    }

    /// Keeps only the parsed records for which `keep(batch, row)` is true.
    /// It runs on a pool of threads before records are grouped, so batches
    /// stay full and static in shape; `keep` must look at record `row`
    /// alone and be deterministic. Records are then parsed twice (once to
    /// filter, once to assemble).
    pub fn filter_rows(
        mut self,
        keep: impl Fn(&ParsedBatch, usize) -> bool + Send + Sync + 'static,
    ) -> Self {
        self.p.push(Arc::new(FilterStep(Arc::new(keep))));
        self.pipeline
            .d
            .batches
            .push(BatchStep::FilterRows(rust_closure()));
        self
    }

    /// Continues from a state taken with [`Batches::state`] of the same
    /// pipeline (see [`Pipeline::resume_from`]).
    pub fn resume_from(mut self, state: &[u8]) -> Self {
        self.pipeline = self.pipeline.resume_from(state);
        self
    }

    /// Leaves out the global batches of these steps (see
    /// [`Pipeline::skip_steps`]).
    pub fn skip_steps(mut self, ranges: &[(u64, u64)]) -> Self {
        self.pipeline = self.pipeline.skip_steps(ranges);
        self
    }

    /// The parts the data is split into: the logical streams, else the
    /// hosts (`shard(i, n)`: n). With more than one, length-dependent
    /// shapes follow the shared schedule.
    fn hosts(&self) -> u64 {
        let s = &self.pipeline.s;
        // A mixture is sharded on itself, or as its sources are (alike).
        let host = match &s.mixture {
            Some(m) if s.host.is_none() => m.sources.first().and_then(|(_, s)| s.host),
            _ => s.host,
        };
        s.streams.unwrap_or_else(|| host.map_or(1, |(_, n)| n))
    }

    /// Every shape a batch of this pipeline can have, known before the
    /// first batch, so an XLA program can be compiled for each ahead of time.
    pub fn shapes(&self) -> Result<Vec<BatchShape>, PipelineError> {
        self.pipeline.check()?;
        self.p.shapes(self.hosts())
    }

    /// Starts the pipeline: static-shape, 64-byte aligned batches whose
    /// buffers return to a pool when dropped.
    pub fn build(&self) -> Result<Batches<Batch>, PipelineError> {
        self.pipeline.check()?;
        self.load_tokenizers()?;
        let stats = Arc::new(StageStats::default());
        let (grouping, work) = self.p.batches(
            self.hosts(),
            self.pipeline.s.seed,
            self.worker_skips(&stats),
        )?;
        let mut batches = start(&self.pipeline.s, grouping, work, stats)?;
        batches.provenance_of = Some(|b: &Batch| (b.rows(), b.provenance.clone()));
        Ok(batches)
    }

    /// The records of global steps `steps`: for each, every host's rows of
    /// the job in global-batch order (host 0's first; with logical
    /// streams, stream 0's first), each row its records' (file, byte
    /// offset), none for a padding row, a packed row its sequences — the
    /// rows [`Batch::positions`] gives at those steps on every host. Found
    /// on this machine from this pipeline (any host's), from its state
    /// ([`resume_from`](Self::resume_from): merged states of every host,
    /// or one host's when each host is one stream) or the start, by
    /// running every stream's record ops and grouping up to the last step
    /// asked for, nothing parsed or assembled. Records left out on the
    /// workers (an image that does not decode, under the skip policy) are
    /// listed.
    pub fn records_of(
        &self,
        steps: &[u64],
    ) -> Result<std::collections::BTreeMap<u64, Vec<super::RowRecords>>, PipelineError> {
        self.pipeline.check()?;
        self.load_tokenizers()?;
        let (record, _) = self.p.batches(self.hosts(), self.pipeline.s.seed, None)?;
        super::records_of::records_of(&self.pipeline.s, record, steps)
    }

    /// Where the workers count the records they skip (a corrupt image),
    /// under the skip policy; `None` when such a record is an error.
    fn worker_skips(&self, stats: &Arc<StageStats>) -> Option<Arc<StageStats>> {
        (self.pipeline.s.read.on_corrupt == CorruptPolicy::Skip).then(|| stats.clone())
    }

    /// Starts the pipeline, giving the parsed columns as they are (ragged
    /// features as values plus row splits), without padding or assembly;
    /// parsed ops apply. Not with buckets or packing, whose batches only
    /// exist assembled. Give each batch back with
    /// [`Batches::recycle`] once done with it, and the next batches are
    /// parsed into its buffers instead of fresh memory.
    pub fn build_columns(&self) -> Result<Batches<ParsedBatch>, PipelineError> {
        self.pipeline.check()?;
        self.load_tokenizers()?;
        let stats = Arc::new(StageStats::default());
        let skips = self.worker_skips(&stats);
        let (grouping, work, pool) = self.p.columns(self.pipeline.s.seed, skips)?;
        let mut batches = start(&self.pipeline.s, grouping, work, stats)?;
        batches.recycler = Some(Arc::new(move |batch| pool.give(batch)));
        Ok(batches)
    }
}
