//! A set of features (an Example, or a SequenceExample's context): the
//! spec compiled once, and the columns of a batch built record by record.

use super::buffers::{Buf, Parts, fresh_splits};
use super::columns::{Column, ParsedBatch, Values};
use super::decode::{Decoded, decode_feature};
use super::error::{ParseError, ParseErrorKind};
use super::lookup::{NameIndex, scan_map};
use crate::example::wire::{Span, WireError};
use crate::spec::{DType, DefaultValue, FeatureKind, FeatureSpec};

/// A default converted to the feature's dtype, or the int64 value that does
/// not fit an int32 feature.
type DefaultFill = Result<Values, i64>;

pub(super) struct Fixed {
    shape: Vec<usize>,
    count: usize,
    default: Option<DefaultFill>,
}

pub(super) struct Compiled {
    pub(super) name: String,
    pub(super) dtype: DType,
    /// `None` for a variable-length feature.
    pub(super) fixed: Option<Fixed>,
}

fn convert_default(dtype: DType, d: &DefaultValue) -> DefaultFill {
    Ok(match (dtype, d) {
        (DType::Int32, DefaultValue::Int64(v)) => Values::Int32(
            v.iter()
                .map(|&x| i32::try_from(x).map_err(|_| x))
                .collect::<Result<_, _>>()?,
        ),
        (_, DefaultValue::Int64(v)) => Values::Int64(v.clone()),
        (_, DefaultValue::Float32(v)) => Values::Float32(v.clone()),
        (_, DefaultValue::Bytes(v)) => Values::Bytes(v.iter().collect()),
    })
}

pub(super) fn shape_count(shape: &[usize]) -> usize {
    shape
        .iter()
        .try_fold(1usize, |a, &d| a.checked_mul(d))
        .unwrap_or(usize::MAX)
}

/// Upper bound on values reserved up front for one column: beyond it the
/// column grows as it fills (a spec with an absurd shape must not allocate
/// before any record asks for it).
pub(super) const MAX_RESERVE: usize = 1 << 24;

/// Room to reserve for `records` records at `per_record` each (from the
/// last batch), with an eighth to spare: a column that outgrows its
/// reservation near the end of a batch copies itself whole.
pub(super) fn estimate(per_record: usize, records: usize) -> usize {
    let n = per_record.saturating_mul(records);
    n.saturating_add(n / 8).saturating_add(1024)
}

/// The columns of one batch while they fill.
pub(super) struct ColumnBuilder {
    buf: Buf,
    /// Row splits of a variable-length feature (empty for fixed-length).
    splits: Vec<usize>,
}

/// Parses a set of features out of `Features` maps. Used for `Example`s and
/// for the context of `SequenceExample`s.
pub(super) struct FeatureSet {
    pub(super) features: Vec<Compiled>,
    pub(super) index: NameIndex,
    /// Per feature: where its final entry lies in the current record.
    pub(super) slots: Vec<Option<Span>>,
    /// `Example` semantics: a `Feature` with no list is absent for a
    /// fixed-length feature (TensorFlow's `parse_example`). Otherwise it has
    /// zero values (`parse_sequence_example`'s context).
    empty_is_absent: bool,
    /// Values and bytes per record seen in the last batch, per feature, to
    /// reserve column capacity up front.
    hints: Vec<(usize, usize)>,
}

impl FeatureSet {
    pub(super) fn new(spec: &FeatureSpec, empty_is_absent: bool) -> Self {
        let features: Vec<Compiled> = spec
            .features()
            .iter()
            .map(|f| Compiled {
                name: f.name.clone(),
                dtype: f.dtype,
                fixed: match &f.kind {
                    FeatureKind::FixedLen { shape, default } => Some(Fixed {
                        shape: shape.clone(),
                        count: shape_count(shape),
                        default: default.as_ref().map(|d| convert_default(f.dtype, d)),
                    }),
                    FeatureKind::VarLen => None,
                },
            })
            .collect();
        let index = NameIndex::new(features.iter().map(|f| f.name.as_str()));
        let n = features.len();
        Self {
            features,
            index,
            slots: vec![None; n],
            empty_is_absent,
            hints: vec![(0, 0); n],
        }
    }

