//! Feeding XLA programs through the PJRT C API (feature `xla`).
//!
//! A thin layer of our own over the C API that JAX itself uses: load a
//! plugin by path ([`Plugin`]), create a [`Client`] (one CPU device unless
//! asked), compile StableHLO MLIR text ([`Program`] → [`Executable`]), move
//! [`Tensor`](crate::batch::Tensor)s to the device without a copy
//! ([`DeviceBuffer`]), execute, read results back. [`DeviceFeeder`] runs a
//! training loop on a device thread fed by a pipeline's batches.
//!
//! The same code drives a CPU, GPU or TPU plugin: only the plugin path
//! (`PJRT_PLUGIN_PATH`) differs.
//!
//! # Threads
//! PJRT handles are not thread-safe: a [`Client`], its executables and its
//! buffers are `!Send` and live on the thread that made them (the device
//! thread). Host memory given to the device comes back to its pool from that
//! thread once the device says it is done with it.

/// Calls a PJRT C API function of `plugin`'s table with `args` and turns
/// the returned error into a `Result`. Must be used inside `unsafe`: the
/// caller vouches that `args` is a fully initialised argument struct whose
/// pointers are valid for the call.
macro_rules! pjrt_call {
    ($plugin:expr, $name:ident, $args:expr) => {{
        let plugin: &$crate::xla::plugin::Plugin = $plugin;
        match plugin.function(
            ::std::mem::offset_of!($crate::xla::sys::PJRT_Api, $name),
            plugin.api().$name,
            stringify!($name),
        ) {
            Ok(f) => plugin.check(f($args), stringify!($name)),
            Err(e) => Err(e),
        }
    }};
}

mod buffer;
mod client;
mod device;
mod dma;
mod error;
mod event;
mod feeder;
mod plugin;
mod program;
// The generated bindings stay inside this module: the safe types above are
// the interface.
#[allow(clippy::all)]
mod sys;

pub use buffer::DeviceBuffer;
pub use client::{Client, ClientOptions, Executable, OptionValue};
pub use dma::{DmaMap, DmaStatus};
pub use error::XlaError;
pub use event::Completion;
pub use feeder::{DeviceFeeder, FeederConfig, FeederReport, LossPoint, StepProgram};
pub use plugin::{API_VERSION, DEFAULT_PLUGIN, PLUGIN_PATH_VAR, Plugin, default_path};
pub use program::{ArrayType, ElementType, Program, Signature};
