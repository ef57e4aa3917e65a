//! How much of a batch is padding when hosts must agree on shapes
//! (docs/many-hosts.md): hosts simulated in one process, each pipeline
//! `.shard(i, n)` over the same lm-like shards (lengths uniform in 8..=512,
//! as the reference lm workload), repeated forever as training reads them,
//! parsed, padded to a multiple of 64 up to 512 (or to `fixed_length(512)`),
//! batches of 16; the first 128 batches of every host are counted.
//!
//! ```sh
//! cargo run --release --example padding            # 256 shards of 256 records
//! cargo run --release --example padding -- 64 128  # 64 shards of 128 records
//! ```
//!
//! Prints a Markdown table: per host count, the fraction of padded
//! positions over every batch counted (real tokens are those under
//! `input_ids_mask`), and the batches counted. One host
//! pads each batch to its own longest record; several hosts use the shared
//! bucket schedule (src/pipeline/group/schedule.rs).

use std::collections::HashMap;
use std::path::Path;

use infeed::batch::Batch;
use infeed::example::proto::{self, Example};
use infeed::pipeline::{ParsedPipeline, Pipeline, PipelineError};
use infeed::record::{Compression, RecordWriter};
use infeed::spec::{DType, FeatureSpec};
use prost::Message;

fn lm_record(len: usize) -> Vec<u8> {
    let list = |values: Vec<i64>| proto::Feature {
        kind: Some(proto::feature::Kind::Int64List(proto::Int64List {
            value: values,
        })),
    };
    let mut map = HashMap::new();
    map.insert(
        "input_ids".to_owned(),
        list((0..len).map(|j| (j % 100) as i64).collect()),
    );
    map.insert("attention_mask".to_owned(), list(vec![1; len]));
    Example {
        features: Some(proto::Features { feature: map }),
    }
    .encode_to_vec()
}

/// `files` shards of `records` records with lengths uniform in 8..=512.
fn write_shards(dir: &Path, files: usize, records: usize) -> Vec<String> {
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    (0..files)
        .map(|f| {
            let path = dir.join(format!("lm-{f:05}.tfrecord"));
            let mut w = RecordWriter::create(&path, Compression::None).expect("create a shard");
            for _ in 0..records {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let len = 8 + (x % 505) as usize;
                w.write_record(&lm_record(len)).expect("write a record");
            }
            w.finish().expect("finish a shard");
            path.display().to_string()
        })
        .collect()
}

fn host(files: &[String], index: u64, hosts: u64, fixed: bool) -> ParsedPipeline {
    let spec = FeatureSpec::new()
        .var_len("input_ids", DType::Int64)
        .var_len("attention_mask", DType::Int64);
    let p = Pipeline::from_files(files.to_vec())
        .expect("files")
        .shard(index, hosts)
        .seed(index)
        .shuffle_files()
        .interleave(4, 1)
        .shuffle(1000)
        .repeat(None)
        .parse(spec);
    let p = if fixed {
        p.fixed_length(512)
    } else {
        p.pad_to_multiple_of(64).max_length(512)
    };
    p.batch(16, true)
}

/// Batches counted per host.
const STEPS: usize = 128;

/// Real and all positions of `input_ids` over a batch.
fn positions(batch: &Batch) -> (u64, u64) {
    let mask = &batch["input_ids_mask"];
    let real: i64 = mask.values::<i64>().expect("i64 mask").iter().sum();
    (real as u64, mask.num_elements() as u64)
}

/// Padded fraction and batches over every host of `hosts`.
fn measure(files: &[String], hosts: u64, fixed: bool) -> Result<(f64, u64), PipelineError> {
    let (mut real, mut all, mut batches) = (0u64, 0u64, 0u64);
    for index in 0..hosts {
        for batch in host(files, index, hosts, fixed).build()?.take(STEPS) {
            let (r, a) = positions(&batch?);
            real += r;
            all += a;
            batches += 1;
        }
    }
    Ok((1.0 - real as f64 / all.max(1) as f64, batches))
}

fn main() -> Result<(), PipelineError> {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .map(|a| a.parse().expect("FILES RECORDS as numbers"))
        .collect();
    let (files, records) = (
        args.first().copied().unwrap_or(256),
        args.get(1).copied().unwrap_or(256),
    );
    let dir = tempfile::tempdir().expect("a temporary folder");
    let shards = write_shards(dir.path(), files, records);
    println!(
        "{files} shards of {records} lm records (lengths 8..=512), repeated; \
         the first {STEPS} batches of 16 of every host\n"
    );
    println!("| hosts | pad_to_multiple_of(64), max 512 | fixed_length(512) | batches |");
    println!("| --- | --- | --- | --- |");
    for hosts in [1, 2, 8, 64, 256] {
        if hosts as usize > files {
            continue;
        }
        let (padded, batches) = measure(&shards, hosts, false)?;
        let (fixed, _) = measure(&shards, hosts, true)?;
        println!(
            "| {hosts} | {:.1}% | {:.1}% | {batches} |",
            padded * 100.0,
            fixed * 100.0
        );
    }
    Ok(())
}
