//! Packing: records laid end to end into `batch_size` rows of `row_length`
//! by the [`PackRule`] (first fit, best fit or concat-split, in arrival
//! order), a long record split across rows under `Overflow::Split` (and
//! any record at a row's end under concat-split). The records of the open batch are the replay list of
//! the checkpoint, with the values of the first already packed.

use std::ops::Range;

use crate::batch::{BatchError, BatchErrorKind, Overflow, PackRule, RowPlanner, kept_span};
use crate::pipeline::error::PipelineError;
use crate::pipeline::error::StateError;
use crate::pipeline::item::Item;

use super::{Emitted, compact};

use super::raw_batch::{GroupLayout, Packed};

/// Plans packed rows.
pub(crate) struct PackGrouper {
    planner: RowPlanner,
    row_length: usize,
    overflow: Overflow,
    feature: String,
    drop_remainder: bool,
    /// Rows of a batch.
    batch_size: usize,
    /// The open batch: records and the part of each it holds.
    current: Vec<(Item, Range<usize>)>,
    /// Records with no values to pack, left out.
    pub empties: u64,
    /// A record may be cut into pieces of a row each (`Overflow::Split`),
    /// each of which may open a row.
    pieces: bool,
}

impl PackGrouper {
    pub fn new(
        row_length: usize,
        batch_size: usize,
        overflow: Overflow,
        rule: PackRule,
        feature: &str,
        drop_remainder: bool,
    ) -> Self {
        PackGrouper {
            planner: RowPlanner::new(row_length, batch_size, rule),
            row_length,
            overflow,
            feature: feature.to_owned(),
            drop_remainder,
            batch_size,
            current: Vec::new(),
            empties: 0,
            // Concat-split cuts a record kept within a row at most once,
            // at the last row's end: the rest opens one row.
            pieces: overflow == Overflow::Split,
        }
    }

    /// Records it can take with none cutting the open batch: each record
    /// is placed whole and opens at most one row, so the rows the batch
    /// has left (1 where a record may open several).
    pub fn room(&self) -> usize {
        match self.pieces {
            false => self.batch_size - self.planner.rows(),
            true => 1,
        }
    }

    /// Adds a record of `len` values (`skip` of them already packed).
    pub fn push(
        &mut self,
        item: Item,
        len: usize,
        skip: usize,
        out: &mut Vec<Emitted>,
    ) -> Result<(), PipelineError> {
        let row_length = self.row_length;
        let Some((_, keep)) = kept_span(len, row_length, self.overflow) else {
            return Err(PipelineError::Batch {
                path: String::new(),
                offset: item.offset,
                at: None,
                error: BatchError {
                    record: None,
                    feature: Some(self.feature.clone()),
                    kind: BatchErrorKind::TooLong {
                        length: len,
                        limit: row_length,
                    },
                },
            });
        };
        if skip > 0 && skip >= keep {
            // A restored state said more values were packed than it has.
            return Err(StateError::Invalid {
                field: "packed values",
                value: skip as u64,
                reason: format!("the record at byte {} has {keep} to pack", item.offset),
            }
            .into());
        }
        // Empty sequences take no room (the packer leaves them out).
        if keep == 0 {
            self.empties += 1;
            return Ok(());
        }
        let item = compact(item);
        let (mut done, mut part_start) = (skip, skip);
        while done < keep {
            let rows_before = self.planner.rows();
            let placed = self.planner.place((keep - done).min(row_length));
            if placed.closed {
                if done > part_start {
                    self.current.push((item.clone(), part_start..done));
                    part_start = done;
                }
                // The next batch takes about as many records.
                let next = Vec::with_capacity(self.current.len());
                let entries = std::mem::replace(&mut self.current, next);
                let (items, parts) = entries.into_iter().unzip();
                out.push(Emitted {
                    items,
                    layout: GroupLayout::Pack(Packed {
                        parts,
                        rows: rows_before,
                        stream_rows: self.batch_size,
                        fences: Vec::new(),
                    }),
                    // This record goes on in the new batch.
                    replay: vec![(item.file, item.offset)].into(),
                    replay_skip: done as u64,
                    replay_quiet: false,
                });
            }
            done += placed.len;
        }
        self.current.push((item, part_start..keep));
        Ok(())
    }

    /// The open batch at the end of the input, unless dropped.
    pub fn finish_one(&mut self) -> Option<Emitted> {
        let rows = self.planner.rows();
        self.planner.finish();
        let entries = std::mem::take(&mut self.current);
        if entries.is_empty() || self.drop_remainder {
            return None;
        }
        let (items, parts) = entries.into_iter().unzip();
        let layout = GroupLayout::Pack(Packed {
            parts,
            rows,
            stream_rows: self.batch_size,
            fences: Vec::new(),
        });
        Some(Emitted::plain(items, layout))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::PackStrategy;
    use bytes::Bytes;

    /// `room` records, whatever their lengths within a row, cut no batch;
    /// where a record may be cut over several rows, one at a time.
    #[test]
    fn room_records_cut_no_batch() {
        let strategies = [
            PackStrategy::FirstFit,
            PackStrategy::BestFit,
            PackStrategy::ConcatSplit,
        ];
        for strategy in strategies {
            let rule = PackRule {
                strategy,
                max_segments: Some(3),
            };
            let mut g = PackGrouper::new(10, 4, Overflow::KeepStart, rule, "ids", false);
            let mut out = Vec::new();
            // Lengths 0 to 14: empty ones take no room, long ones are cut
            // to a row.
            let mut lens = (0..2000u64).map(|i| (i * 7919 % 15) as usize);
            let mut pushed = 0;
            let mut push = |g: &mut PackGrouper, out: &mut Vec<Emitted>| {
                let Some(len) = lens.next() else {
                    return false;
                };
                let item = Item::new(Bytes::new(), 0, pushed);
                g.push(item, len, 0, out).unwrap();
                pushed += 1;
                true
            };
            let (mut runs, mut cuts) = (0, 0);
            'records: loop {
                let room = g.room();
                assert!(room <= 4, "{room}");
                // A full batch's next record may cut it.
                if room == 0 {
                    if !push(&mut g, &mut out) {
                        break;
                    }
                    cuts += out.len();
                    out.clear();
                    continue;
                }
                runs += 1;
                for _ in 0..room {
                    if !push(&mut g, &mut out) {
                        break 'records;
                    }
                    assert!(out.is_empty(), "{strategy:?}: a batch cut within {room}");
                }
            }
            assert!(runs > 100 && cuts > 100, "{runs} runs, {cuts} batches");
        }
    }

    #[test]
    fn a_record_cut_over_rows_is_taken_one_at_a_time() {
        for strategy in [PackStrategy::FirstFit, PackStrategy::ConcatSplit] {
            let rule = PackRule {
                strategy,
                max_segments: None,
            };
            let split = PackGrouper::new(10, 4, Overflow::Split, rule, "ids", false);
            assert_eq!(split.room(), 1);
        }
    }
}
