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

/// The names in folder `dir`, sorted (none when it is missing).
pub fn listing(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}
