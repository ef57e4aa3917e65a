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

use crate::pipeline::checkpoint::{Identity, Position, SavedParts};
use crate::pipeline::error::PipelineError;
use crate::pipeline::item::Item;
use crate::pipeline::read::again::Reread;
use crate::pipeline::stats::StreamCounters;

use super::epochs::{Epochs, EpochsSettings};
use super::global_shuffle::{Dataset, GlobalShuffle, GlobalShuffleSettings};
use super::interleave::{Interleave, InterleaveSettings, StreamFiles};
use super::record_map::{RecordMapOp, RecordMapSettings, apply_map};
use super::shard::RecordShard;
use super::shuffle::{Shuffle, ShuffleSettings};
use super::skip_take::{SkipTake, SkipTakeSettings};
use super::{EpochInput, Restore};

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
    /// The global shuffle's records, read at the start
    /// ([`Loaded`](crate::pipeline::loaded::Loaded)).
    pub dataset: Option<Arc<Dataset>>,
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
    #[inline]
    fn next_run(&mut self, out: &mut Vec<Item>, max: usize) -> Result<(), PipelineError> {
        match self {
            Input::Files(op) => op.next_run(out, max),
            Input::Global(op) => op.next_run(out, max),
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
    pub fn new(cfg: &ChainConfig, counters: &StreamCounters) -> Result<Self, PipelineError> {
        let (read_stats, stats) = (counters.read.clone(), counters.stream.clone());
        let accounts = &counters.accounts;
        let ops = &cfg.ops;
        ops.check()?;
        let input = if ops.global_shuffle.on {
            Input::Global(GlobalShuffle::new(
                &ops.global_shuffle,
                cfg.dataset.clone(),
                cfg.files.files.clone(),
                cfg.files.ranges.clone(),
                cfg.job_seed,
                cfg.place,
                cfg.files.scan.clone(),
                // The workers read what the start left them (`start.rs`).
                cfg.files.unread.is_some(),
                read_stats.clone(),
                stats.clone(),
            )?)
        } else {
            Input::Files(Interleave::new(
                &ops.interleave,
                cfg.files.clone(),
                cfg.seed,
                ops.epochs.epochs(),
                read_stats.clone(),
                stats.clone(),
            ))
        };
        let shard = RecordShard::new(input, cfg.record_shard);
        let skip_take = SkipTake::new(shard, &ops.skip_take, accounts.clone());
        let map = RecordMapOp::new(skip_take, &ops.record_map, accounts.clone());
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

    /// Continues exactly where the chain's parts were saved: each op takes
    /// its own part, checks it and asks its input to restore its own,
    /// reading records again as this chain reads them.
    pub fn restore(&mut self, r: &mut Restore<'_>) -> Result<(), PipelineError> {
        let mut chain = r.rereading(&self.reread);
        self.ops.restore(&mut chain)?;
        r.give_back(chain);
        Ok(())
    }

    /// The settings that decide the chain's records and their order.
    pub fn identity(&self, id: &mut Identity) {
        self.ops.identity(id);
    }

    /// Pushes the state now: every op's part, what a restore needs to
    /// continue from here.
    pub fn save(&mut self, parts: &mut SavedParts) {
        self.ops.save(parts);
    }

    /// The next record of the stream, or `None` at its end.
    #[inline]
    pub fn next_item(&mut self) -> Result<Option<Item>, PipelineError> {
        self.ops.next()
    }

    /// Appends the stream's next records to `out`: at least one and at most
    /// `max`, none at its end (the records of as many
    /// [`next_item`](Self::next_item) calls).
    #[inline]
    pub fn next_run(&mut self, out: &mut Vec<Item>, max: usize) -> Result<(), PipelineError> {
        self.ops.next_run(out, max)
    }

    /// Reads the records at the given (file, offset) positions again, in
    /// the given order, mapped as the chain maps them (for a restored
    /// grouping).
    pub fn read_again(&self, positions: &[Position]) -> Result<Vec<Item>, PipelineError> {
        self.reread.read(positions)
    }

    /// Records taken in and not yet passed on (its shuffle buffer's).
    pub fn held(&self) -> u64 {
        self.ops.held()
    }

    /// The chain's files (its records' file indexes point here).
    pub fn files(&self) -> &[String] {
        &self.reread.files
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pipeline::checkpoint::NodeProto;
    use crate::pipeline::item::LengthScan;
    use crate::pipeline::ops::interleave::RecordRange;
    use crate::record::{Compression, ReadOptions, RecordWriter};
    use crate::source::SourceOptions;

    /// The chain's parts now, as a state holds them.
    fn nodes(chain: &mut RecordChain) -> Vec<crate::pipeline::checkpoint::NodeProto> {
        let mut parts = SavedParts::default();
        chain.save(&mut parts);
        parts.nodes()
    }

    /// Files of `counts` records each, the records of file `f` named
    /// `f:i` (lengths vary, so blocks end anywhere).
    fn write_files(dir: &std::path::Path, counts: &[usize]) -> Vec<String> {
        counts
            .iter()
            .enumerate()
            .map(|(f, &n)| {
                let path = dir.join(format!("f{f}.tfrecord"));
                let mut w = RecordWriter::create(&path, Compression::None).unwrap();
                for i in 0..n {
                    let pad = "x".repeat(i * 37 % 300);
                    w.write_record(format!("{f}:{i}:{pad}").as_bytes()).unwrap();
                }
                w.finish().unwrap();
                path.display().to_string()
            })
            .collect()
    }

    /// The chain of a case, with or without a length scan in its shard
    /// readers: started, or restored from `state` (a chain's saved nodes).
    fn chain_of(
        files: &[String],
        ranges: &[Option<RecordRange>],
        ops: &ChainSettings,
        record_shard: Option<(u64, u64)>,
        scan: bool,
        state: Option<Vec<NodeProto>>,
    ) -> RecordChain {
        let scan: Option<LengthScan> = scan.then(|| Arc::new(|r: &[u8]| Some(r.len() * 3)) as _);
        let cfg = ChainConfig {
            ops: ops.clone(),
            files: Arc::new(StreamFiles {
                files: files.to_vec(),
                ranges: ranges.to_vec(),
                // Small reads: runs meet block ends often.
                read: ReadOptions::default().chunk_size(4096),
                source: SourceOptions::default(),
                scan,
                unread: None,
                spans: None,
                kept: None,
                order_seed: None,
            }),
            seed: 7,
            record_shard,
            place: (0, 1),
            job_seed: 7,
            dataset: None,
        };
        let mut chain = RecordChain::new(&cfg, &StreamCounters::default()).unwrap();
        match state {
            None => chain.start(),
            Some(nodes) => {
                let parts = crate::pipeline::checkpoint::RawParts::new("stream/0".into(), nodes);
                let mut r = Restore::root(parts.unwrap());
                chain.restore(&mut r).unwrap();
                r.finish().unwrap();
            }
        }
        chain
    }

    /// Runs of at most `max` from `runs` against single records from
    /// `single` to the end: the same records (bytes, place, carried length,
    /// mapped or not) in the same order, and the same state after each run.
    /// Returns how many.
    fn same_to_the_end(
        single: &mut RecordChain,
        runs: &mut RecordChain,
        max: usize,
        what: &str,
    ) -> usize {
        let mut got = 0;
        loop {
            let mut run = Vec::new();
            runs.next_run(&mut run, max).unwrap();
            assert!(run.len() <= max, "{what}");
            for item in &run {
                let one = single.next_item().unwrap().expect("as many singles");
                assert_eq!(
                    (
                        item.file,
                        item.offset,
                        &item.data,
                        item.measured,
                        item.mapped
                    ),
                    (one.file, one.offset, &one.data, one.measured, one.mapped),
                    "{what}"
                );
            }
            if run.is_empty() {
                assert!(single.next_item().unwrap().is_none(), "{what}");
            }
            assert_eq!(nodes(runs), nodes(single), "{what}");
            if run.is_empty() {
                break;
            }
            got += run.len();
        }
        got
    }

    /// A case: its name, the ops, the record shard and the files' ranges.
    type Case = (
        &'static str,
        ChainSettings,
        Option<(u64, u64)>,
        Vec<Option<RecordRange>>,
    );

    /// Runs of any length are the records single calls give, in their
    /// order, with the same state after each run: every record op present
    /// or absent, interleaved or not, over several epochs.
    #[test]
    fn runs_are_the_single_records_in_a_row() {
        let dir = tempfile::tempdir().unwrap();
        let files = write_files(dir.path(), &[23, 0, 41, 7, 30]);
        let plain = ChainSettings::default();
        let with = |f: &dyn Fn(&mut ChainSettings)| {
            let mut ops = plain.clone();
            f(&mut ops);
            ops
        };
        let interleave = |cycle, block, shuffle_files| InterleaveSettings {
            shuffle_files,
            cycle_length: cycle,
            block_length: block,
        };
        let skip_take = |skip, take| SkipTakeSettings { skip, take };
        let two_epochs = EpochsSettings {
            repeat: Some(Some(2)),
        };
        let keep_short: super::super::record_map::RecordFilter = Arc::new(|r: &[u8]| r.len() < 200);
        let ranges = vec![
            None,
            None,
            Some(RecordRange {
                first: 3,
                count: 20,
            }),
            None,
            Some(RecordRange {
                first: 0,
                count: 11,
            }),
        ];
        // Every file read whole, no record shard.
        let case = |name, ops| -> Case { (name, ops, None, vec![]) };
        let cases: Vec<Case> = vec![
            case("plain", plain.clone()),
            case("epochs", with(&|o| o.epochs = two_epochs)),
            case(
                "interleave 3x1",
                with(&|o| o.interleave = interleave(3, 1, false)),
            ),
            case(
                "interleave 2x5, shuffled files, 2 epochs",
                with(&|o| {
                    o.interleave = interleave(2, 5, true);
                    o.epochs = two_epochs;
                }),
            ),
            case(
                "block 4, one file open",
                with(&|o| o.interleave = interleave(1, 4, false)),
            ),
            (
                "record shard",
                with(&|o| o.epochs = two_epochs),
                Some((1, 3)),
                vec![],
            ),
            case(
                "skip and take",
                with(&|o| {
                    o.skip_take = skip_take(9, Some(50));
                    o.epochs = two_epochs;
                }),
            ),
            case(
                "skip, and a take with no end",
                with(&|o| {
                    o.skip_take = skip_take(3, Some(u64::MAX));
                    o.epochs = two_epochs;
                }),
            ),
            case("skip only", with(&|o| o.skip_take = skip_take(30, None))),
            case(
                "filter",
                with(&|o| o.record_map.filter = Some(keep_short.clone())),
            ),
            case(
                "shuffle",
                with(&|o| {
                    o.shuffle = ShuffleSettings {
                        buffer: 16,
                        across_epochs: false,
                    };
                    o.epochs = two_epochs;
                }),
            ),
            case(
                "shuffle across epochs, interleave 3x2",
                with(&|o| {
                    o.shuffle = ShuffleSettings {
                        buffer: 7,
                        across_epochs: true,
                    };
                    o.epochs = two_epochs;
                    o.interleave = interleave(3, 2, false);
                }),
            ),
            (
                "record ranges",
                with(&|o| o.interleave = interleave(2, 3, false)),
                None,
                ranges.clone(),
            ),
        ];
        for (name, ops, shard, ranges) in &cases {
            for scan in [false, true] {
                let chain = |state| chain_of(&files, ranges, ops, *shard, scan, state);
                for max in [1, 2, 5, 64, 1000] {
                    let what = format!("{name}, scan {scan}, max {max}");
                    let got = same_to_the_end(&mut chain(None), &mut chain(None), max, &what);
                    assert!(got > 0, "{what}");
                }
                // From a state taken anywhere (mid-block, mid-cycle, in the
                // second epoch): the restored chains agree too.
                for at in [1, 7, 33, 90] {
                    let mut first = chain(None);
                    if (0..at).any(|_| first.next_item().unwrap().is_none()) {
                        continue; // a stream shorter than that
                    }
                    let nodes = nodes(&mut first);
                    let what = format!("{name}, scan {scan}, restored at {at}");
                    same_to_the_end(
                        &mut chain(Some(nodes.clone())),
                        &mut chain(Some(nodes)),
                        5,
                        &what,
                    );
                }
            }
        }
    }
}
