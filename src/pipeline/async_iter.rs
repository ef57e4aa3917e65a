//! The async face: a `futures::Stream` of batches for tokio programs.
//!
//! A forwarding thread pulls from the blocking [`Batches`] and hands each
//! batch, with the state after it, through a one-slot tokio channel, so the
//! executor never blocks and the pipeline's threads stay off it.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::thread::JoinHandle;

use futures::Stream;
use tokio::sync::mpsc;

use super::batches::Batches;
use super::checkpoint;
use super::checkpoint::Snapshot;
use super::error::PipelineError;
use super::skip_steps::SkipSteps;
use super::threads::spawn;

type Item<T> = Result<(T, Arc<Snapshot>, u64), PipelineError>;

/// Batches as an async stream; see [`Batches::into_stream`].
pub struct BatchStream<T> {
    rx: mpsc::Receiver<Item<T>>,
    last: Option<(Arc<Snapshot>, u64)>,
    initial: Vec<u8>,
    /// The job's logical streams and the steps it leaves out (for its
    /// states).
    streams: u32,
    skip: SkipSteps,
    thread: Option<JoinHandle<()>>,
}

impl<T: Send + 'static> Batches<T> {
    /// Turns the pipeline into an async stream of batches.
    ///
    /// The batches come from a thread of their own (`infeed-async`). If
    /// the system refuses to start it, the pipeline is stopped and the
    /// stream yields [`PipelineError::Spawn`] as its first item, then ends.
    pub fn into_stream(mut self) -> BatchStream<T> {
        let (tx, rx) = mpsc::channel(1);
        let initial = self.state();
        let streams = self.streams;
        let skip = self.skip.clone();
        // Refused, the closure is dropped with the pipeline, whose drop
        // stops and joins its threads.
        let spawned = spawn("infeed-async", move || {
            loop {
                let item = match self.next_batch() {
                    Ok(None) => return,
                    Ok(Some(batch)) => {
                        let state = self.last_state_arc();
                        Ok((batch, state, self.batches_delivered()))
                    }
                    Err(e) => Err(e),
                };
                let stop = item.is_err();
                if tx.blocking_send(item).is_err() || stop {
                    return;
                }
            }
        });
        let (rx, thread) = match spawned {
            Ok(thread) => (rx, Some(thread)),
            Err(e) => {
                let (tx, rx) = mpsc::channel(1);
                // Room for it: the channel is new.
                let _ = tx.try_send(Err(e));
                (rx, None)
            }
        };
        BatchStream {
            rx,
            last: None,
            initial,
            streams,
            skip,
            thread,
        }
    }
}

impl<T> BatchStream<T> {
    /// The state after the last batch this stream yielded (see
    /// [`Batches::state`]).
    pub fn state(&self) -> Vec<u8> {
        match &self.last {
            Some((s, delivered)) => checkpoint::encode(s, *delivered, self.streams, &self.skip),
            None => self.initial.clone(),
        }
    }
}

impl<T> Stream for BatchStream<T> {
    type Item = Result<T, PipelineError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        match self.rx.poll_recv(cx) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(None) => Poll::Ready(None),
            Poll::Ready(Some(Err(e))) => Poll::Ready(Some(Err(e))),
            Poll::Ready(Some(Ok((batch, s, delivered)))) => {
                self.last = Some((s, delivered));
                Poll::Ready(Some(Ok(batch)))
            }
        }
    }
}

impl<T> Drop for BatchStream<T> {
    fn drop(&mut self) {
        // Closing the channel makes the forwarding thread's next send fail.
        self.rx.close();
        while self.rx.try_recv().is_ok() {}
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}
