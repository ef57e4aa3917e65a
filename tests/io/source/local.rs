//! The source layer on local files: glob listing (exact, sorted, by prefix
//! only), chunked reads from any offset, blocking reads, the CLI on globs.

use std::io::Read;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;

use super::common::*;
use futures::StreamExt;
use infeed::source::{
    ReadStats, ShardInfo, SourceError, SourceOptions, list_shards, list_shards_with_stats,
    open_blocking, open_blocking_at, read_chunks, read_range,
};

fn write(path: &Path, len: usize) {
    std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
    std::fs::write(path, vec![7u8; len]).expect("write");
}

fn s(dir: &Path) -> String {
    dir.to_str().expect("utf-8 temp dir").to_owned()
}

/// a/: three train shards (one compressed), an eval shard, a `train-sub`
/// directory that must not be listed as a shard.
fn tree() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    let a = dir.path().join("a");
    write(&a.join("train-00002.tfrecord"), 30);
    write(&a.join("train-00000.tfrecord"), 10);
    write(&a.join("train-00001.tfrecord.gz"), 20);
    write(&a.join("eval-00000.tfrecord"), 5);
    write(&a.join("train-sub").join("x.tfrecord"), 1);
    dir
}

#[tokio::test]
async fn a_glob_lists_exactly_the_matching_files_sorted_with_sizes() {
    let dir = tree();
    let root = s(dir.path());
    let shards = list_shards(&format!("{root}/a/train-*"), &SourceOptions::default())
        .await
        .expect("list");
    assert_eq!(
        shards,
        vec![
            ShardInfo {
                url: format!("{root}/a/train-00000.tfrecord"),
                size: 10
            },
            ShardInfo {
                url: format!("{root}/a/train-00001.tfrecord.gz"),
                size: 20
            },
            ShardInfo {
                url: format!("{root}/a/train-00002.tfrecord"),
                size: 30
            },
        ]
    );
    let urls = listed_urls(&format!("{root}/a/train-0000[02].tfrecord")).await;
    assert_eq!(
        urls,
        vec![
            format!("{root}/a/train-00000.tfrecord"),
            format!("{root}/a/train-00002.tfrecord")
        ]
    );
}

#[tokio::test]
async fn wildcards_in_directories_match_directories_only() {
    let dir = tree();
    let root = s(dir.path());
    write(&dir.path().join("b").join("train-00000.tfrecord"), 3);
    let urls = listed_urls(&format!("{root}/*/train-00000.tfrecord")).await;
    assert_eq!(
        urls,
        vec![
            format!("{root}/a/train-00000.tfrecord"),
            format!("{root}/b/train-00000.tfrecord")
        ]
    );
    let shards = list_shards(&format!("{root}/a/train-s*/*"), &SourceOptions::default())
        .await
        .expect("list");
    assert_eq!(
        shards,
        vec![ShardInfo {
            url: format!("{root}/a/train-sub/x.tfrecord"),
            size: 1
        }]
    );
}

