//! A mixture's chain built: its sources' record chains, the mixture op over
//! them ([`ops::mix`](super::ops::mix)), and the checks that keep what a
//! mixture cannot do yet a clear error.

use std::sync::Arc;

use super::checkpoint::Identity;
use super::error::PipelineError;
use super::group::grouping::{Grouping, RecordWork};
use super::item::LengthScan;
use super::loaded::Loaded;
use super::ops::chain::{ChainConfig, RecordChain};
use super::ops::mix::{MixChain, MixChoice, MixConfig, Source};
use super::rng::{CounterRng, domain};
use super::settings::{MixSettings, RecordSettings, stream_identity};
use super::stats::StreamCounters;

/// Source `s` of the mixture `p` as logical stream `stream.0` of
/// `stream.1` runs it: placed by the mixture, the source's share of the
/// stream, seeded as the stream's; placed by its sources, the source's own
/// shard `stream.0`.
pub(crate) fn source_config(
    p: &RecordSettings,
    s: &RecordSettings,
    (index, count): (u64, u64),
    scan: Option<&LengthScan>,
    own: &Loaded,
) -> ChainConfig {
    if p.host.is_some() || p.streams.is_some() {
        let mut per_stream = s.clone();
        per_stream.streams = p.streams;
        per_stream.stream_config(index, count, scan, own)
    } else {
        let n = s.host.map_or(1, |(_, n)| n);
        s.stream_config(index, n, scan, own)
    }
}

/// The mixture `mix` of pipeline `p` as logical stream `stream.0` of
/// `stream.1` runs it (not started), grouped as `record` says, with what
/// was `loaded` at the start, and its files: every source's, in source
/// order.
///
/// Placed by the mixture (`shard(i, n)` and `streams(L)` on it), each
/// source runs its shard of that stream, seeded per stream as a single
/// pipeline's streams are, so that a mixture's state moves between host
/// counts as any other's; placed by its sources (each `.shard(i, n)`
/// alike, the first way there was), stream `i` is host `i`.
pub(crate) fn build(
    p: &RecordSettings,
    mix: &MixSettings,
    loaded: &Loaded,
    stream: (u64, u64),
    record: &RecordWork,
    counters: &StreamCounters,
) -> Result<(MixChain, Vec<String>), PipelineError> {
    let refuse = |what: &str| Err(PipelineError::Config(format!("a mixture {what}")));
    if !p.ops.given().is_empty() {
        return refuse(
            "takes file shuffle, interleave, skip/take, filter/map, shuffle and repeat on each \
             source, not on the mixture",
        );
    }
    if mix
        .sources
        .iter()
        .any(|(_, s)| s.streams.is_some() || s.mixture.is_some())
    {
        return refuse("cannot have a source with logical streams, or a mixture as a source, yet");
    }
    let sources_sharded = mix.sources.iter().any(|(_, s)| s.host.is_some());
    let placed = p.host.is_some() || p.streams.is_some();
    if placed && sources_sharded {
        return refuse(
            "is sharded once: shard(i, n) (and streams) on the mixture, or shard(i, n) alike on \
             every source, not both",
        );
    }
    let host = mix.sources.first().and_then(|(_, s)| s.host);
    if mix.sources.iter().any(|(_, s)| s.host != host) {
        return refuse("needs every source sharded alike (the same shard(i, n))");
    }
    let batch = match (mix.choice, &record.grouping) {
        (MixChoice::Random, _) => 1,
        (MixChoice::Stratified, Grouping::Rows { batch_size, .. })
            if record.prefilter.is_none() =>
        {
            *batch_size
        }
        (MixChoice::Stratified, _) => {
            return refuse(
                "stratified by batch needs plain batches (batch, not bucket_by_length or pack, \
                 and no filter_rows, which would cut rows out of a batch after mixing); use \
                 MixChoice::Random",
            );
        }
    };
    // A schedule's step: the records a host's batch takes.
    let records_per_step = match (&mix.schedule, mix.records_per_step, &record.grouping) {
        (None, _, _) => 1,
        (Some(_), Some(0), _) => return refuse("schedule's records_per_step must be positive"),
        (Some(_), Some(n), _) => n,
        (Some(_), None, Grouping::Rows { batch_size, .. }) if record.prefilter.is_none() => {
            *batch_size as u64
        }
        (Some(_), None, _) => {
            return refuse(
                "schedule counts steps in records: packed or bucketed batches (or filter_rows) \
                 take varying counts, so give records_per_step (e.g. the documents a packed \
                 batch holds on average)",
            );
        }
    };
    if let Some(schedule) = &mix.schedule {
        schedule.check(mix.sources.len())?;
    }
    let mut files = Vec::new();
    let mut sources = Vec::with_capacity(mix.sources.len());
    let (index, count) = stream;
    let none = Loaded::default();
    for (i, (_, s)) in mix.sources.iter().enumerate() {
        let own = loaded.sources.get(i).unwrap_or(&none);
        let cfg = source_config(p, s, stream, record.scan.as_ref(), own);
        let chain = RecordChain::new(&cfg, counters)?;
        // A source's fingerprint: its chain's and its place (the
        // mixture's own covers the grouping).
        let mut id = Identity::default();
        chain.identity(&mut id);
        let place = (placed || sources_sharded).then_some((index, count));
        stream_identity(&mut id, place, None, None);
        sources.push(Source {
            first_file: files.len() as u32,
            files: chain.files().len() as u32,
            fingerprint: id.fingerprint(),
            chain,
        });
        files.extend(cfg.files.files.iter().cloned());
    }
    let cfg = Arc::new(MixConfig {
        names: mix.names(),
        weights: mix.weights.clone(),
        choice: mix.choice,
        on_exhausted: mix.on_exhausted,
        seed: match p.streams {
            Some(_) => CounterRng::new(p.seed, domain::LOGICAL_STREAMS, index).next_u64(),
            None => p.seed,
        },
        batch: batch.max(1),
        host: stream,
        schedule: mix.schedule.clone(),
        records_per_step,
        per_record: match (mix.by_tokens, &loaded.token_means) {
            (false, _) => None,
            (true, Some(means)) => Some(means.iter().map(|m| 1.0 / m).collect()),
            (true, None) => return refuse("weighed by tokens was not measured (an infeed bug)"),
        },
    });
    Ok((MixChain::new(cfg, sources), files))
}
