//! Equal batch counts ([`Pipeline::equal_batches`](super::Pipeline::equal_batches)):
//! how many batches every logical stream, so every host, emits in a finite
//! run. Where each batch takes a fixed number of records, the records'
//! counts say it ([`from_counts`]). Where it does not — buckets (scheduled
//! across hosts too: a step is cut only when its bucket fills), packing,
//! `filter_rows` — every host runs each
//! stream's record chain and grouping once on lengths alone
//! ([`from_grouping`]): the very code the run uses, so the count is exact,
//! at the cost of one pass over the data before the first batch (as a count
//! by reading is for shards without a manifest).

use std::sync::Arc;

use crate::batch::Bucketer;

use super::counts;
use super::error::PipelineError;
use super::group::Grouper;
use super::group::grouping::{Grouping, RecordWork, length_of};
use super::group::raw_batch::RawBatch;
use super::group::schedule::Schedule;
use super::item::Item;
use super::loaded::Loaded;
use super::ops::stream_chain::StreamChain;
use super::read::in_workers::{ReadChecks, WorkerReads};
use super::settings::{EqualBatches, RecordSettings};
use super::threads::{prefilter, spawn_scoped};

/// Records a stream's grouping simulation hands to the prefilter at once.
const CHUNK: usize = 256;

/// How a finite run with equal batch counts ends: the batches every
/// stream emits and, with scheduled buckets, the step from which every
/// step takes the last bucket (the schedule's tail).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct EqualEnd {
    pub batches: u64,
    pub tail_from: Option<u64>,
}

