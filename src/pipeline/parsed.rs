//! The steps on parsed batches behind one trait, [`ParsedStep`]: map,
//! filter and tokenize on the parsed columns, the spec's images decoded
//! after them (`images.rs`), normalize and inputs/targets on the assembled
//! batch; and picking rows out of a parsed batch.
//!
//! The steps run on the worker pool, on whole parsed batches. A filter decides
//! which records reach the output batches, so it runs before grouping: a
//! pool of prefilter threads parses chunks of records and runs the ops, the
//! record thread groups the survivors in order (see [`group`](super::group)),
//! and the workers parse each group again and run the maps on it (then
//! decode its images) before assembly. Batches therefore stay full and
//! static in shape, and the output is the same for any number of threads.

use std::sync::{Arc, Mutex};

use super::checkpoint::Identity;
use super::error::PipelineError;
use super::group::raw_batch::RawBatch;
use crate::batch::{Batch, BatchShape, BufferPool};
use crate::example::{BytesValues, Column, ParsedBatch, Values};
use crate::source::SourceOptions;
use crate::spec::FeatureSpec;

/// Parsed batches the consumer gave back
/// ([`Batches::recycle`](super::Batches::recycle)), whose column buffers the
/// workers parse the next batches into, as batch buffers are pooled. Columns
/// handed over cost fresh pages otherwise: the allocator gives a freed
/// half-MiB column back to the system and the next batch faults in new
/// pages (about half the CPU of a parse-only lm pipeline here).
pub(crate) struct ColumnPool {
    spare: Mutex<Vec<ParsedBatch>>,
    max: usize,
}

impl ColumnPool {
    /// A pool that keeps up to `max` batches given back.
    pub fn new(max: usize) -> Arc<Self> {
        Arc::new(ColumnPool {
            spare: Mutex::new(Vec::with_capacity(max)),
            max,
        })
    }

    /// A batch given back (to parse into, reusing its columns), or an empty
    /// one.
    pub fn take(&self) -> ParsedBatch {
        let taken = self.spare.lock().unwrap_or_else(|e| e.into_inner()).pop();
        taken.unwrap_or(ParsedBatch {
            num_records: 0,
            columns: Vec::new(),
        })
    }

    /// Keeps `batch` for a later [`take`](Self::take), or frees it when
    /// the pool is full.
    pub fn give(&self, batch: ParsedBatch) {
        let mut spare = self.spare.lock().unwrap_or_else(|e| e.into_inner());
        if spare.len() < self.max {
            spare.push(batch);
        }
    }

    /// Batches kept now.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.spare.lock().unwrap_or_else(|e| e.into_inner()).len()
    }
}

/// The error a [`ParsedMap`] may return.
pub type MapError = Box<dyn std::error::Error + Send + Sync>;

/// A map on parsed batches: it must keep the number of records, treat each
/// record independently of the others in the batch, and be deterministic —
/// the pipeline may run it on different groupings of the same records (once
/// to filter or measure, again to assemble; again after a restore).
pub type ParsedMap = Arc<dyn Fn(ParsedBatch) -> Result<ParsedBatch, MapError> + Send + Sync>;

/// A filter on parsed records: `keep(batch, row)` decides record `row` of
/// `batch`. It must depend on that record alone and be deterministic.
pub type RowFilter = Arc<dyn Fn(&ParsedBatch, usize) -> bool + Send + Sync>;

/// The pass a column step runs in: the prefilter's (records measured or
/// filtered before they are grouped) or the workers' (a group assembled).
/// A tokenize keeps the ids it makes in the first for the second.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Pass {
    Prefilter,
    Workers,
}

/// Where a step on parsed batches runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Stage {
    /// On the parsed columns, before grouping decides (map, filter,
    /// tokenize): a filter decides which records are grouped, a map the
    /// lengths they are grouped by.
    Columns,
    /// On the workers' parsed batch, after the column steps, given the
    /// group it was parsed from (its records' files and offsets, its
    /// number): the spec's images decoded. It may leave records out, so
    /// the workers parse before they assemble (no direct assembly).
    Decoded,
    /// On the assembled batch, after padding or packing (normalize,
    /// inputs_targets): it moves no record.
    Assembled,
}

