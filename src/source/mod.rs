//! Shard discovery and reading: local files and cloud objects (gs://, s3://,
//! az://, http(s)://) through one interface.
//!
//! - [`list_shards`]: a glob (`*`, `?`, `[..]` in any path segment below the
//!   bucket), a plain URL, or a comma-separated list of them → the matching
//!   shards with their sizes, sorted by URL. A glob is resolved one level at
//!   a time, each level listed with its longest literal prefix and a `/`
//!   delimiter: never a walk of the whole bucket. A glob that matches nothing
//!   is an error ([`SourceError::NoMatch`]).
//! - [`read_chunks`]: a shard's bytes from any offset as a stream of large
//!   chunks, `readahead` range reads in flight, transient failures retried
//!   with backoff and resumed at the exact byte.
//! - [`open_blocking`]: a `std::io::Read` over one shard ([`ShardReader`]):
//!   the read path of the pipeline's shard reader threads, and of the CLI.
//!
//! Cloud clients come from object_store, configured from the environment
//! ([`Store::for_url`]), one per bucket, with object_store's own retries off:
//! infeed retries itself so that it can resume at the byte and count every
//! retry in [`ReadStats`]. All I/O runs on infeed's own small tokio runtime
//! ([`io_runtime`]); local files are read directly with std (one open file,
//! sequential reads into fresh buffers, one in flight, on its blocking pool),
//! not through object_store's `LocalFileSystem`: measured on a cached 512 MiB
//! file with 8 MiB chunks, 11 GB/s against 5.6 GB/s.

// One concept a file: `runtime` (the I/O runtime), `store` (the client
// cache), `retry` (what a failure means, the metadata retry loop),
// `backoff`, `retry_after` (keeping a server's `Retry-After`), `stats`, then the operations: `list` (globs), `read` (range
// reads as chunk streams), `blocking` (the blocking `Read` face of a shard).
#[cfg(feature = "cloud")]
mod backoff;
mod blocking;
#[cfg(feature = "cloud")]
mod credentials;
mod error;
mod glob;
mod list;
mod read;
#[cfg(feature = "cloud")]
mod retry;
#[cfg(feature = "cloud")]
mod retry_after;
mod runtime;
mod stats;
mod store;
mod url;

use std::sync::Arc;
use std::time::Duration;

pub use blocking::{ShardReader, open_blocking, open_blocking_at};
pub use error::SourceError;
pub(crate) use list::stat_local;
pub use read::{ChunkStream, read_chunks, read_range};
pub use runtime::io_runtime;
pub use stats::ReadStats;
pub use store::Store;

/// One shard: where it is and how big it is.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ShardInfo {
    /// The shard as the user would write it: `gs://b/train-00001.tfrecord`,
    /// `/abs/path`, `relative/path`, `file:///abs/path` (the spelling of the
    /// pattern it was listed by).
    pub url: String,
    /// Its size in bytes (as stored, i.e. compressed for compressed shards).
    pub size: u64,
}

/// What the name of a shard's index file adds to the shard's
/// (`crate::index`): a glob never matches one.
pub const INDEX_SUFFIX: &str = ".index";

/// A shard's version, as its store says: what changes when it is
/// rewritten.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum ShardVersion {
    /// A cloud object's ETag.
    Etag(String),
    /// A local file's modification time, in nanoseconds since 1970.
    Modified(u64),
}

/// How shards are read: range sizes, requests in flight, retries and
/// timeouts.
///
/// Built from [`SourceOptions::default`] and the setters, which keep
/// working as settings are added (the type is `#[non_exhaustive]`; its
/// fields stay public to read and to set):
///
/// ```
/// use std::time::Duration;
/// use infeed::source::SourceOptions;
///
/// let opts = SourceOptions::default()
///     .max_retries(3)
///     .retry_timeout(Duration::from_secs(60))
///     .request_timeout(Duration::from_secs(10));
/// assert_eq!(opts.max_retries, 3);
/// ```
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
#[non_exhaustive]
pub struct SourceOptions {
    /// Bytes per range read and per chunk handed on (default 8 MiB): large
    /// pieces keep per-request overhead and cross-thread hand-offs rare.
    pub chunk_size: usize,
    /// Range reads in flight per cloud shard (default 4), so that one slow
    /// request does not stall the stream. Memory per shard is about
    /// `readahead × chunk_size`, plus the chunks held downstream: a chunk's
    /// buffer is filled again once it is released, never one fresh buffer
    /// per chunk ([`ReadStats::buffers`] counts them). Local files always
    /// have one read in flight: more only slows them down.
    pub readahead: usize,
    /// Retries of one request without progress before giving up (default 8).
    /// Metadata requests that cannot connect at all (refused, unknown host)
    /// are retried at most twice: that is a wrong endpoint, not a blip.
    pub max_retries: u32,
    /// No retry starts later than this after the first failure of a request
    /// (counted again from its next failure once a range read makes
    /// progress), whatever `max_retries` allows: a retry whose backoff would
    /// end past it is not made, and the request fails with the last error.
    /// `None` (the default) sets no deadline: `max_retries` alone bounds
    /// the retries. Like object_store's `retry_timeout`.
    #[serde(with = "seconds::optional")]
    pub retry_timeout: Option<Duration>,
    /// The first backoff (default 100 ms); it doubles per retry, with jitter,
    /// up to `max_backoff`. An answer with `Retry-After` (a 429 or 503, say)
    /// is waited out: the retry comes no sooner than it asks, up to 60 s.
    #[serde(with = "seconds")]
    pub retry_backoff: Duration,
    /// The longest backoff (default 5 s).
    #[serde(with = "seconds")]
    pub max_backoff: Duration,
    /// How long to wait for a response, and then for each piece of a
    /// response body, before calling the request stalled and retrying it
    /// (default 30 s). A slow transfer that keeps delivering is never cut.
    #[serde(with = "seconds")]
    pub request_timeout: Duration,
    /// Retry failures that cannot be classified: no HTTP status, no known
    /// network error kind (default `false`: they fail at once, as an error
    /// retrying is not known to fix). 5xx, 408, 429, resets, timeouts and
    /// cut bodies are always retried.
    pub retry_unknown_errors: bool,
}

