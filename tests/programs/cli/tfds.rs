//! `infeed inspect` and `infeed bench` on a TFDS directory (`--tfds-split`).

use std::path::Path;

use crate::support::run::infeed;
use crate::support::tfrecord::write_file;
use infeed::example::proto::{Example, Feature};
use infeed::record::Compression;
use prost::Message;
use serde_json::Value;

/// A TFDS directory: split train of 7 records in shards of 3 and 4, split
/// test of 2; each record holds `label` (its index in the split) and `text`.
fn tfds_dir(root: &Path) -> String {
    let dir = root.join("tiny/1.0.0");
    std::fs::create_dir_all(&dir).unwrap();
    for (split, lengths) in [("train", &[3, 4][..]), ("test", &[2][..])] {
        let mut index = 0i64;
        for (shard, &n) in lengths.iter().enumerate() {
            let name = format!("tiny-{split}.tfrecord-{shard:05}-of-{:05}", lengths.len());
            let records = (0..n).map(|_| {
                let example = Example::from_features([
                    ("label", Feature::int64s(vec![index])),
                    ("text", Feature::bytes([format!("{split} {index}")])),
                ]);
                index += 1;
                example.encode_to_vec()
            });
            write_file(&dir.join(name), records, Compression::None);
        }
    }
    std::fs::write(
        dir.join("dataset_info.json"),
        r#"{"name": "tiny", "version": "1.0.0", "splits": [
             {"name": "train", "shardLengths": ["3", "4"], "numBytes": "1"},
             {"name": "test", "shardLengths": ["2"]}]}"#,
    )
    .unwrap();
    std::fs::write(
        dir.join("features.json"),
        r#"{"pythonClassName": "tensorflow_datasets.core.features.features_dict.FeaturesDict",
            "featuresDict": {"features": {
              "label": {"pythonClassName": "tensorflow_datasets.core.features.class_label_feature.ClassLabel",
                        "classLabel": {"numClasses": "7"}},
              "text": {"pythonClassName": "tensorflow_datasets.core.features.text_feature.Text",
                       "text": {}}}}}"#,
    )
    .unwrap();
    dir.display().to_string()
}

fn json(out: &std::process::Output) -> Value {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn inspect_reads_the_slice_and_lists_the_tfds_spec() {
    let root = tempfile::tempdir().unwrap();
    let dir = tfds_dir(root.path());
    let doc = json(&infeed(&[
        "inspect",
        "--json",
        "--tfds-split",
        "train[4:]+test[:1]",
        &dir,
    ]));
    assert_eq!(doc["records"], 4);
    let files: Vec<(&str, u64)> = doc["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| (f["path"].as_str().unwrap(), f["records"].as_u64().unwrap()))
        .collect();
    let shard1 = format!("{dir}/tiny-train.tfrecord-00001-of-00002");
    let test0 = format!("{dir}/tiny-test.tfrecord-00000-of-00001");
    assert_eq!(files, [(shard1.as_str(), 3), (test0.as_str(), 1)]);
    assert_eq!(
        doc["tfds"]["spec"],
        "label:fixed_len[]:int64,text:fixed_len[]:string"
    );
    assert_eq!(doc["tfds"]["name"], "tiny");
    assert_eq!(doc["tfds"]["features"][0]["tfds_type"], "ClassLabel");
    // The table names the dataset and ends with its spec.
    let out = infeed(&["inspect", "--tfds-split", "test", &dir]);
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("tfds: tiny 1.0.0, split test\n"), "{text}");
    assert!(
        text.ends_with(
            "tfds spec (features.json): label:fixed_len[]:int64,text:fixed_len[]:string\n"
        ),
        "{text}"
    );
}

#[test]
fn bench_runs_a_tfds_split() {
    let root = tempfile::tempdir().unwrap();
    let dir = tfds_dir(root.path());
    let doc = json(&infeed(&[
        "bench",
        "--json",
        "--tfds-split",
        "train[:50%]",
        "--spec",
        "label:fixed_len[]:int64",
        "--batch",
        "2",
        &dir,
    ]));
    // round(3.5) is 4 (half to even): 4 records, 2 batches of 2.
    assert_eq!(
        (doc["records"].as_u64(), doc["batches"].as_u64()),
        (Some(4), Some(2))
    );
}

#[test]
fn a_bad_split_or_several_inputs_are_errors() {
    let root = tempfile::tempdir().unwrap();
    let dir = tfds_dir(root.path());
    let out = infeed(&["inspect", "--tfds-split", "validation", &dir]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("no split \"validation\"; the dataset has splits \"train\", \"test\""),
        "{err}"
    );
    let out = infeed(&["bench", "--tfds-split", "train", &dir, &dir]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("exactly one"));
}
