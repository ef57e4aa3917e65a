//! A compressed shard read by several threads at once: its index's access
//! points (as `infeed convert` and `infeed index` write them, or as its
//! first pass learned them: `points.rs`) cut it into spans of about a MiB
//! of output each, and helper threads (`infeed-inflate`) each inflate a
//! span from its point, frame it and check its records' CRCs, while the
//! shard thread hands the spans' records on in order. A dataset of a few
//! large GZIP shards uses as many cores as the stream gives it, where one
//! thread per shard inflated at one core's rate. A local shard is mapped
//! whole; an object in a store is fetched a range per span, from the byte
//! before its point to about its last record's end (see [`Compressed::of`];
//! again, to the next point past it, where that proves short).
//!
//! It only ever speeds a read up: the first span that does not read
//! cleanly (a bad CRC, a cut file, a stream that does not inflate) ends
//! it, and the shard's own reader goes on from that span's first record
//! not handed on, so every error, and every skip under
//! `on_corrupt(Skip)`, is exactly the reader's (its errors numbered from
//! the shard's start, as the reader's are). The last span must end where
//! the stream does, so a shard indexed with its cut last record skipped is
//! the reader's to report. A shard without an index (nor points learned),
//! with a stale one, or one whose spans would be over [`SPAN_MAX`] is read
//! by its reader alone.
//!
//! Not checked here, where the reader checks it: the CRC-32 and length in
//! the trailer of a GZIP member that ends inside the shard (the records'
//! own CRCs cover their bytes; the last member's trailer lies in the last
//! 4 KiB, which the index's identity hashes).

use std::collections::{BTreeMap, HashSet};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::AtomicBool;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use crossbeam_channel::{bounded, unbounded};

use super::points::{LearnedPoints, Learning};
use super::unread::{FRAME, HandOn, is_local, open};
use crate::index::zran::{ends_at, inflate_into};
use crate::index::{IndexError, ShardIndex, index_urls, load};
use crate::pipeline::item::{LengthScan, carried};
use crate::pipeline::stats::StageStats;
use crate::pipeline::threads::spawn_scoped;
use crate::record::chunk_ring::ChunkRing;
use crate::record::mapped;
use crate::record::{Compression, CorruptPolicy, Deframer, ReadOptions, Record, RecordError};
use crate::source::{ReadStats, ShardInfo, SourceOptions, read_range};

/// Output a span may inflate (from its access point to its last record's
/// end): 8 default spans. An index with fewer points, or records larger
/// than that, is read by the reader alone, so the spans in flight never
/// hold more than `2 × threads` of this.
const SPAN_MAX: u64 = 8 * crate::index::DEFAULT_SPAN;

/// Compressed bytes fetched past what a span's last record likely needs.
const TAIL: u64 = 64 << 10;

/// How a stream's compressed shards are read by spans.
#[derive(Clone, Debug)]
pub(crate) struct SpanReads {
    /// Helper threads per shard.
    pub threads: usize,
    /// Where the shards' indexes are (`None`: beside each shard).
    pub index_dir: Option<String>,
    /// The points learned by first passes of shards without an index, for
    /// the passes after (`None`: each file is read once).
    pub learned: Option<Arc<LearnedPoints>>,
    /// Objects found to have no index, not looked for again.
    pub without: Without,
}

impl SpanReads {
    /// For a host of `workers` workers that keeps `open` shards open at
    /// once: each shard gets its share of the workers' cores, `None` where
    /// that share is below two (a thread per shard reads as fast, without
    /// the hand-offs).
    /// With `learn`, a shard without an index learns its points on its
    /// first pass (`points.rs`).
    pub fn for_host(
        workers: usize,
        open: usize,
        index_dir: Option<String>,
        learn: bool,
    ) -> Option<SpanReads> {
        let threads = workers / open.max(1);
        (threads >= 2).then(|| SpanReads {
            threads,
            index_dir,
            learned: learn.then(Arc::default),
            without: Without::default(),
        })
    }

