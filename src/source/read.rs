//! Reading a shard as a stream of large, in-order chunks, with `readahead`
//! range reads in flight and retries that resume at the exact byte where
//! the data stopped.

use std::collections::VecDeque;
use std::future::Future;
use std::ops::Range;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use bytes::Bytes;
use futures::Stream;
use tokio::task::JoinHandle;

use super::error::SourceError;
use super::runtime::io_runtime;
use super::stats::ReadStats;
use super::store::{Backend, Store};
use super::{ShardInfo, SourceOptions};
#[cfg(feature = "cloud")]
use crate::record::chunk_ring::ChunkRing;

/// Reads the bytes of `shard` from `start` to its end (its listed size), in
/// order, as chunks of `opts.chunk_size` bytes (the last may be shorter).
///
/// Up to `opts.readahead` range reads are in flight at once, on infeed's I/O
/// runtime ([`io_runtime`](super::io_runtime)), so one slow request does not stall the
/// stream and the stream can be polled from any executor. A request that
/// fails with a transient error (5xx, 408, 429, reset, cut body) or that
/// delivers no data for `opts.request_timeout` is retried with exponential
/// backoff, asking only for the bytes not yet received: no byte is lost or
/// repeated. After `opts.max_retries` consecutive failures without progress
/// the stream yields [`SourceError::Read`] naming the URL and the first
/// missing byte, then ends. Dropping the stream cancels its requests.
pub fn read_chunks(
    shard: &ShardInfo,
    start: u64,
    opts: &SourceOptions,
    stats: Arc<ReadStats>,
) -> ChunkStream {
    match Store::for_url(&shard.url) {
        Ok(store) => store.read_chunks(shard, start, opts, stats),
        Err(e) => ChunkStream::failed(e),
    }
}

/// The bytes `range` of `shard` in one buffer: for a file's first bytes
/// (compression detection), an index, or a footer. Same retries as
/// [`read_chunks`]; a range past the shard's end is [`SourceError::BadOffset`].
pub async fn read_range(
    shard: &ShardInfo,
    range: Range<u64>,
    opts: &SourceOptions,
    stats: Arc<ReadStats>,
) -> Result<Bytes, SourceError> {
    Store::for_url(&shard.url)?
        .read_range(shard, range, opts, stats)
        .await
}

impl Store {
    /// [`read_chunks`] through this store (see [`Store::with_config`]).
    pub fn read_chunks(
        &self,
        shard: &ShardInfo,
        start: u64,
        opts: &SourceOptions,
        stats: Arc<ReadStats>,
    ) -> ChunkStream {
        self.read_range_chunks(shard, start..shard.size, opts, stats)
    }

    /// [`read_range`] through this store.
    pub async fn read_range(
        &self,
        shard: &ShardInfo,
        range: Range<u64>,
        opts: &SourceOptions,
        stats: Arc<ReadStats>,
    ) -> Result<Bytes, SourceError> {
        use futures::StreamExt;
        let len = range.end.saturating_sub(range.start);
        let opts = SourceOptions {
            chunk_size: usize::try_from(len).unwrap_or(usize::MAX).max(1),
            readahead: 1,
            ..opts.clone()
        };
        let mut chunks = self.read_range_chunks(shard, range, &opts, stats);
        let mut out = Vec::new();
        while let Some(chunk) = chunks.next().await {
            let chunk = chunk?;
            if out.is_empty() {
                // The usual case: the whole range in one chunk, no copy.
                if chunk.len() as u64 == len {
                    return Ok(chunk);
                }
            }
            out.extend_from_slice(&chunk);
        }
        Ok(Bytes::from(out))
    }

