//! TFRecord framing: format, corruption, property tests.

mod corrupt;
mod format;
mod props;
