//! The record ops composed, in their fixed order: interleave → record shard
//! → skip/take → filter/map → epochs → shuffle. The chain is one concrete
//! type (each op generic over the one before it), so the record thread's
//! hot path has no dynamic dispatch. A logical stream runs one chain, or a
//! mixture of several ([`StreamChain`](super::stream_chain::StreamChain)).
//!
//! It runs on the record thread and is a pure function of the config, the
//! seed and the data, so its output is the same for any number of worker
//! threads. Its whole state is its ops' parts, positions and counters;
//! buffered records are named by (file, byte offset) and read again on
//! restore.
//!
//! Adding an op: its file (settings, identity, next, save, restore), a
//! field of [`ChainSettings`] for its settings, and its place in
//! [`RecordChain::new`] and [`EpochOps`] here.

use std::sync::Arc;

use crate::pipeline::checkpoint::{Identity, Position, RawParts, SavedParts};
use crate::pipeline::error::PipelineError;
use crate::pipeline::item::Item;
use crate::pipeline::read::again::Reread;
use crate::pipeline::stats::StageStats;

use super::Restore;
use super::epochs::{Epochs, EpochsSettings};
use super::interleave::{Interleave, InterleaveSettings, StreamFiles};
use super::record_map::{RecordMapOp, RecordMapSettings, apply_map};
use super::shard::RecordShard;
use super::shuffle::{Shuffle, ShuffleSettings};
use super::skip_take::{SkipTake, SkipTakeSettings};

/// The record ops' settings, as the builder collected them: one field per
/// op, each op's own type.
#[derive(Clone, Default)]
pub(crate) struct ChainSettings {
    pub interleave: InterleaveSettings,
    pub skip_take: SkipTakeSettings,
    pub record_map: RecordMapSettings,
    pub epochs: EpochsSettings,
    pub shuffle: ShuffleSettings,
}

impl ChainSettings {
    /// The words given, by name (a mixture refuses them on itself: each of
    /// its sources takes its own).
    pub fn given(&self) -> Vec<&'static str> {
        let d = ChainSettings::default();
        let mut given = Vec::new();
        if self.interleave.shuffle_files {
            given.push("shuffle_files");
        }
        if self.interleave.cycle_length > 1 || self.interleave.block_length > 1 {
            given.push("interleave");
        }
        if self.skip_take != d.skip_take {
            given.push("skip/take");
        }
        if self.record_map.filter.is_some() || self.record_map.map.is_some() {
            given.push("filter/map");
        }
        if self.epochs != d.epochs {
            given.push("repeat");
        }
        if self.shuffle != d.shuffle {
            given.push("shuffle");
        }
        given
    }
}

/// What one logical stream's chain runs with: the ops' settings, the
/// stream's part of the data, its seed and its record shard.
pub(crate) struct ChainConfig {
    pub ops: ChainSettings,
    pub files: Arc<StreamFiles>,
    /// Seed of the shuffle buffer and, unless the files say otherwise, of
    /// the file order.
    pub seed: u64,
    /// Keep records whose ordinal in the interleaved stream is `i mod n`.
    pub record_shard: Option<(u64, u64)>,
}

/// The ops below the epochs, as one type.
type EpochOps = RecordMapOp<SkipTake<RecordShard<Interleave>>>;

/// The record thread's op chain: the record stream of one logical stream
/// (or of one source of a mixture).
pub(crate) struct RecordChain {
    reread: Reread,
    ops: Shuffle<EpochOps>,
}

impl RecordChain {
    /// The chain of `cfg`, not started: nothing is read until
    /// [`start`](Self::start) or [`restore`](Self::restore).
    pub fn new(cfg: &ChainConfig, read_stats: Arc<StageStats>, stats: Arc<StageStats>) -> Self {
        let ops = &cfg.ops;
        let interleave = Interleave::new(
            &ops.interleave,
            cfg.files.clone(),
            cfg.seed,
            read_stats.clone(),
            stats.clone(),
        );
        let shard = RecordShard::new(interleave, cfg.record_shard);
        let skip_take = SkipTake::new(shard, &ops.skip_take);
        let map = RecordMapOp::new(skip_take, &ops.record_map);
        let epochs = Epochs::new(map, ops.epochs, stats.clone());
        let shuffle = Shuffle::new(epochs, ops.shuffle, cfg.seed, stats);
        let then = ops.record_map.map.clone().map(|map| {
            Arc::new(move |item| apply_map(Some(&map), item))
                as Arc<dyn Fn(Item) -> Item + Send + Sync>
        });
        let reread = Reread {
            files: Arc::new(cfg.files.files.clone()),
            read: cfg.files.read.clone(),
            source: cfg.files.source.clone(),
            stats: read_stats,
            then,
        };
        RecordChain {
            reread,
            ops: shuffle,
        }
    }

    /// Starts at the first record of epoch 0.
    pub fn start(&mut self) {
        self.ops.start();
    }

    /// Continues exactly where `parts` were saved: each op takes its own
    /// part, checks it and asks its input to restore its own; a part no op
    /// took is refused.
    pub fn restore(&mut self, parts: RawParts) -> Result<(), PipelineError> {
        let reread = self.reread.clone();
        let mut r = Restore::new(parts, &reread);
        self.ops.restore(&mut r)?;
        Ok(r.finish()?)
    }

    /// The settings that decide the chain's records and their order.
    pub fn identity(&self, id: &mut Identity) {
        self.ops.identity(id);
    }

    /// The state now: every op's part, what a restore needs to continue
    /// from here.
    pub fn state(&mut self) -> SavedParts {
        self.ops.save()
    }

    /// The next record of the stream, or `None` at its end.
    #[inline]
    pub fn next_item(&mut self) -> Result<Option<Item>, PipelineError> {
        self.ops.next()
    }

    /// Reads the records at the given (file, offset) positions again, in
    /// the given order, mapped as the chain maps them (for a restored
    /// grouping).
    pub fn read_again(&self, positions: &[Position]) -> Result<Vec<Item>, PipelineError> {
        self.reread.read(positions)
    }

    /// The chain's files (its records' file indexes point here).
    pub fn files(&self) -> &[String] {
        &self.reread.files
    }
}
