//! The programs on top of the library: the `infeed` command line (`cli`)
//! and XLA programs fed through PJRT by the device feeder (`xla`).
//!
//! One test binary of modules, one module per area (as `src/`): each
//! binary links the whole library, so areas share binaries.

#[path = "../support/mod.rs"]
mod support;

#[cfg(feature = "cli")]
mod cli;
#[cfg(feature = "xla")]
mod xla;
