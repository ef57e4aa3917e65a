//! The record thread (`infeed-records`): runs the record ops' chain
//! ([`StreamChain`]: one chain, or a mixture), groups records into batches ([`Grouper`]) and sends
//! each group, numbered and with the pipeline's state after it, to the
//! workers. It is the only thread that decides order, so the output is the
//! same for any number of workers. With parsed filters it hands chunks to
//! the [`prefilter`] threads and groups the survivors in order.

use std::collections::VecDeque;
use std::sync::Arc;

use crate::pipeline::accounting::Accounts;
use crate::pipeline::checkpoint::{SavedParts, Snapshot, StreamSnapshot};
use crate::pipeline::error::PipelineError;
use crate::pipeline::group::Emitted;
use crate::pipeline::group::Grouper;
use crate::pipeline::group::grouping::{Grouping, MeasureFn, PrefilterFn, length_of};
use crate::pipeline::group::part::GroupPart;
use crate::pipeline::group::raw_batch::RawBatch;
use crate::pipeline::item::Item;
use crate::pipeline::ops::stream_chain::StreamChain;
use crate::pipeline::read::in_workers::ReadChecks;
use crate::pipeline::stats::StageStats;

use crate::prefetch::{AHEAD_BYTES, prefetch};

use super::affinity::CpuAffinity;
use super::prefilter;
use super::window::Entry;

/// Starts the record thread. When it cannot start, `records` (its chain,
/// with the shard readers it started) is dropped, which stops them.
pub(crate) fn spawn(
    records: RecordThread,
    tx: Entry,
    stats: Arc<StageStats>,
    affinity: CpuAffinity,
) -> Result<std::thread::JoinHandle<()>, PipelineError> {
    super::spawn("infeed-records", move || {
        affinity.apply();
        records.run(&tx, &stats)
    })
}

/// What the record thread runs with.
pub(crate) struct RecordThread {
    pub chain: StreamChain,
    pub files: Arc<Vec<String>>,
    pub grouping: Grouping,
    pub measure: Option<MeasureFn>,
    pub prefilter: Option<PrefilterFn>,
    /// How the prefilter threads read the records the start left unread.
    pub reads: ReadChecks,
    /// Records to feed before the stream (a restore), with the values of
    /// the first already packed.
    pub replay: VecDeque<Item>,
    pub replay_skip: usize,
    /// The first records of `replay` that wait in the grouper, fed back
    /// quietly (see [`Grouper::set_quiet`]).
    pub replay_quiet: usize,
    /// Batches delivered before this run (a restore's count).
    pub first_batch: u64,
    /// An error met pulling a record ahead (see `pull_ahead`), returned in
    /// its turn.
    pub ahead_error: Option<PipelineError>,
    /// Prefilter threads, and records per prefilter chunk.
    pub workers: usize,
    pub chunk: usize,
    /// Fixed batches only: exactly this many more batches (stop there, or
    /// pad with empty batches).
    pub limit: Option<u64>,
    /// The logical stream this thread runs, and its fingerprint (for its
    /// part of the state).
    pub stream: u32,
    pub fingerprint: u32,
    /// The host's record account: this thread counts the records it takes
    /// from the chain and never sends (`finish_accounts`).
    pub accounts: Arc<Accounts>,
    /// Records taken: from the chain, and a restore's waiting records.
    pub taken: u64,
    /// Records `filter_rows` (the prefilter) left out.
    pub prefiltered: u64,
    /// A run's records, taken from the chain together ([`Self::push_run`];
    /// kept for its capacity).
    pub run: Vec<Item>,
    /// Where the partial groups sent after an error resume from, where
    /// the chain ran ahead of the records grouped (a run, prefilter chunks
    /// in flight): the state after them, and their records not grouped,
    /// the failing one first, to read again.
    pub ended_at: Option<ResumePoint>,
}

/// A stream's state and the records after it to read again, in order.
pub(crate) type ResumePoint = (Arc<SavedParts>, Vec<(u32, u64)>);

