//! The source layer against real-protocol servers on loopback:
//! fake-gcs-server (gs://), moto (s3://), azurite (az://). Those tests are
//! ignored unless asked for; they need `bash scripts/emulators.sh install &&
//! bash scripts/emulators.sh start` and `eval "$(bash scripts/emulators.sh env)"`.
//! The refused-port tests need no server and always run.
#![cfg(feature = "cloud")]

use std::io::Read;
use std::sync::atomic::Ordering::Relaxed;

use super::common::*;
use crate::emulators::*;
use infeed::record::{ReadOptions, RecordReader};
use infeed::source::{
    ReadStats, ShardInfo, SourceError, SourceOptions, Store, list_shards, list_shards_with_stats,
    open_blocking, open_blocking_at, read_chunks, read_range,
};

const FIXTURES: [&str; 4] = [
    "examples.tfrecord",
    "examples.tfrecord.gz",
    "lm-sample.tfrecord",
    "lm-sample.tfrecord.gz",
];

/// Uploads the fixtures (and files the glob must not match) under a fresh
/// prefix; lists them by glob; reads every record through read_chunks and
/// through open_blocking, and compares with the local read.
async fn round_trip(scheme: &str) {
    let base = format!("{scheme}://{}", bucket());
    let prefix = unique_prefix("roundtrip");
    for name in FIXTURES {
        upload(&base, &format!("{prefix}/shards/{name}"), &file_bytes(name)).await;
    }
    upload(&base, &format!("{prefix}/shards/notes.txt"), b"not a shard").await;
    upload(
        &base,
        &format!("{prefix}/shards/nested/lm-sample.tfrecord"),
        b"deeper",
    )
    .await;

    let pattern = format!("{base}/{prefix}/shards/*.tfrecord*");
    let shards = list_shards(&pattern, &SourceOptions::default())
        .await
        .expect("list");
    let expected: Vec<ShardInfo> = FIXTURES
        .iter()
        .map(|name| ShardInfo {
            url: format!("{base}/{prefix}/shards/{name}"),
            size: file_bytes(name).len() as u64,
        })
        .collect();
    assert_eq!(shards, expected);

    for (shard, name) in shards.iter().zip(FIXTURES) {
        // Small chunks: many range reads, several in flight.
        let opts = SourceOptions::default().chunk_size(10_000).readahead(4);
        let stats = ReadStats::new();
        let records = stream_records(read_chunks(shard, 0, &opts, stats.clone()), &shard.url).await;
        assert!(
            records == local_records(name),
            "{}: records differ",
            shard.url
        );
        assert_eq!(stats.bytes.load(Relaxed), shard.size);
        assert_eq!(stats.chunks.load(Relaxed), shard.size.div_ceil(10_000));
        assert_eq!(stats.requests.load(Relaxed), shard.size.div_ceil(10_000));
        assert_eq!(stats.retries.load(Relaxed), 0);

        // From an offset, byte-exact.
        let start = shard.size / 3;
        let (bytes, _) = read_all(None, shard, start, &opts, ReadStats::new())
            .await
            .expect("read");
        assert!(
            bytes == file_bytes(name)[start as usize..],
            "{}: bytes from {start} differ",
            shard.url
        );

        // A range in one buffer, e.g. the first bytes for compression detection.
        let head = read_range(shard, 0..64, &opts, ReadStats::new())
            .await
            .expect("range");
        assert_eq!(head[..], file_bytes(name)[..64]);
        let middle = read_range(shard, 1000..1400, &opts, ReadStats::new())
            .await
            .expect("range");
        assert_eq!(middle[..], file_bytes(name)[1000..1400]);

        // Blocking from an offset.
        let url = shard.url.clone();
        let tail = tokio::task::spawn_blocking(move || {
            let mut reader =
                open_blocking_at(&url, 1001, &SourceOptions::default()).expect("open_blocking_at");
            let mut tail = Vec::new();
            reader.read_to_end(&mut tail).expect("read");
            tail
        })
        .await
        .expect("blocking task");
        assert!(
            tail[..] == file_bytes(name)[1001..],
            "{}: tail differs",
            shard.url
        );

        // Blocking, as the CLI reads.
        let url = shard.url.clone();
        let blocking: Vec<(u64, bytes::Bytes)> = tokio::task::spawn_blocking(move || {
            let reader = open_blocking(&url, &SourceOptions::default()).expect("open_blocking");
            RecordReader::with_options(reader, url.as_str(), &ReadOptions::default())
                .map(|r| r.map(|r| (r.offset, r.data)).expect("record"))
                .collect()
        })
        .await
        .expect("blocking task");
        assert!(
            blocking == local_records(name),
            "{}: blocking records differ",
            shard.url
        );
    }

    // fake-gcs-server also serves objects at plain URLs: read one as http://.
    if scheme == "gs" {
        let endpoint = std::env::var("INFEED_GCS_ENDPOINT").expect("INFEED_GCS_ENDPOINT");
        let url = format!(
            "{endpoint}/{}/{prefix}/shards/lm-sample.tfrecord.gz",
            bucket()
        );
        let shard = list_shards(&url, &SourceOptions::default())
            .await
            .expect("http HEAD");
        assert_eq!(
            shard[0].size,
            file_bytes("lm-sample.tfrecord.gz").len() as u64
        );
        let opts = SourceOptions::default().chunk_size(30_000);
        let records =
            stream_records(read_chunks(&shard[0], 0, &opts, ReadStats::new()), &url).await;
        assert!(
            records == local_records("lm-sample.tfrecord.gz"),
            "{url}: records differ"
        );
        match list_shards(
            &format!("{endpoint}/{}/{prefix}/shards/*", bucket()),
            &SourceOptions::default(),
        )
        .await
        {
            Err(SourceError::BadUrl { reason, .. }) => {
                assert!(reason.contains("cannot list"), "{reason}")
            }
            other => panic!("{other:?}"),
        }
    }

    // The CLI on the same glob.
    #[cfg(feature = "cli")]
    {
        let out = crate::support::run::infeed(&["count", &pattern]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            format!(
                "{base}/{prefix}/shards/examples.tfrecord\t6\n{base}/{prefix}/shards/examples.tfrecord.gz\t6\n\
                 {base}/{prefix}/shards/lm-sample.tfrecord\t256\n{base}/{prefix}/shards/lm-sample.tfrecord.gz\t256\ntotal\t524\n"
            )
        );
    }
}

