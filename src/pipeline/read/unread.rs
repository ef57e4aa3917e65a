//! Records left unread for the workers: which shards' ([`LeftUnread`]),
//! and how a shard thread hands them on: framed by the shard's index
//! ([`by_index`]) or by its headers as it goes ([`by_headers`]), each
//! record a stand-in of its length ([`stand_in`]) that the worker which
//! assembles it reads and checks in its place (`in_workers.rs`).
//!
//! Framing by the headers needs no index before the first batch: the shard
//! thread walks a plain local shard through maps of a few MiB at a time,
//! checking each header (its length's CRC, the largest record) as a reader
//! would, never touching a payload. So a pipeline whose steps need no
//! record's bytes before the workers has its records read where they are
//! assembled, with nothing asked for and nothing built beforehand.

use std::collections::HashMap;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, Mutex};

use bytes::Bytes;

use crate::index::{RecordsBuilder, ShardId, ShardIndex, read_at};
use crate::pipeline::item::{LengthScan, UNMEASURED, carried};
use crate::pipeline::stats::{StageStats, Timer};
use crate::record::mapped;
use crate::record::{
    Compression, CorruptPolicy, DETECT_LEN, Deframer, ErrorKind, FOOTER_LEN, HEADER_LEN,
    ReadOptions, Record, RecordError, RecordPart, parse_header,
};

use super::shared_maps::map_shard;

/// Header and footer around a payload.
pub(super) const FRAME: u64 = (HEADER_LEN + FOOTER_LEN) as u64;

/// The index of each plain local shard, by its URL.
pub(crate) type Indexes = Arc<HashMap<String, Arc<ShardIndex>>>;

/// Which shards' records are left unread for the workers.
#[derive(Clone)]
pub(crate) struct LeftUnread {
    /// Shards framed by their index (the global shuffle's, or those found:
    /// `in_workers::found_indexes`).
    pub indexes: Indexes,
    /// Plain local shards without an index are framed by their headers.
    pub by_headers: bool,
    /// The framings learned by those walks, for the passes after the first
    /// (a stream that reads its files more than once).
    pub learned: Option<Arc<Learned>>,
    /// Every record is handed on by a walk that checked its payload's CRC
    /// (`on_corrupt(Skip)`: [`by_headers`]), so its worker need not.
    pub checked: bool,
    /// A mixture's: each source's shards left unread, with what the
    /// workers check of them ([`LeftUnread::worker_checks`] of the
    /// source's own read options); empty: one pipeline's, whose read
    /// options every shard shares.
    pub sources: Vec<(Vec<String>, ReadOptions)>,
}

/// Checks that differ by shard (a mixture's sources' own), by URL.
pub(crate) type ShardChecks = Arc<HashMap<String, ReadOptions>>;

impl LeftUnread {
    /// Every plain local shard, framed by its headers: no index needed;
    /// with `learn`, a shard is walked once and framed by what its walk
    /// learned afterwards (within [`LEARNED_RECORDS`]).
    pub fn by_headers(learn: bool) -> Self {
        LeftUnread {
            indexes: Arc::default(),
            by_headers: true,
            learned: learn.then(|| Arc::new(Learned::new(LEARNED_RECORDS))),
            checked: false,
            sources: Vec::new(),
        }
    }

    /// Every plain local shard, walked whole each pass under
    /// `on_corrupt(Skip)`: the walk skips what a reader would, and checks
    /// every payload it hands on (so nothing is learned, which would frame
    /// a later pass unchecked).
    pub fn walked_skipping() -> Self {
        LeftUnread {
            checked: true,
            ..Self::by_headers(false)
        }
    }

    /// These shards, and each of `indexes` framed by its own instead.
    pub fn with_indexes(self, indexes: Indexes) -> Self {
        LeftUnread { indexes, ..self }
    }

    /// Exactly the shards of `indexes`, each framed by its own.
    pub fn indexed(indexes: Indexes) -> Self {
        LeftUnread {
            indexes,
            by_headers: false,
            learned: None,
            checked: false,
            sources: Vec::new(),
        }
    }

    /// What the workers check of the records this hands on from shards
    /// read with `read`: what a shard reader checks, but no corrupt record
    /// is theirs to skip (a walk that skips checked every record it handed
    /// on: one corrupt now is a shard changed since, an error), nor a
    /// payload's CRC a walk checked.
    pub fn worker_checks(&self, read: &ReadOptions) -> ReadOptions {
        let read = read.clone().on_corrupt(CorruptPolicy::Fail);
        match self.checked {
            true => read.verify_crc(false),
            false => read,
        }
    }

    /// What the workers check of every shard this hands on, read with
    /// `read` (whose `mmap` says how they read): one pipeline's checks; a
    /// mixture's sources', one for all where they are alike (no lookup
    /// per record), else each shard's by URL.
    pub fn read_checks(&self, read: &ReadOptions) -> (ReadOptions, ShardChecks) {
        let Some(((_, first), rest)) = self.sources.split_first() else {
            return (self.worker_checks(read), ShardChecks::default());
        };
        if rest.iter().all(|(_, checks)| checks == first) {
            return (first.clone().mmap(read.mmap), ShardChecks::default());
        }
        let by_shard = self.sources.iter().flat_map(|(shards, checks)| {
            shards
                .iter()
                .map(|url| (url.clone(), checks.clone().mmap(read.mmap)))
        });
        (self.worker_checks(read), Arc::new(by_shard.collect()))
    }

    /// How the shard thread of `url` (read with `read`) hands on its
    /// records; `None`: it reads them.
    pub fn framing(&self, url: &str, read: &ReadOptions) -> Option<Unread> {
        if let Some(index) = self.indexes.get(url) {
            return Some(Unread::ByIndex(index.clone(), None));
        }
        if let Some((index, lengths)) = self.learned.as_ref().and_then(|l| l.get(url)) {
            return Some(Unread::ByIndex(index, lengths));
        }
        (self.by_headers && is_local(url) && read_plain(url, read))
            .then(|| Unread::ByHeaders(self.learned.clone()))
    }
}

/// How a shard thread frames a shard whose records it leaves unread.
#[derive(Clone)]
pub(crate) enum Unread {
    /// By its index ([`by_index`]), with its records' lengths where a walk
    /// measured them and learned them.
    ByIndex(Arc<ShardIndex>, Option<Lengths>),
    /// By its headers as it goes ([`by_headers`]), keeping what it learns
    /// where given; a shard found to be compressed after all is read.
    ByHeaders(Option<Arc<Learned>>),
}