    /// Like [`Store::read_chunks`], for the bytes `range` only.
    pub fn read_range_chunks(
        &self,
        shard: &ShardInfo,
        range: Range<u64>,
        opts: &SourceOptions,
        stats: Arc<ReadStats>,
    ) -> ChunkStream {
        let parsed = match self.parse_own(&shard.url) {
            Ok(p) => p,
            Err(e) => return ChunkStream::failed(e),
        };
        if range.start > range.end || range.end > shard.size {
            return ChunkStream::failed(SourceError::BadOffset {
                url: shard.url.clone(),
                offset: if range.end > shard.size {
                    range.end
                } else {
                    range.start
                },
                size: shard.size,
            });
        }
        let handle = match io_runtime() {
            Ok(h) => h.clone(),
            Err(e) => return ChunkStream::failed(e),
        };
        let target = match &self.inner.backend {
            Backend::Local => Target::Local {
                path: PathBuf::from(&parsed.key),
                file: Mutex::new(None),
            },
            #[cfg(feature = "cloud")]
            Backend::Cloud { objects, .. } => Target::Cloud(
                objects.clone(),
                object_store::path::Path::from(parsed.key.as_str()),
            ),
        };
        ChunkStream {
            job: Some(Arc::new(Job {
                url: shard.url.clone(),
                size: shard.size,
                end: range.end,
                target,
                opts: opts.clone(),
                stats,
                #[cfg(feature = "cloud")]
                version: Mutex::new(None),
                #[cfg(feature = "cloud")]
                buffers: Mutex::new(ChunkRing::default()),
            })),
            handle: Some(handle),
            next: range.start,
            in_flight: VecDeque::new(),
            error: None,
        }
    }
}

/// Where the bytes come from.
enum Target {
    /// A local file, opened on the first read and kept open with its
    /// position: chunks are read in order, so there is one seek at the start.
    Local {
        path: PathBuf,
        file: Mutex<Option<(std::fs::File, u64)>>,
    },
    #[cfg(feature = "cloud")]
    Cloud(Arc<dyn object_store::ObjectStore>, object_store::path::Path),
}

/// What every range read of one stream shares.
struct Job {
    url: String,
    /// The shard's size (for errors).
    size: u64,
    /// Where this stream stops.
    end: u64,
    target: Target,
    opts: SourceOptions,
    stats: Arc<ReadStats>,
    /// The ETag of the shard's first cloud response: every later response
    /// must come from the same version of the object.
    #[cfg(feature = "cloud")]
    version: Mutex<Option<String>>,
    /// The chunks this stream handed out, filled again once released: a
    /// fresh 8 MiB buffer per range read cost a page fault per 4 KiB (a
    /// quarter of infeed's CPU reading from the GCS emulator). A buffer is
    /// allocated only when none is free, so the buffers alive never
    /// outnumber the most chunks in use at once (in flight + held
    /// downstream): memory stays as bounded as without reuse.
    #[cfg(feature = "cloud")]
    buffers: Mutex<ChunkRing>,
}

/// A spawned range read, aborted when dropped (so dropping the stream
/// cancels its requests).
struct Fetch(JoinHandle<Result<Bytes, SourceError>>, u64);

impl Drop for Fetch {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// The stream [`read_chunks`] returns: `Result<Bytes, SourceError>` items,
/// in file order, ending after the last byte or the first error.
pub struct ChunkStream {
    /// `None` once finished.
    job: Option<Arc<Job>>,
    handle: Option<tokio::runtime::Handle>,
    /// The first byte not yet requested.
    next: u64,
    in_flight: VecDeque<Fetch>,
    /// An error to yield before ending (set at creation).
    error: Option<SourceError>,
}

impl ChunkStream {
    fn failed(e: SourceError) -> ChunkStream {
        ChunkStream {
            job: None,
            handle: None,
            next: 0,
            in_flight: VecDeque::new(),
            error: Some(e),
        }
    }

