//! The consumer's side of a running pipeline: [`Batches`] starts the record
//! thread and the workers (see the thread map in [`pipeline`](super)),
//! puts the numbered batches back in order, and keeps the state after the
//! last batch delivered, with the per-stage figures.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender, bounded};

use super::accounting::RecordAccount;
use super::bottleneck::{Bottleneck, StageTime};
use super::checkpoint::{self, Snapshot};
use super::error::{PipelineError, RecordIndex};
use super::group::raw_batch::{BatchFn, RawBatch};
use super::ops::mix;
use super::read::again::record_index;
use super::read::in_workers::ReadChecks;
use super::read::shared_maps::SharedMaps;
use super::read::unread::LeftUnread;
use super::skip_steps::SkipSteps;
use super::stats::{StageFigures, StageStats, StreamCounters};
use super::threads::affinity::CpuAffinity;
use super::threads::panic_message;
use super::threads::record_thread::{self, RecordThread};
use super::threads::streams::{self as streams_thread, StreamInput, Streams};
use super::threads::window::{self, Entry, Exit};
use super::threads::workers::{self as worker_threads, Delivery, Made, Outcome};
use crate::batch::{Provenance, RecordPosition};
use crate::record::ReadOptions;

/// How the execution is set up.
pub(crate) struct ExecConfig {
    pub workers: usize,
    pub prefetch: usize,
    /// Batches already delivered before this run (a restore).
    pub batches_before: u64,
    /// Deliver batches as workers finish them rather than in order.
    pub unordered: bool,
    /// How the shards are read (to find a bad record's index for an error).
    pub read: ReadOptions,
    /// How their bytes are fetched (likewise).
    pub source: crate::source::SourceOptions,
    /// The shards whose records the workers read (with their indexes, to
    /// name a bad record).
    pub unread: Option<LeftUnread>,
    /// The shards' maps the workers share, for scattered records.
    pub shared: Option<Arc<SharedMaps>>,
    /// The cores every thread started here pins itself to.
    pub affinity: CpuAffinity,
}

/// Figures of a running pipeline, per stage.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PipelineStats {
    /// Shard threads: bytes read (compressed), records framed, time reading
    /// and framing (busy) and waiting for room downstream.
    pub read: StageFigures,
    /// The record thread (the `records` stage: interleave, shuffle,
    /// grouping): records it passed on; waiting = for shard blocks.
    pub record_thread: StageFigures,
    /// The workers: records parsed and assembled.
    pub batch: StageFigures,
    /// The consumer: time it waited for a batch.
    pub consumer_wait_ns: u64,
    /// From the start to now, and the workers that ran.
    pub elapsed_ns: u64,
    pub workers: usize,
    /// Batches assembled and waiting for the consumer (the output queue).
    pub ready: usize,
    /// From start to the first batch handed to the consumer.
    pub first_batch_ns: Option<u64>,
    pub batches: u64,
    /// What became of the records this host's streams took in: delivered,
    /// or left out and why (docs/many-hosts.md, "Counting records").
    pub records: RecordAccount,
}

impl PipelineStats {
    /// Each stage's busy and waiting nanoseconds ([`bottleneck::STAGES`] order;
    /// the workers' wait is the rest of their time, as they time only
    /// their work).
    ///
    /// [`bottleneck::STAGES`]: super::bottleneck::STAGES
    pub fn stage_times(&self) -> [StageTime; 3] {
        let time = |f: &StageFigures| StageTime {
            busy: f.busy_ns as f64,
            wait: f.wait_ns as f64,
        };
        let batch = &self.batch;
        [
            time(&self.read),
            time(&self.record_thread),
            StageTime::workers(
                batch.busy_ns as f64,
                batch.wait_ns as f64,
                self.workers,
                self.elapsed_ns as f64,
            ),
        ]
    }

    /// What limits the pipeline over its run so far.
    pub fn bottleneck(&self) -> Bottleneck {
        Bottleneck::of(
            self.elapsed_ns as f64,
            self.batches,
            self.consumer_wait_ns as f64,
            self.stage_times(),
        )
    }
}

