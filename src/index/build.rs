//! Building a shard's index in one streaming pass: its bytes framed (and,
//! GZIP or ZLIB, inflated with access points every `span` bytes of output)
//! as a reader would, every record's CRCs checked, its offset and length
//! kept, and the shard's identity taken from the same bytes.

use std::io::Read;

use bytes::Bytes;

use super::error::IndexError;
use super::format::{RecordsBuilder, ShardIndex};
use super::identity::{HASHED, ShardId, file_name, hash};
use super::zran::PointFinder;
use crate::record::{Compression, DETECT_LEN, Deframer, ReadOptions, RecordError};
use crate::source::{SourceOptions, open_blocking};

/// Output between access points by default: any record of a compressed
/// shard is reached by inflating at most this much.
pub const DEFAULT_SPAN: u64 = 1 << 20;

/// How an index is built.
#[derive(Clone, Debug)]
pub struct BuildOptions {
    /// Compression, CRC checks, the largest record, what to do with a
    /// corrupt one (skip: the index leaves it out and says where the next
    /// record is).
    pub read: ReadOptions,
    pub source: SourceOptions,
    /// Output between access points of a compressed shard.
    pub span: u64,
}

impl Default for BuildOptions {
    fn default() -> Self {
        BuildOptions {
            read: ReadOptions::default(),
            source: SourceOptions::default(),
            span: DEFAULT_SPAN,
        }
    }
}

/// Bytes read at a time.
const READ: usize = 1 << 20;

/// The index of the shard at `url` (local path or gs://, s3://, az:// URL).
pub fn build(url: &str, opts: &BuildOptions) -> Result<ShardIndex, IndexError> {
    let mut reader = open_blocking(url, &opts.source)?;
    let size = reader.size();
    let version = {
        let store = crate::source::Store::for_url(url)?;
        let stats = crate::source::ReadStats::new();
        let handle = crate::source::io_runtime()?;
        let (url2, source) = (url.to_owned(), opts.source.clone());
        futures::executor::block_on(async move {
            handle
                .spawn(async move { store.stat(&url2, &source, &stats).await })
                .await
                .map_err(|e| crate::source::SourceError::Unreachable {
                    url: String::new(),
                    message: format!("stat task failed: {e}"),
                    source: Some(Box::new(e)),
                })?
        })?
        .1
    };
    let io = |offset: u64, e: std::io::Error| -> IndexError {
        RecordError::new(url, offset, crate::record::ErrorKind::from_io(e)).into()
    };
    // The first bytes: for the compression and the head hash.
    let mut head = Vec::with_capacity(HASHED as usize);
    (&mut reader)
        .take(HASHED.max(DETECT_LEN as u64))
        .read_to_end(&mut head)
        .map_err(|e| io(0, e))?;
    let compression = match opts.read.compression {
        Some(c) => c,
        None => Compression::detect(url, &head[..head.len().min(DETECT_LEN)]),
    };
    let mut deframer = Deframer::new(url, &opts.read);
    let mut records = RecordsBuilder::new();
    let mut finder = match compression {
        Compression::None => None,
        c => Some(PointFinder::new(c, opts.span).map_err(|e| corrupt(url, 0, e.0))?),
    };
    let mut tail: Vec<u8> = Vec::with_capacity(2 * HASHED as usize);
    let mut read = 0u64;
    let mut chunk = head.clone();
    loop {
        if chunk.is_empty() {
            break;
        }
        read += chunk.len() as u64;
        tail.extend_from_slice(&chunk);
        if tail.len() > 2 * HASHED as usize {
            tail.drain(..tail.len() - HASHED as usize);
        }
        match finder.as_mut() {
            None => deframer.push(Bytes::from(std::mem::take(&mut chunk))),
            Some(finder) => finder
                .push(&chunk, |out| deframer.push(Bytes::copy_from_slice(out)))
                .map_err(|e| corrupt(url, read, e.0))?,
        }
        while let Some(record) = deframer.next_record()? {
            records
                .push(record.offset, record.data.len() as u64)
                .map_err(|e| corrupt(url, record.offset, e))?;
        }
        chunk = vec![0; READ];
        let n = read_full(&mut reader, &mut chunk).map_err(|e| io(read, e))?;
        chunk.truncate(n);
    }
    if read != size {
        return Err(corrupt(
            url,
            read,
            format!("{read} bytes read of its {size} (it changed while read?)"),
        ));
    }
    let points = match finder {
        None => Vec::new(),
        Some(finder) => finder.finish().map_err(|e| corrupt(url, read, e.0))?,
    };
    deframer.finish()?;
    while let Some(record) = deframer.next_record()? {
        records
            .push(record.offset, record.data.len() as u64)
            .map_err(|e| corrupt(url, record.offset, e))?;
    }
    let tail = &tail[tail.len().saturating_sub(HASHED as usize)..];
    let shard = ShardId {
        name: file_name(url).to_owned(),
        size,
        head_hash: hash(&head[..head.len().min(HASHED as usize)]),
        tail_hash: hash(tail),
        version,
    };
    let span = if compression == Compression::None {
        0
    } else {
        opts.span
    };
    Ok(records.finish(shard, compression, span, points))
}

/// Fills `buf` from `reader` as far as it goes; the bytes read.
fn read_full(reader: &mut impl Read, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match reader.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

/// A shard that does not inflate, or whose records are out of place.
fn corrupt(url: &str, offset: u64, reason: String) -> IndexError {
    IndexError::Shard {
        shard: url.to_owned(),
        offset,
        reason,
    }
}
