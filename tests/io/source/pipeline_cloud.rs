//! The pipeline reading gs:// shards from fake-gcs-server, including a
//! checkpoint taken mid-run and restored. Needs the emulators (see
//! tests/io/source/cloud.rs); ignored otherwise.
#![cfg(feature = "cloud")]

use super::common::*;
use crate::emulators::*;
use infeed::pipeline::Pipeline;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs emulators: scripts/emulators.sh start"]
async fn gcs_pipeline_equals_local_and_restores_exactly() {
    require_emulators();
    let base = format!("gs://{}", bucket());
    let prefix = unique_prefix("pipeline");
    let names = [
        "lm-sample.tfrecord",
        "lm-sample.tfrecord.gz",
        "examples.tfrecord",
    ];
    for name in names {
        upload(&base, &format!("{prefix}/{name}"), &file_bytes(name)).await;
    }
    let pattern = format!("{base}/{prefix}/*.tfrecord*");
    let local: Vec<String> = names
        .iter()
        .map(|n| testdata(n).display().to_string())
        .collect();
    let result = tokio::task::spawn_blocking(move || {
        let describe = |p: Pipeline| {
            p.seed(3)
                .shuffle_files()
                .interleave(2, 2)
                .shuffle(50)
                .repeat(Some(2))
        };
        let remote = describe(Pipeline::from_glob(&pattern).expect("list"));
        assert_eq!(remote.files().len(), 3);
        // Same shard order as the listing (sorted by name) locally.
        let mut sorted_local = local.clone();
        sorted_local.sort();
        let local = describe(Pipeline::from_files(sorted_local).unwrap());
        let collect = |p: &Pipeline| -> Vec<Vec<bytes::Bytes>> {
            p.build_raw(16, false)
                .unwrap()
                .map(|b| b.unwrap().into_records())
                .collect()
        };
        let full = collect(&remote);
        assert_eq!(full, collect(&local));
        assert_eq!(
            full.iter().map(Vec::len).sum::<usize>(),
            2 * (256 + 256 + 6)
        );
        let mut first = remote.build_raw(16, false).unwrap();
        for _ in 0..13 {
            first.next_batch().unwrap();
        }
        let state = first.state();
        drop(first);
        let rest = collect(&remote.clone().resume_from(&state));
        assert_eq!(rest[..], full[13..]);
    });
    result.await.expect("pipeline task");
}
