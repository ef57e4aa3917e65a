//! Cutting the output into shards, naming them, and committing them.
//!
//! Shards are written under hidden temporary names (`.STEM-00003.tmp`) and
//! renamed when the task ends, because a TensorFlow-style name holds the
//! shard count (`train-00003-of-00016.tfrecord`), known only then.

use std::io::{self, Write};
use std::sync::Arc;

use crate::index::{BuildOptions, IndexBuilder, SUFFIX};
use crate::record::{Compression, FOOTER_LEN, HEADER_LEN, RecordWriter};

use super::error::ConvertError;
use super::sink::{ShardSink, ShardWrite};

/// When to start a new shard.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ShardLimit {
    /// At most this many framed (uncompressed) bytes per shard; a record
    /// larger than that gets a shard of its own.
    Bytes(u64),
    /// At most this many records per shard.
    Records(u64),
}

/// How shards are named.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Naming {
    /// `train-00000-of-00016.tfrecord` (TensorFlow Datasets style).
    Tf,
    /// `dataset-3-5000.tfrecord`: shard index and record count (Hugging Face's script).
    Hf,
    /// `mnist-train.tfrecord-00000-of-00016`: TensorFlow Datasets' own file names
    /// (the stem is `{dataset}-{split}`; uncompressed only, as TFDS reads them).
    Tfds,
}

impl Naming {
    /// The default `--prefix`.
    pub fn default_prefix(self) -> &'static str {
        match self {
            Naming::Tf | Naming::Tfds => "train",
            Naming::Hf => "dataset",
        }
    }

    /// The name in the manifest and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Naming::Tf => "tf",
            Naming::Hf => "hf",
            Naming::Tfds => "tfds",
        }
    }
}

/// The file extension of shards: `.tfrecord`, `.tfrecord.gz`, `.tfrecord.zz`.
pub(super) fn extension(compression: Compression) -> &'static str {
    match compression {
        Compression::None => ".tfrecord",
        Compression::Gzip => ".tfrecord.gz",
        Compression::Zlib => ".tfrecord.zz",
    }
}

/// The name of shard `index` of `count` holding `records` records.
pub(super) fn shard_name(
    naming: Naming,
    stem: &str,
    index: usize,
    count: usize,
    records: u64,
    compression: Compression,
) -> String {
    let ext = extension(compression);
    match naming {
        Naming::Tf => format!("{stem}-{index:05}-of-{count:05}{ext}"),
        Naming::Hf => format!("{stem}-{index}-{records}{ext}"),
        Naming::Tfds => format!("{stem}{ext}-{index:05}-of-{count:05}"),
    }
}

/// The temporary name of shard `index` (hidden, fixed per task so a rerun overwrites it).
pub(super) fn temp_name(stem: &str, index: usize) -> String {
    format!(".{stem}-{index:05}.tmp")
}

/// The temporary name of the index of the shard of temporary name `temp`.
pub(super) fn index_temp(temp: &str) -> String {
    format!(
        "{}{}.tmp",
        temp.strip_suffix(".tmp").unwrap_or(temp),
        SUFFIX
    )
}

/// True when `name` is a temporary shard name of `stem`.
#[cfg(any(test, feature = "convert"))]
pub(super) fn is_temp_of(stem: &str, name: &str) -> bool {
    name.strip_prefix(&format!(".{stem}-"))
        .and_then(|rest| rest.strip_suffix(".tmp"))
        .map(|rest| rest.strip_suffix(SUFFIX).unwrap_or(rest))
        .is_some_and(|digits| !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()))
}

