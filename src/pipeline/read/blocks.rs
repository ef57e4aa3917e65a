//! Shard reader threads: each reads one shard and hands over its records
//! in blocks (thread name `infeed-shard`). The interleave op starts one per
//! open file and one for the next file of its order; a restore starts one
//! more per file it reads again ([`read_again`](super::again::read_again)),
//! for as long as that takes.
//!
//! A block holds about one read chunk's worth of records (a MiB or more), so
//! the thread hand-off costs once per block, not once per record
//! (a cross-core wake-up costs ~40 µs here: docs/architecture.md, Decisions). Decompression,
//! framing and CRC checks run on this thread, in parallel with the other
//! open shards. A plain local shard's thread, when no step before the
//! workers needs the bytes, only frames it (by its headers or its index:
//! [`unread`](super::unread)) and leaves the reading and the checks to the
//! workers ([`in_workers`](super::in_workers)).

use std::io::Read;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::atomic::{AtomicBool, AtomicU32};
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::sync::{Arc, OnceLock};
use std::thread::JoinHandle;
use std::time::Instant;

use crate::record::{
    Compression, DETECT_LEN, Detection, ErrorKind, ReadOptions, Record, RecordError, RecordReader,
    SizeRamp,
};

use bytes::Bytes;

use super::kept::{Keeping, Kept, KeptShard};
use super::spans::{self, SpanReads};
use super::unread::{self, Unread};
use crate::index::ShardIndex;
use crate::pipeline::error::PipelineError;
use crate::pipeline::item::{Item, LengthScan, UNMEASURED, carried};
use crate::pipeline::stats::StageStats;
use crate::pipeline::threads::spawn;
use crate::record::chunk_source::{ChunkSource, Prefixed};
use crate::source::{ReadStats, SourceOptions, open_blocking_at};

/// Blocks in flight per shard: one being filled, one waiting.
const BLOCKS_IN_FLIGHT: usize = 2;

/// Blocks the consumer takes before the block size doubles: a first batch
/// takes a few small blocks of every shard, and a block sized after those
/// few would already be a whole chunk, read (and inflated) before the
/// first batch can go.
const BLOCKS_PER_DOUBLING: u32 = 4;

/// Blocks taken by which every block is a whole read chunk (64 KiB
/// doubled past any chunk size up to 4 GiB).
pub(crate) const RAMPED: u32 = 16 * BLOCKS_PER_DOUBLING;

/// A block of records as the pipeline passes them: each carries its file,
/// its [`carried`] length when the reader measures them, and whether it is
/// a view of a mapped file or left unread. Made on the shard thread, so the
/// record thread, which every record passes, only moves them.
type Block = Vec<Item>;

/// The reading side of a shard thread.
pub(crate) struct ShardBlocks {
    rx: Receiver<Result<Block, RecordError>>,
    handle: Option<JoinHandle<()>>,
    /// Blocks the consumer has taken: the thread sizes its next block by it.
    taken: Arc<AtomicU32>,
    /// Set (before the first block is sent) when the records are left unread (framed by the shard's
    /// headers or index, for the workers to read: `unread.rs`).
    unread: Arc<AtomicBool>,
    /// From when its waits for room count (see [`Begin::ahead`]).
    waits_from: Arc<OnceLock<Instant>>,
}

/// How a shard reader begins.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Begin {
    /// Its block sizes ramp up as if this many blocks had been taken
    /// already: a file opened once the pipeline is under way need not
    /// start small (see [`ShardBlocks::blocks_taken`]).
    pub ramped: u32,
    /// Started ahead of its file's turn: its waits for room count only
    /// from [`ShardBlocks::take_over`] on (before, it waits for the file
    /// before it, which is no waiting of the read stage's).
    pub ahead: bool,
    /// Its file's number in the host's list, which its records carry.
    pub file: u32,
}

/// How a shard reader frames its records.
#[derive(Clone, Default)]
pub(crate) struct Framing {
    /// Measures every record as it is framed (see
    /// [`ShardBlocks::next_block`]).
    pub scan: Option<LengthScan>,
    /// How a plain local shard is framed to leave its records unread for
    /// the workers (`unread.rs`), instead of read.
    pub unread: Option<Unread>,
    /// How a compressed local shard with an index is read by several
    /// threads (`spans.rs`), where it is read.
    pub spans: Option<SpanReads>,
    /// Where small shards are kept (`kept.rs`): a shard kept from an
    /// earlier pass is handed on from memory, before any other framing; a
    /// whole pass of its reader (not by spans) is kept, if it fits.
    pub kept: Option<Arc<Kept>>,
}

impl ShardBlocks {
    /// Starts reading `path` at the record boundary `start` (0 for the whole
    /// file), its bytes fetched with the `source` options. A reader the
    /// system refuses to start gives [`PipelineError::Spawn`] (wrapped in
    /// an I/O error at `start`) in place of its first block.
    pub fn spawn(
        path: String,
        start: u64,
        opts: ReadOptions,
        source: SourceOptions,
        stats: Arc<StageStats>,
    ) -> Self {
        Self::spawn_measured(
            path,
            start,
            opts,
            source,
            stats,
            Framing::default(),
            Begin::default(),
        )
    }

