//! `tf.train.Example` and `SequenceExample`: prost types for the general API
//! and a schema-directed batch parser for the hot path.

pub mod proto;