/// serde's form of a [`SourceOptions`] time: seconds, a number.
mod seconds {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer, de::Error};

    pub fn serialize<S: Serializer>(value: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_f64(value.as_secs_f64())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        let given = f64::deserialize(d)?;
        Duration::try_from_secs_f64(given).map_err(|_| {
            D::Error::custom(format!("{given} is not a time: seconds, finite and >= 0"))
        })
    }

    /// `None` as no value (`null`, or the key left out).
    pub mod optional {
        use std::time::Duration;

        use serde::{Deserialize, Deserializer, Serializer};

        pub fn serialize<S: Serializer>(value: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
            match value {
                None => s.serialize_none(),
                Some(d) => s.serialize_f64(d.as_secs_f64()),
            }
        }

        pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
            #[derive(Deserialize)]
            struct Seconds(#[serde(with = "super")] Duration);
            Ok(Option::<Seconds>::deserialize(d)?.map(|Seconds(s)| s))
        }
    }
}

impl Default for SourceOptions {
    fn default() -> Self {
        SourceOptions {
            chunk_size: 8 << 20,
            readahead: 4,
            max_retries: 8,
            retry_timeout: None,
            retry_backoff: Duration::from_millis(100),
            max_backoff: Duration::from_secs(5),
            request_timeout: Duration::from_secs(30),
            retry_unknown_errors: false,
        }
    }
}

impl SourceOptions {
    /// Sets [`chunk_size`](Self::chunk_size): bytes per range read.
    pub fn chunk_size(mut self, bytes: usize) -> Self {
        self.chunk_size = bytes;
        self
    }

    /// Sets [`readahead`](Self::readahead): range reads in flight per
    /// cloud shard.
    pub fn readahead(mut self, reads: usize) -> Self {
        self.readahead = reads;
        self
    }

    /// Sets [`max_retries`](Self::max_retries): retries of one request
    /// without progress (0: none).
    pub fn max_retries(mut self, retries: u32) -> Self {
        self.max_retries = retries;
        self
    }

    /// Sets [`retry_timeout`](Self::retry_timeout): no retry starts later
    /// than `deadline` after a request's first failure.
    pub fn retry_timeout(mut self, deadline: Duration) -> Self {
        self.retry_timeout = Some(deadline);
        self
    }

    /// Sets [`retry_backoff`](Self::retry_backoff) and
    /// [`max_backoff`](Self::max_backoff): the first wait before a retry and
    /// the longest.
    pub fn backoff(mut self, first: Duration, max: Duration) -> Self {
        self.retry_backoff = first;
        self.max_backoff = max;
        self
    }

    /// Sets [`request_timeout`](Self::request_timeout): the longest wait
    /// for a response or for the next piece of its body.
    pub fn request_timeout(mut self, timeout: Duration) -> Self {
        self.request_timeout = timeout;
        self
    }

    /// Sets [`retry_unknown_errors`](Self::retry_unknown_errors): whether
    /// failures that cannot be classified are retried.
    pub fn retry_unknown_errors(mut self, retry: bool) -> Self {
        self.retry_unknown_errors = retry;
        self
    }
}

/// The shards matching `pattern`, sorted by URL, without duplicates.
///
/// `pattern` is a local path, `file://`, `gs://`, `s3://`, `az://`,
/// `abfs[s]://` URL (or an `http(s)://` URL without wildcards), or several
/// separated by commas. Wildcards `*`, `?`, `[..]` may appear in any path
/// segment below the bucket (`**` is refused); each must match at least one
/// shard ([`SourceError::NoMatch`]). A URL without wildcards is one shard,
/// its size from a HEAD ([`SourceError::NotFound`] if it does not exist).
pub async fn list_shards(
    pattern: &str,
    opts: &SourceOptions,
) -> Result<Vec<ShardInfo>, SourceError> {
    list_shards_with_stats(pattern, opts, &ReadStats::new()).await
}

/// [`list_shards`], counting requests, retries and listed entries in `stats`.
pub async fn list_shards_with_stats(
    pattern: &str,
    opts: &SourceOptions,
    stats: &Arc<ReadStats>,
) -> Result<Vec<ShardInfo>, SourceError> {
    let patterns: Vec<&str> = pattern.split(',').map(str::trim).collect();
    if patterns.iter().any(|p| p.is_empty()) {
        return Err(SourceError::bad_url(pattern, "empty pattern in the list"));
    }
    let mut shards = Vec::new();
    for one in patterns {
        let store = Store::for_url(one)?;
        shards.extend(store.list(one, opts, stats).await?);
    }
    shards.sort();
    shards.dedup_by(|a, b| a.url == b.url);
    Ok(shards)
}

/// [`list_shards`] for synchronous callers (it blocks the calling thread;
/// the requests run on [`io_runtime`]).
pub fn list_shards_blocking(
    pattern: &str,
    opts: &SourceOptions,
) -> Result<Vec<ShardInfo>, SourceError> {
    futures::executor::block_on(list_shards(pattern, opts))
}
