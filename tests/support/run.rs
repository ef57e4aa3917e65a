//! Runs the `infeed` binary from the repository root, for the tests that
//! drive the command line.

use std::ffi::OsStr;
use std::path::Path;
use std::process::{Command, Output};

/// `infeed ARGS…` run to completion, with the repository root as its
/// working directory so that `testdata/…` paths resolve.
pub fn infeed<S: AsRef<OsStr>>(args: &[S]) -> Output {
    infeed_in(Path::new(env!("CARGO_MANIFEST_DIR")), args)
}

/// `infeed ARGS…` run to completion in the working directory `dir`.
pub fn infeed_in<S: AsRef<OsStr>>(dir: &Path, args: &[S]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_infeed"))
        .args(args)
        .current_dir(dir)
        .output()
        .expect("run infeed")
}

/// The standard output of `infeed ARGS…`, which must succeed (else the
/// test fails with the arguments and the standard error).
pub fn infeed_ok(args: &[&str]) -> String {
    let output = infeed(args);
    assert!(
        output.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).expect("utf-8 stdout")
}

/// The report of `infeed bench ARGS… --json` (ARGS starting with `bench`),
/// which must succeed.
pub fn bench_json(args: &[&str]) -> serde_json::Value {
    let text = infeed_ok(&[args, &["--json"]].concat());
    serde_json::from_str(&text).expect("one JSON line")
}
