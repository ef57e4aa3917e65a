//! What can be wrong with a record: [`ParseError`] and its kinds.

use crate::example::wire::WireError;
use crate::spec::{DType, WireKind};
use std::fmt;

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
    /// A required feature list ([`SequenceSpec::require`](crate::spec::SequenceSpec::require)) is absent.
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

pub(super) fn malformed(record: usize, feature: Option<&str>, e: WireError) -> ParseError {
    ParseError {
        record,
        feature: feature.map(str::to_owned),
        kind: e.into(),
    }
}
