//! `tf.train.Example` and `SequenceExample`: prost types for the general API
//! and a schema-directed batch parser for the hot path.

mod length;
mod parse;
pub mod proto;
mod runs;
mod wire;

pub use length::{LengthError, feature_length, longest_feature_length};
pub use parse::{
    BytesValues, Column, ExampleParser, ParseError, ParseErrorKind, ParsedBatch, SequenceBatch,
    SequenceParser, Values, parse_examples, parse_sequence_examples,
};
pub(crate) use runs::{Cut, RowSpec, Rows};
