//! The engine, from bytes to batches, on local files: TFRecord framing
//! (`record`), the Example and SequenceExample parser (`parse`), batch
//! assembly (`batch`) and the pipeline (`pipeline`: records, parsing,
//! grouping, checkpoints, many hosts, TensorFlow as the oracle).
//!
//! One test binary of modules, one module per area (as `src/`): each
//! binary links the whole library, so areas share binaries.

#[path = "../support/mod.rs"]
mod support;

mod batch;
mod parse;
mod pipeline;
mod record;
