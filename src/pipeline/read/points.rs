//! A compressed shard's access points, learned on its first whole pass: a
//! GZIP or ZLIB shard (a local file or an object) with no index, read by a
//! pipeline that reads its files more than once, and too large to keep
//! (`kept.rs`), is inflated on that pass through the
//! [`IndexBuilder`] that `infeed index` and `infeed convert` use, which
//! keeps an access point every MiB of output and every record's offset as
//! it hands the records on. The passes after it are read by spans on
//! several threads (`spans.rs`), as a shard indexed beforehand is, where
//! the first could only be inflated by one.
//!
//! It only ever speeds a read up: the first problem (a bad CRC, a stream
//! that does not inflate, a cut file) ends the learning, and the shard's
//! own reader goes on from the first record not handed on, so every error,
//! and every skip under `on_corrupt(Skip)`, is exactly the reader's. A
//! shard whose pass did not read cleanly is not learned, nor tried again.
//!
//! A learned index of a local file is checked against its size and
//! modification time each time it is used, as a kept shard is (an object
//! is taken to stay as it was for the run, as every reader of a run takes
//! it); the spans check every record's CRCs, and that the last span ends
//! where the stream does, as they do with an index from a file.
//!
//! A shard whose next pass is begun while this one learns (a one-shard
//! dataset: the interleave begins a file's next pass as it opens this one)
//! is read by its reader on that pass, and by spans from the pass after:
//! waiting for the learning could deadlock where both passes are open at
//! once.

use std::collections::{HashMap, HashSet};
use std::io::Read;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use super::kept::version;
use super::unread::{FRAME, HandOn, is_local, open};
use crate::index::{BuildOptions, DEFAULT_SPAN, IndexBuilder, ShardIndex};
use crate::pipeline::item::{LengthScan, carried};
use crate::pipeline::stats::{StageStats, Timer};
use crate::record::{Compression, CorruptPolicy, ReadOptions, Record, RecordError};
use crate::source::{SourceOptions, open_blocking};

/// Bytes of learned indexes a pipeline holds in all (8 a record, and each
/// access point's packed window: ~2% of lm's output): ~6 GiB of lm shards.
/// A dataset read more than once beyond that is inflated by one thread a
/// shard on each pass for the rest, as before.
const LEARNED_BYTES: u64 = 128 << 20;

/// Compressed bytes read at a time.
const READ: usize = 1 << 20;

/// The access points learned by a pipeline's first passes, by shard URL.
pub(crate) struct LearnedPoints {
    /// Output between the points it learns.
    span: u64,
    indexes: Mutex<HashMap<String, Learnt>>,
    /// Shards whose pass did not read cleanly, or did not fit, not tried
    /// again (each try inflates with a point finder's small cost); and
    /// shards being learned, whose next pass, begun ahead of this one's
    /// end, is read as before rather than learned twice.
    refused: Mutex<HashSet<String>>,
    underway: Mutex<HashSet<String>>,
    /// Bytes it may still hold.
    room: AtomicU64,
}

struct Learnt {
    index: Arc<ShardIndex>,
    /// A local file's size and modification time before its pass.
    version: Option<(u64, SystemTime)>,
    /// What it takes of the room.
    cost: u64,
}

impl std::fmt::Debug for LearnedPoints {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let shards = self.indexes.lock().map_or(0, |i| i.len());
        write!(f, "LearnedPoints({shards} shards)")
    }
}

impl Default for LearnedPoints {
    fn default() -> Self {
        LearnedPoints::new(LEARNED_BYTES, DEFAULT_SPAN)
    }
}

impl LearnedPoints {
    /// A store of `bytes`, learning a point every `span` bytes of output.
    pub fn new(bytes: u64, span: u64) -> Self {
        LearnedPoints {
            span,
            indexes: Mutex::default(),
            refused: Mutex::default(),
            underway: Mutex::default(),
            room: AtomicU64::new(bytes),
        }
    }

    /// The index learned for `url`, if its file has not changed since.
    pub fn get(&self, url: &str) -> Option<Arc<ShardIndex>> {
        let (index, then) = {
            let indexes = self.indexes.lock().ok()?;
            let learnt = indexes.get(url)?;
            (learnt.index.clone(), learnt.version)
        };
        // Its file looked at unlocked.
        let current = then.is_none() || version(url) == then;
        current.then_some(index)
    }