/// Each record's length as a walk measured it, in shard order
/// ([`UNMEASURED`] for one its scan could not read).
pub(crate) type Lengths = Arc<[u32]>;

/// Records whose framing a pipeline keeps from its walks, in all: 8 bytes
/// each (12 with their lengths), 128 MiB (16 Mi records, ~16 GiB of lm
/// shards). A dataset read
/// more than once beyond that is walked again each pass for the rest.
const LEARNED_RECORDS: u64 = 16 << 20;

/// A shard's framing learned by a walk of it whole, and its records'
/// lengths where the walk measured them.
type LearnedShard = (Arc<ShardIndex>, Option<Lengths>);

/// Shards' framings learned by walking their headers whole, by URL, up to
/// a number of records in all.
pub(crate) struct Learned {
    indexes: Mutex<HashMap<String, LearnedShard>>,
    /// Records it may still keep.
    room: AtomicU64,
}

impl Learned {
    fn new(records: u64) -> Self {
        Learned {
            indexes: Mutex::default(),
            room: AtomicU64::new(records),
        }
    }

    fn get(&self, url: &str) -> Option<LearnedShard> {
        self.indexes.lock().ok()?.get(url).cloned()
    }

    /// Keeps `url`'s framing, `records` long, and the records' `lengths`
    /// where the walk measured them, if there is room for it.
    fn keep(&self, url: &str, records: RecordsBuilder, lengths: Option<Vec<u32>>, len: u64) {
        let n = records.len();
        let taken = self
            .room
            .fetch_update(Relaxed, Relaxed, |room| room.checked_sub(n));
        if taken.is_err() {
            return;
        }
        // Made in this run, never saved: its identity is the shard's size
        // (the records' CRCs, and a cut, are checked as they are read).
        let shard = ShardId {
            name: url.rsplit('/').next().unwrap_or(url).to_owned(),
            size: len,
            head_hash: 0,
            tail_hash: 0,
            version: None,
        };
        let index = records.finish(shard, Compression::None, 0, Vec::new());
        if let Ok(mut indexes) = self.indexes.lock() {
            let lengths = lengths.map(Lengths::from);
            indexes.insert(url.to_owned(), (Arc::new(index), lengths));
        }
    }
}

pub(crate) fn is_local(url: &str) -> bool {
    !url.contains("://") || url.starts_with("file://")
}

/// Not known to be compressed: by the read options, or else by its name
/// (a shard named like neither is told by its first bytes, or its index).
pub(crate) fn read_plain(url: &str, read: &ReadOptions) -> bool {
    match read.compression {
        Some(c) => c == Compression::None,
        None => Compression::from_extension(url).is_none_or(|c| c == Compression::None),
    }
}

/// Whether the local shard `url`, which [`read_plain`] could not tell
/// compressed, is plain by its first bytes as well (where the options and
/// its name say nothing, as a reader detects it).
pub(super) fn plain_by_content(url: &str, read: &ReadOptions) -> Result<bool, RecordError> {
    if read.compression.is_some() || Compression::from_extension(url).is_some() {
        return Ok(true);
    }
    let file = open(url)?;
    let len = file
        .metadata()
        .map_err(|e| io_error(url, 0, e))?
        .len()
        .min(DETECT_LEN as u64);
    let mut head = vec![0; len as usize];
    read_at(&file, &mut head, 0).map_err(|e| io_error(url, 0, e))?;
    Ok(Compression::detect(url, &head) == Compression::None)
}

/// What unread records of up to this many bytes stand on ([`STAND_IN`]).
pub(super) const STAND_IN_LEN: usize = 64 << 10;

/// The bytes an unread record of up to [`STAND_IN_LEN`] bytes is carried
/// as: a slice of this static, of the payload's length, which nothing
/// reads. Handing such a record on and dropping it touch no reference
/// count, where a view of the mapped shard raised the map's count on the
/// shard thread and lowered it on a worker, for every record: ~3% of a
/// pinned lm profile, and more on 2 cores, whose caches passed that count's
/// line back and forth. A longer record is a view of the mapped shard
/// still: its count is shared out over its bytes.
pub(super) static STAND_IN: [u8; STAND_IN_LEN] = [0; STAND_IN_LEN];

/// The stand-in for an unread payload of `len` bytes, if it is short
/// enough for one.
pub(crate) fn short_stand_in(len: usize) -> Option<Bytes> {
    (len <= STAND_IN_LEN).then(|| Bytes::from_static(&STAND_IN[..len]))
}

/// True when `data` is a short stand-in ([`short_stand_in`]): its length
/// is all it holds, so a holder may keep the length alone.
pub(crate) fn is_short_stand_in(data: &[u8]) -> bool {
    data.as_ptr() == STAND_IN.as_ptr() && data.len() <= STAND_IN_LEN
}

/// What an unread record whose payload is `view` (of a map of its shard,
/// never read) is handed on as.
fn stand_in(view: Bytes) -> Bytes {
    short_stand_in(view.len()).unwrap_or(view)
}

/// A local shard whose records are handed on unread: its length, to check
/// the index against, and its map once a record too long for [`STAND_IN`]
/// needs it.
pub(crate) struct UnreadShard<'a> {
    url: &'a str,
    len: u64,
    map: Option<Bytes>,
    /// The window mapped last for [`framed`](Self::framed), and where it
    /// starts; the file it maps them from, opened for the first.
    window: (u64, Bytes),
    file: Option<std::fs::File>,
}

impl<'a> UnreadShard<'a> {
    /// The shard at `url`, as long as it is now.
    pub fn open(url: &'a str) -> Result<Self, RecordError> {
        let path = url.strip_prefix("file://").unwrap_or(url);
        let len = std::fs::metadata(path)
            .map_err(|e| io_error(url, 0, e))?
            .len();
        Ok(UnreadShard {
            url,
            len,
            map: None,
            window: (0, Bytes::new()),
            file: None,
        })
    }

