//! Packing: variable-length sequences laid end to end in fixed-length rows,
//! with segment ids and positions so attention can keep them apart.

use super::assemble::{BatchError, BatchErrorKind, CopyError, Dst, compatible, ragged_span};
use super::bucket::Remainder;
use super::buffer::{AlignedBuf, BufferPool};
use super::dtype::TensorType;
use super::placement::{PackRule, RowPlanner};
use super::plan::{Fill, MaskType, PlanError, Scalar};
use super::provenance::Provenance;
use super::shape::{BatchShape, TensorShape};
use super::tensor::{Batch, Tensor};
use crate::example::{Column, ParsedBatch, Values};
use crate::spec::{DType, FeatureKind, FeatureSpec};

/// Name of the segment id tensor: 1, 2, … for the sequences of a row in
/// order, 0 for padding.
pub const SEGMENT_IDS: &str = "segment_ids";
/// Name of the position tensor: 0-based index within each sequence, 0 for
/// padding.
pub const POSITIONS: &str = "positions";

/// What to do with a sequence longer than a row.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Overflow {
    /// Fail, naming the record, the feature and its length.
    #[default]
    Error,
    /// Keep the first `row_length` values.
    KeepStart,
    /// Keep the last `row_length` values.
    KeepEnd,
    /// Cut it into pieces of `row_length` (the last shorter), each packed as
    /// a sequence of its own (own segment id, positions from 0).
    Split,
}

impl crate::words::Words for Overflow {
    const SETTING: &'static str = "pack_overflow";
    const WORDS: &'static [crate::words::Word<Self>] = &[
        (&["error"], Overflow::Error),
        (&["keep_start"], Overflow::KeepStart),
        (&["keep_end"], Overflow::KeepEnd),
        (&["split"], Overflow::Split),
    ];
}

impl std::str::FromStr for Overflow {
    type Err = crate::words::UnknownWord;

    /// `error`, `keep_start`, `keep_end` or `split`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        crate::words::read(s)
    }
}

/// Configures a [`Packer`].
#[derive(Clone, Debug)]
pub struct PackPlan {
    spec: FeatureSpec,
    features: Vec<String>,
    row_length: usize,
    batch_size: usize,
    cast: Option<TensorType>,
    overflow: Overflow,
    rule: PackRule,
    pad_value: Scalar,
    masks: bool,
    mask_types: Vec<(String, MaskType)>,
    pool: Option<BufferPool>,
}

impl PackPlan {
    /// Packs the variable-length `features` of `spec` (equal length in each
    /// record, e.g. `input_ids` and `attention_mask`) into batches of
    /// `batch_size` rows of `row_length`.
    pub fn new(
        spec: &FeatureSpec,
        features: &[&str],
        row_length: usize,
        batch_size: usize,
    ) -> Self {
        Self {
            spec: spec.clone(),
            features: features.iter().map(|s| s.to_string()).collect(),
            row_length,
            batch_size,
            cast: None,
            overflow: Overflow::Error,
            rule: PackRule::default(),
            pad_value: Scalar::Int(0),
            masks: false,
            mask_types: Vec::new(),
            pool: None,
        }
    }

    /// Also emits `<feature>_mask` per packed feature (1 on values, 0 on
    /// padding; the feature's type, u8 for f32), as padded batches have, so
    /// a training step reads packed and padded batches alike.
    pub fn masks(mut self, masks: bool) -> Self {
        self.masks = masks;
        self
    }

    /// With [`masks`](Self::masks): the mask of `feature` as `mask` says
    /// (default [`MaskType::Auto`]; [`MaskType::None`] leaves it out).
    pub fn mask(mut self, feature: &str, mask: MaskType) -> Self {
        self.mask_types.push((feature.to_string(), mask));
        self
    }

    /// Emits integer features as `dtype` (i32 or i64).
    pub fn cast_ints(mut self, dtype: TensorType) -> Self {
        self.cast = Some(dtype);
        self
    }

