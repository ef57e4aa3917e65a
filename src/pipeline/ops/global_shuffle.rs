//! Global shuffle: each epoch reads every record of the dataset in a
//! permutation of all of them — Grain's model, over TFRecord shards as
//! they are, plain or compressed, through their indexes (`crate::index`).
//!
//! The permutation is a pure function of the pipeline's seed and the epoch
//! ([`IndexShuffle`]: a keyed Feistel network, so no table of the dataset's
//! size is kept and any position is found at once). Logical stream `s` of
//! `S` takes the epoch's positions `s, s + S, s + 2S, …`, so on any host
//! count every record is read exactly once per epoch; the stream's state is
//! the records it took this epoch (the epoch is the `epochs` op's).
//!
//! **Block mode** (`block_bytes > 0`) keeps reads large on object stores:
//! the records of each file are cut into blocks of about `block_bytes`, the
//! blocks are permuted, a stream takes every `S`-th block, and the records
//! of each window of `window` blocks are read together and shuffled among
//! themselves.
//!
//! A reader thread (`infeed-global`) reads ahead of the op, a chunk of
//! records at a time through [`RandomAccess::get_many`] (neighbours in one
//! read, the rest in parallel), measuring each record as a shard reader
//! does. Where the pipeline lets the workers read its records (nothing
//! before them needs their bytes: `start.rs`, `needs_bytes_before_workers`), the
//! records of plain local shards are not read here: each is handed on
//! unread, a stand-in of its length at its place, and the worker that
//! assembles it reads and checks it (`read/in_workers.rs`), so that the
//! one thread every record passes does no per-record I/O or copy. Where
//! the grouping measures records, the reader scans each of those in the
//! shards' maps that the workers read it through ([`Dataset::maps`]).

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::mpsc::{Receiver, sync_channel};
use std::thread::JoinHandle;

use crate::index::{AccessOptions, IndexOptions, RandomAccess};
use crate::pipeline::checkpoint::{Identity, SavedParts, prost_part};
use crate::pipeline::error::PipelineError;
use crate::pipeline::item::{Item, LengthScan, UNMEASURED, carried};
use crate::pipeline::read::shared_maps::SharedMaps;
use crate::pipeline::read::unread::{Indexes, UnreadShard};
use crate::pipeline::rng::{IndexShuffle, domain};
use crate::pipeline::stats::StageStats;
use crate::pipeline::threads::spawn;
use crate::record::{FOOTER_LEN, HEADER_LEN, ReadOptions};
use crate::source::SourceOptions;

use super::interleave::{RecordRange, write_files};
use super::{EpochInput, Restore, invalid};

/// Records read at a time in record mode.
const CHUNK: u64 = 256;
/// Chunks read ahead of the op.
const AHEAD: usize = 2;
/// Blocks read and shuffled together in block mode, by default.
pub const DEFAULT_WINDOW: u64 = 8;

/// The words of `global_shuffle`, as the builder collected them.
#[derive(Clone, Default)]
pub(crate) struct GlobalShuffleSettings {
    /// Asked for.
    pub on: bool,
    /// Block mode: blocks of about this many bytes; 0: record mode.
    pub block_bytes: u64,
    /// Block mode: blocks read and shuffled together.
    pub window: u64,
    /// Where the shards' indexes are (`None`: `.infeed-index` beside the
    /// shards, else beside each shard: `crate::index::index_urls`).
    pub index_dir: Option<String>,
}

impl GlobalShuffleSettings {
    /// Reads (or builds) the indexes of `files` once for the whole
    /// pipeline; `ranges`: the records of each file to take (TFDS slices).
    /// `None` when the global shuffle is off.
    pub fn load(
        &self,
        files: &[String],
        ranges: &[Option<RecordRange>],
        read: &ReadOptions,
        source: &SourceOptions,
    ) -> Result<Option<Arc<Dataset>>, PipelineError> {
        if !self.on {
            return Ok(None);
        }
        let mut opts = AccessOptions {
            index: IndexOptions {
                dir: self.index_dir.clone(),
                ..IndexOptions::default()
            },
            ..AccessOptions::default()
        };
        opts.index.build.read = read.clone();
        opts.index.build.source = source.clone();
        if self.block_bytes > 0 {
            // A block is read whole: its records lie together.
            opts.coalesce_bytes = self.block_bytes;
        }
        let access = RandomAccess::open(files, &opts)?;
        Ok(Some(Arc::new(Dataset::new(
            access,
            ranges,
            self.block_bytes,
        )?)))
    }

