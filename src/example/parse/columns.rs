//! What a parse gives: the values, columns and batches of parsed features.

use crate::spec::DType;

/// The values of one column, all records of the batch end to end.
#[derive(Clone, Debug, PartialEq)]
pub enum Values {
    /// Values of an `Int64List`.
    Int64(Vec<i64>),
    /// int64 values narrowed to int32 on the way (overflow is an error):
    /// what XLA programs usually take for token ids.
    Int32(Vec<i32>),
    /// Values of a `FloatList`.
    Float32(Vec<f32>),
    /// Values of a `BytesList`, end to end in one buffer.
    Bytes(BytesValues),
}

impl Values {
    /// Number of values.
    pub fn len(&self) -> usize {
        match self {
            Values::Int64(v) => v.len(),
            Values::Int32(v) => v.len(),
            Values::Float32(v) => v.len(),
            Values::Bytes(v) => v.len(),
        }
    }

    /// True when there are no values.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The dtype these values have.
    pub fn dtype(&self) -> DType {
        match self {
            Values::Int64(_) => DType::Int64,
            Values::Int32(_) => DType::Int32,
            Values::Float32(_) => DType::Float32,
            Values::Bytes(_) => DType::Bytes,
        }
    }

    /// The values as int64, if that is their type.
    pub fn as_int64(&self) -> Option<&[i64]> {
        match self {
            Values::Int64(v) => Some(v),
            _ => None,
        }
    }

    /// The values as int32, if that is their type.
    pub fn as_int32(&self) -> Option<&[i32]> {
        match self {
            Values::Int32(v) => Some(v),
            _ => None,
        }
    }

    /// The values as float32, if that is their type.
    pub fn as_float32(&self) -> Option<&[f32]> {
        match self {
            Values::Float32(v) => Some(v),
            _ => None,
        }
    }

    /// The values as byte strings, if that is their type.
    pub fn as_bytes(&self) -> Option<&BytesValues> {
        match self {
            Values::Bytes(v) => Some(v),
            _ => None,
        }
    }
}

/// Byte strings stored end to end: value `i` is `data[offsets[i]..offsets[i + 1]]`.
/// One buffer for the whole column instead of one allocation per value.
#[derive(Clone, Debug, PartialEq)]
pub struct BytesValues {
    /// All values, concatenated.
    pub data: Vec<u8>,
    /// `len() + 1` offsets into `data`, starting with 0.
    pub offsets: Vec<usize>,
}

impl Default for BytesValues {
    fn default() -> Self {
        Self::new()
    }
}

impl BytesValues {
    /// No values.
    pub fn new() -> Self {
        Self {
            data: Vec::new(),
            offsets: vec![0],
        }
    }

    /// No values, with room for `values` values of `bytes` bytes in all.
    pub fn with_capacity(values: usize, bytes: usize) -> Self {
        let mut offsets = Vec::with_capacity(values + 1);
        offsets.push(0);
        Self {
            data: Vec::with_capacity(bytes),
            offsets,
        }
    }

    /// Number of values.
    pub fn len(&self) -> usize {
        self.offsets.len().saturating_sub(1)
    }

    /// True when there are no values.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Value `i`.
    ///
    /// # Panics
    /// When `i >= self.len()`.
    pub fn get(&self, i: usize) -> &[u8] {
        &self.data[self.offsets[i]..self.offsets[i + 1]]
    }

    /// The values in order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = &[u8]> + '_ {
        self.offsets
            .windows(2)
            .map(|w| self.data.get(w[0]..w[1]).unwrap_or(&[]))
    }

    /// Appends a value.
    pub fn push(&mut self, value: &[u8]) {
        if self.offsets.is_empty() {
            self.offsets.push(0);
        }
        self.data.extend_from_slice(value);
        self.offsets.push(self.data.len());
    }
}

impl<B: AsRef<[u8]>> FromIterator<B> for BytesValues {
    fn from_iter<I: IntoIterator<Item = B>>(iter: I) -> Self {
        let mut out = BytesValues::new();
        for v in iter {
            out.push(v.as_ref());
        }
        out
    }
}

/// One parsed feature for the whole batch.
#[derive(Clone, Debug, PartialEq)]
pub enum Column {
    /// A fixed-length feature: `shape` is `[batch, ..feature shape]` and
    /// `values` holds `shape.product()` values in row-major order.
    Dense { shape: Vec<usize>, values: Values },
    /// A variable-length feature, or a fixed-length feature list: record
    /// `i` owns rows `row_splits[i]..row_splits[i + 1]`; each row holds
    /// `inner_shape.product()` values (`inner_shape` is `[]` for a VarLen
    /// feature, the step shape for a FixedLen sequence feature).
    Ragged {
        values: Values,
        row_splits: Vec<usize>,
        inner_shape: Vec<usize>,
    },
    /// A variable-length feature list: record `i` has steps
    /// `outer_splits[i]..outer_splits[i + 1]`; step `j` has values
    /// `inner_splits[j]..inner_splits[j + 1]`.
    Ragged2 {
        values: Values,
        outer_splits: Vec<usize>,
        inner_splits: Vec<usize>,
    },
}

impl Column {
    /// The column's values, whatever its layout.
    pub fn values(&self) -> &Values {
        match self {
            Column::Dense { values, .. }
            | Column::Ragged { values, .. }
            | Column::Ragged2 { values, .. } => values,
        }
    }
}

/// The columns parsed from a batch of records, in spec order.
#[derive(Clone, Debug, PartialEq)]
pub struct ParsedBatch {
    /// Number of records parsed.
    pub num_records: usize,
    /// `(feature name, column)` in the order of the spec.
    pub columns: Vec<(String, Column)>,
}

impl ParsedBatch {
    /// The column of feature `name`.
    pub fn get(&self, name: &str) -> Option<&Column> {
        self.columns.iter().find(|(n, _)| n == name).map(|(_, c)| c)
    }
}

/// The context and feature-list columns parsed from `SequenceExample`s.
#[derive(Clone, Debug, PartialEq)]
pub struct SequenceBatch {
    /// Context features, one row per record.
    pub context: ParsedBatch,
    /// Feature lists, ragged over steps.
    pub sequence: ParsedBatch,
}
