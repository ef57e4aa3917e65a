//! tfds as the oracle: tensorflow-datasets prepares a dataset with every
//! kind of feature infeed maps, in several shards, and reads it back for
//! several split strings (`tests/io/tfds/tfds_oracle.py`, run by
//! `$INFEED_PYTHON`); `Pipeline::from_tfds` with the dataset's own spec must
//! give the same records in the same order with exactly the same values
//! (floats by their bits; images of static shape as the pixels tfds
//! decodes: PNG exactly, JPEG within [`JPEG_TOLERANCE`]; the image of
//! unknown size as its encoded bytes).
//!
//! Needs tensorflow-datasets: ignored by default, run by `scripts/test.sh`
//! (or `INFEED_PYTHON=... cargo test --test io tfds::oracle -- --include-ignored`).

use std::collections::BTreeMap;
use std::process::Command;

use infeed::example::{Column, Values};
use infeed::pipeline::Pipeline;
use serde_json::{Value, json};

use crate::support::repo;
#[cfg(feature = "cli")]
use crate::support::{run::infeed_ok, testdata};

/// What `tfds_oracle.py ARGS` prints, one JSON value per line.
fn oracle(args: &[&str]) -> Vec<Value> {
    let python = std::env::var("INFEED_PYTHON").unwrap_or_else(|_| {
        panic!(
            "INFEED_PYTHON is not set: these tests need a Python with tensorflow-datasets; \
             run scripts/test.sh, which creates .venv and sets it"
        )
    });
    let script = repo("tests/io/tfds/tfds_oracle.py");
    let out = Command::new(&python)
        .arg(&script)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {python} (INFEED_PYTHON): {e}"));
    assert!(
        out.status.success(),
        "tfds_oracle.py {args:?}: {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .expect("tfds_oracle.py prints UTF-8")
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}")))
        .collect()
}

/// Values `range` of a column as the oracle prints them.
fn json_values(values: &Values, range: std::ops::Range<usize>) -> Value {
    match values {
        Values::Int64(v) => json!(v[range]),
        Values::Int32(v) => json!(v[range]),
        Values::Float32(v) => json!(v[range].iter().map(|f| f.to_bits()).collect::<Vec<_>>()),
        Values::Bytes(b) => json!(
            range
                .map(|i| b
                    .get(i)
                    .iter()
                    .map(|x| format!("{x:02x}"))
                    .collect::<String>())
                .collect::<Vec<_>>()
        ),
    }
}

/// Most a JPEG pixel of ours may differ from tfds's decode (TensorFlow's
/// libjpeg-turbo with the same IDCT: 0 measured).
const JPEG_TOLERANCE: i64 = 1;

/// Every record of the split, as the oracle prints them.
fn infeed_records(dir: &str, split: &str) -> Vec<Value> {
    let p = Pipeline::from_tfds(dir, split).unwrap();
    let spec = p.tfds_spec().unwrap();
    let images: Vec<String> = spec.images().iter().map(|(n, _)| n.clone()).collect();
    let mut out = Vec::new();
    for batch in p.parse(spec).batch(16, false).build_columns().unwrap() {
        let batch = batch.unwrap();
        for row in 0..batch.num_records {
            let mut record = BTreeMap::new();
            for (name, column) in &batch.columns {
                let range = match column {
                    Column::Dense { shape, .. } => {
                        let per: usize = shape[1..].iter().product();
                        row * per..(row + 1) * per
                    }
                    Column::Ragged {
                        row_splits,
                        inner_shape,
                        ..
                    } => {
                        let per: usize = inner_shape.iter().product();
                        row_splits[row] * per..row_splits[row + 1] * per
                    }
                    Column::Ragged2 { .. } => panic!("{name}: no TFDS feature is ragged twice"),
                };
                let value = match column.values() {
                    // A decoded image: its pixels, as tfds gives them.
                    Values::Bytes(b) if images.contains(name) => {
                        json!(range.flat_map(|i| b.get(i).to_vec()).collect::<Vec<u8>>())
                    }
                    values => json_values(values, range),
                };
                record.insert(name.clone(), value);
            }
            out.push(json!(record));
        }
    }
    out
}

#[test]
#[ignore = "needs TensorFlow Datasets (INFEED_PYTHON with tensorflow-datasets; scripts/test.sh)"]
fn tfds_oracle_every_feature_and_slice_match_tfds() {
    let root = tempfile::tempdir().unwrap();
    let made = oracle(&["make", &root.path().display().to_string()]);
    let dir = made[0]["dir"].as_str().unwrap().to_owned();
    let p = Pipeline::from_tfds(&dir, "train").unwrap();
    assert_eq!(p.files().len(), 4, "the dataset has 4 train shards");
    // The images of static shape decode (in the spec's order: the keys'),
    // the one of unknown size does not.
    let spec = p.tfds_spec().unwrap();
    let decoded: Vec<(&str, [usize; 3])> = spec
        .images()
        .iter()
        .map(|(n, i)| (n.as_str(), i.shape()))
        .collect();
    assert_eq!(
        decoded,
        [
            ("gray", [4, 7, 1]),
            ("meta/icon", [3, 2, 4]),
            ("photo", [16, 24, 3]),
            ("thumb", [6, 5, 3]),
        ]
    );
    let mut jpeg_max = 0;
    for split in [
        "train",
        "test",
        "train[:10%]",
        "train[33%:]",
        "train[:7]",
        "train[-5:]",
        "train[5:13]+test[-2:]",
        "train[:50%]+test",
        "train[1shard]",
        "all",
    ] {
        let want = oracle(&["read", &dir, split]);
        let got = infeed_records(&dir, split);
        assert!(!want.is_empty(), "{split}");
        assert_eq!(got.len(), want.len(), "{split}: records");
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            let (mut g, mut w) = (g.clone(), w.clone());
            // The JPEG's pixels within the tolerance, the rest exactly.
            let (gp, wp) = (take(&mut g, "photo"), take(&mut w, "photo"));
            assert_eq!(gp.len(), 16 * 24 * 3, "{split}: record {i}: photo");
            assert_eq!(gp.len(), wp.len(), "{split}: record {i}: photo");
            let diff = gp
                .iter()
                .zip(&wp)
                .map(|(a, b)| (a - b).abs())
                .max()
                .unwrap();
            assert!(
                diff <= JPEG_TOLERANCE,
                "{split}: record {i}: photo off by {diff}"
            );
            jpeg_max = jpeg_max.max(diff);
            assert_eq!(g, w, "{split}: record {i}");
        }
    }
    eprintln!("largest JPEG pixel difference from tfds: {jpeg_max}");
}