    /// Records stream `place.0` of `place.1` reads of `data` in epoch
    /// `epoch` with the job's `seed`: what `equal_batches` counts.
    pub fn stream_records(
        &self,
        data: &Arc<Dataset>,
        seed: u64,
        place: (u64, u64),
        epoch: u64,
    ) -> u64 {
        Order::new(data.clone(), self, seed, epoch, place).count()
    }
}

/// The records a global shuffle permutes: every record of the files, or of
/// their ranges, with the file of each.
pub(crate) struct Dataset {
    access: RandomAccess,
    /// Per file: the access index of its first selected record.
    firsts: Vec<u64>,
    /// Records selected before each file; last: the total.
    starts: Vec<u64>,
    /// Block mode: each block's first position and its records.
    blocks: Vec<(u64, u64)>,
    /// Some index leaves a corrupt region out (a shard read with
    /// `on_corrupt(Skip)`): records are then checked for the regions
    /// beside them, to count.
    gaps: bool,
    /// Maps of its shards, numbered as its files, that the workers read
    /// the records left unread through, and that its reader scans those
    /// records' lengths in where the grouping measures them.
    pub maps: Arc<SharedMaps>,
}

impl Dataset {
    fn new(
        access: RandomAccess,
        ranges: &[Option<RecordRange>],
        block_bytes: u64,
    ) -> Result<Dataset, PipelineError> {
        let mut firsts = Vec::new();
        let mut starts = vec![0];
        let mut first = 0u64;
        let mut blocks = Vec::new();
        for (f, index) in access.indexes().enumerate() {
            let range = ranges.get(f).copied().flatten();
            let (from, count) = match range {
                None => (0, index.len()),
                Some(r) => (
                    r.first.min(index.len()),
                    r.count.min(index.len().saturating_sub(r.first)),
                ),
            };
            firsts.push(first + from);
            first += index.len();
            let start = *starts.last().unwrap_or(&0);
            if block_bytes > 0 {
                let mut block = (start, 0u64, 0u64);
                for i in from..from + count {
                    let framed = index.record(i).map_or(0, |(_, n)| n);
                    block.1 += 1;
                    block.2 += framed;
                    if block.2 >= block_bytes {
                        blocks.push((block.0, block.1));
                        block = (block.0 + block.1, 0, 0);
                    }
                }
                if block.1 > 0 {
                    blocks.push((block.0, block.1));
                }
            }
            starts.push(start + count);
        }
        let gaps = access.indexes().any(|index| index.has_corrupt_regions());
        let maps = Arc::new(SharedMaps::new(access.indexes().count()));
        Ok(Dataset {
            gaps,
            maps,
            access,
            firsts,
            starts,
            blocks,
        })
    }

    /// The index of each plain local shard, by its URL: the shards whose
    /// records the workers may read themselves.
    pub fn plain_local_indexes(&self) -> Indexes {
        let indexes = self.access.shards().zip(self.access.indexes()).enumerate();
        Arc::new(
            indexes
                .filter(|(i, _)| self.access.plain_local(*i))
                .map(|(_, (url, index))| (url.to_owned(), index.clone()))
                .collect(),
        )
    }

    /// Records the shuffle permutes.
    pub fn len(&self) -> u64 {
        self.starts.last().copied().unwrap_or(0)
    }

    /// The access index of selected record `position`.
    fn access_index(&self, position: u64) -> u64 {
        let file = self.starts.partition_point(|&s| s <= position) - 1;
        self.firsts[file] + (position - self.starts[file])
    }
}