    /// How a first pass of `url` learns its points, where it can.
    pub fn learning(
        &self,
        url: &str,
        read: &ReadOptions,
        source: &SourceOptions,
    ) -> Option<Learning<'_>> {
        self.learned.as_ref()?.learning(url, read, source)
    }

    /// The index to read `url` by, when it is a compressed shard (by
    /// `read`'s compression or its name) with a current index whose spans
    /// cover it, learned or found where `infeed index` puts it (through
    /// `source`); `None`: its reader reads it alone. Looked for each time
    /// the shard is opened, except an object found to have none, once a
    /// run (its lookups are requests; every reader of a run takes an
    /// object to stay as it was).
    pub fn index_of(
        &self,
        url: &str,
        read: &ReadOptions,
        source: &SourceOptions,
    ) -> Option<Arc<ShardIndex>> {
        let compression = read
            .compression
            .or_else(|| Compression::from_extension(url))?;
        if compression == Compression::None {
            return None;
        }
        if let Some(index) = self.learned.as_ref().and_then(|l| l.get(url)) {
            return covered(index, compression);
        }
        let object = !is_local(url);
        if object && self.without.lock().ok()?.contains(url) {
            return None;
        }
        // Looked up unlocked: other shards' lookups go on meanwhile.
        match self.find(url, source) {
            Ok(index) => covered(index, compression),
            Err(missing) => {
                if object && missing {
                    self.without.lock().ok()?.insert(url.to_owned());
                }
                None
            }
        }
    }

    /// The index of `url` where `infeed index` puts it; else whether
    /// there is none (not a stale or unreadable one, nor a failed read).
    fn find(&self, url: &str, source: &SourceOptions) -> Result<Arc<ShardIndex>, bool> {
        for place in index_urls(url, self.index_dir.as_deref()) {
            match load(url, &place, source) {
                Ok(index) => return Ok(Arc::new(index)),
                Err(IndexError::Missing { .. }) => {}
                // A stale or unreadable index: the reader needs none.
                Err(_) => return Err(false),
            }
        }
        Err(true)
    }
}

/// Objects found to have no index.
type Without = Arc<Mutex<HashSet<String>>>;

/// `index`, if its access points cover its records: the first at the
/// start of the stream, its records one after another (an index built past
/// a corrupt region leaves bytes no span would check).
fn covered(index: Arc<ShardIndex>, compression: Compression) -> Option<Arc<ShardIndex>> {
    let ok = index.compression == compression
        && index.contiguous()
        && index.points.first().is_some_and(|p| p.out == 0);
    ok.then_some(index)
}

/// The records of one span: from `from` to `to` in the uncompressed
/// stream, inflated from access point `point`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Span {
    point: usize,
    from: u64,
    to: u64,
}

/// The spans of `index` from the record boundary `start` on: each holds
/// the records whose headers lie between its access point and the next.
fn spans(index: &ShardIndex, start: u64) -> Vec<Span> {
    let header = |i: u64| index.record(i).map_or(index.end(), |(offset, _)| offset);
    let bounds: Vec<u64> = index
        .points
        .iter()
        .map(|p| header(index.first_from(p.out)))
        .chain([index.end()])
        .collect();
    bounds
        .windows(2)
        .enumerate()
        .map(|(point, w)| Span {
            point,
            from: w[0].max(start),
            to: w[1],
        })
        .filter(|s| s.from < s.to)
        .collect()
}

/// A span read: its records (and their lengths, when measured), and
/// where the shard's reader must go on if it did not read cleanly.
struct SpanRead {
    records: Vec<Record>,
    lengths: Vec<u32>,
    stopped_at: Option<u64>,
}

impl SpanRead {
    /// Nothing read: the reader goes on at `from`.
    fn failed(from: u64) -> Self {
        SpanRead {
            records: Vec::new(),
            lengths: Vec::new(),
            stopped_at: Some(from),
        }
    }
}

