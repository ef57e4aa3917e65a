//! Everything the user said about the record-level pipeline, as the builder
//! collected it: read by `start.rs`, which starts the threads, and by the
//! counting that `equal_batches` does first.

use std::sync::Arc;

use super::checkpoint::Identity;
use super::error::PipelineError;
use super::item::LengthScan;
use super::loaded::Loaded;
use super::ops::chain::{ChainConfig, ChainSettings};
use super::ops::interleave::{RecordRange, StreamFiles};
use super::ops::mix::{MixChoice, OnExhausted};
use super::ops::mix_schedule::MixSchedule;
use super::read::kept::{KEPT_BYTES, Kept};
use super::rng::{CounterRng, domain};
use super::threads::affinity::CpuAffinity;
use crate::record::ReadOptions;
use crate::source::SourceOptions;
use crate::tfds::TfdsDataset;

/// Seed of the file order under record sharding, the same on every host:
/// a host keeps records by their ordinal in the interleaved stream, so
/// hosts with different seeds (`seed(host_index)`) would otherwise own
/// overlapping records. 0 is the default seed, so pipelines seeded 0 read
/// the order they always did.
const SHARED_FILE_ORDER_SEED: u64 = 0;

/// How hosts reading disjoint parts of the data come to emit the same number
/// of batches, so that an SPMD step never waits on a host that ran dry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EqualBatches {
    /// Every host stops after as many full batches as the poorest host has.
    Drop,
    /// Every host emits as many batches as the richest host (a last partial
    /// batch is kept, whatever `drop_remainder` says: every record is
    /// delivered); hosts that run out send fully masked padding batches
    /// (`real_rows == 0`).
    Pad,
}

impl crate::words::Words for EqualBatches {
    const SETTING: &'static str = "equal_batches";
    const WORDS: &'static [crate::words::Word<Self>] = &[
        (&["drop"], EqualBatches::Drop),
        (&["pad"], EqualBatches::Pad),
    ];
}

impl std::str::FromStr for EqualBatches {
    type Err = crate::words::UnknownWord;

    /// `drop` or `pad`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        crate::words::read(s)
    }
}

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
    /// A mixture's sources and weights (`Pipeline::mix`).
    pub mixture: Option<Arc<MixSettings>>,
    pub seed: u64,
    /// The record ops' words, each op's own.
    pub ops: ChainSettings,
    pub read: ReadOptions,
    /// How shards are listed and fetched (retries, timeouts, range size).
    pub source_options: SourceOptions,
    pub workers: usize,
    /// `threads(n)` was called (else `cpu_affinity` sets the workers to its
    /// core count).
    pub workers_given: bool,
    /// The cores the pipeline's threads may run on (`cpu_affinity`).
    pub affinity: CpuAffinity,
    pub prefetch: usize,
    pub unordered: bool,
    pub equal_batches: Option<EqualBatches>,
    pub resume: Option<Vec<u8>>,
    /// Global steps left out, `[a, b)` each (`skip_steps`).
    pub skip_steps: Vec<(u64, u64)>,
}

/// The sources and weights of a mixture, as the builder collected them.
#[derive(Clone)]
pub(crate) struct MixSettings {
    /// (name, the source's record-level settings), in the order given.
    pub sources: Vec<(String, RecordSettings)>,
    pub weights: Vec<f64>,
    pub choice: MixChoice,
    pub on_exhausted: OnExhausted,
    /// Weights that change with the step, and the records a host's batch
    /// takes when its grouping does not say (`mix_schedule.rs`).
    pub schedule: Option<MixSchedule>,
    pub records_per_step: Option<u64>,
    /// Weights count tokens (the length the grouping measures; each
    /// source's mean tokens per record is measured at the start:
    /// [`Loaded::token_means`]).
    pub by_tokens: bool,
}

impl MixSettings {
    pub fn names(&self) -> Vec<String> {
        self.sources.iter().map(|(n, _)| n.clone()).collect()
    }

    /// True when the mixture ends: with `Stop` or `Fail` when a source does,
    /// with `Drop` when all do.
    pub fn finite(&self) -> bool {
        let ends = |s: &RecordSettings| !s.ops.epochs.endless();
        match self.on_exhausted {
            OnExhausted::Drop => self.sources.iter().all(|(_, s)| ends(s)),
            OnExhausted::Stop | OnExhausted::Fail => self.sources.iter().any(|(_, s)| ends(s)),
        }
    }
}

