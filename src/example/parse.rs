//! The schema-directed batch parser: serialized `tf.train.Example` and
//! `tf.train.SequenceExample` records straight into typed columns, with the
//! meaning of `tf.io.parse_example` and `tf.io.parse_sequence_example`.
//!
//! The parser walks the protobuf wire format of each record once, remembers
//! where each requested feature lies (skipping everything else by its length
//! prefix), then decodes just those features into the column buffers of the
//! whole batch. It never builds a general message: no per-record allocation,
//! no `HashMap`, no `String` (docs/architecture.md, Decisions: "Parse late, parse in batches").
//!
//! Semantics (checked against TensorFlow 2.21 on hand-built bytes):
//! - `Int64List` and `FloatList` values may be packed or not.
//! - `Example.features` and map entries may repeat; for each key the last
//!   entry wins, and only that one is decoded (an earlier malformed or
//!   mistyped entry is no error).
//! - A `Feature` with no list set (empty oneof) is *absent* for a
//!   fixed-length feature of an `Example` (its default, or
//!   [`ParseErrorKind::Missing`]) and such an empty entry hides no earlier
//!   entry of its key; for a variable-length feature it has zero values. In
//!   a `SequenceExample` context it has zero values, so a fixed-length
//!   feature gets [`ParseErrorKind::WrongCount`] even with a default.
//! - A present list with the wrong number of values is
//!   [`ParseErrorKind::WrongCount`] even when there is a default (an empty
//!   list does not take the default).
//! - A missing feature list has zero steps; every step of a fixed-length
//!   feature list must hold exactly its shape's values.
//! - Negative int64 values are 10-byte varints; bits past 64 in the tenth
//!   byte are dropped; an 11th byte is [`ParseErrorKind::Malformed`].
//!
//! Where TensorFlow's fast parser (`example_proto_fast_parsing.cc`) departs
//! from protobuf on encodings no serializer writes, this parser follows
//! protobuf (what `tf.train.Example.FromString` reads): several packed runs
//! or a mix of packed and unpacked values in one list are all kept (the
//! fast parser keeps the first run or fails); unknown fields are skipped at
//! every level (it rejects some); a map entry may put its value before its
//! key or leave either out, which is how prost writes an empty `Feature`
//! (it rejects the whole record); the last list set in a `Feature` wins the
//! oneof (it takes the first). Bytes that are not valid protobuf — a
//! truncated packed run, a packed float list whose length is not a multiple
//! of 4, a group — are [`ParseErrorKind::Malformed`], never a panic, where
//! the fast parser sometimes ignores trailing bytes.

use std::fmt;

use super::runs::PackedRuns;
use super::wire::{
    Cursor, Span, TAG_1_FIXED32, TAG_1_LEN, TAG_1_VARINT, TAG_2_LEN, TAG_3_LEN, VarintTarget,
    WireError, count_terminal_bytes, decode_packed_floats, decode_packed_varints,
};
use crate::prefetch::prefetch_ahead;
use crate::spec::{
    DType, DefaultValue, FeatureKind, FeatureSpec, SequenceKind, SequenceSpec, WireKind,
};

// ---------------------------------------------------------------------------
// Output types
// ---------------------------------------------------------------------------

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

// ---------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------

/// A record of the batch could not be parsed by the spec. Parsing stops at
/// the first error; `record` is the index in the batch.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("record {record}{}: {kind}", FeatureLabel(.feature))]
pub struct ParseError {
    /// Index of the record in the batch.
    pub record: usize,
    /// The feature (or feature list) concerned, when the error is in one.
    pub feature: Option<String>,
    /// What was wrong.
    pub kind: ParseErrorKind,
}

struct FeatureLabel<'a>(&'a Option<String>);

impl fmt::Display for FeatureLabel<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Some(name) => write!(f, ", feature {name:?}"),
            None => Ok(()),
        }
    }
}

fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}

