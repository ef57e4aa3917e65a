//! Shared by the bucketing, packing and parsed-op tests: small lm-like
//! files whose values name their record, and readers of the batches.

use std::collections::HashMap;
use std::path::Path;

use infeed::batch::Batch;
use infeed::example::proto::{self, Example};
use infeed::pipeline::Batches;
use infeed::record::Compression;
use infeed::spec::{DType, FeatureSpec};
use prost::Message;

use crate::support::tfrecord::write_file;

/// Value `j` of record `id`: never 0 (the pad value), unique per record.
pub fn value(id: i64, j: usize) -> i64 {
    id * 1000 + j as i64 + 1
}

/// The record `id` from a value of it.
pub fn id_of(v: i64) -> i64 {
    (v - 1) / 1000
}

/// An Example with int64 lists.
pub fn example(features: &[(&str, Vec<i64>)]) -> Vec<u8> {
    let mut map = HashMap::new();
    for (name, values) in features {
        map.insert(
            name.to_string(),
            proto::Feature {
                kind: Some(proto::feature::Kind::Int64List(proto::Int64List {
                    value: values.clone(),
                })),
            },
        );
    }
    Example {
        features: Some(proto::Features { feature: map }),
    }
    .encode_to_vec()
}

/// An Example whose "ids" is a float list (not the int64 list of the lm
/// records).
pub fn float_ids() -> Vec<u8> {
    Example::from_features([("ids", proto::Feature::floats(vec![1.0]))]).encode_to_vec()
}

/// The record `id` of `len` values: `ids` and a `mask` of ones.
pub fn lm_record(id: i64, len: usize) -> Vec<u8> {
    example(&[
        ("ids", (0..len).map(|j| value(id, j)).collect()),
        ("mask", vec![1; len]),
    ])
}

/// Writes file `f` with records `f * 100 + i` of lengths `lens[f][i]`.
pub fn write_lm_files(dir: &Path, lens: &[Vec<usize>]) -> Vec<String> {
    lens.iter()
        .enumerate()
        .map(|(f, lens)| {
            let path = dir.join(format!("part-{f}.tfrecord"));
            let records = lens
                .iter()
                .enumerate()
                .map(|(i, &len)| lm_record((f * 100 + i) as i64, len));
            write_file(&path, records, Compression::None)
        })
        .collect()
}

pub fn spec() -> FeatureSpec {
    FeatureSpec::new()
        .var_len("ids", DType::Int64)
        .var_len("mask", DType::Int64)
}

/// The i64 values of tensor `name`, row by row.
pub fn rows(batch: &Batch, name: &str) -> Vec<Vec<i64>> {
    let t = &batch[name];
    let width = t.shape()[1];
    let v: Vec<i64> = match t.values::<i64>() {
        Some(v) => v.to_vec(),
        None => t
            .values::<i32>()
            .expect("i64 or i32")
            .iter()
            .map(|&x| x.into())
            .collect(),
    };
    v.chunks(width).map(|c| c.to_vec()).collect()
}

/// The real rows of a padded batch: each row's values where its mask is 1.
pub fn real_rows(batch: &Batch) -> Vec<Vec<i64>> {
    let ids = rows(batch, "ids");
    let mask = rows(batch, "ids_mask");
    ids.iter()
        .zip(&mask)
        .take(batch.real_rows)
        .map(|(r, m)| {
            r.iter()
                .zip(m)
                .filter(|&(_, &m)| m == 1)
                .map(|(&v, _)| v)
                .collect()
        })
        .collect()
}

/// Every real value of `ids` (mask 1), with how often it came: a record
/// cut over rows or batches (packing) counts once per value.
pub fn values(batches: &[Batch]) -> std::collections::BTreeMap<i64, usize> {
    let mut seen = std::collections::BTreeMap::new();
    for b in batches {
        for (r, m) in rows(b, "ids").iter().zip(&rows(b, "ids_mask")) {
            for (&v, &m) in r.iter().zip(m) {
                if m == 1 {
                    *seen.entry(v).or_default() += 1;
                }
            }
        }
    }
    seen
}

/// Every batch's digest, to the end.
pub fn digests(batches: Batches<Batch>) -> Vec<u64> {
    batches.map(|b| b.unwrap().digest()).collect()
}

/// Digests of the first `n` batches, and the state after them.
pub fn digests_then_state(mut batches: Batches<Batch>, n: usize) -> (Vec<u64>, Vec<u8>) {
    let mut out = Vec::new();
    for _ in 0..n {
        match batches.next_batch().unwrap() {
            Some(b) => out.push(b.digest()),
            None => break,
        }
    }
    (out, batches.state())
}
