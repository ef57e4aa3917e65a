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

use crossbeam_channel::{Receiver, Sender};

use crate::pipeline::checkpoint::{Snapshot, StreamSnapshot};
use crate::pipeline::group::raw_batch::{Layout, RawBatch};

use super::panic_message;
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

/// Starts the streams thread.
pub(crate) fn spawn(
    inputs: Vec<StreamInput>,
    files: Arc<Vec<String>>,
    tx: Sender<Delivery<RawBatch>>,
) -> std::thread::JoinHandle<()> {
    std::thread::Builder::new()
        .name("infeed-streams".into())
        .spawn(move || {
            let mut inputs = inputs;
            run(&mut inputs, &files, &tx);
            // Close every channel first, so record threads still sending
            // end, then wait for them.
            let threads: Vec<_> = inputs.into_iter().filter_map(|i| i.thread).collect();
            for thread in threads {
                let _ = thread.join();
            }
        })
        .expect("spawn the streams thread")
}

fn run(inputs: &mut [StreamInput], files: &Arc<Vec<String>>, tx: &Sender<Delivery<RawBatch>>) {
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
            join(&mut joined, raw, input.first_file, files);
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

/// Appends a stream's group to the step's batch, its file indexes moved to
/// the host's file list.
fn join(joined: &mut Option<RawBatch>, raw: RawBatch, first_file: u32, files: &Arc<Vec<String>>) {
    let provenance = raw
        .provenance
        .iter()
        .map(|&(file, offset)| (file + first_file, offset));
    match joined {
        None => {
            *joined = Some(RawBatch {
                number: raw.number,
                provenance: provenance.collect(),
                records: raw.records,
                files: files.clone(),
                layout: raw.layout,
            });
        }
        Some(batch) => {
            batch.records.extend(raw.records);
            batch.provenance.extend(provenance);
            // Every stream follows the same schedule, so their buckets
            // agree; an empty group (a stream padding to its batch count)
            // has plain rows and takes the others' layout.
            batch.layout = match (&batch.layout, raw.layout) {
                (Layout::Bucket(a), Layout::Bucket(b)) => Layout::Bucket((*a).max(b)),
                (Layout::Rows, other) => other,
                (mine, _) => mine.clone(),
            };
        }
    }
}
