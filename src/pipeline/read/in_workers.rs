//! Reads in workers: each record's bytes read, checked and assembled on
//! one core.
//!
//! On the plain path a shard thread reads a chunk and checks its records,
//! and a worker on another core assembles them: every record's bytes cross
//! between the cores' caches (docs/architecture.md, "Threads"). Here a
//! plain local shard's thread frames it instead (by its headers, or by its
//! index: `unread.rs`) and hands on its records unread: stand-ins of each
//! record's length, which nothing before the worker reads
//! ([`Item::unread`](crate::pipeline::item::Item)). The
//! worker that assembles a batch reads its unread records itself
//! ([`WorkerReads`]), one `pread` per run of neighbours into a buffer of
//! its own that it reuses (with [`ReadOptions::mmap`], a view of its own
//! map of the shard instead), and checks their framing and both CRCs there
//! as a shard reader would, so the bytes come in once, hot, where they are
//! parsed. A compressed or cloud shard is read by its shard thread as
//! usual.

use std::sync::Arc;

use bytes::Bytes;

use crate::index::{find, read_at};
use crate::pipeline::error::PipelineError;
use crate::pipeline::group::raw_batch::{RawBatch, file_name};
use crate::prefetch::{WHOLE_RECORD_BYTES, prefetch_ahead};
use crate::record::{
    Compression, Deframer, ErrorKind, HEADER_LEN, ReadOptions, RecordError, parse_header,
};
use crate::source::SourceOptions;

use super::shared_maps::{SharedMaps, map_shard, own_handle};
use super::unread::{
    FRAME, Indexes, LeftUnread, ShardChecks, cut_short, is_local, number_by_headers, read_plain,
};

/// Shards a worker keeps open, the most recently read (a batch reads from
/// one, or from an interleave's few; a job may have thousands, and each
/// worker keeping them all would run into the process's file limit).
const OPEN_FILES: usize = 16;

/// The indexes found of the plain local shards of `files`, in `dir` or
/// where an index is found by default ([`find`]): such a shard is framed by
/// its index rather than by a walk of its headers, which saves the walk's
/// one dependent read per record on the first pass. None is built (a shard
/// without one is walked, and what the walk learns frames the next pass);
/// an index that cannot serve (stale, unreadable) is said on standard error
/// and the shard walked.
pub(crate) fn found_indexes(
    files: &[String],
    dir: Option<&str>,
    read: &ReadOptions,
    source: &SourceOptions,
) -> Indexes {
    let found = files
        .iter()
        .filter(|f| is_local(f) && read_plain(f, read))
        .filter_map(|file| match find(file, dir, source) {
            Ok(Some((index, _))) if index.compression == Compression::None => {
                Some((file.clone(), Arc::new(index)))
            }
            Ok(_) => None,
            Err(e) => {
                eprintln!("infeed: {e}: framing {file} by its headers instead");
                None
            }
        });
    Arc::new(found.collect())
}

/// Shard `file`'s entry in `list` (the most recently used last, at most
/// [`OPEN_FILES`]), made by `make` if it has none.
fn recent<T, E>(
    list: &mut Vec<(u32, T)>,
    file: u32,
    make: impl FnOnce() -> Result<T, E>,
) -> Result<&T, E> {
    match list.iter().position(|(f, _)| *f == file) {
        Some(i) => {
            let entry = list.remove(i);
            list.push(entry);
        }
        None => {
            let made = make()?;
            if list.len() == OPEN_FILES {
                list.remove(0);
            }
            list.push((file, made));
        }
    }
    Ok(&list[list.len() - 1].1)
}

/// Neighbouring unread records of one shard, read together (with one
/// `pread`, or as one view of the worker's map of the shard).
struct Run {
    file: u32,
    /// Where its bytes start in the shard, and in the `pread` buffer.
    offset: u64,
    at: usize,
    len: usize,
    /// Its records, a range of the unread records in shard order.
    first: usize,
    end: usize,
}

