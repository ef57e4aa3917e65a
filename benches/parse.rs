//! Batch-parser throughput on the reference workloads (docs/architecture.md), generated at
//! bench time:
//! - lm: `input_ids` and `attention_mask` (Int64List, length uniform in
//!   8..512, ids uniform in 0..50 000, mask all 1), both parsed var_len and
//!   narrowed to int32;
//! - img: `image` (3072 random bytes) and `label` (one int64), both fixed_len.
//!
//! Each workload is also decoded with prost (the general path) as a baseline.
//! Throughput is reported in bytes of serialized input and in records.

use std::hint::black_box;
use std::time::Duration;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use infeed::example::proto::{Example, Feature};
use infeed::example::{ExampleParser, Values};
use infeed::spec::{DType, FeatureSpec};
use prost::Message;

const RECORDS: usize = 4096;

#[path = "support/splitmix.rs"]
mod splitmix;
use splitmix::Rng;

fn lm_records() -> Vec<Vec<u8>> {
    let mut rng = Rng(1);
    (0..RECORDS)
        .map(|_| {
            let len = 8 + rng.below(512 - 8 + 1) as usize;
            let ids: Vec<i64> = (0..len).map(|_| rng.below(50_000) as i64).collect();
            Example::from_features([
                ("input_ids", Feature::int64s(ids)),
                ("attention_mask", Feature::int64s(vec![1i64; len])),
            ])
            .encode_to_vec()
        })
        .collect()
}

fn img_records() -> Vec<Vec<u8>> {
    let mut rng = Rng(2);
    (0..RECORDS)
        .map(|_| {
            let image: Vec<u8> = (0..3072).map(|_| rng.next() as u8).collect();
            Example::from_features([
                ("image", Feature::bytes([image])),
                ("label", Feature::int64s(vec![rng.below(10) as i64])),
            ])
            .encode_to_vec()
        })
        .collect()
}

/// The records as slices of one buffer, the way they arrive from a read
/// chunk (and as the hardware prefetcher sees them).
fn contiguous(records: &[Vec<u8>]) -> (Vec<u8>, Vec<std::ops::Range<usize>>) {
    let mut flat = Vec::with_capacity(records.iter().map(Vec::len).sum());
    let mut ranges = Vec::with_capacity(records.len());
    for r in records {
        ranges.push(flat.len()..flat.len() + r.len());
        flat.extend_from_slice(r);
    }
    (flat, ranges)
}

fn bench_workload(c: &mut Criterion, name: &str, records: &[Vec<u8>], spec: &FeatureSpec) {
    let (flat, ranges) = contiguous(records);
    let slices: Vec<&[u8]> = ranges.iter().map(|r| &flat[r.clone()]).collect();
    let bytes = flat.len();
    let mut group = c.benchmark_group(format!("parse/{name}"));
    group.throughput(Throughput::ElementsAndBytes {
        elements: records.len() as u64,
        bytes: bytes as u64,
    });
    let mut parser = ExampleParser::new(spec);
    // Check once that the batch parses to what the bench means to measure.
    let mut out = parser.parse(&slices).expect("bench records parse");
    assert_eq!(out.num_records, records.len());
    assert!(out.columns.iter().all(|(_, c)| !c.values().is_empty()));
    // A fresh batch each time: what `parse` costs when the caller drops
    // its batches (the allocator's page faults included).
    group.bench_function("infeed_parse", |b| {
        b.iter(|| black_box(parser.parse(black_box(&slices)).expect("parse")))
    });
    // The steady state of a pipeline that recycles its batches.
    group.bench_function("infeed_parse_into", |b| {
        b.iter(|| {
            parser
                .parse_into(black_box(&slices), &mut out)
                .expect("parse");
            black_box(&out);
        })
    });
    // The general path: decoding every record into prost's types.
    group.bench_function("prost_decode", |b| {
        b.iter(|| {
            for r in &slices {
                black_box(Example::decode(black_box(*r)).expect("decode"));
            }
        })
    });
    group.finish();
}

fn parse_benches(c: &mut Criterion) {
    let lm = lm_records();
    let lm_spec = FeatureSpec::new()
        .var_len("input_ids", DType::Int32)
        .var_len("attention_mask", DType::Int32);
    bench_workload(c, "lm", &lm, &lm_spec);

    let img = img_records();
    let img_spec = FeatureSpec::new()
        .fixed_len("image", DType::Bytes, &[])
        .fixed_len("label", DType::Int64, &[]);
    let batch = ExampleParser::new(&img_spec)
        .parse(&img)
        .expect("img parses");
    assert!(matches!(
        batch.get("label").map(|c| c.values()),
        Some(Values::Int64(v)) if v.len() == RECORDS
    ));
    bench_workload(c, "img", &img, &img_spec);
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .sample_size(20)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3));
    targets = parse_benches
}
criterion_main!(benches);
