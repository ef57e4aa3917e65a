//! `infeed bench --normalize NAME:MEAN:STD`: the feature comes out as
//! float32 `(x - mean) / std`, per channel or with one value; checked
//! against batches built here by hand, through the digest `--digests`
//! prints.

use std::path::Path;

use infeed::batch::{Batch, Tensor};
use infeed::example::proto::{Example, Feature};
use infeed::record::Compression;
use prost::Message;
use serde_json::Value;

use crate::support::run::infeed;
use crate::support::tfrecord::write_file;

/// Writes `examples` as one plain shard and returns its path.
fn shard(dir: &Path, examples: &[Example]) -> String {
    let records = examples.iter().map(Message::encode_to_vec);
    write_file(&dir.join("data.tfrecord"), records, Compression::None)
}

/// The one batch `infeed bench` makes of `path` with `extra` flags, as
/// its digest, after checking that it is one batch of 2 records.
fn digest_of(path: &str, extra: &[&str]) -> String {
    let mut args = vec![
        "bench",
        path,
        "--json",
        "--digests",
        "--batch",
        "2",
        "--drop-remainder",
    ];
    args.extend_from_slice(extra);
    let output = infeed(&args);
    assert!(
        output.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let report: Value = serde_json::from_slice(&output.stdout).expect("one JSON line");
    assert_eq!(report["batches"], 1, "{report}");
    assert_eq!(report["records"], 2, "{report}");
    report["digests"][0].as_str().expect("a digest").to_owned()
}

/// What `--digests` prints for `batch`.
fn digest(batch: &Batch) -> String {
    let chained = xxhash_rust::xxh3::xxh3_64(&batch.digest().to_le_bytes());
    format!("{chained:016x}")
}

#[test]
fn normalize_emits_exact_floats_per_channel_and_with_one_value() {
    let dir = tempfile::tempdir().unwrap();
    let path = shard(
        dir.path(),
        &[
            Example::from_features([
                ("x", Feature::floats([3.0, 10.0, 4.0])),
                ("label", Feature::int64s([7])),
            ]),
            Example::from_features([
                ("x", Feature::floats([0.0, -2.0, 3.5])),
                ("label", Feature::int64s([9])),
            ]),
        ],
    );
    let spec = ["--spec", "x:fixed_len[3]:float,label:fixed_len[]:int64"];
    // Without --normalize: the values as they are.
    let plain = Batch {
        tensors: vec![
            (
                "x".into(),
                Tensor::from_slice(&[2, 3], &[3.0f32, 10.0, 4.0, 0.0, -2.0, 3.5]).unwrap(),
            ),
            (
                "label".into(),
                Tensor::from_slice(&[2], &[7i64, 9]).unwrap(),
            ),
        ],
        real_rows: 2,
        bytes: Vec::new(),
        provenance: Default::default(),
    };
    assert_eq!(digest_of(&path, &spec), digest(&plain));
    // x per channel: (3 - 1) / 2, (10 - 2) / 4, (4 - 3) / 0.5, then
    // (0 - 1) / 2, (-2 - 2) / 4, (3.5 - 3) / 0.5; the int64 label with one
    // value: (7 - 1) / 2, (9 - 1) / 2, as float32.
    let normalized = Batch {
        tensors: vec![
            (
                "x".into(),
                Tensor::from_slice(&[2, 3], &[1.0f32, 2.0, 2.0, -0.5, -1.0, 1.0]).unwrap(),
            ),
            (
                "label".into(),
                Tensor::from_slice(&[2], &[3.0f32, 4.0]).unwrap(),
            ),
        ],
        real_rows: 2,
        bytes: Vec::new(),
        provenance: Default::default(),
    };
    let flags = [
        &spec[..],
        &["--normalize", "x:1,2,3:2,4,0.5", "--normalize", "label:1:2"],
    ]
    .concat();
    assert_eq!(digest_of(&path, &flags), digest(&normalized));
}

#[test]
fn bad_normalize_flags_are_refused_with_a_reason() {
    let refused = |flag: &str| {
        let output = infeed(&[
            "bench",
            "testdata/lm-sample.tfrecord",
            "--spec",
            "input_ids:var_len:int64",
            "--fixed-length",
            "8",
            "--normalize",
            flag,
        ]);
        assert!(!output.status.success(), "{flag}");
        String::from_utf8_lossy(&output.stderr).into_owned()
    };
    let err = refused("input_ids:1");
    assert!(err.contains("expected NAME:MEAN:STD"), "{err}");
    let err = refused("input_ids:a:1");
    assert!(err.contains("\"a\" is not a number"), "{err}");
    // The pipeline refuses a variable-length feature when it is built.
    let err = refused("input_ids:0:1");
    assert!(
        err.contains("only images and fixed-length numeric features can be normalized"),
        "{err}"
    );
}

#[cfg(feature = "images")]
#[test]
fn normalize_turns_image_pixels_into_floats_per_channel() {
    // A 2×1 RGB PNG: pixels (10, 20, 30) and (12, 28, 40).
    let mut png_bytes = Vec::new();
    {
        let mut enc = png::Encoder::new(&mut png_bytes, 2, 1);
        enc.set_color(png::ColorType::Rgb);
        enc.set_depth(png::BitDepth::Eight);
        let mut w = enc.write_header().unwrap();
        w.write_image_data(&[10, 20, 30, 12, 28, 40]).unwrap();
        w.finish().unwrap();
    }
    let dir = tempfile::tempdir().unwrap();
    let record = |label: i64| {
        Example::from_features([
            ("image", Feature::bytes([png_bytes.clone()])),
            ("label", Feature::int64s([label])),
        ])
    };
    let path = shard(dir.path(), &[record(1), record(2)]);
    let flags = [
        "--spec",
        "image:image[1,2,3]:fixed,label:fixed_len[]:int64",
        "--normalize",
        "image:10,20,30:2,4,5",
    ];
    // (10-10)/2, (20-20)/4, (30-30)/5, (12-10)/2, (28-20)/4, (40-30)/5 in
    // each row.
    let row = [0.0f32, 0.0, 0.0, 1.0, 2.0, 2.0];
    let expected = Batch {
        tensors: vec![
            (
                "image".into(),
                Tensor::from_slice(&[2, 1, 2, 3], &[row, row].concat()).unwrap(),
            ),
            (
                "label".into(),
                Tensor::from_slice(&[2], &[1i64, 2]).unwrap(),
            ),
        ],
        real_rows: 2,
        bytes: Vec::new(),
        provenance: Default::default(),
    };
    assert_eq!(digest_of(&path, &flags), digest(&expected));
}