/// How the workers check the records they read.
#[derive(Clone)]
pub(crate) struct ReadChecks {
    /// The CRC checks and largest record, and how the shards are read
    /// (`mmap`).
    pub checks: ReadOptions,
    /// Where a mixture's sources check differently, each shard's checks
    /// (`LeftUnread::read_checks`); empty: `checks` for every shard.
    pub by_shard: ShardChecks,
    /// The shards' indexes, to name a bad record's number in its error.
    pub indexes: Option<Indexes>,
    /// Maps of the shards that every worker reads through, for batches of
    /// records scattered over the shards (the global shuffle's, a shuffle
    /// buffer's): a view of a map each, not a `pread` each, nor maps of
    /// each worker's own (`shared_maps.rs`).
    pub shared: Option<Arc<SharedMaps>>,
}

impl ReadChecks {
    /// How the records the start left `unread` are read and checked: as
    /// `read` says, or each mixture source's shards as its own settings
    /// say; through `shared` maps where the start made them.
    pub fn new(
        unread: Option<&LeftUnread>,
        shared: Option<Arc<SharedMaps>>,
        read: &ReadOptions,
    ) -> ReadChecks {
        let (checks, by_shard) = unread.map_or_else(
            || (read.clone(), ShardChecks::default()),
            |u| u.read_checks(read),
        );
        ReadChecks {
            checks,
            by_shard,
            indexes: unread.map(|u| u.indexes.clone()),
            shared,
        }
    }
}

/// A worker's reader of unread records: the shards it has open, and the
/// buffer it reads each batch into (taken back once the batch is made);
/// or, with [`ReadOptions::mmap`], its own maps of the shards, which its
/// records are views of (no copy: img +13–19% pinned, +8–20% on 2 cores;
/// lm +1%). Its own: a map shared by the workers would have its reference
/// count raised and lowered by every core for every record.
pub(crate) struct WorkerReads {
    checks: ReadOptions,
    by_shard: ShardChecks,
    indexes: Option<Indexes>,
    shared: Option<Arc<SharedMaps>>,
    /// Its open shards by file number, the most recently read last.
    files: Vec<(u32, std::fs::File)>,
    /// Its maps of shards by file number, likewise, at most as many (`mmap`
    /// only): each holds its shard's page tables, and a job may read
    /// thousands of shards.
    maps: Vec<(u32, Bytes)>,
    buf: Vec<u8>,
    /// The buffer as the last batch's records slice it.
    lent: Option<Bytes>,
    /// Its own handles of the shared maps, by file number
    /// (`shared_maps::own_handle`).
    handles: Vec<Option<Bytes>>,
}

impl WorkerReads {
    /// Checks records as `checks` say.
    pub fn new(checks: &ReadChecks) -> Self {
        WorkerReads {
            checks: checks.checks.clone(),
            by_shard: checks.by_shard.clone(),
            indexes: checks.indexes.clone(),
            shared: checks.shared.clone(),
            files: Vec::new(),
            maps: Vec::new(),
            buf: Vec::new(),
            lent: None,
            handles: Vec::new(),
        }
    }

