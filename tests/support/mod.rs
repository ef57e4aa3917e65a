//! Helpers more than one test binary needs, `#[path]`-included as the
//! module `support` of each (`tests/<binary>/main.rs`); each binary uses a
//! part.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

#[cfg(feature = "cli")]
pub mod run;
pub mod tfrecord;
pub mod wire;

/// `rel` in the repository root.
pub fn repo(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(rel)
}

/// The path of a file in testdata/.
pub fn testdata(name: &str) -> PathBuf {
    repo("testdata").join(name)
}
