//! What will run: the record ops' settings with the host's files, the
//! grouping, the fingerprint of what decides the sequence; [`start`]
//! checks them once, restores a state if there is one and starts the
//! threads.

use std::collections::HashMap;
use std::sync::Arc;

use super::batches::{Batches, ExecConfig};
use super::checkpoint::{self, Decoded, Snapshot, StreamNode, StreamSnapshot};
use super::equal::{self, EqualEnd};
use super::error::{PipelineError, StateError};
use super::group::grouping::{Grouping, MeasureFn, PrefilterFn, RecordWork};
use super::group::raw_batch::{BatchFn, RawBatch};
use super::group::schedule::{SAMPLE_FILES, SAMPLE_PER_FILE, Schedule};
use super::item::Item;
use super::limits;
use super::loaded::Loaded;
use super::open::{Opened, Opener, Resume};
use super::open_mix;
use super::ops::chain::ChainConfig;
use super::read::again::first_records;
use super::read::in_workers::{ReadChecks, found_indexes};
use super::read::shared_maps::SharedMaps;
use super::read::spans::SpanReads;
use super::read::unread::Indexes;
use super::read::unread::LeftUnread;
use super::settings::{EqualBatches, RecordSettings};
use super::skip_steps::SkipSteps;
use super::stats::{StageStats, StreamCounters};
use super::threads::record_thread::RecordThread;
use crate::batch::Bucketer;
use crate::record::CorruptPolicy;

/// Records per chunk that the prefilter threads parse for `filter_rows`.
const PREFILTER_CHUNK: usize = 256;

/// Starts the threads: records grouped as `record` says, each group
/// handed to `work` on the worker pool.
///
/// The host runs its slice of the job's logical streams (one per host
/// unless [`streams`](super::Pipeline::streams) says otherwise): each
/// stream is the record chain and grouping of `shard(s, streams)` with a
/// share of the batch's rows, on its own record thread; several are joined
/// step by step (`threads/streams.rs`).
/// `batch_stats` are the workers' counters (`work` may count in them).
///
/// In steps: the run planned ([`plan`]), the host's streams opened
/// ([`Planned::open`]), the threads started.
pub(crate) fn start<T: Send + 'static>(
    p: &RecordSettings,
    record: RecordWork,
    work: BatchFn<T>,
    batch_stats: Arc<StageStats>,
) -> Result<Batches<T>, PipelineError> {
    let mut planned = plan(p, record)?;
    let counters = StreamCounters::default();
    let job = &planned.job;
    let mine = job.first..job.first + job.per_host;
    let affinity = planned.p.affinity.clone();
    if affinity.cores().is_some() && planned.p.files.iter().any(|f| f.contains("://")) {
        // The process's cloud I/O runtime is shared: started before the
        // caller is pinned, so it keeps the process's cores.
        crate::source::io_runtime()?;
    }
    // Opening starts the first shard readers: on the budget's cores.
    let OpenedStreams {
        threads,
        files: host_files,
        initial,
    } = affinity.while_pinned(|| planned.open(mine, &counters))?;
    let p = &planned.p;
    let exec = ExecConfig {
        workers: p.workers,
        prefetch: p.prefetch,
        batches_before: planned.resume.batches_before,
        unordered: p.unordered,
        read: p.read.clone(),
        source: p.source_options.clone(),
        unread: planned.loaded.unread.clone(),
        shared: planned.loaded.shared.clone(),
        affinity: p.affinity.clone(),
    };
    let mut batches = Batches::start(
        threads,
        host_files,
        initial,
        counters,
        exec,
        work,
        batch_stats,
        planned.job.streams as u32,
    )?;
    batches.shape_schedule = planned.shape_schedule;
    batches.skip = planned.skip;
    Ok(batches)
}

/// A run's words checked and turned into what runs, before any stream
/// is opened (see [`start`]).
pub(crate) struct Planned {
    pub p: RecordSettings,
    /// What the ops read once (indexes, token weights).
    pub loaded: Loaded,
    pub job: Job,
    /// One stream's work: its grouping (its share of the rows).
    pub record: RecordWork,
    shape_schedule: u64,
    total_batches: Option<u64>,
    decoded: Option<Decoded>,
    pub resume: Resume,
    skip: SkipSteps,
}