    /// The unread stand-in for the payload of the record at `offset`,
    /// `framed` bytes long with its header and footer: bytes of its length
    /// that only that length is taken from. An error naming the shard if
    /// the file is shorter than the index says.
    pub fn view(&mut self, offset: u64, framed: u64) -> Result<Bytes, RecordError> {
        if framed < FRAME || offset.saturating_add(framed) > self.len {
            return Err(cut_short(self.url, offset, framed, self.len));
        }
        if let Some(short) = short_stand_in((framed - FRAME) as usize) {
            return Ok(short);
        }
        let map = match &self.map {
            Some(map) => map,
            None => self.map.insert(map_shard(self.url)?),
        };
        // Cut since it was opened: the map is shorter than `len`.
        if offset + framed > map.len() as u64 {
            return Err(cut_short(self.url, offset, framed, map.len() as u64));
        }
        Ok(map.slice((offset + 12) as usize..(offset + framed - 4) as usize))
    }
}

impl UnreadShard<'_> {
    /// The record at `offset`, `framed` bytes long with its header and
    /// footer, as a view of a window of the shard mapped from there
    /// ([`WINDOW`] bytes, or the record's), for a walk that reads the
    /// payloads in order: the pages it touches count in the process's RSS
    /// only while their window is mapped. An error as for
    /// [`view`](Self::view).
    pub fn framed(&mut self, offset: u64, framed: u64) -> Result<Bytes, RecordError> {
        if framed < FRAME || offset.saturating_add(framed) > self.len {
            return Err(cut_short(self.url, offset, framed, self.len));
        }
        let (at, window) = &self.window;
        let in_window = offset >= *at && offset + framed <= at + window.len() as u64;
        if !in_window {
            let len = WINDOW.max(framed).min(self.len - offset);
            let file = match &self.file {
                Some(file) => file,
                None => self.file.insert(open(self.url)?),
            };
            let map = mapped::map(file, offset, len as usize, false)
                .map_err(|e| io_error(self.url, offset, e))?;
            // Cut since it was opened: the map is shorter than asked.
            if (map.len() as u64) < framed {
                return Err(cut_short(
                    self.url,
                    offset,
                    framed,
                    offset + map.len() as u64,
                ));
            }
            self.window = (offset, map);
        }
        let (at, window) = &self.window;
        let from = (offset - at) as usize;
        Ok(window.slice(from..from + framed as usize))
    }
}

/// The error for the record at `offset`, `framed` bytes long, of a shard
/// that ends at `len`: the part of the record the file ends in.
pub(super) fn cut_short(url: &str, offset: u64, framed: u64, len: u64) -> RecordError {
    let payload = framed.saturating_sub(FRAME);
    let left = len.saturating_sub(offset);
    let (part, have, need) = if left < 12 {
        (RecordPart::Header, left, 12)
    } else if left - 12 < payload {
        (RecordPart::Payload, left - 12, payload)
    } else {
        (RecordPart::Footer, left - 12 - payload, 4)
    };
    RecordError::new(url, offset, ErrorKind::Truncated { part, have, need })
}

/// Where a shard thread hands its blocks of records (unread, or read by
/// spans: `spans.rs`).
pub(crate) trait HandOn {
    /// Framed bytes the next block holds (its size ramps up as the
    /// consumer takes blocks).
    fn block_bytes(&self) -> u64;
    /// Hands `block` on with its records' measured lengths (empty where
    /// none are measured); false when nothing takes it any more.
    fn hand_on(&self, block: Vec<Record>, lengths: Vec<u32>) -> bool;
    /// The grouping's length scan, where the records handed on are to be
    /// measured (buckets, packing): a walk reads each payload for it.
    fn scan(&self) -> Option<&LengthScan> {
        None
    }
    /// Hands on, after the records handed on before it, one record that a
    /// walk read after all (its bytes, checked as a reader checks them):
    /// one its length scan could not read, which the record thread
    /// measures again to name what is wrong with it.
    fn hand_on_read(&self, record: Record) -> bool;
}

/// What a walk that measures its records ([`HandOn::scan`]) hands on for
/// one of them.
enum Scanned {
    /// Its stand-in ([`stand_in`]) and its length ([`UNMEASURED`] where
    /// none is measured): it goes on unread.
    Unread(Bytes, u32),
    /// The record itself ([`HandOn::hand_on_read`]).
    Read(Record),
}

/// Scans the record at `offset`, whose header, payload and footer are
/// `framed` (a view of a map of the shard), with `scan`. Where the scan
/// cannot read it, the record is checked as `read` says first: a corrupt
/// record is a reader's error, as where a shard reader measures it.
fn scan_record(
    url: &str,
    offset: u64,
    framed: Bytes,
    scan: &LengthScan,
    read: &ReadOptions,
) -> Result<Scanned, RecordError> {
    let payload = framed.slice(HEADER_LEN..framed.len() - FOOTER_LEN);
    let length = carried(scan, &payload);
    if length != UNMEASURED {
        return Ok(Scanned::Unread(stand_in(payload), length));
    }
    let framed_len = framed.len() as u64;
    let mut deframer = Deframer::starting_at(url, read, offset);
    deframer.push(framed);
    deframer.finish()?;
    // Never `None`: the record's framing gave its length.
    let none = || cut_short(url, offset, framed_len, offset);
    deframer.next_record()?.map(Scanned::Read).ok_or_else(none)
}

/// Frames the plain local shard `url` from `start` by its `index` and hands
/// its records on unread in blocks, counting them into `stats`. A file
/// shorter than its index says is an error at the record it ends in, after
/// the records before it. Where `out` measures its records
/// ([`HandOn::scan`]), each takes its length from `learned` (by an earlier
/// walk), else its payload is read through windows of the shard
/// mapped in turn and scanned; a record the scan cannot read is checked as
/// `read` says and handed on read ([`HandOn::hand_on_read`]).
pub(super) fn by_index(
    url: &str,
    start: u64,
    index: &ShardIndex,
    learned: Option<&[u32]>,
    read: &ReadOptions,
    stats: &StageStats,
    out: &impl HandOn,
) -> Result<(), RecordError> {
    let mut shard = UnreadShard::open(url)?;
    let (mut i, n) = (index.first_from(start), index.len());
    // Records a block took: the next is sized for as many (grown from
    // empty, a block of a thousand lm records was reallocated ten times).
    let mut last = 0;
    while i < n {
        let busy = framing(url, stats);
        let block_bytes = out.block_bytes();
        let (mut block, mut bytes, mut failure) = (Vec::with_capacity(last), 0, None);
        // Each record's length where they are measured, and a record read
        // after all, which ends its block.
        let (mut lengths, mut read_after) = (Vec::new(), None);
        while i < n && bytes < block_bytes {
            let (offset, framed) = index.record(i).unwrap_or_default();
            let known = learned.and_then(|l| l.get(i as usize)).copied();
            let next = match (out.scan(), known) {
                (Some(scan), None | Some(UNMEASURED)) => shard
                    .framed(offset, framed)
                    .and_then(|f| scan_record(url, offset, f, scan, read))
                    .map_err(|mut e| {
                        e.index = e.index.or(Some(i));
                        e
                    }),
                (scan, known) => {
                    let length = known.filter(|_| scan.is_some()).unwrap_or(UNMEASURED);
                    let data = shard.view(offset, framed);
                    data.map(|data| Scanned::Unread(data, length))
                }
            };
            match next {
                Ok(Scanned::Unread(data, length)) => {
                    block.push(Record { data, offset });
                    if length != UNMEASURED {
                        lengths.push(length);
                    }
                }
                Ok(Scanned::Read(record)) => read_after = Some(record),
                Err(e) => {
                    failure = Some(e);
                    break;
                }
            }
            bytes += framed;
            i += 1;
            if read_after.is_some() {
                break;
            }
        }
        stats.add_records((block.len() + usize::from(read_after.is_some())) as u64);
        stats.add_bytes(bytes);
        drop(busy);
        last = last.max(block.len());
        if !block.is_empty() && !out.hand_on(block, lengths) {
            return Ok(());
        }
        if let Some(record) = read_after
            && !out.hand_on_read(record)
        {
            return Ok(());
        }
        if let Some(e) = failure {
            return Err(e);
        }
    }
    Ok(())
}

