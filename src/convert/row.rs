//! Turning one input record (a JSON object, CSV fields, a line of text, a
//! Parquet row) into the values of each output column, checked against the
//! schema. Nothing is coerced that could change a value: a value that does
//! not fit is a [`BadKind`], never written.

use std::collections::HashMap;

#[cfg(feature = "convert")]
use arrow_array::cast::AsArray;
#[cfg(feature = "convert")]
use arrow_array::types::{
    Float32Type, Float64Type, Int8Type, Int16Type, Int32Type, Int64Type, UInt8Type, UInt16Type,
    UInt32Type, UInt64Type,
};
#[cfg(feature = "convert")]
use arrow_array::{Array, ArrayRef, RecordBatch};
#[cfg(feature = "convert")]
use arrow_schema::DataType;
use serde::Deserialize;
use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::Value;
use serde_json::value::RawValue;

use super::encode::ColBuf;
use super::error::BadKind;
#[cfg(feature = "convert")]
use super::schema::{Observed, Seen, describe};
use super::schema::{Schema, SchemaColumn, Shape, ValueType};

/// A bad value: the column (if one) and what was wrong.
pub(crate) type Bad = (Option<String>, BadKind);

fn in_column(col: &SchemaColumn, kind: BadKind) -> Bad {
    (Some(col.source.clone()), kind)
}

/// How to read records into columns.
pub(crate) struct RowParser {
    pub schema: Schema,
    key_index: HashMap<String, usize>,
    /// Null or missing values leave the feature out instead of being errors.
    pub null_omit: bool,
    /// Input columns outside the schema are ignored (else they are errors).
    pub ignore_unknown: bool,
}

impl RowParser {
    pub(super) fn new(schema: Schema, null_omit: bool, ignore_unknown: bool) -> Self {
        let key_index = schema
            .columns
            .iter()
            .enumerate()
            .map(|(i, c)| (c.source.clone(), i))
            .collect();
        RowParser {
            schema,
            key_index,
            null_omit,
            ignore_unknown,
        }
    }

    fn absent(&self, col: &SchemaColumn, buf: &mut ColBuf, kind: BadKind) -> Result<(), Bad> {
        if self.null_omit {
            buf.present = false;
            Ok(())
        } else {
            Err(in_column(col, kind))
        }
    }

    /// Reads one JSONL line (not blank) into `cols`.
    ///
    /// Fast path: one pass of the JSON parser straight into the column
    /// buffers. Anything it does not take (a bool, null, a missing or
    /// repeated key, a wrong type, bad JSON) goes through the general path,
    /// which accepts or reports it exactly.
    pub(super) fn json(&self, line: &[u8], cols: &mut [ColBuf]) -> Result<(), Bad> {
        let mut de = serde_json::Deserializer::from_slice(line);
        if (LineSeed {
            parser: self,
            cols: &mut *cols,
        })
        .deserialize(&mut de)
        .is_ok()
            && de.end().is_ok()
            && cols.iter().all(|c| c.present)
        {
            return Ok(());
        }
        self.json_value(line, cols)
    }

    fn json_value(&self, line: &[u8], cols: &mut [ColBuf]) -> Result<(), Bad> {
        let result = self.json_value_map(line, cols);
        // An integer beyond int64 reaches serde_json's parser as a float:
        // in an int64 column it is out of range, named as written.
        if let Err((Some(c), BadKind::WrongType { .. } | BadKind::OutOfRange { .. })) = &result
            && self.int_column(c)
            && let Some(value) = big_int_in_line(line, c)
        {
            return Err((
                Some(c.clone()),
                BadKind::OutOfRange {
                    value,
                    dtype: "int64",
                },
            ));
        }
        result
    }

    fn int_column(&self, source: &str) -> bool {
        self.key_index
            .get(source)
            .and_then(|&i| self.schema.columns.get(i))
            .is_some_and(|c| c.vtype == ValueType::Int64)
    }

    fn json_value_map(&self, line: &[u8], cols: &mut [ColBuf]) -> Result<(), Bad> {
        let value: Value =
            serde_json::from_slice(line).map_err(|e| (None, BadKind::Json(e.to_string())))?;
        let Value::Object(map) = value else {
            return Err((None, BadKind::NotObject(json_kind(&value))));
        };
        if !self.ignore_unknown
            && let Some(key) = map
                .keys()
                .find(|k| !self.key_index.contains_key(k.as_str()))
        {
            return Err((Some(key.clone()), BadKind::UnknownColumn));
        }
        for (col, buf) in self.schema.columns.iter().zip(cols.iter_mut()) {
            buf.clear();
            buf.present = true;
            match map.get(&col.source) {
                None => self.absent(col, buf, BadKind::Missing)?,
                Some(Value::Null) => self.absent(col, buf, BadKind::Null)?,
                Some(v) => json_into(v, col, buf).map_err(|k| in_column(col, k))?,
            }
        }
        Ok(())
    }

