//! `records_of(steps)`: the records of given global steps — every host's
//! rows of the job, host 0's first, in global-batch order — found on one
//! machine from the pipeline of any host, from its state (or the start).
//!
//! Each of the job's logical streams runs its own record thread, exactly
//! as on its host (the same grouping, replay of the state's waiting
//! records, prefilter and batch count), but nothing is parsed or assembled:
//! the groups it cuts up to the last step asked for are read for their
//! records' positions, then the threads are stopped. A packed group's rows
//! are planned again from its parts by the packer's rule on lengths.

use std::collections::BTreeMap;

use crossbeam_channel::bounded;

use crate::batch::{PackRule, RowPlanner};

use super::error::PipelineError;
use super::group::grouping::{Grouping, RecordWork};
use super::group::raw_batch::{GroupLayout, RawBatch};
use super::settings::RecordSettings;
use super::start::plan;
use super::stats::StreamCounters;
use super::threads::record_thread;
use super::threads::window::Entry;

/// One row's records: (file, byte offset) of each; empty for padding.
pub type RowRecords = Vec<(String, u64)>;

/// The rows of each of `steps` (global step numbers, counted from the
/// start of the run), from `p`'s state or its start.
pub(crate) fn records_of(
    p: &RecordSettings,
    record: RecordWork,
    steps: &[u64],
) -> Result<BTreeMap<u64, Vec<RowRecords>>, PipelineError> {
    let mut planned = plan(p, record)?;
    let first = planned.resume.batches_before;
    if let Some(&early) = steps.iter().find(|&&s| s < first) {
        return Err(PipelineError::Config(format!(
            "records_of: step {early} came before the state (taken after step {}): give \
             an earlier state, or none to start from the beginning",
            first.saturating_sub(1)
        )));
    }
    let Some(&last) = steps.iter().max() else {
        return Ok(BTreeMap::new());
    };
    let streams = planned.job.streams;
    let counters = StreamCounters::default();
    let stats = counters.stream.clone();
    let threads = planned.open(0..streams, &counters)?.threads;
    let grouping = planned.record.grouping.clone();
    let mut out: BTreeMap<u64, Vec<Vec<RowRecords>>> = steps
        .iter()
        .map(|&s| (s, vec![Vec::new(); streams as usize]))
        .collect();
    // The last step any stream delivered.
    let mut reached: Option<u64> = None;
    for (stream, thread) in threads.into_iter().enumerate() {
        let (tx, rx) = bounded(2);
        let handle =
            record_thread::spawn(thread, Entry::open(tx), stats.clone(), Default::default())?;
        for (seq, delivered) in rx.iter() {
            let step = first + seq;
            if step > last {
                break;
            }
            let (raw, _) = delivered?;
            reached = reached.max(Some(step));
            if let Some(rows) = out.get_mut(&step) {
                rows[stream] = rows_of(&raw, &grouping);
            }
        }
        // Dropping the receiver ends the thread at its next send.
        drop(rx);
        let _ = handle.join();
    }
    if reached.is_none_or(|r| r < last) {
        let ends = match reached {
            Some(r) => format!("its last step is {r}"),
            None => format!("it has no step from {first} on"),
        };
        return Err(PipelineError::Config(format!(
            "records_of: step {last} is past the end of the run: {ends}"
        )));
    }
    Ok(out
        .into_iter()
        .map(|(step, per_stream)| {
            let width = per_stream.iter().map(Vec::len).max().unwrap_or(0);
            // A stream that ran out: its rows are padding.
            let rows = per_stream
                .into_iter()
                .flat_map(|mut rows| {
                    rows.resize(width, Vec::new());
                    rows
                })
                .collect();
            (step, rows)
        })
        .collect())
}

/// The rows of one stream's group, as its worker lays them out.
fn rows_of(raw: &RawBatch, grouping: &Grouping) -> Vec<RowRecords> {
    let at = |i: usize| {
        let item = &raw.items[i];
        (
            raw.files
                .get(item.file as usize)
                .cloned()
                .unwrap_or_default(),
            item.offset,
        )
    };
    let records = raw.len();
    match (&raw.layout, grouping) {
        (
            GroupLayout::Pack(packed),
            Grouping::Pack {
                row_length, rule, ..
            },
        ) => pack_rows(
            packed.parts.as_slice(),
            packed.stream_rows,
            *row_length,
            *rule,
        )
        .into_iter()
        .map(|row| row.into_iter().map(at).collect())
        .collect(),
        (layout, grouping) => {
            let rows = match (layout, grouping) {
                (GroupLayout::Bucket { rows, .. }, Grouping::Bucket { bucketer, .. })
                | (GroupLayout::Bucket { rows, .. }, Grouping::Scheduled { bucketer, .. }) => {
                    bucketer.batch_size(*rows)
                }
                (_, Grouping::Rows { batch_size, .. }) => *batch_size,
                _ => records,
            };
            (0..rows.max(records))
                .map(|i| if i < records { vec![at(i)] } else { Vec::new() })
                .collect()
        }
    }
}

/// The records of each of `rows` packed rows, placing the parts' pieces
/// as the packer does.
fn pack_rows(
    parts: &[std::ops::Range<usize>],
    rows: usize,
    row_length: usize,
    rule: PackRule,
) -> Vec<Vec<usize>> {
    let mut planner = RowPlanner::new(row_length, rows, rule);
    let mut out = vec![Vec::new(); rows];
    for (record, part) in parts.iter().enumerate() {
        let mut done = part.start;
        while done < part.end {
            let placed = planner.place((part.end - done).min(row_length));
            if let Some(row) = out.get_mut(placed.row)
                && row.last() != Some(&record)
            {
                row.push(record);
            }
            done += placed.len;
        }
    }
    out
}
