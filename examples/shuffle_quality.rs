//! How random each shuffle is: one epoch of the shards through the buffer
//! shuffle (file shuffle, interleave 4, a buffer of 10 000), the global
//! shuffle, and the global shuffle by blocks; for each, the Spearman rank
//! correlation between a record's place in the files (their order, record
//! by record) and its place in the epoch (0: no trace of the file order; 1:
//! the file order), and how often two records next to each other in the
//! epoch lie within 1 000 records of each other in the files (about
//! 2 000 / records for a uniform permutation).
//!
//!     cargo run --release --example shuffle_quality -- '/tmp/benchdata/lm/*.tfrecord' [--index-dir DIR]

use std::collections::HashMap;

use infeed::index::{AccessOptions, IndexOptions, RandomAccess};
use infeed::pipeline::Pipeline;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let glob = args
        .get(1)
        .map_or("/tmp/benchdata/lm/*.tfrecord", |s| s.as_str());
    let index_dir = args
        .iter()
        .position(|a| a == "--index-dir")
        .and_then(|i| args.get(i + 1))
        .cloned();
    let base = Pipeline::from_glob(glob)?.seed(7);
    let files = base.files().to_vec();
    // Each record's place in the files' order, by (file, offset).
    let access = RandomAccess::open(
        &files,
        &AccessOptions {
            index: IndexOptions {
                dir: index_dir.clone(),
                ..IndexOptions::default()
            },
            ..AccessOptions::default()
        },
    )?;
    let mut place: HashMap<(String, u64), u64> = HashMap::new();
    let mut at = 0u64;
    for (file, index) in files.iter().zip(access.indexes()) {
        for i in 0..index.len() {
            place.insert((file.clone(), index.record(i).unwrap_or_default().0), at);
            at += 1;
        }
    }
    let n = at;
    let with_dir = |p: Pipeline| match &index_dir {
        Some(dir) => p.index_dir(dir),
        None => p,
    };
    let modes: Vec<(&str, Pipeline)> = vec![
        (
            "buffer shuffle (files shuffled, interleave 4, buffer 10 000)",
            base.clone()
                .shuffle_files()
                .interleave(4, 1)
                .shuffle(10_000),
        ),
        ("global shuffle", with_dir(base.clone().global_shuffle())),
        (
            "global shuffle by 1 MiB blocks",
            with_dir(base.clone().global_shuffle_blocks(1 << 20)),
        ),
        (
            "global shuffle by 8 MiB blocks",
            with_dir(base.clone().global_shuffle_blocks(8 << 20)),
        ),
    ];
    println!("{n} records");
    for (name, p) in modes {
        let mut order: Vec<u64> = Vec::with_capacity(n as usize);
        for batch in p.build_raw(1024, false)? {
            let batch = batch?;
            for i in 0..batch.len() {
                let (file, offset) = batch.origin(i);
                order.push(place[&(file.to_owned(), offset)]);
            }
        }
        assert_eq!(order.len() as u64, n, "{name}: one epoch is every record");
        // Spearman: both sides are ranks already (0..n), no ties.
        let mean = (n as f64 - 1.0) / 2.0;
        let (mut cov, mut var) = (0.0f64, 0.0f64);
        for (pos, &p) in order.iter().enumerate() {
            cov += (pos as f64 - mean) * (p as f64 - mean);
            var += (pos as f64 - mean).powi(2);
        }
        let near = order
            .windows(2)
            .filter(|w| w[0].abs_diff(w[1]) <= 1000)
            .count() as f64
            / (n - 1) as f64;
        println!(
            "{name:62} rank correlation {:+.4}   neighbours within 1 000 records {:.4}",
            cov / var,
            near
        );
    }
    Ok(())
}