    /// Column builders for a batch of `records`, reusing `old` buffers.
    pub(super) fn begin(
        &self,
        records: usize,
        old: impl Iterator<Item = Parts>,
    ) -> Vec<ColumnBuilder> {
        self.features
            .iter()
            .zip(&self.hints)
            .zip(old)
            .map(|((f, &(values, bytes)), parts)| {
                let values = match &f.fixed {
                    Some(fx) => fx.count.saturating_mul(records),
                    None => estimate(values, records),
                };
                let bytes = estimate(bytes, records);
                ColumnBuilder {
                    buf: Buf::recycle(
                        f.dtype,
                        parts.values,
                        values.min(MAX_RESERVE),
                        bytes.min(MAX_RESERVE),
                    ),
                    splits: if f.fixed.is_none() {
                        fresh_splits(parts.splits, records)
                    } else {
                        Vec::new()
                    },
                }
            })
            .collect()
    }

    #[inline]
    pub(super) fn clear_slots(&mut self) {
        self.slots.fill(None);
    }

    /// Records where the requested features of one `Features` message lie.
    #[inline]
    pub(super) fn scan_features(&mut self, rec: &[u8], span: Span) -> Result<(), WireError> {
        let features = &self.features;
        let slots = &mut self.slots;
        let empty_is_absent = self.empty_is_absent;
        scan_map(rec, span, &self.index, |i, value| {
            // TensorFlow skips an empty `Feature` of a fixed-length feature
            // before it counts as seen, so it hides no earlier entry.
            if value.is_empty() && empty_is_absent && features[i].fixed.is_some() {
                return;
            }
            slots[i] = Some(value);
        })
    }

    /// Decodes the features found in record `r` onto the columns.
    pub(super) fn finish_record(
        &self,
        rec: &[u8],
        r: usize,
        cols: &mut [ColumnBuilder],
    ) -> Result<(), ParseError> {
        for ((f, slot), col) in self.features.iter().zip(&self.slots).zip(cols.iter_mut()) {
            let err = |kind| ParseError {
                record: r,
                feature: Some(f.name.clone()),
                kind,
            };
            match &f.fixed {
                None => {
                    if let Some(span) = *slot {
                        decode_feature(rec, span, f.dtype, &mut col.buf).map_err(err)?;
                    }
                    col.splits.push(col.buf.len());
                }
                Some(fx) => {
                    let decoded = match *slot {
                        Some(span) => {
                            decode_feature(rec, span, f.dtype, &mut col.buf).map_err(err)?
                        }
                        None => Decoded::NoList,
                    };
                    let got = match decoded {
                        Decoded::Values(n) => n,
                        Decoded::NoList if slot.is_some() && !self.empty_is_absent => 0,
                        Decoded::NoList => {
                            match &fx.default {
                                None => {
                                    return Err(err(ParseErrorKind::Missing { dtype: f.dtype }));
                                }
                                Some(Err(value)) => {
                                    return Err(err(ParseErrorKind::Int32Overflow {
                                        value: *value,
                                    }));
                                }
                                Some(Ok(d)) => col.buf.extend_default(d, fx.count).map_err(err)?,
                            }
                            continue;
                        }
                    };
                    if got != fx.count {
                        return Err(err(ParseErrorKind::WrongCount {
                            expected: fx.count,
                            actual: got,
                        }));
                    }
                }
            }
        }
        Ok(())
    }

    pub(super) fn finish(&mut self, cols: Vec<ColumnBuilder>, records: usize) -> ParsedBatch {
        let columns = self
            .features
            .iter()
            .zip(cols)
            .zip(self.hints.iter_mut())
            .map(|((f, col), hint)| {
                if records > 0 {
                    *hint = (
                        col.buf.len().div_ceil(records),
                        col.buf.byte_len().div_ceil(records),
                    );
                }
                let values = col.buf.into_values();
                let column = match &f.fixed {
                    Some(fx) => {
                        let mut shape = Vec::with_capacity(fx.shape.len() + 1);
                        shape.push(records);
                        shape.extend_from_slice(&fx.shape);
                        Column::Dense { shape, values }
                    }
                    None => Column::Ragged {
                        values,
                        row_splits: col.splits,
                        inner_shape: Vec::new(),
                    },
                };
                (f.name.clone(), column)
            })
            .collect();
        ParsedBatch {
            num_records: records,
            columns,
        }
    }
}
