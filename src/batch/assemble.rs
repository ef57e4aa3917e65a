//! Batch assembly: parsed columns into padded, masked, aligned tensors.
//!
//! Each output tensor is one pooled buffer written exactly once, row by row:
//! a row is one slice copy (a `memcpy`, or a cast loop the compiler
//! vectorises) plus one fill of its padding; no allocation per value or row.

use std::borrow::Borrow;
use std::fmt;

use super::bucket::BucketGroup;
use super::buffer::AlignedBuf;
use super::bytes_column::{fixed_column, padded_column};
use super::dtype::{Bf16, TensorType};
use super::plan::{Assembler, Fill, OutKind, PlanError, Truncation};
use super::shape::BatchShape;
use super::tensor::{Batch, Tensor};
use crate::example::{Column, ParsedBatch, Values};

/// A batch that could not be assembled. `record` is the record's index in
/// its [`ParsedBatch`] when the error is about one record.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{}{kind}", Location(.record, .feature))]
pub struct BatchError {
    /// Index of the record in its parsed batch.
    pub record: Option<usize>,
    /// The feature concerned.
    pub feature: Option<String>,
    /// What was wrong.
    pub kind: BatchErrorKind,
}

struct Location<'a>(&'a Option<usize>, &'a Option<String>);

impl fmt::Display for Location<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.0, self.1) {
            (Some(r), Some(n)) => write!(f, "record {r}, feature {n:?}: "),
            (Some(r), None) => write!(f, "record {r}: "),
            (None, Some(n)) => write!(f, "feature {n:?}: "),
            (None, None) => Ok(()),
        }
    }
}

/// What was wrong with a batch.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum BatchErrorKind {
    /// A sequence is longer than its limit and truncation is `Error`.
    #[error("length {length} is over the limit {limit} (truncation policy: error)")]
    TooLong { length: usize, limit: usize },
    /// An integer does not fit the output type.
    #[error("value {value} does not fit in {dtype}")]
    Overflow { value: i64, dtype: TensorType },
    /// A raw-decoded bytes value has the wrong size.
    #[error("expected {expected} bytes, found {actual}")]
    ByteCount { expected: usize, actual: usize },
    /// More rows than the batch holds.
    #[error("{rows} rows do not fit a batch of {batch_size}")]
    TooManyRows { rows: usize, batch_size: usize },
    /// A parsed batch lacks a planned feature.
    #[error("the parsed batch has no such column")]
    MissingColumn,
    /// A column's layout or type is not what the plan was built for.
    #[error("column does not match the plan: {reason}")]
    ColumnMismatch { reason: &'static str },
    /// A row names a record its parsed batch does not have.
    #[error("record index out of range (the parsed batch has {num_records})")]
    RecordOutOfRange { num_records: usize },
    /// A bucket is padded past the plan's length bound.
    #[error("bucket length {boundary} is over the length bound {bound}")]
    AboveBound { boundary: usize, bound: usize },
    /// The batch's tensors would not fit in memory (a huge batch size).
    #[error("a batch of {batch_size} rows is too large")]
    TooLarge { batch_size: usize },
    /// Packed features of one record differ in length.
    #[error("length {actual} differs from the {expected} of the first packed feature")]
    LengthMismatch { expected: usize, actual: usize },
}

impl BatchError {
    pub(crate) fn new(record: Option<usize>, feature: Option<&str>, kind: BatchErrorKind) -> Self {
        Self {
            record,
            feature: feature.map(str::to_string),
            kind,
        }
    }
}

fn mismatch(record: Option<usize>, feature: &str, reason: &'static str) -> BatchError {
    BatchError::new(
        record,
        Some(feature),
        BatchErrorKind::ColumnMismatch { reason },
    )
}

// ---------------------------------------------------------------------------
// Typed copies
// ---------------------------------------------------------------------------

/// A fill value as an element of each type.
trait FromFill: Copy {
    fn from_fill(f: Fill) -> Self;
}

macro_rules! from_fill {
    ($t:ty) => {
        impl FromFill for $t {
            fn from_fill(f: Fill) -> Self {
                match f {
                    Fill::I64(v) => v as $t,
                    Fill::I32(v) => v as $t,
                    Fill::F32(v) => v as $t,
                    Fill::U8(v) => v as $t,
                    Fill::BF16(v) => v.to_f32() as $t,
                }
            }
        }
    };
}
from_fill!(i64);
from_fill!(i32);
from_fill!(f32);
from_fill!(u8);

impl FromFill for Bf16 {
    fn from_fill(f: Fill) -> Self {
        Bf16::from_f32(match f {
            Fill::I64(v) => v as f32,
            Fill::I32(v) => v as f32,
            Fill::F32(v) => v,
            Fill::U8(v) => v.into(),
            Fill::BF16(v) => return v,
        })
    }
}

