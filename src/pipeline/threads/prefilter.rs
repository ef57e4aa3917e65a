//! The prefilter threads (`infeed-prefilter`, one per worker): they parse
//! chunks of records and run the parsed ops (`filter_rows`, `map_batch`)
//! for the record thread, which groups the survivors in order. They live
//! as long as the record thread's loop ([`with_pool`]).

use std::collections::BTreeMap;

use crossbeam_channel::{Receiver, Sender, bounded};

use crate::pipeline::error::PipelineError;
use crate::pipeline::group::grouping::PrefilterFn;
use crate::pipeline::group::raw_batch::RawBatch;
use crate::pipeline::stats::StageStats;

use super::workers::catch_panic;

/// A prefilter thread's answer for one chunk, by chunk number.
type Verdicts = (u64, Result<Vec<Option<usize>>, PipelineError>);

/// The record thread's side of the pool.
pub(crate) struct Pool<'a> {
    job_tx: &'a Sender<(u64, RawBatch)>,
    res_rx: &'a Receiver<Verdicts>,
    /// Answers that came before the one awaited.
    results: BTreeMap<u64, Result<Vec<Option<usize>>, PipelineError>>,
}

impl Pool<'_> {
    /// Hands chunk `seq` to the pool; false when the pool has gone.
    pub fn send(&mut self, seq: u64, raw: RawBatch) -> bool {
        self.job_tx.send((seq, raw)).is_ok()
    }

    /// Waits for the verdicts on chunk `seq`.
    pub fn take(
        &mut self,
        seq: u64,
        stats: &StageStats,
    ) -> Result<Vec<Option<usize>>, PipelineError> {
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
/// `prefilter`; the threads end when it returns. A thread that cannot start
/// is [`PipelineError::Spawn`], returned without running `body`: those
/// started end as the job channel closes, and the scope joins them.
pub(crate) fn with_pool<R>(
    workers: usize,
    prefilter: &PrefilterFn,
    body: impl FnOnce(&mut Pool<'_>) -> Result<R, PipelineError>,
) -> Result<R, PipelineError> {
    let in_flight_max = workers * 2;
    let (job_tx, job_rx) = bounded::<(u64, RawBatch)>(in_flight_max);
    let (res_tx, res_rx) = bounded::<Verdicts>(in_flight_max);
    std::thread::scope(|scope| {
        for _ in 0..workers {
            let (job_rx, res_tx) = (job_rx.clone(), res_tx.clone());
            // On an error `job_tx` goes with this closure: the threads
            // started see the job channel close and end.
            super::spawn_scoped(scope, "infeed-prefilter", move || {
                while let Ok((seq, raw)) = job_rx.recv() {
                    let verdicts = catch_panic(|| prefilter(&raw));
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
