//! The Example / SequenceExample batch parser and the wire length scan.

mod example;
mod length;
mod props;
mod sequence;

use infeed::example::{Column, ParseError, ParseErrorKind, ParsedBatch};

/// The column `name` of `batch`, which must have it.
pub fn col<'a>(batch: &'a ParsedBatch, name: &str) -> &'a Column {
    batch.get(name).expect("column present")
}

/// The error of `record` at `feature`.
pub fn err(record: usize, feature: &str, kind: ParseErrorKind) -> ParseError {
    ParseError {
        record,
        feature: Some(feature.to_owned()),
        kind,
    }
}
