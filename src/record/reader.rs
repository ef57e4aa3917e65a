//! The synchronous reader: records from any `std::io::Read`.

use std::fs::File;
use std::io::Read;
use std::iter::FusedIterator;
use std::path::Path;

use bytes::Bytes;

use super::chunk_ring::ChunkRing;
use super::chunk_source::ChunkSource;
use super::compression::{Compression, Detection};
use super::deframe::Record;
use super::error::{ErrorKind, RecordError};
use super::options::{ReadOptions, SkipReport};
use super::read_core::{ReadCore, Step};

/// Reads records from a `std::io::Read`, as an iterator of
/// `Result<Record, RecordError>`.
///
/// It reads `chunk_size` blocks and slices records out of them without
/// copying; a block is read into again once its records are dropped. After
/// the first error the iterator ends.
pub struct RecordReader<R> {
    reader: R,
    core: ReadCore,
    chunk_size: usize,
    /// A read error, reported once the bytes read before it are used up.
    io_error: Option<std::io::Error>,
    ended: bool,
    /// Chunks handed out, to read into again once released.
    ring: ChunkRing,
    /// Where chunks come from instead of `reader`, when set.
    chunks: Option<Box<dyn ChunkSource>>,
}

impl RecordReader<File> {
    /// Opens a file. With `opts.compression == None` the compression is
    /// detected from the name and the first bytes ([`Compression::detect`]).
    pub fn open(path: impl AsRef<Path>, opts: &ReadOptions) -> Result<Self, RecordError> {
        let path = path.as_ref();
        let name = path.to_string_lossy().into_owned();
        let file = File::open(path)
            .map_err(|e| RecordError::new(name.clone(), 0, ErrorKind::from_io(e)))?;
        let mut reader = RecordReader {
            reader: file,
            core: ReadCore::new(name, opts.compression.map(Detection::from), opts),
            chunk_size: opts.effective_chunk_size(),
            io_error: None,
            ended: false,
            ring: ChunkRing::shared(),
            chunks: None,
        };
        if opts.compression.is_none() {
            // Read the first chunk now, so that `compression()` is known and
            // an unreadable file fails here.
            reader.read_chunk();
            if let Some(e) = reader.io_error.take() {
                return Err(reader.core.on_io_error(e));
            }
        }
        Ok(reader)
    }
}

impl RecordReader<Box<dyn Read + Send>> {
    /// [`RecordReader::resume`] over a source that hands out chunks of its
    /// own, sliced without a copy.
    pub(crate) fn resume_chunks(
        source: Box<dyn ChunkSource>,
        path: impl Into<String>,
        compression: impl Into<Detection>,
        opts: &ReadOptions,
        offset: u64,
    ) -> Self {
        let mut reader = Self::resume(Box::new(std::io::empty()), path, compression, opts, offset);
        reader.ring = ChunkRing::default();
        reader.chunks = Some(source);
        reader
    }
}

impl<R: Read> RecordReader<R> {
    /// Reads records from `reader` compressed with `compression`. `path`
    /// names the source in errors; `opts.compression` is ignored.
    pub fn new(
        reader: R,
        path: impl Into<String>,
        compression: Compression,
        opts: &ReadOptions,
    ) -> Self {
        RecordReader {
            reader,
            core: ReadCore::new(path.into(), Some(compression.into()), opts),
            chunk_size: opts.effective_chunk_size(),
            io_error: None,
            ended: false,
            ring: ChunkRing::shared(),
            chunks: None,
        }
    }

    /// Like [`RecordReader::new`], but detects the compression from `path`
    /// and the first bytes when `opts.compression` is `None`.
    pub fn with_options(reader: R, path: impl Into<String>, opts: &ReadOptions) -> Self {
        RecordReader {
            reader,
            core: ReadCore::new(path.into(), opts.compression.map(Detection::from), opts),
            chunk_size: opts.effective_chunk_size(),
            io_error: None,
            ended: false,
            ring: ChunkRing::shared(),
            chunks: None,
        }
    }

    /// Resumes reading at the record boundary `offset` of the uncompressed
    /// stream (a checkpoint's position). For [`Compression::None`] `reader`
    /// must already be positioned at `offset` (seek it); a compressed
    /// `reader` starts at the beginning of the file and is decompressed up
    /// to `offset`. Offsets in records and errors stay absolute.
    /// `compression` is a [`Compression`] the caller chose, or a
    /// [`Detection`] (so that errors can say what was guessed).
    pub fn resume(
        reader: R,
        path: impl Into<String>,
        compression: impl Into<Detection>,
        opts: &ReadOptions,
        offset: u64,
    ) -> Self {
        RecordReader {
            reader,
            core: ReadCore::resume(path.into(), compression.into(), opts, offset),
            chunk_size: opts.effective_chunk_size(),
            io_error: None,
            ended: false,
            ring: ChunkRing::shared(),
            chunks: None,
        }
    }

