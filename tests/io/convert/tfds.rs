//! `infeed convert --tfds`: a TensorFlow Datasets directory that
//! `Pipeline::from_tfds` reads with its record counts known up front (tfds
//! itself reads it in tests/io/tfds/oracle.rs), splits written by separate
//! runs, and the options that cannot go with it.

use std::path::Path;

use infeed::pipeline::Pipeline;
use infeed::tfds::TfdsDataset;
use serde_json::Value;

use crate::support::run::infeed;
use crate::support::{listing, testdata};

fn convert(dir: &Path, args: &[&str]) -> std::process::Output {
    let sample = testdata("convert/sample.jsonl");
    let mut all: Vec<String> = vec!["convert".into(), "-q".into()];
    all.extend(args.iter().map(|s| s.to_string()));
    all.extend([
        "-o".into(),
        dir.display().to_string(),
        sample.display().to_string(),
    ]);
    infeed(&all)
}

fn ok(dir: &Path, args: &[&str]) {
    let o = convert(dir, args);
    assert!(
        o.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
}

fn err(dir: &Path, args: &[&str]) -> String {
    let o = convert(dir, args);
    assert_eq!(o.status.code(), Some(1), "{args:?} should fail");
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn two_splits_from_two_runs_read_with_counts_known() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("sample_ds/1.0.0");
    let tfds = ["--tfds", "sample_ds:1.0.0"];
    ok(&dir, &[&tfds[..], &["--records-per-shard", "2"]].concat());
    ok(
        &dir,
        &[&tfds[..], &["--split", "test", "--records-per-shard", "4"]].concat(),
    );
    // A rerun of a split with other shard sizes replaces it, leaving no stale shard.
    ok(&dir, &[&tfds[..], &["--records-per-shard", "3"]].concat());
    assert_eq!(
        listing(&dir),
        [
            ".infeed-index",
            "dataset_info.json",
            "features.json",
            "sample_ds-test.manifest.json",
            "sample_ds-test.tfrecord-00000-of-00002",
            "sample_ds-test.tfrecord-00001-of-00002",
            "sample_ds-train.manifest.json",
            "sample_ds-train.tfrecord-00000-of-00002",
            "sample_ds-train.tfrecord-00001-of-00002",
        ]
    );
    // The shards' indexes, in a folder of their own.
    assert_eq!(
        listing(&dir.join(".infeed-index")),
        [
            "sample_ds-test.tfrecord-00000-of-00002.index",
            "sample_ds-test.tfrecord-00001-of-00002.index",
            "sample_ds-train.tfrecord-00000-of-00002.index",
            "sample_ds-train.tfrecord-00001-of-00002.index",
        ]
    );
    let d = dir.display().to_string();
    let ds = TfdsDataset::open(&d).unwrap();
    assert_eq!(ds.split_names(), ["test", "train"]);
    let lengths: Vec<Vec<u64>> = ds
        .info()
        .splits
        .iter()
        .map(|s| s.shard_lengths.clone())
        .collect();
    assert_eq!(lengths, [vec![4, 1], vec![3, 2]]);
    assert_eq!(
        ds.spec().unwrap(),
        Pipeline::from_tfds(&d, "train")
            .unwrap()
            .tfds_spec()
            .unwrap()
    );
    let counts: Vec<u64> = ds
        .select("train[1:]+test")
        .unwrap()
        .iter()
        .map(|s| s.records)
        .collect();
    assert_eq!(counts, [2, 2, 4, 1]);
    // Every record comes back, with the values the input holds.
    let p = Pipeline::from_tfds(&d, "train").unwrap();
    let spec = p.tfds_spec().unwrap();
    let mut ids = Vec::new();
    for batch in p.parse(spec).batch(2, false).build_columns().unwrap() {
        let batch = batch.unwrap();
        let (_, col) = batch.columns.iter().find(|(n, _)| n == "id").unwrap();
        match col.values() {
            infeed::example::Values::Int64(v) => ids.extend(v.iter().copied()),
            other => panic!("id: {other:?}"),
        }
    }
    assert_eq!(ids, [1, 2, 3, 4, 5]);
    let manifest: Value =
        serde_json::from_slice(&std::fs::read(dir.join("sample_ds-train.manifest.json")).unwrap())
            .unwrap();
    assert_eq!(manifest["naming"], "tfds");
    assert_eq!(manifest["records"], 5);
    assert_eq!(manifest["tfds"]["split"], "train");
}

#[test]
fn options_that_cannot_make_a_tfds_directory_are_errors() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("d");
    for (args, want) in [
        (&["--tfds", "sample"][..], "NAME:VERSION"),
        (&["--tfds", "Sample:1.0.0"], "snake_case"),
        (
            &["--tfds", "s:1.0.0", "--compression", "gzip"],
            "uncompressed",
        ),
        (&["--tfds", "s:1.0.0", "--nulls", "omit"], "every feature"),
        (&["--tfds", "s:1.0.0", "--split", "a-b"], "split"),
    ] {
        let e = err(&dir, args);
        assert!(e.contains(want), "{args:?}: {e}");
    }
    ok(&dir, &["--tfds", "s:1.0.0"]);
    let e = err(
        &dir,
        &["--tfds", "s:1.0.0", "--split", "test", "--columns", "id"],
    );
    assert!(e.contains("features.json describes other features"), "{e}");
    let e = err(&dir, &["--tfds", "t:1.0.0", "--split", "test"]);
    assert!(e.contains("holds dataset s version 1.0.0"), "{e}");
}