/// Counts a block's framing as the read stage's busy time, traced as a
/// shard reader's block is (`infeed.read`), until dropped.
fn framing<'a>(url: &str, stats: &'a StageStats) -> (Timer<'a>, tracing::span::EnteredSpan) {
    let span = tracing::trace_span!("infeed.read", file = url).entered();
    (stats.busy_timer(), span)
}

/// How far ahead of the record a walk is at it prefetches the shard's
/// lines, a record's length of them each time, so every line is asked
/// for once: the walk reads one header per record, each a step that waits
/// on the last one's length, and ~1 KB apart the hardware prefetcher did
/// not fetch them ahead (a miss each, ~6% of an lm run pinned to one
/// core; prefetched, lm pinned went from 0.72 to 0.75 M records/s).
const PREFETCH_AHEAD: usize = 8192;

/// Bytes of a shard mapped at a time while its headers are walked: the
/// pages it touches count in the process's RSS only while their window is
/// mapped, and a window is mapped and dropped a few times a second at most.
pub(super) const WINDOW: u64 = 8 << 20;

/// Frames the plain local shard `url` from the record boundary `start` by
/// its headers and hands its records on unread in blocks, counting them
/// into `stats`.
///
/// The shard is mapped a window at a time ([`WINDOW`], or one record
/// longer than that), each window starting at a record's header; a
/// deframer that checks headers only (the CRC of each length, the largest
/// record) walks it, so the errors are a reader's: a corrupt header or
/// length, a file that ends inside a record, a file cut under its map.
/// The payloads' CRCs are the workers' to check. Where `out` measures its
/// records ([`HandOn::scan`]), the walk scans each payload in the window
/// as well (a record the scan cannot read is checked and handed on read:
/// [`HandOn::hand_on_read`]).
///
/// Under `on_corrupt(Skip)` the walk checks the payloads' CRCs as well, as
/// a reader does: a corrupt region is known only by the checks that fail
/// in it, and the next record only by checks that pass, so what it skips
/// (and counts into `stats`) is exactly the reader's, and no worker meets
/// a corrupt record to leave a hole in its batch for. One deframer walks
/// windows that follow on from each other then, so a region that crosses
/// from one into the next is skipped as one.
///
/// A walk of the whole shard that skipped nothing keeps its framing in
/// `learn`, where given and there is room, for the next pass to frame it
/// by. `window`: [`WINDOW`] (tests walk smaller ones).
pub(super) fn by_headers(
    url: &str,
    start: u64,
    read: &ReadOptions,
    learn: Option<&Learned>,
    stats: &StageStats,
    out: &impl HandOn,
    window: u64,
) -> Result<(), RecordError> {
    let file = open(url)?;
    let len = file.metadata().map_err(|e| io_error(url, start, e))?.len();
    // The room left when the walk began: a walk longer than that would
    // not be kept, so it stops collecting there.
    let mut learning = learn.filter(|_| start == 0).map(|learn| {
        let lengths = out.scan().map(|_| Vec::new());
        (
            learn,
            learn.room.load(Relaxed),
            RecordsBuilder::new(),
            lengths,
        )
    });
    let skipping = read.on_corrupt == CorruptPolicy::Skip;
    let checks = match skipping {
        true => read.clone(),
        false => ReadOptions {
            verify_crc: false,
            ..read.clone()
        },
    };
    // Records before each window: a window's deframer counts from its
    // start, and an error names the record's number in the shard when the
    // walk began at its first.
    let mut records_before = 0u64;
    let mut at = start;
    let mut deframer = Deframer::starting_at(url, &checks, start);
    let mut last = 0;
    let mut block: Vec<Record> = Vec::new();
    // Its records' lengths, where they are measured ([`HandOn::scan`]).
    let mut lengths: Vec<u32> = Vec::new();
    let mut bytes = 0u64;
    let mut busy = Some(framing(url, stats));
    let mut block_bytes = out.block_bytes();
    let number = |mut e: RecordError, before: u64| {
        if start == 0 {
            e.index = Some(before);
        }
        e
    };
    loop {
        if !skipping {
            deframer = Deframer::starting_at(url, &checks, at);
        }
        // The window, to prefetch its lines from.
        let mut view = Bytes::new();
        let view_at = at;
        // A skipping walk's window follows the last one's end, which need
        // not be a header: what any length there says is not trusted.
        let end = match skipping {
            true => at.saturating_add(window).min(len),
            false => window_end(&file, at, len, window),
        };
        if end > at {
            let window = mapped::map(&file, at, (end - at) as usize, false)
                .map_err(|e| io_error(url, at, e))?;
            deframer.push(window.clone());
            view = window;
        }
        let (mut framed_here, mut failure, mut finished) = (0, None, false);
        loop {
            let next = match deframer.next_record() {
                // The last window's whole records taken: what it leaves
                // is a record cut short.
                Ok(None) if end == len && !finished => {
                    finished = true;
                    deframer.finish().and_then(|()| deframer.next_record())
                }
                next => next,
            };
            let record = match next {
                Ok(Some(record)) => record,
                Ok(None) => break,
                Err(e) => {
                    failure = Some(number(e, records_before + framed_here));
                    break;
                }
            };
            framed_here += 1;
            let framed = record.data.len() as u64 + FRAME;
            // A skipping walk reads every payload in order (no prefetch
            // needed), some begun in the window before.
            if !skipping {
                let from = (record.offset - view_at) as usize + PREFETCH_AHEAD;
                let to = (from + framed as usize).min(view.len());
                if from < to {
                    crate::prefetch::prefetch(&view[from..to]);
                }
            }
            if let Some((_, room, records, _)) = &mut learning {
                let kept = records.push(record.offset, framed - FRAME).is_ok();
                if !kept || records.len() > *room {
                    learning = None;
                }
            }
            let offset = record.offset;
            let scanned = match out.scan() {
                None => Scanned::Unread(stand_in(record.data), UNMEASURED),
                // A skipping walk checked the payload already.
                Some(scan) if skipping => match carried(scan, &record.data) {
                    UNMEASURED => Scanned::Read(record),
                    length => Scanned::Unread(stand_in(record.data), length),
                },
                Some(scan) => {
                    let from = (record.offset - view_at) as usize;
                    let whole = view.slice(from..from + framed as usize);
                    match scan_record(url, record.offset, whole, scan, read) {
                        Ok(scanned) => scanned,
                        Err(e) => {
                            failure = Some(number(e, records_before + framed_here - 1));
                            break;
                        }
                    }
                }
            };
            if let Some((_, _, _, Some(lengths))) = &mut learning {
                lengths.push(match &scanned {
                    Scanned::Unread(_, length) => *length,
                    Scanned::Read(_) => UNMEASURED,
                });
            }
            let read_after = match scanned {
                Scanned::Unread(data, length) => {
                    block.push(Record { data, offset });
                    if length != UNMEASURED {
                        lengths.push(length);
                    }
                    None
                }
                Scanned::Read(record) => Some(record),
            };
            bytes += framed;
            if bytes >= block_bytes || read_after.is_some() {
                let records = block.len() + usize::from(read_after.is_some());
                stats.add_records(records as u64);
                stats.add_bytes(bytes);
                last = last.max(block.len());
                drop(busy.take());
                let full = std::mem::replace(&mut block, Vec::with_capacity(last));
                if !full.is_empty() && !out.hand_on(full, std::mem::take(&mut lengths)) {
                    return Ok(());
                }
                if let Some(record) = read_after
                    && !out.hand_on_read(record)
                {
                    return Ok(());
                }
                busy = Some(framing(url, stats));
                block_bytes = out.block_bytes();
                bytes = 0;
            }
        }
        records_before += framed_here;
        at = if skipping { end } else { deframer.offset() };
        if failure.is_some() || end == len {
            stats.add_records(block.len() as u64);
            stats.add_bytes(bytes);
            let skipped = deframer.skipped();
            stats.add_skipped(skipped.records, skipped.bytes);
            drop(busy);
            // The records before an error go first; a pass that skipped
            // records is not kept: the next counts them again.
            if let (None, Some((learn, _, records, lengths))) = (&failure, learning)
                && skipped.is_empty()
            {
                learn.keep(url, records, lengths, len);
            }
            if !block.is_empty() && !out.hand_on(block, lengths) {
                return Ok(());
            }
            return failure.map_or(Ok(()), Err);
        }
    }
}