/// A step on parsed batches, run in order within its [`Stage`]: the
/// builder's in builder order, the spec's own (its images decoded) made
/// when the workers start. What the batching code asks of it — the spec it
/// leaves, the shape it makes, its part of the fingerprint, its work, the
/// rows it left out — so that no step is spelled there.
pub(crate) trait ParsedStep: Send + Sync {
    fn stage(&self) -> Stage;

    /// A later step of the same slot replaces an earlier one (one
    /// `normalize` per feature, one `inputs_targets`); `None`: every call
    /// adds a step.
    fn slot(&self) -> Option<String> {
        None
    }

    /// Reads what it needs once per pipeline (a tokenizer), before any
    /// batch.
    fn load(&self, _source: &SourceOptions) -> Result<(), PipelineError> {
        Ok(())
    }

    /// The spec of the columns after it.
    fn out_spec(&self, spec: FeatureSpec) -> Result<FeatureSpec, PipelineError> {
        Ok(spec)
    }

    /// A column step's entry in the checkpoint's fingerprint (a
    /// tokenizer's digest, a length filter's bounds): column steps decide
    /// which records are grouped and by what length. A step on assembled
    /// batches moves no record and writes none.
    fn identity(&self, _id: &mut Identity) {}

    /// True when it may change records (their lengths are measured after
    /// it).
    fn maps(&self) -> bool {
        false
    }

    /// A column step's work on a batch (a filter's is [`filter`](Self::filter)),
    /// in `pass`.
    fn map(&self, batch: ParsedBatch, _pass: Pass) -> Result<ParsedBatch, MapError> {
        Ok(batch)
    }

    /// A filter's test of a record.
    fn filter(&self) -> Option<&RowFilter> {
        None
    }

    /// A filter that keeps the records whose variable-length feature
    /// holds from `min` to `max` values: (feature, min, max). Where every
    /// column step is one (and the records are Examples), the prefilter
    /// decides them by the wire scan (`measure.rs`, `scanned_prefilter`).
    fn length_bounds(&self) -> Option<(&str, u64, u64)> {
        None
    }

    /// A decoding step's work on a group's parsed batch, on the workers
    /// (`raw`: the group it was parsed from). It may leave records out:
    /// the rows after them move up.
    fn decode(&self, _raw: &RawBatch, _batch: &mut ParsedBatch) -> Result<(), PipelineError> {
        Ok(())
    }

    /// The rows (sorted, of the batch it was given) the last
    /// [`decode`](Self::decode) on this thread left out, forgotten here.
    /// A group is decoded and assembled on one worker in one call, so the
    /// batch's provenance leaves them out after it.
    fn take_left_out(&self) -> Vec<usize> {
        Vec::new()
    }

    /// An assembled step's check of a batch shape (against the spec the
    /// column steps leave), and the shape it makes of it.
    fn shape(&self, _spec: &FeatureSpec, _shape: &mut BatchShape) -> Result<(), PipelineError> {
        Ok(())
    }

    /// An assembled step's work on a batch.
    fn assembled(&self, _batch: &mut Batch, _pool: &BufferPool) {}
}

/// A step on parsed batches as the settings hold it.
pub(crate) type Step = Arc<dyn ParsedStep>;

/// The steps of `steps` that run in `stage`, in order.
pub(crate) fn of_stage(steps: &[Step], stage: Stage) -> Vec<Step> {
    steps
        .iter()
        .filter(|s| s.stage() == stage)
        .cloned()
        .collect()
}

/// `map_batch(f)`.
pub(crate) struct MapStep(pub ParsedMap);

impl ParsedStep for MapStep {
    fn stage(&self) -> Stage {
        Stage::Columns
    }
    /// The function cannot be compared: only that it is there.
    fn identity(&self, id: &mut Identity) {
        id.step("map_batch");
    }
    fn maps(&self) -> bool {
        true
    }
    fn map(&self, batch: ParsedBatch, _pass: Pass) -> Result<ParsedBatch, MapError> {
        (self.0)(batch)
    }
}

