//! TensorFlow reads the shards `infeed convert` writes, with exact values.
//!
//! Ignored by default (needs TensorFlow): `scripts/test.sh` runs it with
//! `$INFEED_PYTHON` set to a Python that has tensorflow-cpu. Each shard is read by
//! `scripts/tf_read.py` (tf.data.TFRecordDataset + tf.train.Example; one run for all
//! of a test's shards) and must print the same values as `infeed cat` of the same file. Both print each float32 as the
//! shortest decimal of its exact double, so the JSON values compare exactly.

use std::path::Path;
use std::process::Command;

use serde_json::Value;

use super::cli::shards;
use crate::interop::tf_read;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn run(cmd: &mut Command) -> String {
    let out = cmd.current_dir(root()).output().expect("run");
    assert!(
        out.status.success(),
        "{cmd:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8")
}

/// `infeed convert ARGS -q --output OUT`, which must succeed.
fn convert_into(out: &Path, args: &[&str]) {
    run(Command::new(env!("CARGO_BIN_EXE_infeed"))
        .arg("convert")
        .args(args)
        .arg("-q")
        .arg("--output")
        .arg(out));
}

fn values(text: &str) -> Vec<Value> {
    text.lines()
        .map(|l| serde_json::from_str(l).expect("json"))
        .collect()
}

#[test]
#[ignore = "needs TensorFlow: run scripts/test.sh"]
fn tensorflow_reads_converted_shards_exactly() {
    let cases: &[(&[&str], &str)] = &[
        (
            &["testdata/convert/sample.jsonl", "--records-per-shard", "2"],
            "none",
        ),
        (
            &["testdata/convert/sample.jsonl", "--compression", "gzip"],
            "gzip",
        ),
        (
            &[
                "testdata/convert/sample.csv",
                "--compression",
                "zlib",
                "--naming",
                "hf",
            ],
            "zlib",
        ),
        (
            &[
                "testdata/tokenizer/corpus.txt",
                "--tokenizer",
                "testdata/tokenizer/tokenizer.json",
                "--group-to",
                "16",
            ],
            "none",
        ),
    ];
    let outs: Vec<_> = cases
        .iter()
        .map(|(args, _)| {
            let out = tempfile::tempdir().expect("tempdir");
            convert_into(out.path(), args);
            out
        })
        .collect();
    let mut files = Vec::new();
    for ((args, compression), out) in cases.iter().zip(&outs) {
        let shards = shards(out.path());
        assert!(!shards.is_empty(), "{args:?}");
        files.extend(shards.into_iter().map(|file| (file, *compression)));
    }
    let reads: Vec<_> = files.iter().map(|(f, c)| (f.as_path(), *c)).collect();
    let tf = tf_read(&reads, false, false);
    for ((file, _), tf) in files.iter().zip(tf) {
        let ours = values(&run(Command::new(env!("CARGO_BIN_EXE_infeed"))
            .arg("cat")
            .arg(file)));
        assert!(!ours.is_empty());
        assert_eq!(tf, ours, "{}", file.display());
    }
}

/// What a TensorFlow user writes for a folder of shards,
/// `tf.data.TFRecordDataset(tf.io.gfile.glob("out/*.tfrecord*"))`, reads
/// `infeed convert`'s output exactly: the glob takes the shards and nothing
/// else convert writes (indexes, manifests), plain, GZIP and ZLIB; and
/// `*-of-*` and `train-*` of the output of several tasks likewise.
#[test]
#[ignore = "needs TensorFlow: run scripts/test.sh"]
fn tensorflow_reads_converted_output_through_a_glob_of_the_folder() {
    let sample = "testdata/convert/sample.jsonl";
    let cases: &[(&[&[&str]], &str, &str)] = &[
        (
            &[&[sample, "--records-per-shard", "2"]],
            "none",
            "*.tfrecord*",
        ),
        (
            &[&[sample, "--records-per-shard", "2", "--compression", "gzip"]],
            "gzip",
            "*.tfrecord*",
        ),
        (&[&[sample, "--compression", "zlib"]], "zlib", "*.tfrecord*"),
        (
            &[&[sample, "--records-per-shard", "2", "--compression", "gzip"]],
            "gzip",
            "*-of-*",
        ),
        (
            &[
                &[sample, "--task-index", "0", "--num-tasks", "2"],
                &[sample, "--task-index", "1", "--num-tasks", "2"],
            ],
            "none",
            "train-*",
        ),
    ];
    let mut globs = Vec::new();
    let mut expected = Vec::new();
    let outs: Vec<_> = cases
        .iter()
        .map(|_| tempfile::tempdir().expect("tempdir"))
        .collect();
    for ((runs, compression, pattern), out) in cases.iter().zip(&outs) {
        for args in *runs {
            convert_into(out.path(), args);
        }
        let files = shards(out.path());
        let ours = values(&run(Command::new(env!("CARGO_BIN_EXE_infeed"))
            .arg("cat")
            .args(&files)));
        assert_eq!(ours.len(), 5, "{runs:?}");
        globs.push((out.path().join(pattern), *compression));
        expected.push(ours);
    }
    let reads: Vec<_> = globs.iter().map(|(g, c)| (g.as_path(), *c)).collect();
    let tf = tf_read(&reads, false, true);
    for (((glob, _), (runs, ..)), (tf, ours)) in
        globs.iter().zip(cases).zip(tf.into_iter().zip(expected))
    {
        assert_eq!(tf, ours, "{} after {runs:?}", glob.display());
    }
}
