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
//!
//! One file per concern: what a parse gives (`columns.rs`), what can be
//! wrong (`error.rs`), the recycled column buffers (`buffers.rs`), one
//! `Feature` decoded (`decode.rs`), a feature found by name (`lookup.rs`),
//! a spec's features compiled and their columns built (`feature_set.rs`),
//! and the two parsers (`example.rs`, `sequence.rs`).

mod buffers;
mod canonical;
mod columns;
mod decode;
mod error;
mod example;
mod feature_set;
mod lookup;
mod sequence;

pub use columns::{BytesValues, Column, ParsedBatch, SequenceBatch, Values};
pub use error::{ParseError, ParseErrorKind};
pub use example::{ExampleParser, parse_examples};
pub use sequence::{SequenceParser, parse_sequence_examples};