/// A chunk of records out for prefiltering.
struct Chunk {
    items: Vec<(Item, usize)>,
    /// The stream's state and the replay queue right after the chunk.
    stream: Arc<SavedParts>,
    replay_after: Vec<(u32, u64)>,
}

impl RecordThread {
    /// The next record: the replay queue first, then the stream.
    fn next(&mut self) -> Result<Option<(Item, usize)>, PipelineError> {
        if let Some(item) = self.replay.pop_front() {
            let skip = std::mem::take(&mut self.replay_skip);
            return Ok(Some((item, skip)));
        }
        if let Some(e) = self.ahead_error.take() {
            return Err(e);
        }
        let item = self.chain.next_item()?;
        self.taken += u64::from(item.is_some());
        Ok(item.map(|item| (item, 0)))
    }

    /// With lengths to measure here (the current record came unmeasured: a
    /// map changed it, or it was read again): pulls the record after it
    /// now and prefetches its start, so that its lines arrive while the
    /// current one is measured (a shuffled record lies at a random place:
    /// each miss costs this one thread ~100 ns). It waits at the back of
    /// the replay queue, so a state taken meanwhile reads it again; an
    /// error waits until the current record is grouped.
    fn pull_ahead(&mut self) {
        if self.measure.is_none() || !self.replay.is_empty() || self.ahead_error.is_some() {
            return;
        }
        match self.chain.next_item() {
            Ok(Some(item)) => {
                self.taken += 1;
                // A record measured already is not read here.
                if item.measured().is_none() {
                    prefetch(&item.data[..item.data.len().min(AHEAD_BYTES)]);
                }
                self.replay.push_back(item);
            }
            Ok(None) => {}
            Err(e) => self.ahead_error = Some(e),
        }
    }

    fn replay_positions(&self) -> Vec<(u32, u64)> {
        self.replay.iter().map(|i| (i.file, i.offset)).collect()
    }

    /// Names the file of an error raised on one record.
    fn locate(&self, mut error: PipelineError, file: u32) -> PipelineError {
        if let PipelineError::Batch { path, .. }
        | PipelineError::Parse { path, .. }
        | PipelineError::Length { path, .. } = &mut error
            && path.is_empty()
        {
            *path = self
                .files
                .get(file as usize)
                .cloned()
                .unwrap_or_else(|| "?".into());
        }
        error
    }

    /// Runs the record thread until the data ends, an error, or the
    /// consumer goes away.
    pub fn run(mut self, tx: &Entry, stats: &StageStats) {
        let mut grouper = Grouper::new(&self.grouping, self.first_batch, self.limit.is_some());
        let mut sender = GroupSender {
            tx,
            files: self.files.clone(),
            seq: 0,
            first: self.first_batch,
            limit: self.limit,
            stream: self.stream,
            fingerprint: self.fingerprint,
            fresh: 0,
            carried: false,
        };
        // A restore's records are taken in again: those waiting in the
        // grouping, and those its chain holds (shuffle buffers).
        let restored = self.replay.len() as u64;
        self.taken = restored;
        self.accounts.read(restored + self.chain.held());
        let result = self.refill(&mut grouper, &mut sender).and_then(|flow| {
            match (flow, self.prefilter.clone()) {
                (Flow::Stop, _) => Ok(Flow::Stop),
                (Flow::Go, None) => self.run_direct(&mut grouper, &mut sender, stats),
                (Flow::Go, Some(prefilter)) => {
                    self.run_prefiltered(&mut grouper, &mut sender, stats, prefilter)
                }
            }
        });
        let error = match result {
            Ok(Flow::Stop) => {
                self.finish_accounts_at_count(&grouper, &sender);
                return;
            }
            Ok(Flow::Go) => None,
            Err(e) => Some(e),
        };
        // The end of the data (or an error: the records before it are
        // delivered): the partial groups.
        let (state, queued) = match self.ended_at.take() {
            Some(at) => at,
            None => (Arc::new(self.chain.state()), self.replay_positions()),
        };
        while let Some(group) = grouper.finish_one() {
            if sender.send(group, &state, queued.clone()) == Flow::Stop {
                self.finish_accounts_at_count(&grouper, &sender);
                return;
            }
        }
        if error.is_none() {
            // A host that must reach its batch count pads with empty batches.
            if let Some(limit) = sender.limit {
                while sender.seq < limit {
                    if sender.send(grouper.empty(), &state, Vec::new()) == Flow::Stop {
                        return;
                    }
                }
            }
            self.finish_accounts(&grouper, &sender);
        }
        if let Some(e) = error {
            let _ = tx.send((sender.seq, Err(e)));
        }
    }