    /// Reads and checks `raw`'s unread records, putting each payload in
    /// its place: an error names the shard and the record's offset, as a
    /// shard reader's would.
    pub fn read(&mut self, raw: &mut RawBatch) -> Result<(), PipelineError> {
        // Read by their workers, mostly all or none: sized once.
        let mut order = match raw.items.first() {
            Some(item) if item.unread => Vec::with_capacity(raw.len()),
            _ => Vec::new(),
        };
        order.extend(
            (raw.items.iter().enumerate()).filter_map(|(i, it)| it.unread.then_some(i as u32)),
        );
        if order.is_empty() {
            return Ok(());
        }
        self.take_back();
        // In shard order, so that neighbours in a shard are read together
        // whatever their order in the batch (an interleave alternates
        // shards record by record).
        let place = |i: &u32| {
            let item = &raw.items[*i as usize];
            (item.file, item.offset)
        };
        if !order.is_sorted_by_key(place) {
            order.sort_unstable_by_key(place);
        }
        let mut runs: Vec<Run> = Vec::new();
        let mut at = 0;
        for (k, &i) in order.iter().enumerate() {
            let item = &raw.items[i as usize];
            let (file, offset) = (item.file, item.offset);
            let framed = item.data.len() + FRAME as usize;
            match runs.last_mut() {
                Some(run) if run.file == file && run.offset + run.len as u64 == offset => {
                    run.len += framed;
                    run.end = k + 1;
                }
                _ => runs.push(Run {
                    file,
                    offset,
                    at,
                    len: framed,
                    first: k,
                    end: k + 1,
                }),
            }
            at += framed;
        }
        let chunks = if let Some(shared) = self.shared.clone() {
            self.shared_maps(&shared, raw, &order, &runs)?
        } else if self.checks.mmap {
            self.mapped(raw, &order, &runs)?
        } else {
            self.pread(raw, &order, &runs, at)?
        };
        for (k, (run, chunk)) in runs.iter().zip(&chunks).enumerate() {
            // A scattered record (a shuffle's, through a map) is a cache
            // and TLB miss where its header is read: its lines are asked
            // for a few runs ahead, while the runs between are checked.
            prefetch_ahead(&chunks, k, WHOLE_RECORD_BYTES);
            let url = file_name(&raw.files, run.file);
            let mut deframer = Deframer::starting_at(url, self.checks_of(url), run.offset);
            deframer.push(chunk.clone());
            for &i in &order[run.first..run.end] {
                let item = &mut raw.items[i as usize];
                let (offset, want) = (item.offset, item.data.len());
                let record = deframer.next_record().map_err(|mut e| {
                    e.index = self.record_number(url, e.offset);
                    e
                })?;
                match record {
                    Some(record) if record.offset == offset && record.data.len() == want => {
                        item.data = record.data;
                        item.unread = false;
                    }
                    // The shard holds another record than its index says
                    // (changed since, with the same size and time): the
                    // length its header gives (CRC-checked by the deframer
                    // before it could differ).
                    _ => {
                        let found = (chunk.get((offset - run.offset) as usize..))
                            .and_then(<[u8]>::first_chunk::<HEADER_LEN>)
                            .map_or(0, |h| parse_header(h).0);
                        let mut e = RecordError::new(
                            url,
                            offset,
                            ErrorKind::IndexMismatch {
                                indexed: want as u64,
                                found,
                            },
                        );
                        e.index = self.record_number(url, offset);
                        return Err(e.into());
                    }
                }
            }
        }
        Ok(())
    }

    /// Each run as a view of the shared map of its shard; a run of a shard
    /// not read through one, or past the end it was mapped at (cut or grown
    /// since), through the worker's own map, which names what is wrong.
    fn shared_maps(
        &mut self,
        shared: &SharedMaps,
        raw: &RawBatch,
        order: &[u32],
        runs: &[Run],
    ) -> Result<Vec<Bytes>, PipelineError> {
        let mut chunks = Vec::with_capacity(runs.len());
        for (k, run) in runs.iter().enumerate() {
            let url = file_name(&raw.files, run.file);
            let end = run.offset.saturating_add(run.len as u64);
            match shared.map(run.file, url).filter(|m| end <= m.len() as u64) {
                Some(map) => {
                    let at = run.file as usize;
                    if self.handles.len() <= at {
                        self.handles.resize(at + 1, None);
                    }
                    let own = self.handles[at].get_or_insert_with(|| own_handle(map));
                    chunks.push(own.slice(run.offset as usize..end as usize));
                }
                None => chunks.extend(self.mapped(raw, order, &runs[k..=k])?),
            }
        }
        // In shard order: a shard's last run is its furthest.
        let last_of_shard = |k: usize| runs.get(k + 1).is_none_or(|n| n.file != runs[k].file);
        let ends = (0..runs.len())
            .filter(|&k| last_of_shard(k))
            .map(|k| (runs[k].file, runs[k].offset + runs[k].len as u64));
        let bytes = runs.iter().map(|run| run.len as u64).sum();
        shared.note_read(bytes, order.len() as u64, ends);
        Ok(chunks)
    }

    /// Reads each run with one `pread` into the worker's buffer (`at`
    /// bytes in all): each run's bytes, a slice of it.
    fn pread(
        &mut self,
        raw: &RawBatch,
        order: &[u32],
        runs: &[Run],
        at: usize,
    ) -> Result<Vec<Bytes>, PipelineError> {
        // Grown, never shrunk: a buffer kept from the batches before needs
        // no zeroing.
        let mut buf = std::mem::take(&mut self.buf);
        if buf.len() < at {
            buf.resize(at, 0);
        }
        for run in runs {
            let url = file_name(&raw.files, run.file);
            let io = |e: std::io::Error| RecordError::new(url, run.offset, ErrorKind::from_io(e));
            let file = self.open(run.file, url).map_err(io)?;
            if let Err(e) = read_at(file, &mut buf[run.at..run.at + run.len], run.offset) {
                // Cut short since it was indexed: name the record it ends in.
                let len = file.metadata().map_err(io)?.len();
                return Err(self.cut_in(raw, order, run, url, len, io(e)));
            }
        }
        let bytes = Bytes::from(buf);
        let chunks = runs
            .iter()
            .map(|run| bytes.slice(run.at..run.at + run.len))
            .collect();
        self.lent = Some(bytes);
        Ok(chunks)
    }

