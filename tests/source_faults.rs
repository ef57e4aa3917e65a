//! Fault injection: a loopback HTTP proxy in front of fake-gcs-server that,
//! by a schedule, answers 500, resets connections (before the response or in
//! the middle of the body) and stalls mid-body past the request timeout.
//! `read_chunks` must still deliver every byte exactly once, resume each
//! range at the exact byte where the data stopped, and count one retry per
//! injected fault.
//!
//! Needs the emulators (see tests/source_cloud.rs); ignored otherwise.
#![cfg(feature = "cloud")]

mod source_common;

use std::net::SocketAddr;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use infeed::record::{ReadOptions, RecordReader};
use infeed::source::{ReadStats, ShardInfo, SourceError, SourceOptions, Store};
use source_common::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fault {
    /// Pass the request through.
    None,
    /// Answer `500 Internal Server Error` without asking the server.
    Status500,
    /// Reset the connection after reading the request, before any response.
    ResetBeforeResponse,
    /// Send the head and half the body, then reset the connection.
    ResetMidBody,
    /// Send the head and half the body, then go silent until the client gives up.
    StallMidBody,
}

/// One request the proxy saw.
#[derive(Clone, Debug)]
struct Seen {
    method: String,
    /// The `Range: bytes=a-b` asked for, as the half-open range a..b+1.
    range: Option<(u64, u64)>,
    fault: Fault,
    /// Body bytes sent to the client.
    body_sent: usize,
}

struct Proxy {
    addr: SocketAddr,
    seen: Arc<Mutex<Vec<Seen>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Proxy {
    /// Starts a proxy to `upstream`; the n-th GET gets `schedule[n]` (and
    /// `Fault::None` past its end). Other methods pass through.
    async fn start(upstream: SocketAddr, schedule: Vec<Fault>) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind proxy");
        let addr = listener.local_addr().expect("proxy addr");
        let seen = Arc::new(Mutex::new(Vec::new()));
        let gets = Arc::new(Mutex::new(0usize));
        let seen2 = seen.clone();
        let task = tokio::spawn(async move {
            loop {
                let Ok((client, _)) = listener.accept().await else {
                    return;
                };
                let (seen, gets, schedule) = (seen2.clone(), gets.clone(), schedule.clone());
                tokio::spawn(async move { serve(client, upstream, &gets, &schedule, &seen).await });
            }
        });
        Proxy { addr, seen, task }
    }