    /// A record `filter_rows` left out.
    fn filtered_out(&mut self) {
        self.prefiltered += 1;
        self.accounts.filtered(1);
    }

    /// After a stop: the accounts, when the batch count stopped it (not
    /// the consumer going away).
    fn finish_accounts_at_count(&self, grouper: &Grouper, sender: &GroupSender<'_>) {
        if sender.full() {
            self.finish_accounts(grouper, sender);
        }
    }

    /// Counts what this thread took and never sent, at the end of its
    /// input or at its batch count (`equal_batches`): records its grouping
    /// dropped or held, those pulled ahead or out for prefiltering, and
    /// what the chain still holds (at the count, dropped; at the end, only
    /// a mixture's sources hold any). Not called when the consumer went
    /// away: that run was not read to its end.
    fn finish_accounts(&self, grouper: &Grouper, sender: &GroupSender<'_>) {
        let at_count = sender.full();
        let empty = grouper.empties();
        let placed = sender.fresh + self.prefiltered + empty;
        let never_sent = self.taken.saturating_sub(placed);
        let held = self.chain.held();
        self.accounts.empty(empty);
        if at_count {
            self.accounts.dropped(never_sent + held);
        } else {
            self.accounts.dropped(never_sent);
            self.accounts.mixture_end(held);
        }
    }

    /// A restore's records that wait in the grouper, fed back quietly; then
    /// the batches they fill (the batches that followed the saved one in
    /// the same step of the saving run).
    fn refill(
        &mut self,
        grouper: &mut Grouper,
        sender: &mut GroupSender<'_>,
    ) -> Result<Flow, PipelineError> {
        let n = std::mem::take(&mut self.replay_quiet).min(self.replay.len());
        if n == 0 {
            return Ok(Flow::Go);
        }
        let items: Vec<Item> = self.replay.drain(..n).collect();
        // Their lengths, as the grouping measured them when they came.
        let lengths: Vec<Option<usize>> = match (&self.measure, &self.prefilter) {
            (Some(measure), _) => items
                .iter()
                .map(|item| {
                    length_of(measure, item)
                        .map(Some)
                        .map_err(|e| self.locate(e, item.file))
                })
                .collect::<Result<_, _>>()?,
            (None, Some(prefilter)) => {
                prefilter(&RawBatch::chunk(items.clone(), self.files.clone()))?
            }
            (None, None) => vec![Some(0); items.len()],
        };
        let mut out = Vec::new();
        grouper.set_quiet(true, &mut out);
        for (item, len) in items.into_iter().zip(lengths) {
            // Records a parsed filter dropped never wait: `None` is not
            // expected here, and such a record is left out as it was then.
            let Some(len) = len else {
                self.filtered_out();
                continue;
            };
            let file = item.file;
            grouper
                .push(item, len, 0, &mut out)
                .map_err(|e| self.locate(e, file))?;
        }
        grouper.set_quiet(false, &mut out);
        let state = Arc::new(self.chain.state());
        let queued = self.replay_positions();
        for group in out {
            if sender.send(group, &state, queued.clone()) == Flow::Stop {
                return Ok(Flow::Stop);
            }
        }
        Ok(Flow::Go)
    }

