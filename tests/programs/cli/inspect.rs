//! `infeed inspect` and `infeed index --dali` on the TensorFlow-written files in testdata/
//! (`infeed index`'s own indexes: `tests/io/index/cli.rs`).

use crate::support::repo;
use crate::support::run::infeed;
use std::collections::BTreeMap;
use std::path::Path;

use serde_json::{Value, json};

fn read(rel: &str) -> Vec<u8> {
    std::fs::read(repo(rel)).expect("read")
}

/// Per feature: (dtype, records holding it, min, max, sum of value counts),
/// computed from the expected JSON that TensorFlow's script wrote.
/// dtype, records holding the feature, min, max and sum of value counts.
type Expected = (String, u64, u64, u64, u64);

fn expected_stats(json_file: &str) -> (u64, BTreeMap<String, Expected>) {
    let text = String::from_utf8(read(json_file)).expect("utf-8");
    let mut stats: BTreeMap<String, Expected> = BTreeMap::new();
    let mut records = 0;
    for line in text.lines() {
        records += 1;
        let v: Value = serde_json::from_str(line).expect("json");
        for (name, feature) in v.as_object().expect("object") {
            let (dtype, n) = match feature.as_object().and_then(|o| o.iter().next()) {
                None => ("none", 0),
                Some((k, vals)) => (
                    match k.as_str() {
                        "int64" => "int64",
                        "float" => "float",
                        _ => "string",
                    },
                    vals.as_array().expect("values").len() as u64,
                ),
            };
            let e = stats
                .entry(name.clone())
                .or_insert((dtype.to_string(), 0, u64::MAX, 0, 0));
            assert_eq!(e.0, dtype, "testdata mixes types in {name}");
            e.1 += 1;
            e.2 = e.2.min(n);
            e.3 = e.3.max(n);
            e.4 += n;
        }
    }
    (records, stats)
}

#[test]
fn inspect_json_matches_the_values_tensorflow_wrote() {
    for (file, json_file) in [
        (
            "testdata/examples.tfrecord",
            "testdata/examples.tfrecord.json",
        ),
        (
            "testdata/examples.tfrecord.gz",
            "testdata/examples.tfrecord.json",
        ),
        (
            "testdata/lm-sample.tfrecord",
            "testdata/lm-sample.tfrecord.json",
        ),
    ] {
        let out = infeed(&["inspect", "--json", file]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let got: Value = serde_json::from_slice(&out.stdout).expect("json");
        let (records, stats) = expected_stats(json_file);
        assert_eq!(got["records"], json!(records));
        assert_eq!(got["files"][0]["bytes"], json!(read(file).len()));
        let features = got["features"].as_array().expect("features");
        assert_eq!(features.len(), stats.len());
        let mut spec = Vec::new();
        for (f, (name, (dtype, n, min, max, sum))) in features.iter().zip(&stats) {
            assert_eq!(f["name"], json!(name));
            assert_eq!(f["dtype"], json!(dtype));
            assert_eq!(f["records"], json!(n));
            assert_eq!(f["missing"], json!(records - n));
            assert_eq!(f["values_min"], json!(min));
            assert_eq!(f["values_max"], json!(max));
            assert_eq!(f["values_mean"], json!(*sum as f64 / *n as f64));
            if dtype != "none" {
                if *n == records && min == max {
                    spec.push(format!("{name}:fixed_len[{min}]:{dtype}"));
                } else {
                    spec.push(format!("{name}:var_len:{dtype}"));
                }
            }
        }
        assert_eq!(got["spec"], json!(spec.join(",")));
    }
}

#[test]
fn inspect_table_ends_with_the_spec() {
    let out = infeed(&["inspect", "testdata/lm-sample.tfrecord"]);
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).expect("utf-8");
    assert!(
        text.starts_with("testdata/lm-sample.tfrecord: 256 records, "),
        "{text}"
    );
    assert!(
        text.ends_with("spec: attention_mask:var_len:int64,input_ids:var_len:int64\n"),
        "{text}"
    );
}

#[test]
fn index_writes_dali_offsets_and_framed_lengths() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out_dir = dir.path().to_str().expect("path");
    for file in [
        "testdata/examples.tfrecord",
        "testdata/lm-sample.tfrecord",
        "testdata/sequence.tfrecord",
    ] {
        let out = infeed(&["index", "--dali", file, "--output", out_dir]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        // Walk the framing by hand: u64 length, 4-byte CRC, data, 4-byte CRC.
        let data = read(file);
        let mut want = String::new();
        let mut pos = 0usize;
        while pos < data.len() {
            let len = u64::from_le_bytes(data[pos..pos + 8].try_into().expect("8 bytes")) as usize;
            want.push_str(&format!("{pos} {}\n", 12 + len + 4));
            pos += 12 + len + 4;
        }
        assert_eq!(pos, data.len());
        let name = Path::new(file)
            .file_name()
            .expect("name")
            .to_string_lossy()
            .into_owned();
        let idx = std::fs::read_to_string(dir.path().join(format!("{name}.idx"))).expect("idx");
        assert_eq!(idx, want, "{file}");
        let stdout = String::from_utf8(out.stdout).expect("utf-8");
        assert!(
            stdout.ends_with(&format!("\t{}\n", want.lines().count())),
            "{stdout}"
        );
    }
    assert!(
        std::fs::read_to_string(dir.path().join("examples.tfrecord.idx"))
            .expect("idx")
            .starts_with("0 589\n589 152\n")
    );
}

#[test]
fn dali_index_refuses_compressed_files() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = infeed(&[
        "index",
        "--dali",
        "testdata/examples.tfrecord.gz",
        "--output",
        dir.path().to_str().expect("path"),
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "infeed: testdata/examples.tfrecord.gz: is gzip-compressed; DALI indexes need uncompressed \
         TFRecord files (infeed's own index reads compressed ones: leave out --dali)\n"
    );
}
