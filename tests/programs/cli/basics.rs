//! The `infeed` binary on the TensorFlow-written files in testdata/.

use crate::support::run::{bench_json, infeed, infeed_in};
use crate::support::tfrecord::write_all;
use crate::support::{repo, testdata};
use infeed::record::Compression;
use std::path::Path;
use std::process::{Command, Output};

fn stdout(output: &Output) -> String {
    String::from_utf8(output.stdout.clone()).expect("utf-8 stdout")
}

fn stderr(output: &Output) -> String {
    String::from_utf8(output.stderr.clone()).expect("utf-8 stderr")
}

/// The expected JSON lines of a testdata file, in serde_json's compact text
/// (the files hold Python's spacing; values are what matter).
fn expected_lines(json_file: &str) -> Vec<String> {
    let text = std::fs::read_to_string(repo(json_file)).expect("read expected json");
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
        // The error names the record's index in the file.
        err.starts_with("infeed: testdata/corrupt.tfrecord: record 2 at byte 117: "),
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
    for (size, says) in [
        ("1K", "\"1K\": a chunk size is from 4K to 256M"),
        ("2x", "\"2x\" is not a size (bytes, or with K or M)"),
    ] {
        let output = infeed(&["bench", "testdata/examples.tfrecord", "--chunk-size", size]);
        assert_eq!(output.status.code(), Some(2));
        assert!(stderr(&output).contains(says), "{}", stderr(&output));
    }
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

/// `infeed bench ARGS --json`, parsed.
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
    assert_eq!(
        (one["workers"].clone(), three["workers"].clone()),
        (1.into(), 3.into())
    );
    // A CPU budget of one core: one worker unless --threads says more, the
    // same batches.
    let budget = bench_json(&[&base[..], &["--cpu-affinity", "0"]].concat());
    assert_eq!(budget["workers"], 1);
    assert_eq!(budget["digests"], one["digests"]);
    // Smaller reads give the same batches.
    let small_reads = bench_json(&[&base[..], &["--chunk-size", "4K"]].concat());
    assert_eq!(small_reads["digests"], one["digests"]);
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
        stderr(&output).contains("repeats forever"),
        "{}",
        stderr(&output)
    );
    // A mixture of sources that repeat forever too (stopping with its
    // first source to end, it never ends).
    let mix = [
        "bench",
        "--mix",
        "a:1:testdata/lm-sample.tfrecord",
        "--mix",
        "b:1:testdata/lm-sample.tfrecord.gz",
        "--epochs",
        "0",
    ];
    let output = infeed(&mix);
    assert_eq!(output.status.code(), Some(1));
    assert!(
        stderr(&output).contains("repeats forever"),
        "{}",
        stderr(&output)
    );
    // A mixture that ends reads no whole number of epochs: none is reported.
    let report = crate::support::run::bench_json(&[&mix[..5], &["--epochs", "2"]].concat());
    assert!(report["records"].as_u64().unwrap() > 0);
    assert_eq!(report["records_per_epoch"], serde_json::Value::Null);
}