    /// Groups records straight from the stream.
    fn run_direct(
        &mut self,
        grouper: &mut Grouper,
        sender: &mut GroupSender<'_>,
        stats: &StageStats,
    ) -> Result<Flow, PipelineError> {
        let mut out = Vec::new();
        loop {
            if sender.full() {
                return Ok(Flow::Stop);
            }
            // Pull records until a group is complete (one timer per group,
            // not per record).
            let timer = stats.busy_timer();
            let span = tracing::trace_span!("infeed.group", stream = self.stream).entered();
            let end = loop {
                // Batches of rows with nothing to measure and no restored
                // records waiting: whole runs from the chain.
                if self.measure.is_none()
                    && self.replay.is_empty()
                    && self.ahead_error.is_none()
                    && let Some(rows) = grouper.rows()
                {
                    let (chain, taken) = (&mut self.chain, &mut self.taken);
                    let run = |items: &mut Vec<Item>, max| {
                        let before = items.len();
                        let pulled = chain.next_run(items, max);
                        *taken += (items.len() - before) as u64;
                        pulled
                    };
                    if !rows.push_run(run, &mut out)? {
                        break true;
                    }
                    if !out.is_empty() {
                        break false;
                    }
                    continue;
                }
                // A grouper that can take several records before it cuts
                // a group (buckets short of full, a packed batch with rows
                // left): a run of them from the chain, in one go.
                if self.measure.is_some()
                    && self.replay.is_empty()
                    && self.ahead_error.is_none()
                    && let room @ 2.. = grouper.room()
                {
                    match self.push_run(room, grouper, &mut out)? {
                        Some(end) => break end,
                        None => continue,
                    }
                }
                let Some((item, skip)) = self.next()? else {
                    break true;
                };
                // Measured here, so likely the next one too.
                if item.measured().is_none() {
                    self.pull_ahead();
                }
                let at = (item.file, item.offset);
                if let Err(e) = self.group(grouper, item, skip, &mut out) {
                    self.ended_at = Some(self.resume_point(at, Vec::new()));
                    return Err(e);
                }
                if !out.is_empty() {
                    break false;
                }
            };
            drop(span);
            drop(timer);
            if !out.is_empty() {
                let state = Arc::new(self.chain.state());
                let queued = self.replay_positions();
                for group in out.drain(..) {
                    if sender.send(group, &state, queued.clone()) == Flow::Stop {
                        return Ok(Flow::Stop);
                    }
                }
            }
            if end {
                return Ok(Flow::Go);
            }
        }
    }

    /// Where a stream that failed grouping the record at `failing` resumes
    /// from: the chain's state, and that record, the run's `rest` after it
    /// and the replay queue to read again.
    fn resume_point(&mut self, failing: (u32, u64), rest: Vec<(u32, u64)>) -> ResumePoint {
        let mut queued = vec![failing];
        queued.extend(rest);
        queued.extend(self.replay_positions());
        (Arc::new(self.chain.state()), queued)
    }

    /// Groups `item` (`skip` of its values packed already), measured as
    /// the grouping measures (most come measured by their shard thread).
    fn group(
        &self,
        grouper: &mut Grouper,
        item: Item,
        skip: usize,
        out: &mut Vec<Emitted>,
    ) -> Result<(), PipelineError> {
        let file = item.file;
        let len = match &self.measure {
            Some(measure) => length_of(measure, &item).map_err(|e| self.locate(e, file))?,
            None => 0,
        };
        grouper
            .push(item, len, skip, out)
            .map_err(|e| self.locate(e, file))
    }