    /// As [`spawn`](Self::spawn), framing as `framing` says, begun as
    /// `begin` says.
    pub fn spawn_measured(
        path: String,
        start: u64,
        opts: ReadOptions,
        source: SourceOptions,
        stats: Arc<StageStats>,
        framing: Framing,
        begin: Begin,
    ) -> Self {
        let (tx, mut rx) = sync_channel(BLOCKS_IN_FLIGHT);
        let taken = Arc::new(AtomicU32::new(begin.ramped));
        let waits_from = Arc::new(OnceLock::new());
        if !begin.ahead {
            let _ = waits_from.set(Instant::now());
        }
        let unread = Arc::new(AtomicBool::new(false));
        let measured = framing.scan.is_some();
        let kept = (framing.kept.as_ref()).and_then(|k| k.get(&path, &opts, measured));
        if let Some(here) = framed_here(&framing, kept.as_deref(), start) {
            unread.store(matches!(here, Here::Index(_)), Relaxed);
            let shard = ShardThread {
                tx: &tx,
                waits_from: &waits_from,
                stats: &stats,
                taken: &taken,
                mapped: &AtomicBool::new(false),
                unread: &unread,
                file: begin.file,
                scan: None,
                chunk_size: opts.chunk_size,
            };
            let framed = match here {
                Here::Index(index) => {
                    unread::by_index(&path, start, index, None, &opts, &stats, &OneBlock(&shard))
                }
                Here::Kept(kept) => {
                    kept.hand_on(start, &stats, &OneBlock(&shard));
                    Ok(())
                }
            };
            if let Err(e) = framed {
                let _ = tx.send(Err(e));
            }
            // Dropped here, so the receiver ends after what was sent.
            drop(tx);
            return ShardBlocks {
                rx,
                handle: None,
                taken,
                unread,
                waits_from,
            };
        }
        let counted_from = waits_from.clone();
        let consumed = taken.clone();
        let is_unread = unread.clone();
        let named = path.clone();
        let spawned = spawn("infeed-shard", move || {
            // Set by the reader before its first block: its records are
            // views of a mapped file.
            let is_mapped = AtomicBool::new(false);
            let shard = ShardThread {
                tx: &tx,
                waits_from: &counted_from,
                stats: &stats,
                taken: &consumed,
                mapped: &is_mapped,
                unread: &is_unread,
                file: begin.file,
                scan: framing.scan.as_ref(),
                chunk_size: opts.chunk_size,
            };
            let read = match (&kept, &framing.unread) {
                (Some(kept), _) => {
                    kept.hand_on(start, &stats, &shard);
                    Ok(())
                }
                (None, Some(Unread::ByIndex(index, lengths))) => {
                    is_unread.store(true, Relaxed);
                    let lengths = lengths.as_deref();
                    unread::by_index(&path, start, index, lengths, &opts, &stats, &shard)
                }
                (None, Some(Unread::ByHeaders(learn))) => {
                    match unread::plain_by_content(&path, &opts) {
                        Ok(true) => {
                            is_unread.store(true, Relaxed);
                            let learn = learn.as_deref();
                            let window = unread::WINDOW;
                            unread::by_headers(&path, start, &opts, learn, &stats, &shard, window)
                        }
                        Ok(false) => read_shard(&path, start, None, &opts, &source, &shard, None),
                        Err(e) => Err(e),
                    }
                }
                (None, None) => {
                    let read_on =
                        |at, counted| read_shard(&path, at, counted, &opts, &source, &shard, None);
                    let spans = framing.spans.as_ref();
                    let index = |s: &SpanReads| s.index_of(&path, &opts, &source);
                    match spans.and_then(|s| Some((s.threads, index(s)?))) {
                        Some((threads, index)) => {
                            let scan = framing.scan.as_ref();
                            let (stats, source) = (&*stats, &source);
                            spans::by_spans(
                                &path, start, &opts, source, &index, threads, scan, stats, &shard,
                                read_on,
                            )
                        }
                        None => {
                            // A whole pass of the shard may be kept for the
                            // next; one too large to keep learns its points.
                            let keep = framing.kept.as_ref().filter(|_| start == 0);
                            let keeping = keep.and_then(|kept| kept.keeping(&path, &opts));
                            let learn = spans.filter(|_| start == 0 && keeping.is_none());
                            match learn.and_then(|s| s.learning(&path, &opts, &source)) {
                                Some(learning) => {
                                    let scan = framing.scan.as_ref();
                                    learning.read(&opts, scan, &stats, &shard, read_on)
                                }
                                None => {
                                    read_shard(&path, start, None, &opts, &source, &shard, keeping)
                                }
                            }
                        }
                    }
                }
            };
            if let Err(e) = read {
                let _ = tx.send(Err(e));
            }
        });
        let handle = match spawned {
            Ok(handle) => Some(handle),
            Err(refused) => {
                rx = refused_reader(&named, start, refused);
                None
            }
        };
        ShardBlocks {
            rx,
            handle,
            taken,
            unread,
            waits_from,
        }
    }

    /// True when the records of the blocks received are unread views,
    /// framed by the shard's index, for the workers to read.
    pub fn unread(&self) -> bool {
        // Set before the first block was sent: the channel orders it.
        self.unread.load(Relaxed)
    }

    /// Where the block sizes stand: the blocks taken, counting the
    /// `ramped` it started from; a reader started with it (capped at
    /// [`RAMPED`]) goes on at this reader's block size.
    pub fn blocks_taken(&self) -> u32 {
        self.taken.load(Relaxed).min(RAMPED)
    }

    /// A reader begun [`ahead`](Begin::ahead) now has its turn: its waits
    /// count from now on, and it goes on at least at the block size of
    /// `ramped` blocks taken (see [`blocks_taken`](Self::blocks_taken))
    /// from the next block it makes.
    pub fn take_over(&self, ramped: u32) {
        self.taken.fetch_max(ramped, Relaxed);
        self.waits_from.get_or_init(Instant::now);
    }

    /// The next block (its records measured where the reader was started
    /// with a scan), or `None` at the end of the shard.
    pub fn next_block(&mut self) -> Option<Result<Block, RecordError>> {
        // Counted first: the thread sizes its next block as soon as this
        // receive frees a slot.
        self.taken.fetch_add(1, Relaxed);
        self.rx.recv().ok()
    }
}

impl Drop for ShardBlocks {
    fn drop(&mut self) {
        // Dropping the receiver makes the thread's next send fail, so it ends.
        let (_, dead) = sync_channel(0);
        drop(std::mem::replace(&mut self.rx, dead));
        if let Some(handle) = self.handle.take() {
            let _ = handle.join();
        }
    }
}

/// Records left in a shard framed by its index up to which the thread
/// that opens it frames it itself, in one block, rather than starting a
/// shard thread: starting and joining a thread and the wake-up for its
/// first block cost the opening thread (the record thread) more than
/// framing this many records from an index (a small shard read for many
/// epochs opened one thread per epoch: docs/performance.md, "Small files
/// repeated").
const FRAMED_HERE: u64 = 1024;

/// How the shard is framed on the opening thread, from `start`, if it is:
/// `kept` from an earlier pass, or left unread and framed by its index (with
/// nothing to measure, which an unread record never is), with at most
/// [`FRAMED_HERE`] records left.
fn framed_here<'a>(
    framing: &'a Framing,
    kept: Option<&'a KeptShard>,
    start: u64,
) -> Option<Here<'a>> {
    match (kept, &framing.unread) {
        (Some(kept), _) => {
            (kept.left_from(start) as u64 <= FRAMED_HERE).then_some(Here::Kept(kept))
        }
        (None, Some(Unread::ByIndex(index, _))) if framing.scan.is_none() => {
            let left = index.len().saturating_sub(index.first_from(start));
            (left <= FRAMED_HERE).then_some(Here::Index(index))
        }
        _ => None,
    }
}