/// Text and bytes through static-shape batches: the dataset's own spec
/// (variable-length features padded together, at most 8) gives every record's `Text`
/// features, the `Sequence` of `Text` and the encoded image of unknown size
/// as bytes columns holding exactly the values tfds reads, `b""` after them.
#[test]
#[ignore = "needs TensorFlow Datasets (INFEED_PYTHON with tensorflow-datasets; scripts/test.sh)"]
fn tfds_oracle_text_comes_through_batches() {
    let root = tempfile::tempdir().unwrap();
    let made = oracle(&["make", &root.path().display().to_string()]);
    let dir = made[0]["dir"].as_str().unwrap().to_owned();
    let want = oracle(&["read", &dir, "train[3:]+test"]);
    let p = Pipeline::from_tfds(&dir, "train[3:]+test").unwrap();
    let spec = p.tfds_spec().unwrap();
    let names = ["text", "meta/name", "steps/y", "image"];
    let mut got: Vec<Value> = Vec::new();
    for batch in p.parse(spec).max_length(8).batch(4, false).build().unwrap() {
        let batch = batch.unwrap();
        // A bytes feature's mask is u8 (its padded length: the group's, this batch's).
        let steps_mask = batch["steps/y_mask"].values::<u8>().unwrap().to_vec();
        for row in 0..batch.rows() {
            let mut record = BTreeMap::new();
            for name in names {
                let column = batch.get_bytes(name).unwrap();
                let per: usize = column.shape()[1..].iter().product();
                let values: Vec<&[u8]> = (row * per..(row + 1) * per)
                    .map(|i| column.get(i))
                    .collect();
                let kept = if name == "steps/y" {
                    let real = steps_mask[row * per..(row + 1) * per]
                        .iter()
                        .map(|&m| usize::from(m))
                        .sum();
                    assert!(values[real..].iter().all(|v| v.is_empty()), "{name}");
                    real
                } else {
                    per
                };
                let hex: Vec<String> = values[..kept]
                    .iter()
                    .map(|v| v.iter().map(|x| format!("{x:02x}")).collect())
                    .collect();
                record.insert(name, hex);
            }
            if row < batch.real_rows {
                got.push(json!(record));
            } else {
                assert!(
                    record.values().flatten().all(String::is_empty),
                    "padding row"
                );
            }
        }
    }
    let want: Vec<Value> = want
        .iter()
        .map(|w| {
            json!(
                names
                    .map(|n| (n, w[n].clone()))
                    .into_iter()
                    .collect::<BTreeMap<_, _>>()
            )
        })
        .collect();
    assert_eq!(got.len(), 27);
    assert_eq!(got, want);
}

/// Removes feature `name` from a record, giving its values as integers.
fn take(record: &mut Value, name: &str) -> Vec<i64> {
    let values = record
        .as_object_mut()
        .unwrap()
        .remove(name)
        .unwrap_or_else(|| panic!("no feature {name}"));
    values
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_i64().unwrap())
        .collect()
}

/// What `infeed convert --tfds` wrote, as tfds reads it: the same records,
/// in the same order, with the same values, for whole splits and slices.
#[cfg(feature = "cli")]
#[test]
#[ignore = "needs TensorFlow Datasets (INFEED_PYTHON with tensorflow-datasets; scripts/test.sh)"]
fn tfds_reads_what_infeed_convert_wrote() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("sample_ds/1.0.0");
    let dir = dir.display().to_string();
    let sample = testdata("convert/sample.jsonl").display().to_string();
    for (split, per_shard) in [("train", "2"), ("test", "3")] {
        infeed_ok(&[
            "convert",
            "-q",
            "--tfds",
            "sample_ds:1.0.0",
            "--split",
            split,
            "--records-per-shard",
            per_shard,
            "-o",
            &dir,
            &sample,
        ]);
    }
    for split in ["train", "test", "train[1:4]+test[-1:]", "all"] {
        let want = oracle(&["read", &dir, split]);
        let got = infeed_records(&dir, split);
        assert_eq!(
            got.len(),
            if split == "all" { 10 } else { want.len() },
            "{split}"
        );
        assert_eq!(got, want, "{split}");
    }
}