/// The listing proof in a bucket: siblings with other prefixes, and a
/// sibling folder with many objects, are never returned by the server.
async fn lists_by_prefix_only(scheme: &str) {
    let base = format!("{scheme}://{}", bucket());
    let prefix = unique_prefix("prefix");
    for i in 0..3 {
        upload(&base, &format!("{prefix}/d/train-{i}.tfrecord"), b"t").await;
    }
    for i in 0..25 {
        upload(&base, &format!("{prefix}/d/other-{i}.tfrecord"), b"o").await;
        upload(&base, &format!("{prefix}/sibling/train-{i}.tfrecord"), b"s").await;
    }
    upload(&base, &format!("{prefix}/d/train-dir/x.tfrecord"), b"x").await;

    let (urls, stats) = listed_urls_with_stats(&format!("{base}/{prefix}/d/train-*")).await;
    assert_eq!(
        urls,
        (0..3)
            .map(|i| format!("{base}/{prefix}/d/train-{i}.tfrecord"))
            .collect::<Vec<_>>()
    );
    // One LIST with prefix "d/train-" and delimiter "/": the three objects and
    // the common prefix "d/train-dir/"; nothing from other-* or sibling/.
    assert_eq!(stats.requests.load(Relaxed), 1);
    assert_eq!(stats.listed.load(Relaxed), 4);

    // A wildcard directory level lists the directory names, then only those
    // that match.
    let stats = ReadStats::new();
    let shards = list_shards_with_stats(
        &format!("{base}/{prefix}/d*/train-1*"),
        &SourceOptions::default(),
        &stats,
    )
    .await
    .expect("list");
    assert_eq!(
        shards,
        vec![ShardInfo {
            url: format!("{base}/{prefix}/d/train-1.tfrecord"),
            size: 1
        }]
    );
    assert_eq!(stats.requests.load(Relaxed), 2);
    assert_eq!(
        stats.listed.load(Relaxed),
        1 + 1,
        "d/ itself, then d/train-1.tfrecord"
    );
}

