//! What identifies the shard an index describes, so that an index of
//! another file, or of an older version of this one, is refused by name
//! and never trusted: the shard's name and size, hashes of its first and
//! last 4 KiB (a GZIP shard's last bytes hold the CRC-32 and size of all
//! its data), and its version where the store has one — an object's ETag,
//! a local file's modification time. Versions are compared only when the
//! index holds one of the same kind (an index built from local files stays
//! good for the same files uploaded to a bucket, where size and hashes are
//! checked).

use std::sync::Arc;

use super::error::IndexError;
use crate::source::{
    ReadStats, ShardInfo, SourceError, SourceOptions, Store, io_runtime, stat_local,
};

/// Bytes hashed at each end of a shard.
pub const HASHED: u64 = 4096;

pub use crate::source::ShardVersion as Version;

/// What an index says it describes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShardId {
    /// The shard's file name (its last path segment); empty in an index
    /// written as the shard was (`IndexBuilder`), before it had its name.
    pub name: String,
    pub size: u64,
    /// xxh3 of the first and of the last 4 KiB.
    pub head_hash: u64,
    pub tail_hash: u64,
    pub version: Option<Version>,
}

/// The last path segment of a URL or path.
pub fn file_name(url: &str) -> &str {
    url.rsplit('/').next().unwrap_or(url)
}

/// The hash of a shard's end bytes.
pub fn hash(bytes: &[u8]) -> u64 {
    xxhash_rust::xxh3::xxh3_64(bytes)
}

/// The shard at `url` as it is now: its size and version, and the hashes
/// of its ends (two small reads).
pub fn current(url: &str, source: &SourceOptions) -> Result<ShardId, IndexError> {
    current_with_head(url, source).map(|(id, _)| id)
}

/// [`current`], with the shard's first bytes (up to 4 KiB). A local shard
/// is read by std on this thread: local files never start the I/O runtime.
pub(crate) fn current_with_head(
    url: &str,
    source: &SourceOptions,
) -> Result<(ShardId, Vec<u8>), IndexError> {
    let store = Store::for_url(url)?;
    let (info, version, head, tail) = match store.local_path(url)? {
        Some(path) => {
            let (info, version) = stat_local(url, &path)?;
            let (head, tail) = local_ends(url, &path, info.size)?;
            (info, version, head, tail)
        }
        None => {
            let stats = ReadStats::new();
            let handle = io_runtime()?;
            let (info, version) = futures::executor::block_on(spawn(handle, {
                let store = store.clone();
                let url = url.to_owned();
                let source = source.clone();
                let stats = stats.clone();
                async move { store.stat(&url, &source, &stats).await }
            }))?;
            let (head, tail) = ends(&store, &info, source, &stats)?;
            (info, version, head, tail)
        }
    };
    let id = ShardId {
        name: file_name(url).to_owned(),
        size: info.size,
        head_hash: hash(&head),
        tail_hash: hash(&tail),
        version,
    };
    Ok((id, head))
}

/// [`ends`] of the local file at `path`, `size` bytes long.
fn local_ends(url: &str, path: &str, size: u64) -> Result<(Vec<u8>, Vec<u8>), IndexError> {
    use std::os::unix::fs::FileExt;
    let fail = |e: std::io::Error| SourceError::local_io(url, e);
    let file = std::fs::File::open(path).map_err(fail)?;
    let read = |at: u64, len: u64| -> Result<Vec<u8>, SourceError> {
        let mut buf = vec![0; len as usize];
        file.read_exact_at(&mut buf, at).map_err(fail)?;
        Ok(buf)
    };
    let head = read(0, size.min(HASHED))?;
    let tail = read(size.saturating_sub(HASHED), size.min(HASHED))?;
    Ok((head, tail))
}

/// Runs `future` on the I/O runtime from a thread outside it.
async fn spawn<T: Send + 'static>(
    handle: &tokio::runtime::Handle,
    future: impl std::future::Future<Output = Result<T, SourceError>> + Send + 'static,
) -> Result<T, SourceError> {
    handle.spawn(future).await.unwrap_or_else(|e| {
        Err(SourceError::Unreachable {
            url: String::new(),
            message: format!("I/O task failed: {e}"),
            source: Some(Box::new(e)),
        })
    })
}

/// The first and last 4 KiB of a shard (fewer when it is shorter).
fn ends(
    store: &Store,
    info: &ShardInfo,
    source: &SourceOptions,
    stats: &Arc<ReadStats>,
) -> Result<(Vec<u8>, Vec<u8>), IndexError> {
    let handle = io_runtime()?;
    let read = |range: std::ops::Range<u64>| {
        let store = store.clone();
        let info = info.clone();
        let source = source.clone();
        let stats = stats.clone();
        futures::executor::block_on(spawn(handle, async move {
            store.read_range(&info, range, &source, stats).await
        }))
    };
    let head = read(0..info.size.min(HASHED))?;
    let tail = read(info.size.saturating_sub(HASHED)..info.size)?;
    Ok((head.to_vec(), tail.to_vec()))
}

impl ShardId {
    /// Checks that this index's shard is `now`: the same name, size, ends
    /// and (where both have one of a kind) version. `index` and `shard`
    /// name the files for the error.
    pub fn check(&self, now: &ShardId, index: &str, shard: &str) -> Result<(), IndexError> {
        // An index written with its shard has no name (the shard had none
        // yet): its size and end hashes identify the shard.
        if !self.name.is_empty() && self.name != now.name {
            return Err(IndexError::OtherShard {
                index: index.to_owned(),
                shard: shard.to_owned(),
                recorded: self.name.clone(),
            });
        }
        let stale = |what: &'static str, recorded: String, found: String| {
            Err(IndexError::Stale {
                index: index.to_owned(),
                shard: shard.to_owned(),
                what,
                recorded,
                found,
            })
        };
        if self.size != now.size {
            return stale("size", self.size.to_string(), now.size.to_string());
        }
        match (&self.version, &now.version) {
            (Some(Version::Etag(a)), Some(Version::Etag(b))) if a != b => {
                return stale("ETag", a.clone(), b.clone());
            }
            (Some(Version::Modified(a)), Some(Version::Modified(b))) if a != b => {
                return stale("modification time (ns)", a.to_string(), b.to_string());
            }
            _ => {}
        }
        if (self.head_hash, self.tail_hash) != (now.head_hash, now.tail_hash) {
            return stale(
                "content (its first and last 4 KiB)",
                format!("{:016x}{:016x}", self.head_hash, self.tail_hash),
                format!("{:016x}{:016x}", now.head_hash, now.tail_hash),
            );
        }
        Ok(())
    }
}
