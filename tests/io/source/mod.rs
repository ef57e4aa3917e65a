//! Sources: local files, the cloud emulators, and injected cloud faults
//! (the source layer and the whole pipeline over it).

mod cloud;
mod common;
#[cfg(feature = "cloud")]
mod fault_proxy;
mod faults;
mod local;
mod pipeline_cloud;
mod pipeline_faults;
mod tfds_cloud;
