//! Opening a logical stream's record chain, from its start or from its
//! node of a state: what every stream needs (`Opened`), what it gives back
//! (`Built`), and the plain one-chain stream; a mixture's is in
//! `mixture.rs`.

use std::sync::Arc;

use super::checkpoint::{self, GroupPart, SequenceKey, StreamNode};
use super::error::PipelineError;
use super::group::grouping::{Grouping, RecordWork};
use super::ops::StreamConfig;
use super::ops::chain::RecordChain;
use super::ops::stream::StreamChain;
use super::settings::RecordSettings;
use super::stats::StageStats;

/// What a stream's chain is opened with.
pub(crate) struct Opened<'a> {
    /// The stream's work: its grouping (its share of the rows) and how it
    /// measures records.
    pub record: &'a RecordWork,
    pub batches_before: u64,
    pub total_batches: Option<u64>,
    pub read_stats: &'a Arc<StageStats>,
    pub stream_stats: &'a Arc<StageStats>,
}

/// A stream's chain, started or restored, with what its state needs.
pub(crate) struct Built {
    pub chain: StreamChain,
    /// Its files (file indexes in its records and state point here).
    pub files: Vec<String>,
    pub fingerprint: u32,
    pub group: GroupPart,
}

/// Logical stream `index` of `streams`: one record chain.
pub(crate) fn one_stream(
    p: &RecordSettings,
    index: u64,
    streams: u64,
    node: Option<StreamNode>,
    o: &Opened<'_>,
) -> Result<Built, PipelineError> {
    let cfg = p.stream_config(index, streams, o.record.scan.as_ref());
    let host = (p.host.is_some() || p.streams.is_some()).then_some((index, streams));
    let fingerprint = SequenceKey {
        equal_batches: p.equal_batches,
        grouping: &o.record.grouping,
        length_feature: o.record.length_feature.as_deref(),
        parsed_ops: &o.record.parsed_ops,
        masks: &o.record.masks,
        streams: p.streams,
        ..record_key(p, &cfg, host)
    }
    .fingerprint();
    let files = cfg.files.clone();
    let (chain, group) = match node {
        None => {
            let chain = RecordChain::new(cfg, o.read_stats.clone(), o.stream_stats.clone())?;
            (chain, GroupPart::default())
        }
        Some(node) => {
            let (group, mut parts) = node.open(index as u32, fingerprint)?;
            checkpoint::check_group(
                &group,
                o.batches_before,
                &o.record.grouping,
                files.len(),
                o.total_batches,
            )?;
            let chain = RecordChain::restore(
                cfg,
                o.read_stats.clone(),
                o.stream_stats.clone(),
                &mut parts,
            )?;
            parts.finish()?;
            (chain, group)
        }
    };
    Ok(Built {
        chain: StreamChain::One(chain),
        files,
        fingerprint,
        group,
    })
}

/// The part of a fingerprint the record chain decides: `p`'s record-level
/// settings as `cfg` runs them on `host`; the grouping's fields are left
/// neutral for the caller to set (a mixture's source keeps them so: the
/// mixture's own fingerprint covers its grouping).
pub(crate) fn record_key<'a>(
    p: &RecordSettings,
    cfg: &'a StreamConfig,
    host: Option<(u64, u64)>,
) -> SequenceKey<'a> {
    const NO_GROUPING: Grouping = Grouping::Fixed {
        batch_size: 0,
        drop_remainder: false,
    };
    SequenceKey {
        files: &cfg.files,
        ranges: &cfg.ranges,
        host,
        seed: cfg.seed,
        file_order_seed: (p.shuffle_files && cfg.file_order_seed != cfg.seed)
            .then_some(cfg.file_order_seed),
        shuffle_files: p.shuffle_files,
        cycle_length: cfg.cycle_length as u64,
        block_length: cfg.block_length as u64,
        skip: p.skip,
        take: p.take,
        record_filter: p.filter.is_some(),
        record_map: p.map.is_some(),
        shuffle_buffer: p.shuffle_buffer as u64,
        epochs: cfg.epochs,
        shuffle_across_epochs: cfg.shuffle_across_epochs,
        equal_batches: None,
        grouping: &NO_GROUPING,
        length_feature: None,
        parsed_ops: "",
        masks: "",
        streams: None,
        mixture: None,
    }
}
