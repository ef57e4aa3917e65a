//! Image features end to end: PNG and JPEG values decoded on the workers
//! (determinism at any thread count and across a restore, typed errors
//! naming the file, offset and feature), and against TensorFlow's own
//! decoders and resize (`tf_images`, needs TensorFlow: ignored by default,
//! run by `scripts/test.sh`).
//!
//! Test images are tiny and made here: PNGs by the `png` crate, JPEGs by
//! the libjpeg-turbo the crate links (`encode.rs`).

mod encode;
mod hostile;
mod pipeline;
mod tf_images;
