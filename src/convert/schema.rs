//! The output schema of a conversion: which input columns become which
//! features, with which value type and shape; parsed from `--feature` and
//! `--columns`, or inferred from the first records of the input.
//!
//! Inference rules (what a TensorFlow user expects):
//! - JSON integers → `int64`; any number with a fraction or exponent in a
//!   column (`1.5`, `1e3`, `2.0`) makes the column `float` (FloatList is
//!   float32), and its integers are then read as floats;
//! - JSON `true`/`false` → `int64` 1/0;
//! - strings (and CSV text, Parquet string/binary) → `bytes` (UTF-8 as is);
//! - a JSON array of those → a list of that type; `[]` says nothing about
//!   the type; arrays of arrays and objects are not supported (an error);
//! - CSV fields that all parse as integers → `int64`, as numbers → `float`,
//!   otherwise `bytes`;
//! - a column holding both numbers and strings, or both scalars and lists,
//!   in the sample is an error that names two lines that disagree.
//!
//! A value later in the input that does not fit the inferred type (`1.5` in
//! an `int64` column) is a bad record, never rounded: give `--feature` to
//! override the inference.

use std::fmt;

/// The value type of a feature (the list kind of `tf.train.Feature`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ValueType {
    /// `Int64List`.
    Int64,
    /// `FloatList` (float32).
    Float,
    /// `BytesList`.
    Bytes,
}

impl ValueType {
    /// The name used by `--feature` and in messages.
    pub fn name(self) -> &'static str {
        match self {
            ValueType::Int64 => "int64",
            ValueType::Float => "float",
            ValueType::Bytes => "bytes",
        }
    }

    /// The dtype name in a pipeline spec string (TensorFlow's names).
    pub fn spec_name(self) -> &'static str {
        match self {
            ValueType::Int64 => "int64",
            ValueType::Float => "float",
            ValueType::Bytes => "string",
        }
    }

    fn parse(s: &str) -> Option<Self> {
        match s.to_ascii_lowercase().as_str() {
            "int64" | "int" | "int32" => Some(ValueType::Int64),
            "float" | "float32" | "float64" | "double" => Some(ValueType::Float),
            "bytes" | "string" | "str" => Some(ValueType::Bytes),
            _ => None,
        }
    }
}

impl fmt::Display for ValueType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// How many values a record holds for a feature.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shape {
    /// Exactly one value (spec `fixed_len[]`).
    Scalar,
    /// Any number of values (spec `var_len`).
    List,
    /// Exactly this many values, given as a list (spec `fixed_len[N]`).
    Fixed(usize),
}

/// One output feature and the input column it comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SchemaColumn {
    /// The column's name in the input.
    pub source: String,
    /// The feature name in the output (after `--columns a=b` renames).
    pub name: String,
    /// The value type.
    pub vtype: ValueType,
    /// Scalar, list or fixed-length list.
    pub shape: Shape,
}

impl SchemaColumn {
    /// The type as messages show it: `int64`, `list of float`, `list of 3 bytes`.
    pub fn describe(&self) -> String {
        describe(self.vtype, self.shape)
    }

    /// This feature in a pipeline spec string: `name:var_len:int64`,
    /// `name:fixed_len[]:float` (a scalar) or `name:fixed_len[128]:int64`.
    pub fn spec(&self) -> String {
        let kind = match self.shape {
            Shape::Scalar => "fixed_len[]".to_string(),
            Shape::List => "var_len".to_string(),
            Shape::Fixed(n) => format!("fixed_len[{n}]"),
        };
        format!("{}:{kind}:{}", self.name, self.vtype.spec_name())
    }
}

pub(crate) fn describe(vtype: ValueType, shape: Shape) -> String {
    match shape {
        Shape::Scalar => vtype.name().to_string(),
        Shape::List => format!("list of {vtype}"),
        Shape::Fixed(n) => format!("list of {n} {vtype}"),
    }
}

/// The features of the output, in the order they are written.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Schema {
    /// The columns, in output order.
    pub columns: Vec<SchemaColumn>,
}

impl Schema {
    /// The spec string a pipeline accepts for these features, comma-separated.
    pub fn spec(&self) -> String {
        self.columns
            .iter()
            .map(SchemaColumn::spec)
            .collect::<Vec<_>>()
            .join(",")
    }

    /// The index of the column read from input column `source`.
    pub fn position(&self, source: &str) -> Option<usize> {
        self.columns.iter().position(|c| c.source == source)
    }
}