/// What a shard framed on the opening thread is framed by.
enum Here<'a> {
    /// Its index: its records left unread.
    Index(&'a ShardIndex),
    /// Its records kept from an earlier pass.
    Kept(&'a KeptShard),
}

/// A shard framed on the opening thread, handed on in one block: the
/// block and an error after it are at most the two messages its channel
/// holds ([`BLOCKS_IN_FLIGHT`]), so no send waits for a receiver that is
/// the sender itself.
struct OneBlock<'a>(&'a ShardThread<'a>);

const _: () = assert!(BLOCKS_IN_FLIGHT >= 2);

impl unread::HandOn for OneBlock<'_> {
    fn block_bytes(&self) -> u64 {
        u64::MAX
    }

    fn hand_on(&self, block: Vec<Record>, lengths: Vec<u32>) -> bool {
        self.0.send(block, lengths)
    }

    fn hand_on_read(&self, record: Record) -> bool {
        self.0.hand_on_read(record)
    }
}

/// What a shard thread reports to its [`ShardBlocks`] through.
struct ShardThread<'a> {
    tx: &'a SyncSender<Result<Block, RecordError>>,
    /// From when its waits count: none until a reader begun ahead is
    /// taken over.
    waits_from: &'a OnceLock<Instant>,
    stats: &'a StageStats,
    taken: &'a AtomicU32,
    mapped: &'a AtomicBool,
    unread: &'a AtomicBool,
    file: u32,
    scan: Option<&'a LengthScan>,
    /// The read chunk: blocks grow up to a chunk's worth.
    chunk_size: usize,
}

impl ShardThread<'_> {
    /// Sends a block of `records` on (with their `lengths`, where they are
    /// measured), counting the wait for room from the reader's turn; false
    /// when the receiver has gone.
    fn send(&self, records: Vec<Record>, lengths: Vec<u32>) -> bool {
        let (mapped, unread) = (self.mapped.load(Relaxed), self.unread.load(Relaxed));
        let mut lengths = lengths.into_iter();
        let block = records
            .into_iter()
            .map(|record| Item {
                data: record.data,
                file: self.file,
                offset: record.offset,
                measured: lengths.next().unwrap_or(UNMEASURED),
                mapped,
                unread,
            })
            .collect();
        self.send_items(block)
    }

    /// Sends `block` on, counting the wait for room from the reader's
    /// turn; false when the receiver has gone.
    fn send_items(&self, block: Vec<Item>) -> bool {
        let waiting = Instant::now();
        let sent = self.tx.send(Ok(block));
        // Only the part of the wait from the reader's turn on counts.
        if let Some(&from) = self.waits_from.get() {
            self.stats.add_wait(waiting.max(from).elapsed());
        }
        sent.is_ok()
    }
}

fn io_error(path: &str, offset: u64, e: std::io::Error) -> RecordError {
    RecordError::new(path, offset, ErrorKind::from_io(e))
}

/// The receiving end for a shard reader that could not start: it gives the
/// [`Spawn`](PipelineError::Spawn) error at `start` of `path`, as a reader
/// gives a failed read (an I/O error, handed on as the error it wraps:
/// `From<RecordError> for PipelineError`), then ends.
fn refused_reader(
    path: &str,
    start: u64,
    refused: PipelineError,
) -> Receiver<Result<Block, RecordError>> {
    let (tx, rx) = sync_channel(1);
    let error = io_error(path, start, std::io::Error::other(refused));
    // Room for it: the channel is new.
    let _ = tx.send(Err(error));
    rx
}

/// A shard opened to read its records from a byte `start`.
pub(super) struct Opened {
    pub reader: RecordReader<Box<dyn Read + Send>>,
    /// The request counters of every source reader opened for it (for the
    /// retries they made).
    sources: Vec<Arc<ReadStats>>,
    /// Its records are views of the mapped file.
    mapped: bool,
    /// Its bytes (compressed, for a compressed shard).
    size: u64,
}

/// Opens the shard `url` (local path or gs://, s3://, az:// object)
/// positioned to read records from `start`. Its chunks are sliced where
/// they are (a cloud object's as they arrive; a local file's mapped, with
/// `opts.mmap`), else read into buffers; its bytes fetched with the
/// `source` options (range size, retries, timeouts).
pub(super) fn open_at(
    url: &str,
    start: u64,
    opts: &ReadOptions,
    source: &SourceOptions,
) -> Result<Opened, RecordError> {
    let mut sources = Vec::new();
    let mut open = |at: u64| {
        let reader = open_blocking_at(url, at, source)
            .map_err(|e| RecordError::new(url, at, ErrorKind::from_io(e.into())))?;
        sources.push(reader.stats().clone());
        Ok::<_, RecordError>(reader)
    };
    let known = match opts.compression {
        Some(c) => Some(Detection::from(c)),
        None => Compression::from_extension(url).map(|_| Detection::detect(url, &[])),
    };
    let (compression, shard) = match known {
        Some(c) if c.compression == Compression::None => (c, Prefixed::whole(open(start)?)),
        Some(c) => (c, Prefixed::whole(open(0)?)),
        None => {
            // Detect from the first bytes, then read on from them.
            let mut rest = open(0)?;
            let head = if opts.mmap || !rest.is_local() {
                rest.next_chunk(DETECT_LEN).map(Option::unwrap_or_default)
            } else {
                let mut head = Vec::with_capacity(DETECT_LEN);
                (&mut rest)
                    .take(DETECT_LEN as u64)
                    .read_to_end(&mut head)
                    .map(|_| Bytes::from(head))
            }
            .map_err(|e| io_error(url, 0, e))?;
            let c = Detection::detect(url, &head[..head.len().min(DETECT_LEN)]);
            if c.compression == Compression::None && start > 0 {
                (c, Prefixed::whole(open(start)?))
            } else {
                (c, Prefixed { head, rest })
            }
        }
    };
    let (local, size) = (shard.rest.is_local(), shard.rest.size());
    let mapped = opts.mmap && local && compression.compression == Compression::None;
    let reader = if opts.mmap || !local {
        RecordReader::resume_chunks(Box::new(shard), url, compression, opts, start)
    } else {
        let shard: Box<dyn Read + Send> = Box::new(shard);
        RecordReader::resume(shard, url, compression, opts, start)
    };
    Ok(Opened {
        reader,
        sources,
        mapped,
        size,
    })
}