/// `filter_rows(keep)`.
pub(crate) struct FilterStep(pub RowFilter);

impl ParsedStep for FilterStep {
    fn stage(&self) -> Stage {
        Stage::Columns
    }
    fn identity(&self, id: &mut Identity) {
        id.step("filter_rows");
    }
    fn filter(&self) -> Option<&RowFilter> {
        Some(&self.0)
    }
}

/// A parsed op failed on a batch.
#[derive(Debug)]
pub(crate) enum OpError {
    /// The map returned an error.
    Map(MapError),
    /// The map changed the number of records.
    Count { before: usize, after: usize },
}

/// Runs every column step of `steps` that maps on `batch` (filters are
/// skipped: the records given here already passed them); a tokenize takes
/// the ids the prefilter kept.
pub(crate) fn apply_maps(steps: &[Step], mut batch: ParsedBatch) -> Result<ParsedBatch, OpError> {
    for step in steps.iter().filter(|s| s.stage() == Stage::Columns) {
        if step.maps() {
            batch = run_map(|b| step.map(b, Pass::Workers), batch)?;
        }
    }
    Ok(batch)
}

fn run_map(
    f: impl FnOnce(ParsedBatch) -> Result<ParsedBatch, MapError>,
    batch: ParsedBatch,
) -> Result<ParsedBatch, OpError> {
    let before = batch.num_records;
    let out = f(batch).map_err(OpError::Map)?;
    if out.num_records != before {
        return Err(OpError::Count {
            before,
            after: out.num_records,
        });
    }
    Ok(out)
}

/// Runs `ops` in order on `batch`, dropping the records a filter rejects
/// before the next op sees them (the prefilter: a tokenize keeps its ids
/// for the workers). Returns the last batch and its surviving records, each
/// as (its index in the input, its row in that batch). A filter's survivors
/// are copied into a batch of their own only where a map comes after it:
/// the prefilter needs no more than their lengths, and the copy was half
/// its time (`filter_length` on lm).
pub(crate) fn apply_all(
    steps: &[Step],
    mut batch: ParsedBatch,
) -> Result<(ParsedBatch, Vec<(usize, usize)>), OpError> {
    // Each row of `batch`, its index in the input; the rows kept so far.
    let mut origin: Vec<usize> = (0..batch.num_records).collect();
    let mut rows = origin.clone();
    for step in steps.iter().filter(|s| s.stage() == Stage::Columns) {
        if let Some(keep) = step.filter() {
            rows.retain(|&r| keep(&batch, r));
        } else if step.maps() {
            if rows.len() != batch.num_records {
                batch = select_rows(&batch, &rows);
                origin = rows.iter().map(|&r| origin[r]).collect();
                rows = (0..batch.num_records).collect();
            }
            batch = run_map(|b| step.map(b, Pass::Prefilter), batch)?;
        }
    }
    Ok((batch, rows.into_iter().map(|r| (origin[r], r)).collect()))
}

/// Number of values of record `row` in a ragged column (steps, for a
/// feature list); `None` for a dense column or a row out of range.
pub(crate) fn row_length(column: &Column, row: usize) -> Option<usize> {
    let splits = match column {
        Column::Ragged { row_splits, .. } => row_splits,
        Column::Ragged2 { outer_splits, .. } => outer_splits,
        Column::Dense { .. } => return None,
    };
    let (a, b) = (*splits.get(row)?, *splits.get(row + 1)?);
    b.checked_sub(a)
}

/// The records `rows` of `batch` (in that order) as a batch of their own.
pub fn select_rows(batch: &ParsedBatch, rows: &[usize]) -> ParsedBatch {
    let columns = batch
        .columns
        .iter()
        .map(|(name, column)| (name.clone(), select_column(column, rows)))
        .collect();
    ParsedBatch {
        num_records: rows.len(),
        columns,
    }
}