/// A typed view of an output buffer.
pub(crate) enum Dst<'a> {
    I64(&'a mut [i64]),
    I32(&'a mut [i32]),
    F32(&'a mut [f32]),
    U8(&'a mut [u8]),
    BF16(&'a mut [Bf16]),
}

impl<'a> Dst<'a> {
    pub(crate) fn new(buf: &'a mut AlignedBuf, dtype: TensorType) -> Self {
        match dtype {
            TensorType::I64 => Dst::I64(buf.as_mut_slice()),
            TensorType::I32 => Dst::I32(buf.as_mut_slice()),
            TensorType::F32 => Dst::F32(buf.as_mut_slice()),
            TensorType::U8 => Dst::U8(buf.as_mut_slice()),
            TensorType::BF16 => Dst::BF16(buf.as_mut_slice()),
        }
    }

    /// Writes `value` to elements `at..at + n`.
    pub(crate) fn fill(&mut self, at: usize, n: usize, value: Fill) {
        fn go<T: FromFill>(d: &mut [T], at: usize, n: usize, v: Fill) {
            if let Some(s) = d.get_mut(at..at + n) {
                crate::fill::fill(s, T::from_fill(v));
            }
        }
        match self {
            Dst::I64(d) => go(d, at, n, value),
            Dst::I32(d) => go(d, at, n, value),
            Dst::F32(d) => go(d, at, n, value),
            Dst::U8(d) => go(d, at, n, value),
            Dst::BF16(d) => go(d, at, n, value),
        }
    }

    /// Copies `n` values from `values[src..]` to elements `at..`, casting.
    pub(crate) fn copy(
        &mut self,
        values: &Values,
        src: usize,
        n: usize,
        at: usize,
    ) -> Result<(), CopyError> {
        fn pair<'s, 'd, S, D>(
            s: &'s [S],
            src: usize,
            d: &'d mut [D],
            at: usize,
            n: usize,
        ) -> Result<(&'s [S], &'d mut [D]), CopyError> {
            let s = s.get(src..src.checked_add(n).ok_or(CopyError::Bounds)?);
            let d = d.get_mut(at..at + n);
            s.zip(d).ok_or(CopyError::Bounds)
        }
        match (values, self) {
            (Values::Int64(v), Dst::I64(d)) => {
                let (s, d) = pair(v, src, d, at, n)?;
                d.copy_from_slice(s);
            }
            (Values::Int64(v), Dst::I32(d)) => {
                let (s, d) = pair(v, src, d, at, n)?;
                narrow(s, d).map_err(|value| CopyError::Overflow(value, TensorType::I32))?;
            }
            (Values::Int32(v), Dst::I32(d)) => {
                let (s, d) = pair(v, src, d, at, n)?;
                d.copy_from_slice(s);
            }
            (Values::Int32(v), Dst::I64(d)) => {
                let (s, d) = pair(v, src, d, at, n)?;
                d.iter_mut().zip(s).for_each(|(d, &s)| *d = s.into());
            }
            (Values::Float32(v), Dst::F32(d)) => {
                let (s, d) = pair(v, src, d, at, n)?;
                d.copy_from_slice(s);
            }
            _ => return Err(CopyError::Type),
        }
        Ok(())
    }
}

/// Why a copy failed.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum CopyError {
    Overflow(i64, TensorType),
    Bounds,
    Type,
}

impl CopyError {
    pub(crate) fn into_error(self, record: usize, feature: &str) -> BatchError {
        let kind = match self {
            CopyError::Overflow(value, dtype) => BatchErrorKind::Overflow { value, dtype },
            CopyError::Bounds => BatchErrorKind::ColumnMismatch {
                reason: "values end before the record's row",
            },
            CopyError::Type => BatchErrorKind::ColumnMismatch {
                reason: "values have another type than the plan",
            },
        };
        BatchError::new(Some(record), Some(feature), kind)
    }
}

/// Narrows i64 to i32; on overflow returns the first value out of range.
fn narrow(src: &[i64], dst: &mut [i32]) -> Result<(), i64> {
    let mut ok = true;
    for (d, &s) in dst.iter_mut().zip(src) {
        let v = s as i32;
        *d = v;
        ok &= i64::from(v) == s;
    }
    if ok {
        Ok(())
    } else {
        Err(src
            .iter()
            .copied()
            .find(|&s| i32::try_from(s).is_err())
            .unwrap_or(0))
    }
}

/// True when `values` can be written as `dtype`.
pub(crate) fn compatible(values: &Values, dtype: TensorType) -> bool {
    matches!(
        (values, dtype),
        (
            Values::Int64(_) | Values::Int32(_),
            TensorType::I64 | TensorType::I32
        ) | (Values::Float32(_), TensorType::F32)
    )
}

/// How many rows of `step` values `values` holds (any number for an empty
/// step shape).
fn rows_in(values: &Values, step: usize) -> usize {
    values.len().checked_div(step).unwrap_or(usize::MAX)
}

/// The span `(start, len)` of record `rec`'s values in a ragged column.
pub(crate) fn ragged_span(
    row_splits: &[usize],
    values_len: usize,
    rec: usize,
) -> Option<(usize, usize)> {
    let start = *row_splits.get(rec)?;
    let end = *row_splits.get(rec.checked_add(1)?)?;
    (start <= end && end <= values_len).then(|| (start, end - start))
}

// ---------------------------------------------------------------------------
// Assembly
// ---------------------------------------------------------------------------

/// How long the padding groups of one batch are.
#[derive(Clone, Copy, Debug)]
pub(super) enum PadTo {
    /// By each group's policy from the batch's longest sequence.
    Policy,
    /// Every group to this length (a bucket's boundary).
    Length(usize),
    /// Every group to its policy's bound (the last bucket).
    Bound,
}

/// The columns of the planned features in one parsed batch, checked.
struct Resolved<'p> {
    batch: &'p ParsedBatch,
    columns: Vec<&'p Column>,
}

impl Assembler {
    /// Assembles all records of `parsed` into one batch of
    /// [`batch_size`](Self::batch_size) rows; fewer records give padding rows
    /// after them (masked out; `real_rows` says how many are real).
    pub fn assemble(&self, parsed: &ParsedBatch) -> Result<Batch, BatchError> {
        if parsed.num_records > self.batch_size {
            return Err(BatchError::new(
                None,
                None,
                BatchErrorKind::TooManyRows {
                    rows: parsed.num_records,
                    batch_size: self.batch_size,
                },
            ));
        }
        let rows: Vec<(&ParsedBatch, usize)> =
            (0..parsed.num_records).map(|r| (parsed, r)).collect();
        self.assemble_with(&rows, self.batch_size, PadTo::Policy)
    }

    /// Assembles the given records (each a parsed batch and a record index
    /// in it), in order, into one batch of `batch_size` rows.
    pub fn assemble_rows(&self, rows: &[(&ParsedBatch, usize)]) -> Result<Batch, BatchError> {
        self.assemble_with(rows, self.batch_size, PadTo::Policy)
    }

    /// A batch of padding rows only (`real_rows` 0, masks all 0), shaped as
    /// the policies' shortest length: for a host that ran out of data while
    /// the others go on.
    pub fn padding_batch(&self) -> Result<Batch, BatchError> {
        self.assemble_with(&[], self.batch_size, PadTo::Policy)
    }

    /// Assembles a group from a [`Bucketer`](super::Bucketer): its batch
    /// size, every padding group padded to the bucket's boundary (the last
    /// bucket to the policies' bounds).
    pub fn assemble_bucket<P: Borrow<ParsedBatch>>(
        &self,
        group: &BucketGroup<(P, usize)>,
    ) -> Result<Batch, BatchError> {
        let rows: Vec<(&ParsedBatch, usize)> =
            group.items.iter().map(|(p, r)| (p.borrow(), *r)).collect();
        let pad_to = match group.pad_to {
            Some(len) => {
                for g in self.groups.iter().filter(|g| !g.members.is_empty()) {
                    if len > g.bound {
                        let feature = g.members.first().map(|&i| self.outputs[i].name.as_str());
                        return Err(BatchError::new(
                            None,
                            feature,
                            BatchErrorKind::AboveBound {
                                boundary: len,
                                bound: g.bound,
                            },
                        ));
                    }
                }
                PadTo::Length(len)
            }
            None => PadTo::Bound,
        };
        self.assemble_with(&rows, group.batch_size, pad_to)
    }

    /// Every shape [`assemble_bucket`](Self::assemble_bucket) can produce for
    /// the groups of `bucketer`: one per bucket.
    pub fn bucket_shapes<T>(
        &self,
        bucketer: &super::Bucketer<T>,
    ) -> Result<Vec<BatchShape>, PlanError> {
        let mut out = Vec::new();
        for bucket in 0..bucketer.num_buckets() {
            let mut lengths = vec![0; self.groups.len()];
            for (gi, g) in self.groups.iter().enumerate() {
                if g.members.is_empty() {
                    continue;
                }
                lengths[gi] = match bucketer.pad_to(bucket) {
                    Some(len) if len > g.bound => {
                        let feature = g
                            .members
                            .first()
                            .map(|&i| self.outputs[i].name.clone())
                            .unwrap_or_default();
                        return Err(PlanError::BoundaryAboveBound {
                            feature,
                            boundary: len,
                            bound: g.bound,
                        });
                    }
                    Some(len) => len,
                    None => g.bound,
                };
            }
            out.push(self.shape_for(bucketer.batch_size(bucket), &lengths));
        }
        out.sort();
        out.dedup();
        Ok(out)
    }

    /// A record's length for bucketing: the longest of its variable-length
    /// features (0 when the plan has none).
    pub fn row_length(&self, parsed: &ParsedBatch, record: usize) -> Result<usize, BatchError> {
        let mut longest = 0;
        for out in &self.outputs {
            if out.group().is_some() {
                let (_, len) = self.ragged_column(parsed, out, record)?;
                longest = longest.max(len);
            }
        }
        Ok(longest)
    }

    fn ragged_column<'p>(
        &self,
        parsed: &'p ParsedBatch,
        out: &super::plan::OutFeature,
        record: usize,
    ) -> Result<(&'p Values, usize), BatchError> {
        let name = out.name.as_str();
        match parsed.get(name) {
            Some(Column::Ragged {
                values, row_splits, ..
            }) => ragged_span(row_splits, rows_in(values, out.step_count()), record)
                .map(|(_, len)| (values, len))
                .ok_or_else(|| mismatch(Some(record), name, "row splits do not cover the record")),
            Some(_) => Err(mismatch(None, name, "expected a ragged column")),
            None => Err(BatchError::new(
                None,
                Some(name),
                BatchErrorKind::MissingColumn,
            )),
        }
    }

    /// Refuses a batch whose tensors' sizes overflow (only a huge bucket
    /// batch size can: the plan checked its own batch size and bounds).
    pub(super) fn check_size(&self, batch_size: usize, pad_to: PadTo) -> Result<(), BatchError> {
        let mut row_bytes = 0usize;
        for out in &self.outputs {
            let n = match &out.kind {
                OutKind::Dense { count, decode, .. } => {
                    count.checked_mul(decode.as_ref().map_or(1, |d| d.1))
                }
                // An offset per value; the values' bytes are the records'.
                OutKind::Bytes { count, .. } => count.checked_mul(8),
                OutKind::Ragged { group, .. } | OutKind::RaggedBytes { group, .. } => {
                    let bound = self.groups.get(*group).map_or(0, |g| g.bound);
                    let len = match pad_to {
                        PadTo::Length(len) => len.max(bound),
                        PadTo::Policy | PadTo::Bound => bound,
                    };
                    // Values and mask, 8 bytes at most each.
                    len.checked_mul(16)
                        .and_then(|n| n.checked_mul(out.step_count()))
                }
            };
            row_bytes = n
                .and_then(|n| n.checked_mul(out.dtype.size()))
                .and_then(|n| row_bytes.checked_add(n))
                .unwrap_or(usize::MAX);
        }
        match row_bytes.checked_mul(batch_size) {
            Some(total) if total <= isize::MAX as usize / 2 => Ok(()),
            _ => Err(BatchError::new(
                None,
                None,
                BatchErrorKind::TooLarge { batch_size },
            )),
        }
    }

    /// Finds and checks the planned columns in `batch`.
    fn resolve<'p>(&self, batch: &'p ParsedBatch) -> Result<Resolved<'p>, BatchError> {
        let n = batch.num_records;
        let mut columns = Vec::with_capacity(self.outputs.len());
        for out in &self.outputs {
            let name = out.name.as_str();
            let col = batch
                .get(name)
                .ok_or_else(|| BatchError::new(None, Some(name), BatchErrorKind::MissingColumn))?;
            match (&out.kind, col) {
                (
                    OutKind::Dense {
                        shape: fshape,
                        count,
                        ..
                    }
                    | OutKind::Bytes {
                        shape: fshape,
                        count,
                    },
                    Column::Dense { shape, values },
                ) => {
                    if shape.first() != Some(&n) || shape.get(1..) != Some(fshape.as_slice()) {
                        return Err(mismatch(None, name, "dense shape differs from the spec"));
                    }
                    if Some(values.len()) != n.checked_mul(*count) {
                        return Err(mismatch(None, name, "dense values do not fill the shape"));
                    }
                }
                (
                    OutKind::Ragged { step, .. } | OutKind::RaggedBytes { step, .. },
                    Column::Ragged {
                        row_splits,
                        inner_shape,
                        ..
                    },
                ) => {
                    if inner_shape != step {
                        return Err(mismatch(
                            None,
                            name,
                            "ragged rows have another inner shape than the plan",
                        ));
                    }
                    if row_splits.len() != n + 1 {
                        return Err(mismatch(None, name, "row splits do not match the records"));
                    }
                }
                (OutKind::Dense { .. } | OutKind::Bytes { .. }, _) => {
                    return Err(mismatch(None, name, "expected a dense column"));
                }
                (OutKind::Ragged { .. } | OutKind::RaggedBytes { .. }, _) => {
                    return Err(mismatch(None, name, "expected a ragged column"));
                }
            }
            // Numbers of the plan's type; bytes for a raw decode or a bytes column.
            let fits = match &out.kind {
                OutKind::Dense { decode: None, .. } | OutKind::Ragged { .. } => {
                    compatible(col.values(), out.dtype)
                }
                OutKind::Dense {
                    decode: Some(_), ..
                }
                | OutKind::Bytes { .. }
                | OutKind::RaggedBytes { .. } => matches!(col.values(), Values::Bytes(_)),
            };
            if !fits {
                return Err(mismatch(
                    None,
                    name,
                    "values have another type than the plan",
                ));
            }
            columns.push(col);
        }
        Ok(Resolved { batch, columns })
    }

    fn assemble_with(
        &self,
        rows: &[(&ParsedBatch, usize)],
        batch_size: usize,
        pad_to: PadTo,
    ) -> Result<Batch, BatchError> {
        if rows.len() > batch_size {
            return Err(BatchError::new(
                None,
                None,
                BatchErrorKind::TooManyRows {
                    rows: rows.len(),
                    batch_size,
                },
            ));
        }
        self.check_size(batch_size, pad_to)?;

        // Resolve each distinct parsed batch once; rows usually come from one.
        let mut resolved: Vec<Resolved<'_>> = Vec::new();
        let mut row_src: Vec<(usize, usize)> = Vec::with_capacity(rows.len());
        for &(batch, rec) in rows {
            let idx = match resolved.iter().rposition(|r| std::ptr::eq(r.batch, batch)) {
                Some(i) => i,
                None => {
                    resolved.push(self.resolve(batch)?);
                    resolved.len() - 1
                }
            };
            if rec >= batch.num_records {
                return Err(BatchError::new(
                    Some(rec),
                    None,
                    BatchErrorKind::RecordOutOfRange {
                        num_records: batch.num_records,
                    },
                ));
            }
            row_src.push((idx, rec));
        }

        // Spans of every ragged feature's rows, and each group's length.
        let mut spans: Vec<Vec<(usize, usize)>> = vec![Vec::new(); self.outputs.len()];
        let mut longest = vec![0usize; self.groups.len()];
        for (oi, out) in self.outputs.iter().enumerate() {
            let Some(group) = out.group() else {
                continue;
            };
            let s = &mut spans[oi];
            s.reserve_exact(rows.len());
            for &(ri, rec) in &row_src {
                let Column::Ragged {
                    values, row_splits, ..
                } = resolved[ri].columns[oi]
                else {
                    return Err(mismatch(None, &out.name, "expected a ragged column"));
                };
                let span = ragged_span(row_splits, rows_in(values, out.step_count()), rec)
                    .ok_or_else(|| {
                        mismatch(Some(rec), &out.name, "row splits do not cover the record")
                    })?;
                longest[group] = longest[group].max(span.1);
                s.push(span);
            }
        }
        let lengths: Vec<usize> = self
            .groups
            .iter()
            .zip(&longest)
            .map(|(g, &l)| match pad_to {
                PadTo::Policy => g.policy.target(l),
                PadTo::Length(len) => len,
                PadTo::Bound => g.bound,
            })
            .collect();

        // Truncation errors first, in record order, before any work.
        for (r, &(_, rec)) in row_src.iter().enumerate() {
            for (oi, out) in self.outputs.iter().enumerate() {
                let Some(group) = out.group() else {
                    continue;
                };
                let g = &self.groups[group];
                let len = spans[oi][r].1;
                if g.policy.truncation == Truncation::Error && len > lengths[group] {
                    return Err(BatchError::new(
                        Some(rec),
                        Some(&out.name),
                        BatchErrorKind::TooLong {
                            length: len,
                            limit: lengths[group],
                        },
                    ));
                }
            }
        }

        let mut tensors = Vec::with_capacity(self.outputs.len() * 2);
        let mut bytes = Vec::new();
        let bytes_of = |ri: usize, oi: usize| match resolved[ri].columns[oi].values() {
            Values::Bytes(v) => Ok(v),
            _ => Err(mismatch(
                None,
                &self.outputs[oi].name,
                "expected bytes values",
            )),
        };
        for (oi, out) in self.outputs.iter().enumerate() {
            let name = out.name.as_str();
            match &out.kind {
                OutKind::Dense {
                    shape,
                    count,
                    decode,
                } => {
                    let per_row = count * decode.as_ref().map_or(1, |d| d.1);
                    let mut buf = self
                        .pool
                        .take_stale(batch_size * per_row * out.dtype.size());
                    {
                        let mut dst = Dst::new(&mut buf, out.dtype);
                        for (r, &(ri, rec)) in row_src.iter().enumerate() {
                            let values = resolved[ri].columns[oi].values();
                            match decode {
                                None => dst
                                    .copy(values, rec * count, *count, r * per_row)
                                    .map_err(|e| e.into_error(rec, name))?,
                                Some((_, dcount)) => decode_row(
                                    values,
                                    rec * count,
                                    *count,
                                    *dcount,
                                    &mut dst,
                                    r * per_row,
                                )
                                .map_err(|kind| BatchError::new(Some(rec), Some(name), kind))?,
                            }
                        }
                        let pad_rows = batch_size - rows.len();
                        dst.fill(
                            rows.len() * per_row,
                            pad_rows * per_row,
                            Fill::zero(out.dtype),
                        );
                    }
                    let mut s = Vec::with_capacity(shape.len() + 4);
                    s.push(batch_size);
                    s.extend_from_slice(shape);
                    if let Some((d, _)) = decode {
                        s.extend_from_slice(d);
                    }
                    tensors.push((name.to_string(), Tensor::from_parts(out.dtype, s, buf)));
                }
                OutKind::Ragged {
                    group, pad, mask, ..
                } => {
                    let g = &self.groups[*group];
                    let len = lengths[*group];
                    // Values per position: a feature list's step size, else 1.
                    let sc = out.step_count();
                    let keep_end = g.policy.truncation == Truncation::KeepEnd;
                    let mut buf = self
                        .pool
                        .take_stale(batch_size * len * sc * out.dtype.size());
                    let mut mask_buf = mask
                        .as_ref()
                        .map(|(_, t)| (self.pool.take_stale(batch_size * len * t.size()), *t));
                    {
                        let mut dst = Dst::new(&mut buf, out.dtype);
                        let mut mdst = mask_buf.as_mut().map(|(b, t)| (Dst::new(b, *t), *t));
                        for (r, &(ri, rec)) in row_src.iter().enumerate() {
                            let (start, n_all) = spans[oi][r];
                            let n = n_all.min(len);
                            let src = if keep_end { start + n_all - n } else { start };
                            let at = r * len;
                            let values = resolved[ri].columns[oi].values();
                            dst.copy(values, src * sc, n * sc, at * sc)
                                .map_err(|e| e.into_error(rec, name))?;
                            dst.fill((at + n) * sc, (len - n) * sc, *pad);
                            if let Some((m, t)) = &mut mdst {
                                m.fill(at, n, Fill::one_or_zero(*t, true));
                                m.fill(at + n, len - n, Fill::zero(*t));
                            }
                        }
                    }
                    let shape = RowsShape {
                        rows: rows.len(),
                        batch_size,
                        len,
                    };
                    push_padded(&mut tensors, out, mask, *pad, shape, buf, mask_buf);
                }
                OutKind::Bytes { shape, count } => {
                    let sources = row_src
                        .iter()
                        .map(|&(ri, rec)| Ok((bytes_of(ri, oi)?, rec * count)))
                        .collect::<Result<Vec<_>, BatchError>>()?;
                    let column = fixed_column(sources.into_iter(), *count, batch_size, shape);
                    bytes.push((name.to_string(), column));
                }
                OutKind::RaggedBytes { group, mask, step } => {
                    let len = lengths[*group];
                    let keep_end = self.groups[*group].policy.truncation == Truncation::KeepEnd;
                    let mut kept = Vec::with_capacity(row_src.len());
                    for (r, &(ri, _)) in row_src.iter().enumerate() {
                        let (start, n_all) = spans[oi][r];
                        let n = n_all.min(len);
                        let src = if keep_end { start + n_all - n } else { start };
                        kept.push((bytes_of(ri, oi)?, src, n));
                    }
                    if let Some((mname, t)) = mask {
                        let mut mb = self.pool.take_stale(batch_size * len * t.size());
                        let mut m = Dst::new(&mut mb, *t);
                        for (r, &(_, _, n)) in kept.iter().enumerate() {
                            m.fill(r * len, n, Fill::one_or_zero(*t, true));
                            m.fill(r * len + n, len - n, Fill::zero(*t));
                        }
                        let tail = kept.len() * len;
                        m.fill(tail, batch_size * len - tail, Fill::zero(*t));
                        let mask_tensor = Tensor::from_parts(*t, vec![batch_size, len], mb);
                        tensors.push((mname.clone(), mask_tensor));
                    }
                    let column = padded_column(kept.into_iter(), len, step, batch_size);
                    bytes.push((name.to_string(), column));
                }
            }
        }
        Ok(Batch {
            tensors,
            real_rows: rows.len(),
            bytes,
            provenance: Default::default(),
        })
    }
}