    /// How a first pass of `url` (read with `read`, fetched with
    /// `source`) learns its points: `None` where it cannot (not
    /// compressed, learned already, refused before, being learned by
    /// another pass, or no room left).
    pub fn learning(
        &self,
        url: &str,
        read: &ReadOptions,
        source: &SourceOptions,
    ) -> Option<Learning<'_>> {
        let compression = read
            .compression
            .or_else(|| Compression::from_extension(url))?;
        if compression == Compression::None || self.room.load(Relaxed) == 0 {
            return None;
        }
        if self.get(url).is_some() || self.refused.lock().ok()?.contains(url) {
            return None;
        }
        // Taken before the pass: a file changed during it is not used. An
        // object is taken to stay as it was for the run.
        let version = version(url);
        if is_local(url) && version.is_none() {
            return None;
        }
        if !self.underway.lock().ok()?.insert(url.to_owned()) {
            return None;
        }
        Some(Learning {
            store: self,
            url: url.to_owned(),
            source: source.clone(),
            compression,
            version,
        })
    }

    /// Keeps `url`'s index, if there is room for it.
    fn keep(&self, url: &str, index: ShardIndex, version: Option<(u64, SystemTime)>) {
        let cost = 8 * index.len()
            + index
                .points
                .iter()
                .map(|p| 64 + p.window.len() as u64)
                .sum::<u64>();
        let taken = self
            .room
            .fetch_update(Relaxed, Relaxed, |room| room.checked_sub(cost));
        if taken.is_err() {
            return self.refuse(url);
        }
        if let Ok(mut indexes) = self.indexes.lock() {
            let index = Arc::new(index);
            let learnt = Learnt {
                index,
                version,
                cost,
            };
            // A file learned again (rewritten since) gives back its room.
            if let Some(old) = indexes.insert(url.to_owned(), learnt) {
                self.room.fetch_add(old.cost, Relaxed);
            }
        }
    }

    fn refuse(&self, url: &str) {
        if let Ok(mut refused) = self.refused.lock() {
            refused.insert(url.to_owned());
        }
    }
}

/// A first pass of one shard that learns its points.
pub(crate) struct Learning<'a> {
    store: &'a LearnedPoints,
    url: String,
    source: SourceOptions,
    compression: Compression,
    version: Option<(u64, SystemTime)>,
}

impl Drop for Learning<'_> {
    fn drop(&mut self) {
        if let Ok(mut underway) = self.store.underway.lock() {
            underway.remove(&self.url);
        }
    }
}

impl Learning<'_> {
    /// Inflates its compressed local shard whole, learning its
    /// access points, and hands its records on in blocks sized by `out`
    /// (measured by `scan`), counted into `stats`; where it does not read
    /// cleanly, `read_on` reads the shard from its first record not handed
    /// on, given the records before it (so that its errors are numbered as
    /// a reader's from the start).
    pub fn read(
        self,
        read: &ReadOptions,
        scan: Option<&LengthScan>,
        stats: &StageStats,
        out: &impl HandOn,
        read_on: impl FnOnce(u64, Option<u64>) -> Result<(), RecordError>,
    ) -> Result<(), RecordError> {
        // Checked as the spans check: its first problem ends it, and the
        // reader meets that problem again, under the user's policy.
        let opts = BuildOptions {
            read: ReadOptions {
                compression: Some(self.compression),
                on_corrupt: CorruptPolicy::Fail,
                ..read.clone()
            },
            span: self.store.span,
            ..BuildOptions::default()
        };
        let mut blocks = Blocks {
            scan,
            stats,
            out,
            block: Vec::new(),
            lengths: Vec::new(),
            bytes: 0,
            block_bytes: out.block_bytes(),
            next: 0,
            handed: 0,
            gone: false,
            timer: None,
        };
        let url = self.url.as_str();
        let learned = self.inflate(url, &opts, &mut blocks);
        blocks.flush();
        if blocks.gone {
            return Ok(());
        }
        match learned {
            Some(index) if index.end() == blocks.next => {
                // A file changed during its pass was read whole all the
                // same, as its reader would have read it: not learned.
                if self.unchanged(&index) {
                    self.store.keep(url, index, self.version);
                } else {
                    self.store.refuse(url);
                }
                Ok(())
            }
            _ => {
                self.store.refuse(url);
                read_on(blocks.next, Some(blocks.handed))
            }
        }
    }

    /// Whether the shard read as `index` is the file it was before its
    /// pass, by its size.
    fn unchanged(&self, index: &ShardIndex) -> bool {
        self.version
            .is_none_or(|(size, _)| size == index.shard.size)
    }

    /// The shard inflated through an index builder, its records handed to
    /// `blocks`; its index, or `None` at its first problem (or when
    /// nothing takes the records any more).
    fn inflate(
        &self,
        url: &str,
        opts: &BuildOptions,
        blocks: &mut Blocks<'_, impl HandOn>,
    ) -> Option<ShardIndex> {
        let mut file: Box<dyn Read> = if is_local(url) {
            Box::new(open(url).ok()?)
        } else {
            Box::new(open_blocking(url, &self.source).ok()?)
        };
        let mut builder = IndexBuilder::new(url, self.compression, opts).ok()?;
        let mut buf = vec![0; READ];
        loop {
            let n = match file.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(_) => return None,
            };
            let pushed = builder.push_each(&buf[..n], |record| blocks.push(record));
            if pushed.is_err() || blocks.gone {
                return None;
            }
        }
        builder.finish_each(|record| blocks.push(record)).ok()
    }
}

