//! `infeed convert` writing shards into S3 (moto) and Azure (azurite)
//! buckets, read back through the same URLs. Needs the emulators (see
//! tests/io/source/cloud.rs); ignored otherwise. fake-gcs-server takes no
//! object_store writes, so gs:// output is not tested here.
#![cfg(feature = "cloud")]

use crate::support::run::infeed;

fn ok(args: &[&str]) -> String {
    let output = infeed(args);
    assert!(
        output.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).expect("utf-8")
}

fn convert_into(scheme: &str) {
    let bucket =
        std::env::var("INFEED_TEST_BUCKET").expect("INFEED_TEST_BUCKET (scripts/emulators.sh env)");
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    let url = format!("{scheme}://{bucket}/convert-{nanos}");
    let local = tempfile::tempdir().unwrap();
    let local_dir = local.path().display().to_string();
    let args = [
        "convert",
        "testdata/convert/sample.jsonl",
        "--records-per-shard",
        "2",
        "-q",
    ];
    ok(&[&args[..], &["-o", &local_dir]].concat());
    ok(&[&args[..], &["-o", &url]].concat());
    let local_cat = ok(&["cat", &format!("{local_dir}/*.tfrecord")]);
    let remote_cat = ok(&["cat", &format!("{url}/*.tfrecord")]);
    assert!(!local_cat.is_empty());
    assert_eq!(remote_cat, local_cat);
    // A rerun replaces its shards: the bucket holds the same records once.
    ok(&[&args[..], &["-o", &url]].concat());
    assert_eq!(ok(&["cat", &format!("{url}/*.tfrecord")]), local_cat);
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