    /// What to do with sequences longer than a row (default [`Overflow::Error`]).
    pub fn overflow(mut self, overflow: Overflow) -> Self {
        self.overflow = overflow;
        self
    }

    /// How rows are chosen, and how many segments a row may hold (default:
    /// first fit, no cap).
    pub fn rule(mut self, rule: PackRule) -> Self {
        self.rule = rule;
        self
    }

    /// The value padding positions hold (default 0).
    pub fn pad_value(mut self, value: impl Into<Scalar>) -> Self {
        self.pad_value = value.into();
        self
    }

    /// Takes buffers from `pool` (default: a pool of its own).
    pub fn pool(mut self, pool: BufferPool) -> Self {
        self.pool = Some(pool);
        self
    }

    /// Checks the plan.
    pub fn build(self) -> Result<Packer, PlanError> {
        if self.batch_size == 0 {
            return Err(PlanError::ZeroBatchSize);
        }
        if self.features.is_empty() {
            return Err(PlanError::NoFeatures);
        }
        for (what, n) in [
            ("row_length", Some(self.row_length)),
            ("max_segments", self.rule.max_segments),
        ] {
            if n == Some(0) {
                return Err(PlanError::ZeroLength {
                    feature: self.features[0].clone(),
                    what,
                });
            }
        }
        if let Some((name, _)) = self
            .mask_types
            .iter()
            .find(|(n, _)| !self.features.contains(n))
        {
            return Err(PlanError::UnknownFeature {
                feature: name.clone(),
            });
        }
        let mut features = Vec::with_capacity(self.features.len());
        for name in &self.features {
            let def = self
                .spec
                .get(name)
                .ok_or_else(|| PlanError::UnknownFeature {
                    feature: name.clone(),
                })?;
            if features.iter().any(|f: &PackFeature| &f.name == name) {
                return Err(PlanError::DuplicateFeature {
                    feature: name.clone(),
                });
            }
            if let FeatureKind::FixedLen { .. } = def.kind {
                return Err(PlanError::NotVarLen {
                    feature: name.clone(),
                });
            }
            let bad = |to| PlanError::BadCast {
                feature: name.clone(),
                from: def.dtype,
                to,
            };
            let dtype = match (def.dtype, self.cast) {
                (DType::Int64 | DType::Int32, Some(t @ (TensorType::I64 | TensorType::I32))) => t,
                (DType::Int64, None) => TensorType::I64,
                (DType::Int32, None) => TensorType::I32,
                (DType::Float32, None | Some(TensorType::F32)) => TensorType::F32,
                (DType::Bytes, _) => {
                    return Err(PlanError::NotNumeric {
                        feature: name.clone(),
                    });
                }
                (_, Some(t)) => return Err(bad(t)),
            };
            let pad = Fill::new(self.pad_value, dtype).ok_or(PlanError::PadValue {
                feature: name.clone(),
                value: self.pad_value,
                dtype,
            })?;
            if name == SEGMENT_IDS || name == POSITIONS {
                return Err(PlanError::DuplicateName { name: name.clone() });
            }
            let mask_type = match self.mask_types.iter().rev().find(|(n, _)| n == name) {
                Some(&(_, m)) => m,
                None => MaskType::Auto,
            };
            let mask = if self.masks {
                mask_type
                    .resolve(dtype)
                    .map(|t| (format!("{name}_mask"), t))
            } else {
                None
            };
            features.push(PackFeature {
                name: name.clone(),
                dtype,
                pad,
                mask,
            });
        }
        let mut names: Vec<&str> = vec![SEGMENT_IDS, POSITIONS];
        for f in &features {
            names.push(&f.name);
            names.extend(f.mask.as_ref().map(|(m, _)| m.as_str()));
        }
        names.sort_unstable();
        if let Some(w) = names.windows(2).find(|w| w[0] == w[1]) {
            return Err(PlanError::DuplicateName {
                name: w[0].to_string(),
            });
        }
        self.row_length
            .checked_mul(self.batch_size)
            .and_then(|n| n.checked_mul(8))
            .filter(|&n| n <= isize::MAX as usize / 2)
            .ok_or_else(|| PlanError::TooLarge {
                feature: self.features[0].clone(),
                dims: vec![self.batch_size, self.row_length],
            })?;
        Ok(Packer {
            row_length: self.row_length,
            batch_size: self.batch_size,
            features,
            overflow: self.rule.overflow(self.overflow),
            pool: self.pool.unwrap_or_default(),
            rows: RowPlanner::new(self.row_length, self.batch_size, self.rule),
            current: None,
        })
    }
}

