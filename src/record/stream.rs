//! The asynchronous reader: records from a stream of `Bytes` chunks (as
//! object_store returns them) or from a tokio `AsyncRead`.
//!
//! Framing, CRC and decompression run inside `poll_next`, one chunk at a
//! time; for heavy loads the pipeline runs a [`super::Deframer`] on a worker
//! pool instead.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::{Bytes, BytesMut};
use futures::Stream;
use tokio::io::{AsyncRead, AsyncReadExt};

use super::compression::Compression;
use super::deframe::Record;
use super::error::RecordError;
use super::options::{ReadOptions, SkipReport};
use super::read_core::{ReadCore, Step};

/// A `Stream` of records read from a stream of raw `Bytes` chunks.
///
/// After the first error the stream ends. I/O errors from the chunk stream
/// end it with [`super::ErrorKind::Io`].
pub struct RecordStream<S> {
    chunks: S,
    core: ReadCore,
    ended: bool,
}

impl<S: Stream<Item = io::Result<Bytes>> + Unpin> RecordStream<S> {
    /// Records from `chunks`, compressed with `compression`. `path` names the
    /// source in errors; `opts.compression` is ignored.
    pub fn new(
        chunks: S,
        path: impl Into<String>,
        compression: Compression,
        opts: &ReadOptions,
    ) -> Self {
        RecordStream {
            chunks,
            core: ReadCore::new(path.into(), Some(compression), opts),
            ended: false,
        }
    }

    /// Like [`RecordStream::new`], but detects the compression from `path`
    /// and the first bytes when `opts.compression` is `None`.
    pub fn with_options(chunks: S, path: impl Into<String>, opts: &ReadOptions) -> Self {
        RecordStream {
            chunks,
            core: ReadCore::new(path.into(), opts.compression, opts),
            ended: false,
        }
    }

    /// What the skip policy has skipped so far (complete once the stream ends).
    pub fn skipped(&self) -> &SkipReport {
        self.core.skipped()
    }

    /// The compression being read; `None` while still undetected.
    pub fn compression(&self) -> Option<Compression> {
        self.core.compression()
    }

    /// The name used in errors.
    pub fn path(&self) -> &str {
        self.core.path()
    }

    /// Raw (as stored, possibly compressed) bytes received so far.
    pub fn bytes_read(&self) -> u64 {
        self.core.raw_offset()
    }
}

impl<S: Stream<Item = io::Result<Bytes>> + Unpin> Stream for RecordStream<S> {
    type Item = Result<Record, RecordError>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        if this.ended {
            return Poll::Ready(None);
        }
        loop {
            match this.core.step() {
                Step::Record(r) => return Poll::Ready(Some(Ok(r))),
                Step::Error(e) => {
                    this.ended = true;
                    return Poll::Ready(Some(Err(e)));
                }
                Step::Done => {
                    this.ended = true;
                    return Poll::Ready(None);
                }
                Step::NeedInput => match Pin::new(&mut this.chunks).poll_next(cx) {
                    Poll::Pending => return Poll::Pending,
                    Poll::Ready(Some(Ok(chunk))) => this.core.on_chunk(chunk),
                    Poll::Ready(Some(Err(e))) => {
                        this.ended = true;
                        return Poll::Ready(Some(Err(this.core.on_io_error(&e))));
                    }
                    Poll::Ready(None) => this.core.on_eof(),
                },
            }
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        if self.ended { (0, Some(0)) } else { (0, None) }
    }
}

impl<S> std::fmt::Debug for RecordStream<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RecordStream")
            .field("path", &self.core.path())
            .finish_non_exhaustive()
    }
}

/// Turns a tokio `AsyncRead` into a stream of `chunk_size`-byte `Bytes`
/// chunks (fewer only at the end), each in a fresh buffer so records can be
/// sliced out of it without copying.
pub fn async_read_chunks<R: AsyncRead + Unpin>(
    reader: R,
    chunk_size: usize,
) -> impl Stream<Item = io::Result<Bytes>> + Unpin {
    let chunk_size = chunk_size.max(1);
    Box::pin(futures::stream::try_unfold(
        Some(reader),
        move |reader| async move {
            let Some(mut reader) = reader else {
                return Ok(None);
            };
            let mut buf = BytesMut::with_capacity(chunk_size);
            while buf.len() < chunk_size {
                let mut limited = (&mut reader).take((chunk_size - buf.len()) as u64);
                if limited.read_buf(&mut buf).await? == 0 {
                    // End of input: hand out what was read, then stop.
                    return Ok((!buf.is_empty()).then(|| (buf.freeze(), None)));
                }
            }
            Ok(Some((buf.freeze(), Some(reader))))
        },
    ))
}

/// Records from a tokio `AsyncRead` (a `tokio::fs::File`, a socket, …),
/// read in `opts.chunk_size` chunks. `opts.compression` is ignored; use
/// [`RecordStream::with_options`] over [`async_read_chunks`] to detect it.
pub fn stream_async_read<R: AsyncRead + Unpin>(
    reader: R,
    path: impl Into<String>,
    compression: Compression,
    opts: &ReadOptions,
) -> RecordStream<impl Stream<Item = io::Result<Bytes>> + Unpin> {
    RecordStream::new(
        async_read_chunks(reader, opts.effective_chunk_size()),
        path,
        compression,
        opts,
    )
}