fn select_column(column: &Column, rows: &[usize]) -> Column {
    match column {
        Column::Dense { shape, values } => {
            let per_row: usize = shape.iter().skip(1).product();
            let ranges: Vec<(usize, usize)> = rows
                .iter()
                .map(|&r| (r * per_row, (r + 1) * per_row))
                .collect();
            let mut shape = shape.clone();
            if let Some(first) = shape.first_mut() {
                *first = rows.len();
            }
            Column::Dense {
                shape,
                values: gather(values, &ranges),
            }
        }
        Column::Ragged {
            values,
            row_splits,
            inner_shape,
        } => {
            let per: usize = inner_shape.iter().product();
            let mut splits = Vec::with_capacity(rows.len() + 1);
            splits.push(0);
            let mut ranges = Vec::with_capacity(rows.len());
            for &r in rows {
                let (a, b) = span(row_splits, r);
                ranges.push((a * per, b * per));
                splits.push(splits.last().copied().unwrap_or(0) + (b - a));
            }
            Column::Ragged {
                values: gather(values, &ranges),
                row_splits: splits,
                inner_shape: inner_shape.clone(),
            }
        }
        Column::Ragged2 {
            values,
            outer_splits,
            inner_splits,
        } => {
            let mut outer = vec![0];
            let mut inner = vec![0];
            let mut ranges = Vec::new();
            for &r in rows {
                let (a, b) = span(outer_splits, r);
                for step in a..b {
                    let (va, vb) = span(inner_splits, step);
                    ranges.push((va, vb));
                    inner.push(inner.last().copied().unwrap_or(0) + (vb - va));
                }
                outer.push(outer.last().copied().unwrap_or(0) + (b - a));
            }
            Column::Ragged2 {
                values: gather(values, &ranges),
                outer_splits: outer,
                inner_splits: inner,
            }
        }
    }
}

/// `splits[r]..splits[r + 1]`, empty when out of range.
fn span(splits: &[usize], r: usize) -> (usize, usize) {
    match (splits.get(r), splits.get(r + 1)) {
        (Some(&a), Some(&b)) if a <= b => (a, b),
        _ => (0, 0),
    }
}