/// Checks the words and plans the run: the job's place ([`Job`]); one
/// stream's share of the grouping; the batch count of `equal_batches`
/// where record counts give it; the bucket schedule hosts share; the
/// batch count by running every stream's grouping where they do not; the
/// state to resume from and the steps to leave out.
pub(crate) fn plan(p: &RecordSettings, record: RecordWork) -> Result<Planned, PipelineError> {
    // Every size was checked with the description (`Description::validate`);
    // the cores are this machine's.
    p.affinity.check()?;
    let mut loaded = p.load()?;
    loaded.token_means = measure_token_weights(p, &record)?;
    let job = Job::of(p)?;
    (loaded.unread, loaded.shared) = match p.mixture.is_some() {
        false => unread_records(p, &record, &loaded, &job),
        true => unread_sources(p, &record, &mut loaded.sources, &job),
    };
    span_reads(p, &job, &mut loaded);
    // The host's grouping, for the digest of the shapes hosts must share.
    let mut host_grouping = record.grouping.clone();
    let mut record = record.per_stream(job.per_host as usize)?;
    if p.equal_batches == Some(EqualBatches::Pad) {
        // `Pad` delivers every record: a host's last, partly filled batch
        // is kept (masked rows), whatever drop_remainder says.
        for grouping in [&mut record.grouping, &mut host_grouping] {
            grouping.keep_remainder();
        }
    }
    let counted = count_by_records(p, &loaded, &job, &record)?;
    let schedule = plan_schedule(p, &record)?;
    set_schedule(&mut [&mut record.grouping, &mut host_grouping], &schedule);
    let ended = match counted {
        Some(batches) => Some(EqualEnd {
            batches,
            tail_from: None,
        }),
        None => count_by_grouping(p, &loaded, &job, &record)?,
    };
    if let (Some(schedule), Some(tail)) = (&schedule, ended.and_then(|e| e.tail_from)) {
        let tailed = Some(Arc::new((**schedule).clone().with_tail_from(tail)));
        set_schedule(&mut [&mut record.grouping, &mut host_grouping], &tailed);
    }
    let mut shape_schedule = shape_schedule(&host_grouping);
    if p.ops.global_shuffle.on && job.streams > 1 {
        // Hosts share one permutation only with one seed: compare it too.
        let key = [shape_schedule.to_le_bytes(), p.seed.to_le_bytes()].concat();
        shape_schedule = xxhash_rust::xxh3::xxh3_64(&key);
    }
    if counted.is_none()
        && let Some(ended) = ended
    {
        // Counted with this host's seed for every stream: hosts seeded
        // differently would count differently, so the count is part of what
        // hosts compare at the start.
        let mut key = shape_schedule.to_le_bytes().to_vec();
        key.extend_from_slice(&ended.batches.to_le_bytes());
        shape_schedule = xxhash_rust::xxh3::xxh3_64(&key);
    }
    let total_batches = ended.map(|e| e.batches);
    let decoded = decode_state(p, &job)?;
    let skip = SkipSteps::new(&p.skip_steps)?;
    let skip = match &decoded {
        Some(d) => d.skip.union(&skip),
        None => skip,
    };
    if p.unordered && !skip.is_empty() {
        return Err(PipelineError::Config(
            "skip_steps numbers steps in order: it cannot be used with unordered()".into(),
        ));
    }
    let resume = Resume {
        batches_before: decoded.as_ref().map_or(0, |d| d.batches),
        total_batches,
    };
    Ok(Planned {
        p: p.clone(),
        loaded,
        job,
        record,
        shape_schedule,
        total_batches,
        decoded,
        resume,
        skip,
    })
}

/// Logical streams opened, ready to run.
pub(crate) struct OpenedStreams {
    /// A record thread each.
    pub threads: Vec<RecordThread>,
    /// Each stream's files.
    pub files: Vec<Vec<String>>,
    /// The state before their first batch.
    pub initial: Snapshot,
}

