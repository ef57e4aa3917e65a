//! A mixture opened: its sources' record chains, the mixture op over them
//! ([`ops::mix`](super::ops::mix)), and the checks that keep what a mixture
//! cannot do yet a clear error.

use std::sync::Arc;

use super::checkpoint::{self, GroupPart, RawParts, SequenceKey, StreamNode};
use super::error::PipelineError;
use super::group::grouping::Grouping;
use super::open::{Built, Opened, record_key};
use super::ops::StreamConfig;
use super::ops::chain::RecordChain;
use super::ops::mix::{MixChain, MixChoice, MixConfig, OnExhausted, Source};
use super::ops::stream::StreamChain;
use super::settings::{MixSettings, RecordSettings};

/// The mixture's record chain (logical stream `index`: the host's), started
/// or restored from `node`; with the per-source record counts it keeps.
pub(crate) fn build(
    p: &RecordSettings,
    mix: &MixSettings,
    index: u32,
    node: Option<StreamNode>,
    o: &Opened<'_>,
) -> Result<Built, PipelineError> {
    let refuse = |what: &str| Err(PipelineError::Config(format!("a mixture {what}")));
    if p.shuffle_buffer > 0
        || p.shuffle_files
        || p.cycle_length > 1
        || p.skip > 0
        || p.take.is_some()
        || p.filter.is_some()
        || p.map.is_some()
        || p.repeat.is_some()
        || p.host.is_some()
    {
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
    let batch = match (mix.choice, &o.record.grouping) {
        (MixChoice::Random, _) => 1,
        (MixChoice::Stratified, Grouping::Fixed { batch_size, .. })
            if o.record.prefilter.is_none() =>
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
    let configs: Vec<Arc<StreamConfig>> = mix
        .sources
        .iter()
        .map(|(_, s)| {
            let (i, n) = s.host.unwrap_or((0, 1));
            s.stream_config(i, n, o.record.scan.as_ref())
        })
        .collect();
    let fingerprints: Vec<u32> = mix
        .sources
        .iter()
        .zip(&configs)
        .map(|((_, s), cfg)| record_key(s, cfg, s.host).fingerprint())
        .collect();
    let mut files = Vec::new();
    let mut firsts = Vec::new();
    for cfg in &configs {
        firsts.push(files.len() as u32);
        files.extend(cfg.files.iter().cloned());
    }
    let code = match mix.choice {
        MixChoice::Random => 10,
        MixChoice::Stratified => 20,
    } + match mix.on_exhausted {
        OnExhausted::Stop => 0,
        OnExhausted::Drop => 1,
        OnExhausted::Fail => 2,
    };
    let fingerprint = SequenceKey {
        files: &[],
        ranges: &[],
        host,
        seed: p.seed,
        file_order_seed: None,
        shuffle_files: false,
        cycle_length: 0,
        block_length: 0,
        skip: 0,
        take: None,
        record_filter: false,
        record_map: false,
        shuffle_buffer: 0,
        epochs: None,
        shuffle_across_epochs: false,
        equal_batches: None,
        grouping: &o.record.grouping,
        length_feature: o.record.length_feature.as_deref(),
        parsed_ops: &o.record.parsed_ops,
        masks: &o.record.masks,
        streams: None,
        mixture: Some(code),
    }
    .fingerprint();
    let cfg = Arc::new(MixConfig {
        names: mix.names(),
        weights: mix.weights.clone(),
        choice: mix.choice,
        on_exhausted: mix.on_exhausted,
        seed: p.seed,
        batch: batch.max(1),
        host: host.unwrap_or((0, 1)),
    });
    let make = |i: usize, parts: Option<&mut RawParts>| -> Result<Source, PipelineError> {
        let chain = match parts {
            None => RecordChain::new(
                configs[i].clone(),
                o.read_stats.clone(),
                o.stream_stats.clone(),
            )?,
            Some(parts) => RecordChain::restore(
                configs[i].clone(),
                o.read_stats.clone(),
                o.stream_stats.clone(),
                parts,
            )?,
        };
        Ok(Source {
            chain,
            first_file: firsts[i],
            files: configs[i].files.len() as u32,
            fingerprint: fingerprints[i],
        })
    };
    let (chain, group) = match node {
        None => {
            let sources = (0..mix.sources.len())
                .map(|i| make(i, None))
                .collect::<Result<Vec<_>, _>>()?;
            (MixChain::new(cfg, sources), GroupPart::default())
        }
        Some(node) => {
            let (group, mut parts) = node.open(index, fingerprint)?;
            checkpoint::check_group(
                &group,
                o.batches_before,
                &o.record.grouping,
                files.len(),
                o.total_batches,
            )?;
            let chain = MixChain::restore(cfg, &mut parts, make)?;
            parts.finish()?;
            (chain, group)
        }
    };
    Ok(Built {
        chain: StreamChain::Mix(chain),
        files,
        fingerprint,
        group,
    })
}