    /// Reads one CSV record's fields into `cols`; `field_of[i]` is the field
    /// index of schema column `i` in this file's header.
    pub(super) fn csv(
        &self,
        fields: &[u8],
        ends: &[usize],
        nfields: usize,
        field_of: &[usize],
        cols: &mut [ColBuf],
    ) -> Result<(), Bad> {
        if ends.len() != nfields {
            return Err((
                None,
                BadKind::FieldCount {
                    expected: nfields,
                    found: ends.len(),
                },
            ));
        }
        for ((col, buf), &f) in self
            .schema
            .columns
            .iter()
            .zip(cols.iter_mut())
            .zip(field_of)
        {
            buf.clear();
            buf.present = true;
            let start = if f == 0 {
                0
            } else {
                ends.get(f - 1).copied().unwrap_or(0)
            };
            let end = ends.get(f).copied().unwrap_or(start);
            let field = fields.get(start..end).unwrap_or_default();
            csv_into(field, col, buf).or_else(|k| match k {
                BadKind::Null => self.absent(col, buf, BadKind::Null),
                k => Err(in_column(col, k)),
            })?;
        }
        Ok(())
    }

    /// Reads a line or a whole text file into the single text column.
    pub(super) fn text(&self, text: &[u8], cols: &mut [ColBuf]) {
        if let Some(buf) = cols.first_mut() {
            buf.clear();
            buf.present = true;
            buf.push_bytes(text);
        }
    }

    /// The Arrow columns of `batch` for the schema, checked against it.
    #[cfg(feature = "convert")]
    pub(super) fn arrow_columns<'a>(
        &self,
        batch: &'a RecordBatch,
    ) -> Result<Vec<ArrowCol<'a>>, String> {
        self.schema
            .columns
            .iter()
            .map(|col| {
                let array = batch
                    .column_by_name(&col.source)
                    .ok_or_else(|| format!("has no column {:?}", col.source))?;
                ArrowCol::new(array, col)
            })
            .collect()
    }

    /// Reads Parquet row `row` of the batch's columns into `cols`.
    #[cfg(feature = "convert")]
    pub(super) fn arrow_row(
        &self,
        arrays: &[ArrowCol<'_>],
        row: usize,
        cols: &mut [ColBuf],
    ) -> Result<(), Bad> {
        for ((col, buf), array) in self.schema.columns.iter().zip(cols.iter_mut()).zip(arrays) {
            buf.clear();
            buf.present = true;
            match array.fill(row, col, buf) {
                Ok(()) => {}
                Err(BadKind::Null) => self.absent(col, buf, BadKind::Null)?,
                Err(k) => return Err(in_column(col, k)),
            }
        }
        Ok(())
    }
}

fn json_kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

fn shorten(s: &str) -> String {
    let mut out: String = s.chars().take(40).collect();
    if out.len() < s.len() {
        out.push('…');
    }
    format!("{out:?}")
}