impl Planned {
    /// Opens the job's logical streams `streams` (from the state, when
    /// resuming), each a record thread ready to run.
    pub fn open(
        &mut self,
        streams: std::ops::Range<u64>,
        counters: &StreamCounters,
    ) -> Result<OpenedStreams, PipelineError> {
        let (p, job, record, resume) = (&self.p, &self.job, &self.record, self.resume);
        let opener = Opener {
            p,
            loaded: &self.loaded,
            streams: job.streams,
            record,
            counters: counters.clone(),
        };
        let mut threads = Vec::with_capacity(streams.clone().count());
        let mut initial = Snapshot::default();
        let mut files_of = Vec::new();
        for index in streams {
            let node = match self.decoded.as_mut() {
                None => None,
                Some(decoded) => Some(take_stream(decoded, index, job)?),
            };
            let Opened {
                mut chain,
                files,
                fingerprint,
                group,
            } = opener.open(index, node, resume)?;
            let index = index as u32;
            initial.streams.push(StreamSnapshot {
                index,
                fingerprint,
                chain: Arc::new(chain.state()),
                group: Arc::new(group.clone()),
            });
            let replay = chain.read_again(&group.replay.to_vec())?.into();
            threads.push(RecordThread {
                chain,
                files: Arc::new(files.clone()),
                grouping: record.grouping.clone(),
                measure: record.measure.clone(),
                prefilter: record.prefilter.clone(),
                reads: ReadChecks::new(
                    self.loaded.unread.as_ref(),
                    self.loaded.shared.clone(),
                    &p.read,
                ),
                replay,
                replay_skip: usize::try_from(group.replay_skip).unwrap_or(usize::MAX),
                replay_quiet: usize::try_from(group.replay_quiet).unwrap_or(usize::MAX),
                first_batch: resume.batches_before,
                ahead_error: None,
                workers: p.workers,
                chunk: PREFILTER_CHUNK,
                limit: self
                    .total_batches
                    .map(|n| n.saturating_sub(resume.batches_before)),
                stream: index,
                fingerprint,
                accounts: counters.accounts.clone(),
                taken: 0,
                prefiltered: 0,
                run: Vec::new(),
                ended_at: None,
            });
            files_of.push(files);
        }
        Ok(OpenedStreams {
            threads,
            files: files_of,
            initial,
        })
    }
}

/// This host's place in the job: its index among the hosts, the job's
/// logical streams, and the slice of them this host runs.
pub(crate) struct Job {
    host: u64,
    hosts: u64,
    pub streams: u64,
    /// This host's first stream, and how many it runs.
    first: u64,
    per_host: u64,
}

impl Job {
    fn of(p: &RecordSettings) -> Result<Job, PipelineError> {
        // A mixture is sharded on itself, or as its sources are (all alike).
        let host = match &p.mixture {
            Some(mix) if p.host.is_none() => mix.sources.first().and_then(|(_, s)| s.host),
            _ => p.host,
        };
        let (host, hosts) = host.unwrap_or((0, 1));
        if hosts == 0 || host >= hosts {
            return Err(PipelineError::Config(format!("host {host} of {hosts}")));
        }
        let streams = p.streams.unwrap_or(hosts);
        if streams == 0 || !streams.is_multiple_of(hosts) || streams > u64::from(u32::MAX) {
            return Err(PipelineError::Config(format!(
                "{hosts} hosts cannot share {streams} logical streams: the host count must \
                 divide the stream count set with streams(n) at the job's first launch"
            )));
        }
        let per_host = streams / hosts;
        // A record thread each.
        limits::at_most("streams per host", per_host, limits::MAX_THREADS)?;
        // And each stream's shard readers: `interleave` open files and the
        // next (a mixture's: every source's).
        let readers = |s: &RecordSettings| s.ops.interleave.cycle_length as u64 + 1;
        let per_stream = match &p.mixture {
            Some(mix) => mix.sources.iter().map(|(_, s)| readers(s)).sum(),
            None => readers(p),
        };
        limits::at_most(
            "shard threads (streams per host × (interleave + 1))",
            per_host.saturating_mul(per_stream),
            limits::MAX_SHARD_THREADS,
        )?;
        Ok(Job {
            host,
            hosts,
            streams,
            first: host * per_host,
            per_host,
        })
    }
}

