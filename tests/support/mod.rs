//! Helpers more than one test binary needs, `#[path]`-included as the
//! module `support` of each (`tests/<binary>/main.rs`); each binary uses a
//! part.
#![allow(dead_code)]

#[cfg(feature = "cli")]
pub mod run;
pub mod tfrecord;
pub mod wire;