/// The order in which one stream reads one epoch: a pure function of the
/// dataset, the seed, the epoch and the stream's place.
#[derive(Clone)]
struct Order {
    data: Arc<Dataset>,
    place: (u64, u64),
    window: u64,
    /// Record mode: the epoch's permutation of records; block mode: of
    /// blocks.
    perm: IndexShuffle,
    seed: u64,
    epoch: u64,
}

impl Order {
    fn new(
        data: Arc<Dataset>,
        settings: &GlobalShuffleSettings,
        seed: u64,
        epoch: u64,
        place: (u64, u64),
    ) -> Order {
        let (n, d) = if settings.block_bytes > 0 {
            (data.blocks.len() as u64, domain::GLOBAL_BLOCKS)
        } else {
            (data.len(), domain::GLOBAL_SHUFFLE)
        };
        Order {
            perm: IndexShuffle::new(n, seed, d, epoch.wrapping_mul(8)),
            window: if settings.block_bytes > 0 {
                settings.window.max(1)
            } else {
                0
            },
            data,
            place,
            seed,
            epoch,
        }
    }

    /// Positions of the permutation this stream takes (records, or blocks).
    fn taken(&self) -> u64 {
        let (s, streams) = self.place;
        self.perm.len().saturating_sub(s).div_ceil(streams.max(1))
    }

    /// The records of this stream's window `w` (block mode), in the order
    /// it emits them.
    fn window_records(&self, w: u64) -> Vec<u64> {
        let (s, streams) = self.place;
        let first = w.saturating_mul(self.window);
        let last = first.saturating_add(self.window).min(self.taken());
        let mut positions = Vec::new();
        for j in first..last {
            let (start, count) = self.data.blocks[self.perm.at(j * streams + s) as usize];
            positions.extend(start..start + count);
        }
        let order = IndexShuffle::new(
            positions.len() as u64,
            self.seed,
            domain::GLOBAL_WINDOWS,
            ((self.epoch << 32) ^ w).wrapping_mul(8),
        );
        (0..positions.len() as u64)
            .map(|k| positions[order.at(k) as usize])
            .collect()
    }

    /// Records this stream reads this epoch.
    fn count(&self) -> u64 {
        if self.window == 0 {
            return self.taken();
        }
        let (s, streams) = self.place;
        (0..self.taken())
            .map(|j| self.data.blocks[self.perm.at(j * streams + s) as usize].1)
            .sum()
    }

    /// The stream's records from its `from`-th on, as access indices in
    /// chunks: `CHUNK` records at a time in record mode, the rest of a
    /// window at a time in block mode.
    fn chunks(&self, from: u64) -> impl Iterator<Item = Vec<u64>> + '_ {
        let (s, streams) = self.place;
        // Block mode: the window of record `from`, and where in it it is.
        let (mut window, mut skip) = (0u64, from);
        if self.window > 0 {
            loop {
                let first = window * self.window;
                if first >= self.taken() {
                    break;
                }
                let last = (first + self.window).min(self.taken());
                let size: u64 = (first..last)
                    .map(|j| self.data.blocks[self.perm.at(j * streams + s) as usize].1)
                    .sum();
                if skip < size {
                    break;
                }
                skip -= size;
                window += 1;
            }
        }
        let mut k = from;
        std::iter::from_fn(move || {
            let chunk: Vec<u64> = if self.window == 0 {
                let end = (k + CHUNK).min(self.taken());
                let chunk = (k..end)
                    .map(|k| self.data.access_index(self.perm.at(k * streams + s)))
                    .collect();
                k = end;
                chunk
            } else {
                let records = self.window_records(window);
                window += 1;
                let rest = records[(skip as usize).min(records.len())..]
                    .iter()
                    .map(|&p| self.data.access_index(p))
                    .collect();
                skip = 0;
                rest
            };
            (!chunk.is_empty()).then_some(chunk)
        })
    }
}

/// The reader thread's side: chunks of items, in order.
struct Ahead {
    rx: Receiver<Result<Vec<Item>, PipelineError>>,
    handle: Option<JoinHandle<()>>,
}