impl RecordSettings {
    /// What the ops read once per pipeline, before the job is placed: the
    /// global shuffle's indexes (a mixture's sources' too); and where the
    /// small shards of a pipeline that reads its files more than once are
    /// kept (one room for a mixture's sources).
    pub fn load(&self) -> Result<Loaded, PipelineError> {
        self.load_keeping(&Arc::new(Kept::new(KEPT_BYTES)))
    }

    fn load_keeping(&self, kept: &Arc<Kept>) -> Result<Loaded, PipelineError> {
        let dataset = self.ops.global_shuffle.load(
            &self.files,
            &self.ranges,
            &self.read,
            &self.source_options,
        )?;
        let sources = match &self.mixture {
            Some(mix) => mix
                .sources
                .iter()
                .map(|(_, source)| source.load_keeping(kept))
                .collect::<Result<_, _>>()?,
            None => Vec::new(),
        };
        let more_than_once = self.ops.epochs.epochs() != Some(1);
        Ok(Loaded {
            dataset,
            sources,
            kept: more_than_once.then(|| kept.clone()),
            ..Loaded::default()
        })
    }

    /// The record ops' settings of logical stream `index` of `streams`: the
    /// part `shard(index, streams)` gives (by file with at least as many files
    /// as streams, else by record; every file, when the ops share records out
    /// by position), seeded by the pipeline's seed — derived per stream when
    /// the job sets its streams, so that streams never share draws.
    /// The shard readers measure records with `scan`, unless a record map
    /// changes them after; the ops read with what was `loaded` at the start.
    pub fn stream_config(
        &self,
        index: u64,
        streams: u64,
        scan: Option<&LengthScan>,
        loaded: &Loaded,
    ) -> ChainConfig {
        let p = self;
        let (files, ranges, record_shard) = if streams == 1 || p.ops.shares_by_position() {
            (p.files.clone(), p.ranges.clone(), None)
        } else if p.files.len() as u64 >= streams {
            // A file's record range (a TFDS slice) goes with it.
            let mine = |i: &usize| *i as u64 % streams == index;
            let files = (0..p.files.len())
                .filter(mine)
                .map(|i| p.files[i].clone())
                .collect();
            let ranges = (0..p.ranges.len())
                .filter(mine)
                .map(|i| p.ranges[i])
                .collect();
            (files, ranges, None)
        } else {
            (p.files.clone(), p.ranges.clone(), Some((index, streams)))
        };
        let seed = match p.streams {
            Some(_) => CounterRng::new(p.seed, domain::LOGICAL_STREAMS, index).next_u64(),
            None => p.seed,
        };
        let map = p.ops.record_map.map.is_some();
        ChainConfig {
            ops: p.ops.clone(),
            files: Arc::new(StreamFiles {
                files,
                ranges,
                read: p.read.clone(),
                source: p.source_options.clone(),
                scan: scan.filter(|_| !map).cloned(),
                unread: loaded.unread.clone(),
                spans: loaded.spans.clone(),
                kept: loaded.kept.clone(),
                order_seed: record_shard.map(|_| SHARED_FILE_ORDER_SEED),
            }),
            seed,
            record_shard,
            place: (index, streams),
            job_seed: p.seed,
            dataset: loaded.dataset.clone(),
        }
    }
}

/// A logical stream's own entry in its fingerprint, after its steps': its
/// place among the hosts or streams (when the job has several), the
/// equal-batches policy, and the stream count when the job sets it (its
/// seeds are then derived, and its state moves between host counts).
pub(crate) fn stream_identity(
    id: &mut Identity,
    place: Option<(u64, u64)>,
    equal: Option<EqualBatches>,
    streams: Option<u64>,
) {
    let mut w = id.step("stream");
    match place {
        None => w.bool(false),
        Some((index, count)) => w.bool(true).u64(index).u64(count),
    };
    w.u64(match equal {
        None => 0,
        Some(EqualBatches::Drop) => 1,
        Some(EqualBatches::Pad) => 2,
    });
    w.opt(streams);
}
