//! The record ops composed, in their fixed order: interleave → record shard
//! → skip/take → filter/map → epochs → shuffle. The chain is one concrete
//! type (each op generic over the one before it), so the record thread's
//! hot path has no dynamic dispatch.
//!
//! It runs on the record thread and is a pure function of the config, the
//! seed and the data, so its output is the same for any number of worker
//! threads. Its whole state is its ops' parts, positions and counters;
//! buffered records are named by (file, byte offset) and read again on
//! restore.

use std::sync::Arc;

use crate::pipeline::error::PipelineError;
use crate::pipeline::stats::StageStats;
use crate::pipeline::threads::shard_reader::read_again;

use super::epochs::Epochs;
use super::interleave::Interleave;
use super::record_map::{RecordMapOp, apply_map};
use super::shard::RecordShard;
use super::shuffle::Shuffle;
use super::skip_take::SkipTake;
use crate::pipeline::checkpoint::{RawParts, SavedParts};

use super::epochs::EpochsPart;
use super::interleave::InterleavePart;
use super::shard::RecordShardPart;
use super::shuffle::ShufflePart;
use super::skip_take::SkipTakePart;
use super::{Item, StreamConfig};

/// The ops below the epochs, as one type.
type EpochOps = RecordMapOp<SkipTake<RecordShard<Interleave>>>;

/// The record thread's op chain: the logical record stream of one host.
pub(crate) struct RecordChain {
    cfg: Arc<StreamConfig>,
    read_stats: Arc<StageStats>,
    ops: Shuffle<EpochOps>,
}

impl RecordChain {
    /// A chain at the start of epoch 0.
    pub fn new(
        cfg: Arc<StreamConfig>,
        read_stats: Arc<StageStats>,
        stats: Arc<StageStats>,
    ) -> Result<Self, PipelineError> {
        let interleave = Interleave::new(cfg.clone(), read_stats.clone(), stats.clone());
        let shard = RecordShard::new(interleave, cfg.record_shard);
        let skip_take = SkipTake::new(shard, cfg.skip, cfg.take);
        let map = RecordMapOp::new(skip_take, cfg.filter.clone(), cfg.map.clone());
        let epochs = Epochs::new(map, cfg.epochs, stats.clone());
        let ops = Shuffle::new(
            epochs,
            cfg.shuffle_buffer,
            cfg.shuffle_across_epochs,
            cfg.seed,
            stats,
        );
        Ok(RecordChain {
            cfg,
            read_stats,
            ops,
        })
    }

    /// A chain continuing exactly where its `parts` were saved: each op
    /// takes its own part and checks it.
    pub fn restore(
        cfg: Arc<StreamConfig>,
        read_stats: Arc<StageStats>,
        stats: Arc<StageStats>,
        parts: &mut RawParts,
    ) -> Result<Self, PipelineError> {
        let shuffle: ShufflePart = parts.take()?;
        let epochs: EpochsPart = parts.take()?;
        let skip_take: SkipTakePart = parts.take()?;
        let shard: RecordShardPart = parts.take()?;
        let interleave: InterleavePart = parts.take()?;
        // A state saved before the first record: the chain at its start
        // (its slots are not open yet, which a restore would refuse).
        if shuffle == ShufflePart::default()
            && epochs == EpochsPart::default()
            && skip_take == SkipTakePart::default()
            && shard == RecordShardPart::default()
            && interleave.next_file == 0
            && interleave.slot_files.iter().all(|&f| f == 0)
        {
            return Self::new(cfg, read_stats, stats);
        }
        Epochs::<EpochOps>::check(cfg.epochs, &epochs, skip_take.passed)?;
        let interleave = Interleave::restore(
            cfg.clone(),
            read_stats.clone(),
            stats.clone(),
            &interleave,
            epochs.epoch,
        )?;
        let shard_op = RecordShard::restore(interleave, cfg.record_shard, &shard);
        let skip_take = SkipTake::restore(shard_op, cfg.skip, cfg.take, &skip_take, shard.ordinal)?;
        let map = RecordMapOp::new(skip_take, cfg.filter.clone(), cfg.map.clone());
        let epochs = Epochs::restore(map, cfg.epochs, stats.clone(), &epochs);
        let ops = Shuffle::new(
            epochs,
            cfg.shuffle_buffer,
            cfg.shuffle_across_epochs,
            cfg.seed,
            stats,
        );
        ops.check(&shuffle)?;
        let mut chain = RecordChain {
            cfg,
            read_stats,
            ops,
        };
        let buffered = chain.read_again(&shuffle.buffer.to_vec())?;
        chain.ops.restore(&shuffle, buffered);
        Ok(chain)
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
    /// shuffle buffer or grouping).
    pub fn read_again(&self, positions: &[(u32, u64)]) -> Result<Vec<Item>, PipelineError> {
        let items = read_again(
            &self.cfg.files,
            &self.cfg.read,
            &self.cfg.source,
            &self.read_stats,
            positions,
        )?;
        Ok(items
            .into_iter()
            .map(|item| apply_map(self.cfg.map.as_ref(), item))
            .collect())
    }
}
