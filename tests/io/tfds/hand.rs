//! Directories written by hand as TFDS writes them: `dataset_info.json`,
//! `features.json` and shards of Examples, each record holding its split's
//! number times 1000 plus its index in the split (`id`) and a name.

use std::path::{Path, PathBuf};

use infeed::example::proto::{Example, Feature};
use infeed::example::{Column, ParsedBatch};
use infeed::pipeline::{EqualBatches, Pipeline, PipelineError, StateError};
use infeed::record::Compression;
use infeed::spec::{DType, FeatureSpec};
use prost::Message;

use crate::support::tfrecord::write_file;

/// Writes a dataset "tiny" with these splits (name, records per shard)
/// under `root`; returns its directory. The features.json is the current
/// (proto-JSON) form unless `legacy`.
pub fn write_dataset(root: &Path, splits: &[(&str, &[u64])], legacy: bool) -> PathBuf {
    let dir = root.join("tiny/1.0.0");
    std::fs::create_dir_all(&dir).unwrap();
    let mut infos = Vec::new();
    for (s, (name, lengths)) in splits.iter().enumerate() {
        let mut index = 0u64;
        for (shard, &n) in lengths.iter().enumerate() {
            let file = dir.join(format!(
                "tiny-{name}.tfrecord-{shard:05}-of-{:05}",
                lengths.len()
            ));
            let records = (0..n).map(|_| {
                let id = s as i64 * 1000 + index as i64;
                let example = Example::from_features([
                    ("id", Feature::int64s(vec![id])),
                    ("meta/name", Feature::bytes([format!("{name}-{index}")])),
                ]);
                index += 1;
                example.encode_to_vec()
            });
            write_file(&file, records, Compression::None);
        }
        let lengths: Vec<String> = lengths.iter().map(|n| format!("\"{n}\"")).collect();
        // The first split names its template, the others leave TFDS's default.
        let template = if s == 0 {
            r#""filepathTemplate": "{DATASET}-{SPLIT}.{FILEFORMAT}-{SHARD_X_OF_Y}","#
        } else {
            ""
        };
        infos.push(format!(
            r#"{{{template} "name": "{name}", "numBytes": "100", "shardLengths": [{}]}}"#,
            lengths.join(", ")
        ));
    }
    std::fs::write(
        dir.join("dataset_info.json"),
        format!(
            r#"{{"fileFormat": "tfrecord", "name": "tiny", "version": "1.0.0", "splits": [{}]}}"#,
            infos.join(", ")
        ),
    )
    .unwrap();
    let features = if legacy {
        r#"{"type": "tensorflow_datasets.core.features.features_dict.FeaturesDict",
            "content": {
              "id": {"type": "tensorflow_datasets.core.features.feature.Tensor",
                     "content": {"shape": [], "dtype": "int64"}},
              "meta": {"type": "tensorflow_datasets.core.features.features_dict.FeaturesDict",
                       "content": {"name": {"type": "tensorflow_datasets.core.features.text_feature.Text",
                                            "content": {}}}}}}"#
    } else {
        r#"{"pythonClassName": "tensorflow_datasets.core.features.features_dict.FeaturesDict",
            "featuresDict": {"features": {
              "id": {"pythonClassName": "tensorflow_datasets.core.features.tensor_feature.Tensor",
                     "tensor": {"dtype": "int64", "encoding": "none", "shape": {}}},
              "meta": {"pythonClassName": "tensorflow_datasets.core.features.features_dict.FeaturesDict",
                       "featuresDict": {"features": {
                         "name": {"pythonClassName": "tensorflow_datasets.core.features.text_feature.Text",
                                  "text": {}}}}}}}}"#
    };
    std::fs::write(dir.join("features.json"), features).unwrap();
    dir
}

/// train: 10 records in shards of 4, 0, 3, 3; test: 5 in 2, 3.
pub fn tiny(root: &Path) -> String {
    let dir = write_dataset(root, &[("train", &[4, 0, 3, 3]), ("test", &[2, 3])], false);
    dir.display().to_string()
}

