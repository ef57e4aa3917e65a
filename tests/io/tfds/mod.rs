//! TensorFlow Datasets directories: split slicing, checkpoints over slices,
//! the features.json mapping and the errors, on directories written here by
//! hand (`hand.rs`, `errors.rs`); and against tfds itself (`oracle.rs`,
//! ignored: it needs tensorflow-datasets).

mod errors;
mod hand;
mod oracle;
