//! Conversion to TFRecord shards: the library API and `infeed convert`
//! (to local folders, to cloud buckets, read back by TensorFlow).

#[cfg(feature = "cli")]
mod cli;
#[cfg(feature = "cli")]
mod cloud;
mod library;
#[cfg(feature = "cli")]
mod tf;
#[cfg(feature = "cli")]
mod tfds;