#[tokio::test]
async fn comma_separated_patterns_are_merged_sorted_and_deduplicated() {
    let dir = tree();
    let root = s(dir.path());
    let pattern =
        format!("{root}/a/train-00002.tfrecord, {root}/a/eval-*,{root}/a/train-0000[12]*");
    let urls = listed_urls(&pattern).await;
    assert_eq!(
        urls,
        vec![
            format!("{root}/a/eval-00000.tfrecord"),
            format!("{root}/a/train-00001.tfrecord.gz"),
            format!("{root}/a/train-00002.tfrecord"),
        ]
    );
    // Every pattern of the list must match something.
    match list_shards(
        &format!("{root}/a/eval-*,{root}/a/nothing-*"),
        &SourceOptions::default(),
    )
    .await
    {
        Err(SourceError::NoMatch { pattern }) => assert_eq!(pattern, format!("{root}/a/nothing-*")),
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn an_empty_glob_is_no_match_and_a_missing_file_is_not_found() {
    let dir = tree();
    let root = s(dir.path());
    for pattern in [
        format!("{root}/a/nothing-*"),
        format!("{root}/missing-dir/*"),
        format!("{root}/a/*/none*"),
    ] {
        match list_shards(&pattern, &SourceOptions::default()).await {
            Err(SourceError::NoMatch { pattern: p }) => assert_eq!(p, pattern),
            other => panic!("{pattern}: {other:?}"),
        }
    }
    let missing = format!("{root}/a/train-00009.tfrecord");
    match list_shards(&missing, &SourceOptions::default()).await {
        Err(e @ SourceError::NotFound { .. }) => {
            assert_eq!(e.url(), missing);
            assert_eq!(e.to_string(), format!("{missing}: no such object"));
        }
        other => panic!("{other:?}"),
    }
    match list_shards(&format!("{root}/a"), &SourceOptions::default()).await {
        Err(SourceError::BadUrl { reason, .. }) => assert!(reason.contains("DIR/*"), "{reason}"),
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn bad_patterns_are_bad_urls() {
    for (pattern, reason) in [
        ("/tmp/**/x", "recursive"),
        ("/tmp/a[b", "unclosed"),
        ("gs://bucket-*/x", "not the bucket"),
        ("ftp://h/x", "unknown scheme"),
        ("a,,b", "empty pattern"),
    ] {
        match list_shards(pattern, &SourceOptions::default()).await {
            Err(SourceError::BadUrl { reason: r, .. }) => {
                assert!(r.contains(reason), "{pattern}: {r}")
            }
            other => panic!("{pattern}: {other:?}"),
        }
    }
}

/// The listing proof: a sibling folder with many files is never listed, and
/// a wildcard directory level lists only the directories it matches.
#[tokio::test]
async fn a_glob_lists_only_under_its_literal_prefix() {
    let dir = tree();
    let root = s(dir.path());
    let sibling = dir.path().join("big");
    std::fs::create_dir_all(&sibling).expect("mkdir");
    for i in 0..3000 {
        std::fs::write(sibling.join(format!("train-{i:05}.tfrecord")), b"x").expect("write");
    }
    let stats = ReadStats::new();
    let shards = list_shards_with_stats(
        &format!("{root}/a/train-*"),
        &SourceOptions::default(),
        &stats,
    )
    .await
    .expect("list");
    assert_eq!(shards.len(), 3);
    // One directory read, of a/ alone: its 5 entries.
    assert_eq!(stats.requests.load(Relaxed), 1);
    assert_eq!(stats.listed.load(Relaxed), 5);

    // A wildcard directory: the root (a, big) is read, then only a/.
    std::fs::create_dir_all(dir.path().join("a2")).expect("mkdir");
    write(&dir.path().join("a2").join("train-7.tfrecord"), 4);
    let (urls, stats) = listed_urls_with_stats(&format!("{root}/a*/train-*.tfrecord")).await;
    assert_eq!(
        urls,
        vec![
            format!("{root}/a/train-00000.tfrecord"),
            format!("{root}/a/train-00002.tfrecord"),
            format!("{root}/a2/train-7.tfrecord"),
        ]
    );
    assert_eq!(stats.requests.load(Relaxed), 3, "root, a/, a2/");
    assert_eq!(stats.listed.load(Relaxed), 3 + 5 + 1, "root has a, a2, big");
}

#[tokio::test]
async fn relative_and_file_url_patterns_keep_their_spelling() {
    // Integration tests run in the package root.
    let shards = list_shards("testdata/examples.tfrecord*", &SourceOptions::default())
        .await
        .expect("list");
    assert_eq!(
        shards,
        vec![
            ShardInfo {
                url: "testdata/examples.tfrecord".into(),
                size: 1822
            },
            ShardInfo {
                url: "testdata/examples.tfrecord.gz".into(),
                size: 1422
            },
            ShardInfo {
                url: "testdata/examples.tfrecord.json".into(),
                size: 3490
            },
            ShardInfo {
                url: "testdata/examples.tfrecord.zz".into(),
                size: 1410
            },
        ]
    );
    let abs = testdata("lm-sample.tfrecord*");
    let url = format!("file://{}", abs.display());
    let urls = listed_urls(&url).await;
    let base = testdata("").display().to_string();
    assert_eq!(
        urls,
        vec![
            format!("file://{base}lm-sample.tfrecord"),
            format!("file://{base}lm-sample.tfrecord.gz"),
            format!("file://{base}lm-sample.tfrecord.json"),
        ]
    );
}

#[tokio::test]
async fn read_chunks_delivers_the_bytes_from_any_offset_exactly_in_chunks() {
    let data = file_bytes("lm-sample.tfrecord");
    let shard = list_shards("testdata/lm-sample.tfrecord", &SourceOptions::default())
        .await
        .expect("head")
        .remove(0);
    assert_eq!(shard.size, data.len() as u64);
    let opts = SourceOptions::default().chunk_size(10_000).readahead(3);
    for start in [0u64, 1, 12_345, 250_000, shard.size - 1, shard.size] {
        let stats = ReadStats::new();
        let (bytes, lens) = read_all(None, &shard, start, &opts, stats.clone())
            .await
            .expect("read");
        assert!(
            bytes == data[start as usize..],
            "start {start}: bytes differ"
        );
        let rest = data.len() - start as usize;
        let expected: Vec<usize> = (0..rest.div_ceil(10_000))
            .map(|i| (rest - i * 10_000).min(10_000))
            .collect();
        assert_eq!(lens, expected, "start {start}");
        assert_eq!(stats.bytes.load(Relaxed), rest as u64);
        assert_eq!(stats.chunks.load(Relaxed), expected.len() as u64);
        assert_eq!(stats.retries.load(Relaxed), 0);
    }
    match read_all(None, &shard, shard.size + 1, &opts, ReadStats::new()).await {
        Err(SourceError::BadOffset { url, offset, size }) => {
            assert_eq!(
                (url.as_str(), offset, size),
                ("testdata/lm-sample.tfrecord", shard.size + 1, shard.size)
            );
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn records_from_chunks_equal_the_local_reader_for_plain_and_gzip() {
    for name in [
        "lm-sample.tfrecord",
        "lm-sample.tfrecord.gz",
        "examples.tfrecord.zz",
    ] {
        let url = format!("testdata/{name}");
        let shard = list_shards(&url, &SourceOptions::default())
            .await
            .expect("head")
            .remove(0);
        let opts = SourceOptions::default().chunk_size(777).readahead(5);
        let records = stream_records(read_chunks(&shard, 0, &opts, ReadStats::new()), &url).await;
        let expected = local_records(name);
        assert!(!expected.is_empty());
        assert!(records == expected, "{name}: records differ");
    }
}

#[test]
fn read_chunks_can_be_polled_without_a_tokio_runtime() {
    let shard = ShardInfo {
        url: "testdata/examples.tfrecord".into(),
        size: 1822,
    };
    let opts = SourceOptions::default().chunk_size(100);
    let (bytes, lens) =
        futures::executor::block_on(read_all(None, &shard, 0, &opts, ReadStats::new()))
            .expect("read");
    assert_eq!(bytes, file_bytes("examples.tfrecord"));
    assert_eq!(lens.len(), 19);
}

#[test]
fn a_shard_that_shrank_is_truncated_at_its_end() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("x.tfrecord");
    write(&path, 1000);
    let shard = ShardInfo {
        url: s(&path),
        size: 1500,
    };
    let opts = SourceOptions::default().chunk_size(400).readahead(1);
    let mut chunks = read_chunks(&shard, 0, &opts, ReadStats::new());
    let mut got = 0;
    let err = futures::executor::block_on(async {
        loop {
            match chunks.next().await {
                Some(Ok(c)) => got += c.len(),
                Some(Err(e)) => break e,
                None => panic!("no error"),
            }
        }
    });
    assert_eq!(got, 800);
    match err {
        SourceError::Truncated { url, offset, size } => {
            assert_eq!((url, offset, size), (s(&path), 1000, 1500))
        }
        other => panic!("{other:?}"),
    }
    assert!(
        futures::executor::block_on(chunks.next()).is_none(),
        "the stream ends after its error"
    );
}

#[test]
fn dropping_a_stream_midway_returns_promptly() {
    let shard = ShardInfo {
        url: "testdata/lm-sample.tfrecord".into(),
        size: 255_884,
    };
    let opts = SourceOptions::default().chunk_size(1000).readahead(8);
    let mut chunks = read_chunks(&shard, 0, &opts, ReadStats::new());
    let first = futures::executor::block_on(chunks.next())
        .expect("a chunk")
        .expect("ok");
    assert_eq!(first.len(), 1000);
    drop(chunks);
}

#[test]
fn open_blocking_reads_local_files_and_names_missing_ones() {
    let mut reader =
        open_blocking("testdata/examples.tfrecord.gz", &SourceOptions::default()).expect("open");
    assert_eq!(reader.size(), 1422);
    let mut all = Vec::new();
    reader.read_to_end(&mut all).expect("read");
    assert_eq!(all, file_bytes("examples.tfrecord.gz"));
    match open_blocking("testdata/nothing.tfrecord", &SourceOptions::default()) {
        Err(SourceError::NotFound { url }) => assert_eq!(url, "testdata/nothing.tfrecord"),
        other => panic!("{other:?}"),
    }
    match open_blocking("testdata/*.tfrecord", &SourceOptions::default()) {
        Err(SourceError::BadUrl { reason, .. }) => {
            assert!(reason.contains("list_shards"), "{reason}")
        }
        other => panic!("{other:?}"),
    }
}

#[cfg(feature = "cli")]
#[test]
fn the_cli_counts_globs_and_comma_lists_in_sorted_order() {
    use crate::support::run::infeed;
    let out = infeed(&[
        "count",
        "testdata/examples.tfrecord.[gz]*",
        "testdata/lm-sample.tfrecord,testdata/sequence.tfrecord",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "testdata/examples.tfrecord.gz\t6\ntestdata/examples.tfrecord.zz\t6\ntestdata/lm-sample.tfrecord\t256\ntestdata/sequence.tfrecord\t3\ntotal\t271\n"
    );
    let out = infeed(&["count", "testdata/nothing-*"]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "infeed: testdata/nothing-*: no shard matches\n"
    );
    let out = infeed(&[
        "verify",
        "file://{}"
            .replace("{}", &testdata("examples.tfrecord").display().to_string())
            .as_str(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        format!(
            "file://{}: ok, 6 records\n",
            testdata("examples.tfrecord").display()
        )
    );
}

#[test]
fn stats_are_shared_between_readers() {
    let stats: Arc<ReadStats> = ReadStats::new();
    let opts = SourceOptions::default();
    for name in ["examples.tfrecord", "sequence.tfrecord"] {
        let shard = ShardInfo {
            url: format!("testdata/{name}"),
            size: file_bytes(name).len() as u64,
        };
        futures::executor::block_on(read_all(None, &shard, 0, &opts, stats.clone())).expect("read");
    }
    assert_eq!(stats.bytes.load(Relaxed), 1822 + 777);
    assert_eq!(stats.chunks.load(Relaxed), 2);
    assert_eq!(stats.requests.load(Relaxed), 2);
}

#[tokio::test]
async fn read_range_gives_exactly_the_bytes_asked_for() {
    let data = file_bytes("lm-sample.tfrecord");
    let shard = ShardInfo {
        url: "testdata/lm-sample.tfrecord".into(),
        size: data.len() as u64,
    };
    let opts = SourceOptions::default();
    for (a, b) in [
        (0u64, 12u64),
        (100, 100),
        (5_000, 130_001),
        (255_000, 255_884),
    ] {
        let bytes = read_range(&shard, a..b, &opts, ReadStats::new())
            .await
            .expect("range");
        assert_eq!(bytes[..], data[a as usize..b as usize], "{a}..{b}");
    }
    match read_range(&shard, 255_000..255_885, &opts, ReadStats::new()).await {
        Err(SourceError::BadOffset { offset, size, .. }) => {
            assert_eq!((offset, size), (255_885, 255_884))
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn open_blocking_at_starts_at_the_byte() {
    let data = file_bytes("lm-sample.tfrecord");
    let mut reader = open_blocking_at(
        "testdata/lm-sample.tfrecord",
        77_777,
        &SourceOptions::default(),
    )
    .expect("open");
    let mut rest = Vec::new();
    reader.read_to_end(&mut rest).expect("read");
    assert!(rest[..] == data[77_777..]);
    match open_blocking_at(
        "testdata/lm-sample.tfrecord",
        255_885,
        &SourceOptions::default(),
    ) {
        Err(SourceError::BadOffset { url, offset, size }) => {
            assert_eq!(
                (url.as_str(), offset, size),
                ("testdata/lm-sample.tfrecord", 255_885, 255_884)
            );
        }
        other => panic!("{other:?}"),
    }
}
