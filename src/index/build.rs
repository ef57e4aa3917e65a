//! Building a shard's index in one streaming pass: its records framed (and,
//! GZIP or ZLIB, inflated with access points every `span` bytes of output)
//! as a reader frames them, every record's CRCs checked, its offset and
//! length kept. What identifies the shard (its size, version and end
//! hashes) is taken first, with two small reads.

use std::io::Read;

use super::error::IndexError;
use super::format::{RecordsBuilder, ShardIndex};
use super::identity::{HASHED, ShardId, current_with_head, hash};
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
    let mut framer = Framer::new(url, compression, opts)?;
    let mut buf = vec![0u8; READ];
    loop {
        let n = read_full(&mut reader, &mut buf)
            .map_err(|e| RecordError::new(url, framer.read, ErrorKind::from_io(e)))?;
        if n == 0 {
            break;
        }
        framer.push(&buf[..n], keep)?;
    }
    let read = framer.read;
    let points = framer.finish(keep)?;
    Ok((read, points))
}

/// A shard's bytes framed as they are pushed: inflated first (GZIP, ZLIB,
/// with access points), its records checked and handed on.
struct Framer {
    url: String,
    finder: Option<PointFinder>,
    deframer: Deframer,
    /// Bytes pushed.
    read: u64,
}

impl Framer {
    fn new(url: &str, compression: Compression, opts: &BuildOptions) -> Result<Framer, IndexError> {
        let finder = match compression {
            Compression::None => None,
            c => Some(PointFinder::new(c, opts.span).map_err(|e| corrupt(url, 0, e.0))?),
        };
        let read = ReadOptions {
            compression: Some(compression),
            ..opts.read.clone()
        };
        Ok(Framer {
            url: url.to_owned(),
            finder,
            deframer: Deframer::new(url, &read),
            read: 0,
        })
    }

    /// Frames the records of the next bytes, handing each to `keep`.
    fn push(
        &mut self,
        bytes: &[u8],
        keep: &mut impl FnMut(Record) -> Result<(), IndexError>,
    ) -> Result<(), IndexError> {
        self.read += bytes.len() as u64;
        let mut failure = None;
        let deframer = &mut self.deframer;
        match self.finder.as_mut() {
            None => {
                deframer.push(bytes::Bytes::copy_from_slice(bytes));
                failure = drain(deframer, keep).err();
            }
            Some(finder) => finder
                .push(bytes, |chunk| {
                    deframer.push(chunk);
                    if failure.is_none() {
                        failure = drain(deframer, keep).err();
                    }
                })
                .map_err(|e| corrupt(&self.url, self.read, e.0))?,
        }
        failure.map_or(Ok(()), Err)
    }

    /// Frames the rest; the access points.
    fn finish(
        mut self,
        keep: &mut impl FnMut(Record) -> Result<(), IndexError>,
    ) -> Result<Vec<crate::index::zran::AccessPoint>, IndexError> {
        let mut failure = None;
        let deframer = &mut self.deframer;
        let points = match self.finder.take() {
            None => Vec::new(),
            Some(finder) => finder
                .finish(|chunk| {
                    deframer.push(chunk);
                    if failure.is_none() {
                        failure = drain(deframer, keep).err();
                    }
                })
                .map_err(|e| corrupt(&self.url, self.read, e.0))?,
        };
        if let Some(e) = failure {
            return Err(e);
        }
        deframer.finish()?;
        drain(deframer, keep)?;
        Ok(points)
    }
}

/// Hands every record the deframer has to `keep`.
fn drain(
    deframer: &mut Deframer,
    keep: &mut impl FnMut(Record) -> Result<(), IndexError>,
) -> Result<(), IndexError> {
    while let Some(record) = deframer.next_record()? {
        keep(record)?;
    }
    Ok(())
}

/// A shard's index built from its bytes as they are written (`infeed
/// convert`, the Beam transforms): what a writer knows, with no read back.
/// The shard's name is not recorded (a written shard gets its final name
/// only when committed): its size and end hashes identify it.
pub struct IndexBuilder {
    framer: Framer,
    records: RecordsBuilder,
    compression: Compression,
    span: u64,
    head: Vec<u8>,
    tail: Vec<u8>,
}

impl IndexBuilder {
    /// A builder of the index of a shard of `compression`, its bytes to be
    /// pushed in order; `name` names it in errors.
    pub fn new(
        name: &str,
        compression: Compression,
        opts: &BuildOptions,
    ) -> Result<Self, IndexError> {
        Ok(IndexBuilder {
            framer: Framer::new(name, compression, opts)?,
            records: RecordsBuilder::new(),
            compression,
            span: opts.span,
            head: Vec::with_capacity(HASHED as usize),
            tail: Vec::with_capacity(2 * HASHED as usize),
        })
    }

    /// The shard's next bytes, as written.
    pub fn push(&mut self, bytes: &[u8]) -> Result<(), IndexError> {
        self.push_each(bytes, |_| {})
    }

    /// The shard's next bytes, as read: each record framed from them (its
    /// CRCs checked) is handed to `each` as well as indexed.
    pub fn push_each(
        &mut self,
        bytes: &[u8],
        mut each: impl FnMut(Record),
    ) -> Result<(), IndexError> {
        let room = HASHED as usize - self.head.len();
        self.head.extend_from_slice(&bytes[..room.min(bytes.len())]);
        self.tail
            .extend_from_slice(&bytes[bytes.len().saturating_sub(HASHED as usize)..]);
        if self.tail.len() > 2 * HASHED as usize {
            self.tail.drain(..self.tail.len() - HASHED as usize);
        }
        let (records, url) = (&mut self.records, self.framer.url.clone());
        self.framer.push(bytes, &mut |r: Record| {
            records
                .push(r.offset, r.data.len() as u64)
                .map_err(|e| corrupt(&url, r.offset, e))?;
            each(r);
            Ok(())
        })
    }

    /// The index of the bytes pushed.
    pub fn finish(self) -> Result<ShardIndex, IndexError> {
        self.finish_each(|_| {})
    }

    /// The index of the bytes pushed, the records framed from the last of
    /// them handed to `each`.
    pub fn finish_each(self, mut each: impl FnMut(Record)) -> Result<ShardIndex, IndexError> {
        let IndexBuilder {
            framer,
            mut records,
            compression,
            span,
            head,
            tail,
        } = self;
        let size = framer.read;
        let url = framer.url.clone();
        let points = framer.finish(&mut |r: Record| {
            records
                .push(r.offset, r.data.len() as u64)
                .map_err(|e| corrupt(&url, r.offset, e))?;
            each(r);
            Ok(())
        })?;
        let shard = ShardId {
            name: String::new(),
            size,
            head_hash: hash(&head),
            tail_hash: hash(&tail[tail.len().saturating_sub(HASHED as usize)..]),
            version: None,
        };
        let span = if compression == Compression::None {
            0
        } else {
            span
        };
        Ok(records.finish(shard, compression, span, points))
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