/// Equal batch counts where a batch always takes the same number of
/// records: from the records' counts (`None` where the grouping must run).
fn count_by_records(
    p: &RecordSettings,
    loaded: &Loaded,
    job: &Job,
    record: &RecordWork,
) -> Result<Option<u64>, PipelineError> {
    match &record.grouping {
        // A mixture's batches are not its files' records: counted by grouping.
        _ if p.mixture.is_some() => Ok(None),
        Grouping::Rows { batch_size, .. } if record.prefilter.is_none() => {
            equal::from_counts(p, loaded, job.streams, *batch_size)
        }
        // Scheduled buckets cut a step only when its bucket fills: how
        // many steps the records take depends on their lengths and order
        // (`equal::from_grouping`).
        _ => Ok(None),
    }
}

/// The indexes found of the files this host's streams read (not the
/// whole job's: each host reads only its share), which frame those shards
/// in place of their headers ([`found_indexes`]).
fn host_indexes(p: &RecordSettings, job: &Job) -> Indexes {
    let none = Loaded::default();
    let files = host_files(job, |stream| {
        p.stream_config(stream, job.streams, None, &none)
    });
    let dir = p.ops.global_shuffle.index_dir.as_deref();
    found_indexes(&files, dir, &p.read, &p.source_options)
}

/// The indexes found of the plain local shards that source `s` of the
/// mixture `p` reads on this host, in its own `index_dir` or the
/// mixture's, as [`host_indexes`] finds a pipeline's.
fn host_source_indexes(p: &RecordSettings, s: &RecordSettings, job: &Job) -> Indexes {
    let none = Loaded::default();
    let files = host_files(job, |stream| {
        open_mix::source_config(p, s, (stream, job.streams), None, &none)
    });
    let own = s.ops.global_shuffle.index_dir.as_deref();
    let dir = own.or(p.ops.global_shuffle.index_dir.as_deref());
    found_indexes(&files, dir, &s.read, &s.source_options)
}

/// The files this host's streams read, each once (a job's streams may
/// read thousands of files, several each), as `config` gives a stream's.
fn host_files(job: &Job, config: impl Fn(u64) -> ChainConfig) -> Vec<String> {
    let mut files = std::collections::BTreeSet::new();
    for stream in job.first..job.first + job.per_host {
        files.extend(config(stream).files.files.iter().cloned());
    }
    files.into_iter().collect()
}

/// What needs a record's bytes before the worker that assembles it, if
/// anything does (`None`: the workers may read the records themselves; a
/// length the grouping measures by its wire scan is the walks' to measure,
/// `unread.rs`).
fn needs_bytes_before_workers(p: &RecordSettings, record: &RecordWork) -> Option<&'static str> {
    let needs_bytes = [
        (
            p.ops.record_map.filter.is_some() || p.ops.record_map.map.is_some(),
            "a filter or map on serialized records",
        ),
        (
            record.measure.is_some() && record.scan.is_none(),
            "a length measured by no wire scan",
        ),
    ];
    needs_bytes
        .into_iter()
        .find(|(given, _)| *given)
        .map(|(_, what)| what)
}

/// What needs each shard walked by its shard thread, if anything does
/// (`None`: an index may frame it instead): skipping corrupt records,
/// whose regions only a walk that checks every payload finds (`unread.rs`,
/// `by_headers`), where an index frames only the records.
fn needs_walks(p: &RecordSettings) -> Option<&'static str> {
    (p.read.on_corrupt == CorruptPolicy::Skip)
        .then_some("skipping corrupt records (on_corrupt(Skip))")
}