/// Missing objects, empty globs and missing buckets are typed errors that
/// name the URL, without waiting out the retry budget.
async fn errors_name_the_url(scheme: &str) {
    let base = format!("{scheme}://{}", bucket());
    let prefix = unique_prefix("errors");
    upload(&base, &format!("{prefix}/a.tfrecord"), b"a").await;
    let opts = fast_options().max_retries(2);

    let pattern = format!("{base}/{prefix}/b*");
    match list_shards(&pattern, &opts).await {
        Err(SourceError::NoMatch { pattern: p }) => assert_eq!(p, pattern),
        other => panic!("{other:?}"),
    }
    let missing = format!("{base}/{prefix}/b.tfrecord");
    match list_shards(&missing, &opts).await {
        Err(SourceError::NotFound { url }) => assert_eq!(url, missing),
        other => panic!("{other:?}"),
    }
    let missing_clone = missing.clone();
    let result = tokio::task::spawn_blocking(move || {
        open_blocking(&missing_clone, &SourceOptions::default()).map(|_| ())
    })
    .await
    .expect("task");
    match result {
        Err(SourceError::NotFound { url }) => assert_eq!(url, missing),
        other => panic!("{other:?}"),
    }

    let no_bucket = format!("{scheme}://no-such-bucket-infeed/{prefix}/*.tfrecord");
    let stats = ReadStats::new();
    match list_shards_with_stats(&no_bucket, &opts, &stats).await {
        Err(SourceError::Unreachable {
            url,
            message,
            source,
            ..
        }) => {
            assert_eq!(url, no_bucket);
            assert!(!message.contains('\n'), "{message}");
            assert!(source.is_some(), "the store's error is kept");
        }
        other => panic!("{other:?}"),
    }
    // How long it took depends on the machine; how often it asked does not.
    // S3 and Azure answer 404: no retry. fake-gcs-server answers a missing
    // bucket with 500 (real GCS says 404), which is retried like any 5xx.
    let expected_retries = if scheme == "gs" { 2 } else { 0 };
    assert_eq!(stats.retries.load(Relaxed), expected_retries);

    // An object that disappears between listing and reading.
    let ghost = ShardInfo {
        url: format!("{base}/{prefix}/ghost.tfrecord"),
        size: 100,
    };
    match read_all(None, &ghost, 0, &opts, ReadStats::new()).await {
        Err(SourceError::Read {
            url,
            offset,
            message,
            retries,
            source,
            ..
        }) => {
            assert_eq!((url.as_str(), offset, retries), (ghost.url.as_str(), 0, 0));
            assert!(message.contains("gone"), "{message}");
            let source = source.expect("the store's error is kept");
            assert!(
                matches!(
                    source.downcast_ref::<object_store::Error>(),
                    Some(object_store::Error::NotFound { .. })
                ),
                "{source:?}"
            );
        }
        other => panic!("{other:?}"),
    }
}

macro_rules! emulator_tests {
    ($($name:ident: $f:ident($scheme:literal);)*) => {$(
        #[tokio::test]
        #[ignore = "needs emulators: scripts/emulators.sh start"]
        async fn $name() {
            require_emulators();
            $f($scheme).await;
        }
    )*};
}

/// `data` uploaded as a new object under a fresh `prefix` in `scheme`'s
/// bucket: the bucket's URL, the object's key and its listing.
async fn uploaded(scheme: &str, prefix: &str, data: &[u8]) -> (String, String, ShardInfo) {
    let base = format!("{scheme}://{}", bucket());
    let key = format!("{}/x.tfrecord", unique_prefix(prefix));
    upload(&base, &key, data).await;
    let shard = list_shards(&format!("{base}/{key}"), &fast_options())
        .await
        .expect("list")
        .remove(0);
    (base, key, shard)
}

/// An object replaced between two range reads of one stream: the stream
/// ends with `Changed` at the first byte of the new version's response;
/// every byte delivered before it is the old version's.
async fn an_object_replaced_mid_read_is_an_error_not_a_mix(scheme: &str) {
    use futures::StreamExt;
    let (base, key, shard) = uploaded(scheme, "replaced", &[b'a'; 1000]).await;
    let opts = fast_options().readahead(1).chunk_size(100);
    let mut chunks = read_chunks(&shard, 0, &opts, ReadStats::new());
    let mut delivered = chunks
        .next()
        .await
        .expect("a chunk")
        .expect("first chunk")
        .to_vec();
    upload(&base, &key, &[b'b'; 1000]).await;
    let err = loop {
        match chunks.next().await {
            Some(Ok(chunk)) => delivered.extend_from_slice(&chunk),
            Some(Err(e)) => break e,
            None => panic!("read to the end across two versions: {delivered:?}"),
        }
    };
    assert!(delivered.iter().all(|&b| b == b'a'), "{delivered:?}");
    match &err {
        SourceError::Changed {
            url: u,
            offset,
            first,
            now,
        } => {
            assert_eq!(u, &shard.url);
            assert_eq!(*offset, delivered.len() as u64);
            assert_ne!(first, now);
        }
        other => panic!("{other:?}"),
    }
    assert!(
        err.to_string()
            .contains("the object changed while being read"),
        "{err}"
    );
}