/// The number of the record at `offset` of the plain local shard `url`, by
/// a walk of its headers from its start (`None` where no record starts
/// there, or the shard cannot be mapped): for an error, where no index
/// gives it.
pub(super) fn number_by_headers(url: &str, offset: u64, read: &ReadOptions) -> Option<u64> {
    let map = map_shard(url).ok()?;
    let before = map.get(..usize::try_from(offset).ok()?)?;
    let headers_only = ReadOptions {
        verify_crc: false,
        ..read.clone()
    };
    let mut deframer = Deframer::new(url, &headers_only);
    deframer.push(map.slice_ref(before));
    while let Ok(Some(_)) = deframer.next_record() {}
    (deframer.offset() == offset).then(|| deframer.records_from_start())?
}

/// Where the window of a shard `len` bytes long that starts at the record
/// header `at` ends: `window` bytes on, or further to hold that record
/// whole (by its length as given: the deframer checks it), never past the
/// end.
fn window_end(file: &std::fs::File, at: u64, len: u64, window: u64) -> u64 {
    let mut header = [0u8; HEADER_LEN];
    let record_end = match read_at(file, &mut header, at) {
        Ok(()) => at
            .saturating_add(FRAME)
            .saturating_add(parse_header(&header).0),
        Err(_) => len,
    };
    at.saturating_add(window).max(record_end).min(len)
}

pub(super) fn open(url: &str) -> Result<std::fs::File, RecordError> {
    let path = url.strip_prefix("file://").unwrap_or(url);
    std::fs::File::open(path).map_err(|e| io_error(url, 0, e))
}

fn io_error(url: &str, offset: u64, e: std::io::Error) -> RecordError {
    RecordError::new(url, offset, ErrorKind::from_io(e))
}

#[cfg(test)]
mod tests {
    use super::super::testing::Taker;
    use super::*;
    use crate::index::{BuildOptions, build};
    use crate::record::{RecordReader, RecordWriter};

    /// A shard at `dir/name` of records of the given lengths (record `i`
    /// filled with `i`), and its records.
    fn shard(dir: &std::path::Path, name: &str, lens: &[usize]) -> (String, Vec<Vec<u8>>) {
        let path = dir.join(name);
        let records: Vec<Vec<u8>> = lens
            .iter()
            .enumerate()
            .map(|(i, &n)| vec![i as u8; n])
            .collect();
        let mut w = RecordWriter::create(&path, Compression::None).unwrap();
        for r in &records {
            w.write_record(r).unwrap();
        }
        w.finish().unwrap();
        (path.display().to_string(), records)
    }

    /// What walking `url` from `start` by its headers in windows of
    /// `window` bytes hands on, in blocks of `block_bytes`, and how it
    /// ends.
    fn walk(
        url: &str,
        start: u64,
        window: u64,
        block_bytes: u64,
    ) -> (Vec<Vec<Record>>, Result<(), RecordError>) {
        walk_learning(url, start, window, block_bytes, None)
    }

