//! Fault injection: a loopback HTTP proxy in front of each emulator
//! (fake-gcs-server, moto, azurite) that, by a schedule, answers 500 (or
//! 429/503 with `Retry-After`), resets connections (before the response or
//! in the middle of the body) and stalls mid-body past the request timeout.
//! `read_chunks` must still deliver every byte exactly once, resume each
//! range at the exact byte where the data stopped, count one retry per
//! injected fault, and wait out every `Retry-After`. Each case runs on GCS,
//! S3 and Azure (one body, the backend a parameter).
//!
//! Needs the emulators (see tests/io/source/cloud.rs); ignored otherwise.
#![cfg(feature = "cloud")]

use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};

use super::common::*;
use super::fault_proxy::*;
use crate::emulators::*;
use infeed::record::{ReadOptions, RecordReader};
use infeed::source::{ReadStats, ShardInfo, SourceError, SourceOptions};

async fn fixture(scheme: &str, name: &str) -> ShardInfo {
    let base = format!("{scheme}://{}", bucket());
    let key = format!("{}/{name}", unique_prefix("faults"));
    let data = file_bytes(name);
    upload(&base, &key, &data).await;
    ShardInfo {
        url: format!("{base}/{key}"),
        size: data.len() as u64,
    }
}

async fn every_byte_arrives_once_through_500s_resets_and_stalls(scheme: &str) {
    use Fault::*;
    let schedule = vec![
        Status500,
        None,
        ResetMidBody,
        None,
        StallMidBody,
        ResetBeforeResponse,
        None,
        Status500,
        ResetMidBody,
        None,
        None,
        StallMidBody,
    ];
    let injected = schedule.iter().filter(|f| **f != None).count() as u64;
    let shard = fixture(scheme, "lm-sample.tfrecord").await;
    let proxy = Proxy::start(upstream(scheme), schedule).await;
    let key_file = tempfile::NamedTempFile::new().expect("key file");
    let store = store_via(&proxy, &shard.url, &key_file);
    let opts = SourceOptions::default()
        .chunk_size(16_384)
        .readahead(4)
        .max_retries(3)
        .backoff(Duration::from_millis(5), Duration::from_millis(50))
        .request_timeout(Duration::from_secs(2));
    let stats = ReadStats::new();
    let (bytes, lens) = read_all(Some(&store), &shard, 0, &opts, stats.clone())
        .await
        .expect("read through faults");

    let data = file_bytes("lm-sample.tfrecord");
    assert!(bytes == data, "bytes differ from the file");
    let ranges = shard.size.div_ceil(16_384);
    assert_eq!(lens.len() as u64, ranges);
    let records: Vec<_> = RecordReader::new(
        &bytes[..],
        "x",
        infeed::record::Compression::None,
        &ReadOptions::default(),
    )
    .map(|r| r.map(|r| (r.offset, r.data)).expect("record"))
    .collect();
    assert!(
        records == local_records("lm-sample.tfrecord"),
        "records differ"
    );
    assert_eq!(records.len(), 256);

    assert_eq!(stats.retries.load(Relaxed), injected);
    assert_eq!(stats.timeouts.load(Relaxed), 2);
    assert_eq!(
        stats.bytes.load(Relaxed),
        shard.size,
        "no byte counted twice"
    );
    assert_eq!(stats.chunks.load(Relaxed), ranges);

    let seen = proxy.seen();
    let gets: Vec<&Seen> = seen.iter().filter(|s| s.method == "GET").collect();
    assert_eq!(gets.len() as u64, ranges + injected);
    assert_eq!(stats.requests.load(Relaxed), ranges + injected);
    // Each faulted request is followed by one for exactly the missing bytes.
    for faulted in gets.iter().filter(|s| s.fault != None) {
        let (a, b) = faulted.range.expect("range");
        let resumed: Vec<u64> = gets
            .iter()
            .filter_map(|s| s.range)
            .filter(|&(ra, rb)| rb == b && ra >= a)
            .map(|(ra, _)| ra)
            .collect();
        match faulted.fault {
            Status500 | RetryAfter(..) | ResetBeforeResponse => {
                assert!(
                    resumed.iter().filter(|&&ra| ra == a).count() >= 2,
                    "{faulted:?}: not retried whole"
                );
            }
            StallMidBody => {
                let at = a + faulted.body_sent as u64;
                assert!(
                    resumed.contains(&at),
                    "{faulted:?}: not resumed at byte {at}: {resumed:?}"
                );
            }
            ResetMidBody => {
                let sent_end = a + faulted.body_sent as u64;
                assert!(
                    resumed.iter().any(|&ra| ra > a && ra <= sent_end),
                    "{faulted:?}: not resumed inside the bytes sent: {resumed:?}"
                );
            }
            None => {}
        }
    }
}

async fn progress_resets_the_retry_budget(scheme: &str) {
    // Every response is cut halfway: each attempt delivers half of what is
    // left, so the read completes with far more cuts than max_retries.
    let shard = fixture(scheme, "examples.tfrecord").await;
    let proxy = Proxy::start(upstream(scheme), vec![Fault::ResetMidBody; 100]).await;
    let key_file = tempfile::NamedTempFile::new().expect("key file");
    let store = store_via(&proxy, &shard.url, &key_file);
    let opts = fast_options()
        .chunk_size(1 << 20)
        .readahead(1)
        .max_retries(2);
    let stats = ReadStats::new();
    let (bytes, _) = read_all(Some(&store), &shard, 0, &opts, stats.clone())
        .await
        .expect("read");
    assert!(bytes == file_bytes("examples.tfrecord"));
    let gets = proxy
        .seen()
        .into_iter()
        .filter(|s| s.method == "GET")
        .count() as u64;
    // 1822 bytes, halved per attempt: 911, 456, 228, 114, 57, 28, 14, 7, 4, 2, 1;
    // the last attempt's half is the whole rest, so it completes.
    assert_eq!(gets, 11);
    assert_eq!(stats.retries.load(Relaxed), gets - 1);
}