    fn seen(&self) -> Vec<Seen> {
        self.seen.lock().expect("lock").clone()
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// Serves one connection (one request: every response closes it), logging
/// the request in `log` before answering, so that the log is complete by the
/// time the client has its answer.
async fn serve(
    mut client: TcpStream,
    upstream: SocketAddr,
    gets: &Mutex<usize>,
    schedule: &[Fault],
    log: &Mutex<Vec<Seen>>,
) -> Option<()> {
    let mut head = Vec::new();
    let mut buf = [0u8; 4096];
    let end = loop {
        let n = client.read(&mut buf).await.ok()?;
        if n == 0 {
            return None;
        }
        head.extend_from_slice(&buf[..n]);
        if let Some(i) = find(&head, b"\r\n\r\n") {
            break i;
        }
        assert!(head.len() < 65536, "request head too long");
    };
    // GET and HEAD requests only: no request body to forward.
    let text = String::from_utf8_lossy(&head[..end]).into_owned();
    let mut lines = text.split("\r\n");
    let request_line = lines.next().expect("request line").to_owned();
    let method = request_line
        .split(' ')
        .next()
        .unwrap_or_default()
        .to_owned();
    let mut out_head = format!("{request_line}\r\n");
    let mut range = None;
    for line in lines {
        let lower = line.to_ascii_lowercase();
        if lower.starts_with("host:") || lower.starts_with("connection:") {
            continue;
        }
        if let Some(spec) = lower.strip_prefix("range: bytes=") {
            let (a, b) = spec.trim().split_once('-').expect("range a-b");
            range = Some((
                a.parse::<u64>().expect("a"),
                b.parse::<u64>().expect("b") + 1,
            ));
        }
        out_head.push_str(line);
        out_head.push_str("\r\n");
    }
    out_head.push_str(&format!("Host: {upstream}\r\nConnection: close\r\n\r\n"));

    let fault = if method == "GET" {
        let mut n = gets.lock().expect("lock");
        let fault = schedule.get(*n).copied().unwrap_or(Fault::None);
        *n += 1;
        fault
    } else {
        Fault::None
    };
    let mut seen = Seen {
        method,
        range,
        fault,
        body_sent: 0,
    };
    let record = |seen: &Seen| log.lock().expect("lock").push(seen.clone());
    match fault {
        Fault::Status500 => {
            record(&seen);
            let body = "injected server error";
            let response = format!(
                "HTTP/1.1 500 Internal Server Error\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
            let _ = client.write_all(response.as_bytes()).await;
            let _ = client.shutdown().await;
            return Some(());
        }
        Fault::ResetBeforeResponse => {
            record(&seen);
            reset(client);
            return Some(());
        }
        _ => {}
    }
    let mut server = TcpStream::connect(upstream)
        .await
        .expect("connect upstream");
    server
        .write_all(out_head.as_bytes())
        .await
        .expect("forward request");
    let mut response = Vec::new();
    server
        .read_to_end(&mut response)
        .await
        .expect("read upstream response");
    let body_at = find(&response, b"\r\n\r\n").expect("response head") + 4;
    let body_len = response.len() - body_at;
    match fault {
        Fault::None => {
            seen.body_sent = body_len;
            record(&seen);
            let _ = client.write_all(&response).await;
            let _ = client.shutdown().await;
        }
        Fault::ResetMidBody | Fault::StallMidBody => {
            // At least one byte, so that every attempt makes progress.
            let half = body_len.div_ceil(2);
            seen.body_sent = half;
            record(&seen);
            let _ = client.write_all(&response[..body_at + half]).await;
            let _ = client.flush().await;
            if fault == Fault::ResetMidBody {
                // Let the client take in the bytes sent before the reset.
                tokio::time::sleep(Duration::from_millis(100)).await;
                reset(client);
            } else {
                // Silent until the client hangs up (or 20 s pass).
                let mut sink = [0u8; 64];
                let _ = tokio::time::timeout(Duration::from_secs(20), client.read(&mut sink)).await;
            }
        }
        Fault::Status500 | Fault::ResetBeforeResponse => {}
    }
    Some(())
}

/// Closes with a TCP RST instead of a FIN.
fn reset(stream: TcpStream) {
    let _ = stream.set_zero_linger();
    drop(stream);
}

fn gcs_upstream() -> SocketAddr {
    let endpoint = std::env::var("INFEED_GCS_ENDPOINT").expect("INFEED_GCS_ENDPOINT");
    endpoint
        .trim_start_matches("http://")
        .parse()
        .expect("host:port")
}

/// A gs:// store whose requests go through the proxy.
fn store_via(proxy: &Proxy, url: &str, key_file: &tempfile::NamedTempFile) -> Store {
    std::fs::write(
        key_file.path(),
        format!(
            r#"{{"private_key": "x", "private_key_id": "x", "client_email": "x@example.com", "gcs_base_url": "http://{}", "disable_oauth": true}}"#,
            proxy.addr
        ),
    )
    .expect("write key");
    let path = key_file.path().to_str().expect("utf-8").to_owned();
    Store::with_config(url, &[("google_service_account", path.as_str())]).expect("store")
}

async fn fixture(name: &str) -> ShardInfo {
    let base = format!("gs://{}", bucket());
    let key = format!("{}/{name}", unique_prefix("faults"));
    let data = file_bytes(name);
    upload(&base, &key, &data).await;
    ShardInfo {
        url: format!("{base}/{key}"),
        size: data.len() as u64,
    }
}

#[tokio::test]
#[ignore = "needs emulators: scripts/emulators.sh start"]
async fn every_byte_arrives_once_through_500s_resets_and_stalls() {
    if !emulators() {
        return;
    }
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
    let shard = fixture("lm-sample.tfrecord").await;
    let proxy = Proxy::start(gcs_upstream(), schedule).await;
    let key_file = tempfile::NamedTempFile::new().expect("key file");
    let store = store_via(&proxy, &shard.url, &key_file);
    let opts = SourceOptions {
        chunk_size: 16_384,
        readahead: 4,
        max_retries: 3,
        retry_backoff: Duration::from_millis(5),
        max_backoff: Duration::from_millis(50),
        request_timeout: Duration::from_secs(2),
    };
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
            Status500 | ResetBeforeResponse => {
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

#[tokio::test]
#[ignore = "needs emulators: scripts/emulators.sh start"]
async fn progress_resets_the_retry_budget() {
    if !emulators() {
        return;
    }
    // Every response is cut halfway: each attempt delivers half of what is
    // left, so the read completes with far more cuts than max_retries.
    let shard = fixture("examples.tfrecord").await;
    let proxy = Proxy::start(gcs_upstream(), vec![Fault::ResetMidBody; 100]).await;
    let key_file = tempfile::NamedTempFile::new().expect("key file");
    let store = store_via(&proxy, &shard.url, &key_file);
    let opts = SourceOptions {
        chunk_size: 1 << 20,
        readahead: 1,
        max_retries: 2,
        ..fast_options()
    };
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

#[tokio::test]
#[ignore = "needs emulators: scripts/emulators.sh start"]
async fn a_server_that_keeps_failing_is_given_up_on_naming_url_and_offset() {
    if !emulators() {
        return;
    }
    let shard = fixture("lm-sample.tfrecord").await;
    let proxy = Proxy::start(gcs_upstream(), vec![Fault::Status500; 100]).await;
    let key_file = tempfile::NamedTempFile::new().expect("key file");
    let store = store_via(&proxy, &shard.url, &key_file);
    let opts = SourceOptions {
        chunk_size: 50_000,
        readahead: 1,
        max_retries: 4,
        ..fast_options()
    };
    let stats = ReadStats::new();
    match read_all(Some(&store), &shard, 123_456, &opts, stats.clone()).await {
        Err(SourceError::Read {
            url,
            offset,
            message,
            retries,
        }) => {
            assert_eq!(
                (url.as_str(), offset, retries),
                (shard.url.as_str(), 123_456, 4)
            );
            assert!(message.contains("500"), "{message}");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(stats.retries.load(Relaxed), 4);
    assert_eq!(stats.requests.load(Relaxed), 5);
}