/// The ids of every record a pipeline gives, in order.
fn ids_of(
    batches: impl Iterator<Item = Result<ParsedBatch, infeed::pipeline::PipelineError>>,
) -> Vec<i64> {
    let mut out = Vec::new();
    for batch in batches {
        let batch = batch.unwrap();
        match batch.get("id").unwrap() {
            Column::Dense { values, .. } => {
                out.extend_from_slice(&values.as_int64().unwrap()[..batch.num_records])
            }
            other => panic!("id is not dense: {other:?}"),
        }
    }
    out
}

fn ids(p: Pipeline) -> Vec<i64> {
    let spec = p.tfds_spec().unwrap();
    ids_of(p.parse(spec).batch(3, false).build_columns().unwrap())
}

fn span(base: i64, r: std::ops::Range<i64>) -> Vec<i64> {
    r.map(|i| base + i).collect()
}

#[test]
fn a_split_string_reads_exactly_its_records_in_shard_order() {
    let root = tempfile::tempdir().unwrap();
    let dir = tiny(root.path());
    let cases: Vec<(&str, Vec<i64>)> = vec![
        ("train", span(0, 0..10)),
        ("test", span(1000, 0..5)),
        ("train[:80%]", span(0, 0..8)),
        ("train[10%:]", span(0, 1..10)),
        ("train[3:8]", span(0, 3..8)),
        ("train[-2:]", span(0, 8..10)),
        ("train[2shard]", span(0, 4..7)),
        (
            "train[:50%]+test",
            [span(0, 0..5), span(1000, 0..5)].concat(),
        ),
        ("test[-1:]+train[:1]+test[:1]", vec![1004, 0, 1000]),
        ("all", [span(0, 0..10), span(1000, 0..5)].concat()),
    ];
    for (spec, want) in cases {
        let p = Pipeline::from_tfds(&dir, spec).unwrap();
        assert_eq!(ids(p), want, "{spec}");
    }
    // Files outside the slice are not part of the pipeline; a trailing /
    // on the directory changes nothing.
    let p = Pipeline::from_tfds(&format!("{dir}/"), "train[5:6]").unwrap();
    assert_eq!(
        p.files(),
        [format!("{dir}/tiny-train.tfrecord-00002-of-00004")]
    );
    assert_eq!(ids(p), [5]);
}

#[test]
fn a_slice_restores_exactly_at_every_batch() {
    let root = tempfile::tempdir().unwrap();
    let dir = tiny(root.path());
    let pipeline = || {
        let p = Pipeline::from_tfds(&dir, "train[1:-1]+test[1:4]").unwrap();
        let spec = p.tfds_spec().unwrap();
        p.interleave(2, 1)
            .shuffle(4)
            .seed(9)
            .repeat(Some(2))
            .parse(spec)
            .batch(2, false)
    };
    let full = ids_of(pipeline().build_columns().unwrap());
    assert_eq!(full.len(), 2 * (8 + 3));
    let mut sorted = full.clone();
    sorted.sort();
    let mut want = [span(0, 1..9), span(1000, 1..4)].concat().repeat(2);
    want.sort();
    assert_eq!(sorted, want);
    for cut in 1..full.len() / 2 {
        let mut batches = pipeline().build_columns().unwrap();
        let mut head = Vec::new();
        for _ in 0..cut {
            head.push(batches.next().unwrap());
        }
        let state = batches.state();
        drop(batches);
        let mut got = ids_of(head.into_iter());
        got.extend(ids_of(
            pipeline().resume_from(&state).build_columns().unwrap(),
        ));
        assert_eq!(got, full, "cut after {cut} batches");
    }
    // Another slice of the same files is another pipeline: its state does not fit.
    let state = pipeline().build_columns().unwrap().state();
    let other = Pipeline::from_tfds(&dir, "train[2:-1]+test[1:4]").unwrap();
    let spec = other.tfds_spec().unwrap();
    let err = other
        .interleave(2, 1)
        .shuffle(4)
        .seed(9)
        .repeat(Some(2))
        .parse(spec)
        .batch(2, false)
        .resume_from(&state)
        .build_columns()
        .err()
        .unwrap();
    assert!(
        matches!(
            err,
            PipelineError::BadState(StateError::OtherPipeline { .. })
        ),
        "{err:?}"
    );
}

