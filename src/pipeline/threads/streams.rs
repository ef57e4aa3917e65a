//! The streams thread (`infeed-streams`): joins the groups of a host's
//! logical streams step by step. Each stream's record thread cuts its own
//! share of every batch's rows; step `t`'s batch is their `t`-th groups
//! concatenated in stream order, so the rows of a step across all hosts are
//! the same whatever the host count. Runs only when a host runs more than
//! one stream (`Pipeline::streams`).
//!
//! It owns the record threads' handles: a stream whose channel closes has
//! either ended or panicked (in a user's record map or filter), and only
//! the join tells which. A panic ends the run with an error at once; taken
//! for an end, it would leave every later step short of that stream's rows.

use std::sync::Arc;
use std::thread::JoinHandle;

use crossbeam_channel::Receiver;

use crate::pipeline::checkpoint::{Snapshot, StreamSnapshot};
use crate::pipeline::group::raw_batch::{GroupLayout, Packed, RawBatch};

use super::affinity::CpuAffinity;
use super::panic_message;
use super::window::Entry;
use super::workers::Delivery;
use crate::pipeline::error::PipelineError;

/// One logical stream as the streams thread sees it.
pub(crate) struct StreamInput {
    pub rx: Receiver<Delivery<RawBatch>>,
    /// Where the stream's file indexes start in the host's file list.
    pub first_file: u32,
    /// The stream's state before its first group (a restore's, or the start).
    pub initial: StreamSnapshot,
    /// Its record thread, joined when its channel closes.
    pub thread: Option<JoinHandle<()>>,
}

/// A host's logical streams, as the streams thread owns them. Dropped, it
/// closes every stream's channel first, so record threads still sending
/// end, then joins their threads: at the streams thread's end, or, where a
/// record thread or the streams thread could not start, in the thread that
/// tried.
pub(crate) struct Streams(pub Vec<StreamInput>);

impl Drop for Streams {
    fn drop(&mut self) {
        // Collected first: every receiver is dropped before the first join.
        let threads: Vec<_> = self.0.drain(..).filter_map(|i| i.thread).collect();
        for thread in threads {
            let _ = thread.join();
        }
    }
}

/// Starts the streams thread. When it cannot start, `inputs` go with its
/// closure: their record threads are stopped and joined.
pub(crate) fn spawn(
    inputs: Streams,
    files: Arc<Vec<String>>,
    tx: Entry,
    affinity: CpuAffinity,
) -> Result<JoinHandle<()>, PipelineError> {
    super::spawn("infeed-streams", move || {
        affinity.apply();
        let mut inputs = inputs;
        run(&mut inputs.0, &files, &tx);
        drop(inputs);
    })
}

fn run(inputs: &mut [StreamInput], files: &Arc<Vec<String>>, tx: &Entry) {
    let mut last: Vec<StreamSnapshot> = inputs.iter().map(|i| i.initial.clone()).collect();
    let mut open: Vec<bool> = vec![true; inputs.len()];
    for seq in 0u64.. {
        let mut joined: Option<RawBatch> = None;
        for (j, input) in inputs.iter_mut().enumerate() {
            if !open[j] {
                continue;
            }
            // A stream that ended (its channel closed) gives no more rows;
            // its last state stays in every later snapshot.
            let Ok((_, delivery)) = input.rx.recv() else {
                open[j] = false;
                if let Some(Err(payload)) = input.thread.take().map(JoinHandle::join) {
                    let _ = tx.send((seq, Err(PipelineError::Worker(panic_message(&*payload)))));
                    return;
                }
                continue;
            };
            let (raw, snapshot) = match delivery {
                Ok(x) => x,
                Err(e) => {
                    let _ = tx.send((seq, Err(e)));
                    return;
                }
            };
            if let Some(stream) = snapshot.streams.first() {
                last[j] = stream.clone();
            }
            join(&mut joined, raw, j, input.first_file, files);
        }
        let Some(raw) = joined else {
            return;
        };
        let snapshot = Snapshot {
            streams: last.clone(),
        };
        if tx.send((seq, Ok((raw, Arc::new(snapshot))))).is_err() {
            return;
        }
    }
}

/// Appends the group of the host's `stream`-th stream to the step's batch,
/// its file indexes moved to the host's file list.
fn join(
    joined: &mut Option<RawBatch>,
    raw: RawBatch,
    stream: usize,
    first_file: u32,
    files: &Arc<Vec<String>>,
) {
    let batch = joined.get_or_insert_with(|| RawBatch {
        number: raw.number,
        items: Vec::new(),
        files: files.clone(),
        layout: GroupLayout::Rows,
        starts: 0,
    });
    let records_before = batch.items.len();
    batch.starts += raw.starts;
    batch.items.extend(raw.items.into_iter().map(|mut item| {
        item.file += first_file;
        item
    }));
    batch.layout = match (std::mem::take(&mut batch.layout), raw.layout) {
        // Every stream follows the same schedule, so their rows agree; a
        // stream at the end of its input may pad to a longer bucket.
        (GroupLayout::Bucket { rows, length }, GroupLayout::Bucket { rows: r, length: l }) => {
            GroupLayout::Bucket {
                rows: rows.max(r),
                length: length.max(l),
            }
        }
        (mine, GroupLayout::Pack(packed)) => {
            GroupLayout::Pack(add_packed(mine, packed, records_before, stream))
        }
        // An empty group (a stream padding to its batch count) has plain
        // rows and takes the others' layout.
        (GroupLayout::Rows, other) => other,
        (mine, _) => mine,
    };
}

/// Joins a stream's packed group to the batch's: its records go into the
/// stream's own rows, from `stream * stream_rows` on, whatever the rows the
/// streams before it used, so that a stream's rows sit at the same place of
/// the global batch on any host count.
fn add_packed(mine: GroupLayout, packed: Packed, records_before: usize, stream: usize) -> Packed {
    let mut joined = match mine {
        GroupLayout::Pack(p) => p,
        _ => Packed {
            stream_rows: packed.stream_rows,
            ..Packed::default()
        },
    };
    let first_row = stream * packed.stream_rows;
    if first_row > 0 && !packed.parts.is_empty() {
        joined.fences.push((records_before, first_row));
    }
    joined.parts.extend(packed.parts);
    if packed.rows > 0 {
        joined.rows = first_row + packed.rows;
    }
    joined
}