#[derive(Clone, Debug)]
struct PackFeature {
    name: String,
    dtype: TensorType,
    pad: Fill,
    /// The mask tensor's name and type, when masks are on.
    mask: Option<(String, TensorType)>,
}

/// How many values of a sequence of `len` a packer keeps under `overflow`
/// with rows of `row_length`, and how many it skips first; `None` when the
/// sequence is too long and `overflow` is [`Overflow::Error`].
pub fn kept_span(len: usize, row_length: usize, overflow: Overflow) -> Option<(usize, usize)> {
    if len <= row_length {
        return Some((0, len));
    }
    match overflow {
        Overflow::Error => None,
        Overflow::KeepStart => Some((0, row_length)),
        Overflow::KeepEnd => Some((len - row_length, row_length)),
        Overflow::Split => Some((0, len)),
    }
}

/// A packed feature's column in one parsed batch.
struct Src<'p> {
    values: &'p Values,
    row_splits: &'p [usize],
}

/// The batch being filled.
struct Current {
    values: Vec<AlignedBuf>,
    masks: Vec<Option<AlignedBuf>>,
    segment_ids: AlignedBuf,
    positions: AlignedBuf,
    /// Sequences in each opened row.
    segments: Vec<i32>,
    /// Values written in each opened row: a row's tail is padded once, at
    /// emit (buffers start stale, never filled then overwritten).
    used: Vec<usize>,
    /// (row, record) of each piece placed: the batch's provenance.
    pieces: Vec<(u32, u32)>,
}

/// A sequential operator packing sequences into rows of fixed length.
///
/// Placement follows the plan's [`PackRule`] in arrival order (default
/// first fit: a sequence goes into the first row of the current batch with
/// room for it, else a new row); when all `batch_size` rows are open and
/// none takes it, the batch is emitted and a new one begun ([`RowPlanner`]
/// is this rule on lengths alone). A row's sequences keep their arrival
/// order. Empty sequences take no room and are left out. Output per batch: each feature `[B, L]` (with
/// [`PackPlan::masks`], its `<feature>_mask` after it), [`SEGMENT_IDS`] and
/// [`POSITIONS`] `[B, L]` i32; `real_rows` is the number of rows holding at
/// least one sequence.
pub struct Packer {
    row_length: usize,
    batch_size: usize,
    features: Vec<PackFeature>,
    overflow: Overflow,
    pool: BufferPool,
    rows: RowPlanner,
    current: Option<Current>,
}

impl Packer {
    /// The one shape every batch has.
    pub fn shapes(&self) -> Vec<BatchShape> {
        let shape = vec![self.batch_size, self.row_length];
        let mut tensors: Vec<TensorShape> = Vec::new();
        for f in &self.features {
            tensors.push(TensorShape {
                name: f.name.clone(),
                dtype: f.dtype,
                shape: shape.clone(),
            });
            if let Some((m, t)) = &f.mask {
                tensors.push(TensorShape {
                    name: m.clone(),
                    dtype: *t,
                    shape: shape.clone(),
                });
            }
        }
        for name in [SEGMENT_IDS, POSITIONS] {
            tensors.push(TensorShape {
                name: name.to_string(),
                dtype: TensorType::I32,
                shape: shape.clone(),
            });
        }
        vec![BatchShape { tensors }]
    }