/// Chunk buffers are filled again once released downstream: 40 chunks
/// read with 3 in flight, each dropped when read, one held to the end,
/// take at most 3 + 2 buffers (in flight, the chunk just handed out, the
/// held one), not 40; the held chunk is never refilled, and every byte
/// arrives exactly once, in order.
async fn released_chunk_buffers_are_reused_and_held_ones_kept(scheme: &str) {
    use futures::StreamExt;
    let data: Vec<u8> = (0..40_000u32).map(|i| (i % 251) as u8).collect();
    let (_, _, shard) = uploaded(scheme, "reuse", &data).await;
    let opts = fast_options().readahead(3).chunk_size(1000);
    let stats = ReadStats::new();
    let mut chunks = read_chunks(&shard, 0, &opts, stats.clone());
    let mut delivered = Vec::new();
    let mut held = None;
    while let Some(chunk) = chunks.next().await {
        let chunk = chunk.expect("chunk");
        assert_eq!(chunk.len(), 1000);
        delivered.extend_from_slice(&chunk);
        if delivered.len() == 6000 {
            held = Some(chunk);
        }
    }
    assert!(delivered == data, "the bytes differ");
    assert_eq!(held.as_deref(), Some(&data[5000..6000]));
    assert_eq!(stats.chunks.load(Relaxed), 40);
    let buffers = stats.buffers.load(Relaxed);
    assert!(
        (1..=5).contains(&buffers),
        "{buffers} buffers for 40 chunks"
    );
}

emulator_tests! {
    gcs_released_chunk_buffers_are_reused: released_chunk_buffers_are_reused_and_held_ones_kept("gs");
    s3_released_chunk_buffers_are_reused: released_chunk_buffers_are_reused_and_held_ones_kept("s3");
    azure_released_chunk_buffers_are_reused: released_chunk_buffers_are_reused_and_held_ones_kept("az");
    gcs_an_object_replaced_mid_read_is_an_error: an_object_replaced_mid_read_is_an_error_not_a_mix("gs");
    s3_an_object_replaced_mid_read_is_an_error: an_object_replaced_mid_read_is_an_error_not_a_mix("s3");
    azure_an_object_replaced_mid_read_is_an_error: an_object_replaced_mid_read_is_an_error_not_a_mix("az");
    gcs_round_trip: round_trip("gs");
    s3_round_trip: round_trip("s3");
    azure_round_trip: round_trip("az");
    gcs_lists_by_prefix_only: lists_by_prefix_only("gs");
    s3_lists_by_prefix_only: lists_by_prefix_only("s3");
    azure_lists_by_prefix_only: lists_by_prefix_only("az");
    gcs_errors_name_the_url: errors_name_the_url("gs");
    s3_errors_name_the_url: errors_name_the_url("s3");
    azure_errors_name_the_url: errors_name_the_url("az");
}

/// A store for `url`'s bucket whose endpoint is a port nothing listens on,
/// with explicit fake credentials (no metadata-server lookups). The explicit
/// settings override the emulators' environment, if it is set.
fn refused_store(url: &str, port: u16) -> Store {
    let endpoint = format!("http://127.0.0.1:{port}");
    let key_file = tempfile::NamedTempFile::new().expect("key file");
    std::fs::write(
        key_file.path(),
        format!(
            r#"{{"private_key": "x", "private_key_id": "x", "client_email": "x@example.com", "gcs_base_url": "{endpoint}", "disable_oauth": true}}"#
        ),
    )
    .expect("write key");
    let key_path = key_file.path().to_str().expect("utf-8 path").to_owned();
    let config: Vec<(&str, &str)> = match &url[..2] {
        // A path, not the key itself: GOOGLE_SERVICE_ACCOUNT (a path) may be
        // set too, and object_store refuses a path and a key together.
        "gs" => vec![("google_service_account", key_path.as_str())],
        "s3" => vec![
            ("aws_endpoint", endpoint.as_str()),
            ("aws_allow_http", "true"),
            ("aws_access_key_id", "x"),
            ("aws_secret_access_key", "x"),
            ("aws_region", "us-east-1"),
        ],
        _ => vec![
            ("azure_storage_account_name", "devstoreaccount1"),
            ("azure_storage_account_key", "aGVsbG8="),
            ("azure_storage_endpoint", endpoint.as_str()),
            ("azure_allow_http", "true"),
            ("azure_storage_use_emulator", "false"),
        ],
    };
    Store::with_config(url, &config).expect("store")
}

