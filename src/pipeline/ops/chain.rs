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
//! [`RecordChain::new`] and the chain's types here.

use std::sync::Arc;

use crate::pipeline::checkpoint::{Identity, Position, RawParts, SavedParts};
use crate::pipeline::error::PipelineError;
use crate::pipeline::item::Item;
use crate::pipeline::read::again::Reread;
use crate::pipeline::stats::StageStats;

use super::epochs::{Epochs, EpochsSettings};
use super::global_shuffle::{GlobalShuffle, GlobalShuffleSettings};
use super::interleave::{Interleave, InterleaveSettings, RecordRange, StreamFiles};
use super::record_map::{RecordMapOp, RecordMapSettings, apply_map};
use super::shard::RecordShard;
use super::shuffle::{Shuffle, ShuffleSettings};
use super::skip_take::{SkipTake, SkipTakeSettings};
use super::{EpochInput, Restore};
use crate::record::ReadOptions;
use crate::source::SourceOptions;

/// The record ops' settings, as the builder collected them: one field per
/// op, each op's own type.
#[derive(Clone, Default)]
pub(crate) struct ChainSettings {
    pub interleave: InterleaveSettings,
    pub global_shuffle: GlobalShuffleSettings,
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
        if self.shuffle.buffer > 0 {
            given.push("shuffle");
        }
        if self.global_shuffle.on {
            given.push("global_shuffle");
        }
        given
    }

    /// Checks the ops' settings together.
    pub fn check(&self) -> Result<(), PipelineError> {
        let i = &self.interleave;
        if self.global_shuffle.on && (i.shuffle_files || i.cycle_length > 1 || i.block_length > 1) {
            return Err(PipelineError::Config(
                "global_shuffle reads the records in a permutation of all of them: leave out \
                 shuffle_files and interleave, which order files"
                    .into(),
            ));
        }
        Ok(())
    }

    /// What the ops need once per pipeline before any stream opens (the
    /// global shuffle's indexes), from the pipeline's files.
    pub fn prepare(
        &mut self,
        files: &[String],
        ranges: &[Option<RecordRange>],
        read: &ReadOptions,
        source: &SourceOptions,
    ) -> Result<(), PipelineError> {
        self.global_shuffle.prepare(files, ranges, read, source)
    }

    /// True when each stream reads every file and takes its share of
    /// their records by position (the global shuffle), rather than a share
    /// of the files or of the interleaved records.
    pub fn shares_by_position(&self) -> bool {
        self.global_shuffle.on
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
    /// The stream's index among the job's streams, and their count.
    pub place: (u64, u64),
    /// The pipeline's seed, the same on every stream (what a permutation
    /// all streams share draws from).
    pub job_seed: u64,
}

/// The first op: files interleaved, or records by a global permutation.
// One per chain: boxing the larger variant would add a pointer chase to
// every record for no memory worth saving.
#[allow(clippy::large_enum_variant)]
enum Input {
    Files(Interleave),
    Global(GlobalShuffle),
}

impl EpochInput for Input {
    #[inline]
    fn next(&mut self) -> Result<Option<Item>, PipelineError> {
        match self {
            Input::Files(op) => op.next(),
            Input::Global(op) => op.next(),
        }
    }
    fn stop(&mut self) {
        match self {
            Input::Files(op) => op.stop(),
            Input::Global(op) => op.stop(),
        }
    }
    fn start_epoch(&mut self, epoch: u64) {
        match self {
            Input::Files(op) => op.start_epoch(epoch),
            Input::Global(op) => op.start_epoch(epoch),
        }
    }
    fn input_done(&self) -> bool {
        match self {
            Input::Files(op) => op.input_done(),
            Input::Global(op) => op.input_done(),
        }
    }
    fn save(&self, parts: &mut SavedParts) {
        match self {
            Input::Files(op) => op.save(parts),
            Input::Global(op) => op.save(parts),
        }
    }
    fn restore(&mut self, r: &mut Restore<'_>) -> Result<(), PipelineError> {
        match self {
            Input::Files(op) => op.restore(r),
            Input::Global(op) => op.restore(r),
        }
    }
    fn identity(&self, id: &mut Identity) {
        match self {
            Input::Files(op) => op.identity(id),
            Input::Global(op) => op.identity(id),
        }
    }
}

/// The ops below the epochs, as one type.
type EpochOps = RecordMapOp<SkipTake<RecordShard<Input>>>;

/// The record thread's op chain: the record stream of one logical stream
/// (or of one source of a mixture).
pub(crate) struct RecordChain {
    reread: Reread,
    ops: Shuffle<EpochOps>,
}

impl RecordChain {
    /// The chain of `cfg`, not started: nothing is read until
    /// [`start`](Self::start) or [`restore`](Self::restore).
    pub fn new(
        cfg: &ChainConfig,
        read_stats: Arc<StageStats>,
        stats: Arc<StageStats>,
    ) -> Result<Self, PipelineError> {
        let ops = &cfg.ops;
        ops.check()?;
        let input = if ops.global_shuffle.on {
            Input::Global(GlobalShuffle::new(
                &ops.global_shuffle,
                cfg.files.files.clone(),
                cfg.files.ranges.clone(),
                cfg.job_seed,
                cfg.place,
                cfg.files.scan.clone(),
                read_stats.clone(),
                stats.clone(),
            )?)
        } else {
            Input::Files(Interleave::new(
                &ops.interleave,
                cfg.files.clone(),
                cfg.seed,
                read_stats.clone(),
                stats.clone(),
            ))
        };
        let shard = RecordShard::new(input, cfg.record_shard);
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
        Ok(RecordChain {
            reread,
            ops: shuffle,
        })
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
