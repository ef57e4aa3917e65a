//! What will run: the record ops' settings with the host's files, the
//! grouping, the fingerprint of what decides the sequence; [`start`]
//! checks them once, restores a state if there is one and starts the
//! threads.

use std::sync::Arc;

use super::batches::{Batches, ExecConfig};
use super::checkpoint::{self, Snapshot};
use super::counts;
use super::error::PipelineError;
use super::group::plan::{
    BatchFn, EqualBatches, GroupMode, Layout, MeasureFn, PrefilterFn, RawBatch,
};
use super::group::schedule::{SAMPLE_FILES, SAMPLE_PER_FILE, Schedule, TAIL_STEPS};
use super::ops::Item;
use super::ops::chain::RecordChain;
use super::ops::{RecordFilter, RecordMap, StreamConfig, StreamState};
use super::stats::StageStats;
use super::threads::record_thread::RecordThread;
use super::threads::shard_reader::first_records;
use crate::batch::Bucketer;
use crate::record::ReadOptions;
use crate::source::SourceOptions;

/// Records per chunk that the prefilter threads parse for `filter_rows`.
const PREFILTER_CHUNK: usize = 256;

/// Seed of the file order under record sharding, the same on every host:
/// a host keeps records by their ordinal in the interleaved stream, so
/// hosts with different seeds (`seed(host_index)`) would otherwise own
/// overlapping records. 0 is the default seed, so pipelines seeded 0 read
/// the order they always did.
const SHARED_FILE_ORDER_SEED: u64 = 0;