/// A value as error messages show it: `string "abc"`, `number 1.5`, `a list`.
fn json_found(v: &Value) -> String {
    match v {
        Value::Null => "null".into(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => format!("number {n}"),
        Value::String(s) => format!("string {}", shorten(s)),
        other => json_kind(other).to_string(),
    }
}

fn wrong(col: &SchemaColumn, found: String) -> BadKind {
    BadKind::WrongType {
        expected: col.describe(),
        found,
    }
}

fn f64_to_f32(x: f64, shown: impl FnOnce() -> String) -> Result<f32, BadKind> {
    let f = x as f32;
    if f.is_infinite() && x.is_finite() {
        return Err(BadKind::OutOfRange {
            value: shown(),
            dtype: "float32",
        });
    }
    Ok(f)
}

fn json_scalar(v: &Value, col: &SchemaColumn, buf: &mut ColBuf) -> Result<(), BadKind> {
    match (col.vtype, v) {
        (_, Value::Null) => Err(BadKind::Null),
        (ValueType::Int64 | ValueType::Float, Value::Bool(b)) => {
            if col.vtype == ValueType::Int64 {
                buf.ints.push(i64::from(*b));
            } else {
                buf.floats.push(if *b { 1.0 } else { 0.0 });
            }
            Ok(())
        }
        (ValueType::Int64, Value::Number(n)) => match n.as_i64() {
            Some(i) => {
                buf.ints.push(i);
                Ok(())
            }
            None if n.is_u64() => Err(BadKind::OutOfRange {
                value: n.to_string(),
                dtype: "int64",
            }),
            None => Err(wrong(col, json_found(v))),
        },
        (ValueType::Float, Value::Number(n)) => {
            let x = n.as_f64().unwrap_or(f64::NAN);
            buf.floats.push(f64_to_f32(x, || n.to_string())?);
            Ok(())
        }
        (ValueType::Bytes, Value::String(s)) => {
            buf.push_bytes(s.as_bytes());
            Ok(())
        }
        _ => Err(wrong(col, json_found(v))),
    }
}

fn check_len(col: &SchemaColumn, buf: &ColBuf) -> Result<(), BadKind> {
    if let Shape::Fixed(n) = col.shape {
        let found = buf.len(col.vtype);
        if found != n {
            return Err(BadKind::WrongLength { expected: n, found });
        }
    }
    Ok(())
}

/// Deserializes a JSONL object straight into the columns (the fast path).
struct LineSeed<'p, 'c> {
    parser: &'p RowParser,
    cols: &'c mut [ColBuf],
}

impl<'de> DeserializeSeed<'de> for LineSeed<'_, '_> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for LineSeed<'_, '_> {
    type Value = ();
    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a JSON object")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        for c in self.cols.iter_mut() {
            c.clear();
        }
        while let Some(key) = map.next_key_seed(KeySeed(self.parser))? {
            match key {
                Some(i) => {
                    let (Some(col), Some(buf)) =
                        (self.parser.schema.columns.get(i), self.cols.get_mut(i))
                    else {
                        return Err(de::Error::custom("column"));
                    };
                    if buf.present {
                        return Err(de::Error::custom("repeated key"));
                    }
                    map.next_value_seed(ColSeed {
                        col,
                        buf: &mut *buf,
                    })?;
                    check_len(col, buf).map_err(|_| de::Error::custom("length"))?;
                    buf.present = true;
                }
                None if self.parser.ignore_unknown => {
                    map.next_value::<IgnoredAny>()?;
                }
                None => return Err(de::Error::custom("unknown key")),
            }
        }
        Ok(())
    }
}

/// A key: the index of its column, or `None` for a key outside the schema.
struct KeySeed<'p>(&'p RowParser);

impl<'de> DeserializeSeed<'de> for KeySeed<'_> {
    type Value = Option<usize>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Option<usize>, D::Error> {
        d.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for KeySeed<'_> {
    type Value = Option<usize>;
    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a key")
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Option<usize>, E> {
        Ok(self.0.key_index.get(v).copied())
    }
}

/// One column's value (a scalar or a list of scalars).
struct ColSeed<'a> {
    col: &'a SchemaColumn,
    buf: &'a mut ColBuf,
}

impl<'de> DeserializeSeed<'de> for ColSeed<'_> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        if self.col.shape == Shape::Scalar {
            ScalarSeed {
                vtype: self.col.vtype,
                buf: self.buf,
            }
            .deserialize(d)
        } else {
            d.deserialize_seq(self)
        }
    }
}

impl<'de> Visitor<'de> for ColSeed<'_> {
    type Value = ();
    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a list")
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let vtype = self.col.vtype;
        while seq
            .next_element_seed(ScalarSeed {
                vtype,
                buf: &mut *self.buf,
            })?
            .is_some()
        {}
        Ok(())
    }
}

/// One scalar of the column's type, strictly (no bools, no nulls).
struct ScalarSeed<'a> {
    vtype: ValueType,
    buf: &'a mut ColBuf,
}

impl<'de> DeserializeSeed<'de> for ScalarSeed<'_> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        match self.vtype {
            ValueType::Int64 => {
                let v = i64::deserialize(d)?;
                self.buf.ints.push(v);
            }
            ValueType::Float => {
                let x = f64::deserialize(d)?;
                let f = f64_to_f32(x, String::new).map_err(|_| de::Error::custom("range"))?;
                self.buf.floats.push(f);
            }
            ValueType::Bytes => d.deserialize_str(self)?,
        }
        Ok(())
    }
}

impl<'de> Visitor<'de> for ScalarSeed<'_> {
    type Value = ();
    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a string")
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<(), E> {
        self.buf.push_bytes(v.as_bytes());
        Ok(())
    }
}

/// Reads a JSON value into a column.
pub(crate) fn json_into(v: &Value, col: &SchemaColumn, buf: &mut ColBuf) -> Result<(), BadKind> {
    match (col.shape, v) {
        (Shape::Scalar, Value::Array(_) | Value::Object(_)) => Err(wrong(col, json_found(v))),
        (Shape::Scalar, _) => json_scalar(v, col, buf),
        (_, Value::Array(items)) => {
            for item in items {
                match item {
                    Value::Array(_) | Value::Object(_) => {
                        return Err(wrong(col, format!("a list holding {}", json_kind(item))));
                    }
                    Value::Null => return Err(BadKind::Null),
                    _ => json_scalar(item, col, buf).map_err(|k| match k {
                        BadKind::WrongType { expected, found } => BadKind::WrongType {
                            expected,
                            found: format!("a list holding {found}"),
                        },
                        k => k,
                    })?,
                }
            }
            check_len(col, buf)
        }
        (_, _) => Err(wrong(col, json_found(v))),
    }
}