    /// Starts range reads until `readahead` are in flight or all are started.
    fn fill(&mut self) {
        let (Some(job), Some(handle)) = (&self.job, &self.handle) else {
            return;
        };
        let chunk = job.opts.chunk_size.max(1) as u64;
        let depth = match job.target {
            // One local read in flight (the next starts as soon as a chunk is
            // handed over): the page cache and the kernel's readahead do the
            // rest. Measured on a 512 MiB cached file, 8 MiB chunks: 11 GB/s
            // with one in flight, ~7 GB/s with 2 or 4 (parallel reads fight
            // over 2 cores and fault in more fresh pages); object_store's
            // LocalFileSystem: 5.6 GB/s with 4 get_range in flight, 0.4 GB/s
            // streaming a get().
            Target::Local { .. } => 1,
            #[cfg(feature = "cloud")]
            Target::Cloud(..) => job.opts.readahead.max(1),
        };
        while self.in_flight.len() < depth && self.next < job.end {
            let range = self.next..job.end.min(self.next.saturating_add(chunk));
            self.next = range.end;
            let job2 = job.clone();
            let start = range.start;
            let task = match &job.target {
                Target::Local { .. } => handle.spawn_blocking(move || read_local(&job2, range)),
                #[cfg(feature = "cloud")]
                Target::Cloud(store, path) => {
                    let (store, path) = (store.clone(), path.clone());
                    handle
                        .spawn(async move { read_cloud(&job2, store.as_ref(), &path, range).await })
                }
            };
            self.in_flight.push_back(Fetch(task, start));
        }
    }

    fn finish(&mut self) {
        self.job = None;
        self.in_flight.clear();
    }
}

impl Stream for ChunkStream {
    type Item = Result<Bytes, SourceError>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        if let Some(e) = this.error.take() {
            this.finish();
            return Poll::Ready(Some(Err(e)));
        }
        this.fill();
        let Some(front) = this.in_flight.front_mut() else {
            this.finish();
            return Poll::Ready(None);
        };
        let result = match Pin::new(&mut front.0).poll(cx) {
            Poll::Pending => return Poll::Pending,
            Poll::Ready(r) => r,
        };
        let offset = front.1;
        this.in_flight.pop_front();
        let url = this.job.as_ref().map(|j| j.url.clone()).unwrap_or_default();
        match result {
            Ok(Ok(bytes)) => {
                this.fill();
                Poll::Ready(Some(Ok(bytes)))
            }
            Ok(Err(e)) => {
                this.finish();
                Poll::Ready(Some(Err(e)))
            }
            Err(join) => {
                this.finish();
                Poll::Ready(Some(Err(SourceError::Read {
                    url,
                    offset,
                    message: format!("read task failed: {join}"),
                    retries: 0,
                    source: Some(Box::new(join)),
                })))
            }
        }
    }
}

impl std::fmt::Debug for ChunkStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChunkStream")
            .field("url", &self.job.as_ref().map(|j| j.url.as_str()))
            .field("next", &self.next)
            .field("in_flight", &self.in_flight.len())
            .finish_non_exhaustive()
    }
}