impl Ahead {
    /// Reads `order`'s records from the stream's `from`-th on. A thread the
    /// system refuses to start gives [`PipelineError::Spawn`] in place of
    /// the first chunk, as a thread gives a failed read.
    fn spawn(
        order: Order,
        from: u64,
        scan: Option<LengthScan>,
        leave_unread: bool,
        stats: Arc<StageStats>,
    ) -> Ahead {
        let (tx, rx) = sync_channel(AHEAD);
        let spawned = spawn("infeed-global", move || {
            let mut open = Vec::new();
            for indices in order.chunks(from) {
                let timer = stats.busy_timer();
                let items = chunk_items(
                    &order.data,
                    &indices,
                    leave_unread,
                    &mut open,
                    scan.as_ref(),
                );
                if let Ok(items) = &items {
                    // The regions its shards' indexes leave out, as a shard
                    // reader skips and counts them: each once an epoch, by
                    // the one stream that takes the record after it.
                    if order.data.gaps {
                        let (regions, bytes) = indices
                            .iter()
                            .map(|&i| order.data.access.corrupt_at(i))
                            .fold((0, 0), |a, b| (a.0 + b.0, a.1 + b.1));
                        stats.add_skipped(regions, bytes);
                    }
                    stats.add_records(items.len() as u64);
                    stats.add_bytes(items.iter().map(|i| i.data.len() as u64 + 16).sum());
                }
                drop(timer);
                let failed = items.is_err();
                let _wait = stats.wait_timer();
                if tx.send(items).is_err() || failed {
                    return;
                }
            }
        });
        match spawned {
            Ok(handle) => Ahead {
                rx,
                handle: Some(handle),
            },
            Err(refused) => {
                let (tx, rx) = sync_channel(1);
                // Room for it: the channel is new.
                let _ = tx.send(Err(refused));
                Ahead { rx, handle: None }
            }
        }
    }
}

/// The records at `indices` of `data`, in order: with `leave_unread`,
/// those of plain local shards as unread stand-ins at their places, for
/// the workers to read (`open`: those shards, opened on their first
/// record), each measured with `scan` in the maps the workers read it
/// through ([`Dataset::maps`]); the others read here, neighbours
/// together, each measured with `scan` (and so is a record left unread
/// whose scan fails: the record thread measures it again, and names it).
fn chunk_items<'a>(
    data: &'a Dataset,
    indices: &[u64],
    leave_unread: bool,
    open: &mut Vec<Option<UnreadShard<'a>>>,
    scan: Option<&LengthScan>,
) -> Result<Vec<Item>, PipelineError> {
    let mut items = Vec::with_capacity(indices.len());
    let mut to_read: Vec<(usize, u64)> = Vec::new();
    for &i in indices {
        let (shard, offset, framed) = data.access.place(i)?;
        if !(leave_unread && data.access.plain_local(shard)) {
            to_read.push((items.len(), i));
            items.push(None);
            continue;
        }
        if open.len() <= shard {
            open.resize_with(shard + 1, || None);
        }
        let file = match &mut open[shard] {
            Some(file) => file,
            empty => empty.insert(UnreadShard::open(
                data.access.shard_url(shard).unwrap_or_default(),
            )?),
        };
        let mut item = Item::new(file.view(offset, framed)?, shard as u32, offset);
        item.unread = true;
        if let Some(scan) = scan {
            let url = data.access.shard_url(shard).unwrap_or_default();
            let map = data.maps.map(shard as u32, url);
            let payload =
                (offset + HEADER_LEN as u64) as usize..(offset + framed) as usize - FOOTER_LEN;
            let payload = map.and_then(|map| map.get(payload));
            match payload.map(|p| carried(scan, p)) {
                Some(length) if length != UNMEASURED => item.measured = length,
                _ => {
                    to_read.push((items.len(), i));
                    items.push(None);
                    continue;
                }
            }
        }
        items.push(Some(item));
    }
    if !to_read.is_empty() {
        let wanted: Vec<u64> = to_read.iter().map(|&(_, i)| i).collect();
        let records = data.access.get_many(&wanted)?;
        for (&(at, _), (file, r)) in to_read.iter().zip(records) {
            let mut item = Item::new(r.data, file as u32, r.offset);
            if let Some(scan) = scan {
                item.measured = carried(scan, &item.data);
            }
            items[at] = Some(item);
        }
    }
    Ok(items.into_iter().flatten().collect())
}