/// How many batches every stream emits when the counts of records do not
/// say: each of the `streams` streams (`open(s)`: its chain, or a host's
/// mixture, and its files) is run once through its grouping (`record`: one
/// stream's), as the run will, counting its batches; the poorest stream's
/// count (`Drop`) or the richest's (`Pad`) is everyone's. Scheduled buckets
/// end as [`scheduled_end`] says.
pub(crate) fn from_grouping(
    p: &RecordSettings,
    streams: u64,
    record: &RecordWork,
    reads: &ReadChecks,
    open: impl Fn(u64) -> Result<(StreamChain, Vec<String>), PipelineError> + Sync,
) -> Result<Option<EqualEnd>, PipelineError> {
    let Some(how) = p.equal_batches else {
        return Ok(None);
    };
    let parallel = std::thread::available_parallelism().map_or(2, |n| n.get());
    let mut runs = Vec::with_capacity(streams as usize);
    let indexes: Vec<u64> = (0..streams).collect();
    for chunk in indexes.chunks(parallel) {
        let found: Vec<Result<StreamRun, PipelineError>> = std::thread::scope(|scope| {
            let handles: Vec<_> = chunk
                .iter()
                .map(|&s| {
                    let open = &open;
                    spawn_scoped(scope, "infeed-count", move || {
                        let (chain, files) = open(s)?;
                        stream_run(chain, files, record, &mut WorkerReads::new(reads))
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| {
                    // A thread refused: its error in the stream's place.
                    h?.join()
                        .unwrap_or_else(|_| Err(PipelineError::Worker("batch counting".into())))
                })
                .collect()
        });
        for run in found {
            runs.push(run?);
        }
    }
    if let Grouping::Scheduled {
        bucketer,
        schedule: Some(schedule),
        ..
    } = &record.grouping
    {
        return Ok(Some(scheduled_end(how, &runs, schedule, bucketer)));
    }
    let totals = runs.iter().map(|r| r.total);
    let batches = match how {
        EqualBatches::Drop => totals.min(),
        EqualBatches::Pad => totals.max(),
    };
    Ok(Some(EqualEnd {
        batches: batches.unwrap_or(0),
        tail_from: None,
    }))
}

/// Where a run of scheduled buckets with a fixed batch count ends.
///
/// A stream's steps are full while its input flows: a step is cut only
/// when its bucket's queue and the shorter ones hold its batch. Once a
/// stream's input ends, the records still waiting (thousands on lm: those
/// no step's bucket has called for yet) could only leave in steps whose
/// bucket fits them, and counting steps from records alone lost them at the
/// last step. So the tail, where every step takes the last bucket (any
/// record fits it), begins at the step where the first stream's input
/// ends: from there every stream's steps are full until its records run
/// out. Every stream then emits exactly `tail + ceil(rest / last size)`
/// batches holding all its records (`rest`: its records after the full
/// steps before the tail), and `Drop` leaves out less than one batch of
/// the last bucket a stream, plus what a richer stream holds more.
fn scheduled_end(
    how: EqualBatches,
    runs: &[StreamRun],
    schedule: &Schedule,
    bucketer: &Bucketer<Item>,
) -> EqualEnd {
    let tail = runs.iter().map(|r| r.cut).min().unwrap_or(0);
    let last = bucketer.num_buckets() - 1;
    // The records of the steps before the tail: full on every stream.
    let before: u64 = (0..tail)
        .map(|t| bucketer.batch_size(schedule.bucket(t).min(last)) as u64)
        .sum();
    let size = bucketer.batch_size(last).max(1) as u64;
    let rest = runs.iter().map(|r| r.records.saturating_sub(before));
    let after = match how {
        EqualBatches::Drop => rest.map(|r| r / size).min(),
        EqualBatches::Pad => rest.map(|r| r.div_ceil(size)).max(),
    };
    EqualEnd {
        batches: tail + after.unwrap_or(0),
        tail_from: Some(tail),
    }
}

/// One stream's run through its grouping: the batches cut while its input
/// flowed, all it emits, and the records grouped.
struct StreamRun {
    cut: u64,
    total: u64,
    records: u64,
}

/// One stream's records measured (or prefiltered) and grouped exactly as
/// on its record thread.
fn stream_run(
    mut chain: StreamChain,
    files: Vec<String>,
    record: &RecordWork,
    reads: &mut WorkerReads,
) -> Result<StreamRun, PipelineError> {
    let files = Arc::new(files);
    let mut grouper = Grouper::new(&record.grouping, 0, true);
    let mut out = Vec::new();
    let (mut cut, mut records) = (0u64, 0u64);
    let named = |mut e: PipelineError, file: u32| {
        if let PipelineError::Batch { path, .. }
        | PipelineError::Parse { path, .. }
        | PipelineError::Length { path, .. } = &mut e
            && path.is_empty()
        {
            *path = files.get(file as usize).cloned().unwrap_or_default();
        }
        e
    };
    loop {
        let mut items: Vec<Item> = Vec::with_capacity(CHUNK);
        while items.len() < CHUNK {
            match chain.next_item()? {
                Some(item) => items.push(item),
                None => break,
            }
        }
        if items.is_empty() {
            break;
        }
        let lengths: Vec<Option<usize>> = match (&record.measure, &record.prefilter) {
            (Some(measure), _) => items
                .iter()
                .map(|i| {
                    length_of(measure, i)
                        .map(Some)
                        .map_err(|e| named(e, i.file))
                })
                .collect::<Result<_, _>>()?,
            (None, Some(prefilter)) => {
                let raw = RawBatch::chunk(items.clone(), files.clone());
                let judged = prefilter::judge(prefilter, reads, raw)?;
                match judged.error {
                    Some(e) => return Err(e),
                    None => judged.verdicts,
                }
            }
            (None, None) => vec![Some(0); items.len()],
        };
        for (item, len) in items.into_iter().zip(lengths) {
            let Some(len) = len else { continue };
            let file = item.file;
            records += 1;
            grouper
                .push(item, len, 0, &mut out)
                .map_err(|e| named(e, file))?;
            cut += out.len() as u64;
            out.clear();
        }
    }
    let mut total = cut;
    while grouper.finish_one().is_some() {
        total += 1;
    }
    Ok(StreamRun {
        cut,
        total,
        records,
    })
}

/// How many batches every stream emits when each takes `batch_size`
/// records: from the records' counts (convert's manifests, else a read).
pub(crate) fn from_counts(
    p: &RecordSettings,
    loaded: &Loaded,
    streams: u64,
    batch_size: usize,
) -> Result<Option<u64>, PipelineError> {
    let Some(how) = p.equal_batches else {
        return Ok(None);
    };
    let Some(epochs) = p.ops.epochs.epochs() else {
        return Ok(None);
    };
    if p.ops.record_map.filter.is_some() {
        // What a record filter keeps is unknown until it runs: counted by
        // grouping instead.
        return Ok(None);
    }
    let (skip, take) = (p.ops.skip_take.skip, p.ops.skip_take.take);
    let per_epoch = |records: u64| records.saturating_sub(skip).min(take.unwrap_or(u64::MAX));
    let b = batch_size as u64;
    if let Some(data) = &loaded.dataset {
        // Each stream's records, from the indexes: no read.
        let global = &p.ops.global_shuffle;
        let per_host: Vec<u64> = (0..streams)
            .map(|s| {
                (0..epochs)
                    .map(|e| per_epoch(global.stream_records(data, p.seed, (s, streams), e)))
                    .sum()
            })
            .collect();
        return Ok(Some(equal_count(how, &per_host, b)));
    }
    let counts = match &p.record_counts {
        Some(known) => known.clone(),
        None => counts::count_records(&p.files, &p.read, &p.source_options)?,
    };
    // Every stream's records (a stream is what `shard(s, streams)` reads).
    let (index_count, total): (u64, u64) = (streams, counts.iter().sum());
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
            per_epoch(records) * epochs
        })
        .collect();
    Ok(Some(equal_count(how, &per_host, b)))
}

/// The batch count every stream emits, from each stream's records: the
/// poorest stream's full batches (`Drop`), or as many as the richest
/// stream's records fill, its last batch partly (`Pad`, which keeps every
/// remainder).
fn equal_count(how: EqualBatches, per_host: &[u64], b: u64) -> u64 {
    match how {
        EqualBatches::Drop => per_host.iter().map(|r| r / b).min().unwrap_or(0),
        EqualBatches::Pad => per_host.iter().map(|r| r.div_ceil(b)).max().unwrap_or(0),
    }
}