/// True when `name` is a shard name of `stem` under `naming` (any compression),
/// so that a rerun can remove shards an earlier run left and this one did not write.
pub(super) fn is_shard_of(naming: Naming, stem: &str, name: &str) -> bool {
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    let x_of_y = |s: &str| {
        s.split_once("-of-")
            .is_some_and(|(a, b)| a.len() == 5 && b.len() == 5 && digits(a) && digits(b))
    };
    if naming == Naming::Tfds {
        return name
            .strip_prefix(&format!("{stem}.tfrecord-"))
            .is_some_and(x_of_y);
    }
    let Some(rest) = name.strip_prefix(&format!("{stem}-")) else {
        return false;
    };
    let Some(core) = [".tfrecord", ".tfrecord.gz", ".tfrecord.zz"]
        .iter()
        .find_map(|ext| rest.strip_suffix(ext))
    else {
        return false;
    };
    match naming {
        Naming::Tf | Naming::Tfds => x_of_y(core),
        Naming::Hf => core
            .split_once('-')
            .is_some_and(|(a, b)| digits(a) && digits(b)),
    }
}

/// Counts bytes and computes the CRC32C of everything written through it,
/// and, when asked, the shard's index from the same bytes.
pub(crate) struct HashWriter<W> {
    inner: W,
    bytes: u64,
    crc: u32,
    index: Option<IndexBuilder>,
}

impl<W: Write> Write for HashWriter<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.crc = crc32c::crc32c_append(self.crc, &buf[..n]);
        self.bytes += n as u64;
        if let Some(index) = &mut self.index {
            index.push(&buf[..n]).map_err(io::Error::other)?;
        }
        Ok(n)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

/// A committed shard, as the manifest lists it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CommittedShard {
    /// The final name.
    pub name: String,
    /// Records in the shard.
    pub records: u64,
    /// Size of the file in bytes (compressed, if compressed).
    pub bytes: u64,
    /// CRC32C (Castagnoli, unmasked) of the whole file.
    pub crc32c: u32,
}

struct Open {
    temp: String,
    writer: RecordWriter<HashWriter<Box<dyn ShardWrite>>>,
    framed: u64,
}

/// A closed shard under its temporary name, waiting to be committed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Closed {
    /// Its temporary name in the sink.
    pub temp: String,
    /// Records in it.
    pub records: u64,
    /// Its bytes (as stored, after compression).
    pub bytes: u64,
    /// The CRC32C of its bytes.
    pub crc32c: u32,
}

/// Writes records into shards of a bounded size under temporary names.
pub(crate) struct ShardWriter {
    sink: Arc<dyn ShardSink>,
    stem: String,
    compression: Compression,
    limit: ShardLimit,
    /// Write each shard's index (under a temporary name beside it; committed
    /// into `.infeed-index`).
    index: bool,
    open: Option<Open>,
    closed: Vec<Closed>,
}

impl ShardWriter {
    pub(super) fn new(
        sink: Arc<dyn ShardSink>,
        stem: String,
        compression: Compression,
        limit: ShardLimit,
        index: bool,
    ) -> Self {
        ShardWriter {
            sink,
            stem,
            compression,
            limit,
            index,
            open: None,
            closed: Vec::new(),
        }
    }

    fn full(&self, open: &Open, next_len: usize) -> bool {
        let records = open.writer.records();
        if records == 0 {
            return false;
        }
        match self.limit {
            ShardLimit::Records(n) => records >= n,
            ShardLimit::Bytes(n) => open.framed + (HEADER_LEN + next_len + FOOTER_LEN) as u64 > n,
        }
    }

    /// Writes one serialized Example.
    pub(super) fn write(&mut self, payload: &[u8]) -> Result<(), ConvertError> {
        if let Some(open) = &self.open
            && self.full(open, payload.len())
        {
            self.close_open()?;
        }
        if self.open.is_none() {
            let temp = temp_name(&self.stem, self.closed.len());
            let object = self
                .sink
                .create(&temp)
                .map_err(|e| ConvertError::output(self.sink.location(&temp), e))?;
            let index = match self.index {
                false => None,
                true => Some(
                    IndexBuilder::new(&temp, self.compression, &BuildOptions::default()).map_err(
                        |e| ConvertError::output(self.sink.location(&temp), io::Error::other(e)),
                    )?,
                ),
            };
            let hashed = HashWriter {
                inner: object,
                bytes: 0,
                crc: 0,
                index,
            };
            self.open = Some(Open {
                temp,
                writer: RecordWriter::new(hashed, self.compression),
                framed: 0,
            });
        }
        let location = |sink: &Arc<dyn ShardSink>, temp: &str| sink.location(temp);
        if let Some(open) = &mut self.open {
            open.writer
                .write_record(payload)
                .map_err(|e| ConvertError::output(location(&self.sink, &open.temp), e))?;
            open.framed += (HEADER_LEN + payload.len() + FOOTER_LEN) as u64;
        }
        Ok(())
    }

