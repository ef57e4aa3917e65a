//! Equal batch counts plan from `infeed convert`'s manifest when it vouches
//! for a shard's current size, and count by reading otherwise.

use std::path::Path;

use infeed::pipeline::{EqualBatches, Pipeline};
use serde_json::Value;

use crate::support::run::infeed_ok;

/// Converts `lines` JSONL records into shards of `per_shard` records in `out`.
fn convert(dir: &Path, out: &Path, lines: usize, per_shard: usize) {
    let input = dir.join("in.jsonl");
    let text: String = (0..lines).map(|i| format!("{{\"id\": {i}}}\n")).collect();
    std::fs::write(&input, text).unwrap();
    infeed_ok(&[
        "convert",
        input.to_str().unwrap(),
        "--records-per-shard",
        &per_shard.to_string(),
        "--output",
        out.to_str().unwrap(),
        "-q",
    ]);
}

/// Batch sizes host 0 of 2 emits (padding with masked batches).
fn host0_batches(out: &Path) -> Vec<usize> {
    Pipeline::from_glob(&format!("{}/train-*.tfrecord", out.display()))
        .unwrap()
        .shard(0, 2)
        .equal_batches(EqualBatches::Pad)
        .build_raw(2, false)
        .unwrap()
        .map(|b| b.unwrap().len())
        .collect()
}

fn manifest_path(out: &Path) -> std::path::PathBuf {
    let found: Vec<_> = std::fs::read_dir(out)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().ends_with(".manifest.json"))
        .collect();
    assert_eq!(found.len(), 1, "{found:?}");
    found[0].clone()
}

/// Sets the records the manifest claims for the second shard (host 1's).
fn claim(out: &Path, records: u64) {
    let path = manifest_path(out);
    let mut doc: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    doc["shards"][1]["records"] = records.into();
    std::fs::write(&path, serde_json::to_vec_pretty(&doc).unwrap()).unwrap();
}

#[test]
fn equal_batches_take_counts_from_a_matching_manifest() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    // 7 records in shards of 4: host 0 reads 4 records, host 1 reads 3.
    convert(dir.path(), &out, 7, 4);
    assert_eq!(host0_batches(&out), [2, 2]);
    // The plan follows the manifest: it says host 1 has 9 records, so host 0
    // pads to ceil(9 / 2) = 5 batches without reading host 1's shard.
    claim(&out, 9);
    assert_eq!(host0_batches(&out), [2, 2, 0, 0, 0]);
    // A shard whose size no longer matches its entry is counted by reading.
    let second = out.join("train-00001-of-00002.tfrecord");
    let mut bytes = std::fs::read(&second).unwrap();
    let first_record = bytes.clone();
    bytes.extend_from_slice(&first_record);
    std::fs::write(&second, bytes).unwrap();
    // Host 1 now holds 6 records: 3 batches, host 0 pads to 3.
    assert_eq!(host0_batches(&out), [2, 2, 0]);
}

#[test]
fn a_manifest_that_is_not_ours_is_ignored() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    convert(dir.path(), &out, 7, 4);
    let path = manifest_path(&out);
    let mut doc: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    doc["infeed_manifest"] = 99.into();
    doc["shards"][1]["records"] = 9.into();
    std::fs::write(&path, serde_json::to_vec(&doc).unwrap()).unwrap();
    assert_eq!(host0_batches(&out), [2, 2]);
    std::fs::write(&path, b"{ not json").unwrap();
    assert_eq!(host0_batches(&out), [2, 2]);
}