/// Where a shard's compressed bytes are read from: a local file mapped
/// whole, or an object in a store, a range per span.
enum Compressed {
    Mapped(Bytes),
    Stored {
        shard: ShardInfo,
        source: SourceOptions,
        stats: Arc<ReadStats>,
    },
}

impl Compressed {
    /// The shard `url` of `size` compressed bytes, opened to read spans;
    /// `None` where it cannot be (the reader meets, and names, that).
    fn open(url: &str, size: u64, source: &SourceOptions) -> Option<Compressed> {
        if is_local(url) {
            let map = open(url).ok().and_then(|f| mapped::map_whole(&f).ok())?;
            return Some(Compressed::Mapped(map));
        }
        Some(Compressed::Stored {
            shard: ShardInfo {
                url: url.to_owned(),
                size,
            },
            source: source.clone(),
            stats: ReadStats::new(),
        })
    }

    /// The bytes that inflate `span` of `index`: from its access point
    /// (the byte before, where the point has bits) to the end of the shard
    /// (mapped), or fetched by a range read: `surely` to the first point
    /// at or past the span's end, else to the last point before its end
    /// and twice the output left after that point (a span's last record
    /// runs past the next point by less than a record, so this fetches
    /// about the span's own bytes, where the first would fetch two spans'
    /// worth; a fetch found short is made again, surely). With the bytes,
    /// whether a sure fetch would be longer.
    fn of(&self, index: &ShardIndex, span: Span, surely: bool) -> Option<(Bytes, bool)> {
        let point = &index.points[span.point];
        let at = point.input.checked_sub(u64::from(point.bits > 0))?;
        match self {
            Compressed::Mapped(map) => {
                let at = usize::try_from(at).ok().filter(|at| *at <= map.len())?;
                Some((map.slice(at..), false))
            }
            Compressed::Stored {
                shard,
                source,
                stats,
            } => {
                let after = &index.points[span.point..];
                let sure = after
                    .iter()
                    .find(|q| q.out >= span.to)
                    .map_or(shard.size, |q| (q.input + 1).min(shard.size));
                let last = after.iter().rfind(|q| q.out < span.to).unwrap_or(point);
                let likely = last.input + 1 + 2 * (span.to - last.out) + TAIL;
                // The last span is checked to end where the stream does.
                let end = if surely || span.to >= index.end() {
                    sure
                } else {
                    sure.min(likely)
                };
                let range = read_range(shard, at..end, source, stats.clone());
                let bytes = futures::executor::block_on(range).ok()?;
                Some((bytes, end < sure))
            }
        }
    }

    /// Whether the file under a map was cut while `during` read it (a read
    /// from a store meets a cut as an error).
    fn cut_during<T>(&self, during: impl FnOnce() -> T) -> (T, bool) {
        let faults = mapped::faults();
        let result = during();
        let cut = match self {
            Compressed::Mapped(map) => {
                mapped::faults() != faults && mapped::cut_under(map.as_ptr() as usize, map.len())
            }
            Compressed::Stored { .. } => false,
        };
        (result, cut)
    }
}