/// Reads a CSV field into a column: numbers are parsed, an empty field in a
/// numeric column is null, a list column holds a JSON array.
fn csv_into(field: &[u8], col: &SchemaColumn, buf: &mut ColBuf) -> Result<(), BadKind> {
    if col.shape != Shape::Scalar {
        if field.is_empty() {
            return Err(BadKind::Null);
        }
        let v: Value = serde_json::from_slice(field).map_err(|_| {
            wrong(
                col,
                format!("text {}", shorten(&String::from_utf8_lossy(field))),
            )
        })?;
        return json_into(&v, col, buf);
    }
    if col.vtype == ValueType::Bytes {
        buf.push_bytes(field);
        return Ok(());
    }
    if field.is_empty() {
        return Err(BadKind::Null);
    }
    let text =
        std::str::from_utf8(field).map_err(|_| wrong(col, "text that is not UTF-8".into()))?;
    let found = || format!("text {}", shorten(text));
    match col.vtype {
        ValueType::Int64 => match text.parse::<i64>() {
            Ok(i) => buf.ints.push(i),
            Err(e)
                if matches!(
                    e.kind(),
                    std::num::IntErrorKind::PosOverflow | std::num::IntErrorKind::NegOverflow
                ) =>
            {
                return Err(BadKind::OutOfRange {
                    value: text.to_string(),
                    dtype: "int64",
                });
            }
            Err(_) => return Err(wrong(col, found())),
        },
        ValueType::Float => match text.parse::<f64>() {
            Ok(x) => buf.floats.push(f64_to_f32(x, || text.to_string())?),
            Err(_) => return Err(wrong(col, found())),
        },
        ValueType::Bytes => {}
    }
    Ok(())
}

/// Whether `text` is written as an integer: an optional sign, then digits.
fn is_int_literal(text: &str) -> bool {
    let digits = text.strip_prefix(['-', '+']).unwrap_or(text);
    !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit())
}

/// Whether float32 holds the integer `i` exactly (true up to 2^24, and
/// beyond for some).
#[cfg(feature = "convert")]
fn f32_holds(i: i128) -> bool {
    (i as f32) as i128 == i
}

/// The first integer literal beyond int64 in a JSON value (a number, or a
/// list of them), as written.
fn first_big_int(raw: &RawValue) -> Option<String> {
    let text = raw.get().trim();
    if text.starts_with('[') {
        let items: Vec<&RawValue> = serde_json::from_str(text).ok()?;
        return items.into_iter().find_map(first_big_int);
    }
    (is_int_literal(text) && text.parse::<i64>().is_err()).then(|| text.to_string())
}

/// The first integer literal beyond int64 in the value of `key` of a JSONL line.
fn big_int_in_line(line: &[u8], key: &str) -> Option<String> {
    let map: HashMap<String, &RawValue> = serde_json::from_slice(line).ok()?;
    first_big_int(map.get(key)?)
}

/// Observes one JSON value of a column for inference. An integer written
/// beyond int64 (which serde_json parses as a float) is an integer: the
/// column stays int64 and the value is an error when converted, rather
/// than the column becoming float32 and rounding its other values.
#[cfg(feature = "convert")]
pub(crate) fn observe_json(raw: &RawValue, obs: &mut Observed, at: &str) {
    let Ok(v) = serde_json::from_str::<Value>(raw.get()) else {
        return;
    };
    let scalar = |v: &Value, raw: Option<&RawValue>, obs: &mut Observed| match v {
        Value::Bool(_) => obs.see(Seen::Int, at),
        Value::Number(n) if n.is_i64() || n.is_u64() => {
            obs.see(Seen::Int, at);
            let i = n.as_i64().map(i128::from).or(n.as_u64().map(i128::from));
            if !i.is_some_and(f32_holds) {
                obs.see_inexact_int(at);
            }
        }
        Value::Number(_) if raw.is_some_and(|r| is_int_literal(r.get().trim())) => {
            obs.see(Seen::Int, at);
            obs.see_inexact_int(at);
        }
        Value::Number(_) => obs.see(Seen::Float, at),
        Value::String(_) => obs.see(Seen::Bytes, at),
        _ => {}
    };
    match &v {
        Value::Null => {}
        Value::Object(_) => {
            obs.unsupported
                .get_or_insert_with(|| (at.to_string(), "an object".into()));
        }
        Value::Array(items) => {
            obs.see_shape(true, at);
            let raws: Vec<&RawValue> = serde_json::from_str(raw.get()).unwrap_or_default();
            for (i, item) in items.iter().enumerate() {
                match item {
                    Value::Array(_) | Value::Object(_) => {
                        obs.unsupported.get_or_insert_with(|| {
                            (
                                at.to_string(),
                                format!("a list holding {}", json_kind(item)),
                            )
                        });
                    }
                    _ => scalar(item, raws.get(i).copied(), obs),
                }
            }
        }
        _ => {
            obs.see_shape(false, at);
            scalar(&v, Some(raw), obs);
        }
    }
}