    /// [`walk`], keeping what it learns in `learn`.
    fn walk_learning(
        url: &str,
        start: u64,
        window: u64,
        block_bytes: u64,
        learn: Option<&Learned>,
    ) -> (Vec<Vec<Record>>, Result<(), RecordError>) {
        let read = ReadOptions::default();
        let (blocks, ended, _) = walk_with(url, start, window, block_bytes, learn, &read);
        (blocks, ended)
    }

    /// What a walk handed on, how it ended, and the records and bytes it
    /// counted as skipped.
    type Walked = (Vec<Vec<Record>>, Result<(), RecordError>, (u64, u64));

    /// [`walk_learning`] with `read`, and what it skipped.
    fn walk_with(
        url: &str,
        start: u64,
        window: u64,
        block_bytes: u64,
        learn: Option<&Learned>,
        read: &ReadOptions,
    ) -> Walked {
        let taker = Taker::new(block_bytes);
        let stats = StageStats::default();
        let ended = by_headers(url, start, read, learn, &stats, &taker, window);
        let blocks = taker.blocks.into_inner();
        let records: usize = blocks.iter().map(Vec::len).sum();
        let figures = stats.figures();
        assert_eq!(figures.records, records as u64);
        (
            blocks,
            ended,
            (figures.skipped_records, figures.skipped_bytes),
        )
    }

    /// Each record's offset and payload length, as a reader gives them
    /// (from `start`), and its error if it ends in one.
    fn read(url: &str, start: u64) -> (Vec<(u64, usize)>, Option<RecordError>) {
        use std::io::{Seek, SeekFrom};
        let mut file = std::fs::File::open(url).unwrap();
        file.seek(SeekFrom::Start(start)).unwrap();
        let reader =
            RecordReader::resume(file, url, Compression::None, &ReadOptions::default(), start);
        let mut found = Vec::new();
        for r in reader {
            match r {
                Ok(r) => found.push((r.offset, r.data.len())),
                Err(e) => return (found, Some(e)),
            }
        }
        (found, None)
    }

    fn framed(blocks: &[Vec<Record>]) -> Vec<(u64, usize)> {
        blocks
            .iter()
            .flatten()
            .map(|r| (r.offset, r.data.len()))
            .collect()
    }

    /// By its headers a shard gives the records a reader gives, at their
    /// offsets, whatever the windows (records across a window's end, one
    /// longer than a window) and from a record boundary; short payloads
    /// are stand-ins, no bytes of the file, long ones views of it.
    #[test]
    fn headers_frame_the_records_a_reader_reads() {
        let dir = tempfile::tempdir().unwrap();
        let lens = [10, 300, 0, 5000, STAND_IN_LEN + 1, 7, 90, 1];
        let (url, records) = shard(dir.path(), "s.tfrecord", &lens);
        let (expected, error) = read(&url, 0);
        assert!(error.is_none());
        for window in [64, 1000, 4096, WINDOW] {
            for block_bytes in [1, 500, 1 << 20] {
                let (blocks, ended) = walk(&url, 0, window, block_bytes);
                ended.unwrap();
                assert_eq!(framed(&blocks), expected, "window {window}");
                let all: Vec<&Record> = blocks.iter().flatten().collect();
                assert_eq!(all[0].data.as_ptr(), STAND_IN.as_ptr());
                assert_eq!(all[4].data, records[4]);
                if block_bytes == 1 {
                    assert!(blocks.iter().all(|b| b.len() == 1));
                }
            }
            let from = expected[3].0;
            let (blocks, ended) = walk(&url, from, window, 1 << 20);
            ended.unwrap();
            assert_eq!(framed(&blocks), expected[3..]);
        }
        let empty = dir.path().join("empty.tfrecord");
        std::fs::write(&empty, b"").unwrap();
        let (blocks, ended) = walk(empty.to_str().unwrap(), 0, WINDOW, 1);
        assert!(blocks.is_empty() && ended.is_ok());
    }

    /// A corrupt header, an absurd length and a file that ends inside a
    /// record: the records before are handed on, then the error a reader
    /// gives, with the record's number from the shard's start (none from
    /// elsewhere, as a reader's).
    #[test]
    fn a_bad_header_or_a_cut_end_is_the_readers_error_after_the_records_before() {
        let dir = tempfile::tempdir().unwrap();
        let lens = [100, 200, 300, 400, 500];
        let (url, _) = shard(dir.path(), "s.tfrecord", &lens);
        let whole = std::fs::read(&url).unwrap();
        let at = |i: usize| lens[..i].iter().map(|n| n + 16).sum::<usize>();
        let mut corrupt_length = whole.clone();
        corrupt_length[at(3)] ^= 1;
        let mut absurd = whole.clone();
        absurd[at(2)..at(2) + 12].copy_from_slice(&crate::record::encode_header(1 << 40));
        let cut = whole[..whole.len() - 3].to_vec();
        for (name, bytes, good) in [
            ("length.tfrecord", corrupt_length, 3),
            ("absurd.tfrecord", absurd, 2),
            ("cut.tfrecord", cut, 4),
        ] {
            let path = dir.path().join(name);
            std::fs::write(&path, bytes).unwrap();
            let url = path.display().to_string();
            let (expected, error) = read(&url, 0);
            let error = error.unwrap();
            assert_eq!(expected.len(), good, "{name}");
            for window in [64, 1000, WINDOW] {
                let (blocks, ended) = walk(&url, 0, window, 1);
                assert_eq!(framed(&blocks), expected, "{name}, window {window}");
                let e = ended.unwrap_err();
                assert_eq!(e.to_string(), error.to_string(), "{name}");
                assert_eq!((e.offset, e.index), (error.offset, Some(good as u64)));
            }
            let (_, error_from) = read(&url, at(1) as u64);
            let (_, ended) = walk(&url, at(1) as u64, 1000, 1);
            let e = ended.unwrap_err();
            assert_eq!((e.offset, e.index), (error.offset, None));
            assert_eq!(e.to_string(), error_from.unwrap().to_string());
        }
    }

