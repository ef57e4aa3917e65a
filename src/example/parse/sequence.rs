//! `tf.train.SequenceExample` records: [`SequenceParser`].

use super::buffers::{Buf, fresh_splits, recycled};
use super::columns::{Column, ParsedBatch, SequenceBatch};
use super::decode::{Decoded, decode_feature};
use super::error::{ParseError, ParseErrorKind, malformed};
use super::feature_set::{FeatureSet, MAX_RESERVE, estimate, shape_count};
use super::lookup::{NameIndex, scan_map};
use crate::example::wire::{Cursor, Span, TAG_1_LEN, TAG_2_LEN, WireError};
use crate::spec::{DType, SequenceKind, SequenceSpec};

struct SeqCompiled {
    name: String,
    dtype: DType,
    /// Step shape and values per step of a fixed-length feature list.
    fixed: Option<(Vec<usize>, usize)>,
    /// A record without this list is an error (not zero steps).
    required: bool,
}

struct SeqBuilder {
    buf: Buf,
    /// Per record: its steps are `outer[i]..outer[i + 1]`.
    outer: Vec<usize>,
    /// Per step of a variable-length feature list: its values.
    inner: Vec<usize>,
}

/// Parses batches of serialized `tf.train.SequenceExample`s by a
/// [`SequenceSpec`], like `tf.io.parse_sequence_example`.
pub struct SequenceParser {
    context: FeatureSet,
    features: Vec<SeqCompiled>,
    index: NameIndex,
    slots: Vec<Option<Span>>,
    /// (values, steps, bytes) per record in the last batch, per feature list.
    hints: Vec<(usize, usize, usize)>,
}

impl SequenceParser {
    /// A parser for `spec`.
    pub fn new(spec: &SequenceSpec) -> Self {
        let features: Vec<SeqCompiled> = spec
            .sequence()
            .iter()
            .map(|f| SeqCompiled {
                name: f.name.clone(),
                dtype: f.dtype,
                fixed: match &f.kind {
                    SequenceKind::FixedLen { shape } => Some((shape.clone(), shape_count(shape))),
                    SequenceKind::VarLen => None,
                },
                required: spec.required().contains(&f.name),
            })
            .collect();
        let index = NameIndex::new(features.iter().map(|f| f.name.as_str()));
        let n = features.len();
        Self {
            context: FeatureSet::new(spec.context(), false),
            features,
            index,
            slots: vec![None; n],
            hints: vec![(0, 0, 0); n],
        }
    }

    /// Parses a batch of serialized `SequenceExample`s. Stops at the first
    /// bad record.
    pub fn parse<R: AsRef<[u8]>>(&mut self, records: &[R]) -> Result<SequenceBatch, ParseError> {
        let empty = || ParsedBatch {
            num_records: 0,
            columns: Vec::new(),
        };
        let mut out = SequenceBatch {
            context: empty(),
            sequence: empty(),
        };
        self.parse_into(records, &mut out)?;
        Ok(out)
    }