/// Observes one CSV field for inference (empty fields say nothing).
#[cfg(feature = "convert")]
pub(crate) fn observe_csv(field: &[u8], obs: &mut Observed, at: &str) {
    if field.is_empty() {
        return;
    }
    obs.see_shape(false, at);
    match std::str::from_utf8(field) {
        Ok(t) if let Ok(i) = t.parse::<i64>() => {
            obs.see(Seen::Int, at);
            if !f32_holds(i128::from(i)) {
                obs.see_inexact_int(at);
            }
        }
        // An integer beyond int64 is still an integer (an error when
        // converted), never a reason to make the column float32.
        Ok(t) if is_int_literal(t) => {
            obs.see(Seen::Int, at);
            obs.see_inexact_int(at);
        }
        Ok(t) if t.parse::<f64>().is_ok() => obs.see(Seen::Float, at),
        _ => obs.see(Seen::Bytes, at),
    }
}

/// The value type an Arrow leaf type holds naturally, if supported.
#[cfg(feature = "convert")]
fn arrow_leaf_type(dt: &DataType) -> Option<ValueType> {
    use DataType::*;
    match dt {
        Boolean | Int8 | Int16 | Int32 | Int64 | UInt8 | UInt16 | UInt32 | UInt64 => {
            Some(ValueType::Int64)
        }
        Float32 | Float64 => Some(ValueType::Float),
        Utf8 | LargeUtf8 | Utf8View | Binary | LargeBinary | BinaryView | FixedSizeBinary(_) => {
            Some(ValueType::Bytes)
        }
        _ => None,
    }
}

/// The column type a Parquet (Arrow) column maps to directly.
#[cfg(feature = "convert")]
pub(crate) fn arrow_column_type(dt: &DataType) -> Result<(ValueType, Shape), String> {
    let unsupported = || format!("Arrow type {dt} is not supported");
    match dt {
        DataType::List(f)
        | DataType::LargeList(f)
        | DataType::ListView(f)
        | DataType::LargeListView(f) => arrow_leaf_type(f.data_type())
            .map(|t| (t, Shape::List))
            .ok_or_else(unsupported),
        DataType::FixedSizeList(f, n) => arrow_leaf_type(f.data_type())
            .map(|t| (t, Shape::Fixed((*n).max(0) as usize)))
            .ok_or_else(unsupported),
        other => arrow_leaf_type(other)
            .map(|t| (t, Shape::Scalar))
            .ok_or_else(unsupported),
    }
}

