//! A blocking `std::io::Read` over one shard: how the pipeline's shard
//! reader threads (and the CLI) read a local file or a cloud object. It is
//! also a [`ChunkSource`]: a cloud object's chunks are handed on as they
//! arrive, and a local file's as windows mapped into memory, so the records
//! are sliced where the bytes already are.

use std::fs::File;
use std::io::{self, Read};
use std::sync::Arc;

use bytes::{Buf, Bytes};
use futures::StreamExt;

use super::error::SourceError;
use super::glob;
use super::runtime::io_runtime;
use super::stats::ReadStats;
use super::store::Store;
use super::url::{Parsed, Scheme};
use super::{ShardInfo, SourceOptions};
use crate::record::chunk_source::ChunkSource;
use crate::record::mapped;

/// Opens one shard (a local path or a URL, no wildcards) for blocking reads.
///
/// Local files are plain `std::fs::File`s. Cloud objects are read by
/// [`read_chunks`](super::read_chunks) on infeed's I/O runtime (readahead, retries and all) and
/// handed over chunk by chunk; the object's size comes from a HEAD made
/// here, so a missing object or bucket fails now, not on the first read.
/// Do not call it from inside an async task: it blocks.
pub fn open_blocking(url: &str, opts: &SourceOptions) -> Result<ShardReader, SourceError> {
    open_blocking_at(url, 0, opts)
}

/// [`open_blocking`], reading from byte `start` (at most the shard's size:
/// past it is [`SourceError::BadOffset`]). For resuming an uncompressed shard
/// at a record boundary.
pub fn open_blocking_at(
    url: &str,
    start: u64,
    opts: &SourceOptions,
) -> Result<ShardReader, SourceError> {
    let parsed = Parsed::new(url)?;
    if glob::has_wildcard(&parsed.key) {
        return Err(SourceError::bad_url(
            url,
            "wildcards name many shards: list them with list_shards first",
        ));
    }
    if parsed.scheme == Scheme::Local {
        return open_local(url, &parsed.key, start);
    }
    let store = Store::for_url(url)?;
    let stats = ReadStats::new();
    let shard: ShardInfo = futures::executor::block_on(store.head(url, opts, &stats))?;
    let (tx, rx) = tokio::sync::mpsc::channel::<Message>(1);
    if start > shard.size {
        return Err(SourceError::BadOffset {
            url: url.to_owned(),
            offset: start,
            size: shard.size,
        });
    }
    let mut chunks = store.read_chunks(&shard, start, opts, stats.clone());
    let task = io_runtime()?.spawn(async move {
        while let Some(item) = chunks.next().await {
            let failed = item.is_err();
            let message = match item {
                Ok(bytes) => Message::Data(bytes),
                Err(e) => Message::Error(e),
            };
            if tx.send(message).await.is_err() || failed {
                return; // the reader was dropped, or the read failed
            }
        }
        let _ = tx.send(Message::End).await;
    });
    Ok(ShardReader {
        url: url.to_owned(),
        size: shard.size,
        stats,
        inner: Inner::Remote {
            rx,
            current: Bytes::new(),
            ended: false,
            task,
        },
    })
}

fn open_local(url: &str, path: &str, start: u64) -> Result<ShardReader, SourceError> {
    use std::io::{Seek, SeekFrom};
    let fail = |e: io::Error| SourceError::local_io(url, e);
    let mut file = File::open(path).map_err(fail)?;
    let meta = file.metadata().map_err(fail)?;
    if !meta.is_file() {
        return Err(SourceError::bad_url(url, "not a file"));
    }
    if start > meta.len() {
        return Err(SourceError::BadOffset {
            url: url.to_owned(),
            offset: start,
            size: meta.len(),
        });
    }
    if start > 0 {
        file.seek(SeekFrom::Start(start)).map_err(fail)?;
    }
    Ok(ShardReader {
        url: url.to_owned(),
        size: meta.len(),
        stats: ReadStats::new(),
        inner: Inner::File(file),
    })
}

enum Message {
    Data(Bytes),
    Error(SourceError),
    End,
}

enum Inner {
    File(File),
    Remote {
        rx: tokio::sync::mpsc::Receiver<Message>,
        current: Bytes,
        ended: bool,
        task: tokio::task::JoinHandle<()>,
    },
}

/// A blocking reader over one shard; see [`open_blocking`]. Read errors
/// are `std::io::Error`s wrapping the [`SourceError`] (URL and offset).
pub struct ShardReader {
    url: String,
    size: u64,
    stats: Arc<ReadStats>,
    inner: Inner,
}

impl ShardReader {
    /// The URL (or path) as given.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The shard's size in bytes, when opened.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// True for a local file.
    pub fn is_local(&self) -> bool {
        matches!(self.inner, Inner::File(_))
    }

    /// Requests, retries and bytes of a cloud read (all zero for local files).
    pub fn stats(&self) -> &Arc<ReadStats> {
        &self.stats
    }
}