/// A local range: a read into a fresh buffer, on the blocking pool.
fn read_local(job: &Job, range: Range<u64>) -> Result<Bytes, SourceError> {
    use std::io::{Read, Seek, SeekFrom};
    // Irrefutable without the `cloud` feature (no other target then).
    #[cfg_attr(not(feature = "cloud"), allow(irrefutable_let_patterns))]
    let Target::Local { path, file } = &job.target else {
        return Err(SourceError::Read {
            url: job.url.clone(),
            offset: range.start,
            message: "internal error: a local read of a cloud shard".into(),
            retries: 0,
            source: None,
        });
    };
    job.stats.requests.fetch_add(1, Relaxed);
    let fail = |offset: u64, e: std::io::Error| SourceError::Read {
        url: job.url.clone(),
        offset,
        message: e.to_string(),
        retries: 0,
        source: Some(Box::new(e)),
    };
    // Reads run one after another (the lock), in file order.
    let mut guard = file.lock().unwrap_or_else(|e| e.into_inner());
    if guard.is_none() {
        *guard = Some((
            std::fs::File::open(path).map_err(|e| fail(range.start, e))?,
            0,
        ));
    }
    let Some((file, pos)) = guard.as_mut() else {
        return Err(fail(range.start, std::io::Error::other("file not open")));
    };
    if *pos != range.start {
        file.seek(SeekFrom::Start(range.start))
            .map_err(|e| fail(range.start, e))?;
        *pos = range.start;
    }
    let len = (range.end - range.start) as usize;
    // `read_to_end` on `Take` fills the spare capacity without zeroing it
    // first and retries `Interrupted`.
    let mut buf = Vec::with_capacity(len);
    let result = file.take(len as u64).read_to_end(&mut buf);
    *pos += buf.len() as u64;
    if let Err(e) = result {
        return Err(fail(range.start + buf.len() as u64, e));
    }
    if buf.len() < len {
        return Err(SourceError::Truncated {
            url: job.url.clone(),
            offset: range.start + buf.len() as u64,
            size: job.size,
        });
    }
    job.stats.bytes.fetch_add(len as u64, Relaxed);
    job.stats.chunks.fetch_add(1, Relaxed);
    Ok(Bytes::from(buf))
}

/// A cloud range: GET `range`, resuming after the last byte received when a
/// request fails, until the range is complete or the retries are spent.
#[cfg(feature = "cloud")]
async fn read_cloud(
    job: &Job,
    store: &dyn object_store::ObjectStore,
    path: &object_store::path::Path,
    range: Range<u64>,
) -> Result<Bytes, SourceError> {
    use super::backoff::wait_before_retry;
    use super::retry::{Class, Failure, log_retry, past_deadline, within_deadline};
    use futures::StreamExt;
    use object_store::{GetOptions, GetRange};

    let opts = &job.opts;
    let stats = &job.stats;
    let len = (range.end - range.start) as usize;
    let mut buf = job.buffer(len);
    // Consecutive failures without a byte of progress, and all retries;
    // when the first of those consecutive failures came (for the deadline).
    let mut failures = 0u32;
    let mut retries = 0u32;
    let mut first_failure: Option<std::time::Instant> = None;
    loop {
        let pos = range.start + buf.len() as u64;
        let before = buf.len();
        stats.requests.fetch_add(1, Relaxed);
        let options = GetOptions {
            range: Some(GetRange::Bounded(pos..range.end)),
            ..GetOptions::default()
        };
        // Each wait (for the response, then for each piece of body) is timed
        // on its own: a slow but moving transfer is never cut.
        let failure: Failure =
            match tokio::time::timeout(opts.request_timeout, store.get_opts(path, options)).await {
                Err(_) => {
                    stats.timeouts.fetch_add(1, Relaxed);
                    Failure::transient(format!("no response within {:?}", opts.request_timeout))
                }
                Ok(Err(e)) => Failure::from_store(e),
                Ok(Ok(result)) => {
                    same_version(job, result.meta.e_tag.as_deref(), pos)?;
                    let mut body = result.into_stream();
                    loop {
                        match tokio::time::timeout(opts.request_timeout, body.next()).await {
                            Err(_) => {
                                stats.timeouts.fetch_add(1, Relaxed);
                                break Failure::transient(format!(
                                    "no data for {:?} (stalled)",
                                    opts.request_timeout
                                ));
                            }
                            Ok(None) => {
                                break Failure::transient(format!(
                                    "response ended after {} of {len} bytes",
                                    buf.len()
                                ));
                            }
                            Ok(Some(Err(e))) => break Failure::from_store(e),
                            Ok(Some(Ok(piece))) => {
                                let room = len - buf.len();
                                let take = piece.len().min(room);
                                buf.extend_from_slice(&piece[..take]);
                                stats.bytes.fetch_add(take as u64, Relaxed);
                                if buf.len() == len {
                                    stats.chunks.fetch_add(1, Relaxed);
                                    let chunk = Bytes::from(buf);
                                    job.keep(&chunk);
                                    return Ok(chunk);
                                }
                            }
                        }
                    }
                }
            };
        let at = range.start + buf.len() as u64;
        if buf.len() > before {
            failures = 0;
            first_failure = None;
        }
        let first = *first_failure.get_or_insert_with(std::time::Instant::now);
        let Failure {
            class,
            message,
            source,
            retry_after,
        } = failure;
        let message = match class {
            Class::NotFound => format!("the object is gone: {message}"),
            class if !class.retryable(opts) || failures >= opts.max_retries => message,
            _ => {
                let wait = wait_before_retry(opts, failures + 1, retry_after);
                if within_deadline(opts, first, wait) {
                    failures += 1;
                    retries += 1;
                    stats.retries.fetch_add(1, Relaxed);
                    log_retry(&job.url, Some(at), failures, wait, &message);
                    tokio::time::sleep(wait).await;
                    continue;
                }
                past_deadline(opts, message)
            }
        };
        return Err(SourceError::Read {
            url: job.url.clone(),
            offset: at,
            message,
            retries,
            source,
        });
    }
}

