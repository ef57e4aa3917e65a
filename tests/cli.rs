//! The `infeed` binary on the TensorFlow-written files in testdata/.

use std::path::Path;
use std::process::{Command, Output};

fn infeed(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_infeed"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("run infeed")
}

fn stdout(output: &Output) -> String {
    String::from_utf8(output.stdout.clone()).expect("utf-8 stdout")
}

fn stderr(output: &Output) -> String {
    String::from_utf8(output.stderr.clone()).expect("utf-8 stderr")
}

/// The expected JSON lines of a testdata file, in serde_json's compact text
/// (the files hold Python's spacing; values are what matter).
fn expected_lines(json_file: &str) -> Vec<String> {
    let text = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(json_file))
        .expect("read expected json");
    text.lines()
        .map(|line| {
            let value: serde_json::Value = serde_json::from_str(line).expect("expected json line");
            serde_json::to_string(&value).expect("serialize")
        })
        .collect()
}

fn lines(text: &str) -> Vec<String> {
    text.lines().map(str::to_owned).collect()
}

#[test]
fn cat_prints_tensorflow_examples_exactly_for_every_compression() {
    let expected = expected_lines("testdata/examples.tfrecord.json");
    assert_eq!(expected.len(), 6);
    for file in [
        "testdata/examples.tfrecord",
        "testdata/examples.tfrecord.gz",
        "testdata/examples.tfrecord.zz",
    ] {
        let output = infeed(&["cat", file]);
        assert!(output.status.success(), "{file}: {}", stderr(&output));
        assert_eq!(lines(&stdout(&output)), expected, "{file}");
    }
}

#[test]
fn cat_prints_sequence_examples_with_context_and_feature_lists() {
    let output = infeed(&["cat", "testdata/sequence.tfrecord"]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(
        lines(&stdout(&output)),
        expected_lines("testdata/sequence.tfrecord.json")
    );
}

#[test]
fn cat_skip_and_limit_count_across_files() {
    let all = expected_lines("testdata/examples.tfrecord.json");
    let output = infeed(&[
        "cat",
        "--skip",
        "4",
        "--limit",
        "3",
        "testdata/examples.tfrecord",
        "testdata/examples.tfrecord.gz",
    ]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(
        lines(&stdout(&output)),
        vec![all[4].clone(), all[5].clone(), all[0].clone()]
    );
}

#[test]
fn cat_of_a_corrupt_file_prints_the_good_records_then_names_file_and_offset() {
    let output = infeed(&["cat", "testdata/corrupt.tfrecord"]);
    assert_eq!(output.status.code(), Some(1));
    let expected = expected_lines("testdata/corrupt.tfrecord.json");
    assert_eq!(lines(&stdout(&output)), expected[..2].to_vec());
    let err = stderr(&output);
    assert!(
        err.starts_with("infeed: testdata/corrupt.tfrecord: byte 117: "),
        "{err}"
    );
}

#[test]
fn wrong_compression_is_a_clear_error_at_byte_zero() {
    let output = infeed(&[
        "cat",
        "--compression",
        "none",
        "testdata/examples.tfrecord.gz",
    ]);
    assert_eq!(output.status.code(), Some(1));
    let err = stderr(&output);
    assert!(
        err.starts_with("infeed: testdata/examples.tfrecord.gz: byte 0: "),
        "{err}"
    );
    let output = infeed(&[
        "cat",
        "--compression",
        "bzip2",
        "testdata/examples.tfrecord",
    ]);
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output).contains("unknown compression \"bzip2\""),
        "{}",
        stderr(&output)
    );
}

#[test]
fn count_prints_per_file_counts_and_total() {
    let output = infeed(&[
        "count",
        "testdata/examples.tfrecord.zz",
        "testdata/lm-sample.tfrecord.gz",
        "testdata/sequence.tfrecord",
    ]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(
        stdout(&output),
        "testdata/examples.tfrecord.zz\t6\ntestdata/lm-sample.tfrecord.gz\t256\ntestdata/sequence.tfrecord\t3\ntotal\t265\n"
    );
}

#[test]
fn verify_passes_good_files_and_lists_each_corrupt_record() {
    let output = infeed(&[
        "verify",
        "testdata/examples.tfrecord.gz",
        "testdata/lm-sample.tfrecord",
    ]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(
        stdout(&output),
        "testdata/examples.tfrecord.gz: ok, 6 records\ntestdata/lm-sample.tfrecord: ok, 256 records\n"
    );

    let output = infeed(&[
        "verify",
        "testdata/corrupt.tfrecord",
        "testdata/examples.tfrecord",
    ]);
    assert_eq!(output.status.code(), Some(1));
    let out = lines(&stdout(&output));
    assert_eq!(out.len(), 3, "{out:?}");
    assert!(
        out[0].starts_with("testdata/corrupt.tfrecord: byte 117: "),
        "{}",
        out[0]
    );
    assert!(out[0].ends_with(" (94 bytes skipped)"), "{}", out[0]);
    assert_eq!(
        out[1],
        "testdata/corrupt.tfrecord: CORRUPT, 4 good records, 1 corrupt regions, 94 bytes skipped"
    );
    assert_eq!(out[2], "testdata/examples.tfrecord: ok, 6 records");
}

#[test]
fn every_command_has_help() {
    for command in [
        &["--help"][..],
        &["cat", "--help"],
        &["count", "--help"],
        &["verify", "--help"],
    ] {
        let output = infeed(command);
        assert!(output.status.success(), "{command:?}");
        assert!(stdout(&output).contains("Usage: infeed"), "{command:?}");
    }
}

#[test]
fn a_missing_file_names_the_file() {
    let output = infeed(&["count", "testdata/no-such-file.tfrecord"]);
    assert_eq!(output.status.code(), Some(1));
    assert!(
        stderr(&output).contains("testdata/no-such-file.tfrecord"),
        "{}",
        stderr(&output)
    );
}
