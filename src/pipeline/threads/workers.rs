//! The worker threads (`infeed-worker`, `threads` of them): each takes a
//! raw batch from the record thread, reads the records left unread for it
//! (`read/in_workers.rs`), runs the pipeline's batch
//! function on it (parse, map, pad, assemble) and sends the result, still
//! numbered, to the consumer, which puts them back in order.

use std::sync::Arc;
use std::thread::JoinHandle;

use bytes::Bytes;
use crossbeam_channel::{Receiver, Sender};

use crate::pipeline::accounting::{self, BatchTally};
use crate::pipeline::checkpoint::Snapshot;
use crate::pipeline::error::PipelineError;
use crate::pipeline::group::raw_batch::{BatchFn, RawBatch};
use crate::pipeline::read::in_workers::{ReadChecks, WorkerReads};
use crate::pipeline::stats::StageStats;

use super::affinity::CpuAffinity;

/// A batch (or error) with the pipeline's state after it.
pub(crate) type Outcome<T> = Result<(T, Arc<Snapshot>), PipelineError>;

/// A numbered batch (or error) with the pipeline's state after it.
pub(crate) type Delivery<T> = (u64, Outcome<T>);

/// A batch a worker made, and what it holds (for the record account).
pub(crate) struct Made<T> {
    pub batch: T,
    pub tally: BatchTally,
}

/// Starts `workers` worker threads, each pushed onto `threads` as it
/// starts: when one cannot start, the error, with those started before it
/// in `threads` for the caller to stop.
#[allow(clippy::too_many_arguments)]
pub(crate) fn spawn<T: Send + 'static>(
    workers: usize,
    rx: &Receiver<Delivery<RawBatch>>,
    tx: &Sender<Delivery<Made<T>>>,
    work: &BatchFn<T>,
    stats: &Arc<StageStats>,
    affinity: &CpuAffinity,
    checks: &ReadChecks,
    threads: &mut Vec<JoinHandle<()>>,
) -> Result<(), PipelineError> {
    for _ in 0..workers {
        let (rx, tx, work, stats) = (rx.clone(), tx.clone(), work.clone(), stats.clone());
        let affinity = affinity.clone();
        let reads = WorkerReads::new(checks);
        threads.push(super::spawn("infeed-worker", move || {
            affinity.apply();
            run_worker(&rx, &tx, &*work, &stats, reads)
        })?);
    }
    Ok(())
}

fn run_worker<T>(
    rx: &Receiver<Delivery<RawBatch>>,
    tx: &Sender<Delivery<Made<T>>>,
    work: &(dyn Fn(RawBatch) -> Result<T, PipelineError> + Send + Sync),
    stats: &StageStats,
    mut reads: WorkerReads,
) {
    while let Ok((seq, message)) = rx.recv() {
        let result = message.and_then(|(mut raw, state)| {
            let _busy = stats.busy_timer();
            let n = raw.len() as u64;
            let _span =
                tracing::trace_span!("infeed.batch", step = raw.number, records = n).entered();
            let bytes: usize = raw.records().map(Bytes::len).sum();
            let records = raw.starts as u64;
            accounting::take_left_out_here();
            // A panic in a user's function (map_batch) must become an error
            // in its place: a lost batch would leave the consumer waiting.
            let batch = catch_panic(|| {
                reads.read(&mut raw)?;
                work(raw)
            })?;
            let left_out = accounting::take_left_out_here();
            stats.add_records(n);
            stats.add_bytes(bytes as u64);
            let tally = BatchTally { records, left_out };
            Ok((Made { batch, tally }, state))
        });
        if tx.send((seq, result)).is_err() {
            return;
        }
    }
}

/// Runs `f`, turning a panic into [`PipelineError::Worker`].
pub(crate) fn catch_panic<T>(
    f: impl FnOnce() -> Result<T, PipelineError>,
) -> Result<T, PipelineError> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).unwrap_or_else(|payload| {
        let message = payload
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "panic".into());
        Err(PipelineError::Worker(message))
    })
}