/// The running pipeline: a blocking iterator of batches.
pub struct Batches<T> {
    rx: Option<Receiver<Delivery<Made<T>>>>,
    /// Out of order, waiting for an earlier batch: fewer than the window's
    /// places ([`window_places`]).
    pending: BTreeMap<u64, Outcome<Made<T>>>,
    /// Gives a place back for each batch delivered or left out.
    window: Option<Exit>,
    next_seq: u64,
    last_state: Option<Arc<Snapshot>>,
    threads: Vec<JoinHandle<()>>,
    /// The shard readers' and record threads' stages, and the record
    /// account (the consumer counts what it delivers and leaves out).
    counters: StreamCounters,
    batch_stats: Arc<StageStats>,
    consumer_wait_ns: u64,
    started: Instant,
    first_batch_ns: Option<u64>,
    batches_before: u64,
    workers: usize,
    done: bool,
    unordered: bool,
    /// Unordered mode: sequence numbers delivered past `next_seq`.
    delivered_ahead: std::collections::BTreeSet<u64>,
    /// Unordered mode: states of those batches, until the prefix closes.
    states_ahead: BTreeMap<u64, Arc<Snapshot>>,
    /// The job's logical streams (for its states).
    pub(crate) streams: u32,
    /// Global steps left out: received, counted, not delivered.
    pub(crate) skip: SkipSteps,
    /// See [`Batches::shape_schedule`].
    pub(crate) shape_schedule: u64,
    read: crate::record::ReadOptions,
    source: crate::source::SourceOptions,
    /// Takes batches given back ([`recycle`](Self::recycle)) for their
    /// memory to be reused; `None`: they are dropped.
    pub(crate) recycler: Option<Recycler<T>>,
    /// How a delivered batch names its rows' records (assembled batches),
    /// and the last one's rows and provenance.
    pub(crate) provenance_of: Option<ProvenanceOf<T>>,
    last_provenance: Option<(usize, Provenance)>,
}

/// Raw batches the record thread may have ahead of the workers: one more
/// than the workers where raw batches hold their records' bytes (deeper
/// gave nothing there: lm and img on 2 cores at depth 8, −1.5% and −4%,
/// within the noise, with more record memory held). Four per worker where
/// the shards' records are left unread (read by the workers): a raw batch is
/// then ~12 KB of stand-ins, and the record thread, which waits ~0.3 ms for
/// a core after a wake-up while the workers hold both, can fall that far
/// behind without a worker running dry. Paired runs on 2 cores, depth 8:
/// lm +4% to +7% (four sets), img +3% and +5%; pinned lm +0.3%.
fn raw_depth(workers: usize, unread: &Option<LeftUnread>) -> usize {
    match unread {
        Some(u) if u.by_headers || !u.indexes.is_empty() => 4 * workers,
        _ => workers + 1,
    }
}

/// Batches numbered and not yet delivered, at most ([`window`]): as many as
/// the two channels (`raw_depth`, `out_depth`) and the workers hold when
/// full, so a run in which no worker falls behind never waits for a place;
/// what it bounds is the consumer's `pending`, which had no bound.
fn window_places(raw_depth: usize, workers: usize, out_depth: usize) -> usize {
    raw_depth + workers + out_depth
}

/// A delivered batch's rows and where they came from.
pub(crate) type ProvenanceOf<T> = fn(&T) -> (usize, Provenance);

/// Where [`Batches::recycle`] sends a batch.
pub(crate) type Recycler<T> = Arc<dyn Fn(T) + Send + Sync>;

