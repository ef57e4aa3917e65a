//! What a pipeline reads once at its start, before any stream opens: the
//! global shuffle's dataset (its shards' indexes), the indexes found of the
//! shards the workers read,
//! where its small shards are kept after a pass, and for a mixture each
//! source's own and their mean tokens per record.
//!
//! Kept apart from the settings, which say only what was asked (and from
//! the [`Description`](super::Description), which a start never changes):
//! a pipeline started again reads them again, and a settings value is the
//! same before and after a start.

use std::sync::Arc;

use super::ops::global_shuffle::Dataset;
use super::read::kept::Kept;
use super::read::shared_maps::SharedMaps;
use super::read::spans::SpanReads;
use super::read::unread::LeftUnread;

/// What one record source (the pipeline, or one source of a mixture) read
/// at the start.
#[derive(Clone, Default)]
pub(crate) struct Loaded {
    /// The global shuffle's records, when it is on.
    pub dataset: Option<Arc<Dataset>>,
    /// The shards whose records the workers read: by their indexes
    /// (found, or the global shuffle's) or their headers.
    pub unread: Option<LeftUnread>,
    /// How its compressed local shards with indexes are read by spans.
    pub spans: Option<SpanReads>,
    /// Where its small shards are kept after a pass, when it reads its
    /// files more than once.
    pub kept: Option<Arc<Kept>>,
    /// The shards' maps the workers read scattered records through.
    pub shared: Option<Arc<SharedMaps>>,
    /// A mixture's sources', in the order given.
    pub sources: Vec<Loaded>,
    /// A mixture by tokens: each source's mean tokens per record.
    pub token_means: Option<Vec<f64>>,
}

impl Loaded {
    /// The same, keeping no shard (its sources' neither).
    pub fn without_kept(&self) -> Loaded {
        Loaded {
            kept: None,
            sources: self.sources.iter().map(Loaded::without_kept).collect(),
            ..self.clone()
        }
    }
}
