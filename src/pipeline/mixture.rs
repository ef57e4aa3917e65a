//! A mixture's chain built: its sources' record chains, the mixture op over
//! them ([`ops::mix`](super::ops::mix)), and the checks that keep what a
//! mixture cannot do yet a clear error.

use std::sync::Arc;

use super::checkpoint::Identity;
use super::error::PipelineError;
use super::group::grouping::{Grouping, RecordWork};
use super::ops::chain::RecordChain;
use super::ops::mix::{MixChain, MixChoice, MixConfig, Source};
use super::settings::{MixSettings, RecordSettings, stream_identity};
use super::stats::StageStats;

/// The mixture `mix` of pipeline `p` as one host runs it (not started),
/// grouped as `record` says, and its files: every source's, in source
/// order.
pub(crate) fn build(
    p: &RecordSettings,
    mix: &MixSettings,
    record: &RecordWork,
    read_stats: &Arc<StageStats>,
    stream_stats: &Arc<StageStats>,
) -> Result<(MixChain, Vec<String>), PipelineError> {
    let refuse = |what: &str| Err(PipelineError::Config(format!("a mixture {what}")));
    if !p.ops.given().is_empty() || p.host.is_some() {
        return refuse(
            "takes shard, file shuffle, interleave, skip/take, filter/map, shuffle and repeat \
             on each source, not on the mixture",
        );
    }
    if p.streams.is_some()
        || mix
            .sources
            .iter()
            .any(|(_, s)| s.streams.is_some() || s.mixture.is_some())
    {
        return refuse("cannot have logical streams, or a mixture as a source, yet");
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
    for (_, s) in &mix.sources {
        let (i, n) = s.host.unwrap_or((0, 1));
        let cfg = s.stream_config(i, n, record.scan.as_ref());
        let chain = RecordChain::new(&cfg, read_stats.clone(), stream_stats.clone())?;
        // A source's fingerprint: its chain's, grouped by nothing (the
        // mixture's own covers the grouping).
        let mut id = Identity::default();
        chain.identity(&mut id);
        RecordWork::fixed(0, false).identity(&mut id);
        stream_identity(&mut id, s.host, None, None);
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
        seed: p.seed,
        batch: batch.max(1),
        host: host.unwrap_or((0, 1)),
        schedule: mix.schedule.clone(),
        records_per_step,
    });
    Ok((MixChain::new(cfg, sources), files))
}