    /// Each run's bytes as a view of the worker's map of its shard.
    fn mapped(
        &mut self,
        raw: &RawBatch,
        order: &[u32],
        runs: &[Run],
    ) -> Result<Vec<Bytes>, PipelineError> {
        let mut chunks = Vec::with_capacity(runs.len());
        for run in runs {
            let url = file_name(&raw.files, run.file);
            let end = run.offset + run.len as u64;
            // A failure to map is the run's, as a failed `pread` is.
            let at_run = |mut e: RecordError| {
                e.offset = run.offset;
                e
            };
            let mut map = recent(&mut self.maps, run.file, || map_shard(url))
                .map_err(at_run)?
                .clone();
            if end > map.len() as u64 {
                // Mapped when the shard was shorter (it grew since): map it
                // again, as it is now (a shard cut short is mapped twice on
                // its way to the error below).
                map = map_shard(url).map_err(at_run)?;
                self.maps.pop();
                self.maps.push((run.file, map.clone()));
            }
            if end > map.len() as u64 {
                // Cut short before it was mapped.
                let len = map.len() as u64;
                let whole = cut_short(url, run.offset, run.len as u64, len);
                return Err(self.cut_in(raw, order, run, url, len, whole));
            }
            chunks.push(map.slice(run.offset as usize..end as usize));
        }
        Ok(chunks)
    }

    /// The error for `run` of a shard now `len` bytes long: at the first
    /// record of the run it ends in, with its number in the shard
    /// (`otherwise` if none does: a `pread` that failed for another reason).
    fn cut_in(
        &self,
        raw: &RawBatch,
        order: &[u32],
        run: &Run,
        url: &str,
        len: u64,
        otherwise: RecordError,
    ) -> PipelineError {
        let mut error = otherwise;
        for &i in &order[run.first..run.end] {
            let item = &raw.items[i as usize];
            let (offset, framed) = (item.offset, item.data.len() as u64 + FRAME);
            if offset + framed > len {
                error = cut_short(url, offset, framed, len);
                break;
            }
        }
        error.index = self.record_number(url, error.offset);
        error.into()
    }

    /// Shard `file` (at `url`) open, kept among the most recently read.
    fn open(&mut self, file: u32, url: &str) -> std::io::Result<&std::fs::File> {
        let path = url.strip_prefix("file://").unwrap_or(url);
        recent(&mut self.files, file, || std::fs::File::open(path))
    }

    /// The number in its shard of the record at `offset`, by the index,
    /// or by the shard's headers where it has none (an error is rare: a
    /// walk of the headers before it costs nothing on the way there).
    fn record_number(&self, url: &str, offset: u64) -> Option<u64> {
        match self.indexes.as_ref().and_then(|i| i.get(url)) {
            Some(index) => index.record_at(offset),
            None => number_by_headers(url, offset, self.checks_of(url)),
        }
    }

    /// What the records of shard `url` are checked for (its source's
    /// checks, in a mixture whose sources check differently).
    fn checks_of(&self, url: &str) -> &ReadOptions {
        match self.by_shard.is_empty() {
            true => &self.checks,
            false => self.by_shard.get(url).unwrap_or(&self.checks),
        }
    }

