//! Input files in object stores (`gs://`, `s3://`, `az://`, `http(s)://`)
//! for `infeed.beam.ConvertFiles` (`files.rs`): their size, and blocking
//! readers over their bytes through [`crate::source`] (its range reads,
//! retries and credentials from the environment, as for every read of
//! infeed).

use std::io::{self, Read};

use bytes::{Buf, Bytes};
use futures::StreamExt;

use super::error::ConvertError;
use crate::source::{ChunkStream, ReadStats, ShardInfo, SourceOptions, Store};

/// True when `name` is a URL rather than a local path (`file://` URLs are
/// local paths).
pub(super) fn is_url(name: &str) -> bool {
    name.contains("://") && !name.starts_with("file://")
}

fn failed(url: &str, e: crate::source::SourceError) -> ConvertError {
    ConvertError::io(url, io::Error::from(e))
}

/// The object at `url` with its size (a HEAD request).
pub(super) fn head(url: &str) -> Result<ShardInfo, ConvertError> {
    let store = Store::for_url(url).map_err(|e| failed(url, e))?;
    let stats = ReadStats::new();
    futures::executor::block_on(store.head(url, &SourceOptions::default(), &stats))
        .map_err(|e| failed(url, e))
}

/// The bytes `[start, end)` of an object (`end` is cut to its size), in
/// range reads of up to `opts.chunk_size` bytes.
pub(super) fn open(
    shard: &ShardInfo,
    start: u64,
    end: u64,
    opts: &SourceOptions,
) -> Result<ObjectRead, ConvertError> {
    let end = end.min(shard.size);
    let store = Store::for_url(&shard.url).map_err(|e| failed(&shard.url, e))?;
    Ok(ObjectRead {
        stream: store.read_range_chunks(shard, start.min(end)..end, opts, ReadStats::new()),
        current: Bytes::new(),
    })
}

/// The bytes of an object from `start` to its end, asking for `[start,
/// end)` (in the usual large reads) first, and for the rest only when it is
/// read, in small reads: for a byte range whose last line runs on a little
/// past `end`, without fetching megabytes beyond it.
pub(super) fn open_range(
    shard: &ShardInfo,
    start: u64,
    end: u64,
) -> Result<Box<dyn Read + Send>, ConvertError> {
    let head = open(shard, start, end, &SourceOptions::default())?;
    let tail = Tail {
        shard: shard.clone(),
        from: end.max(start),
        reader: None,
    };
    Ok(Box::new(head.chain(tail)))
}

/// Reads [`ChunkStream`]'s chunks as a blocking `Read`.
pub(super) struct ObjectRead {
    stream: ChunkStream,
    current: Bytes,
}

impl Read for ObjectRead {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        while self.current.is_empty() {
            match futures::executor::block_on(self.stream.next()) {
                Some(Ok(bytes)) => self.current = bytes,
                Some(Err(e)) => return Err(e.into()),
                None => return Ok(0),
            }
        }
        let n = buf.len().min(self.current.len());
        buf[..n].copy_from_slice(&self.current[..n]);
        self.current.advance(n);
        Ok(n)
    }
}

/// The rest of an object after a range, opened on its first read.
struct Tail {
    shard: ShardInfo,
    from: u64,
    reader: Option<ObjectRead>,
}

impl Read for Tail {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.from >= self.shard.size {
            return Ok(0);
        }
        if self.reader.is_none() {
            // A line or two: 64 KiB reads, two in flight.
            let opts = SourceOptions::default().chunk_size(64 << 10).readahead(2);
            let reader = open(&self.shard, self.from, u64::MAX, &opts)
                .map_err(|e| io::Error::other(e.to_string()))?;
            self.reader = Some(reader);
        }
        match &mut self.reader {
            Some(reader) => reader.read(buf),
            None => Ok(0),
        }
    }
}

/// A shard's description for an object of known size.
pub(super) fn shard(url: &str, size: u64) -> ShardInfo {
    ShardInfo {
        url: url.to_owned(),
        size,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_and_paths() {
        assert!(is_url("gs://b/k.jsonl"));
        assert!(is_url("s3://b/k.jsonl"));
        assert!(!is_url("file:///tmp/k.jsonl"));
        assert!(!is_url("/tmp/k.jsonl"));
    }

    /// A local file through the same readers (crate::source reads local
    /// paths too): a range, then its tail on demand.
    #[test]
    fn a_range_reads_on_past_its_end_only_when_asked() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.txt");
        let data: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
        std::fs::write(&path, &data).unwrap();
        let info = shard(path.to_str().unwrap(), data.len() as u64);
        let mut got = Vec::new();
        open(&info, 10, 20, &SourceOptions::default())
            .unwrap()
            .read_to_end(&mut got)
            .unwrap();
        assert_eq!(got, &data[10..20]);
        let mut got = Vec::new();
        open_range(&info, 1000, 1010)
            .unwrap()
            .read_to_end(&mut got)
            .unwrap();
        assert_eq!(got, &data[1000..]);
        let mut got = [0u8; 5];
        open_range(&info, 5, 7)
            .unwrap()
            .read_exact(&mut got)
            .unwrap();
        assert_eq!(&got, &data[5..10]);
    }
}
