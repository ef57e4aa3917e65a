//! Typed errors of `infeed convert`: every bad record names its file, its
//! line (or Parquet row) and its column, so the user can find and fix it.

use std::fmt;

/// Where a record is in its input file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Location {
    /// A 1-based line number (JSONL, CSV, plain text); for a CSV record that
    /// spans lines, the line it starts on.
    Line(u64),
    /// A 1-based row number in a Parquet file.
    Row(u64),
    /// The whole file (plain text, one record per file).
    File,
    /// The offset (from 0) of the record's first byte in its file: a record
    /// of a byte range of a split file (`infeed.beam.ConvertFiles`), where
    /// line numbers are not known without reading the file from its start.
    Byte(u64),
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Location::Line(n) => write!(f, "line {n}"),
            Location::Row(n) => write!(f, "row {n}"),
            Location::File => f.write_str("whole file"),
            Location::Byte(n) => write!(f, "byte {n}"),
        }
    }
}

/// What was wrong with one input record.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum BadKind {
    /// The line is not valid JSON.
    #[error("invalid JSON: {0}")]
    Json(String),
    /// A JSONL line holds JSON that is not an object.
    #[error("a JSONL line must be a JSON object, found {0}")]
    NotObject(&'static str),
    /// The value is null (or an empty CSV field in a numeric column).
    #[error("null value")]
    Null,
    /// The record lacks the column.
    #[error("missing value")]
    Missing,
    /// A value of another type than the column's.
    #[error("expected {expected}, found {found}")]
    WrongType {
        /// The column's type, e.g. `int64` or `list of float`.
        expected: String,
        /// What the record holds, e.g. `string "abc"`.
        found: String,
    },
    /// A number or text that does not fit the column's type.
    #[error("{value} does not fit {dtype}")]
    OutOfRange {
        /// The value as written in the input.
        value: String,
        /// The column's value type.
        dtype: &'static str,
    },
    /// A list whose length differs from the column's fixed length.
    #[error("expected a list of {expected} values, found {found}")]
    WrongLength {
        /// The declared length.
        expected: usize,
        /// The length in the record.
        found: usize,
    },
    /// A key (JSONL) that is not in the schema.
    #[error(
        "not in the schema (inferred from the first records): add ConvertOptions::features NAME:TYPE, or choose columns with ConvertOptions::columns"
    )]
    UnknownColumn,
    /// A CSV record with another number of fields than the header.
    #[error("{found} fields, but the header has {expected}")]
    FieldCount {
        /// Fields in the header.
        expected: usize,
        /// Fields in this record.
        found: usize,
    },
    /// A malformed CSV record (a quote problem).
    #[error("malformed CSV: {0}")]
    Csv(&'static str),
    /// Text that must be UTF-8 (for the tokenizer) is not.
    #[error("text is not valid UTF-8")]
    Utf8,
    /// The tokenizer failed on the text.
    #[error("tokenizer failed: {0}")]
    Tokenize(String),
    /// A Parquet or Arrow value that cannot be read.
    #[error("{0}")]
    Unsupported(String),
}

/// One bad input record: file, place, column and what was wrong.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error("{file}: {location}{}: {kind}", column_part(.column))]
pub struct BadRecord {
    /// The input file as given (after glob expansion).
    pub file: String,
    /// Where the record is.
    pub location: Location,
    /// The input column, when the problem is in one column.
    pub column: Option<String>,
    /// What was wrong.
    pub kind: BadKind,
}

fn column_part(column: &Option<String>) -> String {
    match column {
        Some(c) => format!(": column {c:?}"),
        None => String::new(),
    }
}

/// Everything `convert` can fail with.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConvertError {
    /// A bad input record (and `--skip-bad` was not given).
    #[error("{0}")]
    Bad(Box<BadRecord>),
    /// Reading an input failed.
    #[error("{path}: {source}")]
    Io {
        /// The input or output path.
        path: String,
        /// The I/O error.
        source: std::io::Error,
    },
    /// An input cannot be used as a whole (unknown format, unreadable
    /// Parquet, a CSV header that lacks a column, a glob that matches nothing).
    #[error("{path}: {message}")]
    Input {
        /// The input file or pattern.
        path: String,
        /// What was wrong.
        message: String,
    },
    /// The schema cannot be inferred or is contradictory.
    #[error("schema: {0}")]
    Schema(String),
    /// The tokenizer file cannot be loaded.
    #[error("tokenizer {path}: {message}")]
    Tokenizer {
        /// The tokenizer.json path.
        path: String,
        /// The loader's message.
        message: String,
    },
    /// Writing, committing or removing an output object failed.
    #[error("output {name}: {source}")]
    Output {
        /// The object's name (or location).
        name: String,
        /// The I/O error.
        source: std::io::Error,
    },
    /// Contradictory or invalid options.
    #[error("{0}")]
    Options(String),
    /// The system refused a thread (too many threads, no memory).
    #[error("cannot start a {what} thread: {source}")]
    Thread {
        /// Which thread.
        what: &'static str,
        /// The spawn's error.
        source: std::io::Error,
    },
}

impl From<BadRecord> for ConvertError {
    fn from(bad: BadRecord) -> Self {
        ConvertError::Bad(Box::new(bad))
    }
}

impl ConvertError {
    #[cfg(feature = "read")]
    pub(crate) fn io(path: impl fmt::Display, source: std::io::Error) -> Self {
        ConvertError::Io {
            path: path.to_string(),
            source,
        }
    }

    pub(crate) fn input(path: impl fmt::Display, message: impl Into<String>) -> Self {
        ConvertError::Input {
            path: path.to_string(),
            message: message.into(),
        }
    }

    pub(crate) fn output(name: impl fmt::Display, source: std::io::Error) -> Self {
        ConvertError::Output {
            name: name.to_string(),
            source,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_record_names_file_line_and_column() {
        let bad = BadRecord {
            file: "data/a.jsonl".into(),
            location: Location::Line(7),
            column: Some("score".into()),
            kind: BadKind::WrongType {
                expected: "float".into(),
                found: "string \"x\"".into(),
            },
        };
        assert_eq!(
            bad.to_string(),
            "data/a.jsonl: line 7: column \"score\": expected float, found string \"x\""
        );
        let bad = BadRecord {
            file: "b.parquet".into(),
            location: Location::Row(3),
            column: None,
            kind: BadKind::Null,
        };
        assert_eq!(bad.to_string(), "b.parquet: row 3: null value");
    }
}
