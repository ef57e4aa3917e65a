//! The PJRT layer, the device feeder and `infeed bench --program`.

#[cfg(feature = "cli")]
mod bench_cli;
mod pjrt;
mod plugin_versions;
mod train;