async fn a_server_that_keeps_failing_is_given_up_on_naming_url_and_offset(scheme: &str) {
    let shard = fixture(scheme, "lm-sample.tfrecord").await;
    let proxy = Proxy::start(upstream(scheme), vec![Fault::Status500; 100]).await;
    let key_file = tempfile::NamedTempFile::new().expect("key file");
    let store = store_via(&proxy, &shard.url, &key_file);
    let opts = fast_options()
        .chunk_size(50_000)
        .readahead(1)
        .max_retries(4);
    let stats = ReadStats::new();
    match read_all(Some(&store), &shard, 123_456, &opts, stats.clone()).await {
        Err(SourceError::Read {
            url,
            offset,
            message,
            retries,
            source,
            ..
        }) => {
            assert_eq!(
                (url.as_str(), offset, retries),
                (shard.url.as_str(), 123_456, 4)
            );
            assert!(message.contains("500"), "{message}");
            let source = source.expect("the store's error is kept");
            assert!(source.to_string().contains("500"), "{source}");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(stats.retries.load(Relaxed), 4);
    assert_eq!(stats.requests.load(Relaxed), 5);
}

/// A 429 and a 503 with `Retry-After: 1` on a range read, then on a listing:
/// each is retried once, no sooner than a second later (the backoff alone
/// would be 5–50 ms), and the bytes and the listing are exact.
async fn retry_after_is_waited_out(scheme: &str) {
    let shard = fixture(scheme, "lm-sample.tfrecord").await;
    let schedule = vec![Fault::RetryAfter(429, 1), Fault::RetryAfter(503, 1)];
    let proxy = Proxy::start(upstream(scheme), schedule.clone()).await;
    let key_file = tempfile::NamedTempFile::new().expect("key file");
    let store = store_via(&proxy, &shard.url, &key_file);
    let opts = fast_options().chunk_size(1 << 20).readahead(1);
    let stats = ReadStats::new();
    let started = Instant::now();
    let (bytes, _) = read_all(Some(&store), &shard, 0, &opts, stats.clone())
        .await
        .expect("read through 429 and 503");
    let elapsed = started.elapsed();
    assert!(bytes == file_bytes("lm-sample.tfrecord"), "bytes differ");
    assert_eq!(stats.retries.load(Relaxed), 2);
    let gets: Vec<Seen> = proxy
        .seen()
        .into_iter()
        .filter(|s| s.method == "GET")
        .collect();
    assert_eq!(gets.len(), 3, "{gets:?}");
    for pair in gets.windows(2) {
        let gap = pair[1].at - pair[0].at;
        assert!(
            gap >= Duration::from_secs(1),
            "retried {gap:?} after a Retry-After: 1 ({:?})",
            pair[0].fault
        );
    }
    assert!(elapsed >= Duration::from_secs(2), "{elapsed:?}");

    // A listing (a metadata request) waits too.
    let proxy = Proxy::start(upstream(scheme), schedule).await;
    let store = store_via(&proxy, &shard.url, &key_file);
    let stats = ReadStats::new();
    let pattern = format!("{}*", &shard.url[..shard.url.len() - 3]);
    let started = Instant::now();
    let listed = store
        .list(&pattern, &fast_options(), &stats)
        .await
        .expect("list through 429 and 503");
    assert_eq!(listed, vec![shard.clone()]);
    assert_eq!(stats.retries.load(Relaxed), 2);
    let gets: Vec<Seen> = proxy
        .seen()
        .into_iter()
        .filter(|s| s.method == "GET")
        .collect();
    assert_eq!(gets.len(), 3, "{gets:?}");
    for pair in gets.windows(2) {
        let gap = pair[1].at - pair[0].at;
        assert!(
            gap >= Duration::from_secs(1),
            "listing retried after {gap:?}"
        );
    }
    assert!(started.elapsed() >= Duration::from_secs(2));
}

macro_rules! fault_tests {
    ($($f:ident: $gcs:ident, $s3:ident, $azure:ident;)*) => {$(
        #[tokio::test]
        #[ignore = "needs emulators: scripts/emulators.sh start"]
        async fn $gcs() {
            require_emulators();
            $f("gs").await;
        }
        #[tokio::test]
        #[ignore = "needs emulators: scripts/emulators.sh start"]
        async fn $s3() {
            require_emulators();
            $f("s3").await;
        }
        #[tokio::test]
        #[ignore = "needs emulators: scripts/emulators.sh start"]
        async fn $azure() {
            require_emulators();
            $f("az").await;
        }
    )*};
}

fault_tests! {
    every_byte_arrives_once_through_500s_resets_and_stalls:
        gcs_every_byte_arrives_once_through_500s_resets_and_stalls,
        s3_every_byte_arrives_once_through_500s_resets_and_stalls,
        azure_every_byte_arrives_once_through_500s_resets_and_stalls;
    progress_resets_the_retry_budget:
        gcs_progress_resets_the_retry_budget,
        s3_progress_resets_the_retry_budget,
        azure_progress_resets_the_retry_budget;
    a_server_that_keeps_failing_is_given_up_on_naming_url_and_offset:
        gcs_a_server_that_keeps_failing_is_given_up,
        s3_a_server_that_keeps_failing_is_given_up,
        azure_a_server_that_keeps_failing_is_given_up;
    retry_after_is_waited_out:
        gcs_retry_after_is_waited_out,
        s3_retry_after_is_waited_out,
        azure_retry_after_is_waited_out;
}