/// Reads `path` from `start`, sending a block per chunk's worth of records;
/// returns early (Ok) when the receiver has gone. Its errors are numbered
/// from the file's start where `counted` says how many records precede
/// `start` (else only when `start` is 0).
///
/// Blocks start small and double with every [`BLOCKS_PER_DOUBLING`] blocks
/// the consumer has `taken`, up to a read chunk's worth. A first batch waits for the first blocks of
/// every interleaved shard, and meanwhile each shard thread fills its
/// read-ahead: sized by blocks *produced*, that read-ahead doubled ahead of
/// the consumer (16 GZIP shards inflated ~2 MiB each, ~6× what ctr's first
/// batch needs, on the cores the first batch waits for). Sized by blocks
/// taken, it stays small until the consumer is under way.
fn read_shard(
    path: &str,
    start: u64,
    counted: Option<u64>,
    opts: &ReadOptions,
    source: &SourceOptions,
    shard: &ShardThread<'_>,
    keeping: Option<Keeping>,
) -> Result<(), RecordError> {
    let ShardThread {
        stats,
        taken,
        mapped,
        scan,
        ..
    } = shard;
    let Opened {
        mut reader,
        sources,
        mapped: is_mapped,
        size,
    } = open_at(path, start, opts, source)?;
    // An object, or a compressed file, too large to keep is not copied.
    let mut keeping = keeping.and_then(|keeping| keeping.sized(size));
    if let Some(records) = counted {
        reader = reader.counting_from(records);
    }
    mapped.store(is_mapped, Relaxed);
    let mut retries_reported = 0;
    loop {
        let timer = stats.busy_timer();
        let span = tracing::trace_span!("infeed.read", file = path).entered();
        let block_bytes = SizeRamp::at(taken.load(Relaxed) / BLOCKS_PER_DOUBLING, opts.chunk_size);
        let mut block = Vec::new();
        let mut lengths = Vec::new();
        let mut bytes = 0;
        let mut failure = None;
        let mut ended = true;
        for record in reader.by_ref() {
            match record {
                Ok(record) => {
                    bytes += record.data.len() + 16;
                    // Measured while its bytes are in cache from the CRC.
                    if let Some(scan) = scan {
                        lengths.push(carried(scan, &record.data));
                    }
                    block.push(record);
                    if bytes >= block_bytes {
                        ended = false;
                        break;
                    }
                }
                // The records before an error are delivered first: nothing
                // good is dropped because something bad follows it.
                Err(e) => failure = Some(e),
            }
        }
        stats.add_records(block.len() as u64);
        stats.add_bytes(bytes as u64);
        // Retries happen while reading: count this block's once it is read.
        let retries: u64 = sources.iter().map(|s| s.retries.load(Relaxed)).sum();
        stats.add_retries(retries - retries_reported);
        retries_reported = retries;
        if keeping.as_mut().is_some_and(|k| !k.add(&block, &lengths)) {
            keeping = None;
        }
        drop(span);
        drop(timer);
        if !block.is_empty() && !shard.send(block, lengths) {
            return Ok(());
        }
        if let Some(e) = failure {
            return Err(e);
        }
        if ended {
            let skipped = reader.skipped();
            stats.add_skipped(skipped.records, skipped.bytes);
            // A pass that skipped records is not kept: the next counts them.
            if let Some(keeping) = keeping.filter(|_| skipped.records == 0 && skipped.bytes == 0) {
                keeping.finish();
            }
            return Ok(());
        }
    }
}

