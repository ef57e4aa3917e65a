//! Runs the `infeed` binary from the repository root, for the tests that
//! drive the command line.

use std::process::{Command, Output};

/// `infeed ARGS…` run to completion, with the repository root as its
/// working directory so that `testdata/…` paths resolve.
pub fn infeed<S: AsRef<std::ffi::OsStr>>(args: &[S]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_infeed"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("run infeed")
}