    /// Groups a run of at most `room` records from the chain: `Some(true)`
    /// at the end of the input, `Some(false)` once a group is cut, `None`
    /// to go on. Records after a cut group (none where `room` holds) wait
    /// in the replay queue, so the state sent with it reads them again; an
    /// error the chain met after the run's records waits its turn there
    /// too, after them (as one pulled ahead does).
    fn push_run(
        &mut self,
        room: usize,
        grouper: &mut Grouper,
        out: &mut Vec<Emitted>,
    ) -> Result<Option<bool>, PipelineError> {
        let mut run = std::mem::take(&mut self.run);
        let pulled = self.chain.next_run(&mut run, room);
        if run.is_empty() {
            pulled?;
            return Ok(Some(true));
        }
        self.taken += run.len() as u64;
        let mut items = run.drain(..);
        while let Some(item) = items.next() {
            let at = (item.file, item.offset);
            if let Err(e) = self.group(grouper, item, 0, out) {
                let rest: Vec<_> = items.map(|i| (i.file, i.offset)).collect();
                self.ended_at = Some(self.resume_point(at, rest));
                return Err(e);
            }
            if !out.is_empty() {
                break;
            }
        }
        self.replay.extend(items);
        self.run = run;
        if let Err(e) = pulled {
            self.ahead_error = Some(e);
        }
        Ok((!out.is_empty()).then_some(false))
    }

    /// Fills `items` up to a chunk: a restore's records first, one at a
    /// time (the first with the pieces its row took), then runs from the
    /// chain. Fewer: the stream ended, or `Err` came after them.
    fn fill_chunk(&mut self, items: &mut Vec<(Item, usize)>) -> Result<(), PipelineError> {
        while items.len() < self.chunk {
            if !self.replay.is_empty() || self.ahead_error.is_some() {
                match self.next()? {
                    Some(x) => items.push(x),
                    None => return Ok(()),
                }
                continue;
            }
            let pulled = self.chain.next_run(&mut self.run, self.chunk - items.len());
            let n = self.run.len();
            self.taken += n as u64;
            items.extend(self.run.drain(..).map(|item| (item, 0)));
            pulled?;
            if n == 0 {
                return Ok(());
            }
        }
        Ok(())
    }

    /// Cuts chunks for the prefilter threads and groups the records they
    /// keep, in order.
    fn run_prefiltered(
        &mut self,
        grouper: &mut Grouper,
        sender: &mut GroupSender<'_>,
        stats: &StageStats,
        prefilter: PrefilterFn,
    ) -> Result<Flow, PipelineError> {
        let workers = self.workers.max(1);
        let reads = self.reads.clone();
        prefilter::with_pool(workers, &prefilter, &reads, |pool| {
            self.prefilter_loop(grouper, sender, stats, pool)
        })
    }

