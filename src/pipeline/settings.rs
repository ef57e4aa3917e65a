//! Everything the user said about the record-level pipeline, as the builder
//! collected it: read by `start.rs`, which starts the threads, and by the
//! counting that `equal_batches` does first.

use std::sync::Arc;

use super::ops::mix::{MixChoice, OnExhausted};
use super::ops::{LengthScan, RecordFilter, RecordMap, RecordRange, StreamConfig};
use super::rng::{self, CounterRng};
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
    /// batch is kept); hosts that run out send fully masked padding batches
    /// (`real_rows == 0`).
    Pad,
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
    pub shuffle_files: bool,
    pub cycle_length: usize,
    pub block_length: usize,
    pub skip: u64,
    pub take: Option<u64>,
    pub filter: Option<RecordFilter>,
    pub map: Option<RecordMap>,
    pub shuffle_buffer: usize,
    pub repeat: Option<Option<u64>>,
    pub repeat_before_shuffle: bool,
    pub read: ReadOptions,
    /// How shards are listed and fetched (retries, timeouts, range size).
    pub source_options: SourceOptions,
    pub workers: usize,
    pub prefetch: usize,
    pub unordered: bool,
    pub equal_batches: Option<EqualBatches>,
    pub resume: Option<Vec<u8>>,
}

/// The sources and weights of a mixture, as the builder collected them.
#[derive(Clone)]
pub(crate) struct MixSettings {
    /// (name, the source's record-level settings), in the order given.
    pub sources: Vec<(String, RecordSettings)>,
    pub weights: Vec<f64>,
    pub choice: MixChoice,
    pub on_exhausted: OnExhausted,
}

impl MixSettings {
    pub fn names(&self) -> Vec<String> {
        self.sources.iter().map(|(n, _)| n.clone()).collect()
    }

    /// True when the mixture ends: with `Stop` or `Fail` when a source does,
    /// with `Drop` when all do.
    pub fn finite(&self) -> bool {
        let ends = |s: &RecordSettings| s.repeat != Some(None);
        match self.on_exhausted {
            OnExhausted::Drop => self.sources.iter().all(|(_, s)| ends(s)),
            OnExhausted::Stop | OnExhausted::Fail => self.sources.iter().any(|(_, s)| ends(s)),
        }
    }

    /// The same mixture as host `index` of the same host count runs it.
    pub fn on_host(&self, index: u64) -> MixSettings {
        let mut mix = self.clone();
        for (_, s) in &mut mix.sources {
            s.host = s.host.map(|(_, n)| (index, n));
        }
        mix
    }
}

impl RecordSettings {
    /// The record ops' settings of logical stream `index` of `streams`: the
    /// part `shard(index, streams)` gives (by file with at least as many files
    /// as streams, else by record), seeded by the pipeline's seed — derived per
    /// stream when the job sets its streams, so that streams never share draws.
    /// The shard readers measure records with `scan`, unless a record map
    /// changes them after.
    pub fn stream_config(
        &self,
        index: u64,
        streams: u64,
        scan: Option<&LengthScan>,
    ) -> Arc<StreamConfig> {
        let p = self;
        let (files, ranges, record_shard) = if streams == 1 {
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
            Some(_) => CounterRng::new(p.seed, rng::stream::LOGICAL_STREAMS, index).next_u64(),
            None => p.seed,
        };
        let file_order_seed = match record_shard {
            Some(_) => SHARED_FILE_ORDER_SEED,
            None => seed,
        };
        Arc::new(StreamConfig {
            files,
            ranges,
            read: p.read.clone(),
            source: p.source_options.clone(),
            seed,
            file_order_seed,
            shuffle_files: p.shuffle_files,
            cycle_length: p.cycle_length.max(1),
            block_length: p.block_length.max(1),
            record_shard,
            skip: p.skip,
            take: p.take,
            filter: p.filter.clone(),
            map: p.map.clone(),
            scan: scan.filter(|_| p.map.is_none()).cloned(),
            shuffle_buffer: p.shuffle_buffer,
            shuffle_across_epochs: p.repeat_before_shuffle,
            epochs: match p.repeat {
                None => Some(1),
                Some(epochs) => epochs,
            },
        })
    }
}