#[tokio::test]
async fn a_refused_port_is_unreachable_quickly_for_every_cloud() {
    for url in [
        "gs://b/x/*.tfrecord",
        "s3://b/x/*.tfrecord",
        "az://b/x/*.tfrecord",
    ] {
        let store = refused_store(url, closed_port());
        // The default budget: connection failures on metadata requests stop early.
        let opts = SourceOptions::default();
        let stats = ReadStats::new();
        match store.list(url, &opts, &stats).await {
            Err(SourceError::Unreachable {
                url: u, message, ..
            }) => {
                assert_eq!(u, url);
                assert!(!message.is_empty());
            }
            other => panic!("{url}: {other:?}"),
        }
        // Quick because it gives up after 2 retries (not by a clock here).
        assert_eq!(stats.retries.load(Relaxed), 2, "{url}");
        assert_eq!(stats.requests.load(Relaxed), 3, "{url}");
    }
}

#[tokio::test]
async fn reading_from_a_refused_port_gives_up_after_max_retries_naming_url_and_offset() {
    for url in [
        "gs://b/x.tfrecord",
        "s3://b/x.tfrecord",
        "az://b/x.tfrecord",
    ] {
        let store = refused_store(url, closed_port());
        let opts = fast_options().readahead(1).chunk_size(100);
        let shard = ShardInfo {
            url: url.to_owned(),
            size: 1000,
        };
        let stats = ReadStats::new();
        let result = collect_chunks(store.read_chunks(&shard, 250, &opts, stats.clone())).await;
        match result {
            Err(e @ SourceError::Read { .. }) => {
                let SourceError::Read {
                    url: u,
                    offset,
                    retries,
                    ..
                } = &e
                else {
                    unreachable!()
                };
                assert_eq!((u.as_str(), *offset, *retries), (url, 250, 3));
                assert!(
                    e.to_string()
                        .starts_with(&format!("{url}: byte 250: read failed after 3 retries: ")),
                    "{e}"
                );
            }
            other => panic!("{url}: {other:?}"),
        }
        assert_eq!(stats.retries.load(Relaxed), 3);
        assert_eq!(stats.requests.load(Relaxed), 4);
        assert_eq!(stats.bytes.load(Relaxed), 0);
    }
}

#[test]
fn open_blocking_on_a_missing_cloud_object_fails_at_open() {
    // A refused port through the cached store needs the environment; here the
    // URL is bad before any request.
    match open_blocking("gs://bucket/a*.tfrecord", &SourceOptions::default()) {
        Err(SourceError::BadUrl { url, .. }) => assert_eq!(url, "gs://bucket/a*.tfrecord"),
        other => panic!("{:?}", other.map(|r| r.size())),
    }
    let mut reader =
        open_blocking("testdata/examples.tfrecord", &SourceOptions::default()).expect("local");
    let mut first = [0u8; 12];
    reader.read_exact(&mut first).expect("read");
    assert_eq!(first[..], file_bytes("examples.tfrecord")[..12]);
}

#[tokio::test]
async fn a_plain_http_endpoint_without_allow_http_fails_at_once_and_says_why() {
    let url = "s3://b/x/*.tfrecord";
    let endpoint = format!("http://127.0.0.1:{}", closed_port());
    let config = [
        ("aws_endpoint", endpoint.as_str()),
        ("aws_allow_http", "false"),
        ("aws_access_key_id", "x"),
        ("aws_secret_access_key", "x"),
        ("aws_region", "us-east-1"),
    ];
    let store = Store::with_config(url, &config).expect("store");
    let stats = ReadStats::new();
    match store.list(url, &SourceOptions::default(), &stats).await {
        Err(SourceError::Unreachable {
            url: u, message, ..
        }) => {
            assert_eq!(u, url);
            assert!(message.contains("needs allow_http"), "{message}");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(stats.retries.load(Relaxed), 0);
    assert_eq!(stats.requests.load(Relaxed), 1);
}

#[tokio::test]
#[ignore = "needs emulators: scripts/emulators.sh start"]
async fn azure_wrong_credentials_name_the_bucket_and_where_credentials_were_looked_for() {
    require_emulators();
    // Azurite checks shared-key signatures: a wrong account key is refused
    // (403) at the listing a pipeline's build makes.
    let url = format!("az://{}/creds/*.tfrecord", bucket());
    let config = [("azure_storage_account_key", "aGVsbG8=")];
    let store = Store::with_config(&url, &config).expect("store");
    let stats = ReadStats::new();
    match store.list(&url, &fast_options(), &stats).await {
        Err(SourceError::Unreachable {
            url: u, message, ..
        }) => {
            assert_eq!(u, url);
            assert!(
                message.starts_with(&format!("access to bucket {:?} denied", bucket())),
                "{message}"
            );
            assert!(
                message.contains("credentials were looked for in AZURE_STORAGE_ACCOUNT_KEY"),
                "{message}"
            );
        }
        other => panic!("{other:?}"),
    }
}