/// The shards whose records the workers read themselves, and the maps
/// they share to read scattered records, whenever nothing before the
/// workers needs the records' bytes (a mixture's: [`unread_sources`]):
/// with the global shuffle, which has every shard's index
/// already, its plain local shards', framed by their indexes (which
/// frame only the good records under [`needs_walks`]), always through
/// shared maps; else every plain local shard, framed by its index where
/// one is found ([`host_indexes`]) and by its headers as its shard thread
/// opens it where none is, through shared maps
/// under a shuffle buffer, a grouping that measures (buckets, packing),
/// whose batches are scattered, or a parsed filter, whose prefilter
/// threads read each record before its worker does ([`scatters`]; else
/// each worker `pread`s its batch's runs of neighbours); the walks measure
/// each record where the grouping does.
/// `None`: every record is read before the workers.
fn unread_records(
    p: &RecordSettings,
    record: &RecordWork,
    loaded: &Loaded,
    job: &Job,
) -> (Option<LeftUnread>, Option<Arc<SharedMaps>>) {
    if needs_bytes_before_workers(p, record).is_some() {
        return (None, None);
    }
    match &loaded.dataset {
        Some(data) => (
            Some(LeftUnread::indexed(data.plain_local_indexes())),
            Some(data.maps.clone()),
        ),
        None => {
            let left = match needs_walks(p) {
                Some(_) => LeftUnread::walked_skipping(),
                // Framings learned on a first pass serve the next.
                None => LeftUnread::by_headers(p.ops.epochs.epochs() != Some(1))
                    .with_indexes(host_indexes(p, job)),
            };
            if !p.files.iter().any(|f| left.framing(f, &p.read).is_some()) {
                // Compressed or cloud shards only: all read before.
                return (None, None);
            }
            let scattered = p.ops.shuffle.buffer > 0 || scatters(record);
            let buffer = p.ops.shuffle.buffer;
            let shared = scattered.then(|| SharedMaps::for_shuffle_buffer(p.files.len(), buffer));
            let shared = shared.map(Arc::new);
            (Some(left), shared)
        }
    }
}

/// Whether the records a grouping takes are read through the shards'
/// shared maps rather than by a `pread` a run each: buckets and packed
/// rows take them out of order, measured by a walk; and a record the
/// prefilter threads read is read again by a worker, from the same mapped
/// pages. Plain batches after a parsed filter, in order, cost 5-10% more
/// CPU by `pread` (lm, filter_length, 5 rounds: 2.2-2.5 against 2.0-2.3 s
/// on 2 cores), for a peak RSS of 70 against 450 MiB: the maps' pages,
/// the same page cache a `pread` fills, but counted.
fn scatters(record: &RecordWork) -> bool {
    record.scan.is_some() || record.prefilter.is_some()
}

/// A mixture's shards whose records the workers read: each source's plain
/// local shards, framed by their indexes where found (in the source's
/// `index_dir`, or the mixture's) and by their headers where not, where
/// nothing before the workers needs the source's bytes (a source with a
/// global shuffle reads its own, as before), set into the source's
/// `loaded`; and what the workers read by, as [`unread_records`] gives
/// it: every source's indexes found (to number a bad record), and maps
/// they share where a source shuffles (numbered as the mixture numbers
/// its sources' files, one after the other).
fn unread_sources(
    p: &RecordSettings,
    record: &RecordWork,
    sources: &mut [Loaded],
    job: &Job,
) -> (Option<LeftUnread>, Option<Arc<SharedMaps>>) {
    let Some(mix) = &p.mixture else {
        return (None, None);
    };
    if needs_bytes_before_workers(p, record).is_some() {
        return (None, None);
    }
    let (mut checks, mut scattered, mut files) = (Vec::new(), false, 0);
    let mut indexes = HashMap::new();
    for ((_, source), own) in mix.sources.iter().zip(sources) {
        files += source.files.len();
        if source.mixture.is_some()
            || own.dataset.is_some()
            || needs_bytes_before_workers(source, record).is_some()
        {
            continue;
        }
        let left = match needs_walks(source) {
            Some(_) => LeftUnread::walked_skipping(),
            None => LeftUnread::by_headers(source.ops.epochs.epochs() != Some(1))
                .with_indexes(host_source_indexes(p, source, job)),
        };
        if source
            .files
            .iter()
            .any(|f| left.framing(f, &source.read).is_some())
        {
            checks.push((source.files.clone(), left.worker_checks(&source.read)));
            indexes.extend(left.indexes.iter().map(|(k, v)| (k.clone(), v.clone())));
            own.unread = Some(left);
            scattered |= source.ops.shuffle.buffer > 0 || scatters(record);
        }
    }
    let buffer = mix.sources.iter().map(|(_, s)| s.ops.shuffle.buffer).max();
    let shared = scattered.then(|| SharedMaps::for_shuffle_buffer(files, buffer.unwrap_or(0)));
    let shared = shared.map(Arc::new);
    let left = (!checks.is_empty()).then(|| LeftUnread {
        sources: checks,
        ..LeftUnread::by_headers(false).with_indexes(Arc::new(indexes))
    });
    (left, shared)
}