/// Inflates `span` of the shard `url` from its access point into a buffer
/// of `ring`, and frames and checks its records as the reader would.
fn read_span(
    ring: &mut ChunkRing,
    url: &str,
    index: &ShardIndex,
    bytes: &Compressed,
    span: Span,
    checks: &ReadOptions,
    scan: Option<&LengthScan>,
) -> SpanRead {
    let mut read = SpanRead::failed(span.from);
    let point = &index.points[span.point];
    let mut out = ring.take(usize::try_from(span.to - span.from).unwrap_or(0));
    let mut inflate = |compressed: &Bytes| {
        let want = span.from..span.to;
        let (inflated, cut) =
            bytes.cut_during(|| inflate_into(index.compression, point, compressed, want, &mut out));
        inflated.is_ok() && !cut
    };
    let Some((mut compressed, short)) = bytes.of(index, span, false) else {
        return read;
    };
    if !inflate(&compressed) {
        if !short {
            return read;
        }
        // Fetched short: once more, to the point past the span.
        match bytes.of(index, span, true) {
            Some((more, _)) if inflate(&more) => compressed = more,
            _ => return read,
        }
    }
    let inflated = Bytes::from(out);
    ring.keep(&inflated);
    let mut deframer = Deframer::starting_at(url, checks, span.from);
    deframer.push(inflated);
    let mut next = span.from;
    let mut finished = false;
    loop {
        let record = match deframer.next_record() {
            Ok(Some(record)) => record,
            Ok(None) if !finished => {
                finished = true;
                if deframer.finish().is_err() {
                    break;
                }
                continue;
            }
            Ok(None) | Err(_) => break,
        };
        next = record.offset + record.data.len() as u64 + FRAME;
        if let Some(scan) = scan {
            read.lengths.push(carried(scan, &record.data));
        }
        read.records.push(record);
    }
    // The last span's end must be the stream's: a shard indexed with a
    // record cut off its end (skipped) is the reader's to report.
    let whole = next == span.to
        && (span.to < index.end() || ends_at(index.compression, point, &compressed, span.to));
    read.stopped_at = (!whole).then_some(next);
    read
}