impl Drop for Ahead {
    fn drop(&mut self) {
        // The thread's next send fails once the receiver is gone.
        let (_, dead) = sync_channel(0);
        drop(std::mem::replace(&mut self.rx, dead));
        if let Some(handle) = self.handle.take() {
            let _ = handle.join();
        }
    }
}

/// The global shuffle's part of a state.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct GlobalShufflePart {
    /// Records this stream took this epoch.
    #[prost(uint64, tag = "1")]
    pub taken: u64,
}
prost_part!(GlobalShufflePart, "global_shuffle", 1);

/// The global shuffle op: the first of the chain in its place of the
/// interleave.
pub(crate) struct GlobalShuffle {
    settings: GlobalShuffleSettings,
    data: Arc<Dataset>,
    files: Vec<String>,
    ranges: Vec<Option<RecordRange>>,
    seed: u64,
    place: (u64, u64),
    scan: Option<LengthScan>,
    /// Its plain local shards' records are handed on unread.
    leave_unread: bool,
    read_stats: Arc<StageStats>,
    stats: Arc<StageStats>,
    order: Option<Order>,
    taken: u64,
    count: u64,
    stopped: bool,
    ahead: Option<Ahead>,
    block: VecDeque<Item>,
}

impl GlobalShuffle {
    /// Stream `place.0` of `place.1`, permuting with the job's `seed` (the
    /// same on every stream, so the streams share one permutation); not
    /// started until [`start_epoch`](EpochInput::start_epoch) or a restore.
    /// With `leave_unread`, its plain local shards' records are handed on
    /// unread, for the workers to read.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        settings: &GlobalShuffleSettings,
        data: Option<Arc<Dataset>>,
        files: Vec<String>,
        ranges: Vec<Option<RecordRange>>,
        seed: u64,
        place: (u64, u64),
        scan: Option<LengthScan>,
        leave_unread: bool,
        read_stats: Arc<StageStats>,
        stats: Arc<StageStats>,
    ) -> Result<GlobalShuffle, PipelineError> {
        let data = data.ok_or_else(|| {
            PipelineError::Config("global_shuffle: the indexes were not read".into())
        })?;
        Ok(GlobalShuffle {
            leave_unread,
            settings: settings.clone(),
            data,
            files,
            ranges,
            seed,
            place,
            scan,
            read_stats,
            stats,
            order: None,
            taken: 0,
            count: 0,
            stopped: false,
            ahead: None,
            block: VecDeque::new(),
        })
    }

    fn set_epoch(&mut self, epoch: u64) {
        let order = Order::new(
            self.data.clone(),
            &self.settings,
            self.seed,
            epoch,
            self.place,
        );
        self.count = order.count();
        self.order = Some(order);
        self.ahead = None;
        self.block.clear();
        self.stopped = false;
    }
}

impl EpochInput for GlobalShuffle {
    fn next(&mut self) -> Result<Option<Item>, PipelineError> {
        if self.stopped || self.taken >= self.count {
            return Ok(None);
        }
        if self.block.is_empty() {
            let Some(order) = &self.order else {
                return Ok(None);
            };
            let ahead = self.ahead.get_or_insert_with(|| {
                Ahead::spawn(
                    order.clone(),
                    self.taken,
                    self.scan.clone(),
                    self.leave_unread,
                    self.read_stats.clone(),
                )
            });
            let received = {
                let _wait = self.stats.wait_timer();
                ahead.rx.recv()
            };
            match received {
                Ok(items) => self.block = items?.into(),
                Err(_) => {
                    return Err(PipelineError::Worker(
                        "the global shuffle's reader thread ended early".into(),
                    ));
                }
            }
        }
        let item = self.block.pop_front();
        if item.is_some() {
            self.taken += 1;
        }
        Ok(item)
    }

