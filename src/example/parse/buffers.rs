//! The growing column buffers of a batch, recycled from an earlier batch's
//! columns.

use super::columns::{BytesValues, Column, ParsedBatch, Values};
use super::error::ParseErrorKind;
use crate::example::wire::Span;
use crate::spec::DType;

/// The growing values of one column.
pub(super) enum Buf {
    I64(Vec<i64>),
    I32(Vec<i32>),
    F32(Vec<f32>),
    Bytes(BytesValues),
}

impl Buf {
    fn new(dtype: DType, values: usize, bytes: usize) -> Self {
        match dtype {
            DType::Int64 => Buf::I64(Vec::with_capacity(values)),
            DType::Int32 => Buf::I32(Vec::with_capacity(values)),
            DType::Float32 => Buf::F32(Vec::with_capacity(values)),
            DType::Bytes => Buf::Bytes(BytesValues::with_capacity(values, bytes)),
        }
    }

    /// An empty buffer of `dtype`, reusing the allocation of `old` when it
    /// has that dtype, with room for `values` values (and `bytes` bytes).
    pub(super) fn recycle(dtype: DType, old: Option<Values>, values: usize, bytes: usize) -> Self {
        let mut buf = match (dtype, old) {
            (DType::Int64, Some(Values::Int64(mut v))) => {
                v.clear();
                Buf::I64(v)
            }
            (DType::Int32, Some(Values::Int32(mut v))) => {
                v.clear();
                Buf::I32(v)
            }
            (DType::Float32, Some(Values::Float32(mut v))) => {
                v.clear();
                Buf::F32(v)
            }
            (DType::Bytes, Some(Values::Bytes(mut v))) => {
                v.data.clear();
                v.offsets.clear();
                v.offsets.push(0);
                Buf::Bytes(v)
            }
            _ => return Buf::new(dtype, values, bytes),
        };
        match &mut buf {
            Buf::I64(v) => v.reserve(values),
            Buf::I32(v) => v.reserve(values),
            Buf::F32(v) => v.reserve(values),
            Buf::Bytes(v) => {
                v.offsets.reserve(values);
                v.data.reserve(bytes);
            }
        }
        buf
    }

    pub(super) fn len(&self) -> usize {
        match self {
            Buf::I64(v) => v.len(),
            Buf::I32(v) => v.len(),
            Buf::F32(v) => v.len(),
            Buf::Bytes(v) => v.len(),
        }
    }

    fn dtype(&self) -> DType {
        match self {
            Buf::I64(_) => DType::Int64,
            Buf::I32(_) => DType::Int32,
            Buf::F32(_) => DType::Float32,
            Buf::Bytes(_) => DType::Bytes,
        }
    }

    pub(super) fn byte_len(&self) -> usize {
        match self {
            Buf::Bytes(v) => v.data.len(),
            _ => 0,
        }
    }

    pub(super) fn into_values(self) -> Values {
        match self {
            Buf::I64(v) => Values::Int64(v),
            Buf::I32(v) => Values::Int32(v),
            Buf::F32(v) => Values::Float32(v),
            Buf::Bytes(v) => Values::Bytes(v),
        }
    }

    /// Appends `count` values of a default: all of them, or one repeated.
    pub(super) fn extend_default(
        &mut self,
        default: &Values,
        count: usize,
    ) -> Result<(), ParseErrorKind> {
        let given = default.len();
        if given != count && given != 1 {
            return Err(ParseErrorKind::WrongCount {
                expected: count,
                actual: given,
            });
        }
        fn fill<T: Copy>(out: &mut Vec<T>, d: &[T], count: usize) {
            match d {
                [one] if count != 1 => out.extend(std::iter::repeat_n(*one, count)),
                _ => out.extend_from_slice(d),
            }
        }
        match (self, default) {
            (Buf::I64(out), Values::Int64(d)) => fill(out, d, count),
            (Buf::I32(out), Values::Int32(d)) => fill(out, d, count),
            (Buf::F32(out), Values::Float32(d)) => fill(out, d, count),
            (Buf::Bytes(out), Values::Bytes(d)) => {
                if given == count {
                    for v in d.iter() {
                        out.push(v);
                    }
                } else {
                    let one = d.iter().next().unwrap_or(&[]);
                    for _ in 0..count {
                        out.push(one);
                    }
                }
            }
            // Defaults are converted to the feature's dtype when the parser
            // is built, and the spec checks their type.
            (buf, d) => {
                return Err(ParseErrorKind::TypeMismatch {
                    expected: buf.dtype(),
                    actual: d.dtype().wire_kind(),
                });
            }
        }
        Ok(())
    }
}

/// The buffers of a column from an earlier batch, for reuse.
pub(super) struct Parts {
    pub(super) values: Option<Values>,
    pub(super) splits: Vec<usize>,
    pub(super) inner: Vec<usize>,
}

impl Parts {
    fn none() -> Self {
        Parts {
            values: None,
            splits: Vec::new(),
            inner: Vec::new(),
        }
    }

    fn of(column: Column) -> Self {
        match column {
            Column::Dense { values, .. } => Parts {
                values: Some(values),
                ..Parts::none()
            },
            Column::Ragged {
                values, row_splits, ..
            } => Parts {
                values: Some(values),
                splits: row_splits,
                inner: Vec::new(),
            },
            Column::Ragged2 {
                values,
                outer_splits,
                inner_splits,
            } => Parts {
                values: Some(values),
                splits: outer_splits,
                inner: inner_splits,
            },
        }
    }
}

/// Splits starting with 0, reusing `v`'s allocation, with room for `n` more.
pub(super) fn fresh_splits(mut v: Vec<usize>, n: usize) -> Vec<usize> {
    v.clear();
    v.reserve(n + 1);
    v.push(0);
    v
}

/// The columns of `batch` in order, as reusable parts (then none forever).
pub(super) fn recycled(batch: &mut ParsedBatch) -> impl Iterator<Item = Parts> {
    std::mem::take(&mut batch.columns)
        .into_iter()
        .map(|(_, c)| Parts::of(c))
        .chain(std::iter::repeat_with(Parts::none))
}

#[inline]
pub(super) fn bytes_of(rec: &[u8], span: Span) -> &[u8] {
    rec.get(span.start..span.end).unwrap_or(&[])
}