/// Real rows, rows in all, and row length of a padded variable-length tensor.
#[derive(Clone, Copy)]
pub(super) struct RowsShape {
    pub(super) rows: usize,
    pub(super) batch_size: usize,
    pub(super) len: usize,
}

/// Fills the padding rows after the real ones (values and mask) and adds
/// the `[batch_size, len]` tensor and its mask to `tensors`.
pub(super) fn push_padded(
    tensors: &mut Vec<(String, Tensor)>,
    out: &super::plan::OutFeature,
    mask: &Option<(String, TensorType)>,
    pad: Fill,
    shape: RowsShape,
    mut buf: AlignedBuf,
    mut mask_buf: Option<(AlignedBuf, TensorType)>,
) {
    let RowsShape {
        rows,
        batch_size,
        len,
    } = shape;
    let (tail, pad_n) = (rows * len, (batch_size - rows) * len);
    // A feature list's values have a step shape after `[batch, len]`.
    let sc = out.step_count();
    Dst::new(&mut buf, out.dtype).fill(tail * sc, pad_n * sc, pad);
    if let Some((m, t)) = &mut mask_buf {
        Dst::new(m, *t).fill(tail, pad_n, Fill::zero(*t));
    }
    let mut shape = vec![batch_size, len];
    if let super::plan::OutKind::Ragged { step, .. } = &out.kind {
        shape.extend_from_slice(step);
    }
    tensors.push((out.name.clone(), Tensor::from_parts(out.dtype, shape, buf)));
    if let (Some((mname, _)), Some((mb, t))) = (mask, mask_buf) {
        tensors.push((
            mname.clone(),
            Tensor::from_parts(t, vec![batch_size, len], mb),
        ));
    }
}