/// Everything the user said about the record-level pipeline, as the
/// builder collected it.
#[derive(Clone)]
pub(crate) struct RecordSettings {
    pub source: String,
    pub files: Vec<String>,
    pub host: Option<(u64, u64)>,
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

/// How a pipeline groups its records, with what the record thread needs.
pub(crate) struct Grouping {
    pub mode: GroupMode,
    pub measure: Option<MeasureFn>,
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

/// Starts the threads: records grouped as `grouping` says, each group
/// handed to `work` on the worker pool.
pub(crate) fn start<T: Send + 'static>(
    p: &RecordSettings,
    grouping: Grouping,
    work: BatchFn<T>,
) -> Result<Batches<T>, PipelineError> {
    if let Some((index, count)) = p.host {
        if count == 0 || index >= count {
            return Err(PipelineError::Config(format!("host {index} of {count}")));
        }
    }
    let (files, record_shard) = match p.host {
        Some((index, count)) if p.files.len() as u64 >= count => {
            let mine = p
                .files
                .iter()
                .skip(index as usize)
                .step_by(count as usize)
                .cloned()
                .collect();
            (mine, None)
        }
        Some(host) => (p.files.clone(), Some(host)),
        None => (p.files.clone(), None),
    };
    let file_order_seed = match record_shard {
        Some(_) => SHARED_FILE_ORDER_SEED,
        None => p.seed,
    };
    let cfg = Arc::new(StreamConfig {
        files: files.clone(),
        read: p.read.clone(),
        source: p.source_options.clone(),
        seed: p.seed,
        file_order_seed,
        shuffle_files: p.shuffle_files,
        cycle_length: p.cycle_length.max(1),
        block_length: p.block_length.max(1),
        record_shard,
        skip: p.skip,
        take: p.take,
        filter: p.filter.clone(),
        map: p.map.clone(),
        shuffle_buffer: p.shuffle_buffer,
        shuffle_across_epochs: p.repeat_before_shuffle,
        epochs: match p.repeat {
            None => Some(1),
            Some(epochs) => epochs,
        },
    });
    let mut grouping = grouping;
    let total_batches = match &grouping.mode {
        GroupMode::Fixed {
            batch_size,
            drop_remainder,
        } if grouping.prefilter.is_none() => total_batches(p, *batch_size, *drop_remainder)?,
        GroupMode::Scheduled {
            bucketer,
            drop_remainder,
            ..
        } if !grouping.parsed_ops.contains('f') && one_batch_size(bucketer).is_some() => {
            let batch_size = one_batch_size(bucketer).unwrap_or(1);
            total_batches(p, batch_size, *drop_remainder)?
        }
        _ if p.equal_batches.is_some() && p.repeat != Some(None) => {
            return Err(PipelineError::Config(
                "equal_batches cannot be combined with bucket_by_length (with batch sizes \
                 per bucket), pack or filter_rows, whose batch counts are unknown in advance"
                    .into(),
            ));
        }
        _ => None,
    };
    if let GroupMode::Scheduled {
        bucketer, schedule, ..
    } = &mut grouping.mode
    {
        let counts = sample_buckets(p, &grouping.measure, &grouping.prefilter, bucketer)?;
        let sizes: Vec<usize> = (0..bucketer.num_buckets())
            .map(|b| bucketer.batch_size(b))
            .collect();
        let mut planned = Schedule::new(shared_seed(&p.files), &counts, &sizes);
        if let Some(total) = total_batches {
            planned = planned.with_tail_from(total.saturating_sub(TAIL_STEPS));
        }
        *schedule = Some(Arc::new(planned));
    }
    let shape_schedule = match &grouping.mode {
        GroupMode::Scheduled {
            bucketer,
            schedule: Some(schedule),
            ..
        } => {
            let (seed, shares, tail) = schedule.key();
            let mut key: Vec<u64> = vec![seed, tail.map_or(u64::MAX, |t| t)];
            key.extend_from_slice(shares);
            key.extend((0..bucketer.num_buckets()).map(|b| bucketer.batch_size(b) as u64));
            key.extend(
                (0..bucketer.num_buckets())
                    .filter_map(|b| bucketer.pad_to(b))
                    .map(|b| b as u64),
            );
            let bytes: Vec<u8> = key.iter().flat_map(|v| v.to_le_bytes()).collect();
            xxhash_rust::xxh3::xxh3_64(&bytes)
        }
        _ => 0,
    };
    let fingerprint = checkpoint::SequenceKey {
        files: &files,
        host: p.host,
        seed: p.seed,
        file_order_seed: (p.shuffle_files && file_order_seed != p.seed).then_some(file_order_seed),
        shuffle_files: p.shuffle_files,
        cycle_length: cfg.cycle_length as u64,
        block_length: cfg.block_length as u64,
        skip: p.skip,
        take: p.take,
        record_filter: p.filter.is_some(),
        record_map: p.map.is_some(),
        shuffle_buffer: p.shuffle_buffer as u64,
        epochs: cfg.epochs,
        shuffle_across_epochs: cfg.shuffle_across_epochs,
        equal_batches: p.equal_batches,
        grouping: &grouping.mode,
        length_feature: grouping.length_feature.as_deref(),
        parsed_ops: &grouping.parsed_ops,
        masks: &grouping.masks,
    }
    .fingerprint();
    let read_stats = Arc::new(StageStats::default());
    let stream_stats = Arc::new(StageStats::default());
    let (stream, snapshot, batches_before) = match &p.resume {
        None => {
            let stream = RecordChain::new(cfg, read_stats.clone(), stream_stats.clone())?;
            let snapshot = Snapshot {
                stream: Arc::new(stream.state()),
                ..Snapshot::default()
            };
            (stream, snapshot, 0)
        }
        Some(bytes) => {
            let (snapshot, batches) = checkpoint::decode(bytes, fingerprint)?;
            checkpoint::check_replay(
                &snapshot,
                batches,
                &grouping.mode,
                files.len(),
                total_batches,
            )?;
            let stream = RecordChain::restore(
                cfg,
                read_stats.clone(),
                stream_stats.clone(),
                StreamState::clone(&snapshot.stream),
            )?;
            (stream, snapshot, batches)
        }
    };
    let replay = stream.read_again(&snapshot.replay)?.into();
    let records = RecordThread {
        chain: stream,
        files: Arc::new(files),
        mode: grouping.mode,
        measure: grouping.measure,
        prefilter: grouping.prefilter,
        replay,
        replay_skip: usize::try_from(snapshot.replay_skip).unwrap_or(usize::MAX),
        replay_quiet: usize::try_from(snapshot.replay_quiet).unwrap_or(usize::MAX),
        first_batch: batches_before,
        ahead_error: None,
        workers: p.workers,
        chunk: PREFILTER_CHUNK,
        limit: total_batches.map(|n| n.saturating_sub(batches_before)),
    };
    let exec = ExecConfig {
        workers: p.workers,
        prefetch: p.prefetch,
        batches_before,
        unordered: p.unordered,
        read: p.read.clone(),
        source: p.source_options.clone(),
    };
    let mut batches = Batches::start(
        records,
        snapshot,
        read_stats,
        stream_stats,
        exec,
        work,
        fingerprint,
    );
    batches.shape_schedule = shape_schedule;
    Ok(batches)
}

/// The batch size of every bucket, when they all have the same.
fn one_batch_size<T>(bucketer: &Bucketer<T>) -> Option<usize> {
    let first = bucketer.batch_size(0);
    (1..bucketer.num_buckets())
        .all(|b| bucketer.batch_size(b) == first)
        .then_some(first)
}

/// A seed every host derives alike: from the names of all the pipeline's
/// files (not their folders, which may be mounted elsewhere on each host),
/// never from settings a host may choose for itself (`seed(host_index)`).
fn shared_seed(files: &[String]) -> u64 {
    let mut names = String::new();
    for file in files {
        names.push_str(file.rsplit('/').next().unwrap_or(file));
        names.push('\n');
    }
    xxhash_rust::xxh3::xxh3_64(names.as_bytes())
}

/// How the records of a sample, the same on every host, spread over the
/// buckets: the first records of a few files spread over the whole file
/// list (every host can read every file), measured as the grouping
/// measures them.
fn sample_buckets(
    p: &RecordSettings,
    measure: &Option<MeasureFn>,
    prefilter: &Option<PrefilterFn>,
    bucketer: &Bucketer<Item>,
) -> Result<Vec<u64>, PipelineError> {
    let last = bucketer.num_buckets() - 1;
    let mut counts = vec![0u64; last + 1];
    let n = p.files.len();
    let picked = n.min(SAMPLE_FILES);
    let mut files: Vec<usize> = (0..picked).map(|i| i * n / picked).collect();
    files.dedup();
    for index in files {
        let records = first_records(&p.files[index], SAMPLE_PER_FILE, &p.read, &p.source_options)?;
        let items: Vec<Item> = records
            .into_iter()
            .map(|r| Item::new(r.data, index as u32, r.offset))
            .collect();
        let lengths: Vec<Option<usize>> = match (measure, prefilter) {
            // A record the sample cannot measure is left out of it: the
            // pipeline reports it, with its file and offset, when it gets there.
            (Some(measure), _) => items.iter().map(|i| measure(i).ok()).collect(),
            (None, Some(prefilter)) => prefilter(&RawBatch {
                records: items.iter().map(|i| i.data.clone()).collect(),
                provenance: items.iter().map(|i| (i.file, i.offset)).collect(),
                files: Arc::new(p.files.clone()),
                layout: Layout::Rows,
                number: 0,
            })
            .unwrap_or_default(),
            (None, None) => Vec::new(),
        };
        for len in lengths.into_iter().flatten() {
            counts[bucketer.bucket_of(len).min(last)] += 1;
        }
    }
    Ok(counts)
}

/// With [`Pipeline::equal_batches`]: how many batches every host emits.
fn total_batches(
    p: &RecordSettings,
    batch_size: usize,
    drop_remainder: bool,
) -> Result<Option<u64>, PipelineError> {
    let Some(how) = p.equal_batches else {
        return Ok(None);
    };
    let epochs = match p.repeat {
        None => 1,
        Some(Some(n)) => n,
        Some(None) => return Ok(None),
    };
    if p.filter.is_some() {
        return Err(PipelineError::Config(
            "equal_batches cannot be combined with filter".into(),
        ));
    }
    let counts = counts::count_records(&p.files, &p.read, &p.source_options)?;
    let (index_count, total): (u64, u64) = (p.host.map_or(1, |(_, n)| n), counts.iter().sum());
    let per_host: Vec<u64> = (0..index_count)
        .map(|i| {
            let records = if counts.len() as u64 >= index_count {
                counts
                    .iter()
                    .skip(i as usize)
                    .step_by(index_count as usize)
                    .sum()
            } else {
                (total + index_count - 1 - i) / index_count
            };
            let epoch = records
                .saturating_sub(p.skip)
                .min(p.take.unwrap_or(u64::MAX));
            epoch * epochs
        })
        .collect();
    let b = batch_size as u64;
    Ok(Some(match how {
        EqualBatches::Drop => per_host.iter().map(|r| r / b).min().unwrap_or(0),
        EqualBatches::Pad if drop_remainder => per_host.iter().map(|r| r / b).max().unwrap_or(0),
        EqualBatches::Pad => per_host.iter().map(|r| r.div_ceil(b)).max().unwrap_or(0),
    }))
}