    /// Resumed where `records` records precede its offset: its errors are
    /// numbered from the file's start, as a reader's from there are.
    pub(crate) fn counting_from(mut self, records: u64) -> Self {
        self.core.count_from(records);
        self
    }

    /// What the skip policy has skipped so far (complete once the iterator ends).
    pub fn skipped(&self) -> &SkipReport {
        self.core.skipped()
    }

    /// The compression being read; `None` while still undetected (before the
    /// first read).
    pub fn compression(&self) -> Option<Compression> {
        self.core.detection().map(|d| d.compression)
    }

    /// The compression being read and what chose it; `None` while still
    /// undetected.
    pub fn detection(&self) -> Option<Detection> {
        self.core.detection()
    }

    /// The name used in errors.
    pub fn path(&self) -> &str {
        self.core.path()
    }

    /// Raw (as stored, possibly compressed) bytes read so far.
    pub fn bytes_read(&self) -> u64 {
        self.core.raw_offset()
    }

    /// Gives back the underlying reader.
    pub fn into_inner(self) -> R {
        self.reader
    }

    /// Reads one chunk (up to `chunk_size` bytes, fewer only at the end of the
    /// input; a chunk source's own chunk) and feeds it to the core. A read error is kept in `io_error`,
    /// after feeding the bytes read before it.
    fn read_chunk(&mut self) {
        if let Some(source) = self.chunks.as_mut() {
            match source.next_chunk(self.chunk_size) {
                Ok(Some(chunk)) if !chunk.is_empty() => self.core.on_chunk(chunk),
                Ok(Some(_)) => {}
                Ok(None) => self.core.on_eof(),
                Err(e) => self.io_error = Some(e),
            }
            return;
        }
        let mut buf = self.ring.take(self.chunk_size);
        buf.resize(self.chunk_size, 0);
        let mut filled = 0;
        let mut result = Ok(());
        while filled < buf.len() {
            match self.reader.read(&mut buf[filled..]) {
                Ok(0) => break,
                Ok(n) => filled += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => {
                    result = Err(e);
                    break;
                }
            }
        }
        let short = filled < self.chunk_size;
        if filled > 0 {
            // The ring keeps the whole buffer and the core gets the part
            // read: a short last read leaves the buffer its full length, so
            // the next file's reader takes it again with nothing to zero.
            let whole = Bytes::from(buf);
            self.ring.keep(&whole);
            self.core.on_chunk(whole.slice(..filled));
        }
        match result {
            Err(e) => self.io_error = Some(e),
            Ok(()) if short => self.core.on_eof(),
            Ok(()) => {}
        }
    }
}

impl<R: Read> Iterator for RecordReader<R> {
    type Item = Result<Record, RecordError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.ended {
            return None;
        }
        loop {
            match self.core.step() {
                Step::Record(r) => return Some(Ok(r)),
                Step::Error(e) => {
                    self.ended = true;
                    return Some(Err(e));
                }
                Step::Done => {
                    self.ended = true;
                    return None;
                }
                Step::NeedInput => {
                    if let Some(e) = self.io_error.take() {
                        self.ended = true;
                        return Some(Err(self.core.on_io_error(e)));
                    }
                    self.read_chunk();
                }
            }
        }
    }
}

impl<R: Read> FusedIterator for RecordReader<R> {}

impl<R> std::fmt::Debug for RecordReader<R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RecordReader")
            .field("path", &self.core.path())
            .field("chunk_size", &self.chunk_size)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::{Compression, RecordWriter};

    /// A file shorter than the chunk is read in one short read; once its
    /// records and its reader are dropped, the ring gives that buffer back at its full
    /// length (nothing to zero for the next read), and the records were
    /// exactly the file's.
    #[test]
    fn a_short_last_read_leaves_the_whole_buffer_to_read_into_again() {
        let mut file = Vec::new();
        {
            let mut w = RecordWriter::new(&mut file, Compression::None);
            for i in 0..3 {
                w.write_record(format!("record {i}").as_bytes()).unwrap();
            }
            w.finish().unwrap();
        }
        let opts = ReadOptions::default().chunk_size(4096);
        let mut reader = RecordReader::with_options(&file[..], "short", &opts);
        let records: Vec<Record> = reader.by_ref().map(Result::unwrap).collect();
        let data: Vec<&[u8]> = records.iter().map(|r| &r.data[..]).collect();
        assert_eq!(data, [&b"record 0"[..], b"record 1", b"record 2"]);
        // The reader done and dropped, as a shard thread drops it.
        let mut ring = std::mem::take(&mut reader.ring);
        drop((records, reader));
        let chunk = opts.effective_chunk_size();
        assert!(file.len() < chunk);
        let again = ring.reuse(chunk).expect("the buffer is free again");
        assert_eq!(again.len(), chunk);
    }
}
