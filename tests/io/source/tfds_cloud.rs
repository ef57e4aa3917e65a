//! A TFDS directory in gs://, s3://, az:// (the emulators): `from_tfds`
//! reads the same records of a slice as from local disk, its JSON files
//! through the source layer. Needs the emulators; ignored otherwise.
#![cfg(feature = "cloud")]

use super::common::*;
use crate::emulators::*;
use infeed::pipeline::{Pipeline, PipelineError};
use infeed::tfds::TfdsError;

/// The TFDS directory: split train in two shards, the lm sample (256
/// records) and the examples file (6), as tfds names them.
fn files() -> Vec<(String, Vec<u8>)> {
    let info = r#"{"name": "lm", "version": "1.0.0", "fileFormat": "tfrecord",
        "splits": [{"name": "train", "shardLengths": ["256", "6"], "numBytes": "1"}]}"#;
    vec![
        ("dataset_info.json".into(), info.as_bytes().to_vec()),
        (
            "lm-train.tfrecord-00000-of-00002".into(),
            file_bytes("lm-sample.tfrecord"),
        ),
        (
            "lm-train.tfrecord-00001-of-00002".into(),
            file_bytes("examples.tfrecord"),
        ),
    ]
}

async fn reads_a_slice_like_local_disk(scheme: &str) {
    let base = format!("{scheme}://{}", bucket());
    let prefix = unique_prefix("tfds");
    let local = tempfile::tempdir().unwrap();
    for (name, data) in files() {
        upload(&base, &format!("{prefix}/lm/1.0.0/{name}"), &data).await;
        std::fs::write(local.path().join(&name), data).unwrap();
    }
    let remote = format!("{base}/{prefix}/lm/1.0.0");
    let local = local.path().display().to_string();
    tokio::task::spawn_blocking(move || {
        let records = |dir: &str, split: &str| -> Vec<bytes::Bytes> {
            Pipeline::from_tfds_with(dir, split, fast_options())
                .unwrap()
                .build_raw(64, false)
                .unwrap()
                .flat_map(|b| b.unwrap().into_records())
                .collect()
        };
        for split in ["train[250:260]", "train[-3:]+train[:2]"] {
            let got = records(&remote, split);
            assert_eq!(got, records(&local, split), "{split}");
        }
        assert_eq!(records(&remote, "train[250:260]").len(), 10);
        match Pipeline::from_tfds_with(&remote, "test", fast_options()) {
            Err(PipelineError::Tfds(TfdsError::UnknownSplit { dir, .. })) => {
                assert_eq!(dir, remote)
            }
            other => panic!("{:?}", other.err()),
        }
        match Pipeline::from_tfds_with(&format!("{remote}-missing"), "train", fast_options()) {
            Err(PipelineError::Tfds(TfdsError::Read { path, .. })) => {
                assert!(path.ends_with("-missing/dataset_info.json"), "{path}")
            }
            other => panic!("{:?}", other.err()),
        }
    })
    .await
    .unwrap();
}

macro_rules! emulator_tests {
    ($($name:ident: $scheme:literal;)*) => {$(
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        #[ignore = "needs emulators: scripts/emulators.sh start"]
        async fn $name() {
            require_emulators();
            reads_a_slice_like_local_disk($scheme).await;
        }
    )*};
}

emulator_tests! {
    gcs_tfds_slice_equals_local: "gs";
    s3_tfds_slice_equals_local: "s3";
    azure_tfds_slice_equals_local: "az";
}