/// Reads the compressed local shard `url` from the record boundary
/// `start` by the spans of its `index` on `threads` helper threads, handing
/// the records on in order, in blocks sized by `out`, counted into
/// `stats`; where a span does not read cleanly, `read_on` reads the shard
/// from its first record not handed on, given the records before it when
/// the read began at the shard's start (so that its errors are numbered
/// as a reader's from the start).
#[allow(clippy::too_many_arguments)]
pub(super) fn by_spans(
    url: &str,
    start: u64,
    read: &ReadOptions,
    source: &SourceOptions,
    index: &ShardIndex,
    threads: usize,
    scan: Option<&LengthScan>,
    stats: &StageStats,
    out: &impl HandOn,
    read_on: impl FnOnce(u64, Option<u64>) -> Result<(), RecordError>,
) -> Result<(), RecordError> {
    let counted = |at: u64| (start == 0).then(|| index.first_from(at));
    let Some(bytes) = Compressed::open(url, index.shard.size, source) else {
        return read_on(start, counted(start));
    };
    let spans = spans(index, start);
    if spans
        .iter()
        .any(|s| s.to - index.points[s.point].out > SPAN_MAX)
    {
        return read_on(start, counted(start));
    }
    // What each span is checked with: its first problem ends it, and the
    // shard's reader meets that problem again, under the user's policy.
    let checks = ReadOptions {
        on_corrupt: CorruptPolicy::Fail,
        ..read.clone()
    };
    let stop = AtomicBool::new(false);
    let reader_from = std::thread::scope(|scope| {
        let (jobs, to_do) = bounded::<usize>(spans.len().max(1));
        let (done, results) = unbounded::<(usize, SpanRead)>();
        let mut helpers = 0;
        for _ in 0..threads {
            let (to_do, done) = (to_do.clone(), done.clone());
            let (spans, bytes, checks, stop) = (&spans, &bytes, &checks, &stop);
            let helper = spawn_scoped(scope, "infeed-inflate", move || {
                let mut ring = ChunkRing::shared();
                for s in to_do {
                    if stop.load(Relaxed) {
                        return;
                    }
                    let busy = stats.busy_timer();
                    let span = spans[s];
                    // A panic (a length scan's) must not lose the span the
                    // shard thread waits for: the reader meets it again.
                    let read = catch_unwind(AssertUnwindSafe(|| {
                        read_span(&mut ring, url, index, bytes, span, checks, scan)
                    }))
                    .unwrap_or_else(|_| SpanRead::failed(span.from));
                    drop(busy);
                    if done.send((s, read)).is_err() {
                        return;
                    }
                }
            });
            helpers += usize::from(helper.is_ok());
        }
        drop((to_do, done));
        if helpers == 0 {
            // No thread to spare: the reader reads it all.
            return Some(start);
        }
        // Spans inflated ahead of the one handed on: enough to keep every
        // helper busy while the consumer takes one.
        let ahead = 2 * helpers;
        let (mut sent, mut next) = (0, 0);
        let mut ready: BTreeMap<usize, SpanRead> = BTreeMap::new();
        let mut block = Vec::new();
        let mut lengths = Vec::new();
        let mut bytes = 0;
        // Sized once a block, as the consumer's pace ramps it up.
        let mut block_bytes = out.block_bytes();
        let stopped_at = loop {
            while sent < spans.len() && sent < next + ahead {
                let _ = jobs.send(sent);
                sent += 1;
            }
            if next == spans.len() {
                break None;
            }
            let span = match ready.remove(&next) {
                Some(span) => span,
                None => match results.recv() {
                    Ok((s, span)) => {
                        ready.insert(s, span);
                        continue;
                    }
                    Err(_) => break Some(spans[next].from),
                },
            };
            next += 1;
            let measured = scan.is_some();
            let mut lens = span.lengths.into_iter();
            for record in span.records {
                bytes += record.data.len() as u64 + FRAME;
                block.push(record);
                if measured {
                    lengths.extend(lens.next());
                }
                if bytes >= block_bytes {
                    stats.add_records(block.len() as u64);
                    stats.add_bytes(bytes);
                    bytes = 0;
                    let full = std::mem::take(&mut block);
                    if !out.hand_on(full, std::mem::take(&mut lengths)) {
                        stop.store(true, Relaxed);
                        return None;
                    }
                    block_bytes = out.block_bytes();
                }
            }
            if span.stopped_at.is_some() {
                break span.stopped_at;
            }
        };
        stop.store(true, Relaxed);
        drop(jobs);
        stats.add_records(block.len() as u64);
        stats.add_bytes(bytes);
        if !block.is_empty() && !out.hand_on(block, lengths) {
            return None;
        }
        stopped_at
    });
    match reader_from {
        Some(at) => read_on(at, counted(at)),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::super::testing::{Taker, gzip_shard_of, noisy};
    use super::*;
    use crate::index::{BuildOptions, build};
    use crate::record::RecordReader;

    /// A GZIP shard of `n` noisy records (record `bad`'s CRC wrong) and
    /// its index with access points every `span` bytes of output, built
    /// without checking CRCs.
    fn shard(
        dir: &std::path::Path,
        n: usize,
        bad: Option<usize>,
        span: u64,
    ) -> (String, ShardIndex) {
        let records: Vec<Vec<u8>> = (0..n).map(noisy).collect();
        let url = gzip_shard_of(&dir.join("s.tfrecord.gz"), &records, bad);
        let opts = BuildOptions {
            read: ReadOptions {
                verify_crc: false,
                ..ReadOptions::default()
            },
            span,
            ..BuildOptions::default()
        };
        let index = build(&url, &opts).unwrap();
        (url, index)
    }

    /// What the shard's reader gives from `start`: each record's offset and
    /// bytes, then its error.
    fn read_alone(url: &str, start: u64) -> (Vec<(u64, Vec<u8>)>, Option<RecordError>) {
        let file = std::fs::File::open(url).unwrap();
        let opts = ReadOptions::default();
        let reader = RecordReader::resume(file, url, Compression::Gzip, &opts, start);
        let mut records = Vec::new();
        for r in reader {
            match r {
                Ok(r) => records.push((r.offset, r.data.to_vec())),
                Err(e) => return (records, Some(e)),
            }
        }
        (records, None)
    }

    fn taken(taker: Taker) -> Vec<(u64, Vec<u8>)> {
        let blocks = taker.blocks.into_inner();
        blocks
            .into_iter()
            .flatten()
            .map(|r| (r.offset, r.data.to_vec()))
            .collect()
    }

    /// The spans from a record boundary hold each record after it once, in
    /// order, from that boundary to the end of the last record.
    #[test]
    fn spans_cover_each_record_from_the_start_once() {
        let dir = tempfile::tempdir().unwrap();
        let (_, index) = shard(dir.path(), 2000, None, 16 << 10);
        assert!(index.points.len() >= 8, "{} points", index.points.len());
        for first in [0, 1, 777, 1999] {
            let start = index.record(first).unwrap().0;
            let spans = spans(&index, start);
            assert_eq!(spans[0].from, start);
            for pair in spans.windows(2) {
                assert_eq!(pair[0].to, pair[1].from);
                assert!(pair[0].point < pair[1].point);
            }
            assert_eq!(spans.last().unwrap().to, index.end());
            for s in &spans {
                assert!(index.record_at(s.from).is_some(), "{s:?}");
                assert!(index.points[s.point].out <= s.from);
            }
        }
    }

    /// Read by spans on three threads, a shard gives exactly its reader's
    /// records, from its start and from a record in its middle, measured
    /// where a scan is given, without asking the reader for anything.
    #[test]
    fn a_shard_read_by_spans_gives_its_readers_records() {
        let dir = tempfile::tempdir().unwrap();
        let (url, index) = shard(dir.path(), 2000, None, 16 << 10);
        let scan: LengthScan = Arc::new(|r: &[u8]| Some(r.len() * 2));
        for first in [0, 1234] {
            let start = index.record(first).unwrap().0;
            let taker = Taker::new(5000);
            let stats = StageStats::default();
            let read = ReadOptions::default();
            let never = |at, _| panic!("the reader asked to go on at {at}");
            let scanned = Some(&scan);
            by_spans(
                &url,
                start,
                &read,
                &SourceOptions::default(),
                &index,
                3,
                scanned,
                &stats,
                &taker,
                never,
            )
            .unwrap();
            let lengths = taker.lengths.borrow().clone();
            let got = taken(taker);
            let (want, error) = read_alone(&url, start);
            assert!(error.is_none());
            assert_eq!(got.len(), 2000 - first as usize);
            assert!(got == want, "from record {first}");
            let doubled: Vec<u32> = want.iter().map(|(_, r)| 2 * r.len() as u32).collect();
            assert_eq!(lengths, doubled);
            assert_eq!(stats.figures().records, got.len() as u64);
        }
    }

    /// A record whose CRC is wrong ends the spans: the records before it
    /// are handed on, and the reader is asked to go on at it, told the
    /// records before it when the read began at the shard's start.
    #[test]
    fn a_corrupt_record_is_left_to_the_reader() {
        let dir = tempfile::tempdir().unwrap();
        let (url, index) = shard(dir.path(), 2000, Some(1500), 16 << 10);
        let bad = index.record(1500).unwrap().0;
        for (first, counted) in [(0, Some(1500)), (700, None)] {
            let start = index.record(first).unwrap().0;
            let taker = Taker::new(5000);
            let asked = std::cell::Cell::new(None);
            let read_on = |at, counted| {
                asked.set(Some((at, counted)));
                Ok(())
            };
            let read = ReadOptions::default();
            let stats = StageStats::default();
            by_spans(
                &url,
                start,
                &read,
                &SourceOptions::default(),
                &index,
                2,
                None,
                &stats,
                &taker,
                read_on,
            )
            .unwrap();
            assert_eq!(asked.get(), Some((bad, counted)));
            let (want, error) = read_alone(&url, start);
            assert_eq!(error.unwrap().offset, bad);
            assert!(taken(taker) == want);
        }
    }

    /// A shard whose last record was cut off after it was indexed with
    /// that record skipped (the index ends before the stream does) is left
    /// to the reader at the index's end; a span that panics, at its start.
    #[test]
    fn what_follows_the_index_and_a_panic_are_left_to_the_reader() {
        let dir = tempfile::tempdir().unwrap();
        let (url, index) = shard(dir.path(), 2000, None, 16 << 10);
        // The stream's last 5 bytes cut, the file written again whole.
        let mut plain = Vec::new();
        let file = std::fs::File::open(&url).unwrap();
        std::io::Read::read_to_end(&mut flate2::read::MultiGzDecoder::new(file), &mut plain)
            .unwrap();
        plain.truncate(plain.len() - 5);
        let cut_url = dir.path().join("cut.tfrecord.gz");
        let mut gz = flate2::write::GzEncoder::new(
            std::fs::File::create(&cut_url).unwrap(),
            flate2::Compression::default(),
        );
        std::io::Write::write_all(&mut gz, &plain).unwrap();
        gz.finish().unwrap();
        let cut_url = cut_url.display().to_string();
        let skipping = BuildOptions {
            read: ReadOptions::default().on_corrupt(CorruptPolicy::Skip),
            span: 16 << 10,
            ..BuildOptions::default()
        };
        let cut_index = build(&cut_url, &skipping).unwrap();
        assert_eq!(cut_index.len(), 1999);
        let asked = std::cell::Cell::new(None);
        let read_on = |at, _| {
            asked.set(Some(at));
            Ok(())
        };
        let (read, stats) = (ReadOptions::default(), StageStats::default());
        let taker = Taker::new(1 << 20);
        by_spans(
            &cut_url,
            0,
            &read,
            &SourceOptions::default(),
            &cut_index,
            2,
            None,
            &stats,
            &taker,
            read_on,
        )
        .unwrap();
        assert_eq!(asked.get(), Some(cut_index.end()));
        assert_eq!(taken(taker).len(), 1999);
        // A scan that panics on record 900: its span goes to the reader.
        let at = index.record(900).unwrap().0;
        let scan: LengthScan = Arc::new(move |r: &[u8]| {
            assert!(r != noisy(900).as_slice(), "record 900");
            Some(r.len())
        });
        let asked = std::cell::Cell::new(None);
        let read_on = |at, _| {
            asked.set(Some(at));
            Ok(())
        };
        let taker = Taker::new(1 << 20);
        by_spans(
            &url,
            0,
            &read,
            &SourceOptions::default(),
            &index,
            2,
            Some(&scan),
            &stats,
            &taker,
            read_on,
        )
        .unwrap();
        let asked = asked.get().unwrap();
        assert!(asked <= at, "{asked} after record 900's {at}");
        let before = taken(taker);
        assert_eq!(
            before.last().map_or(0, |(o, r)| o + r.len() as u64 + FRAME),
            asked
        );
    }

    /// Only a compressed local shard with a current index covering it is
    /// read by spans.
    #[test]
    fn only_compressed_local_shards_with_current_indexes_are_read_by_spans() {
        let dir = tempfile::tempdir().unwrap();
        let (url, index) = shard(dir.path(), 300, None, 4 << 10);
        let spans = SpanReads::for_host(4, 1, None, false).unwrap();
        let read = ReadOptions::default();
        let source = SourceOptions::default();
        assert!(
            spans.index_of(&url, &read, &source).is_none(),
            "no index saved"
        );
        let place = crate::index::index_url(&url, None);
        crate::index::save(&index, &place, &SourceOptions::default()).unwrap();
        let index = Some(Arc::new(index));
        assert_eq!(spans.index_of(&url, &read, &source), index);
        assert_eq!(
            spans.index_of(&format!("file://{url}"), &read, &source),
            index
        );
        // Rewritten since: stale.
        let records: Vec<Vec<u8>> = (0..301).map(noisy).collect();
        gzip_shard_of(std::path::Path::new(&url), &records, None);
        assert!(spans.index_of(&url, &read, &source).is_none());
        // Too few workers for two threads a shard.
        assert!(SpanReads::for_host(3, 2, None, false).is_none());
        assert_eq!(
            SpanReads::for_host(4, 2, None, false).map(|s| s.threads),
            Some(2)
        );
    }
}