/// The leaf values of an Arrow column, by type.
#[cfg(feature = "convert")]
enum Leaf<'a> {
    Bool(&'a arrow_array::BooleanArray),
    I8(&'a arrow_array::Int8Array),
    I16(&'a arrow_array::Int16Array),
    I32(&'a arrow_array::Int32Array),
    I64(&'a arrow_array::Int64Array),
    U8(&'a arrow_array::UInt8Array),
    U16(&'a arrow_array::UInt16Array),
    U32(&'a arrow_array::UInt32Array),
    U64(&'a arrow_array::UInt64Array),
    F32(&'a arrow_array::Float32Array),
    F64(&'a arrow_array::Float64Array),
    Str(&'a arrow_array::StringArray),
    LStr(&'a arrow_array::LargeStringArray),
    StrView(&'a arrow_array::StringViewArray),
    Bin(&'a arrow_array::BinaryArray),
    LBin(&'a arrow_array::LargeBinaryArray),
    BinView(&'a arrow_array::BinaryViewArray),
    FBin(&'a arrow_array::FixedSizeBinaryArray),
}

#[cfg(feature = "convert")]
impl<'a> Leaf<'a> {
    fn new(a: &'a dyn Array) -> Option<Leaf<'a>> {
        use DataType::*;
        Some(match a.data_type() {
            Boolean => Leaf::Bool(a.as_boolean()),
            Int8 => Leaf::I8(a.as_primitive::<Int8Type>()),
            Int16 => Leaf::I16(a.as_primitive::<Int16Type>()),
            Int32 => Leaf::I32(a.as_primitive::<Int32Type>()),
            Int64 => Leaf::I64(a.as_primitive::<Int64Type>()),
            UInt8 => Leaf::U8(a.as_primitive::<UInt8Type>()),
            UInt16 => Leaf::U16(a.as_primitive::<UInt16Type>()),
            UInt32 => Leaf::U32(a.as_primitive::<UInt32Type>()),
            UInt64 => Leaf::U64(a.as_primitive::<UInt64Type>()),
            Float32 => Leaf::F32(a.as_primitive::<Float32Type>()),
            Float64 => Leaf::F64(a.as_primitive::<Float64Type>()),
            Utf8 => Leaf::Str(a.as_string::<i32>()),
            LargeUtf8 => Leaf::LStr(a.as_string::<i64>()),
            Utf8View => Leaf::StrView(a.as_string_view()),
            Binary => Leaf::Bin(a.as_binary::<i32>()),
            LargeBinary => Leaf::LBin(a.as_binary::<i64>()),
            BinaryView => Leaf::BinView(a.as_binary_view()),
            FixedSizeBinary(_) => Leaf::FBin(a.as_fixed_size_binary()),
            _ => return None,
        })
    }

    fn push(&self, i: usize, vtype: ValueType, buf: &mut ColBuf) -> Result<(), BadKind> {
        let int = |buf: &mut ColBuf, v: i64| match vtype {
            ValueType::Float => buf.floats.push(v as f32),
            _ => buf.ints.push(v),
        };
        match self {
            Leaf::Bool(a) => int(buf, i64::from(a.value(i))),
            Leaf::I8(a) => int(buf, i64::from(a.value(i))),
            Leaf::I16(a) => int(buf, i64::from(a.value(i))),
            Leaf::I32(a) => int(buf, i64::from(a.value(i))),
            Leaf::I64(a) => int(buf, a.value(i)),
            Leaf::U8(a) => int(buf, i64::from(a.value(i))),
            Leaf::U16(a) => int(buf, i64::from(a.value(i))),
            Leaf::U32(a) => int(buf, i64::from(a.value(i))),
            Leaf::U64(a) => {
                let v = a.value(i);
                let v = i64::try_from(v).map_err(|_| BadKind::OutOfRange {
                    value: v.to_string(),
                    dtype: "int64",
                })?;
                int(buf, v);
            }
            Leaf::F32(a) => buf.floats.push(a.value(i)),
            Leaf::F64(a) => {
                let x = a.value(i);
                buf.floats.push(f64_to_f32(x, || x.to_string())?);
            }
            Leaf::Str(a) => buf.push_bytes(a.value(i).as_bytes()),
            Leaf::LStr(a) => buf.push_bytes(a.value(i).as_bytes()),
            Leaf::StrView(a) => buf.push_bytes(a.value(i).as_bytes()),
            Leaf::Bin(a) => buf.push_bytes(a.value(i)),
            Leaf::LBin(a) => buf.push_bytes(a.value(i)),
            Leaf::BinView(a) => buf.push_bytes(a.value(i)),
            Leaf::FBin(a) => buf.push_bytes(a.value(i)),
        }
        Ok(())
    }
}

#[cfg(feature = "convert")]
enum Lists<'a> {
    Scalar,
    Offsets32(&'a [i32]),
    Offsets64(&'a [i64]),
    Fixed(usize),
}

/// One Arrow column of a batch, ready to be read row by row.
#[cfg(feature = "convert")]
pub(crate) struct ArrowCol<'a> {
    top: &'a ArrayRef,
    leaf_array: &'a dyn Array,
    leaf: Leaf<'a>,
    lists: Lists<'a>,
}

#[cfg(feature = "convert")]
impl<'a> ArrowCol<'a> {
    fn new(top: &'a ArrayRef, col: &SchemaColumn) -> Result<ArrowCol<'a>, String> {
        let dt = top.data_type();
        let (natural, _) =
            arrow_column_type(dt).map_err(|e| format!("column {:?}: {e}", col.source))?;
        let compatible =
            natural == col.vtype || (natural == ValueType::Int64 && col.vtype == ValueType::Float);
        if !compatible {
            return Err(format!(
                "column {:?} is {dt} in Parquet and cannot be written as {}",
                col.source,
                describe(col.vtype, col.shape)
            ));
        }
        let (leaf_array, lists): (&'a dyn Array, Lists<'a>) = match dt {
            DataType::List(_) => {
                let l = top.as_list::<i32>();
                (l.values().as_ref(), Lists::Offsets32(l.value_offsets()))
            }
            DataType::LargeList(_) => {
                let l = top.as_list::<i64>();
                (l.values().as_ref(), Lists::Offsets64(l.value_offsets()))
            }
            DataType::FixedSizeList(_, n) => {
                let l = top.as_fixed_size_list();
                (l.values().as_ref(), Lists::Fixed((*n).max(0) as usize))
            }
            DataType::ListView(_) | DataType::LargeListView(_) => {
                return Err(format!(
                    "column {:?}: Arrow list views are not supported",
                    col.source
                ));
            }
            _ => (top.as_ref(), Lists::Scalar),
        };
        if !matches!(lists, Lists::Scalar) && col.shape == Shape::Scalar {
            return Err(format!(
                "column {:?} holds lists in Parquet; declare it as a list (NAME:{}[])",
                col.source, col.vtype
            ));
        }
        let leaf = Leaf::new(leaf_array)
            .ok_or_else(|| format!("column {:?}: Arrow type {dt} is not supported", col.source))?;
        Ok(ArrowCol {
            top,
            leaf_array,
            leaf,
            lists,
        })
    }

    fn fill(&self, row: usize, col: &SchemaColumn, buf: &mut ColBuf) -> Result<(), BadKind> {
        if self.top.is_null(row) {
            return Err(BadKind::Null);
        }
        let range = match self.lists {
            Lists::Scalar => row..row + 1,
            Lists::Offsets32(o) => {
                let a = o.get(row).copied().unwrap_or(0).max(0) as usize;
                let b = o.get(row + 1).copied().unwrap_or(0).max(0) as usize;
                a..b.max(a)
            }
            Lists::Offsets64(o) => {
                let a = o.get(row).copied().unwrap_or(0).max(0) as usize;
                let b = o.get(row + 1).copied().unwrap_or(0).max(0) as usize;
                a..b.max(a)
            }
            Lists::Fixed(n) => row * n..(row + 1) * n,
        };
        if range.end > self.leaf_array.len() {
            return Err(BadKind::Unsupported("list offsets out of bounds".into()));
        }
        for j in range {
            if self.leaf_array.is_null(j) {
                return Err(BadKind::Null);
            }
            self.leaf.push(j, col.vtype, buf)?;
        }
        check_len(col, buf)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn col(vtype: ValueType, shape: Shape) -> SchemaColumn {
        SchemaColumn {
            source: "c".into(),
            name: "c".into(),
            vtype,
            shape,
        }
    }

    fn json(v: &str, c: &SchemaColumn) -> Result<ColBuf, BadKind> {
        let mut buf = ColBuf::default();
        json_into(&serde_json::from_str(v).expect("json"), c, &mut buf).map(|()| buf)
    }

    #[test]
    fn json_values_are_checked_not_coerced() {
        let int = col(ValueType::Int64, Shape::Scalar);
        assert_eq!(json("-5", &int).map(|b| b.ints), Ok(vec![-5]));
        assert_eq!(json("true", &int).map(|b| b.ints), Ok(vec![1]));
        assert_eq!(
            json("1.5", &int),
            Err(BadKind::WrongType {
                expected: "int64".into(),
                found: "number 1.5".into()
            })
        );
        assert_eq!(
            json("18446744073709551615", &int),
            Err(BadKind::OutOfRange {
                value: "18446744073709551615".into(),
                dtype: "int64"
            })
        );
        assert_eq!(
            json("\"7\"", &int),
            Err(BadKind::WrongType {
                expected: "int64".into(),
                found: "string \"7\"".into()
            })
        );
        let float = col(ValueType::Float, Shape::Scalar);
        assert_eq!(json("2", &float).map(|b| b.floats), Ok(vec![2.0]));
        assert_eq!(json("0.1", &float).map(|b| b.floats), Ok(vec![0.1f32]));
        assert_eq!(
            json("1e300", &float),
            Err(BadKind::OutOfRange {
                value: "1e+300".into(),
                dtype: "float32"
            })
        );
        let list = col(ValueType::Int64, Shape::List);
        assert_eq!(json("[1,2]", &list).map(|b| b.ints), Ok(vec![1, 2]));
        assert_eq!(json("[]", &list).map(|b| b.ints), Ok(vec![]));
        assert_eq!(json("[1,null]", &list), Err(BadKind::Null));
        assert_eq!(
            json("[[1]]", &list),
            Err(BadKind::WrongType {
                expected: "list of int64".into(),
                found: "a list holding a list".into()
            })
        );
        assert_eq!(
            json("3", &list),
            Err(BadKind::WrongType {
                expected: "list of int64".into(),
                found: "number 3".into()
            })
        );
        let fixed = col(ValueType::Bytes, Shape::Fixed(2));
        assert_eq!(
            json("[\"a\"]", &fixed),
            Err(BadKind::WrongLength {
                expected: 2,
                found: 1
            })
        );
    }

    #[test]
    fn json_fast_path_agrees_with_the_general_path() {
        let columns = vec![
            SchemaColumn {
                source: "i".into(),
                name: "i".into(),
                vtype: ValueType::Int64,
                shape: Shape::Scalar,
            },
            SchemaColumn {
                source: "f".into(),
                name: "f".into(),
                vtype: ValueType::Float,
                shape: Shape::Scalar,
            },
            SchemaColumn {
                source: "s".into(),
                name: "s".into(),
                vtype: ValueType::Bytes,
                shape: Shape::Scalar,
            },
            SchemaColumn {
                source: "l".into(),
                name: "l".into(),
                vtype: ValueType::Int64,
                shape: Shape::List,
            },
            SchemaColumn {
                source: "g".into(),
                name: "g".into(),
                vtype: ValueType::Float,
                shape: Shape::Fixed(2),
            },
            SchemaColumn {
                source: "t".into(),
                name: "t".into(),
                vtype: ValueType::Bytes,
                shape: Shape::List,
            },
        ];
        let lines = [
            r#"{"i": 1, "f": 2, "s": "x\n\u00e9", "l": [1, -2], "g": [0.1, 1e-3], "t": ["a", ""]}"#,
            r#"{"i": true, "f": false, "s": "", "l": [], "g": [1, 2], "t": []}"#,
            r#"{"i": 1.5, "f": 2, "s": "x", "l": [1], "g": [1, 2], "t": []}"#,
            r#"{"i": 9223372036854775808, "f": 2, "s": "x", "l": [1], "g": [1, 2], "t": []}"#,
            r#"{"i": 1, "f": 1e39, "s": "x", "l": [1], "g": [1, 2], "t": []}"#,
            r#"{"i": 1, "f": 1, "s": "x", "l": [1, null], "g": [1, 2], "t": []}"#,
            r#"{"i": 1, "f": 1, "s": "x", "l": [1], "g": [1], "t": []}"#,
            r#"{"i": 1, "f": 1, "s": "x", "l": [1], "g": [1, 1e39], "t": []}"#,
            r#"{"i": 1, "f": 1, "s": 5, "l": [1], "g": [1, 2], "t": [1]}"#,
            r#"{"i": 1, "f": 1, "s": "x", "l": [1], "g": [1, 2], "t": [], "zz": 1, "aa": 2}"#,
            r#"{"i": null, "f": 1, "s": "x", "l": [1], "g": [1, 2], "t": []}"#,
            r#"{"f": 1, "s": "x", "l": [1], "g": [1, 2], "t": []}"#,
            r#"{"i": 1, "i": 2, "f": 1, "s": "x", "l": [[1]], "g": [1, 2], "t": []}"#,
        ];
        for omit in [false, true] {
            for unknown in [false, true] {
                let p = RowParser::new(
                    Schema {
                        columns: columns.clone(),
                    },
                    omit,
                    unknown,
                );
                for line in lines {
                    let mut fast = vec![ColBuf::default(); columns.len()];
                    let mut slow = vec![ColBuf::default(); columns.len()];
                    let a = p.json(line.as_bytes(), &mut fast);
                    let b = p.json_value(line.as_bytes(), &mut slow);
                    assert_eq!(a, b, "{line}");
                    if a.is_ok() {
                        assert_eq!(fast, slow, "{line}");
                    }
                }
            }
        }
    }

    #[test]
    fn csv_fields_are_parsed_by_column_type() {
        let mut buf = ColBuf::default();
        let int = col(ValueType::Int64, Shape::Scalar);
        assert_eq!(csv_into(b"", &int, &mut buf), Err(BadKind::Null));
        assert_eq!(
            csv_into(b"99999999999999999999", &int, &mut buf),
            Err(BadKind::OutOfRange {
                value: "99999999999999999999".into(),
                dtype: "int64"
            })
        );
        assert_eq!(
            csv_into(b"4.5", &int, &mut buf),
            Err(BadKind::WrongType {
                expected: "int64".into(),
                found: "text \"4.5\"".into()
            })
        );
        csv_into(b"-12", &int, &mut buf).expect("int");
        assert_eq!(buf.ints, vec![-12]);
        let bytes = col(ValueType::Bytes, Shape::Scalar);
        let mut buf = ColBuf::default();
        csv_into(b"", &bytes, &mut buf).expect("empty string is a value");
        assert_eq!(buf.ends, vec![0]);
        let list = col(ValueType::Float, Shape::List);
        let mut buf = ColBuf::default();
        csv_into(b"[1, 2.5]", &list, &mut buf).expect("list");
        assert_eq!(buf.floats, vec![1.0, 2.5]);
    }
}
