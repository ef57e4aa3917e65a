//! The prefilter threads (`infeed-prefilter`, one per worker): they read
//! the unread records of chunks (as a worker reads its batch's), parse
//! them and run the parsed ops (`filter_rows`, `map_batch`, `tokenize`;
//! length filters alone by the wire scan) for the record thread, which
//! groups the survivors in order. They live
//! as long as the record thread's loop ([`with_pool`]).
//!
//! A record read here is read again by the worker that assembles its
//! batch: the record thread keeps the stand-in, so a record waiting in a
//! bucket or an open packed row pins no read buffer. The start has such
//! pipelines read through the shards' shared maps (`start.rs`,
//! `scatters`), so both reads are views of the same mapped pages.

use std::collections::BTreeMap;

use crossbeam_channel::{Receiver, Sender, bounded};

use crate::pipeline::error::PipelineError;
use crate::pipeline::group::grouping::PrefilterFn;
use crate::pipeline::group::raw_batch::RawBatch;
use crate::pipeline::read::in_workers::{ReadChecks, WorkerReads};
use crate::pipeline::stats::StageStats;

use super::workers::catch_panic;

/// A prefilter thread's answer for one chunk, by chunk number.
type Verdicts = (u64, Result<Judged, PipelineError>);

/// A chunk's verdicts: each record's length, or `None` where a parsed
/// filter left it out; fewer than the chunk's records where one could not
/// be read, and `error` says why. The records before it are grouped and
/// delivered before the error, as when a shard thread met it (under a
/// shuffle buffer, it is met as the buffer lets it go: later).
pub(crate) struct Judged {
    pub verdicts: Vec<Option<usize>>,
    pub error: Option<PipelineError>,
}

/// Reads `raw`'s unread records with `reads` and runs `prefilter` on them
/// (see [`Judged`]).
pub(crate) fn judge(
    prefilter: &PrefilterFn,
    reads: &mut WorkerReads,
    mut raw: RawBatch,
) -> Result<Judged, PipelineError> {
    let Err(error) = reads.read(&mut raw) else {
        return Ok(Judged {
            verdicts: prefilter(&raw)?,
            error: None,
        });
    };
    // Rare: the first record in the chunk's order that does not read,
    // found one record at a time (a batch reads in shard order, so its
    // error may name a later one).
    let mut first_bad = (raw.len(), error);
    for (i, item) in raw.items.iter().enumerate() {
        let mut one = RawBatch::chunk(vec![item.clone()], raw.files.clone());
        if let Err(e) = reads.read(&mut one) {
            first_bad = (i, e);
            break;
        }
    }
    let (good, error) = first_bad;
    raw.items.truncate(good);
    reads.read(&mut raw)?;
    Ok(Judged {
        verdicts: prefilter(&raw)?,
        error: Some(error),
    })
}

/// The record thread's side of the pool.
pub(crate) struct Pool<'a> {
    job_tx: &'a Sender<(u64, RawBatch)>,
    res_rx: &'a Receiver<Verdicts>,
    /// Answers that came before the one awaited.
    results: BTreeMap<u64, Result<Judged, PipelineError>>,
}

impl Pool<'_> {
    /// Hands chunk `seq` to the pool; false when the pool has gone.
    pub fn send(&mut self, seq: u64, raw: RawBatch) -> bool {
        self.job_tx.send((seq, raw)).is_ok()
    }

    /// Waits for the verdicts on chunk `seq`.
    pub fn take(&mut self, seq: u64, stats: &StageStats) -> Result<Judged, PipelineError> {
        loop {
            if let Some(r) = self.results.remove(&seq) {
                return r;
            }
            let _wait = stats.wait_timer();
            match self.res_rx.recv() {
                Ok((s, r)) => {
                    self.results.insert(s, r);
                }
                Err(_) => return Err(PipelineError::Worker("a prefilter thread".into())),
            }
        }
    }
}

/// Runs `body` with a pool of `workers` prefilter threads running
/// `prefilter` on records read as `checks` say; the threads end when it
/// returns. A thread that cannot start
/// is [`PipelineError::Spawn`], returned without running `body`: those
/// started end as the job channel closes, and the scope joins them.
pub(crate) fn with_pool<R>(
    workers: usize,
    prefilter: &PrefilterFn,
    checks: &ReadChecks,
    body: impl FnOnce(&mut Pool<'_>) -> Result<R, PipelineError>,
) -> Result<R, PipelineError> {
    let in_flight_max = workers * 2;
    let (job_tx, job_rx) = bounded::<(u64, RawBatch)>(in_flight_max);
    let (res_tx, res_rx) = bounded::<Verdicts>(in_flight_max);
    std::thread::scope(|scope| {
        for _ in 0..workers {
            let (job_rx, res_tx) = (job_rx.clone(), res_tx.clone());
            let mut reads = WorkerReads::new(checks);
            // On an error `job_tx` goes with this closure: the threads
            // started see the job channel close and end.
            super::spawn_scoped(scope, "infeed-prefilter", move || {
                while let Ok((seq, raw)) = job_rx.recv() {
                    let verdicts = catch_panic(|| judge(prefilter, &mut reads, raw));
                    if res_tx.send((seq, verdicts)).is_err() {
                        return;
                    }
                }
            })?;
        }
        drop(res_tx);
        let mut pool = Pool {
            job_tx: &job_tx,
            res_rx: &res_rx,
            results: BTreeMap::new(),
        };
        let result = body(&mut pool);
        drop(pool);
        // Closing the job channel ends the prefilter threads; drain
        // their results so none blocks on a full channel.
        drop(job_tx);
        while res_rx.recv().is_ok() {}
        result
    })
}
