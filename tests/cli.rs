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

fn bench_json(args: &[&str]) -> serde_json::Value {
    let output = infeed(args);
    assert!(output.status.success(), "{args:?}: {}", stderr(&output));
    serde_json::from_str(&stdout(&output)).expect("one JSON line")
}

#[test]
fn bench_reports_figures_and_digests_that_do_not_depend_on_threads() {
    let input = "testdata/lm-sample.tfrecord,testdata/lm-sample.tfrecord.gz";
    let base = [
        "bench",
        input,
        "--spec",
        "input_ids:var_len:int32,attention_mask:var_len:int64",
        "--batch",
        "32",
        "--shuffle",
        "100",
        "--shuffle-files",
        "--interleave",
        "2",
        "--epochs",
        "2",
        "--seed",
        "4",
        "--digests",
    ];
    let one = bench_json(&[&base[..], &["--threads", "1"]].concat());
    let three = bench_json(&[&base[..], &["--threads", "3"]].concat());
    assert_eq!(one["batches"], 32);
    assert_eq!(one["records"], 1024);
    assert_eq!(one["digest"], three["digest"]);
    assert_eq!(one["digests"], three["digests"]);
    for key in [
        "records_per_sec",
        "bytes_per_sec",
        "first_batch_ms",
        "peak_rss_bytes",
    ] {
        assert!(
            one[key].as_f64().is_some_and(|x| x > 0.0),
            "{key}: {}",
            one[key]
        );
    }
    assert_eq!(one["stages"]["read"]["records"], 1024);
    assert_eq!(one["stages"]["batch"]["records"], 1024);
    let mut reseeded = base.to_vec();
    reseeded[14] = "5";
    let other_seed = bench_json(&reseeded);
    assert_ne!(one["digest"], other_seed["digest"]);
}

#[test]
fn bench_state_out_then_state_in_continues_with_the_same_batches() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state.bin").display().to_string();
    let input = "testdata/lm-sample.tfrecord.gz";
    let base = [
        "bench",
        input,
        "--batch",
        "16",
        "--shuffle",
        "64",
        "--epochs",
        "2",
        "--seed",
        "9",
        "--digests",
    ];
    let full = bench_json(&base);
    let first = bench_json(&[&base[..], &["--batches", "7", "--state-out", &state]].concat());
    let rest = bench_json(&[&base[..], &["--state-in", &state]].concat());
    let full = full["digests"].as_array().unwrap().clone();
    assert_eq!(full.len(), 32);
    assert_eq!(first["digests"].as_array().unwrap()[..], full[..7]);
    assert_eq!(rest["digests"].as_array().unwrap()[..], full[7..]);
}

#[test]
fn bench_names_a_bad_spec_and_a_forever_run_without_a_limit() {
    let output = infeed(&[
        "bench",
        "testdata/lm-sample.tfrecord",
        "--spec",
        "ids:ragged:int64",
    ]);
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output).contains("ids:ragged:int64"),
        "{}",
        stderr(&output)
    );
    let output = infeed(&["bench", "testdata/lm-sample.tfrecord", "--epochs", "0"]);
    assert_eq!(output.status.code(), Some(1));
    assert!(
        stderr(&output).contains("reads forever"),
        "{}",
        stderr(&output)
    );
}