/// Copies `count` bytes values starting at value `first`, each exactly
/// `dcount` bytes, to `dst` (u8) at `at`.
fn decode_row(
    values: &Values,
    first: usize,
    count: usize,
    dcount: usize,
    dst: &mut Dst<'_>,
    at: usize,
) -> Result<(), BatchErrorKind> {
    let (Values::Bytes(b), Dst::U8(d)) = (values, dst) else {
        return Err(BatchErrorKind::ColumnMismatch {
            reason: "values have another type than the plan",
        });
    };
    let bounds = BatchErrorKind::ColumnMismatch {
        reason: "bytes offsets do not cover the record",
    };
    for j in 0..count {
        let v = first + j;
        let (Some(&s), Some(&e)) = (b.offsets.get(v), b.offsets.get(v + 1)) else {
            return Err(bounds);
        };
        let Some(bytes) = b.data.get(s..e) else {
            return Err(bounds);
        };
        if bytes.len() != dcount {
            return Err(BatchErrorKind::ByteCount {
                expected: dcount,
                actual: bytes.len(),
            });
        }
        let o = at + j * dcount;
        if let Some(out) = d.get_mut(o..o + dcount) {
            out.copy_from_slice(bytes);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use prost::Message;

    use super::*;
    use crate::batch::plan::{BatchPlan, LengthPolicy, MaskType};
    use crate::example::ExampleParser;
    use crate::example::proto::{Example, Feature};
    use crate::spec::DType;
    use crate::spec::FeatureSpec;

    /// The two-step path: parse into columns, then assemble.
    fn two_step(a: &Assembler, spec: &FeatureSpec, records: &[Vec<u8>]) -> Result<Batch, String> {
        let parsed = ExampleParser::new(spec)
            .parse(records)
            .map_err(|e| e.to_string())?;
        a.assemble(&parsed).map_err(|e| e.to_string())
    }

    fn record(ids: Option<Vec<i64>>, mask: Option<Vec<i64>>) -> Vec<u8> {
        let mut features = Vec::new();
        if let Some(ids) = ids {
            features.push(("ids", Feature::int64s(ids)));
        }
        if let Some(mask) = mask {
            features.push(("mask", Feature::int64s(mask)));
        }
        Example::from_features(features).encode_to_vec()
    }

    fn bytes_of_batch(b: &Batch) -> Vec<(String, Vec<usize>, Vec<u8>)> {
        b.tensors
            .iter()
            .map(|(n, t)| (n.clone(), t.shape().to_vec(), t.bytes().to_vec()))
            .collect()
    }

    fn values() -> impl Strategy<Value = Option<Vec<i64>>> {
        proptest::option::weighted(
            0.9,
            proptest::collection::vec(
                prop_oneof![
                    8 => 0i64..50_000,
                    2 => Just(1i64),
                    1 => any::<i64>(),
                    1 => (1i64 << 20)..(1 << 33),
                ],
                0..40,
            ),
        )
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(300))]

        /// Direct assembly gives exactly the two-step batch, and runs
        /// whenever the two-step path succeeds (it only declines errors).
        #[test]
        fn direct_matches_two_step(
            rows in proptest::collection::vec((values(), values()), 0..9),
            batch_size in 8usize..10,
            multiple in 1usize..9,
            // Past 40, the most values a row has: rows narrower than the
            // bound (direct.rs decodes them at their widest run's length).
            max in 1usize..130,
            pad_value in prop_oneof![Just(0i64), -3i64..3],
            truncation in prop_oneof![
                Just(Truncation::Error),
                Just(Truncation::KeepStart),
                Just(Truncation::KeepEnd),
            ],
            cast in prop_oneof![Just(None), Just(Some(TensorType::I32)), Just(Some(TensorType::I64))],
            mask in prop_oneof![
                Just(MaskType::Auto),
                Just(MaskType::None),
                Just(MaskType::Type(TensorType::U8)),
                Just(MaskType::Type(TensorType::F32)),
            ],
            spec_i32 in any::<bool>(),
        ) {
            let dtype = if spec_i32 { DType::Int32 } else { DType::Int64 };
            let spec = FeatureSpec::new().var_len("ids", dtype).var_len("mask", dtype);
            let policy = LengthPolicy::new()
                .pad_to_multiple_of(multiple)
                .max_length(max)
                .truncation(truncation)
                .pad_value(pad_value)
                .mask(mask);
            let mut plan = BatchPlan::new(&spec, batch_size).pad_all(policy);
            if let Some(t) = cast {
                plan = plan.cast_ints(t);
            }
            let a = plan.build().unwrap();
            let records: Vec<Vec<u8>> =
                rows.into_iter().map(|(i, m)| record(i, m)).collect();
            let want = two_step(&a, &spec, &records);
            let mut parser = ExampleParser::new(&spec);
            let got = a.assemble_direct(&mut parser, &records);
            // Int32 spec with an I64 output is left to the two-step path.
            let declined = spec_i32 && cast == Some(TensorType::I64);
            match (&want, got) {
                (Ok(w), Some(g)) => {
                    prop_assert!(!declined);
                    prop_assert_eq!(bytes_of_batch(w), bytes_of_batch(&g));
                    prop_assert_eq!(w.real_rows, g.real_rows);
                    prop_assert_eq!(w.digest(), g.digest());
                }
                (Ok(_), None) => prop_assert!(declined, "direct path declined a good batch"),
                (Err(_), None) => {}
                (Err(e), Some(_)) => prop_assert!(false, "direct path hid the error {}", e),
            }
        }
    }

    /// A protobuf field: `tag`, a one-byte length, `body`.
    fn field(tag: u8, body: &[u8]) -> Vec<u8> {
        [&[tag, body.len() as u8][..], body].concat()
    }

    /// One `Features.feature` map entry: `key` and the `Feature` message.
    fn feature_entry(key: &str, feature: &[u8]) -> Vec<u8> {
        field(
            0x0a,
            &[field(0x0a, key.as_bytes()), field(0x12, feature)].concat(),
        )
    }

    /// A ctr-like record: an int64 label, three floats (any bits), two
    /// int64 ids and a bytes feature no spec asks for.
    fn ctr_record(label: i64, dense: &[f32], ids: &[i64]) -> Vec<u8> {
        Example::from_features([
            ("label", Feature::int64s(vec![label])),
            ("dense", Feature::floats(dense.to_vec())),
            ("ids", Feature::int64s(ids.to_vec())),
            ("blob", Feature::bytes([b"not asked for".to_vec()])),
        ])
        .encode_to_vec()
    }

    fn ctr_spec() -> FeatureSpec {
        FeatureSpec::new()
            .fixed_len("label", DType::Int64, &[])
            .fixed_len("dense", DType::Float32, &[3])
            .fixed_len("ids", DType::Int64, &[2])
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(200))]

        /// Fixed-length floats go straight from the record: bit for bit the
        /// two-step batch (NaNs and -0.0 included).
        #[test]
        fn dense_direct_floats_match_two_step(
            rows in proptest::collection::vec(
                (any::<i64>(), proptest::array::uniform3(any::<u32>()), any::<[i64; 2]>()),
                0..9,
            ),
        ) {
            let spec = ctr_spec();
            let a = BatchPlan::new(&spec, 8).build().unwrap();
            let records: Vec<Vec<u8>> = rows
                .iter()
                .map(|(l, d, i)| ctr_record(*l, &d.map(f32::from_bits), i))
                .collect();
            let want = two_step(&a, &spec, &records).unwrap();
            let got = a.assemble_dense_direct(&spec, &records);
            prop_assert!(got.is_some(), "the direct path declined a good batch");
            let got = got.unwrap();
            prop_assert_eq!(bytes_of_batch(&want), bytes_of_batch(&got));
            prop_assert_eq!(want.real_rows, got.real_rows);
        }
    }

    /// Unpacked floats (fixed32 fields) and a wrong count are the general
    /// path's: it reads the first and reports the second.
    #[test]
    fn dense_direct_declines_unpacked_floats_and_wrong_counts() {
        let spec = ctr_spec();
        let a = BatchPlan::new(&spec, 4).build().unwrap();
        let good = ctr_record(1, &[1.0, 2.0, 3.0], &[4, 5]);
        assert!(
            a.assemble_dense_direct(&spec, std::slice::from_ref(&good))
                .is_some()
        );
        // dense as three unpacked fixed32 values.
        let mut list = Vec::new();
        for v in [1.0f32, 2.0, 3.0] {
            list.push(0x0d);
            list.extend(v.to_le_bytes());
        }
        let dense = feature_entry("dense", &field(0x12, &list));
        let rest = Example::from_features([
            ("label", Feature::int64s(vec![1])),
            ("ids", Feature::int64s(vec![4, 5])),
        ])
        .encode_to_vec();
        // `rest` is one `features` field (tag, a one-byte length, its map
        // entries): put the `dense` entry before them.
        let unpacked = field(0x0a, &[&dense[..], &rest[2..]].concat());
        let want = two_step(&a, &spec, std::slice::from_ref(&unpacked)).unwrap();
        assert_eq!(
            want.tensors
                .iter()
                .find(|(n, _)| n == "dense")
                .unwrap()
                .1
                .bytes()[..12],
            [1.0f32, 2.0, 3.0].map(f32::to_le_bytes).concat()[..]
        );
        assert!(a.assemble_dense_direct(&spec, &[unpacked]).is_none());
        let short = ctr_record(1, &[1.0, 2.0], &[4, 5]);
        assert!(two_step(&a, &spec, std::slice::from_ref(&short)).is_err());
        assert!(a.assemble_dense_direct(&spec, &[short]).is_none());
    }

    #[test]
    fn direct_declines_what_it_does_not_handle() {
        let spec = FeatureSpec::new()
            .var_len("ids", DType::Int64)
            .var_len("mask", DType::Int64);
        let a = BatchPlan::new(&spec, 4)
            .pad_all(LengthPolicy::new().max_length(8))
            .build()
            .unwrap();
        let mut parser = ExampleParser::new(&spec);
        let good = record(Some(vec![1, 2, 300]), Some(vec![1, 1, 1]));
        assert!(
            a.assemble_direct(&mut parser, std::slice::from_ref(&good))
                .is_some()
        );
        // Unpacked values (field 1 as varints): the general parser's job.
        let ids = field(0x1a, &[0x08, 0x05, 0x08, 0x06]);
        let unpacked = field(0x0a, &feature_entry("ids", &ids));
        assert_eq!(
            two_step(&a, &spec, std::slice::from_ref(&unpacked)).map(|b| b.real_rows),
            Ok(1)
        );
        assert!(a.assemble_direct(&mut parser, &[unpacked]).is_none());
        // A float list where ints are expected: an error, left to the general path.
        let floats = Example::from_features([("ids", Feature::floats(vec![1.0]))]).encode_to_vec();
        assert!(two_step(&a, &spec, std::slice::from_ref(&floats)).is_err());
        assert!(a.assemble_direct(&mut parser, &[floats]).is_none());
        // A truncated packed run.
        let mut cut = good.clone();
        let at = cut.len() - 1;
        cut[at] = 0x80;
        assert!(a.assemble_direct(&mut parser, &[cut]).is_none());
        // More records than rows.
        assert!(a.assemble_direct(&mut parser, &vec![good; 5]).is_none());
    }
}