    /// Packs every record of `parsed`, appending finished batches to `out`.
    /// On error the records before the failing one are packed, it and the
    /// rest are not.
    pub fn push_all(
        &mut self,
        parsed: &ParsedBatch,
        out: &mut Vec<Batch>,
    ) -> Result<(), BatchError> {
        let srcs = self.resolve(parsed)?;
        (0..parsed.num_records).try_for_each(|r| self.push_resolved(&srcs, r, None, out))
    }

    /// Packs record `record` of `parsed`, appending any finished batch to
    /// `out`. On error nothing of the record is packed.
    pub fn push(
        &mut self,
        parsed: &ParsedBatch,
        record: usize,
        out: &mut Vec<Batch>,
    ) -> Result<(), BatchError> {
        self.push_checked(parsed, record, None, out)
    }

    /// Packs only the pieces of record `record` that cover `part` of its kept
    /// values (see [`kept_span`]): how a pipeline packs a record split
    /// across two batches, one part in each. `part` starts where the batch
    /// before it ended the record (a multiple of the row length under
    /// [`Overflow::Split`], anywhere under
    /// [`PackStrategy::ConcatSplit`](super::PackStrategy::ConcatSplit)).
    pub fn push_part(
        &mut self,
        parsed: &ParsedBatch,
        record: usize,
        part: std::ops::Range<usize>,
        out: &mut Vec<Batch>,
    ) -> Result<(), BatchError> {
        self.push_checked(parsed, record, Some(part), out)
    }

    /// [`push`](Self::push) or [`push_part`](Self::push_part), after
    /// checking that `record` exists.
    fn push_checked(
        &mut self,
        parsed: &ParsedBatch,
        record: usize,
        part: Option<std::ops::Range<usize>>,
        out: &mut Vec<Batch>,
    ) -> Result<(), BatchError> {
        if record >= parsed.num_records {
            return Err(BatchError::new(
                Some(record),
                None,
                BatchErrorKind::RecordOutOfRange {
                    num_records: parsed.num_records,
                },
            ));
        }
        let srcs = self.resolve(parsed)?;
        self.push_resolved(&srcs, record, part, out)
    }

    /// Rows holding a sequence in the batch being filled.
    pub fn rows_used(&self) -> usize {
        self.rows.rows()
    }

    /// From here on the batch being filled takes sequences into rows from
    /// `row` on; the rows before it that hold none stay padding (see
    /// [`RowPlanner::fence`]).
    pub fn fence(&mut self, row: usize) {
        self.rows.fence(row);
    }