/// How the compressed local shards of the pipeline (each source's, for a
/// mixture) are read by spans: each shard the host keeps open gets its
/// share of the workers (`spans.rs`).
fn span_reads(p: &RecordSettings, job: &Job, loaded: &mut Loaded) {
    let open = |s: &RecordSettings| {
        let cycle = s.ops.interleave.cycle_length * job.per_host as usize;
        cycle.min(s.files.len())
    };
    let index_dir = p.ops.global_shuffle.index_dir.clone();
    // Points learned on a first pass serve the next.
    let learn = |s: &RecordSettings| s.ops.epochs.epochs() != Some(1);
    match &p.mixture {
        None => loaded.spans = SpanReads::for_host(p.workers, open(p), index_dir, learn(p)),
        Some(mix) => {
            let all = mix.sources.iter().map(|(_, s)| open(s)).sum();
            let learn = mix.sources.iter().any(|(_, s)| learn(s));
            let spans = SpanReads::for_host(p.workers, all, index_dir, learn);
            for own in &mut loaded.sources {
                own.spans = spans.clone();
            }
        }
    }
}

/// A mixture whose weights count tokens: each source's mean tokens per
/// record, from the first records of a few of its files (every host reads
/// the same), measured as the grouping measures them.
fn measure_token_weights(
    p: &RecordSettings,
    record: &RecordWork,
) -> Result<Option<Vec<f64>>, PipelineError> {
    let Some(mix) = p.mixture.as_ref().filter(|m| m.by_tokens) else {
        return Ok(None);
    };
    if record.measure.is_none() && record.prefilter.is_none() {
        return Err(PipelineError::Config(
            "a mixture by tokens counts the length that pack or bucket_by_length measures: \
             give one"
                .into(),
        ));
    }
    let mut means = Vec::with_capacity(mix.sources.len());
    for (name, source) in &mix.sources {
        let lengths = sample_lengths(source, &record.measure, &record.prefilter)?;
        let tokens: usize = lengths.iter().sum();
        if tokens == 0 {
            return Err(PipelineError::Config(format!(
                "a mixture by tokens: source {name:?}'s first records hold no tokens to weigh \
                 it by"
            )));
        }
        means.push(tokens as f64 / lengths.len() as f64);
    }
    Ok(Some(means))
}

/// The bucket schedule every host shares, for scheduled buckets: from a
/// sample of lengths every host reads alike (a run with equal batch counts
/// adds its tail when they are counted).
fn plan_schedule(
    p: &RecordSettings,
    record: &RecordWork,
) -> Result<Option<Arc<Schedule>>, PipelineError> {
    let Grouping::Scheduled { bucketer, .. } = &record.grouping else {
        return Ok(None);
    };
    let counts = sample_buckets(p, &record.measure, &record.prefilter, bucketer)?;
    // Per-stream batch sizes: the same schedule on any host count.
    let sizes: Vec<usize> = (0..bucketer.num_buckets())
        .map(|b| bucketer.batch_size(b))
        .collect();
    Ok(Some(Arc::new(Schedule::new(
        shared_seed(&p.files),
        &counts,
        &sizes,
    ))))
}