/// A `--feature NAME:TYPE` option: `NAME:int64`, `NAME:float[]` (a list),
/// `NAME:bytes[16]` (a list of exactly 16). `NAME` is the input column.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FeatureArg {
    /// The input column.
    pub name: String,
    /// Its value type.
    pub vtype: ValueType,
    /// Its shape.
    pub shape: Shape,
}

impl std::str::FromStr for FeatureArg {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let (name, ty) = s
            .rsplit_once(':')
            .ok_or_else(|| format!("{s:?}: expected NAME:TYPE, e.g. label:int64 or ids:int64[]"))?;
        if name.is_empty() {
            return Err(format!("{s:?}: empty feature name"));
        }
        let (base, shape) = match ty.split_once('[') {
            None => (ty, Shape::Scalar),
            Some((base, rest)) => {
                let inner = rest
                    .strip_suffix(']')
                    .ok_or_else(|| format!("{s:?}: missing ']'"))?;
                if inner.is_empty() {
                    (base, Shape::List)
                } else {
                    let n = inner
                        .parse()
                        .map_err(|_| format!("{s:?}: {inner:?} is not a length"))?;
                    (base, Shape::Fixed(n))
                }
            }
        };
        let vtype = ValueType::parse(base)
            .ok_or_else(|| format!("{s:?}: unknown type {base:?}: use int64, float or bytes"))?;
        Ok(FeatureArg {
            name: name.to_string(),
            vtype,
            shape,
        })
    }
}

/// One entry of `--columns`: keep input column `source`, named `name` in the output.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ColumnSelect {
    /// The input column.
    pub source: String,
    /// The output feature name.
    pub name: String,
}

/// Parses `--columns a,b=new_b`: keep `a` and `b`, rename `b` to `new_b`.
pub fn parse_columns(s: &str) -> Result<Vec<ColumnSelect>, String> {
    let mut out: Vec<ColumnSelect> = Vec::new();
    for part in s.split(',') {
        let part = part.trim();
        if part.is_empty() {
            return Err(format!("{s:?}: empty column name"));
        }
        let (source, name) = match part.split_once('=') {
            Some((a, b)) if !a.is_empty() && !b.is_empty() => (a, b),
            Some(_) => return Err(format!("{part:?}: expected OLD=NEW")),
            None => (part, part),
        };
        if out.iter().any(|c| c.name == name) {
            return Err(format!("{s:?}: output name {name:?} appears twice"));
        }
        if out.iter().any(|c| c.source == source) {
            return Err(format!("{s:?}: column {source:?} appears twice"));
        }
        out.push(ColumnSelect {
            source: source.into(),
            name: name.into(),
        });
    }
    Ok(out)
}

/// What the inference sample showed for one column (also filled from
/// Python values by the Beam transform's schema inference).
#[derive(Clone, Debug, Default)]
pub struct Observed {
    /// First place (a display string such as `line 3`) holding an integer.
    pub int: Option<String>,
    /// First place holding a fractional number.
    pub float: Option<String>,
    /// First place holding a string.
    pub bytes: Option<String>,
    /// First integer that float32 cannot hold exactly (beyond 2^24, or
    /// beyond int64): such a column must not become float32, which would
    /// round it.
    pub inexact_int: Option<String>,
    /// First place holding a single value.
    pub scalar: Option<String>,
    /// First place holding a list.
    pub list: Option<String>,
    /// The first unsupported value, e.g. an object or a nested list.
    pub unsupported: Option<(String, String)>,
}

/// A kind of value seen in the sample.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Seen {
    /// An integer (or a bool).
    Int,
    /// A fractional number.
    Float,
    /// A string.
    Bytes,
}

impl Observed {
    /// Notes an integer that float32 cannot hold exactly (see `inexact_int`).
    pub fn see_inexact_int(&mut self, at: &str) {
        self.inexact_int.get_or_insert_with(|| at.to_string());
    }

    /// Notes a value of kind `kind` at `at`.
    pub fn see(&mut self, kind: Seen, at: &str) {
        let slot = match kind {
            Seen::Int => &mut self.int,
            Seen::Float => &mut self.float,
            Seen::Bytes => &mut self.bytes,
        };
        slot.get_or_insert_with(|| at.to_string());
    }

    /// Notes a single value (`list` false) or a list at `at`.
    pub fn see_shape(&mut self, list: bool, at: &str) {
        let slot = if list {
            &mut self.list
        } else {
            &mut self.scalar
        };
        slot.get_or_insert_with(|| at.to_string());
    }

