//! Record-level ops, one file each, in the order they run on the record
//! thread: [`interleave`] (file order and interleaving; opens the shard
//! readers), [`shard`] (records of this host), [`skip_take`],
//! [`record_map`] (filter and map on serialized records), [`epochs`]
//! (repeat) and [`shuffle`] (its RNG and block buffer). [`chain`] composes
//! them statically — each op is generic over the op before it, so the hot
//! path has no dynamic dispatch — and gives the record thread one object
//! with `next`, `state` and `restore`.
//!
//! Each op keeps its own part of the checkpoint, keyed and versioned (see
//! [`checkpoint`](crate::pipeline::checkpoint)): `save` pushes it, `restore`
//! takes it back and checks it against the pipeline, so an invalid state is
//! an error, never a panic or a different run.

pub(crate) mod chain;
pub(crate) mod epochs;
pub(crate) mod interleave;
pub(crate) mod mix;
pub(crate) mod record_map;
pub(crate) mod shard;
pub(crate) mod shuffle;
pub(crate) mod skip_take;
pub(crate) mod stream;

use std::sync::Arc;

use bytes::Bytes;

use super::checkpoint::SavedParts;
use super::error::PipelineError;
use crate::record::ReadOptions;

/// A record on its way through the pipeline, with where it came from.
#[derive(Clone, Debug)]
pub(crate) struct Item {
    pub data: Bytes,
    /// Index of its file in the host's file list.
    pub file: u32,
    /// Byte offset of its header in the (uncompressed) file.
    pub offset: u64,
    /// The record's length as the grouping measures it, when its shard
    /// reader measured it already ([`StreamConfig::scan`]); else
    /// [`UNMEASURED`] (not scanned, changed by a map, read again on a
    /// restore, or a scan that failed: the record thread measures it in its
    /// turn, and an error names the record there).
    pub measured: u32,
    /// `data` is a view of a mapped file: holding it pins page-cache pages
    /// (which the kernel can reclaim), not a heap chunk of other records.
    pub mapped: bool,
}

/// [`Item::measured`] when the record's length is not known yet.
pub(crate) const UNMEASURED: u32 = u32::MAX;

impl Item {
    /// A record that is not a view of a mapped file, not measured yet.
    pub fn new(data: Bytes, file: u32, offset: u64) -> Self {
        Item {
            data,
            file,
            offset,
            measured: UNMEASURED,
            mapped: false,
        }
    }

    /// The length its shard reader measured, if it did.
    #[inline]
    pub fn measured(&self) -> Option<usize> {
        (self.measured != UNMEASURED).then_some(self.measured as usize)
    }
}

/// The grouping's length scan of a serialized record, run by the shard
/// readers as they frame it (its bytes are in cache then, and the record
/// thread, which orders every record, is spared it); `None` when it cannot
/// tell (the record thread measures again and reports why).
pub(crate) type LengthScan = Arc<dyn Fn(&[u8]) -> Option<usize> + Send + Sync>;

/// A length for [`Item::measured`]: `UNMEASURED` for a scan that failed or
/// a length that does not fit.
#[inline]
pub(crate) fn carried(scan: &LengthScan, data: &[u8]) -> u32 {
    scan(data)
        .and_then(|n| u32::try_from(n).ok())
        .filter(|&n| n != UNMEASURED)
        .unwrap_or(UNMEASURED)
}

/// A filter on serialized records.
pub type RecordFilter = Arc<dyn Fn(&[u8]) -> bool + Send + Sync>;
/// A map on serialized records; it must be deterministic, since a restored
/// pipeline applies it again to records it reads again.
pub type RecordMap = Arc<dyn Fn(Bytes) -> Bytes + Send + Sync>;

/// What the record ops do; fixed when the pipeline is built.
#[derive(Clone)]
pub(crate) struct StreamConfig {
    /// This host's files, in listing order.
    pub files: Vec<String>,
    /// Per file, the records to read from it (a TFDS split slice); empty
    /// when every file is read whole.
    pub ranges: Vec<Option<RecordRange>>,
    pub read: ReadOptions,
    /// How the shards' bytes are fetched.
    pub source: crate::source::SourceOptions,
    /// Seed of the shuffle buffer: the host's own.
    pub seed: u64,
    /// Seed of the file order with `shuffle_files`: the host's seed with
    /// file sharding; with record sharding one shared by every host, since
    /// which records a host owns depends on the file order.
    pub file_order_seed: u64,
    pub shuffle_files: bool,
    pub cycle_length: usize,
    pub block_length: usize,
    /// Keep records whose ordinal in the interleaved stream is `i mod n`.
    pub record_shard: Option<(u64, u64)>,
    pub skip: u64,
    pub take: Option<u64>,
    pub filter: Option<RecordFilter>,
    pub map: Option<RecordMap>,
    /// The grouping's length scan, for the shard readers to run (`None`
    /// with a record map, which changes the bytes measured).
    pub scan: Option<LengthScan>,
    /// Records in the shuffle buffer; 0: no shuffle.
    pub shuffle_buffer: usize,
    /// Keep the buffer across epoch boundaries (`repeat` before `shuffle`)
    /// instead of draining it at the end of each epoch.
    pub shuffle_across_epochs: bool,
    /// Epochs to read; `None`: forever.
    pub epochs: Option<u64>,
}

/// The records of one file to read: `count` records from its record
/// number `first` (counted from 0 in the file). The records before are read
/// and dropped (TFRecord has no index); the file is closed after the last.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecordRange {
    pub first: u64,
    pub count: u64,
}

impl RecordRange {
    /// The record number after the last one read.
    pub(crate) fn end(self) -> u64 {
        self.first.saturating_add(self.count)
    }
}

/// The ops below [`epochs`]: one epoch's records, restartable per epoch.
pub(crate) trait EpochInput {
    /// The next record of this epoch, `None` when its input is done.
    fn next(&mut self) -> Result<Option<Item>, PipelineError>;
    /// Ends this epoch's input here (`take` reached): stop reading.
    fn stop(&mut self);
    /// Starts epoch `epoch` from its first record.
    fn start_epoch(&mut self, epoch: u64);
    /// True when this epoch's input is done (every file read).
    fn input_done(&self) -> bool;
    /// Pushes this op's part of the state (then its input's).
    fn save(&self, parts: &mut SavedParts);
}