impl<T: Send + 'static> Batches<T> {
    /// Starts the workers, the record threads of the host's logical streams
    /// (`files`: each stream's) and the streams thread that joins them when
    /// there are several; [`PipelineError::Spawn`] when one of them cannot
    /// start, the others stopped.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn start(
        records: Vec<RecordThread>,
        files: Vec<Vec<String>>,
        initial_state: Snapshot,
        counters: StreamCounters,
        cfg: ExecConfig,
        work: BatchFn<T>,
        batch_stats: Arc<StageStats>,
        streams: u32,
    ) -> Result<Self, PipelineError> {
        let initial_state = Arc::new(initial_state);
        let batches_before = cfg.batches_before;
        let unordered = cfg.unordered;
        let read = cfg.read.clone();
        let source = cfg.source.clone();
        let prefetch = cfg.prefetch;
        let workers = cfg.workers.max(1);
        let depth = raw_depth(workers, &cfg.unread);
        let out_depth = prefetch.max(1) + workers;
        let (raw_tx, raw_rx) = bounded::<Delivery<RawBatch>>(depth);
        let (out_tx, out_rx) = bounded::<Delivery<Made<T>>>(out_depth);
        let (raw_tx, window) = window::window(raw_tx, window_places(depth, workers, out_depth));
        let threads = Vec::with_capacity(workers + records.len() + 1);
        let stream_stats = counters.stream.clone();
        let stats = batch_stats.clone();
        let mut batches = Batches {
            rx: Some(out_rx),
            pending: BTreeMap::new(),
            window: Some(window),
            next_seq: 0,
            last_state: Some(initial_state.clone()),
            threads,
            counters,
            batch_stats,
            consumer_wait_ns: 0,
            started: Instant::now(),
            first_batch_ns: None,
            batches_before,
            workers,
            done: false,
            unordered,
            delivered_ahead: Default::default(),
            states_ahead: BTreeMap::new(),
            streams,
            skip: SkipSteps::default(),
            shape_schedule: 0,
            read,
            source,
            recycler: None,
            provenance_of: None,
            last_provenance: None,
        };
        // A thread that cannot start ends the start with its error: the
        // threads started before it are in `batches`, whose drop stops and
        // joins them.
        spawn_threads(
            &mut batches.threads,
            records,
            files,
            &initial_state,
            &stream_stats,
            &cfg,
            (raw_tx, raw_rx),
            out_tx,
            &work,
            &stats,
        )?;
        Ok(batches)
    }

    /// Gives a batch back once done with it, so that a later batch reuses
    /// its memory: parsed columns ([`build_columns`]) are parsed into again
    /// rather than into fresh pages. The output does not change. A batch
    /// not given back is simply freed; assembled batches return their
    /// buffers to their pool when dropped, so for them this is a drop.
    ///
    /// [`build_columns`]: super::ParsedPipeline::build_columns
    pub fn recycle(&self, batch: T) {
        if let Some(recycler) = &self.recycler {
            recycler(batch);
        }
    }

    /// The next batch, `Ok(None)` at the end. After an error the pipeline
    /// is over: later calls return `Ok(None)`.
    pub fn next_batch(&mut self) -> Result<Option<T>, PipelineError> {
        loop {
            // Without a deadline it never gives up.
            if let Some(result) = self.next_batch_until(None) {
                return result;
            }
        }
    }

    /// Like [`next_batch`](Self::next_batch), but gives up after `timeout`
    /// with `None` (call again: nothing is lost). For a consumer that must
    /// stay responsive while it waits, e.g. to Ctrl-C in Python.
    pub fn next_batch_within(
        &mut self,
        timeout: Duration,
    ) -> Option<Result<Option<T>, PipelineError>> {
        self.next_batch_until(Some(Instant::now() + timeout))
    }

    fn next_batch_until(
        &mut self,
        deadline: Option<Instant>,
    ) -> Option<Result<Option<T>, PipelineError>> {
        if self.done {
            return Some(Ok(None));
        }
        let wait = Instant::now();
        let result = loop {
            if let Some(result) = self.pending.remove(&self.next_seq) {
                match result {
                    // A step the run leaves out: counted, its state kept,
                    // the batch given back.
                    Ok((made, state))
                        if self.skip.contains(self.batches_before + self.next_seq) =>
                    {
                        self.last_state = Some(state);
                        self.next_seq += 1;
                        self.leave_window();
                        made.tally.count(&self.counters.accounts, true);
                        self.recycle(made.batch);
                        continue;
                    }
                    result => break Some((self.next_seq, result)),
                }
            }
            let received = match (self.rx.as_ref(), deadline) {
                (None, _) => None,
                (Some(rx), None) => rx.recv().ok(),
                (Some(rx), Some(deadline)) => match rx.recv_deadline(deadline) {
                    Ok(message) => Some(message),
                    Err(RecvTimeoutError::Disconnected) => None,
                    Err(RecvTimeoutError::Timeout) => {
                        self.consumer_wait_ns += wait.elapsed().as_nanos() as u64;
                        return None;
                    }
                },
            };
            match received {
                Some((seq, result)) if self.unordered => break Some((seq, result)),
                Some((seq, result)) => {
                    self.pending.insert(seq, result);
                }
                None => break None,
            }
        };
        self.consumer_wait_ns += wait.elapsed().as_nanos() as u64;
        Some(self.deliver(result))
    }

    /// Hands over a received batch (or the end, or an error).
    fn deliver(&mut self, result: Option<Delivery<Made<T>>>) -> Result<Option<T>, PipelineError> {
        match result {
            None => match self.finish() {
                // A thread that panicked (in a user's map or filter) closed
                // its channel early: that is an error, not the end of data.
                Some(panic) => Err(PipelineError::Worker(panic)),
                None => Ok(None),
            },
            Some((_, Err(e))) => {
                let _ = self.finish();
                Err(e.with_record_index(|path, offset| {
                    record_index(path, offset, &self.read, &self.source)
                        .map(|(index, compression)| RecordIndex { index, compression })
                }))
            }
            Some((seq, Ok((Made { batch, tally }, state)))) => {
                tally.count(&self.counters.accounts, false);
                self.leave_window();
                self.delivered_ahead.insert(seq);
                self.states_ahead.insert(seq, state);
                // The state is that of the longest delivered prefix: exact
                // in order; unordered, a restore may repeat the batches
                // delivered ahead of a slower one.
                while self.delivered_ahead.remove(&self.next_seq) {
                    self.last_state = self.states_ahead.remove(&self.next_seq);
                    self.next_seq += 1;
                }
                self.first_batch_ns
                    .get_or_insert_with(|| self.started.elapsed().as_nanos() as u64);
                if let Some(of) = self.provenance_of {
                    self.last_provenance = Some(of(&batch));
                }
                Ok(Some(batch))
            }
        }
    }

    /// The iterator's state after the last batch it delivered: positions
    /// and counters, not data.
    /// [`Pipeline::resume_from`](super::Pipeline::resume_from) continues
    /// from it; [`checkpoint`](super::checkpoint) says what it holds.
    pub fn state(&self) -> Vec<u8> {
        let fresh = Snapshot::default();
        let state = self.last_state().unwrap_or(&fresh);
        checkpoint::encode(state, self.batches_delivered(), self.streams, &self.skip)
    }

    /// For each row of the last batch delivered, the (file, byte offset) of
    /// its records (see [`Batch::positions`](crate::batch::Batch::positions));
    /// empty before the first batch and for parsed columns.
    pub fn positions(&self) -> Vec<Vec<RecordPosition<'_>>> {
        self.last_provenance
            .as_ref()
            .map(|(rows, p)| p.rows(*rows))
            .unwrap_or_default()
    }

    /// A digest of the schedule by which this host's batches take their
    /// shapes when hosts must agree on them (scheduled buckets: several
    /// hosts, length-dependent shapes; see docs/many-hosts.md), and of the
    /// batch count `equal_batches` found by running the grouping (which
    /// needs the same seed on every host); 0 when neither applies. Hosts
    /// that give different digests would feed steps of different shapes or
    /// run different step counts: compare them once, at the start
    /// (`infeed.jax.device_iterator` does).
    pub fn shape_schedule(&self) -> u64 {
        self.shape_schedule
    }

    /// A mixture's sources with the records taken from each up to the last
    /// batch delivered: the mixture's count in that batch's state, so the
    /// same on every run (records the ops after the mixture hold, in a
    /// shuffle buffer, count as taken); empty for a pipeline that mixes
    /// nothing.
    pub fn source_counts(&self) -> Vec<(String, u64)> {
        self.last_state()
            .and_then(|state| {
                state
                    .streams
                    .iter()
                    .find_map(|stream| mix::source_counts(&stream.chain.nodes()))
            })
            .unwrap_or_default()
    }

    /// Batches delivered so far, counting those before a restore; with
    /// `unordered`, those of the longest run delivered in order (what the
    /// state covers).
    pub fn batches_delivered(&self) -> u64 {
        self.batches_before + self.next_seq
    }

    pub(crate) fn last_state(&self) -> Option<&Snapshot> {
        self.last_state.as_deref()
    }

    pub(crate) fn last_state_arc(&self) -> Arc<Snapshot> {
        self.last_state.clone().unwrap_or_default()
    }

    /// Per-stage figures so far.
    pub fn stats(&self) -> PipelineStats {
        let read = self.counters.read.figures();
        PipelineStats {
            records: self.counters.accounts.account(read.skipped_records),
            read,
            record_thread: self.counters.stream.figures(),
            batch: self.batch_stats.figures(),
            consumer_wait_ns: self.consumer_wait_ns,
            elapsed_ns: self.started.elapsed().as_nanos() as u64,
            workers: self.workers,
            ready: self.pending.len() + self.rx.as_ref().map_or(0, Receiver::len),
            first_batch_ns: self.first_batch_ns,
            batches: self.next_seq,
        }
    }

    /// A batch delivered or left out: the record thread may number one more.
    fn leave_window(&self) {
        if let Some(window) = &self.window {
            window.leave();
        }
    }

    /// Stops every thread; returns the message of one that panicked.
    fn finish(&mut self) -> Option<String> {
        self.done = true;
        self.pending.clear();
        // Dropping the receiver makes every blocked send fail, and the
        // window's exit every wait for a place, so each thread ends; then
        // join them.
        self.rx = None;
        self.window = None;
        let mut panic = None;
        for handle in self.threads.drain(..) {
            if let Err(payload) = handle.join() {
                panic.get_or_insert(panic_message(&*payload));
            }
        }
        panic
    }
}

