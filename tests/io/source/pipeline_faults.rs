//! The whole pipeline reading gs:// shards through a proxy that answers
//! 500s and resets connections: every record arrives exactly once, in the
//! order a local read gives, and the read stage reports one retry per
//! injected fault; and a small object read for many epochs is fetched
//! twice, not once an epoch. (tests/io/source/faults.rs checks the byte-level resume,
//! stalls included, under the source layer alone.)
//!
//! The pipeline finds its GCS endpoint the usual way, through the
//! environment, so this binary points `GOOGLE_SERVICE_ACCOUNT` at the proxy
//! and holds this one test. Needs the emulators; ignored otherwise.
#![cfg(feature = "cloud")]

use super::common::*;
use super::fault_proxy::*;
use crate::emulators::*;
use infeed::pipeline::Pipeline;

/// The harness's name of this module's test `name` (what `run_alone`
/// takes): the module path without the crate's name, then `name`.
fn test_name(name: &str) -> String {
    let module = module_path!().split_once("::").map_or("", |(_, m)| m);
    format!("{module}::{name}")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs emulators: scripts/emulators.sh start"]
async fn every_record_arrives_once_through_500s_and_resets() {
    require_emulators();
    // It sets GOOGLE_SERVICE_ACCOUNT and needs a process whose store cache
    // holds no gs:// store yet: the other cloud tests of this binary break
    // both, so it runs alone in a child process.
    if !run_alone(&test_name(
        "every_record_arrives_once_through_500s_and_resets",
    )) {
        return;
    }
    use Fault::*;
    let schedule = vec![
        Status500,
        ResetBeforeResponse,
        None,
        ResetMidBody,
        Status500,
    ];
    let injected = schedule.iter().filter(|f| **f != None).count() as u64;
    let base = format!("gs://{}", bucket());
    let prefix = unique_prefix("pipeline-faults");
    let names = ["lm-sample.tfrecord", "lm-sample.tfrecord.gz"];
    for name in names {
        upload(&base, &format!("{prefix}/{name}"), &file_bytes(name)).await;
    }
    let proxy = Proxy::start(gcs_upstream(), schedule).await;
    let key_file = tempfile::NamedTempFile::new().expect("key file");
    proxy.write_gcs_key(key_file.path());
    // SAFETY: this process runs only this test (`run_alone`), which sets it
    // before anything reads the environment for GCS (no store exists yet);
    // no other thread of the process touches the environment.
    unsafe { std::env::set_var("GOOGLE_SERVICE_ACCOUNT", key_file.path()) };

    let remote: Vec<String> = names
        .iter()
        .map(|n| format!("{base}/{prefix}/{n}"))
        .collect();
    let local: Vec<String> = names
        .iter()
        .map(|n| testdata(n).display().to_string())
        .collect();
    let (got, want, retries) = tokio::task::spawn_blocking(move || {
        let read = |files: Vec<String>| {
            let mut batches = Pipeline::from_files(files)
                .unwrap()
                .interleave(2, 3)
                .build_raw(7, false)
                .unwrap();
            let mut records = Vec::new();
            while let Some(batch) = batches.next_batch().expect("no error reaches the consumer") {
                records.extend(batch.into_records());
            }
            (records, batches.stats().read.retries)
        };
        let (got, retries) = read(remote);
        let (want, local_retries) = read(local);
        assert_eq!(local_retries, 0);
        (got, want, retries)
    })
    .await
    .expect("pipeline task");

    assert_eq!(got.len(), 2 * 256);
    assert!(got == want, "records differ from a local read");
    assert_eq!(retries, injected, "one retry per injected fault");
    let gets = proxy.seen().iter().filter(|s| s.method == "GET").count() as u64;
    assert!(gets > injected, "{gets} GETs");
}

/// A pipeline with its own `SourceOptions`, reading `scheme`'s bucket
/// through a proxy that answers 500s: with `max_retries(1)` the read fails
/// after exactly one retry, as the typed `SourceError` naming the shard and
/// the byte; with `max_retries(3)` it reads every record through three
/// 500s; with a retry deadline it stops retrying at the deadline, however
/// many retries `max_retries` would allow.
async fn source_options_bound_the_retries(scheme: &str, test: &str) {
    use infeed::pipeline::PipelineError;
    use infeed::source::{SourceError, SourceOptions};
    use std::time::{Duration, Instant};
    require_emulators();
    // It points the environment at the proxy: alone in a child process.
    if !run_alone(test) {
        return;
    }
    let name = "lm-sample.tfrecord";
    let base = format!("{scheme}://{}", bucket());
    let key = format!("{}/{name}", unique_prefix("pipeline-options"));
    // Uploaded before the environment points at the proxy.
    upload(&base, &key, &file_bytes(name)).await;
    let url = format!("{base}/{key}");
    // GETs 0-1: the first pipeline's read and its one retry; 2-4 then a
    // pass: the second's; 6 on: the deadline's, all refused.
    let mut schedule = vec![Fault::Status500; 5];
    schedule.push(Fault::None);
    schedule.extend([Fault::Status500; 100]);
    let proxy = Proxy::start(upstream(scheme), schedule).await;
    let key_file = tempfile::NamedTempFile::new().expect("key file");
    // SAFETY: this process runs only this test (`run_alone`), which sets it
    // before anything reads the environment for this cloud (no store exists
    // yet); no other thread of the process touches the environment.
    unsafe {
        match scheme {
            "gs" => {
                proxy.write_gcs_key(key_file.path());
                std::env::set_var("GOOGLE_SERVICE_ACCOUNT", key_file.path());
            }
            "s3" => std::env::set_var("AWS_ENDPOINT", proxy.endpoint()),
            _ => std::env::set_var("AZURITE_BLOB_STORAGE_URL", proxy.endpoint()),
        }
    }
    let fast = SourceOptions::default()
        .backoff(Duration::from_millis(5), Duration::from_millis(20))
        .request_timeout(Duration::from_secs(5));
    let read = move |opts: SourceOptions| {
        let url = url.clone();
        tokio::task::spawn_blocking(move || {
            let mut batches = Pipeline::from_files([url])
                .unwrap()
                .source_options(opts)
                .build_raw(64, false)
                .unwrap();
            let mut records = 0;
            let result = loop {
                match batches.next_batch() {
                    Ok(Some(batch)) => records += batch.len(),
                    Ok(None) => break Ok(records),
                    Err(e) => break Err(e),
                }
            };
            (result, batches.stats().read.retries)
        })
    };
    let gets = |proxy: &Proxy| proxy.seen().iter().filter(|s| s.method == "GET").count();

    // One retry allowed: two 500s fail the read.
    let (result, _) = read(fast.clone().max_retries(1)).await.expect("task");
    match result {
        Err(PipelineError::Source(SourceError::Read {
            url: at,
            offset,
            retries,
            message,
            ..
        })) => {
            assert!(at.ends_with(&key), "{at}");
            assert_eq!((offset, retries), (0, 1), "{message}");
            assert!(message.contains("500"), "{message}");
        }
        other => panic!("expected a SourceError::Read, got {other:?}"),
    }
    assert_eq!(gets(&proxy), 2, "the request and its one retry");

    // Three retries allowed: three 500s, then every record.
    let (result, retries) = read(fast.clone().max_retries(3)).await.expect("task");
    assert_eq!(result.expect("read through three 500s"), 256);
    assert_eq!(retries, 3);
    assert_eq!(gets(&proxy), 6);

    // A deadline of 1 s with waits of 100-200 ms: the retries stop at the
    // deadline, far short of `max_retries` (at most 10 waits fit in it; how
    // many do depends on how fast the proxy answers, so only the bound is
    // checked).
    let deadline = fast
        .clone()
        .max_retries(90)
        .backoff(Duration::from_millis(200), Duration::from_millis(200))
        .retry_timeout(Duration::from_secs(1));
    let started = Instant::now();
    let (result, _) = read(deadline).await.expect("task");
    let took = started.elapsed();
    match result {
        Err(PipelineError::Source(SourceError::Read {
            retries, message, ..
        })) => {
            assert!(retries <= 10, "{retries} retries: {message}");
            assert!(message.contains("retry deadline"), "{message}");
            assert_eq!(gets(&proxy), 6 + retries as usize + 1);
        }
        other => panic!("expected a SourceError::Read, got {other:?}"),
    }
    // Far short of 90 waits of 100-200 ms, however loaded the machine.
    assert!(took < Duration::from_secs(15), "{took:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs emulators: scripts/emulators.sh start"]
async fn source_options_bound_the_retries_gs() {
    source_options_bound_the_retries("gs", &test_name("source_options_bound_the_retries_gs")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs emulators: scripts/emulators.sh start"]
async fn source_options_bound_the_retries_s3() {
    source_options_bound_the_retries("s3", &test_name("source_options_bound_the_retries_s3")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs emulators: scripts/emulators.sh start"]
async fn source_options_bound_the_retries_az() {
    source_options_bound_the_retries("az", &test_name("source_options_bound_the_retries_az")).await;
}

/// A small object read for many epochs is fetched for two passes only:
/// the first, which the pipeline keeps (`read/kept.rs`), and the second,
/// read ahead while the first was read; the epochs after hand on the kept
/// records. Every epoch's records are the local file's, and the read stage
/// counts every epoch's records as read. Through a proxy that counts the
/// GETs (it injects no fault).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs emulators: scripts/emulators.sh start"]
async fn a_small_object_read_for_many_epochs_is_fetched_twice() {
    require_emulators();
    // It sets GOOGLE_SERVICE_ACCOUNT: alone in a child process.
    if !run_alone(&test_name(
        "a_small_object_read_for_many_epochs_is_fetched_twice",
    )) {
        return;
    }
    let name = "lm-sample.tfrecord.gz";
    let base = format!("gs://{}", bucket());
    let key = format!("{}/{name}", unique_prefix("pipeline-kept"));
    upload(&base, &key, &file_bytes(name)).await;
    let proxy = Proxy::start(gcs_upstream(), Vec::new()).await;
    let key_file = tempfile::NamedTempFile::new().expect("key file");
    proxy.write_gcs_key(key_file.path());
    // SAFETY: this process runs only this test (`run_alone`), which sets it
    // before anything reads the environment for GCS (no store exists yet);
    // no other thread of the process touches the environment.
    unsafe { std::env::set_var("GOOGLE_SERVICE_ACCOUNT", key_file.path()) };
    let read = |url: String, epochs: u64| {
        tokio::task::spawn_blocking(move || {
            let mut batches = Pipeline::from_files([url])
                .unwrap()
                .repeat(Some(epochs))
                .build_raw(100, false)
                .unwrap();
            let mut records = Vec::new();
            while let Some(batch) = batches.next_batch().expect("no error") {
                records.extend(batch.into_records());
            }
            (records, batches.stats().read.records)
        })
    };
    let gets = |proxy: &Proxy| proxy.seen().iter().filter(|s| s.method == "GET").count();
    let remote = format!("{base}/{key}");
    let local = testdata(name).display().to_string();

    let (once, counted) = read(remote.clone(), 1).await.expect("task");
    assert_eq!((once.len(), counted), (256, 256));
    let pass = gets(&proxy);
    assert!(pass > 0);
    let (got, counted) = read(remote, 6).await.expect("task");
    let (want, _) = read(local, 6).await.expect("task");
    assert_eq!(got.len(), 6 * 256);
    assert!(got == want, "records differ from a local read");
    assert_eq!(counted, 6 * 256);
    assert_eq!(gets(&proxy) - pass, 2 * pass, "two passes fetched, not six");
}

/// A GZIP object of `n` records of 50 to 199 bytes of noise (deflate
/// keeps them about as long, so the object has many access points), also
/// written to `dir`; its local path.
fn noisy_gzip(dir: &std::path::Path, name: &str, n: usize) -> String {
    use infeed::record::{Compression, RecordWriter};
    let path = dir.join(name);
    let mut w = RecordWriter::create(&path, Compression::Gzip).expect("writer");
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    for i in 0..n {
        let record: Vec<u8> = (0..50 + i * 37 % 150)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect();
        w.write_record(&record).expect("write");
    }
    w.finish().expect("finish");
    path.display().to_string()
}

/// Where spans of `index` begin their range reads: the byte before each
/// access point (where the point has bits), or the point's.
fn span_starts(index: &infeed::index::ShardIndex) -> std::collections::BTreeSet<u64> {
    let start = |p: &infeed::index::zran::AccessPoint| p.input - u64::from(p.bits > 0);
    index.points.iter().map(start).collect()
}

/// A GZIP object is read by spans on several threads, a range read per
/// span from its access point: on every pass where it has an index in its
/// bucket, and, without one, from the pass after the one that learned its
/// points (an object too large to keep, read three times: once by its
/// reader, which finds it too large once open, once learning, once by
/// spans). The records are a local read's. Through a proxy that sees each
/// GET's range (it injects no fault).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs emulators: scripts/emulators.sh start"]
async fn a_gzip_object_is_read_by_spans_from_its_index_or_learned_points() {
    use infeed::index::{BuildOptions, DEFAULT_SPAN, build, index_url};
    require_emulators();
    // It sets GOOGLE_SERVICE_ACCOUNT: alone in a child process.
    if !run_alone(&test_name(
        "a_gzip_object_is_read_by_spans_from_its_index_or_learned_points",
    )) {
        return;
    }
    let dir = tempfile::tempdir().expect("temp dir");
    let base = format!("gs://{}", bucket());
    let prefix = unique_prefix("pipeline-spans");
    let locals = [
        noisy_gzip(dir.path(), "a-indexed.tfrecord.gz", 3000),
        noisy_gzip(dir.path(), "b-large.tfrecord.gz", 140_000),
    ];
    let mut remotes = Vec::new();
    for local in &locals {
        let name = local.rsplit('/').next().expect("name");
        let bytes = std::fs::read(local).expect("read");
        upload(&base, &format!("{prefix}/{name}"), &bytes).await;
        remotes.push(format!("{base}/{prefix}/{name}"));
    }
    // The small object's index, points every 16 KiB, saved beside it.
    let span = BuildOptions {
        span: 16 << 10,
        ..BuildOptions::default()
    };
    let index = build(&locals[0], &span).expect("index");
    assert!(index.points.len() >= 8, "{} points", index.points.len());
    // Uploaded as `infeed index -o` would write it (the emulator takes no
    // object_store PUT).
    let place = index_url(&remotes[0], None);
    let key = place
        .strip_prefix(&format!("{base}/"))
        .expect("in the bucket");
    upload(&base, key, &index.encode()).await;
    // What a pass learns of the large one: a point every MiB.
    let learned = build(&locals[1], &BuildOptions::default()).expect("index");
    assert!(
        learned.points.len() >= 12,
        "{} points",
        learned.points.len()
    );
    assert_eq!(learned.span, DEFAULT_SPAN);
    let proxy = Proxy::start(gcs_upstream(), Vec::new()).await;
    let key_file = tempfile::NamedTempFile::new().expect("key file");
    proxy.write_gcs_key(key_file.path());
    // SAFETY: this process runs only this test (`run_alone`), which sets it
    // before anything reads the environment for GCS (no store exists yet);
    // no other thread of the process touches the environment.
    unsafe { std::env::set_var("GOOGLE_SERVICE_ACCOUNT", key_file.path()) };
    // Files in their order each pass: the large one's next pass begins
    // only once its last has ended.
    let read = |urls: Vec<String>| {
        tokio::task::spawn_blocking(move || {
            let mut batches = Pipeline::from_files(urls)
                .unwrap()
                .threads(4)
                .repeat(Some(3))
                .build_raw(1000, false)
                .unwrap();
            let mut records = Vec::new();
            while let Some(batch) = batches.next_batch().expect("no error") {
                records.extend(batch.into_records());
            }
            records
        })
    };
    let got = read(remotes).await.expect("task");
    let want = read(locals.to_vec()).await.expect("task");
    assert_eq!(got.len(), 3 * (3000 + 140_000));
    assert!(got == want, "records differ from a local read");
    let seen = proxy.seen();
    let gets = seen.iter().filter(|s| s.method == "GET");
    let read_from: std::collections::BTreeSet<u64> =
        gets.filter_map(|s| s.range.map(|(a, _)| a)).collect();
    for spans in [&index, &learned] {
        let missing: Vec<u64> = span_starts(spans).difference(&read_from).copied().collect();
        assert!(missing.is_empty(), "no range read from {missing:?}");
    }
    // A span fetches about its own bytes, not up to the point after next.
    let large = std::fs::metadata(&locals[1]).expect("size").len();
    let starts = span_starts(&learned);
    let fetched: u64 = (seen.iter())
        .filter(|s| s.method == "GET")
        .filter_map(|s| s.range.filter(|(a, _)| *a > 0 && starts.contains(a)))
        .map(|(a, b)| b - a)
        .sum();
    assert!(
        fetched < large * 11 / 10,
        "{fetched} bytes fetched of {large}"
    );
}