impl unread::HandOn for ShardThread<'_> {
    fn block_bytes(&self) -> u64 {
        SizeRamp::at(
            self.taken.load(Relaxed) / BLOCKS_PER_DOUBLING,
            self.chunk_size,
        ) as u64
    }

    fn hand_on(&self, block: Vec<Record>, lengths: Vec<u32>) -> bool {
        self.send(block, lengths)
    }

    fn scan(&self) -> Option<&LengthScan> {
        self.scan
    }

    fn hand_on_read(&self, record: Record) -> bool {
        // Not marked mapped: a skipping walk's record that crossed two
        // windows is a copy (a holder copies it again, once: it is rare).
        let item = Item::new(record.data, self.file, record.offset);
        self.send_items(vec![item])
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::{gzip_shards, record};
    use super::*;
    use crate::record::{Compression, RecordWriter};
    use std::time::{Duration, Instant};

    /// Writes `n` records of file `f` to `path` with `compression`.
    fn shard_at(path: &std::path::Path, f: usize, n: usize, compression: Compression) -> String {
        let mut w = RecordWriter::create(path, compression).unwrap();
        for i in 0..n {
            w.write_record(&record(f, i)).unwrap();
        }
        w.finish().unwrap();
        path.display().to_string()
    }

    /// Every record of `reader` (whose errors fail the test).
    fn all_records(reader: RecordReader<Box<dyn Read + Send>>) -> Vec<(u64, Vec<u8>)> {
        reader
            .map(|r| r.map(|r| (r.offset, r.data.to_vec())).unwrap())
            .collect()
    }

    /// Mapped local files give exactly what reading them into buffers
    /// gives: plain and GZIP, named so or detected from their first bytes,
    /// windows (4 KiB) that cut records anywhere or hold the whole file, from
    /// the start and from a record in the middle.
    #[test]
    fn mapped_and_read_shards_give_the_same_records() {
        let dir = tempfile::tempdir().unwrap();
        let files = [
            shard_at(&dir.path().join("a.tfrecord"), 0, 300, Compression::None),
            shard_at(&dir.path().join("b.tfrecord.gz"), 1, 300, Compression::Gzip),
            shard_at(&dir.path().join("c-plain"), 2, 300, Compression::None),
            shard_at(&dir.path().join("d-gzip"), 3, 300, Compression::Gzip),
        ];
        // 116 framed bytes a record: record 120 starts at byte 13 920.
        let middle = 120 * 116;
        for (f, file) in files.iter().enumerate() {
            for start in [0, middle] {
                let want: Vec<(u64, Vec<u8>)> = (start as usize / 116..300)
                    .map(|i| ((i * 116) as u64, record(f, i)))
                    .collect();
                for chunk_size in [4096, 1 << 20] {
                    for mmap in [true, false] {
                        let opts = ReadOptions {
                            chunk_size,
                            mmap,
                            ..ReadOptions::default()
                        };
                        let reader = open_at(file, start, &opts, &SourceOptions::default())
                            .unwrap()
                            .reader;
                        let got = all_records(reader);
                        assert_eq!(got.len(), want.len(), "{file} {start} {chunk_size} {mmap}");
                        assert!(
                            got == want,
                            "{file} from {start}, {chunk_size}-byte chunks, mmap {mmap}"
                        );
                    }
                }
            }
        }
    }

    /// A mapped file cut short while it is read ends in a typed error where
    /// the cut record starts (a window is mapped only up to the file's end
    /// as it is then), never in a fault.
    #[test]
    fn a_mapped_file_cut_while_read_is_a_truncation_error() {
        let dir = tempfile::tempdir().unwrap();
        let path = shard_at(&dir.path().join("cut.tfrecord"), 0, 1000, Compression::None);
        let opts = ReadOptions {
            chunk_size: 4096,
            mmap: true,
            ..ReadOptions::default()
        };
        let mut reader = open_at(&path, 0, &opts, &SourceOptions::default())
            .unwrap()
            .reader;
        assert_eq!(&reader.next().unwrap().unwrap().data[..], &record(0, 0)[..]);
        // Only the first window is mapped; cut record 500 in its payload.
        let file = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
        file.set_len(500 * 116 + 40).unwrap();
        let mut n = 1;
        let error = loop {
            match reader.next() {
                Some(Ok(r)) => {
                    assert_eq!(&r.data[..], &record(0, n)[..]);
                    n += 1;
                }
                Some(Err(e)) => break e,
                None => panic!("the cut file ended without an error"),
            }
        };
        assert_eq!(n, 500);
        assert_eq!(
            (error.path.as_str(), error.offset),
            (path.as_str(), 500 * 116)
        );
        assert!(
            matches!(error.kind, ErrorKind::Truncated { .. }),
            "{error:?}"
        );
    }

    /// Waits until `done()` holds: the events the tests wait for are certain
    /// to come, however slow the threads; 120 s only turns a hang into a
    /// failure.
    fn wait_until(what: &str, done: impl Fn() -> bool) {
        let until = Instant::now() + Duration::from_secs(120);
        while !done() {
            assert!(Instant::now() < until, "still waiting for {what}");
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// Waits until `f` gives `expected`; then, after a pause, it still
    /// gives it (a thread blocked on its full channel reads no more — the
    /// pause can only miss a read past the bound, never invent one).
    fn reaches_and_stays(f: impl Fn() -> u64, expected: u64) {
        wait_until(&format!("{expected} records read"), || f() >= expected);
        std::thread::sleep(Duration::from_millis(50));
        assert_eq!(f(), expected);
    }

    /// Interleaved GZIP shards inflate at once, each on its own thread and
    /// ahead of the consumer, not in turn as the consumer asks: with no
    /// block taken yet, every shard has inflated and framed exactly its
    /// read-ahead (the block in the channel's slots and the one waiting to
    /// be sent), and no more — read-ahead memory stays bounded.
    #[test]
    fn gzip_shards_inflate_at_once_each_ahead_of_the_consumer_bounded() {
        let dir = tempfile::tempdir().unwrap();
        let files = gzip_shards(dir.path(), 4, 200);
        // 116 framed bytes a record: a block closes at its 9th (1 044 bytes).
        let opts = ReadOptions {
            chunk_size: 1000,
            ..ReadOptions::default()
        };
        let stats: Vec<Arc<StageStats>> = (0..4).map(|_| Arc::default()).collect();
        let mut readers: Vec<ShardBlocks> = files
            .iter()
            .zip(&stats)
            .map(|(f, s)| {
                ShardBlocks::spawn(
                    f.clone(),
                    0,
                    opts.clone(),
                    SourceOptions::default(),
                    s.clone(),
                )
            })
            .collect();
        let blocks = (BLOCKS_IN_FLIGHT + 1) as u64;
        for s in &stats {
            reaches_and_stays(|| s.figures().records, blocks * 9);
        }
        // Taking one block of shard 2 lets shard 2 alone read one more.
        let block = readers[2].next_block().unwrap().unwrap();
        assert_eq!(block.len(), 9);
        assert_eq!(&block[0].data[..], &record(2, 0)[..]);
        let ahead = [blocks * 9, blocks * 9, (blocks + 1) * 9, blocks * 9];
        for (s, ahead) in stats.iter().zip(ahead) {
            reaches_and_stays(|| s.figures().records, ahead);
        }
    }

    /// The lengths of every block of `reader` (a shard of `total` records
    /// `record(0, i)`, checked in order), each taken once the thread has
    /// made the next: the taken block freed a slot, and the thread makes
    /// its next block, sized by this count of blocks taken, before the next
    /// take (unless the file is read to its end).
    fn paced_block_lengths(
        reader: &mut ShardBlocks,
        stats: &StageStats,
        total: usize,
    ) -> Vec<usize> {
        let mut lengths = Vec::new();
        let mut next = 0;
        loop {
            let before = stats.figures().records;
            let Some(block) = reader.next_block() else {
                break;
            };
            let block = block.unwrap();
            assert_eq!(&block[0].data[..], &record(0, next)[..]);
            next += block.len();
            lengths.push(block.len());
            wait_until("the next block", || {
                let now = stats.figures().records;
                now > before || now == total as u64
            });
        }
        assert_eq!(next, total);
        lengths
    }

    /// Blocks start small and double with every few blocks the consumer
    /// takes, up to the chunk size: before the consumer takes any, the
    /// read-ahead is three first-size blocks, not a doubling ramp ahead of it.
    #[test]
    fn blocks_start_small_and_double_as_the_consumer_takes_them() {
        let dir = tempfile::tempdir().unwrap();
        let path = shard_at(&dir.path().join("s.tfrecord"), 0, 30_000, Compression::None);
        let stats: Arc<StageStats> = Arc::default();
        let mut reader = ShardBlocks::spawn(
            path,
            0,
            ReadOptions::default(),
            SourceOptions::default(),
            stats.clone(),
        );
        // 116 framed bytes a record: a block closes at the first record
        // that reaches 64 KiB (565 records), 128 KiB (1 130), ... 1 MiB.
        let ahead = (BLOCKS_IN_FLIGHT + 1) as u64;
        reaches_and_stays(|| stats.figures().records, ahead * 565);
        assert_eq!(
            paced_block_lengths(&mut reader, &stats, 30_000),
            [
                565, 565, 565, 565, 565, 565, 1130, 1130, 1130, 1130, 2260, 2260, 2260, 2260, 4520,
                4520, 4010
            ]
        );
    }

    /// A reader of the whole of `path`, with default options, begun as
    /// `begin` says, counting into `stats`.
    fn begun(path: &str, stats: &Arc<StageStats>, begin: Begin) -> ShardBlocks {
        let (read, source) = (ReadOptions::default(), SourceOptions::default());
        ShardBlocks::spawn_measured(
            path.into(),
            0,
            read,
            source,
            stats.clone(),
            Framing::default(),
            begin,
        )
    }

    /// A reader started where an earlier one's ramp stood goes on from
    /// there: started fully ramped, every block is a whole chunk from the
    /// first; and a reader reports how far it ramped (capped at full).
    #[test]
    fn a_reader_started_ramped_goes_on_at_that_block_size() {
        let dir = tempfile::tempdir().unwrap();
        let path = shard_at(&dir.path().join("s.tfrecord"), 0, 30_000, Compression::None);
        // As in the test above: the read-ahead made first, then each next
        // block made after the take before it is counted.
        let blocks_of = |ramped: u32| {
            let stats: Arc<StageStats> = Arc::default();
            let begin = Begin {
                ramped,
                ..Begin::default()
            };
            let mut reader = begun(&path, &stats, begin);
            wait_until("the read-ahead", || {
                let now = stats.figures().records;
                now >= 3 * 2260 || now == 30_000
            });
            let lengths = paced_block_lengths(&mut reader, &stats, 30_000);
            (lengths, reader.blocks_taken())
        };
        // 116 framed bytes a record: a 1 MiB block closes at its 9 040th.
        assert_eq!(blocks_of(RAMPED), (vec![9040, 9040, 9040, 2880], RAMPED));
        // From 8 blocks taken: 256 KiB blocks (2 260 records) up to 12
        // taken, then 512 KiB (4 520) and the rest; ten blocks and the end
        // taken.
        let (lengths, taken) = blocks_of(8);
        assert_eq!(
            lengths,
            [2260, 2260, 2260, 2260, 2260, 2260, 4520, 4520, 4520, 2880]
        );
        assert_eq!(taken, 8 + 11);
    }

    /// A reader begun ahead of its turn counts none of its waiting for
    /// room until it is taken over; one begun in turn counts it all.
    #[test]
    fn a_reader_begun_ahead_counts_its_waits_only_once_taken_over() {
        let dir = tempfile::tempdir().unwrap();
        let path = shard_at(&dir.path().join("s.tfrecord"), 0, 5000, Compression::None);
        let waited = |ahead: bool| {
            let stats: Arc<StageStats> = Arc::default();
            let mut reader = begun(
                &path,
                &stats,
                Begin {
                    ahead,
                    ..Begin::default()
                },
            );
            // Its read-ahead made, the thread waits to send the third
            // block; a take lets that send finish.
            let ahead_blocks = (BLOCKS_IN_FLIGHT + 1) as u64;
            reaches_and_stays(|| stats.figures().records, ahead_blocks * 565);
            reader.next_block().unwrap().unwrap();
            wait_until("the fourth block", || {
                stats.figures().records > ahead_blocks * 565
            });
            stats.figures().wait_ns
        };
        assert_eq!(waited(true), 0);
        assert!(waited(false) > 0);
    }

    /// Read ahead on their threads, the shards still give exactly their
    /// records, in order, with their offsets in the uncompressed stream.
    #[test]
    fn each_shard_gives_exactly_its_records_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let files = gzip_shards(dir.path(), 4, 300);
        let opts = ReadOptions {
            chunk_size: 1000,
            ..ReadOptions::default()
        };
        let mut readers: Vec<ShardBlocks> = files
            .iter()
            .map(|f| {
                ShardBlocks::spawn(
                    f.clone(),
                    0,
                    opts.clone(),
                    SourceOptions::default(),
                    Arc::default(),
                )
            })
            .collect();
        // Take blocks round robin, as the interleave does.
        let mut got: Vec<Vec<(u64, Vec<u8>)>> = vec![Vec::new(); 4];
        let mut open = [true; 4];
        while open.iter().any(|&o| o) {
            for (f, reader) in readers.iter_mut().enumerate() {
                if !open[f] {
                    continue;
                }
                match reader.next_block() {
                    Some(block) => got[f].extend(
                        block
                            .unwrap()
                            .into_iter()
                            .map(|r| (r.offset, r.data.to_vec())),
                    ),
                    None => open[f] = false,
                }
            }
        }
        for (f, records) in got.iter().enumerate() {
            let want: Vec<(u64, Vec<u8>)> =
                (0..300).map(|i| (i as u64 * 116, record(f, i))).collect();
            assert_eq!(records, &want, "shard {f}");
        }
    }

    /// A corrupt GZIP shard read ahead on its thread: its good records
    /// first, then a typed error naming the file and the compressed offset;
    /// the other shard is not affected.
    #[test]
    fn a_corrupt_gzip_shard_is_an_error_naming_file_and_offset() {
        let dir = tempfile::tempdir().unwrap();
        let files = gzip_shards(dir.path(), 2, 2000);
        // Shard 1: one GZIP member of 1 000 records, then bytes that start
        // no GZIP member.
        let mut w = RecordWriter::new(Vec::new(), Compression::Gzip);
        for i in 0..1000 {
            w.write_record(&record(1, i)).unwrap();
        }
        let mut bytes = w.finish().unwrap();
        let member = bytes.len() as u64;
        bytes.extend_from_slice(b"these bytes start no GZIP member");
        std::fs::write(&files[1], &bytes).unwrap();
        let opts = ReadOptions {
            chunk_size: 4096,
            ..ReadOptions::default()
        };
        let source = SourceOptions::default();
        let mut good = ShardBlocks::spawn(
            files[0].clone(),
            0,
            opts.clone(),
            source.clone(),
            Arc::default(),
        );
        let mut bad = ShardBlocks::spawn(files[1].clone(), 0, opts, source, Arc::default());
        let mut records = 0usize;
        let error = loop {
            match bad.next_block() {
                Some(Ok(block)) => {
                    for r in block {
                        assert_eq!(&r.data[..], &record(1, records)[..]);
                        records += 1;
                    }
                }
                Some(Err(e)) => break e,
                None => panic!("the corrupt shard ended without an error"),
            }
        };
        assert_eq!(records, 1000);
        assert_eq!(error.path, files[1]);
        assert!(
            matches!(
                error.kind,
                ErrorKind::Decompress {
                    compression: Compression::Gzip,
                    ..
                }
            ),
            "{error:?}"
        );
        // The offset counts compressed bytes: in the bytes after the member.
        assert!(
            (member..=bytes.len() as u64).contains(&error.offset),
            "{} not in {member}..={}",
            error.offset,
            bytes.len()
        );
        assert!(bad.next_block().is_none());
        let mut n = 0;
        while let Some(block) = good.next_block() {
            n += block.unwrap().len();
        }
        assert_eq!(n, 2000);
    }

    /// Everything a shard reader hands on: each record's offset and bytes,
    /// its measured lengths, then its error (`Debug`), and what it skipped.
    type Handed = (Vec<(u64, Vec<u8>)>, Vec<u32>, Option<String>, (u64, u64));

    fn handed(path: &str, start: u64, opts: &ReadOptions, framing: Framing) -> Handed {
        let stats = Arc::new(StageStats::default());
        let source = SourceOptions::default();
        let mut reader = ShardBlocks::spawn_measured(
            path.to_owned(),
            start,
            opts.clone(),
            source,
            stats.clone(),
            framing,
            Begin::default(),
        );
        let (mut records, mut lengths, mut error) = (Vec::new(), Vec::new(), None);
        while let Some(block) = reader.next_block() {
            match block {
                Ok(block) => {
                    lengths.extend(block.iter().map(|r| r.measured));
                    records.extend(block.into_iter().map(|r| (r.offset, r.data.to_vec())));
                }
                Err(e) => error = Some(format!("{e:?}")),
            }
        }
        drop(reader);
        let f = stats.figures();
        (records, lengths, error, (f.skipped_records, f.records))
    }

    /// A shard framed by its index with at most [`FRAMED_HERE`] records
    /// left is framed by the thread that opens it, in one block whatever
    /// the block size reached, as a shard thread frames it by its headers;
    /// one record more and a shard thread frames it, in blocks. Cut short
    /// under its index, the records before the cut, then the error naming
    /// the shard and the record the file ends in.
    #[test]
    fn a_small_indexed_shard_is_framed_in_one_block_by_its_opener() {
        use crate::index::{BuildOptions, build};
        let dir = tempfile::tempdir().unwrap();
        let n = FRAMED_HERE as usize;
        let small = shard_at(&dir.path().join("small.tfrecord"), 0, n, Compression::None);
        let large = shard_at(
            &dir.path().join("large.tfrecord"),
            1,
            n + 1,
            Compression::None,
        );
        let opts = ReadOptions::default();
        let by = |unread| Framing {
            unread: Some(unread),
            ..Framing::default()
        };
        let blocks = |path: &str, start: u64, framing: Framing| {
            let mut reader = ShardBlocks::spawn_measured(
                path.to_owned(),
                start,
                opts.clone(),
                SourceOptions::default(),
                Arc::default(),
                framing,
                Begin::default(),
            );
            let mut sizes = Vec::new();
            while let Some(block) = reader.next_block() {
                sizes.push(block.unwrap().len());
            }
            (sizes, reader.handle.is_some())
        };
        for (path, threaded) in [(&small, false), (&large, true)] {
            let index = Arc::new(build(path, &BuildOptions::default()).unwrap());
            let by_headers = handed(path, 0, &opts, by(Unread::ByHeaders(None)));
            let by_index = handed(path, 0, &opts, by(Unread::ByIndex(index.clone(), None)));
            assert_eq!(by_index, by_headers, "{path}");
            let third = index.record(2).unwrap().0;
            let from_third = handed(path, third, &opts, by(Unread::ByIndex(index.clone(), None)));
            assert_eq!(from_third.0, by_headers.0[2..], "{path}");
            let (sizes, thread) = blocks(path, 0, by(Unread::ByIndex(index.clone(), None)));
            assert_eq!(thread, threaded, "{path}");
            assert_eq!(sizes.iter().sum::<usize>(), index.len() as usize);
            if !threaded {
                assert_eq!(sizes, [n]);
            }
        }
        let index = Arc::new(build(&small, &BuildOptions::default()).unwrap());
        let cut_at = index.record(100).unwrap().0 + 5;
        let whole = std::fs::read(&small).unwrap();
        std::fs::write(&small, &whole[..cut_at as usize]).unwrap();
        let (records, _, error, _) = handed(&small, 0, &opts, by(Unread::ByIndex(index, None)));
        assert_eq!(records.len(), 100);
        let error = error.unwrap();
        assert!(error.contains(&small), "{error}");
        assert!(
            error.contains(&format!("offset: {}", cut_at - 5)),
            "{error}"
        );
        assert!(error.contains("Truncated"), "{error}");
    }

    /// A GZIP shard with an index is read by spans on helper threads, and
    /// hands on exactly what its reader alone does: its records, measured,
    /// from its start or a record in the middle, and around a corrupt
    /// record the reader's error (failing) or skip (skipping).
    #[test]
    fn a_gzip_shard_read_by_spans_hands_on_what_its_reader_does() {
        use super::super::testing::{gzip_shard_of, noisy};
        use crate::index::{BuildOptions, build, index_url, save};
        use crate::record::CorruptPolicy;
        let dir = tempfile::tempdir().unwrap();
        let records: Vec<Vec<u8>> = (0..3000).map(noisy).collect();
        // A record with a bad CRC, or a compressed byte changed in place
        // (the shard's time kept, so its index still matches it).
        for (bad, changed) in [(None, false), (Some(2100), false), (None, true)] {
            let path = gzip_shard_of(&dir.path().join("s.tfrecord.gz"), &records, bad);
            let build_opts = BuildOptions {
                read: ReadOptions {
                    verify_crc: false,
                    ..ReadOptions::default()
                },
                span: 16 << 10,
                ..BuildOptions::default()
            };
            let index = build(&path, &build_opts).unwrap();
            save(&index, &index_url(&path, None), &SourceOptions::default()).unwrap();
            if changed {
                let time = std::fs::metadata(&path).unwrap().modified().unwrap();
                let mut bytes = std::fs::read(&path).unwrap();
                let at = bytes.len() * 2 / 3;
                bytes[at] ^= 0x20;
                std::fs::write(&path, &bytes).unwrap();
                let file = std::fs::File::options().write(true).open(&path).unwrap();
                file.set_modified(time).unwrap();
            }
            let middle = index.record(1000).unwrap().0;
            let spans = SpanReads {
                threads: 3,
                index_dir: None,
                learned: None,
                without: Default::default(),
            };
            // The index qualifies: the shard thread reads by spans.
            assert!(
                spans
                    .index_of(&path, &ReadOptions::default(), &SourceOptions::default())
                    .is_some()
            );
            let scan: LengthScan = Arc::new(|r: &[u8]| Some(r.len() + 1));
            for policy in [CorruptPolicy::Fail, CorruptPolicy::Skip] {
                let opts = ReadOptions {
                    on_corrupt: policy,
                    chunk_size: 8192,
                    ..ReadOptions::default()
                };
                for start in [0, middle] {
                    let alone = Framing {
                        scan: Some(scan.clone()),
                        ..Framing::default()
                    };
                    let by_spans = Framing {
                        spans: Some(spans.clone()),
                        ..alone.clone()
                    };
                    let want = handed(&path, start, &opts, alone);
                    let got = handed(&path, start, &opts, by_spans);
                    let what = format!("bad {bad:?}, changed {changed}, {policy:?}, from {start}");
                    assert_eq!(want.0.len(), got.0.len(), "{what}");
                    assert!(want == got, "{what}: {:?} against {:?}", got.2, want.2);
                    if policy == CorruptPolicy::Fail {
                        assert_eq!(want.2.is_some(), bad.is_some() || changed, "{what}");
                    }
                }
            }
        }
    }

    /// A GZIP shard without an index learns its access points on its
    /// first pass, which hands on exactly what its reader does, and the
    /// passes after it are read by spans by what it learned: the same
    /// records again. A pass that meets a corrupt record hands on the
    /// reader's records and error (failing) or skip (skipping), and its
    /// shard is not learned; a shard rewritten since is learned again.
    #[test]
    fn a_gzip_shard_without_an_index_learns_its_points_on_a_first_pass() {
        use super::super::points::LearnedPoints;
        use super::super::testing::{gzip_shard_of, noisy};
        use crate::index::{BuildOptions, build};
        use crate::record::CorruptPolicy;
        let dir = tempfile::tempdir().unwrap();
        let records: Vec<Vec<u8>> = (0..3000).map(noisy).collect();
        let scan: LengthScan = Arc::new(|r: &[u8]| Some(r.len() + 1));
        for (bad, policy) in [
            (None, CorruptPolicy::Fail),
            (Some(2100), CorruptPolicy::Fail),
            (Some(2100), CorruptPolicy::Skip),
        ] {
            let path = gzip_shard_of(&dir.path().join("s.tfrecord.gz"), &records, bad);
            let opts = ReadOptions {
                on_corrupt: policy,
                chunk_size: 8192,
                ..ReadOptions::default()
            };
            let alone = Framing {
                scan: Some(scan.clone()),
                ..Framing::default()
            };
            let want = handed(&path, 0, &opts, alone.clone());
            let spans = SpanReads {
                threads: 2,
                index_dir: None,
                learned: Some(Arc::new(LearnedPoints::new(1 << 30, 16 << 10))),
                without: Default::default(),
            };
            let learning = Framing {
                spans: Some(spans.clone()),
                ..alone
            };
            let what = format!("bad {bad:?}, {policy:?}");
            for pass in 0..3 {
                let got = handed(&path, 0, &opts, learning.clone());
                assert_eq!(want.0.len(), got.0.len(), "{what}, pass {pass}");
                assert!(want == got, "{what}, pass {pass}: {:?}", got.2);
            }
            let Some(learned) = spans.index_of(&path, &opts, &SourceOptions::default()) else {
                assert!(bad.is_some(), "a clean shard not learned");
                continue;
            };
            assert!(bad.is_none(), "{what}: learned");
            // What `infeed index` finds in it.
            let build_opts = BuildOptions {
                span: 16 << 10,
                ..BuildOptions::default()
            };
            let built = build(&path, &build_opts).unwrap();
            assert!(built.points.len() >= 8, "{} points", built.points.len());
            assert_eq!(learned.points, built.points);
            assert_eq!(learned.len(), built.len());
            let offsets = |i: &ShardIndex| (0..i.len()).map(|n| i.record(n)).collect::<Vec<_>>();
            assert_eq!(offsets(&learned), offsets(&built));
            // Rewritten: what was learned is not used, and it learns again.
            let more: Vec<Vec<u8>> = (0..3001).map(noisy).collect();
            gzip_shard_of(std::path::Path::new(&path), &more, None);
            assert!(
                spans
                    .index_of(&path, &opts, &SourceOptions::default())
                    .is_none()
            );
            let again = handed(&path, 0, &opts, learning.clone());
            assert_eq!(again.0.len(), 3001);
            assert_eq!(
                spans
                    .index_of(&path, &opts, &SourceOptions::default())
                    .map(|i| i.len()),
                Some(3001)
            );
        }
    }

    /// Read by spans, a shard's spans are inflated on `infeed-inflate`
    /// threads ahead of the consumer (which here takes nothing).
    #[test]
    fn spans_are_inflated_on_helper_threads() {
        use super::super::testing::{gzip_shard_of, noisy};
        use crate::index::{BuildOptions, build, index_url, save};
        let dir = tempfile::tempdir().unwrap();
        let records: Vec<Vec<u8>> = (0..3000).map(noisy).collect();
        let path = gzip_shard_of(&dir.path().join("s.tfrecord.gz"), &records, None);
        let build_opts = BuildOptions {
            span: 16 << 10,
            ..BuildOptions::default()
        };
        let index = build(&path, &build_opts).unwrap();
        save(&index, &index_url(&path, None), &SourceOptions::default()).unwrap();
        let framing = Framing {
            spans: Some(SpanReads {
                threads: 2,
                index_dir: None,
                learned: None,
                without: Default::default(),
            }),
            ..Framing::default()
        };
        let opts = ReadOptions::default();
        let source = SourceOptions::default();
        let stats = Arc::default();
        let reader =
            ShardBlocks::spawn_measured(path, 0, opts, source, stats, framing, Begin::default());
        wait_until("an infeed-inflate thread", || {
            std::fs::read_dir("/proc/self/task").unwrap().any(|t| {
                std::fs::read_to_string(t.unwrap().path().join("comm"))
                    .is_ok_and(|name| name.trim() == "infeed-inflate")
            })
        });
        drop(reader);
    }
}