    fn stop(&mut self) {
        self.stopped = true;
        self.ahead = None;
        self.block.clear();
    }

    fn start_epoch(&mut self, epoch: u64) {
        self.taken = 0;
        self.set_epoch(epoch);
    }

    fn input_done(&self) -> bool {
        self.stopped || self.taken >= self.count
    }

    fn save(&self, parts: &mut SavedParts) {
        parts.push(GlobalShufflePart { taken: self.taken });
    }

    /// Its count, checked against the records the stream reads this epoch;
    /// the first op: what it took is what the ops above may have passed.
    fn restore(&mut self, r: &mut Restore<'_>) -> Result<(), PipelineError> {
        let part: GlobalShufflePart = r.take()?;
        self.set_epoch(r.epoch);
        if part.taken > self.count {
            return Err(invalid(
                "records taken by the global shuffle this epoch",
                part.taken,
                format!("this stream reads {} records an epoch", self.count),
            ));
        }
        self.taken = part.taken;
        r.passed = Some(part.taken);
        Ok(())
    }

    /// The files (as the interleave writes them), the job's seed, the
    /// mode and the window (its place is the stream's, which the stream
    /// writes).
    fn identity(&self, id: &mut Identity) {
        write_files(id, &self.files, &self.ranges);
        id.step("global_shuffle")
            .u64(self.seed)
            .u64(self.settings.block_bytes)
            .u64(self.settings.window);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::BuildOptions;
    use crate::record::{Compression, RecordWriter};

    fn dataset(counts: &[usize], block_bytes: u64) -> (tempfile::TempDir, Arc<Dataset>) {
        let dir = tempfile::tempdir().unwrap();
        let files: Vec<String> = counts
            .iter()
            .enumerate()
            .map(|(f, &n)| {
                let path = dir.path().join(format!("f{f}.tfrecord"));
                let mut w = RecordWriter::create(&path, Compression::None).unwrap();
                for i in 0..n {
                    w.write_record(format!("{f}:{i:0100}").as_bytes()).unwrap();
                }
                w.finish().unwrap();
                path.display().to_string()
            })
            .collect();
        let opts = AccessOptions {
            index: IndexOptions {
                dir: None,
                build: BuildOptions::default(),
            },
            ..AccessOptions::default()
        };
        let access = RandomAccess::open(&files, &opts).unwrap();
        (
            dir,
            Arc::new(Dataset::new(access, &[], block_bytes).unwrap()),
        )
    }

    fn settings(block_bytes: u64) -> GlobalShuffleSettings {
        GlobalShuffleSettings {
            on: true,
            block_bytes,
            window: 3,
            ..Default::default()
        }
    }

    /// Every epoch, the streams' records together are every record once,
    /// in record and block mode, on any stream count; epochs differ.
    #[test]
    fn streams_read_every_record_once_an_epoch() {
        for block_bytes in [0, 1000] {
            let (_dir, data) = dataset(&[40, 0, 77, 13], block_bytes);
            for streams in [1u64, 2, 3, 7] {
                let mut epochs = Vec::new();
                for epoch in 0..3 {
                    let mut all = Vec::new();
                    for s in 0..streams {
                        let order = Order::new(
                            data.clone(),
                            &settings(block_bytes),
                            5,
                            epoch,
                            (s, streams),
                        );
                        let chunked: Vec<u64> = order.chunks(0).flatten().collect();
                        assert_eq!(chunked.len() as u64, order.count());
                        // From any record on: the same records from there.
                        for from in [1, 7, 40] {
                            let rest: Vec<u64> = order.chunks(from).flatten().collect();
                            assert_eq!(rest[..], chunked[(from as usize).min(chunked.len())..]);
                        }
                        all.extend(chunked);
                    }
                    epochs.push(all.clone());
                    all.sort_unstable();
                    assert_eq!(
                        all,
                        (0..130).collect::<Vec<u64>>(),
                        "blocks {block_bytes}, {streams} streams"
                    );
                }
                assert_ne!(epochs[0], epochs[1]);
            }
        }
    }
}