    /// Takes the buffer back from the last batch if nothing holds a slice
    /// of it any more (else the next batch reads into a new one).
    fn take_back(&mut self) {
        if let Some(lent) = self.lent.take()
            && let Ok(buf) = lent.try_into_mut()
        {
            self.buf = buf.into();
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::super::testing::record;
    use super::super::unread::{STAND_IN, STAND_IN_LEN, UnreadShard};
    use super::*;
    use crate::index::{BuildOptions, ShardIndex, build};
    use crate::pipeline::item::Item;
    use crate::record::{RecordPart, RecordWriter};

    /// Two plain shards of 8 records each, with their indexes.
    fn shards(dir: &std::path::Path) -> Vec<(String, ShardIndex)> {
        shards_of(dir, 2)
    }

    /// `n` plain shards of 8 records each, with their indexes.
    fn shards_of(dir: &std::path::Path, n: usize) -> Vec<(String, ShardIndex)> {
        (0..n)
            .map(|f| {
                let path = dir.join(format!("s{f}.tfrecord"));
                let mut w = RecordWriter::create(&path, Compression::None).unwrap();
                for i in 0..8 {
                    w.write_record(&record(f, i)).unwrap();
                }
                w.finish().unwrap();
                let path = path.display().to_string();
                let index = build(&path, &BuildOptions::default()).unwrap();
                (path, index)
            })
            .collect()
    }

    /// A batch of the unread records `(file, record)`, as the record thread
    /// hands it over.
    fn unread_batch(shards: &[(String, ShardIndex)], wanted: &[(usize, u64)]) -> RawBatch {
        let mut files: Vec<UnreadShard> = shards
            .iter()
            .map(|(p, _)| UnreadShard::open(p).unwrap())
            .collect();
        let items = wanted
            .iter()
            .map(|&(f, i)| {
                let (offset, framed) = shards[f].1.record(i).unwrap();
                unread_item(files[f].view(offset, framed).unwrap(), f, offset)
            })
            .collect();
        RawBatch::chunk(
            items,
            Arc::new(shards.iter().map(|(p, _)| p.clone()).collect()),
        )
    }

    /// A record left unread: `view` stands in for it.
    fn unread_item(view: Bytes, file: usize, offset: u64) -> Item {
        let mut item = Item::new(view, file as u32, offset);
        item.unread = true;
        item
    }

    /// The records of `raw`, in order.
    fn records(raw: &RawBatch) -> Vec<Bytes> {
        raw.records().cloned().collect()
    }

    /// A worker's reader checking as by default, with no indexes.
    fn reader() -> WorkerReads {
        WorkerReads::new(&ReadChecks {
            checks: ReadOptions::default(),
            by_shard: ShardChecks::default(),
            indexes: None,
            shared: None,
        })
    }

    /// A worker's reader by `pread` or, with `mmap`, by its own maps, with
    /// the index of shard `url`.
    fn reader_indexed(mmap: bool, url: &str, index: ShardIndex) -> WorkerReads {
        WorkerReads::new(&ReadChecks {
            checks: ReadOptions::default().mmap(mmap),
            by_shard: ShardChecks::default(),
            indexes: Some(Arc::new(HashMap::from([(url.to_owned(), Arc::new(index))]))),
            shared: None,
        })
    }

    /// Where the first record lies, and where each lies from it.
    fn starts(raw: &RawBatch) -> (usize, Vec<usize>) {
        let base = raw.items[0].data.as_ptr() as usize;
        let at = raw.records().map(|r| r.as_ptr() as usize - base);
        (base, at.collect())
    }

    #[test]
    fn a_worker_reads_runs_of_neighbours_into_one_buffer_it_reuses() {
        let dir = tempfile::tempdir().unwrap();
        let shards = shards(dir.path());
        // Two runs in shard 0 (records 0 to 2, 5 and 6), one in shard 1.
        let wanted = [(0, 0), (0, 1), (0, 2), (1, 3), (0, 5), (0, 6)];
        let mut reads = reader();
        let mut raw = unread_batch(&shards, &wanted);
        reads.read(&mut raw).unwrap();
        assert!(raw.items.iter().all(|item| !item.unread));
        let got: Vec<&[u8]> = raw.records().map(|r| r.as_ref()).collect();
        let want: Vec<Vec<u8>> = wanted.iter().map(|&(f, i)| record(f, i as usize)).collect();
        assert_eq!(got, want.iter().map(Vec::as_slice).collect::<Vec<_>>());
        // Each payload follows the one before it in shard order in the
        // buffer, framed: shard 0's five, then shard 1's.
        let (base, starts) = starts(&raw);
        assert_eq!(starts, [0, 116, 232, 580, 348, 464]);
        drop(raw);
        // The next batch reads into the same buffer.
        let mut raw = unread_batch(&shards, &[(1, 7)]);
        reads.read(&mut raw).unwrap();
        assert_eq!(raw.items[0].data.as_ref(), record(1, 7));
        assert_eq!(raw.items[0].data.as_ptr() as usize, base);
    }

    #[test]
    fn records_of_interleaved_shards_are_read_shard_by_shard() {
        let dir = tempfile::tempdir().unwrap();
        let shards = shards(dir.path());
        let wanted = [(0, 0), (1, 0), (0, 1), (1, 1), (0, 2), (1, 2)];
        let mut reads = reader();
        let mut raw = unread_batch(&shards, &wanted);
        reads.read(&mut raw).unwrap();
        let want: Vec<Vec<u8>> = wanted.iter().map(|&(f, i)| record(f, i as usize)).collect();
        assert_eq!(records(&raw), want);
        // One run per shard: shard 0's three records, then shard 1's.
        let (_, starts) = starts(&raw);
        assert_eq!(starts, [0, 348, 116, 464, 232, 580]);
    }

    #[test]
    fn a_worker_keeps_only_the_shards_it_read_last_open() {
        let dir = tempfile::tempdir().unwrap();
        let shards = shards_of(dir.path(), OPEN_FILES + 4);
        let mut reads = reader();
        for f in 0..shards.len() {
            let mut raw = unread_batch(&shards, &[(f, 1)]);
            reads.read(&mut raw).unwrap();
            assert_eq!(raw.items[0].data.as_ref(), record(f, 1));
        }
        let open: Vec<u32> = reads.files.iter().map(|(f, _)| *f).collect();
        assert_eq!(open, (4..OPEN_FILES as u32 + 4).collect::<Vec<_>>());
        // Reading one again makes it the most recent.
        let mut raw = unread_batch(&shards, &[(5, 2)]);
        reads.read(&mut raw).unwrap();
        assert_eq!(reads.files.last().map(|(f, _)| *f), Some(5));
        assert_eq!(reads.files.len(), OPEN_FILES);
    }

    #[test]
    fn a_batch_holding_the_buffer_leaves_the_next_one_a_new_one() {
        let dir = tempfile::tempdir().unwrap();
        let shards = shards(dir.path());
        let mut reads = reader();
        let mut first = unread_batch(&shards, &[(0, 0)]);
        reads.read(&mut first).unwrap();
        let mut second = unread_batch(&shards, &[(0, 1)]);
        reads.read(&mut second).unwrap();
        assert_eq!(first.items[0].data.as_ref(), record(0, 0));
        assert_eq!(second.items[0].data.as_ref(), record(0, 1));
    }

    #[test]
    fn a_shard_cut_short_once_framed_is_an_error_at_the_record_it_ends_in() {
        for mmap in [false, true] {
            let dir = tempfile::tempdir().unwrap();
            let shards = shards(dir.path());
            let mut raw = unread_batch(&shards, &[(0, 5), (0, 6), (0, 7)]);
            let (offset, framed) = shards[0].1.record(6).unwrap();
            let index = build(&shards[0].0, &BuildOptions::default()).unwrap();
            let file = std::fs::OpenOptions::new()
                .write(true)
                .open(&shards[0].0)
                .unwrap();
            file.set_len(offset + framed - 10).unwrap();
            let mut reads = reader_indexed(mmap, &shards[0].0, index);
            let Err(PipelineError::Record(e)) = reads.read(&mut raw) else {
                panic!("no error (mmap {mmap})");
            };
            assert_eq!((e.path.as_str(), e.offset), (shards[0].0.as_str(), offset));
            let want = ErrorKind::Truncated {
                part: RecordPart::Payload,
                have: 94,
                need: 100,
            };
            assert_eq!(e.kind, want, "mmap {mmap}");
            // Its number in the shard, from the index.
            assert_eq!(e.index, Some(6));
        }
    }

    #[test]
    fn a_shard_rewritten_since_it_was_indexed_is_an_error_naming_both_lengths() {
        for mmap in [false, true] {
            let dir = tempfile::tempdir().unwrap();
            let shards = shards(dir.path());
            let mut raw = unread_batch(&shards, &[(0, 0), (0, 1), (0, 2)]);
            // Rewritten: record 1 is 20 bytes longer, the file no shorter.
            let mut w = RecordWriter::create(&shards[0].0, Compression::None).unwrap();
            for i in 0..8 {
                let mut r = record(0, i);
                if i == 1 {
                    r.extend([7; 20]);
                }
                w.write_record(&r).unwrap();
            }
            w.finish().unwrap();
            let mut reads = reader_indexed(mmap, &shards[0].0, shards[0].1.clone());
            let Err(PipelineError::Record(e)) = reads.read(&mut raw) else {
                panic!("no error (mmap {mmap})");
            };
            let (offset, _) = shards[0].1.record(1).unwrap();
            assert_eq!(
                (e.path.as_str(), e.offset, e.index),
                (shards[0].0.as_str(), offset, Some(1))
            );
            assert_eq!(
                e.kind,
                ErrorKind::IndexMismatch {
                    indexed: 100,
                    found: 120
                },
                "mmap {mmap}"
            );
            assert!(
                e.to_string().contains("changed since it was indexed"),
                "{e}"
            );
        }
    }

    #[test]
    fn a_shard_gone_since_it_was_indexed_is_an_error_at_its_run_either_way() {
        for mmap in [false, true] {
            let dir = tempfile::tempdir().unwrap();
            let shards = shards(dir.path());
            let mut raw = unread_batch(&shards, &[(0, 3), (0, 4)]);
            std::fs::remove_file(&shards[0].0).unwrap();
            let mut reads = reader_indexed(mmap, &shards[0].0, shards[0].1.clone());
            let Err(PipelineError::Record(e)) = reads.read(&mut raw) else {
                panic!("no error (mmap {mmap})");
            };
            let (offset, _) = shards[0].1.record(3).unwrap();
            assert_eq!((e.path.as_str(), e.offset), (shards[0].0.as_str(), offset));
            assert!(
                matches!(&e.kind, ErrorKind::Io { kind, .. } if *kind == std::io::ErrorKind::NotFound),
                "mmap {mmap}: {e}"
            );
        }
    }

    #[test]
    fn with_mmap_a_shard_that_grew_since_it_was_mapped_is_mapped_again() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("growing.tfrecord");
        let write = |n: usize| {
            let mut w = RecordWriter::create(&path, Compression::None).unwrap();
            for i in 0..n {
                w.write_record(&record(0, i)).unwrap();
            }
            w.finish().unwrap();
            let url = path.display().to_string();
            let index = build(&url, &BuildOptions::default()).unwrap();
            (url, index)
        };
        let shard = [write(4)];
        let mut reads = reader_indexed(true, &shard[0].0, shard[0].1.clone());
        let mut raw = unread_batch(&shard, &[(0, 3)]);
        reads.read(&mut raw).unwrap();
        let shard = [write(8)];
        let mut raw = unread_batch(&shard, &[(0, 3), (0, 6)]);
        reads.read(&mut raw).unwrap();
        assert_eq!(records(&raw), [record(0, 3), record(0, 6)]);
        assert_eq!(reads.maps.len(), 1);
    }

    #[test]
    fn with_mmap_a_worker_reads_views_of_its_own_map_of_each_shard() {
        let dir = tempfile::tempdir().unwrap();
        let shards = shards(dir.path());
        let mut reads = reader_indexed(true, &shards[0].0, shards[0].1.clone());
        let wanted = [(0, 0), (1, 0), (0, 1), (1, 1), (0, 2), (1, 2)];
        let mut raw = unread_batch(&shards, &wanted);
        reads.read(&mut raw).unwrap();
        let want: Vec<Vec<u8>> = wanted.iter().map(|&(f, i)| record(f, i as usize)).collect();
        assert_eq!(records(&raw), want);
        // Records lie where their shard's map puts them: as far apart as in
        // the file, batch after batch (a read copies each batch's records
        // to the front of the worker's buffer).
        let first = raw.items[0].data.as_ptr() as u64;
        let later = |raw: &RawBatch| raw.items[0].data.as_ptr() as u64 - first;
        let mut raw = unread_batch(&shards, &[(0, 5)]);
        reads.read(&mut raw).unwrap();
        assert_eq!(raw.items[0].data.as_ref(), record(0, 5));
        let (at0, _) = shards[0].1.record(0).unwrap();
        let (at5, _) = shards[0].1.record(5).unwrap();
        assert_eq!(later(&raw), at5 - at0);
        // One map per shard, kept: the same shard's next batch is a view
        // of the same map.
        assert_eq!(
            reads.maps.iter().map(|(f, _)| *f).collect::<Vec<_>>(),
            [1, 0]
        );
        assert!(reads.buf.is_empty() && reads.files.is_empty());
    }

    #[test]
    fn a_record_longer_than_the_stand_in_is_a_view_of_the_mapped_shard() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("long.tfrecord");
        let long: Vec<u8> = (0..STAND_IN_LEN + 1).map(|i| (i % 251) as u8).collect();
        let records = [b"short".to_vec(), long.clone(), b"after".to_vec()];
        let mut w = RecordWriter::create(&path, Compression::None).unwrap();
        for r in &records {
            w.write_record(r).unwrap();
        }
        w.finish().unwrap();
        let url = path.display().to_string();
        let index = build(&url, &BuildOptions::default()).unwrap();
        let mut shard = UnreadShard::open(&url).unwrap();
        let views: Vec<Bytes> = (0..3)
            .map(|i| {
                let (offset, framed) = index.record(i).unwrap();
                shard.view(offset, framed).unwrap()
            })
            .collect();
        assert_eq!(views[1], long);
        assert_eq!(views[0].as_ptr(), STAND_IN.as_ptr());
        assert_eq!(
            views.iter().map(Bytes::len).collect::<Vec<_>>(),
            [5, long.len(), 5]
        );

        // A worker reads all three, the long one included.
        let items = (views.into_iter().enumerate())
            .map(|(i, view)| unread_item(view, 0, index.record(i as u64).unwrap().0))
            .collect();
        let mut raw = RawBatch::chunk(items, Arc::new(vec![url.clone()]));
        reader().read(&mut raw).unwrap();
        assert_eq!(self::records(&raw), records);

        // Cut after it was opened, before its map was made: the map's
        // length is checked too.
        let (offset, framed) = index.record(1).unwrap();
        let mut shard = UnreadShard::open(&url).unwrap();
        std::fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .unwrap()
            .set_len(offset + 100)
            .unwrap();
        let e = shard.view(offset, framed).unwrap_err();
        assert_eq!(
            e.kind,
            ErrorKind::Truncated {
                part: RecordPart::Payload,
                have: 88,
                need: long.len() as u64,
            }
        );
    }