/// What was wrong with a record.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum ParseErrorKind {
    /// A fixed-length feature without a default is absent.
    #[error("required feature could not be found (data type: {dtype})")]
    Missing { dtype: DType },
    /// A required feature list ([`SequenceSpec::require`]) is absent.
    #[error("required feature list could not be found")]
    MissingList,
    /// The record holds a different list type than the spec asks for.
    #[error(
        "data types don't match: expected {} values, found {actual} values",
        .expected.wire_kind()
    )]
    TypeMismatch { expected: DType, actual: WireKind },
    /// A fixed-length feature (or one step of a fixed-length feature list)
    /// holds the wrong number of values.
    #[error("expected {expected} value{}, found {actual}", plural(*.expected))]
    WrongCount { expected: usize, actual: usize },
    /// An int64 value read as int32 is out of range.
    #[error("int64 value {value} does not fit in int32")]
    Int32Overflow { value: i64 },
    /// The bytes are not valid protobuf; `offset` is from the start of the record.
    #[error("malformed protobuf at byte {offset} of the record: {message}")]
    Malformed { offset: usize, message: String },
}

impl From<WireError> for ParseErrorKind {
    fn from(e: WireError) -> Self {
        ParseErrorKind::Malformed {
            offset: e.offset,
            message: e.kind.to_string(),
        }
    }
}

// ---------------------------------------------------------------------------
// Column buffers
// ---------------------------------------------------------------------------