    /// Like [`SequenceParser::parse`], but fills `out`, reusing the buffers
    /// of the batch it holds. On error `out` is left empty.
    pub fn parse_into<R: AsRef<[u8]>>(
        &mut self,
        records: &[R],
        out: &mut SequenceBatch,
    ) -> Result<(), ParseError> {
        let n = records.len();
        let mut ctx = self.context.begin(n, recycled(&mut out.context));
        out.context.num_records = 0;
        out.sequence.num_records = 0;
        let mut seq: Vec<SeqBuilder> = self
            .features
            .iter()
            .zip(&self.hints)
            .zip(recycled(&mut out.sequence))
            .map(|((f, &(values, steps, bytes)), parts)| SeqBuilder {
                buf: Buf::recycle(
                    f.dtype,
                    parts.values,
                    estimate(values, n).min(MAX_RESERVE),
                    estimate(bytes, n).min(MAX_RESERVE),
                ),
                outer: fresh_splits(parts.splits, n),
                inner: if f.fixed.is_none() {
                    fresh_splits(parts.inner, estimate(steps, n).min(MAX_RESERVE))
                } else {
                    Vec::new()
                },
            })
            .collect();
        for (r, rec) in records.iter().enumerate() {
            let rec = rec.as_ref();
            self.context.clear_slots();
            self.slots.fill(None);
            self.scan(rec).map_err(|e| malformed(r, None, e))?;
            self.context.finish_record(rec, r, &mut ctx)?;
            for ((f, slot), b) in self.features.iter().zip(&self.slots).zip(seq.iter_mut()) {
                decode_feature_list(rec, r, f, *slot, b)?;
            }
        }
        let context = self.context.finish(ctx, n);
        let columns = self
            .features
            .iter()
            .zip(seq)
            .zip(self.hints.iter_mut())
            .map(|((f, b), hint)| {
                if n > 0 {
                    *hint = (
                        b.buf.len().div_ceil(n),
                        b.inner.len().saturating_sub(1).div_ceil(n),
                        b.buf.byte_len().div_ceil(n),
                    );
                }
                let values = b.buf.into_values();
                let column = match &f.fixed {
                    Some((shape, _)) => Column::Ragged {
                        values,
                        row_splits: b.outer,
                        inner_shape: shape.clone(),
                    },
                    None => Column::Ragged2 {
                        values,
                        outer_splits: b.outer,
                        inner_splits: b.inner,
                    },
                };
                (f.name.clone(), column)
            })
            .collect();
        *out = SequenceBatch {
            context,
            sequence: ParsedBatch {
                num_records: n,
                columns,
            },
        };
        Ok(())
    }

    fn scan(&mut self, rec: &[u8]) -> Result<(), WireError> {
        let mut c = Cursor::new(rec);
        while !c.at_end() {
            let tag = c.tag()?;
            if tag == TAG_1_LEN {
                let span = c.len_delimited()?;
                self.context.scan_features(rec, span)?;
            } else if tag == TAG_2_LEN {
                let span = c.len_delimited()?;
                let slots = &mut self.slots;
                scan_map(rec, span, &self.index, |i, value| slots[i] = Some(value))?;
            } else {
                c.skip(tag)?;
            }
        }
        Ok(())
    }
}

/// Decodes the `FeatureList` of one record (absent: zero steps).
fn decode_feature_list(
    rec: &[u8],
    r: usize,
    f: &SeqCompiled,
    slot: Option<Span>,
    b: &mut SeqBuilder,
) -> Result<(), ParseError> {
    let err = |kind| ParseError {
        record: r,
        feature: Some(f.name.clone()),
        kind,
    };
    let mut steps = 0usize;
    if slot.is_none() && f.required {
        return Err(err(ParseErrorKind::MissingList));
    }
    if let Some(span) = slot {
        let mut c = Cursor::over(rec, span);
        while !c.at_end() {
            let tag = c.tag().map_err(|e| err(e.into()))?;
            if tag != TAG_1_LEN {
                c.skip(tag).map_err(|e| err(e.into()))?;
                continue;
            }
            let step = c.len_delimited().map_err(|e| err(e.into()))?;
            let got = match decode_feature(rec, step, f.dtype, &mut b.buf).map_err(err)? {
                Decoded::NoList => 0,
                Decoded::Values(n) => n,
            };
            match f.fixed {
                Some((_, count)) if got != count => {
                    return Err(err(ParseErrorKind::WrongCount {
                        expected: count,
                        actual: got,
                    }));
                }
                Some(_) => {}
                None => b.inner.push(b.buf.len()),
            }
            steps += 1;
        }
    }
    let last = b.outer.last().copied().unwrap_or(0);
    b.outer.push(last + steps);
    Ok(())
}

/// Parses a batch of serialized `tf.train.SequenceExample`s by `spec`
/// (`tf.io.parse_sequence_example`). Build a [`SequenceParser`] to parse
/// many batches.
pub fn parse_sequence_examples<R: AsRef<[u8]>>(
    spec: &SequenceSpec,
    records: &[R],
) -> Result<SequenceBatch, ParseError> {
    SequenceParser::new(spec).parse(records)
}