    fn prefilter_loop(
        &mut self,
        grouper: &mut Grouper,
        sender: &mut GroupSender<'_>,
        stats: &StageStats,
        pool: &mut prefilter::Pool<'_>,
    ) -> Result<Flow, PipelineError> {
        let in_flight_max = self.workers.max(1) * 2;
        let mut in_flight: VecDeque<(u64, Chunk)> = VecDeque::new();
        let (mut next_chunk, mut input_done) = (0u64, false);
        let mut input_error = None;
        let mut out = Vec::new();
        loop {
            while !input_done && in_flight.len() < in_flight_max {
                let timer = stats.busy_timer();
                let _span = tracing::trace_span!("infeed.chunk", stream = self.stream).entered();
                let mut items = Vec::with_capacity(self.chunk);
                if let Err(e) = self.fill_chunk(&mut items) {
                    input_error = Some(e);
                }
                input_done = items.len() < self.chunk || input_error.is_some();
                drop(timer);
                if items.is_empty() {
                    break;
                }
                let raw = RawBatch::chunk(
                    items.iter().map(|(i, _)| i.clone()).collect(),
                    self.files.clone(),
                );
                let chunk = Chunk {
                    items,
                    stream: Arc::new(self.chain.state()),
                    replay_after: self.replay_positions(),
                };
                if !pool.send(next_chunk, raw) {
                    return Ok(Flow::Stop);
                }
                in_flight.push_back((next_chunk, chunk));
                next_chunk += 1;
            }
            let Some((seq, chunk)) = in_flight.pop_front() else {
                break;
            };
            // A chunk that failed (a parse error) is grouped none of.
            let (verdicts, error) = match pool.take(seq, stats) {
                Ok(judged) => (judged.verdicts, judged.error),
                Err(e) => (Vec::new(), Some(e)),
            };
            let judged = verdicts.len();
            let Chunk {
                items,
                stream,
                replay_after,
            } = chunk;
            let positions: Vec<(u32, u64)> =
                items.iter().map(|(i, _)| (i.file, i.offset)).collect();
            // The records from the chunk's `k`-th on, then the replay queue:
            // what a state taken there reads again.
            let from = |k: usize| {
                let mut queued = positions[k.min(positions.len())..].to_vec();
                queued.extend_from_slice(&replay_after);
                queued
            };
            for (i, ((item, skip), verdict)) in items.into_iter().zip(verdicts).enumerate() {
                if sender.full() {
                    return Ok(Flow::Stop);
                }
                let Some(len) = verdict else {
                    self.filtered_out();
                    continue;
                };
                let file = item.file;
                if let Err(e) = grouper.push(item, len, skip, &mut out) {
                    self.ended_at = Some((stream, from(i)));
                    return Err(self.locate(e, file));
                }
                for group in out.drain(..) {
                    if sender.send(group, &stream, from(i + 1)) == Flow::Stop {
                        return Ok(Flow::Stop);
                    }
                }
            }
            if let Some(e) = error {
                self.ended_at = Some((stream, from(judged)));
                return Err(e);
            }
        }
        match input_error {
            Some(e) => Err(e),
            None => Ok(Flow::Go),
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Flow {
    /// Go on (to the end of the data).
    Go,
    /// The consumer went away, or the batch count is reached.
    Stop,
}

/// Numbers groups and sends them to the workers with their snapshot.
struct GroupSender<'a> {
    tx: &'a Entry,
    files: Arc<Vec<String>>,
    seq: u64,
    /// Batches delivered before this run started (a restore's): the first
    /// group's number in the whole run.
    first: u64,
    limit: Option<u64>,
    stream: u32,
    fingerprint: u32,
    /// Records whose first piece went out in a sent group.
    fresh: u64,
    /// The last group sent cut a record that the next goes on with
    /// (packing): that record is not fresh there.
    carried: bool,
}

impl GroupSender<'_> {
    fn full(&self) -> bool {
        self.limit.is_some_and(|n| self.seq >= n)
    }

    /// Sends `group`; the replay list after it is the group's own, then
    /// `queued` (records pulled but not yet grouped).
    fn send(&mut self, group: Emitted, chain: &Arc<SavedParts>, queued: Vec<(u32, u64)>) -> Flow {
        if self.full() {
            return Flow::Stop;
        }
        let replay_quiet = if group.replay_quiet {
            group.replay.len() as u64
        } else {
            0
        };
        let starts = group.items.len() - usize::from(self.carried && !group.items.is_empty());
        let carries = group.replay_skip > 0;
        let mut replay = group.replay;
        replay.extend(queued);
        let snapshot = Snapshot {
            streams: vec![StreamSnapshot {
                index: self.stream,
                fingerprint: self.fingerprint,
                chain: chain.clone(),
                group: Arc::new(GroupPart {
                    replay,
                    replay_skip: group.replay_skip,
                    replay_quiet,
                }),
            }],
        };
        let raw = RawBatch {
            items: group.items,
            files: self.files.clone(),
            layout: group.layout,
            number: self.first + self.seq,
            starts,
        };
        if self
            .tx
            .send((self.seq, Ok((raw, Arc::new(snapshot)))))
            .is_err()
        {
            return Flow::Stop;
        }
        self.seq += 1;
        self.fresh += starts as u64;
        self.carried = carries;
        Flow::Go
    }
}