    /// The indexes found are those saved in the folder given (or in the
    /// default places), of plain local shards only, each checked against
    /// its shard: a shard without one, a stale one and a GZIP shard get
    /// none, and none is built.
    #[test]
    fn found_indexes_are_the_saved_ones_that_match_their_plain_shards() {
        let dir = tempfile::tempdir().unwrap();
        let shards = shards_of(dir.path(), 3);
        let gzip = dir.path().join("z.tfrecord.gz").display().to_string();
        let mut w = RecordWriter::create(&gzip, Compression::Gzip).unwrap();
        w.write_record(b"zipped").unwrap();
        w.finish().unwrap();
        let saved = dir.path().join("indexes").display().to_string();
        let source = SourceOptions::default();
        for (path, index) in &shards[..2] {
            crate::index::save(index, &crate::index::index_url(path, Some(&saved)), &source)
                .unwrap();
        }
        let gzip_index = build(&gzip, &BuildOptions::default()).unwrap();
        crate::index::save(
            &gzip_index,
            &crate::index::index_url(&gzip, Some(&saved)),
            &source,
        )
        .unwrap();
        // Shard 1 written again, longer: its index is stale.
        let mut w = RecordWriter::create(&shards[1].0, Compression::None).unwrap();
        for i in 0..9 {
            w.write_record(&record(1, i)).unwrap();
        }
        w.finish().unwrap();
        let files: Vec<String> = shards
            .iter()
            .map(|(p, _)| p.clone())
            .chain([gzip])
            .collect();
        let read = ReadOptions::default();
        let found = found_indexes(&files, Some(&saved), &read, &source);
        assert_eq!(found.keys().collect::<Vec<_>>(), [&shards[0].0]);
        assert_eq!(*found[&shards[0].0], shards[0].1);
        // None in the default places: nothing found, nothing built.
        assert!(found_indexes(&files, None, &read, &source).is_empty());
    }
}