/// Starts the workers, then the record threads of the host's streams and
/// the streams thread where there are several (see [`Batches::start`]),
/// pushing each thread onto `threads` as it starts. The record threads come
/// last, as they start threads of their own (shard readers, prefilter
/// threads): the start's threads are all up, or one refused, before those
/// are asked for. `raw_rx` and `out_tx` go with it: once it returns, only
/// the threads hold them.
#[allow(clippy::too_many_arguments)]
fn spawn_threads<T: Send + 'static>(
    threads: &mut Vec<JoinHandle<()>>,
    records: Vec<RecordThread>,
    files: Vec<Vec<String>>,
    initial_state: &Snapshot,
    stream_stats: &Arc<StageStats>,
    cfg: &ExecConfig,
    (raw_tx, raw_rx): (Entry, Receiver<Delivery<RawBatch>>),
    out_tx: Sender<Delivery<Made<T>>>,
    work: &BatchFn<T>,
    batch_stats: &Arc<StageStats>,
) -> Result<(), PipelineError> {
    worker_threads::spawn(
        cfg.workers.max(1),
        &raw_rx,
        &out_tx,
        work,
        batch_stats,
        &cfg.affinity,
        &ReadChecks::new(cfg.unread.as_ref(), cfg.shared.clone(), &cfg.read),
        threads,
    )?;
    match <[RecordThread; 1]>::try_from(records) {
        Ok([records]) => threads.push(record_thread::spawn(
            records,
            raw_tx,
            stream_stats.clone(),
            cfg.affinity.clone(),
        )?),
        Err(records) => {
            // Dropped on an early return: closes the channels of the record
            // threads started, and joins them.
            let mut inputs = Streams(Vec::with_capacity(records.len()));
            let mut first_file = 0u32;
            for ((records, stream_files), initial) in
                records.into_iter().zip(&files).zip(&initial_state.streams)
            {
                let (tx, rx) = bounded::<Delivery<RawBatch>>(2);
                let thread = record_thread::spawn(
                    records,
                    Entry::open(tx),
                    stream_stats.clone(),
                    cfg.affinity.clone(),
                )?;
                inputs.0.push(StreamInput {
                    rx,
                    thread: Some(thread),
                    first_file,
                    initial: initial.clone(),
                });
                first_file += stream_files.len() as u32;
            }
            let host_files: Vec<String> = files.into_iter().flatten().collect();
            threads.push(streams_thread::spawn(
                inputs,
                Arc::new(host_files),
                raw_tx,
                cfg.affinity.clone(),
            )?);
        }
    }
    Ok(())
}

impl<T> Drop for Batches<T> {
    fn drop(&mut self) {
        self.rx = None;
        self.window = None;
        self.pending.clear();
        for handle in self.threads.drain(..) {
            let _ = handle.join();
        }
    }
}

impl<T: Send + 'static> Iterator for Batches<T> {
    type Item = Result<T, PipelineError>;

    fn next(&mut self) -> Option<Self::Item> {
        self.next_batch().transpose()
    }
}