    /// A walk of a whole shard is kept, and frames the shard's next pass
    /// as the walk did; a walk from a later record, one that ends in an
    /// error and one past the room left are not kept.
    #[test]
    fn a_whole_walk_is_learned_for_the_next_pass_within_its_room() {
        let dir = tempfile::tempdir().unwrap();
        let (url, _) = shard(dir.path(), "s.tfrecord", &[10, 300, 0, 5000, 7]);
        let (other, _) = shard(dir.path(), "t.tfrecord", &[1, 2, 3]);
        let left = LeftUnread {
            learned: Some(Arc::new(Learned::new(8))),
            ..LeftUnread::by_headers(false)
        };
        let learned = left.learned.as_deref();
        let read = ReadOptions::default();
        let (walked, ended) = walk_learning(&url, 0, 64, 1, learned);
        ended.unwrap();
        let Some(Unread::ByIndex(index, None)) = left.framing(&url, &read) else {
            panic!("not learned");
        };
        let taker = Taker::new(1 << 20);
        by_index(&url, 0, &index, None, &read, &StageStats::default(), &taker).unwrap();
        assert_eq!(framed(&taker.blocks.into_inner()), framed(&walked));
        // From its second record (after 1 + 16 bytes): not the whole shard.
        let (from_second, ended) = walk_learning(&other, 17, 64, 1, learned);
        ended.unwrap();
        assert_eq!(framed(&from_second), [(17, 2), (35, 3)]);
        let by_headers = |url: &str| matches!(left.framing(url, &read), Some(Unread::ByHeaders(_)));
        assert!(by_headers(&other));
        // Its three records fit in the room left; a fourth does not.
        walk_learning(&other, 0, 64, 1, learned).1.unwrap();
        assert!(matches!(
            left.framing(&other, &read),
            Some(Unread::ByIndex(..))
        ));
        let (third, _) = shard(dir.path(), "u.tfrecord", &[1]);
        walk_learning(&third, 0, 64, 1, learned).1.unwrap();
        assert!(by_headers(&third));
        // A walk that ends in an error.
        let (cut, _) = shard(dir.path(), "v.tfrecord", &[1]);
        let bytes = std::fs::read(&cut).unwrap();
        std::fs::write(&cut, &bytes[..bytes.len() - 1]).unwrap();
        let roomy = Learned::new(100);
        walk_learning(&cut, 0, 64, 1, Some(&roomy)).1.unwrap_err();
        assert!(roomy.get(&cut).is_none());
    }

    /// Under `on_corrupt(Skip)` a walk hands on exactly the records a
    /// skipping reader gives and counts what it skips, whatever the windows
    /// (a corrupt payload, a corrupt length, junk over several windows, an
    /// end cut inside a record), its stand-ins checked: every payload
    /// handed on has its CRC checked by the walk. A walk that skipped is
    /// not learned; a clean one is.
    #[test]
    fn a_skipping_walk_skips_and_counts_what_a_reader_does_in_any_window() {
        let dir = tempfile::tempdir().unwrap();
        let lens: Vec<usize> = (0..40).map(|i| (i * 37) % 300).collect();
        let (url, _) = shard(dir.path(), "s.tfrecord", &lens);
        let mut bytes = std::fs::read(&url).unwrap();
        let at = |i: usize| lens[..i].iter().map(|n| n + 16).sum::<usize>();
        bytes[at(3) + 12 + 1] ^= 0xff; // record 3's payload
        bytes[at(8)] ^= 1; // record 8's length
        bytes[at(14)..at(19) + 5].fill(0xa5); // junk over records 14-19
        bytes.truncate(at(39) + 20); // the last record cut short
        std::fs::write(&url, &bytes).unwrap();
        let skip = ReadOptions::default().on_corrupt(CorruptPolicy::Skip);
        let read_skipping = |start: u64| {
            use std::io::{Seek, SeekFrom};
            let mut file = std::fs::File::open(&url).unwrap();
            file.seek(SeekFrom::Start(start)).unwrap();
            let mut reader = RecordReader::resume(file, &url, Compression::None, &skip, start);
            let found: Vec<(u64, usize)> = (&mut reader)
                .map(|r| r.unwrap())
                .map(|r| (r.offset, r.data.len()))
                .collect();
            let skipped = reader.skipped();
            (found, (skipped.records, skipped.bytes))
        };
        let (expected, skipped) = read_skipping(0);
        assert_eq!(skipped.0, 4);
        assert_eq!(expected.len(), 40 - 1 - 1 - 6 - 1);
        for window in [64, 100, 1000, WINDOW] {
            for block_bytes in [1, 700] {
                let (blocks, ended, counted) = walk_with(&url, 0, window, block_bytes, None, &skip);
                ended.unwrap();
                assert_eq!(framed(&blocks), expected, "window {window}");
                assert_eq!(counted, skipped, "window {window}");
            }
            let from = at(2) as u64;
            let (blocks, ended, counted) = walk_with(&url, from, window, 1, None, &skip);
            ended.unwrap();
            assert_eq!((framed(&blocks), counted), read_skipping(from));
        }
        let learned = Learned::new(100);
        walk_with(&url, 0, 64, 1, Some(&learned), &skip).1.unwrap();
        assert!(learned.get(&url).is_none());
        let (clean, _) = shard(dir.path(), "t.tfrecord", &[1, 2, 3]);
        walk_with(&clean, 0, 64, 1, Some(&learned), &skip)
            .1
            .unwrap();
        assert!(learned.get(&clean).is_some());
    }

