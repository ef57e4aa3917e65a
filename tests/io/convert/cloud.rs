//! `infeed convert` writing shards into S3 (moto) and Azure (azurite)
//! buckets, read back through the same URLs. Needs the emulators (see
//! tests/io/source/cloud.rs); ignored otherwise. fake-gcs-server takes no
//! object_store writes, so gs:// output is not tested here.
#![cfg(feature = "cloud")]

use infeed::index::{Found, IndexOptions, load_or_build};

use crate::emulators::{bucket, require_emulators, unique_prefix};
use crate::support::run::infeed_ok;

fn convert_into(scheme: &str) {
    require_emulators();
    let url = format!("{scheme}://{}/{}", bucket(), unique_prefix("convert"));
    let local = tempfile::tempdir().unwrap();
    let local_dir = local.path().display().to_string();
    let args = [
        "convert",
        "testdata/convert/sample.jsonl",
        "--records-per-shard",
        "2",
        "-q",
    ];
    infeed_ok(&[&args[..], &["-o", &local_dir]].concat());
    infeed_ok(&[&args[..], &["-o", &url]].concat());
    let local_cat = infeed_ok(&["cat", &format!("{local_dir}/*.tfrecord")]);
    let remote_cat = infeed_ok(&["cat", &format!("{url}/*.tfrecord")]);
    assert!(!local_cat.is_empty());
    assert_eq!(remote_cat, local_cat);
    // Each shard's index under `.infeed-index/` in the prefix (no glob of
    // the shards reaches it), found there by default.
    let shards: Vec<String> = (0..3)
        .map(|i| format!("{url}/train-{i:05}-of-00003.tfrecord"))
        .collect();
    let found = load_or_build(&shards, &IndexOptions::default()).unwrap();
    for ((shard, (idx, how)), records) in shards.iter().zip(found).zip([2, 2, 1]) {
        let name = shard.rsplit('/').next().unwrap();
        let index = format!("{url}/.infeed-index/{name}.index");
        assert_eq!(how, Found::Loaded { index });
        assert_eq!(idx.len(), records);
    }
    assert_eq!(infeed_ok(&["cat", &format!("{url}/train-*")]), local_cat);
    // A rerun replaces its shards: the bucket holds the same records once.
    infeed_ok(&[&args[..], &["-o", &url]].concat());
    assert_eq!(infeed_ok(&["cat", &format!("{url}/*.tfrecord")]), local_cat);
}

#[test]
#[ignore = "needs emulators: scripts/emulators.sh start"]
fn convert_writes_shards_into_s3() {
    convert_into("s3");
}

#[test]
#[ignore = "needs emulators: scripts/emulators.sh start"]
fn convert_writes_shards_into_azure() {
    convert_into("az");
}
