//! Where records come from and go to: sources (local files, the cloud
//! emulators, injected cloud faults), conversion to TFRecord shards,
//! TensorFlow Datasets directories, TensorFlow itself both ways
//! (`interop`) and image features.
//!
//! One test binary of modules, one module per area (as `src/`): each
//! binary links the whole library, so areas share binaries.

#[path = "../support/mod.rs"]
mod support;

#[cfg(feature = "convert")]
mod convert;
#[cfg(feature = "cloud")]
mod emulators;
#[cfg(feature = "images")]
mod image;
mod index;
mod interop;
mod source;
mod tfds;
