//! Writers: TFRecord framing to a `std::io::Write` or a tokio `AsyncWrite`,
//! plain, GZIP or ZLIB (flate2 with the zlib-rs backend, default level 6,
//! like TensorFlow).
//!
//! Plain output is byte-identical to TensorFlow's `tf.io.TFRecordWriter`.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::Path;

use flate2::write::{GzEncoder, ZlibEncoder};
use tokio::io::{AsyncWrite, AsyncWriteExt};

use super::compression::Compression;
use super::crc::masked_crc32c;
use super::deframe::{FOOTER_LEN, HEADER_LEN};

/// The 12-byte header of a record of `len` bytes.
#[inline]
pub fn encode_header(len: u64) -> [u8; HEADER_LEN] {
    let l = len.to_le_bytes();
    let c = masked_crc32c(&l).to_le_bytes();
    [
        l[0], l[1], l[2], l[3], l[4], l[5], l[6], l[7], c[0], c[1], c[2], c[3],
    ]
}

/// The 4-byte footer of a record with payload `data`.
#[inline]
pub fn encode_footer(data: &[u8]) -> [u8; FOOTER_LEN] {
    masked_crc32c(data).to_le_bytes()
}

/// The GZIP encoder TensorFlow's writer matches: level 6, OS byte 3 (Unix),
/// no name, mtime 0.
fn gzip_encoder<W: Write>(w: W) -> GzEncoder<W> {
    flate2::GzBuilder::new()
        .operating_system(3)
        .write(w, flate2::Compression::default())
}

fn zlib_encoder<W: Write>(w: W) -> ZlibEncoder<W> {
    ZlibEncoder::new(w, flate2::Compression::default())
}

enum Sink<W: Write> {
    Plain(W),
    Gzip(GzEncoder<W>),
    Zlib(ZlibEncoder<W>),
}

impl<W: Write> Sink<W> {
    fn new(w: W, compression: Compression) -> Self {
        match compression {
            Compression::None => Sink::Plain(w),
            Compression::Gzip => Sink::Gzip(gzip_encoder(w)),
            Compression::Zlib => Sink::Zlib(zlib_encoder(w)),
        }
    }

    fn as_write(&mut self) -> &mut dyn Write {
        match self {
            Sink::Plain(w) => w,
            Sink::Gzip(w) => w,
            Sink::Zlib(w) => w,
        }
    }

    fn finish(self) -> io::Result<W> {
        match self {
            Sink::Plain(w) => Ok(w),
            Sink::Gzip(w) => w.finish(),
            Sink::Zlib(w) => w.finish(),
        }
    }
}

/// Writes records to a `std::io::Write`. Call [`RecordWriter::finish`] at
/// the end: it completes the compressed stream and flushes.
pub struct RecordWriter<W: Write> {
    sink: Sink<W>,
    records: u64,
}

impl RecordWriter<BufWriter<File>> {
    /// Creates (or truncates) the file at `path`.
    pub fn create(path: impl AsRef<Path>, compression: Compression) -> io::Result<Self> {
        let file = File::create(path)?;
        Ok(Self::new(
            BufWriter::with_capacity(1 << 20, file),
            compression,
        ))
    }
}

impl<W: Write> RecordWriter<W> {
    /// A writer over `w`. Wrap unbuffered sinks (files, sockets) in a
    /// `BufWriter`: each record is written in three pieces.
    pub fn new(w: W, compression: Compression) -> Self {
        RecordWriter {
            sink: Sink::new(w, compression),
            records: 0,
        }
    }

    /// Frames and writes one record.
    pub fn write_record(&mut self, data: &[u8]) -> io::Result<()> {
        let w = self.sink.as_write();
        w.write_all(&encode_header(data.len() as u64))?;
        w.write_all(data)?;
        w.write_all(&encode_footer(data))?;
        self.records += 1;
        Ok(())
    }

    /// Records written so far.
    pub fn records(&self) -> u64 {
        self.records
    }

    /// Completes the stream, flushes, and gives back the sink.
    pub fn finish(self) -> io::Result<W> {
        let mut w = self.sink.finish()?;
        w.flush()?;
        Ok(w)
    }
}

/// How many encoded bytes [`AsyncRecordWriter`] gathers before writing them.
const ASYNC_FLUSH_AT: usize = 256 * 1024;

/// Writes records to a tokio `AsyncWrite`. Records are framed and
/// compressed in memory and written in pieces of about 256 KiB; the bytes
/// are exactly those [`RecordWriter`] writes. Call
/// [`AsyncRecordWriter::finish`] at the end, or the last piece is lost.
pub struct AsyncRecordWriter<W: AsyncWrite + Unpin> {
    out: W,
    sink: Sink<Vec<u8>>,
    records: u64,
}

impl AsyncRecordWriter<tokio::fs::File> {
    /// Creates (or truncates) the file at `path`.
    pub async fn create(path: impl AsRef<Path>, compression: Compression) -> io::Result<Self> {
        let file = tokio::fs::File::create(path).await?;
        Ok(Self::new(file, compression))
    }
}

impl<W: AsyncWrite + Unpin> AsyncRecordWriter<W> {
    /// A writer over `out`.
    pub fn new(out: W, compression: Compression) -> Self {
        AsyncRecordWriter {
            out,
            sink: Sink::new(Vec::new(), compression),
            records: 0,
        }
    }

    fn buffer(&mut self) -> &mut Vec<u8> {
        match &mut self.sink {
            Sink::Plain(v) => v,
            Sink::Gzip(e) => e.get_mut(),
            Sink::Zlib(e) => e.get_mut(),
        }
    }

    /// Frames and writes one record.
    pub async fn write_record(&mut self, data: &[u8]) -> io::Result<()> {
        let w = self.sink.as_write();
        w.write_all(&encode_header(data.len() as u64))?;
        w.write_all(data)?;
        w.write_all(&encode_footer(data))?;
        self.records += 1;
        if self.buffer().len() >= ASYNC_FLUSH_AT {
            let buf = std::mem::take(self.buffer());
            self.out.write_all(&buf).await?;
            // Reuse the allocation.
            let mut buf = buf;
            buf.clear();
            *self.buffer() = buf;
        }
        Ok(())
    }

    /// Records written so far.
    pub fn records(&self) -> u64 {
        self.records
    }

    /// Completes the stream, writes what is left, flushes, and gives back the sink.
    pub async fn finish(self) -> io::Result<W> {
        let AsyncRecordWriter { mut out, sink, .. } = self;
        let rest = sink.finish()?;
        out.write_all(&rest).await?;
        out.flush().await?;
        Ok(out)
    }
}