#[test]
fn convert_then_count_a_shard_that_begins_like_gzip() {
    // A 35589-character line makes a first
    // record of 0x8B1F bytes, so the shard begins 1f 8b.
    let dir = tempfile::tempdir().unwrap();
    let mut text = "a".repeat(35589);
    text.push_str("\nhello\n");
    std::fs::write(dir.path().join("line.txt"), text).unwrap();
    let output = infeed_in(dir.path(), &["convert", "line.txt", "-o", "o8b", "-q"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let shard = "o8b/train-00000-of-00001.tfrecord";
    let bytes = std::fs::read(dir.path().join(shard)).unwrap();
    assert_eq!(&bytes[..2], &[0x1f, 0x8b]);
    let output = infeed_in(dir.path(), &["count", shard]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(stdout(&output), format!("{shard}\t2\ntotal\t2\n"));
    let output = infeed_in(dir.path(), &["verify", shard]);
    assert_eq!(stdout(&output), format!("{shard}: ok, 2 records\n"));
    let output = infeed_in(
        dir.path(),
        &["bench", shard, "--skip-corrupt", "--batch", "1", "--json"],
    );
    assert!(output.status.success(), "{}", stderr(&output));
    let report: serde_json::Value = serde_json::from_str(&stdout(&output)).unwrap();
    assert_eq!(report["records"], 2);
}

#[test]
fn a_damaged_first_header_or_a_length_past_the_end_loses_only_itself() {
    // Verify reports the records after the damage
    // as good, and bench --skip-corrupt delivers them.
    let dir = tempfile::tempdir().unwrap();
    let first = vec![b'x'; 376]; // 0x0178: the file starts 78 01, like ZLIB
    let mut damaged = write_all(&[&first, b"alpha", b"bravo"], Compression::None);
    damaged[9] ^= 0x10;
    std::fs::write(dir.path().join("damaged.tfrecord"), &damaged).unwrap();
    let mut past_end = write_all(&[b"hello"], Compression::None);
    past_end.extend_from_slice(&infeed::record::encode_header(1 << 30));
    past_end.extend_from_slice(&write_all(&[b"alpha", b"bravo"], Compression::None));
    std::fs::write(dir.path().join("past_end.tfrecord"), &past_end).unwrap();

    let output = infeed_in(
        dir.path(),
        &["verify", "damaged.tfrecord", "past_end.tfrecord"],
    );
    assert_eq!(output.status.code(), Some(1));
    let rest = past_end.len() - 21 - 12;
    assert_eq!(
        lines(&stdout(&output)),
        vec![
            "damaged.tfrecord: byte 0: not a TFRecord file, or wrong --compression (the length \
             CRC of the first record does not match) (392 bytes skipped)"
                .to_string(),
            "damaged.tfrecord: CORRUPT, 2 good records, 1 corrupt regions, 392 bytes skipped"
                .to_string(),
            format!(
                "past_end.tfrecord: byte 21: record length 1073741824 runs past the end of the \
                 data ({rest} bytes left) (12 bytes skipped)"
            ),
            "past_end.tfrecord: CORRUPT, 3 good records, 1 corrupt regions, 12 bytes skipped"
                .to_string(),
        ]
    );
    for (file, records) in [("damaged.tfrecord", 2), ("past_end.tfrecord", 3)] {
        let output = infeed_in(
            dir.path(),
            &["bench", file, "--skip-corrupt", "--batch", "1", "--json"],
        );
        assert!(output.status.success(), "{}", stderr(&output));
        let report: serde_json::Value = serde_json::from_str(&stdout(&output)).unwrap();
        assert_eq!(report["records"], records, "{file}");
        assert_eq!(report["stages"]["read"]["skipped_records"], 1, "{file}");
    }
}

#[test]
fn bench_cpu_seconds_count_from_the_pipeline_start_not_the_process_start() {
    // A process that burned a second of CPU and then
    // exec'd infeed (as `cargo run` does) must not report that second.
    let script = r#"
        while :; do
            read -r -a f < /proc/$$/stat
            (( f[13] + f[14] >= 100 )) && break
            for i in {1..2000}; do :; done
        done
        exec "$0" bench testdata/lm-sample.tfrecord --batch 8 --epochs 1 --json
    "#;
    let output = Command::new("bash")
        .args(["-c", script, env!("CARGO_BIN_EXE_infeed")])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("run bash");
    assert!(output.status.success(), "{}", stderr(&output));
    let report: serde_json::Value = serde_json::from_str(&stdout(&output)).unwrap();
    let cpu = report["cpu_seconds"].as_f64().expect("cpu_seconds");
    assert_eq!(report["records"], 256);
    // Far below the second burned before. (Not compared with the run's
    // wall time: the kernel counts CPU time in ticks, a tick per thread
    // may land either side of a short run's start, so how far it may pass
    // wall × cores depends on scheduling.)
    assert!((0.0..0.5).contains(&cpu), "cpu {cpu} s");
}

#[test]
fn a_parse_error_names_file_record_index_offset_and_feature() {
    // The message once read "record at byte 984: record 0: malformed record at
    // byte 0: field number 0", two record numbers and two offsets with no
    // word of which is which.
    let dir = tempfile::tempdir().unwrap();
    let good = std::fs::read(testdata("lm-sample.tfrecord")).unwrap();
    let mut reader = infeed::record::RecordReader::new(
        std::io::Cursor::new(good),
        "lm",
        infeed::record::Compression::None,
        &infeed::record::ReadOptions::default(),
    );
    let a = reader.next().unwrap().unwrap();
    let b = reader.next().unwrap().unwrap();
    let bad_at = 16 + a.data.len() as u64 + 16 + b.data.len() as u64;
    let bytes = write_all(&[&a.data, &b.data, b"\x00\x01"], Compression::None);
    std::fs::write(dir.path().join("bad.tfrecord"), &bytes).unwrap();
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    std::io::Write::write_all(&mut gz, &bytes).unwrap();
    std::fs::write(dir.path().join("bad.tfrecord.gz"), gz.finish().unwrap()).unwrap();
    let spec = "input_ids:var_len:int64";
    let output = infeed_in(dir.path(), &["bench", "bad.tfrecord", "--spec", spec]);
    assert_eq!(output.status.code(), Some(1));
    assert_eq!(
        stderr(&output).trim_end(),
        format!(
            "infeed: bad.tfrecord: record 2 at byte {bad_at}: not a tf.train.Example: \
             malformed protobuf at byte 0 of the record: field number 0"
        )
    );
    for (file, stream) in [
        ("bad.tfrecord", ""),
        ("bad.tfrecord.gz", " of the uncompressed stream"),
    ] {
        let output = infeed_in(dir.path(), &["cat", file]);
        assert_eq!(output.status.code(), Some(1));
        let err = stderr(&output);
        assert!(
            err.starts_with(&format!(
                "infeed: {file}: record 2 at byte {bad_at}{stream}: not a tf.train.Example or \
                 SequenceExample: "
            )),
            "{err}"
        );
        let output = infeed_in(dir.path(), &["inspect", file]);
        assert_eq!(output.status.code(), Some(1));
        let err = stderr(&output);
        assert!(
            err.starts_with(&format!(
                "infeed: {file}: record 2 at byte {bad_at}{stream}: not a tf.train.Example: "
            )),
            "{err}"
        );
    }
    // A record that does not match the spec: the feature and what was expected.
    let output = infeed(&[
        "bench",
        "testdata/lm-sample.tfrecord",
        "--spec",
        "input_ids:fixed_len[1]:int64",
    ]);
    assert_eq!(output.status.code(), Some(1));
    let err = stderr(&output);
    assert!(
        err.starts_with(
            "infeed: testdata/lm-sample.tfrecord: record 0 at byte 0: feature \"input_ids\": \
             expected 1 value, found "
        ),
        "{err}"
    );
    let output = infeed_in(dir.path(), &["bench", "bad.tfrecord.gz", "--spec", spec]);
    assert_eq!(output.status.code(), Some(1));
    assert_eq!(
        stderr(&output).trim_end(),
        format!(
            "infeed: bad.tfrecord.gz: record 2 at byte {bad_at} of the uncompressed stream: \
             not a tf.train.Example: malformed protobuf at byte 0 of the record: field number 0"
        )
    );
}

#[test]
fn a_plain_file_named_gz_gets_a_hint_about_compression_none() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("plain.tfrecord.gz"),
        write_all(&[b"hello"], Compression::None),
    )
    .unwrap();
    let hint = "(read as gzip because of the file name's extension; if the file is not \
                compressed, use --compression none)";
    for args in [
        &["count", "plain.tfrecord.gz"][..],
        &["bench", "plain.tfrecord.gz"][..],
    ] {
        let output = infeed_in(dir.path(), args);
        assert_eq!(output.status.code(), Some(1), "{args:?}");
        let err = stderr(&output);
        assert!(
            err.starts_with("infeed: plain.tfrecord.gz: compressed byte ")
                && err.contains(": corrupt gzip stream: ")
                && err.trim_end().ends_with(hint),
            "{args:?}: {err}"
        );
    }
    let output = infeed_in(
        dir.path(),
        &["count", "--compression", "none", "plain.tfrecord.gz"],
    );
    assert_eq!(stdout(&output), "plain.tfrecord.gz\t1\ntotal\t1\n");
}

/// `testdata/lm-sample.tfrecord` with the payloads of records 32 and 100
/// damaged (each fails its data CRC), written plain or GZIP into `dir`.
fn lm_sample_with_two_corrupt_records(dir: &Path, gzip: bool) -> String {
    use std::io::Write;
    let mut bytes = std::fs::read("testdata/lm-sample.tfrecord").unwrap();
    let mut at = 0;
    for index in 0..=100 {
        let len = u64::from_le_bytes(bytes[at..at + 8].try_into().unwrap()) as usize;
        if index == 32 || index == 100 {
            bytes[at + 12 + len / 2] ^= 0x40;
        }
        at += 12 + len + 4;
    }
    let (name, bytes) = if gzip {
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        gz.write_all(&bytes).unwrap();
        ("corrupt.tfrecord.gz", gz.finish().unwrap())
    } else {
        ("corrupt.tfrecord", bytes)
    };
    let path = dir.join(name);
    std::fs::write(&path, bytes).unwrap();
    path.display().to_string()
}

#[test]
fn bench_state_out_right_before_a_skipped_corrupt_record_continues_exactly() {
    for gzip in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let input = lm_sample_with_two_corrupt_records(dir.path(), gzip);
        let state = dir.path().join("state.bin").display().to_string();
        let base = [
            "bench",
            &input,
            "--skip-corrupt",
            "--batch",
            "16",
            "--epochs",
            "2",
            "--digests",
        ];
        let full = bench_json(&base);
        // Two batches end at record 31: the state's next record is the
        // corrupt record 32.
        let first = bench_json(&[&base[..], &["--batches", "2", "--state-out", &state]].concat());
        let rest = bench_json(&[&base[..], &["--state-in", &state]].concat());
        let full = full["digests"].as_array().unwrap().clone();
        // 2 × 254 good records in batches of 16, the last one short.
        assert_eq!(full.len(), 32, "gzip {gzip}");
        assert_eq!(first["digests"].as_array().unwrap()[..], full[..2]);
        assert_eq!(rest["digests"].as_array().unwrap()[..], full[2..]);
    }
}