impl Read for ShardReader {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if let Inner::File(f) = &mut self.inner {
            return f.read(buf);
        }
        let Some(current) = self.remote_chunk()? else {
            return Ok(0);
        };
        let n = buf.len().min(current.len());
        buf[..n].copy_from_slice(&current[..n]);
        current.advance(n);
        Ok(n)
    }
}

impl ShardReader {
    /// A cloud object's unread bytes of its current chunk, receiving the
    /// next chunk when it is used up; `None` at the end.
    fn remote_chunk(&mut self) -> io::Result<Option<&mut Bytes>> {
        let Inner::Remote {
            rx, current, ended, ..
        } = &mut self.inner
        else {
            return Ok(None);
        };
        while current.is_empty() {
            if *ended {
                return Ok(None);
            }
            match futures::executor::block_on(rx.recv()) {
                Some(Message::Data(bytes)) => *current = bytes,
                Some(Message::Error(e)) => {
                    *ended = true;
                    return Err(e.into());
                }
                Some(Message::End) => *ended = true,
                None => {
                    *ended = true;
                    return Err(io::Error::other(format!(
                        "{}: the reading task ended unexpectedly",
                        self.url
                    )));
                }
            }
        }
        Ok(Some(current))
    }

    /// Mapped windows up to this size are populated at once: a larger one
    /// would wait, on a cold page cache, for all of its bytes to be read
    /// before the first record (the kernel's readahead overlaps instead).
    const POPULATE_MAX: usize = 8 << 20;

    /// The next `max` bytes of the local file, mapped (fewer at its end; a
    /// file that shrank since it was opened ends where it ends now, and its
    /// reader reports the record cut short).
    fn map_window(url: &str, file: &mut File, max: usize) -> io::Result<Option<Bytes>> {
        use std::io::{Seek, SeekFrom};
        let pos = file.stream_position()?;
        let size = file.metadata()?.len();
        let len = (size.saturating_sub(pos)).min(max.max(1) as u64) as usize;
        if len == 0 {
            return Ok(None);
        }
        // Its bytes may change if the file is written meanwhile (they are
        // checked by CRC like any read); a truncation after this point is
        // turned into an error by the deframer (`record::mapped`). Up to
        // POPULATE_MAX, the window's page-table entries in one call, not
        // one fault per page as the reader first touches it.
        let map = mapped::map(file, pos, len, len <= Self::POPULATE_MAX)
            .map_err(|e| io::Error::new(e.kind(), format!("{url}: mmap at {pos}: {e}")))?;
        file.seek(SeekFrom::Start(pos + len as u64))?;
        Ok(Some(map))
    }
}

impl ChunkSource for ShardReader {
    fn next_chunk(&mut self, max: usize) -> io::Result<Option<Bytes>> {
        if let Inner::File(file) = &mut self.inner {
            return Self::map_window(&self.url, file, max);
        }
        // A cloud chunk goes on whole, as it arrived.
        Ok(self.remote_chunk()?.map(std::mem::take))
    }
}

impl Drop for ShardReader {
    fn drop(&mut self) {
        if let Inner::Remote { task, .. } = &self.inner {
            task.abort();
        }
    }
}

impl std::fmt::Debug for ShardReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ShardReader")
            .field("url", &self.url)
            .field("size", &self.size)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::*;

    fn windows(reader: &mut ShardReader, max: usize) -> Vec<Bytes> {
        std::iter::from_fn(|| reader.next_chunk(max).unwrap()).collect()
    }

    /// A mapped local file comes as windows, in order, from the offset it
    /// was opened at; a file that grows while read is read to its new end,
    /// one that shrinks ends where it ends now.
    #[test]
    fn mapped_windows_follow_the_file_as_it_is_now() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let data: Vec<u8> = (0..10_000u32).map(|i| (i * 7 % 251) as u8).collect();
        std::fs::write(&path, &data).unwrap();
        let url = path.to_str().unwrap();

        let mut r = open_blocking_at(url, 123, &SourceOptions::default()).unwrap();
        let got = windows(&mut r, 4096);
        assert_eq!(
            got.iter().map(Bytes::len).collect::<Vec<_>>(),
            [4096, 4096, 1685]
        );
        assert_eq!(got.concat(), data[123..]);

        let mut r = open_blocking(url, &SourceOptions::default()).unwrap();
        let first = r.next_chunk(6000).unwrap().unwrap();
        let more: Vec<u8> = (0..3000u32).map(|i| (i % 13) as u8).collect();
        std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap()
            .write_all(&more)
            .unwrap();
        let rest = windows(&mut r, 6000);
        assert_eq!(
            [first]
                .iter()
                .chain(&rest)
                .cloned()
                .collect::<Vec<_>>()
                .concat(),
            [data.clone(), more].concat()
        );

        let mut r = open_blocking(url, &SourceOptions::default()).unwrap();
        let first = r.next_chunk(4000).unwrap().unwrap();
        std::fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .unwrap()
            .set_len(7000)
            .unwrap();
        let rest = windows(&mut r, 4000);
        assert_eq!(first[..], data[..4000]);
        assert_eq!(rest.concat(), data[4000..7000]);
    }
}
