//! Building a shard's index in one streaming pass: its records framed (and,
//! GZIP or ZLIB, inflated with access points every `span` bytes of output)
//! as a reader frames them, every record's CRCs checked, its offset and
//! length kept. What identifies the shard (its size, version and end
//! hashes) is taken first, with two small reads.

use std::io::Read;

use super::error::IndexError;
use super::format::{RecordsBuilder, ShardIndex};
use super::identity::current_with_head;
use super::zran::PointFinder;
use crate::record::{
    Compression, DETECT_LEN, Deframer, ErrorKind, ReadOptions, Record, RecordError, RecordReader,
};
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

/// Compressed bytes read at a time.
const READ: usize = 1 << 20;

/// The index of the shard at `url` (local path or gs://, s3://, az:// URL).
pub fn build(url: &str, opts: &BuildOptions) -> Result<ShardIndex, IndexError> {
    let (shard, head) = current_with_head(url, &opts.source)?;
    let compression = match opts.read.compression {
        Some(c) => c,
        None => Compression::detect(url, &head[..head.len().min(DETECT_LEN)]),
    };
    let mut records = RecordsBuilder::new();
    let mut keep = |r: Record| {
        records
            .push(r.offset, r.data.len() as u64)
            .map_err(|e| corrupt(url, r.offset, e))
    };
    let reader = open_blocking(url, &opts.source)?;
    let (read, points) = if compression == Compression::None {
        // A plain shard: the reader's own framing, as `infeed count` reads.
        let read = ReadOptions {
            compression: Some(Compression::None),
            ..opts.read.clone()
        };
        let mut reader = RecordReader::with_options(reader, url, &read);
        for record in reader.by_ref() {
            keep(record?)?;
        }
        (reader.bytes_read(), Vec::new())
    } else {
        inflate(url, reader, compression, opts, &mut keep)?
    };
    if read != shard.size {
        return Err(corrupt(
            url,
            read,
            format!(
                "{read} bytes read of its {} (it changed while read?)",
                shard.size
            ),
        ));
    }
    let span = if compression == Compression::None {
        0
    } else {
        opts.span
    };
    Ok(records.finish(shard, compression, span, points))
}

/// A compressed shard inflated with access points, its records framed as
/// they come; the compressed bytes read and the points.
fn inflate(
    url: &str,
    mut reader: impl Read,
    compression: Compression,
    opts: &BuildOptions,
    keep: &mut impl FnMut(Record) -> Result<(), IndexError>,
) -> Result<(u64, Vec<crate::index::zran::AccessPoint>), IndexError> {
    let mut finder = PointFinder::new(compression, opts.span).map_err(|e| corrupt(url, 0, e.0))?;
    let mut deframer = Deframer::new(url, &opts.read);
    let mut failure: Option<IndexError> = None;
    let mut frame = |deframer: &mut Deframer, failure: &mut Option<IndexError>| {
        while failure.is_none() {
            match deframer.next_record() {
                Ok(Some(record)) => {
                    if let Err(e) = keep(record) {
                        *failure = Some(e);
                    }
                }
                Ok(None) => break,
                Err(e) => *failure = Some(e.into()),
            }
        }
    };
    let mut buf = vec![0u8; READ];
    let mut read = 0u64;
    loop {
        let n = read_full(&mut reader, &mut buf)
            .map_err(|e| RecordError::new(url, read, ErrorKind::from_io(e)))?;
        if n == 0 {
            break;
        }
        read += n as u64;
        finder
            .push(&buf[..n], |chunk| {
                deframer.push(chunk);
                frame(&mut deframer, &mut failure);
            })
            .map_err(|e| corrupt(url, read, e.0))?;
        if let Some(e) = failure.take() {
            return Err(e);
        }
    }
    let points = finder
        .finish(|chunk| {
            deframer.push(chunk);
            frame(&mut deframer, &mut failure);
        })
        .map_err(|e| corrupt(url, read, e.0))?;
    deframer.finish()?;
    frame(&mut deframer, &mut failure);
    match failure {
        Some(e) => Err(e),
        None => Ok((read, points)),
    }
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