/// Records gathered into blocks and handed on as they fill.
struct Blocks<'a, O: HandOn> {
    scan: Option<&'a LengthScan>,
    stats: &'a StageStats,
    out: &'a O,
    block: Vec<Record>,
    lengths: Vec<u32>,
    bytes: u64,
    block_bytes: u64,
    /// The offset after the last record gathered, and how many were.
    next: u64,
    handed: u64,
    /// Nothing takes the blocks any more.
    gone: bool,
    /// Busy from the first record of a block until it is handed on.
    timer: Option<Timer<'a>>,
}

impl<O: HandOn> Blocks<'_, O> {
    fn push(&mut self, record: Record) {
        if self.gone {
            return;
        }
        if self.timer.is_none() {
            self.timer = Some(self.stats.busy_timer());
        }
        self.next = record.offset + record.data.len() as u64 + FRAME;
        self.handed += 1;
        self.bytes += record.data.len() as u64 + FRAME;
        // Measured while its bytes are in cache from the CRC.
        if let Some(scan) = self.scan {
            self.lengths.push(carried(scan, &record.data));
        }
        self.block.push(record);
        if self.bytes >= self.block_bytes {
            self.flush();
            self.block_bytes = self.out.block_bytes();
        }
    }

    fn flush(&mut self) {
        if self.block.is_empty() || self.gone {
            return;
        }
        self.stats.add_records(self.block.len() as u64);
        self.stats.add_bytes(self.bytes);
        self.bytes = 0;
        self.timer = None;
        let block = std::mem::take(&mut self.block);
        let lengths = std::mem::take(&mut self.lengths);
        self.gone = !self.out.hand_on(block, lengths);
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::{Taker, gzip_shard_of, noisy};
    use super::*;

    /// A pass hands on every record whether or not its points fit the
    /// room; what does not fit is not learned, nor tried again.
    #[test]
    fn a_shard_beyond_the_room_is_read_whole_but_not_learned() {
        let dir = tempfile::tempdir().unwrap();
        let records: Vec<Vec<u8>> = (0..2000).map(noisy).collect();
        let url = gzip_shard_of(&dir.path().join("s.tfrecord.gz"), &records, None);
        let read = ReadOptions::default();
        let source = SourceOptions::default();
        for (room, learned) in [(1 << 20, true), (1000, false)] {
            let store = LearnedPoints::new(room, 16 << 10);
            let taker = Taker::new(4096);
            let stats = StageStats::default();
            let learning = store.learning(&url, &read, &source).unwrap();
            let read_on = |_, _| panic!("a clean pass went on by the reader");
            learning.read(&read, None, &stats, &taker, read_on).unwrap();
            let got: Vec<Vec<u8>> = taker
                .blocks
                .into_inner()
                .concat()
                .iter()
                .map(|r| r.data.to_vec())
                .collect();
            assert_eq!(got, records);
            assert!(taker.lengths.into_inner().is_empty());
            assert_eq!(stats.figures().records, 2000);
            assert_eq!(store.get(&url).is_some(), learned, "room {room}");
            // Learned or refused: not learned again.
            assert!(store.learning(&url, &read, &source).is_none());
        }
        // A plain shard has nothing to learn.
        let store = LearnedPoints::default();
        let plain = format!("{}/p.tfrecord", dir.path().display());
        assert!(store.learning(&plain, &read, &source).is_none());
    }
}