/// The values in `ranges`, end to end (ranges past the end are cut).
fn gather(values: &Values, ranges: &[(usize, usize)]) -> Values {
    fn take<T: Copy>(v: &[T], ranges: &[(usize, usize)]) -> Vec<T> {
        let mut out = Vec::new();
        for &(a, b) in ranges {
            out.extend_from_slice(v.get(a..b.min(v.len())).unwrap_or_default());
        }
        out
    }
    match values {
        Values::Int64(v) => Values::Int64(take(v, ranges)),
        Values::Int32(v) => Values::Int32(take(v, ranges)),
        Values::Float32(v) => Values::Float32(take(v, ranges)),
        Values::Bytes(b) => {
            let mut out = BytesValues::new();
            for &(a, end) in ranges {
                for i in a..end.min(b.offsets.len().saturating_sub(1)) {
                    let (s, e) = (b.offsets[i], b.offsets[i + 1]);
                    out.data
                        .extend_from_slice(b.data.get(s..e).unwrap_or_default());
                    out.offsets.push(out.data.len());
                }
            }
            Values::Bytes(out)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_column_pool_gives_back_the_last_batch_kept_and_keeps_at_most_max() {
        let batch = |n: usize| ParsedBatch {
            num_records: n,
            columns: vec![(
                "x".into(),
                Column::Dense {
                    shape: vec![n],
                    values: Values::Int64(vec![7; n]),
                },
            )],
        };
        let pool = ColumnPool::new(2);
        assert_eq!(pool.take().columns, vec![]);
        pool.give(batch(1));
        pool.give(batch(2));
        pool.give(batch(3)); // the pool is full: freed
        assert_eq!(pool.len(), 2);
        assert_eq!(pool.take(), batch(2));
        assert_eq!(pool.take(), batch(1));
        assert_eq!(pool.take().num_records, 0);
        assert_eq!(pool.len(), 0);
    }

    /// Filters before a map are applied to the rows in place; the map sees
    /// only their survivors, copied; each survivor is named by its index
    /// in the input and its row in the batch returned.
    #[test]
    fn apply_all_copies_survivors_only_for_a_map() {
        let ids = |batch: &ParsedBatch| match batch.get("x") {
            Some(Column::Dense { values, .. }) => values.as_int64().unwrap().to_vec(),
            other => panic!("{other:?}"),
        };
        let x = |v: Vec<i64>| ParsedBatch {
            num_records: v.len(),
            columns: vec![(
                "x".into(),
                Column::Dense {
                    shape: vec![v.len()],
                    values: Values::Int64(v),
                },
            )],
        };
        let keep = |f: fn(i64) -> bool| -> Step {
            Arc::new(FilterStep(Arc::new(move |b: &ParsedBatch, row: usize| {
                let Some(Column::Dense { values, .. }) = b.get("x") else {
                    return true;
                };
                f(values.as_int64().unwrap()[row])
            })))
        };
        let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
        let map: Step = {
            let seen = seen.clone();
            Arc::new(MapStep(Arc::new(move |b: ParsedBatch| {
                seen.lock().unwrap().push(ids(&b));
                Ok(x(ids(&b).iter().map(|v| v * 10).collect()))
            })))
        };
        let input = || x((0..10).collect());
        let odd = keep(|v| v % 2 == 1);
        let (out, kept) = apply_all(&[odd.clone(), keep(|v| v != 5)], input()).unwrap();
        assert_eq!(out, input(), "no copy without a map");
        assert_eq!(kept, [(1, 1), (3, 3), (7, 7), (9, 9)]);
        let steps = [odd, map, keep(|v| v != 30), keep(|v| v > 10)];
        let (out, kept) = apply_all(&steps, input()).unwrap();
        assert_eq!(*seen.lock().unwrap(), [vec![1, 3, 5, 7, 9]]);
        assert_eq!(ids(&out), [10, 30, 50, 70, 90]);
        assert_eq!(kept, [(5, 2), (7, 3), (9, 4)]);
    }

    #[test]
    fn select_rows_keeps_every_layout_exact() {
        let batch = ParsedBatch {
            num_records: 3,
            columns: vec![
                (
                    "d".into(),
                    Column::Dense {
                        shape: vec![3, 2],
                        values: Values::Int64(vec![1, 2, 3, 4, 5, 6]),
                    },
                ),
                (
                    "r".into(),
                    Column::Ragged {
                        values: Values::Float32(vec![0.5, 1.5, 2.5]),
                        row_splits: vec![0, 1, 1, 3],
                        inner_shape: vec![],
                    },
                ),
                (
                    "b".into(),
                    Column::Ragged {
                        values: Values::Bytes(
                            [b"a".as_slice(), b"bc", b"", b"def"].into_iter().collect(),
                        ),
                        row_splits: vec![0, 2, 3, 4],
                        inner_shape: vec![],
                    },
                ),
                (
                    "s".into(),
                    Column::Ragged2 {
                        values: Values::Int32(vec![7, 8, 9]),
                        outer_splits: vec![0, 2, 2, 3],
                        inner_splits: vec![0, 1, 2, 3],
                    },
                ),
            ],
        };
        let picked = select_rows(&batch, &[2, 0]);
        assert_eq!(picked.num_records, 2);
        assert_eq!(
            picked.get("d"),
            Some(&Column::Dense {
                shape: vec![2, 2],
                values: Values::Int64(vec![5, 6, 1, 2]),
            })
        );
        assert_eq!(
            picked.get("r"),
            Some(&Column::Ragged {
                values: Values::Float32(vec![1.5, 2.5, 0.5]),
                row_splits: vec![0, 2, 3],
                inner_shape: vec![],
            })
        );
        assert_eq!(
            picked.get("b"),
            Some(&Column::Ragged {
                values: Values::Bytes([b"def".as_slice(), b"a", b"bc"].into_iter().collect()),
                row_splits: vec![0, 1, 3],
                inner_shape: vec![],
            })
        );
        assert_eq!(
            picked.get("s"),
            Some(&Column::Ragged2 {
                values: Values::Int32(vec![9, 7, 8]),
                outer_splits: vec![0, 1, 3],
                inner_splits: vec![0, 1, 2, 3],
            })
        );
        assert_eq!(row_length(picked.get("r").unwrap(), 0), Some(2));
        assert_eq!(row_length(picked.get("d").unwrap(), 0), None);
    }
}
