//! Records by their index in a list of shards, through the shards' indexes.
//!
//! [`RandomAccess::get_many`] reads the records of a request together: per
//! shard, records closer than `coalesce_bytes` are read in one range (a
//! local `pread`, or a cloud range request; the requests of a call run in
//! parallel on the I/O runtime); in a compressed shard, the records after
//! one access point are inflated together, from that point. Every record's
//! framing and both CRCs are checked as a reader checks them, so an index
//! that places a record where the shard has none is an error, never a
//! wrong record.

use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock};

use bytes::Bytes;

use super::error::IndexError;
use super::format::ShardIndex;
use super::location::{Found, IndexOptions, index_url, load_or_build};
use super::zran::inflate_from;
use crate::record::mapped;
use crate::record::{Compression, Deframer, ErrorKind, ReadOptions, Record, RecordError};
use crate::source::{ReadStats, ShardInfo, SourceError, SourceOptions, Store, io_runtime};

/// How records are read through indexes.
#[derive(Clone, Debug)]
pub struct AccessOptions {
    /// Where the indexes are, and how a missing one is built.
    pub index: IndexOptions,
    /// Records of a request closer than this in a shard are read in one
    /// range (default 64 KiB).
    pub coalesce_bytes: u64,
    /// Map local shards into memory (default): a record is a slice of the
    /// page cache, with no system call or copy — twice the records per
    /// second of `pread` on kilobyte records (docs/random-access.md), as
    /// Arrow and Hugging Face datasets map theirs. A shard cut short while
    /// read is an error naming it (on Linux; elsewhere a read past a
    /// file's new end faults, SIGBUS); one rewritten before it is opened is
    /// refused as stale.
    pub mmap: bool,
}

impl Default for AccessOptions {
    fn default() -> Self {
        AccessOptions {
            index: IndexOptions::default(),
            coalesce_bytes: 64 << 10,
            mmap: true,
        }
    }
}

impl AccessOptions {
    fn read(&self) -> &ReadOptions {
        &self.index.build.read
    }

    fn source(&self) -> &SourceOptions {
        &self.index.build.source
    }
}

/// One shard as the reader holds it.
struct Shard {
    info: ShardInfo,
    index: Arc<ShardIndex>,
    /// Where its index is (for errors).
    index_url: String,
    /// A local shard's file, opened (and with `ReadOptions::mmap`, mapped)
    /// on its first read.
    file: OnceLock<Result<Local, String>>,
    local: bool,
}

/// A local shard, open.
struct Local {
    file: std::fs::File,
    /// The whole file mapped (`ReadOptions::mmap`): reads are slices of it.
    map: Option<Bytes>,
}

/// Random access to the records of a list of shards: record `i` of the
/// whole list is record `i - first` of the shard it falls in.
pub struct RandomAccess {
    shards: Vec<Shard>,
    /// The global index of each shard's first record; last: the total.
    first: Vec<u64>,
    opts: AccessOptions,
    /// How a record is checked: the read options' CRC checks and largest
    /// record, and never skipping (the index lists valid records only).
    checks: ReadOptions,
    stats: Arc<ReadStats>,
}

/// The bytes of one read, and the records wanted from it.
struct Read {
    shard: usize,
    /// Plain shards: the range of the file. Compressed: the uncompressed
    /// range, inflated from access point `point`.
    range: std::ops::Range<u64>,
    point: Option<usize>,
    /// (position in the request, record offset, framed length).
    records: Vec<(usize, u64, u64)>,
}

impl RandomAccess {
    /// The records of `shards`, in order, through their indexes (read where
    /// `opts.index` says, each checked against its shard; built by reading
    /// the shard where there is none).
    pub fn open(shards: &[String], opts: &AccessOptions) -> Result<RandomAccess, IndexError> {
        let (indexes, places): (Vec<_>, Vec<_>) = load_or_build(shards, &opts.index)?
            .into_iter()
            .map(|(idx, how)| match how {
                Found::Loaded { index } => (idx, Some(index)),
                Found::Built => (idx, None),
            })
            .unzip();
        let mut access = Self::with_indexes(shards, indexes, opts);
        // Messages name the file an index was read from (beside its shard,
        // where an earlier version wrote it, is one place it may be).
        for (shard, place) in access.shards.iter_mut().zip(places) {
            if let Some(index) = place {
                shard.index_url = index;
            }
        }
        Ok(access)
    }