/// Puts `schedule` into the scheduled groupings among `groupings`.
fn set_schedule(groupings: &mut [&mut Grouping], schedule: &Option<Arc<Schedule>>) {
    let Some(schedule) = schedule else { return };
    for grouping in groupings.iter_mut() {
        if let Grouping::Scheduled { schedule: s, .. } = &mut **grouping {
            *s = Some(schedule.clone());
        }
    }
}

/// Equal batch counts by running every stream's grouping once (a finite
/// run with `equal_batches` whose records' counts do not say).
fn count_by_grouping(
    p: &RecordSettings,
    loaded: &Loaded,
    job: &Job,
    record: &RecordWork,
) -> Result<Option<EqualEnd>, PipelineError> {
    let finite = match &p.mixture {
        Some(mix) => mix.finite(),
        None => !p.ops.epochs.endless(),
    };
    if p.equal_batches.is_none() || !finite {
        return Ok(None);
    }
    // Counted apart: the simulation's records are not the run's; nor are
    // its shards kept (it reads every host's).
    let loaded = &loaded.without_kept();
    let opener = Opener {
        p,
        loaded,
        streams: job.streams,
        record,
        counters: StreamCounters::default(),
    };
    let reads = ReadChecks::new(loaded.unread.as_ref(), loaded.shared.clone(), &p.read);
    equal::from_grouping(p, job.streams, record, &reads, |s| {
        let opened = opener.open(s, None, Resume::default())?;
        Ok((opened.chain, opened.files))
    })
}

/// The state to resume from, if any, decoded and checked against the job.
fn decode_state(p: &RecordSettings, job: &Job) -> Result<Option<Decoded>, PipelineError> {
    let Some(bytes) = &p.resume else {
        return Ok(None);
    };
    let decoded = checkpoint::decode(bytes)?;
    if u64::from(decoded.streams) != job.streams {
        return Err(StateError::Streams(format!(
            "it was taken from a job of {} logical streams; this pipeline has {} (the \
             stream count is fixed at a job's first launch)",
            decoded.streams, job.streams
        ))
        .into());
    }
    Ok(Some(decoded))
}

/// Stream `index`'s node of the state, which must have it.
fn take_stream(decoded: &mut Decoded, index: u64, job: &Job) -> Result<StreamNode, StateError> {
    decoded.parts.remove(&(index as u32)).ok_or_else(|| {
        StateError::Streams(format!(
            "it does not hold logical stream {index}, which host {} of {} runs: it holds \
             streams {:?}; restore from the states of every host of the saving job, merged \
             (merge_states)",
            job.host,
            job.hosts,
            decoded.parts.keys().collect::<Vec<_>>()
        ))
    })
}

/// A digest of the shape schedule hosts must share (0 without one).
fn shape_schedule(grouping: &Grouping) -> u64 {
    let Grouping::Scheduled {
        bucketer,
        schedule: Some(schedule),
        ..
    } = grouping
    else {
        return 0;
    };
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
/// buckets ([`sample_lengths`]).
fn sample_buckets(
    p: &RecordSettings,
    measure: &Option<MeasureFn>,
    prefilter: &Option<PrefilterFn>,
    bucketer: &Bucketer<Item>,
) -> Result<Vec<u64>, PipelineError> {
    let last = bucketer.num_buckets() - 1;
    let mut counts = vec![0u64; last + 1];
    for len in sample_lengths(p, measure, prefilter)? {
        counts[bucketer.bucket_of(len).min(last)] += 1;
    }
    Ok(counts)
}

/// The lengths of a sample the same on every host: the first records of a
/// few files spread over the whole file list (every host can read every
/// file), measured as the grouping measures them.
fn sample_lengths(
    p: &RecordSettings,
    measure: &Option<MeasureFn>,
    prefilter: &Option<PrefilterFn>,
) -> Result<Vec<usize>, PipelineError> {
    let mut out = Vec::new();
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
            (None, Some(prefilter)) => {
                prefilter(&RawBatch::chunk(items, Arc::new(p.files.clone()))).unwrap_or_default()
            }
            (None, None) => Vec::new(),
        };
        out.extend(lengths.into_iter().flatten());
    }
    Ok(out)
}