/// The growing values of one column.
enum Buf {
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
    fn recycle(dtype: DType, old: Option<Values>, values: usize, bytes: usize) -> Self {
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

    fn len(&self) -> usize {
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

    fn byte_len(&self) -> usize {
        match self {
            Buf::Bytes(v) => v.data.len(),
            _ => 0,
        }
    }

    fn into_values(self) -> Values {
        match self {
            Buf::I64(v) => Values::Int64(v),
            Buf::I32(v) => Values::Int32(v),
            Buf::F32(v) => Values::Float32(v),
            Buf::Bytes(v) => Values::Bytes(v),
        }
    }

    /// Appends `count` values of a default: all of them, or one repeated.
    fn extend_default(&mut self, default: &Values, count: usize) -> Result<(), ParseErrorKind> {
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
struct Parts {
    values: Option<Values>,
    splits: Vec<usize>,
    inner: Vec<usize>,
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
fn fresh_splits(mut v: Vec<usize>, n: usize) -> Vec<usize> {
    v.clear();
    v.reserve(n + 1);
    v.push(0);
    v
}

/// The columns of `batch` in order, as reusable parts (then none forever).
fn recycled(batch: &mut ParsedBatch) -> impl Iterator<Item = Parts> {
    std::mem::take(&mut batch.columns)
        .into_iter()
        .map(|(_, c)| Parts::of(c))
        .chain(std::iter::repeat_with(Parts::none))
}

#[inline]
fn bytes_of(rec: &[u8], span: Span) -> &[u8] {
    rec.get(span.start..span.end).unwrap_or(&[])
}

// ---------------------------------------------------------------------------
// Decoding one tf.train.Feature
// ---------------------------------------------------------------------------

/// What a `Feature` held.
enum Decoded {
    /// No list set (empty oneof).
    NoList,
    /// This many values were appended.
    Values(usize),
}

fn list_kind(tag: u64) -> Option<WireKind> {
    match tag {
        TAG_1_LEN => Some(WireKind::BytesList),
        TAG_2_LEN => Some(WireKind::FloatList),
        TAG_3_LEN => Some(WireKind::Int64List),
        _ => None,
    }
}

fn list_tag(kind: WireKind) -> u64 {
    match kind {
        WireKind::BytesList => TAG_1_LEN,
        WireKind::FloatList => TAG_2_LEN,
        WireKind::Int64List => TAG_3_LEN,
    }
}

/// Decodes the `Feature` message at `span` of `rec` onto `buf` (whose dtype
/// is `dtype`). Protobuf semantics: the last list field set wins the oneof,
/// and repeated occurrences of that same field merge (concatenate).
fn decode_feature(
    rec: &[u8],
    span: Span,
    dtype: DType,
    buf: &mut Buf,
) -> Result<Decoded, ParseErrorKind> {
    // Pass 1: which list is set, and where its final run of fields starts.
    let mut c = Cursor::over(rec, span);
    let mut kind: Option<WireKind> = None;
    let mut run_start = span.start;
    let mut fields = 0usize;
    let mut last_list = Span::default();
    while !c.at_end() {
        let field_start = c.pos();
        let tag = c.tag()?;
        fields += 1;
        match list_kind(tag) {
            Some(k) => {
                last_list = c.len_delimited()?;
                if kind != Some(k) {
                    kind = Some(k);
                    run_start = field_start;
                }
            }
            None => c.skip(tag)?,
        }
    }
    let Some(kind) = kind else {
        return Ok(Decoded::NoList);
    };
    if kind != dtype.wire_kind() {
        return Err(ParseErrorKind::TypeMismatch {
            expected: dtype,
            actual: kind,
        });
    }
    let before = buf.len();
    if fields == 1 {
        // The usual case: exactly one list field.
        decode_list(rec, last_list, buf)?;
    } else {
        let want = list_tag(kind);
        let mut c = Cursor::over(
            rec,
            Span {
                start: run_start,
                end: span.end,
            },
        );
        while !c.at_end() {
            let tag = c.tag()?;
            if tag == want {
                let list = c.len_delimited()?;
                decode_list(rec, list, buf)?;
            } else {
                c.skip(tag)?;
            }
        }
    }
    Ok(Decoded::Values(buf.len() - before))
}

/// Decodes one list message (`Int64List`, `FloatList` or `BytesList`, by the
/// type of `buf`) at `span`.
fn decode_list(rec: &[u8], span: Span, buf: &mut Buf) -> Result<(), ParseErrorKind> {
    match buf {
        Buf::I64(out) => {
            decode_int64_list(rec, span, out)?;
        }
        Buf::I32(out) => {
            if !decode_int64_list(rec, span, out)? {
                // Find the value that does not fit, for the error.
                let mut wide: Vec<i64> = Vec::new();
                decode_int64_list(rec, span, &mut wide)?;
                let value = wide
                    .into_iter()
                    .find(|&v| i32::try_from(v).is_err())
                    .unwrap_or_default();
                return Err(ParseErrorKind::Int32Overflow { value });
            }
        }
        Buf::F32(out) => decode_float_list(rec, span, out)?,
        Buf::Bytes(out) => decode_bytes_list(rec, span, out)?,
    }
    Ok(())
}

/// Returns false when a value does not fit `T`.
#[inline]
fn decode_int64_list<T: VarintTarget>(
    rec: &[u8],
    span: Span,
    out: &mut Vec<T>,
) -> Result<bool, WireError> {
    let mut fits = true;
    let mut c = Cursor::over(rec, span);
    while !c.at_end() {
        let tag = c.tag()?;
        if tag == TAG_1_LEN {
            let packed = c.len_delimited()?;
            fits &= decode_packed_varints(bytes_of(rec, packed), packed.start, out)?;
        } else if tag == TAG_1_VARINT {
            let v = c.varint()?;
            fits &= T::fits(v);
            out.push(T::from_u64(v));
        } else {
            c.skip(tag)?;
        }
    }
    Ok(fits)
}

fn decode_float_list(rec: &[u8], span: Span, out: &mut Vec<f32>) -> Result<(), WireError> {
    let mut c = Cursor::over(rec, span);
    while !c.at_end() {
        let tag = c.tag()?;
        if tag == TAG_1_LEN {
            let packed = c.len_delimited()?;
            decode_packed_floats(bytes_of(rec, packed), packed.start, out)?;
        } else if tag == TAG_1_FIXED32 {
            out.push(f32::from_bits(c.fixed32()?));
        } else {
            c.skip(tag)?;
        }
    }
    Ok(())
}

fn decode_bytes_list(rec: &[u8], span: Span, out: &mut BytesValues) -> Result<(), WireError> {
    let mut c = Cursor::over(rec, span);
    while !c.at_end() {
        let tag = c.tag()?;
        if tag == TAG_1_LEN {
            let v = c.len_delimited()?;
            out.push(bytes_of(rec, v));
        } else {
            c.skip(tag)?;
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// Feature-name lookup
// ---------------------------------------------------------------------------

/// Finds a spec feature by the raw key bytes of a map entry, without
/// allocating: names are bucketed by length, then compared byte for byte.
struct NameIndex {
    /// Names of length `n` (up to [`NameIndex::MAX_BUCKETED`]) in `by_len[n]`.
    by_len: Vec<Vec<(Box<[u8]>, usize)>>,
    /// Longer names.
    long: Vec<(Box<[u8]>, usize)>,
}

impl NameIndex {
    const MAX_BUCKETED: usize = 64;

    fn new<'a>(names: impl Iterator<Item = &'a str>) -> Self {
        let mut by_len: Vec<Vec<(Box<[u8]>, usize)>> = Vec::new();
        let mut long = Vec::new();
        for (i, name) in names.enumerate() {
            let entry = (name.as_bytes().into(), i);
            let n = name.len();
            if n > Self::MAX_BUCKETED {
                long.push(entry);
                continue;
            }
            if by_len.len() <= n {
                by_len.resize_with(n + 1, Vec::new);
            }
            by_len[n].push(entry);
        }
        Self { by_len, long }
    }

    #[inline]
    fn find(&self, key: &[u8]) -> Option<usize> {
        let bucket = if key.len() > Self::MAX_BUCKETED {
            &self.long
        } else {
            self.by_len.get(key.len())?
        };
        bucket
            .iter()
            .find(|(name, _)| **name == *key)
            .map(|&(_, i)| i)
    }
}

/// Scans a map message (`Features` or `FeatureLists`) at `span`: for each
/// entry whose key is in `index`, calls `found(feature index, value span)`.
/// Later entries overwrite earlier ones in the caller's slots, which gives
/// protobuf's last-wins map semantics.
#[inline]
fn scan_map(
    rec: &[u8],
    span: Span,
    index: &NameIndex,
    mut found: impl FnMut(usize, Span),
) -> Result<(), WireError> {
    let mut c = Cursor::over(rec, span);
    while !c.at_end() {
        let tag = c.tag()?;
        if tag != TAG_1_LEN {
            c.skip(tag)?;
            continue;
        }
        let entry = c.len_delimited()?;
        let mut e = Cursor::over(rec, entry);
        // A missing key is "", a missing value an empty message.
        let mut key = Span {
            start: entry.start,
            end: entry.start,
        };
        let mut value = key;
        while !e.at_end() {
            let t = e.tag()?;
            match t {
                TAG_1_LEN => key = e.len_delimited()?,
                TAG_2_LEN => value = e.len_delimited()?,
                _ => e.skip(t)?,
            }
        }
        if let Some(i) = index.find(bytes_of(rec, key)) {
            found(i, value);
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// A set of features (an Example, or a SequenceExample's context)
// ---------------------------------------------------------------------------

/// A default converted to the feature's dtype, or the int64 value that does
/// not fit an int32 feature.
type DefaultFill = Result<Values, i64>;

struct Fixed {
    shape: Vec<usize>,
    count: usize,
    default: Option<DefaultFill>,
}

struct Compiled {
    name: String,
    dtype: DType,
    /// `None` for a variable-length feature.
    fixed: Option<Fixed>,
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

fn shape_count(shape: &[usize]) -> usize {
    shape
        .iter()
        .try_fold(1usize, |a, &d| a.checked_mul(d))
        .unwrap_or(usize::MAX)
}

/// Upper bound on values reserved up front for one column: beyond it the
/// column grows as it fills (a spec with an absurd shape must not allocate
/// before any record asks for it).
const MAX_RESERVE: usize = 1 << 24;

/// Room to reserve for `records` records at `per_record` each (from the
/// last batch), with an eighth to spare: a column that outgrows its
/// reservation near the end of a batch copies itself whole.
fn estimate(per_record: usize, records: usize) -> usize {
    let n = per_record.saturating_mul(records);
    n.saturating_add(n / 8).saturating_add(1024)
}

/// The columns of one batch while they fill.
struct ColumnBuilder {
    buf: Buf,
    /// Row splits of a variable-length feature (empty for fixed-length).
    splits: Vec<usize>,
}

/// Parses a set of features out of `Features` maps. Used for `Example`s and
/// for the context of `SequenceExample`s.
struct FeatureSet {
    features: Vec<Compiled>,
    index: NameIndex,
    /// Per feature: where its final entry lies in the current record.
    slots: Vec<Option<Span>>,
    /// `Example` semantics: a `Feature` with no list is absent for a
    /// fixed-length feature (TensorFlow's `parse_example`). Otherwise it has
    /// zero values (`parse_sequence_example`'s context).
    empty_is_absent: bool,
    /// Values and bytes per record seen in the last batch, per feature, to
    /// reserve column capacity up front.
    hints: Vec<(usize, usize)>,
}

impl FeatureSet {
    fn new(spec: &FeatureSpec, empty_is_absent: bool) -> Self {
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
    fn begin(&self, records: usize, old: impl Iterator<Item = Parts>) -> Vec<ColumnBuilder> {
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
    fn clear_slots(&mut self) {
        self.slots.fill(None);
    }

    /// Records where the requested features of one `Features` message lie.
    #[inline]
    fn scan_features(&mut self, rec: &[u8], span: Span) -> Result<(), WireError> {
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
    fn finish_record(
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

    fn finish(&mut self, cols: Vec<ColumnBuilder>, records: usize) -> ParsedBatch {
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

fn malformed(record: usize, feature: Option<&str>, e: WireError) -> ParseError {
    ParseError {
        record,
        feature: feature.map(str::to_owned),
        kind: e.into(),
    }
}

// ---------------------------------------------------------------------------
// Example
// ---------------------------------------------------------------------------

/// Parses batches of serialized `tf.train.Example`s by a [`FeatureSpec`],
/// like `tf.io.parse_example`. Build it once per spec: it precomputes the
/// name lookup and keeps scratch space between batches.
pub struct ExampleParser {
    set: FeatureSet,
    /// Scratch of [`ExampleParser::locate_runs`], kept between batches.
    runs: PackedRuns,
}

impl ExampleParser {
    /// A parser for `spec`.
    pub fn new(spec: &FeatureSpec) -> Self {
        Self {
            set: FeatureSet::new(spec, true),
            runs: PackedRuns::default(),
        }
    }

    /// The spec's features (name and dtype, in order) when all are
    /// variable-length integers: the case [`locate_runs`](Self::locate_runs)
    /// handles.
    pub(crate) fn var_len_int_features(&self) -> Option<Vec<(&str, DType)>> {
        self.set
            .features
            .iter()
            .map(|f| {
                let int = matches!(f.dtype, DType::Int64 | DType::Int32);
                (f.fixed.is_none() && int).then_some((f.name.as_str(), f.dtype))
            })
            .collect()
    }

    /// Finds the values of every feature of every record without decoding
    /// them, for direct assembly (decoding straight into padded tensors).
    /// `None` when the spec is not all variable-length integers, or when
    /// some record needs the general parser: anything but at most one
    /// `Int64List` holding at most one packed run per feature, or bytes the
    /// parser would report (the general path then gives the exact error).
    pub(crate) fn locate_runs<R: AsRef<[u8]>>(&mut self, records: &[R]) -> Option<&PackedRuns> {
        let features = self.set.features.len();
        let ints = self
            .set
            .features
            .iter()
            .all(|f| f.fixed.is_none() && matches!(f.dtype, DType::Int64 | DType::Int32));
        if !ints {
            return None;
        }
        let mut runs = std::mem::take(&mut self.runs);
        runs.reset(features, records.len());
        let mut ok = true;
        'records: for (i, rec) in records.iter().enumerate() {
            let rec = rec.as_ref();
            prefetch_ahead(records, i);
            self.set.clear_slots();
            if self.scan_example(rec).is_err() {
                ok = false;
                break;
            }
            for slot in &self.set.slots {
                let run = match *slot {
                    None => Some(Span::default()),
                    Some(feature) => packed_run(rec, feature),
                };
                let Some(run) = run else {
                    ok = false;
                    break 'records;
                };
                let data = bytes_of(rec, run);
                // A run must end its last varint (else: truncated, an error).
                if data.last().is_some_and(|&b| b >= 0x80) {
                    ok = false;
                    break 'records;
                }
                runs.push(run, count_terminal_bytes(data));
            }
        }
        self.runs = runs;
        ok.then_some(&self.runs)
    }

    /// Parses a batch of serialized `Example`s into one column per spec
    /// feature, in spec order. Stops at the first bad record.
    ///
    /// Each call allocates the columns afresh. On a stream of batches
    /// prefer [`ExampleParser::parse_into`]: touching new memory (page
    /// faults) can cost more than the parse itself.
    pub fn parse<R: AsRef<[u8]>>(&mut self, records: &[R]) -> Result<ParsedBatch, ParseError> {
        let mut out = ParsedBatch {
            num_records: 0,
            columns: Vec::new(),
        };
        self.parse_into(records, &mut out)?;
        Ok(out)
    }

    /// Like [`ExampleParser::parse`], but fills `out`, reusing the buffers
    /// of the batch it holds (one this parser returned earlier): a steady
    /// stream of batches then allocates nothing. On error `out` is left empty.
    pub fn parse_into<R: AsRef<[u8]>>(
        &mut self,
        records: &[R],
        out: &mut ParsedBatch,
    ) -> Result<(), ParseError> {
        let mut cols = self.set.begin(records.len(), recycled(out));
        out.num_records = 0;
        for (r, rec) in records.iter().enumerate() {
            let rec = rec.as_ref();
            self.set.clear_slots();
            self.scan_example(rec).map_err(|e| malformed(r, None, e))?;
            self.set.finish_record(rec, r, &mut cols)?;
        }
        *out = self.set.finish(cols, records.len());
        Ok(())
    }

    fn scan_example(&mut self, rec: &[u8]) -> Result<(), WireError> {
        let mut c = Cursor::new(rec);
        while !c.at_end() {
            let tag = c.tag()?;
            if tag == TAG_1_LEN {
                let features = c.len_delimited()?;
                self.set.scan_features(rec, features)?;
            } else {
                c.skip(tag)?;
            }
        }
        Ok(())
    }
}

/// The span of the packed run of a `Feature` (at `feature`) that holds one
/// `Int64List` of at most one packed run, or no list at all (an empty span:
/// zero values, as the general parser gives a variable-length feature).
/// `None` for any other form, valid or not.
fn packed_run(rec: &[u8], feature: Span) -> Option<Span> {
    if feature.is_empty() {
        return Some(Span::default());
    }
    let mut c = Cursor::over(rec, feature);
    if c.tag().ok()? != TAG_3_LEN {
        return None;
    }
    let list = c.len_delimited().ok()?;
    if !c.at_end() {
        return None;
    }
    if list.is_empty() {
        return Some(Span::default());
    }
    let mut l = Cursor::over(rec, list);
    if l.tag().ok()? != TAG_1_LEN {
        return None;
    }
    let run = l.len_delimited().ok()?;
    l.at_end().then_some(run)
}

/// Parses a batch of serialized `tf.train.Example`s by `spec`
/// (`tf.io.parse_example`). Build an [`ExampleParser`] to parse many batches.
pub fn parse_examples<R: AsRef<[u8]>>(
    spec: &FeatureSpec,
    records: &[R],
) -> Result<ParsedBatch, ParseError> {
    ExampleParser::new(spec).parse(records)
}

// ---------------------------------------------------------------------------
// SequenceExample
// ---------------------------------------------------------------------------

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