    /// A shard named like neither is told by its first bytes: a GZIP
    /// stream is read, not walked.
    #[test]
    fn a_shard_is_plain_by_its_options_name_or_first_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let (plain, _) = shard(dir.path(), "plain", &[5, 6]);
        let gz = dir.path().join("gz");
        let mut w = RecordWriter::create(&gz, Compression::Gzip).unwrap();
        w.write_record(b"zipped").unwrap();
        w.finish().unwrap();
        let gz = gz.display().to_string();
        let by_default = ReadOptions::default();
        assert!(plain_by_content(&plain, &by_default).unwrap());
        assert!(!plain_by_content(&gz, &by_default).unwrap());
        let said = ReadOptions::default().compression(Compression::None);
        assert!(plain_by_content(&gz, &said).unwrap());
        assert!(read_plain("a.tfrecord", &by_default) && !read_plain("a.gz", &by_default));
        assert!(!read_plain(
            "a",
            &ReadOptions::default().compression(Compression::Zlib)
        ));
        let left = LeftUnread::by_headers(false);
        assert!(matches!(
            left.framing("a.tfrecord", &by_default),
            Some(Unread::ByHeaders(None))
        ));
        assert!(left.framing("gs://b/a.tfrecord", &by_default).is_none());
        assert!(left.framing("a.tfrecord.gz", &by_default).is_none());
        assert!(
            LeftUnread::indexed(Arc::default())
                .framing("a", &by_default)
                .is_none()
        );
    }

    #[test]
    fn a_shard_shorter_than_its_index_says_is_an_error_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let (url, records) = shard(dir.path(), "s.tfrecord", &[100; 8]);
        let index = build(&url, &BuildOptions::default()).unwrap();
        let (offset, framed) = index.record(7).unwrap();
        let url = url.as_str();
        let cut = |len: u64| {
            UnreadShard {
                url,
                len,
                map: None,
                window: (0, Bytes::new()),
                file: None,
            }
            .view(offset, framed)
        };
        let e = cut(offset + framed - 1).unwrap_err();
        assert_eq!((e.path.as_str(), e.offset), (url, offset));
        let truncated = |part, have, need| ErrorKind::Truncated { part, have, need };
        assert_eq!(e.kind, truncated(RecordPart::Footer, 3, 4));
        assert_eq!(
            cut(offset + 50).unwrap_err().kind,
            truncated(RecordPart::Payload, 38, 100)
        );
        assert_eq!(
            cut(offset + 5).unwrap_err().kind,
            truncated(RecordPart::Header, 5, 12)
        );
        // Whole: a stand-in of the payload's length, no bytes of the file.
        let whole = cut(offset + framed).unwrap();
        assert_eq!(whole.len(), records[7].len());
        assert_eq!(whole.as_ptr(), STAND_IN.as_ptr());
    }

    /// A walk that measures (by headers, in windows smaller than the
    /// shard, or by its index) hands each record on unread with the
    /// scan's length; the record the scan cannot read is handed on read,
    /// its bytes whole, after the records before it; and where that record
    /// is corrupt, the walk ends in the reader's error for it, numbered.
    #[test]
    fn a_walk_that_measures_scans_each_payload_and_hands_on_read_what_it_cannot() {
        let dir = tempfile::tempdir().unwrap();
        let lens = [40, 7, 300, 20, 1, 90];
        let (url, records) = shard(dir.path(), "s.tfrecord", &lens);
        // Record 3 (filled with 3s) is the one the scan cannot read.
        let scan: LengthScan = Arc::new(|r: &[u8]| (r.first() != Some(&3)).then(|| r.len() * 2));
        let read = ReadOptions::default();
        let index = build(&url, &BuildOptions::default()).unwrap();
        let offsets: Vec<u64> = (0..6).map(|i| index.record(i).unwrap().0).collect();
        let measured = |indexed: bool, url: &str| {
            let taker = Taker::new(64).scanning(scan.clone());
            let stats = StageStats::default();
            let ended = match indexed {
                true => by_index(url, 0, &index, None, &read, &stats, &taker),
                false => by_headers(url, 0, &read, None, &stats, &taker, 128),
            };
            assert_eq!(stats.figures().records, taker.handed() as u64);
            (taker, ended)
        };
        for by_index in [false, true] {
            let (taker, ended) = measured(by_index, &url);
            ended.unwrap();
            let unread = taker.offsets();
            let want: Vec<u64> = [0, 1, 2, 4, 5].iter().map(|&i| offsets[i]).collect();
            assert_eq!(unread, want, "by index: {by_index}");
            let lengths = taker.lengths.borrow().clone();
            assert_eq!(lengths, [80, 14, 600, 2, 180], "by index: {by_index}");
            let read_after = taker.read.borrow();
            let [(before, record)] = &read_after[..] else {
                panic!("one record read: {:?}", read_after.len());
            };
            let before: usize = taker.blocks.borrow()[..*before].iter().map(Vec::len).sum();
            assert_eq!((before, record.offset), (3, offsets[3]));
            assert_eq!(&record.data[..], &records[3][..]);
        }
        // Record 3's payload corrupt: the reader's error, at its place.
        let bad = dir.path().join("bad.tfrecord");
        let mut bytes = std::fs::read(&url).unwrap();
        bytes[offsets[3] as usize + 12 + 5] ^= 1;
        std::fs::write(&bad, &bytes).unwrap();
        let bad = bad.display().to_string();
        for by_index in [false, true] {
            let (taker, ended) = measured(by_index, &bad);
            let e = ended.unwrap_err();
            assert!(matches!(e.kind, ErrorKind::DataCrc { .. }), "{e}");
            assert_eq!(
                (e.path.as_str(), e.offset, e.index),
                (bad.as_str(), offsets[3], Some(3))
            );
            let handed = taker.offsets();
            assert_eq!(handed, offsets[..3], "by index: {by_index}");
            assert!(taker.read.borrow().is_empty());
        }
    }

    /// A walk that measures learns its records' lengths with their
    /// framing, and the next pass takes them from there: it scans again
    /// only the record the scan could not read, which it hands on read.
    #[test]
    fn a_measuring_walk_learns_the_lengths_for_the_next_pass() {
        use std::sync::atomic::AtomicUsize;
        let dir = tempfile::tempdir().unwrap();
        let (url, records) = shard(dir.path(), "s.tfrecord", &[40, 7, 300, 20, 1, 90]);
        let scans = Arc::new(AtomicUsize::new(0));
        let counted = scans.clone();
        let scan: LengthScan = Arc::new(move |r: &[u8]| {
            counted.fetch_add(1, Relaxed);
            (r.first() != Some(&3)).then(|| r.len() * 2)
        });
        let left = LeftUnread {
            learned: Some(Arc::new(Learned::new(100))),
            ..LeftUnread::by_headers(false)
        };
        let read = ReadOptions::default();
        let stats = StageStats::default();
        let walked = Taker::new(64).scanning(scan.clone());
        by_headers(
            &url,
            0,
            &read,
            left.learned.as_deref(),
            &stats,
            &walked,
            128,
        )
        .unwrap();
        assert_eq!(scans.load(Relaxed), 6);
        let Some(Unread::ByIndex(index, Some(lengths))) = left.framing(&url, &read) else {
            panic!("no lengths learned");
        };
        assert_eq!(lengths[..], [80, 14, 600, UNMEASURED, 2, 180]);
        let next = Taker::new(64).scanning(scan);
        by_index(&url, 0, &index, Some(&lengths), &read, &stats, &next).unwrap();
        assert_eq!(scans.load(Relaxed), 7);
        assert_eq!(next.lengths.borrow()[..], walked.lengths.borrow()[..]);
        assert_eq!(next.offsets(), walked.offsets());
        let read_again = next.read.borrow();
        assert_eq!(read_again.len(), 1);
        assert_eq!(&read_again[0].1.data[..], &records[3][..]);
    }
}