#[test]
fn equal_batches_take_the_counts_of_the_slice_from_dataset_info() {
    let root = tempfile::tempdir().unwrap();
    let dir = tiny(root.path());
    // train[:6] is shard 0 (4 records) and the first 2 of shard 2's 3
    // (shard 1 is empty): host 0 reads shard 0, host 1 shard 2. Counting
    // whole files would give host 1 3 records, and both hosts 3 batches
    // under Drop; the slice's counts give 2.
    for (how, want) in [(EqualBatches::Pad, 4), (EqualBatches::Drop, 2)] {
        for host in 0..2 {
            let p = Pipeline::from_tfds(&dir, "train[:6]").unwrap();
            // Static-shape batches take no bytes: the numeric feature alone.
            let spec = FeatureSpec::new().fixed_len("id", DType::Int64, &[]);
            let batches = p
                .shard(host, 2)
                .equal_batches(how)
                .parse(spec)
                .batch(1, true)
                .build()
                .unwrap();
            assert_eq!(batches.count(), want, "{how:?} host {host}");
        }
    }
}

#[test]
fn the_legacy_features_json_gives_the_same_spec() {
    let root = tempfile::tempdir().unwrap();
    let current = write_dataset(&root.path().join("a"), &[("train", &[3])], false);
    let legacy = write_dataset(&root.path().join("b"), &[("train", &[3])], true);
    let spec = |dir: &Path| {
        Pipeline::from_tfds(&dir.display().to_string(), "train")
            .unwrap()
            .tfds_spec()
            .unwrap()
    };
    let (a, b) = (spec(&current), spec(&legacy));
    assert_eq!(a.features(), b.features());
    let names: Vec<&str> = a.features().iter().map(|f| f.name.as_str()).collect();
    assert_eq!(names, ["id", "meta/name"]);
    let p = Pipeline::from_tfds(&legacy.display().to_string(), "train").unwrap();
    let batch = p
        .parse(b)
        .batch(3, false)
        .build_columns()
        .unwrap()
        .next()
        .unwrap()
        .unwrap();
    let Some(Column::Dense { values, .. }) = batch.get("meta/name") else {
        panic!("meta/name is not dense")
    };
    let names: Vec<&[u8]> = values.as_bytes().unwrap().iter().collect();
    assert_eq!(names, [&b"train-0"[..], b"train-1", b"train-2"]);
}

/// docs/pipeline.md's TFDS sample, as written there (plus the checks).
#[test]
fn guide_tfds_sample() -> Result<(), PipelineError> {
    let root = tempfile::tempdir().unwrap();
    let dir = tiny(root.path());
    let pipeline = Pipeline::from_tfds(&dir, "train[:80%]+test")?; // dir: …/tiny/1.0.0
    // Every feature of features.json, as columns.
    let mut columns = pipeline
        .clone()
        .parse(pipeline.tfds_spec()?)
        .batch(64, false)
        .build_columns()?;
    let first = columns.next().transpose()?; // ids, names, …
    // Static-shape batches of the same features: text as bytes columns.
    let spec = pipeline.tfds_spec()?;
    let mut batches = pipeline.parse(spec).batch(4, false).build()?;
    let (mut all, mut names) = (Vec::new(), Vec::new());
    while let Some(batch) = batches.next_batch()? {
        let ids = &batch["id"]; // [4] i64
        let name = batch.get_bytes("meta/name").unwrap(); // [4] bytes, b"" in padding rows
        all.extend_from_slice(&ids.values::<i64>().unwrap()[..batch.real_rows]);
        names.extend(name.iter().take(batch.real_rows).map(<[u8]>::to_vec));
    }
    let first = first.unwrap();
    assert_eq!(first.num_records, 13);
    assert!(first.get("meta/name").is_some());
    assert_eq!(all, [span(0, 0..8), span(1000, 0..5)].concat());
    let want: Vec<Vec<u8>> = (0..8)
        .map(|i| format!("train-{i}"))
        .chain((0..5).map(|i| format!("test-{i}")))
        .map(String::into_bytes)
        .collect();
    assert_eq!(names, want);
    Ok(())
}