    /// The same, with indexes had already (one per shard, in order).
    pub fn with_indexes(
        shards: &[String],
        indexes: Vec<Arc<ShardIndex>>,
        opts: &AccessOptions,
    ) -> RandomAccess {
        let mut first = Vec::with_capacity(shards.len() + 1);
        let mut total = 0u64;
        let shards = shards
            .iter()
            .zip(indexes)
            .map(|(url, index)| {
                first.push(total);
                total += index.len();
                Shard {
                    info: ShardInfo {
                        url: url.clone(),
                        size: index.shard.size,
                    },
                    index_url: index_url(url, opts.index.dir.as_deref()),
                    local: !url.contains("://") || url.starts_with("file://"),
                    index,
                    file: OnceLock::new(),
                }
            })
            .collect();
        first.push(total);
        RandomAccess {
            shards,
            first,
            checks: ReadOptions {
                on_corrupt: crate::record::CorruptPolicy::Fail,
                ..opts.read().clone()
            },
            opts: opts.clone(),
            stats: ReadStats::new(),
        }
    }

    /// Records in all shards.
    pub fn len(&self) -> u64 {
        self.first.last().copied().unwrap_or(0)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The shards' URLs, in order.
    pub fn shards(&self) -> impl Iterator<Item = &str> {
        self.shards.iter().map(|s| s.info.url.as_str())
    }

    /// Shard `shard`'s URL.
    pub fn shard_url(&self, shard: usize) -> Option<&str> {
        self.shards.get(shard).map(|s| s.info.url.as_str())
    }

    /// Each shard's index.
    pub fn indexes(&self) -> impl Iterator<Item = &Arc<ShardIndex>> {
        self.shards.iter().map(|s| &s.index)
    }

    /// The shard of record `i` and its index in that shard.
    pub fn locate(&self, i: u64) -> Result<(usize, u64), IndexError> {
        if i >= self.len() {
            return Err(IndexError::OutOfRange {
                index: i,
                records: self.len(),
            });
        }
        // The last shard whose first record is at or before `i` (empty
        // shards share their first with the next).
        let shard = self.first.partition_point(|&f| f <= i) - 1;
        Ok((shard, i - self.first[shard]))
    }

    /// Where record `i` lies: its shard, and its header's offset and
    /// framed length there (uncompressed offsets in a compressed shard).
    pub fn place(&self, i: u64) -> Result<(usize, u64, u64), IndexError> {
        let (shard, k) = self.locate(i)?;
        let (offset, framed) = self.shards[shard].index.record(k).unwrap_or_default();
        Ok((shard, offset, framed))
    }

    /// The corrupt regions (and their bytes) a skipping reader of record
    /// `i`'s shard meets at it ([`ShardIndex::corrupt_at`]): what a reader
    /// of these records by index counts as a shard reader would.
    pub fn corrupt_at(&self, i: u64) -> (u64, u64) {
        self.locate(i)
            .map_or((0, 0), |(shard, k)| self.shards[shard].index.corrupt_at(k))
    }

    /// True when shard `shard`'s records lie in a local file as they are
    /// (not compressed): a reader may read them from the file by their
    /// place, with no access point.
    pub fn plain_local(&self, shard: usize) -> bool {
        self.shards
            .get(shard)
            .is_some_and(|s| s.local && s.index.compression == Compression::None)
    }

    /// True when record `i` is read without waiting: a slice of a mapped
    /// local plain shard (a caller may then skip handing off its thread,
    /// as Python's GIL for a few records).
    pub fn in_memory(&self, i: u64) -> bool {
        self.opts.mmap
            && self.locate(i).is_ok_and(|(shard, _)| {
                let shard = &self.shards[shard];
                shard.local && shard.index.compression == Compression::None
            })
    }

    /// Record `i`: its shard, and the record (payload and offset).
    pub fn get(&self, i: u64) -> Result<(usize, Record), IndexError> {
        let mut one = self.get_many(&[i])?;
        Ok(one.pop().unwrap_or((
            0,
            Record {
                data: Bytes::new(),
                offset: 0,
            },
        )))
    }

    /// The records at `indices`, in that order (an index given twice comes
    /// twice), each with its shard.
    pub fn get_many(&self, indices: &[u64]) -> Result<Vec<(usize, Record)>, IndexError> {
        let reads = self.plan(indices)?;
        let mut out: Vec<Option<(usize, Record)>> = vec![None; indices.len()];
        let (local, cloud): (Vec<Read>, Vec<Read>) =
            reads.into_iter().partition(|r| self.shards[r.shard].local);
        for read in local {
            let bytes = self.read_local(&read)?;
            self.take_records(&read, bytes, &mut out)?;
        }
        if !cloud.is_empty() {
            for (read, bytes) in self.read_cloud(cloud)? {
                self.take_records(&read, bytes, &mut out)?;
            }
        }
        Ok(out.into_iter().flatten().collect())
    }

    /// The reads that fetch `indices`: per shard, neighbours together.
    fn plan(&self, indices: &[u64]) -> Result<Vec<Read>, IndexError> {
        let mut by_shard: BTreeMap<usize, Vec<(usize, u64, u64)>> = BTreeMap::new();
        for (pos, &i) in indices.iter().enumerate() {
            let (shard, local) = self.locate(i)?;
            let (offset, framed) =
                self.shards[shard]
                    .index
                    .record(local)
                    .ok_or(IndexError::OutOfRange {
                        index: i,
                        records: self.len(),
                    })?;
            by_shard
                .entry(shard)
                .or_default()
                .push((pos, offset, framed));
        }
        let mut reads = Vec::new();
        for (shard, mut records) in by_shard {
            records.sort_unstable_by_key(|&(pos, offset, _)| (offset, pos));
            let index = &self.shards[shard].index;
            let point_of = |offset: u64| {
                index
                    .points
                    .partition_point(|p| p.out <= offset)
                    .checked_sub(1)
            };
            let compressed = index.compression != Compression::None;
            let mut current: Option<Read> = None;
            for (pos, offset, framed) in records {
                let point = if compressed { point_of(offset) } else { None };
                let end = offset + framed;
                if let Some(read) = current.as_mut() {
                    let near = if compressed {
                        point == read.point
                    } else {
                        offset <= read.range.end.saturating_add(self.opts.coalesce_bytes)
                    };
                    if near {
                        read.range.end = read.range.end.max(end);
                        read.records.push((pos, offset, framed));
                        continue;
                    }
                }
                reads.extend(current.take());
                current = Some(Read {
                    shard,
                    range: offset..end,
                    point,
                    records: vec![(pos, offset, framed)],
                });
            }
            reads.extend(current);
        }
        Ok(reads)
    }

    /// For a compressed read: the compressed range to fetch, from the byte
    /// before its access point to the first point past its end.
    fn compressed_range(&self, read: &Read) -> Result<std::ops::Range<u64>, IndexError> {
        let shard = &self.shards[read.shard];
        let points = &shard.index.points;
        let p = read
            .point
            .and_then(|p| points.get(p))
            .ok_or_else(|| IndexError::BadPoint {
                shard: shard.info.url.clone(),
                index: shard.index_url.clone(),
                point: 0,
                reason: format!("no access point before byte {}", read.range.start),
            })?;
        let start = p.input - u64::from(p.bits > 0);
        let end = points
            .iter()
            .find(|q| q.out >= read.range.end)
            .map_or(shard.info.size, |q| (q.input + 1).min(shard.info.size));
        Ok(start..end)
    }

    /// A local read's bytes (plain: the records' range; compressed: the
    /// compressed range).
    fn read_local(&self, read: &Read) -> Result<Bytes, IndexError> {
        let shard = &self.shards[read.shard];
        let range = match read.point {
            Some(_) => self.compressed_range(read)?,
            None => read.range.clone(),
        };
        let local = shard
            .file
            .get_or_init(|| open_local(&shard.info.url, self.opts.mmap))
            .as_ref()
            .map_err(|message| SourceError::Unreachable {
                url: shard.info.url.clone(),
                message: message.clone(),
                source: None,
            })?;
        if let Some(map) = &local.map {
            if range.end > map.len() as u64 {
                return Err(IndexError::Record(RecordError::new(
                    &shard.info.url,
                    range.start,
                    ErrorKind::from_io(std::io::Error::new(
                        std::io::ErrorKind::UnexpectedEof,
                        format!("the file ends at {}", map.len()),
                    )),
                )));
            }
            return Ok(map.slice(range.start as usize..range.end as usize));
        }
        let mut buf = vec![0u8; (range.end - range.start) as usize];
        read_at(&local.file, &mut buf, range.start).map_err(|e| {
            IndexError::Record(RecordError::new(
                &shard.info.url,
                range.start,
                ErrorKind::from_io(e),
            ))
        })?;
        self.stats
            .requests
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Ok(Bytes::from(buf))
    }

    /// The cloud reads' bytes, fetched in parallel.
    fn read_cloud(&self, reads: Vec<Read>) -> Result<Vec<(Read, Bytes)>, IndexError> {
        let handle = io_runtime()?;
        let mut tasks = Vec::with_capacity(reads.len());
        for read in &reads {
            let shard = &self.shards[read.shard];
            let range = match read.point {
                Some(_) => self.compressed_range(read)?,
                None => read.range.clone(),
            };
            let store = Store::for_url(&shard.info.url)?;
            let info = shard.info.clone();
            let source = self.opts.source().clone();
            let stats = self.stats.clone();
            tasks.push(
                handle.spawn(async move { store.read_range(&info, range, &source, stats).await }),
            );
        }
        let results = futures::executor::block_on(futures::future::join_all(tasks));
        reads
            .into_iter()
            .zip(results)
            .map(|(read, result)| {
                let bytes = result.unwrap_or_else(|e| {
                    Err(SourceError::Unreachable {
                        url: String::new(),
                        message: format!("read task failed: {e}"),
                        source: Some(Box::new(e)),
                    })
                })?;
                Ok((read, bytes))
            })
            .collect()
    }

    /// Slices a read's records out of its bytes (inflating them first for
    /// a compressed shard) and checks each.
    fn take_records(
        &self,
        read: &Read,
        bytes: Bytes,
        out: &mut [Option<(usize, Record)>],
    ) -> Result<(), IndexError> {
        let shard = &self.shards[read.shard];
        let (data, base) = match read.point {
            None => (bytes, read.range.start),
            Some(p) => {
                let point = &shard.index.points[p];
                let inflated =
                    inflate_from(shard.index.compression, point, &bytes, read.range.clone())
                        .map_err(|e| IndexError::BadPoint {
                            shard: shard.info.url.clone(),
                            index: shard.index_url.clone(),
                            point: p,
                            reason: e.0,
                        })?;
                (Bytes::from(inflated), read.range.start)
            }
        };
        for &(pos, offset, framed) in &read.records {
            let at = (offset - base) as usize;
            let piece = data.slice(at..at + framed as usize);
            out[pos] = Some((read.shard, self.check(shard, offset, piece)?));
        }
        Ok(())
    }

    /// The record framed in `piece` at `offset`, its CRCs checked.
    fn check(&self, shard: &Shard, offset: u64, piece: Bytes) -> Result<Record, IndexError> {
        let framed = piece.len() as u64;
        let mut deframer = Deframer::starting_at(&shard.info.url, &self.checks, offset);
        deframer.push(piece);
        let no_record = |error: RecordError| IndexError::NoRecord {
            index: shard.index_url.clone(),
            error,
        };
        match deframer.next_record() {
            Ok(Some(record))
                if record.offset == offset && record.data.len() as u64 + 16 == framed =>
            {
                Ok(record)
            }
            Ok(_) => Err(no_record(RecordError::new(
                &shard.info.url,
                offset,
                ErrorKind::Truncated {
                    part: crate::record::RecordPart::Payload,
                    have: framed.saturating_sub(16),
                    need: framed.saturating_sub(16),
                },
            ))),
            Err(e) => Err(no_record(e)),
        }
    }
}

/// Opens a local shard, mapping it whole with `mmap` (bytes changed
/// meanwhile are caught by the records' CRCs; a file cut short under the
/// map by the deframer, as an error: `record::mapped`).
fn open_local(url: &str, mmap: bool) -> Result<Local, String> {
    let path = url.strip_prefix("file://").unwrap_or(url);
    let file = std::fs::File::open(path).map_err(|e| e.to_string())?;
    let map = if mmap {
        Some(mapped::map_whole(&file).map_err(|e| format!("mmap: {e}"))?)
    } else {
        None
    };
    Ok(Local { file, map })
}

/// Reads `buf.len()` bytes at `offset` (the whole range: a short read is an
/// error, as the index said the bytes are there).
pub(crate) fn read_at(file: &std::fs::File, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileExt;
        file.read_exact_at(buf, offset)
    }
    #[cfg(not(unix))]
    {
        use std::io::{Read, Seek, SeekFrom};
        let mut f = file.try_clone()?;
        f.seek(SeekFrom::Start(offset))?;
        f.read_exact(buf)
    }
}