/// README's first command, as README gives it (its arguments read from
/// README.md), runs: the first 20 batches here, the debug build being slow.
#[test]
fn readmes_quick_start_command_runs() {
    let readme = std::fs::read_to_string("README.md").unwrap();
    let line = readme
        .lines()
        .find(|l| l.starts_with("cargo run --release -- bench "))
        .expect("README's quick start");
    let args: Vec<&str> = line["cargo run --release -- ".len()..]
        .split_whitespace()
        .collect();
    let run = bench_json(&[&args[..], &["--batches", "20"]].concat());
    assert_eq!(run["batches"], 20, "{run}");
}

/// `INFEED_VARINT` caps the varint decoder (avx512, avx2, sse, portable):
/// every decoder this CPU has gives the same batches, int32 and int64.
#[test]
fn bench_batches_are_the_same_under_every_varint_decoder() {
    let spec = "input_ids:var_len:int64,attention_mask:var_len:int64";
    for cast in [&["--cast", "int32"][..], &[]] {
        let digests: Vec<(&str, serde_json::Value)> = ["default", "avx2", "sse", "portable"]
            .into_iter()
            .map(|decoder| {
                let mut command = Command::new(env!("CARGO_BIN_EXE_infeed"));
                command
                    .args(["bench", "testdata/lm-sample.tfrecord.gz", "--spec", spec])
                    .args(["--pad-to-multiple-of", "64", "--max-length", "512"])
                    .args(["--batch", "32", "--digests", "--json"])
                    .args(cast)
                    .current_dir(env!("CARGO_MANIFEST_DIR"));
                if decoder != "default" {
                    command.env("INFEED_VARINT", decoder);
                }
                let output = command.output().expect("run infeed");
                assert!(output.status.success(), "{}", stderr(&output));
                let report: serde_json::Value =
                    serde_json::from_slice(&output.stdout).expect("one JSON line");
                (decoder, report["digests"].clone())
            })
            .collect();
        assert!(digests[0].1.as_array().is_some_and(|d| d.len() > 1));
        for (decoder, d) in &digests[1..] {
            assert_eq!(d, &digests[0].1, "{decoder} {cast:?}");
        }
    }
}