    fn close_open(&mut self) -> Result<(), ConvertError> {
        let Some(open) = self.open.take() else {
            return Ok(());
        };
        let records = open.writer.records();
        let loc = self.sink.location(&open.temp);
        let hashed = open
            .writer
            .finish()
            .map_err(|e| ConvertError::output(&loc, e))?;
        let (bytes, crc32c) = (hashed.bytes, hashed.crc);
        hashed
            .inner
            .close()
            .map_err(|e| ConvertError::output(&loc, e))?;
        if let Some(index) = hashed.index {
            let idx = index
                .finish()
                .map_err(|e| ConvertError::output(&loc, io::Error::other(e)))?;
            let name = index_temp(&open.temp);
            self.sink
                .put(&name, &idx.encode())
                .map_err(|e| ConvertError::output(self.sink.location(&name), e))?;
        }
        self.closed.push(Closed {
            temp: open.temp,
            records,
            bytes,
            crc32c,
        });
        Ok(())
    }

    /// Closes the last shard; gives the closed shards, in order.
    pub(super) fn finish(mut self) -> Result<Vec<Closed>, ConvertError> {
        self.close_open()?;
        Ok(std::mem::take(&mut self.closed))
    }

    /// Removes every temporary object written so far.
    pub(super) fn abort(mut self) {
        if let Some(open) = self.open.take() {
            drop(open);
        }
        for i in 0..=self.closed.len() {
            let temp = temp_name(&self.stem, i);
            let _ = self.sink.remove(&index_temp(&temp));
            let _ = self.sink.remove(&temp);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert_eq!(
            shard_name(Naming::Tf, "train", 3, 16, 9, Compression::None),
            "train-00003-of-00016.tfrecord"
        );
        assert_eq!(
            shard_name(Naming::Hf, "dataset", 3, 16, 5000, Compression::Gzip),
            "dataset-3-5000.tfrecord.gz"
        );
        assert!(is_shard_of(
            Naming::Tf,
            "train",
            "train-00003-of-00016.tfrecord.zz"
        ));
        assert!(!is_shard_of(
            Naming::Tf,
            "train",
            "train-task00001-00003-of-00016.tfrecord"
        ));
        assert!(!is_shard_of(Naming::Tf, "train", "train-3-5.tfrecord"));
        assert!(is_shard_of(
            Naming::Hf,
            "dataset",
            "dataset-3-5000.tfrecord"
        ));
        assert!(!is_shard_of(
            Naming::Hf,
            "dataset",
            "dataset-task00001-3-5000.tfrecord"
        ));
        assert!(!is_shard_of(
            Naming::Hf,
            "dataset",
            "dataset-3-5000.tfrecord.tmp"
        ));
        assert_eq!(
            shard_name(Naming::Tfds, "lm-train", 3, 16, 9, Compression::None),
            "lm-train.tfrecord-00003-of-00016"
        );
        assert!(is_shard_of(
            Naming::Tfds,
            "lm-train",
            "lm-train.tfrecord-00003-of-00016"
        ));
        assert!(!is_shard_of(
            Naming::Tfds,
            "lm-train",
            "lm-train-00003-of-00016.tfrecord"
        ));
        assert_eq!(temp_name("train", 2), ".train-00002.tmp");
        assert!(is_temp_of("train", ".train-00002.tmp"));
        assert!(!is_temp_of("train", ".train-task00001-00002.tmp"));
    }
}