    /// The column's type, or why it cannot be inferred.
    pub fn resolve(&self, column: &str) -> Result<(ValueType, Shape), String> {
        let fix = format!(
            "give ConvertOptions::features {column}:TYPE or leave it out with ConvertOptions::columns"
        );
        if let Some((at, what)) = &self.unsupported {
            return Err(format!(
                "column {column:?}: {at} holds {what}, which is not supported: {fix}"
            ));
        }
        if let (Some(i), Some(f)) = (&self.inexact_int, &self.float) {
            return Err(format!(
                "column {column:?} holds an integer that float32 cannot hold exactly ({i}) \
                 and fractional numbers ({f}): as float32 it would be rounded; {fix}"
            ));
        }
        let number = self.int.as_ref().or(self.float.as_ref());
        if let (Some(n), Some(b)) = (number, &self.bytes) {
            return Err(format!(
                "column {column:?} holds numbers ({n}) and strings ({b}): {fix}"
            ));
        }
        if let (Some(s), Some(l)) = (&self.scalar, &self.list) {
            return Err(format!(
                "column {column:?} holds single values ({s}) and lists ({l}): {fix}"
            ));
        }
        let vtype = if self.bytes.is_some() {
            ValueType::Bytes
        } else if self.float.is_some() {
            ValueType::Float
        } else if self.int.is_some() {
            ValueType::Int64
        } else {
            return Err(format!(
                "column {column:?} has no non-null value in the first records: {fix}"
            ));
        };
        let shape = if self.list.is_some() {
            Shape::List
        } else {
            Shape::Scalar
        };
        Ok((vtype, shape))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn feature_args() {
        let f: FeatureArg = "label:int64".parse().expect("parse");
        assert_eq!(
            f,
            FeatureArg {
                name: "label".into(),
                vtype: ValueType::Int64,
                shape: Shape::Scalar
            }
        );
        let f: FeatureArg = "a:b:float[]".parse().expect("parse");
        assert_eq!(
            (f.name.as_str(), f.vtype, f.shape),
            ("a:b", ValueType::Float, Shape::List)
        );
        let f: FeatureArg = "img:bytes[3]".parse().expect("parse");
        assert_eq!(f.shape, Shape::Fixed(3));
        assert!("x".parse::<FeatureArg>().is_err());
        assert!("x:complex".parse::<FeatureArg>().is_err());
        assert!("x:int64[".parse::<FeatureArg>().is_err());
        assert!(":int64".parse::<FeatureArg>().is_err());
    }

    #[test]
    fn columns_keep_and_rename() {
        let c = parse_columns("a, b=new_b").expect("parse");
        assert_eq!(
            c,
            vec![
                ColumnSelect {
                    source: "a".into(),
                    name: "a".into()
                },
                ColumnSelect {
                    source: "b".into(),
                    name: "new_b".into()
                }
            ]
        );
        assert!(parse_columns("a,a").is_err());
        assert!(parse_columns("a,b=a").is_err());
        assert!(parse_columns("a,,b").is_err());
        assert!(parse_columns("=x").is_err());
    }

    #[test]
    fn spec_strings() {
        let schema = Schema {
            columns: vec![
                SchemaColumn {
                    source: "ids".into(),
                    name: "input_ids".into(),
                    vtype: ValueType::Int64,
                    shape: Shape::List,
                },
                SchemaColumn {
                    source: "y".into(),
                    name: "y".into(),
                    vtype: ValueType::Float,
                    shape: Shape::Scalar,
                },
                SchemaColumn {
                    source: "t".into(),
                    name: "t".into(),
                    vtype: ValueType::Bytes,
                    shape: Shape::Fixed(2),
                },
            ],
        };
        assert_eq!(
            schema.spec(),
            "input_ids:var_len:int64,y:fixed_len[]:float,t:fixed_len[2]:string"
        );
    }

    #[test]
    fn inference_resolution() {
        let mut o = Observed::default();
        o.see(Seen::Int, "line 1");
        o.see_shape(false, "line 1");
        assert_eq!(o.resolve("x"), Ok((ValueType::Int64, Shape::Scalar)));
        o.see(Seen::Float, "line 2");
        assert_eq!(o.resolve("x"), Ok((ValueType::Float, Shape::Scalar)));
        o.see(Seen::Bytes, "line 3");
        let err = o.resolve("x").expect_err("mixed");
        assert!(
            err.contains("numbers (line 1) and strings (line 3)"),
            "{err}"
        );
        let mut o = Observed::default();
        o.see(Seen::Bytes, "line 1");
        o.see_shape(false, "line 1");
        o.see_shape(true, "line 4");
        let err = o.resolve("x").expect_err("mixed shape");
        assert!(
            err.contains("single values (line 1) and lists (line 4)"),
            "{err}"
        );
        assert!(Observed::default().resolve("x").is_err());
    }
}