    /// Finds and checks the packed features' columns in `parsed`.
    fn resolve<'p>(&self, parsed: &'p ParsedBatch) -> Result<Vec<Src<'p>>, BatchError> {
        let mut srcs = Vec::with_capacity(self.features.len());
        for f in &self.features {
            let name = f.name.as_str();
            let mismatch = |reason| {
                BatchError::new(None, Some(name), BatchErrorKind::ColumnMismatch { reason })
            };
            let Some(col) = parsed.get(name) else {
                return Err(BatchError::new(
                    None,
                    Some(name),
                    BatchErrorKind::MissingColumn,
                ));
            };
            let Column::Ragged {
                values,
                row_splits,
                inner_shape,
            } = col
            else {
                return Err(mismatch("expected a ragged column"));
            };
            if !inner_shape.is_empty() {
                return Err(mismatch("ragged rows have an inner shape"));
            }
            if !compatible(values, f.dtype) {
                return Err(mismatch("values have another type than the plan"));
            }
            srcs.push(Src { values, row_splits });
        }
        Ok(srcs)
    }

    fn push_resolved(
        &mut self,
        srcs: &[Src<'_>],
        record: usize,
        part: Option<std::ops::Range<usize>>,
        out: &mut Vec<Batch>,
    ) -> Result<(), BatchError> {
        // Check everything before changing any state.
        let span = |i: usize| -> Result<(usize, usize), BatchError> {
            let (src, f) = (&srcs[i], &self.features[i]);
            ragged_span(src.row_splits, src.values.len(), record).ok_or_else(|| {
                BatchError::new(
                    Some(record),
                    Some(&f.name),
                    BatchErrorKind::ColumnMismatch {
                        reason: "row splits do not cover the record",
                    },
                )
            })
        };
        let len = span(0)?.1;
        for i in 1..srcs.len() {
            let actual = span(i)?.1;
            if actual != len {
                return Err(BatchError::new(
                    Some(record),
                    Some(&self.features[i].name),
                    BatchErrorKind::LengthMismatch {
                        expected: len,
                        actual,
                    },
                ));
            }
        }
        let l = self.row_length;
        let Some((skip, keep)) = kept_span(len, l, self.overflow) else {
            return Err(BatchError::new(
                Some(record),
                Some(&self.features[0].name),
                BatchErrorKind::TooLong {
                    length: len,
                    limit: l,
                },
            ));
        };
        let (first, end) = match part {
            None => (0, keep),
            Some(p) if p.start <= p.end && p.end <= keep => (p.start, p.end),
            Some(_) => {
                return Err(BatchError::new(
                    Some(record),
                    Some(&self.features[0].name),
                    BatchErrorKind::ColumnMismatch {
                        reason: "the packed part is outside the record",
                    },
                ));
            }
        };
        for (i, (src, f)) in srcs.iter().zip(&self.features).enumerate() {
            check_fits(src.values, span(i)?.0 + skip, keep, f.dtype)
                .map_err(|e| e.into_error(record, &f.name))?;
        }

        let mut done = first;
        while done < end {
            let (row, at, n) = self.place((end - done).min(l), out);
            let Some(cur) = self.current.as_mut() else {
                break;
            };
            let off = row * l + at;
            for ((src, f), buf) in srcs.iter().zip(&self.features).zip(cur.values.iter_mut()) {
                let start = src.row_splits.get(record).copied().unwrap_or(0);
                Dst::new(buf, f.dtype)
                    .copy(src.values, start + skip + done, n, off)
                    .map_err(|e| e.into_error(record, &f.name))?;
            }
            for (mask, f) in cur.masks.iter_mut().zip(&self.features) {
                if let (Some(buf), Some((_, t))) = (mask.as_mut(), &f.mask) {
                    Dst::new(buf, *t).fill(off, n, Fill::one_or_zero(*t, true));
                }
            }
            cur.segments[row] += 1;
            cur.used[row] = at + n;
            cur.pieces.push((row as u32, record as u32));
            let seg = cur.segments[row];
            if let Some(s) = cur.segment_ids.as_mut_slice::<i32>().get_mut(off..off + n) {
                s.fill(seg);
            }
            if let Some(p) = cur.positions.as_mut_slice::<i32>().get_mut(off..off + n) {
                p.iter_mut().zip(0i32..).for_each(|(p, i)| *p = i);
            }
            done += n;
        }
        Ok(())
    }

    /// Finds room for `n <= row_length` values: (row, offset in the row,
    /// values placed there).
    fn place(&mut self, n: usize, out: &mut Vec<Batch>) -> (usize, usize, usize) {
        let p = self.rows.place(n);
        if p.closed || self.current.is_none() {
            if let Some(batch) = self.emit() {
                out.push(batch);
            }
            self.current = Some(self.begin());
        }
        if let Some(cur) = self.current.as_mut()
            && cur.segments.len() <= p.row
        {
            cur.segments.resize(p.row + 1, 0);
            cur.used.resize(p.row + 1, 0);
        }
        (p.row, p.at, p.len)
    }

    fn begin(&self) -> Current {
        let n = self.batch_size * self.row_length;
        let values = self
            .features
            .iter()
            .map(|f| self.pool.take_stale(n * f.dtype.size()))
            .collect();
        let masks = self
            .features
            .iter()
            .map(|f| {
                f.mask
                    .as_ref()
                    .map(|(_, t)| self.pool.take_stale(n * t.size()))
            })
            .collect();
        Current {
            values,
            masks,
            segment_ids: self.pool.take_stale(n * TensorType::I32.size()),
            positions: self.pool.take_stale(n * TensorType::I32.size()),
            segments: Vec::with_capacity(self.batch_size),
            used: Vec::with_capacity(self.batch_size),
            pieces: Vec::new(),
        }
    }

    /// Pads every row after its values (rows never opened entirely): pad
    /// value, mask 0, segment id 0, position 0.
    fn pad_tails(&self, cur: &mut Current) {
        let l = self.row_length;
        for r in 0..self.batch_size {
            let used = cur.used.get(r).copied().unwrap_or(0);
            let (at, n) = (r * l + used, l - used);
            for (f, buf) in self.features.iter().zip(cur.values.iter_mut()) {
                Dst::new(buf, f.dtype).fill(at, n, f.pad);
            }
            for (mask, f) in cur.masks.iter_mut().zip(&self.features) {
                if let (Some(buf), Some((_, t))) = (mask.as_mut(), &f.mask) {
                    Dst::new(buf, *t).fill(at, n, Fill::zero(*t));
                }
            }
            for buf in [&mut cur.segment_ids, &mut cur.positions] {
                Dst::new(buf, TensorType::I32).fill(at, n, Fill::I32(0));
            }
        }
    }

    fn emit(&mut self) -> Option<Batch> {
        let cur = self.current.take()?;
        Some(self.emit_current(cur))
    }

    /// `cur` padded and made a batch.
    fn emit_current(&self, mut cur: Current) -> Batch {
        self.pad_tails(&mut cur);
        let rows = cur.segments.len();
        let shape = vec![self.batch_size, self.row_length];
        let mut tensors: Vec<(String, Tensor)> = Vec::new();
        for ((f, buf), mask) in self.features.iter().zip(cur.values).zip(cur.masks) {
            tensors.push((
                f.name.clone(),
                Tensor::from_parts(f.dtype, shape.clone(), buf),
            ));
            if let (Some((m, t)), Some(buf)) = (&f.mask, mask) {
                tensors.push((m.clone(), Tensor::from_parts(*t, shape.clone(), buf)));
            }
        }
        tensors.push((
            SEGMENT_IDS.to_string(),
            Tensor::from_parts(TensorType::I32, shape.clone(), cur.segment_ids),
        ));
        tensors.push((
            POSITIONS.to_string(),
            Tensor::from_parts(TensorType::I32, shape, cur.positions),
        ));
        let mut batch = Batch::new(tensors, rows);
        batch.provenance = Provenance::packed(cur.pieces);
        batch
    }

    /// A batch of padding only (`real_rows == 0`), for a host that must
    /// reach a batch count its records do not fill.
    pub fn empty_batch(&mut self) -> Batch {
        self.rows.finish();
        self.current = None;
        self.emit_current(self.begin())
    }

    /// Ends the input: the batch being filled, padded, unless `remainder` is
    /// [`Remainder::Drop`] or it holds nothing.
    pub fn finish(&mut self, remainder: Remainder) -> Option<Batch> {
        self.rows.finish();
        let batch = self.emit()?;
        (remainder == Remainder::Pad).then_some(batch)
    }
}

/// Checks that `n` values from `start` exist and fit `dtype`.
fn check_fits(values: &Values, start: usize, n: usize, dtype: TensorType) -> Result<(), CopyError> {
    let end = start.checked_add(n).ok_or(CopyError::Bounds)?;
    if end > values.len() {
        return Err(CopyError::Bounds);
    }
    if let (Values::Int64(v), TensorType::I32) = (values, dtype)
        && let Some(&bad) = v
            .get(start..end)
            .and_then(|s| s.iter().find(|&&x| i32::try_from(x).is_err()))
    {
        return Err(CopyError::Overflow(bad, TensorType::I32));
    }
    Ok(())
}