#[cfg(feature = "cloud")]
impl Job {
    /// A buffer with room for `len` bytes: a released chunk of this stream
    /// if there is one, else new memory.
    fn buffer(&self, len: usize) -> Vec<u8> {
        let mut ring = self.buffers.lock().unwrap_or_else(|e| e.into_inner());
        match ring.reuse(len) {
            Some(mut buf) => {
                buf.clear();
                buf
            }
            None => {
                self.stats.buffers.fetch_add(1, Relaxed);
                let buf = Vec::with_capacity(len);
                huge_pages(&buf);
                buf
            }
        }
    }

    /// Remembers `chunk`, handed out, to fill again once it is released.
    fn keep(&self, chunk: &Bytes) {
        let mut ring = self.buffers.lock().unwrap_or_else(|e| e.into_inner());
        ring.keep(chunk);
    }
}

/// Asks Linux to back `buf`'s capacity with 2 MiB pages where it can (a
/// hint: contents and safety are unchanged). A fresh chunk buffer is
/// filled once from the network; in 4 KiB pages that is 2 048 page faults
/// per 8 MiB.
#[cfg(all(feature = "cloud", target_os = "linux"))]
fn huge_pages(buf: &Vec<u8>) {
    const HUGE: usize = 2 << 20;
    if buf.capacity() < 2 * HUGE {
        return;
    }
    let start = buf.as_ptr() as usize;
    let end = start + buf.capacity();
    let first = start.next_multiple_of(HUGE);
    let last = end / HUGE * HUGE;
    if last > first {
        // SAFETY: madvise only advises on how to back memory this Vec owns
        // (whole pages inside its allocation); MADV_HUGEPAGE never changes
        // its contents or its mapping's validity. A failure is harmless.
        unsafe {
            libc::madvise(
                first as *mut libc::c_void,
                last - first,
                libc::MADV_HUGEPAGE,
            );
        }
    }
}

#[cfg(all(feature = "cloud", not(target_os = "linux")))]
fn huge_pages(_buf: &Vec<u8>) {}

/// Checks that a response at `offset` comes from the version of the object
/// the shard's first response came from (the first one sets it). Stores
/// that send no ETag are not checked.
#[cfg(feature = "cloud")]
fn same_version(job: &Job, etag: Option<&str>, offset: u64) -> Result<(), SourceError> {
    let Some(now) = etag else {
        return Ok(());
    };
    let mut version = job.version.lock().unwrap_or_else(|e| e.into_inner());
    match version.as_deref() {
        None => {
            *version = Some(now.to_owned());
            Ok(())
        }
        Some(first) if first == now => Ok(()),
        Some(first) => Err(SourceError::Changed {
            url: job.url.clone(),
            offset,
            first: first.to_owned(),
            now: now.to_owned(),
        }),
    }
}
