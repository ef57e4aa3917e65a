//! Helpers of the tests that need the cloud emulators: the switch that asks
//! for them, fixture uploads, fast-failing options, an unused port.

use std::io::{Read, Write};
use std::sync::Arc;

use infeed::source::SourceOptions;

/// Fails the test unless the emulators are up (`eval "$(scripts/emulators.sh
/// env)"` sets INFEED_EMULATORS=1). Tests that need them are `#[ignore]`d, so
/// they run only when asked for; asked for without the emulators, they fail
/// loudly rather than pass with nothing tested.
pub fn require_emulators() {
    assert!(
        std::env::var("INFEED_EMULATORS").is_ok_and(|v| v == "1"),
        "INFEED_EMULATORS is not 1: start the emulators with scripts/emulators.sh start \
         and eval \"$(bash scripts/emulators.sh env)\""
    );
}

pub fn bucket() -> String {
    std::env::var("INFEED_TEST_BUCKET").unwrap_or_else(|_| "infeed-test".into())
}

/// A key prefix no other test (or earlier run against the same emulator) uses.
pub fn unique_prefix(name: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    format!("{name}-{}-{nanos}", std::process::id())
}

/// A minimal HTTP/1.1 client for loopback test servers: one request per
/// connection. Returns the status and the raw rest of the response.
pub fn http(method: &str, url: &str, content_type: &str, body: &[u8]) -> (u16, String) {
    let rest = url.strip_prefix("http://").expect("http:// URL");
    let (host, path) = rest
        .split_once('/')
        .map(|(h, p)| (h, format!("/{p}")))
        .unwrap_or((rest, "/".into()));
    let mut stream = std::net::TcpStream::connect(host).expect("connect to test server");
    let head = format!(
        "{method} {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).expect("send");
    stream.write_all(body).expect("send body");
    let mut response = Vec::new();
    stream.read_to_end(&mut response).expect("read response");
    let text = String::from_utf8_lossy(&response).into_owned();
    let status = text
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no status in {text:?}"));
    (status, text)
}

fn percent_encode(s: &str) -> String {
    let mut out = String::new();
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// Uploads `data` as `key` to the bucket of `base` (`gs://b`, `s3://b`,
/// `az://b`). fake-gcs-server takes its JSON upload API (object_store's GCS
/// writes do not work on it); moto and azurite take object_store puts.
pub async fn upload(base: &str, key: &str, data: &[u8]) {
    let (scheme, bucket) = base.split_once("://").expect("base URL");
    match scheme {
        "gs" => {
            let endpoint = std::env::var("INFEED_GCS_ENDPOINT").expect("INFEED_GCS_ENDPOINT");
            let url = format!(
                "{endpoint}/upload/storage/v1/b/{bucket}/o?uploadType=media&name={}",
                percent_encode(key)
            );
            let data = data.to_vec();
            let (status, text) = tokio::task::spawn_blocking(move || {
                http("POST", &url, "application/octet-stream", &data)
            })
            .await
            .expect("upload task");
            assert_eq!(status, 200, "upload {key}: {text}");
        }
        #[cfg(feature = "cloud")]
        "s3" | "az" => {
            use object_store::{ObjectStore, ObjectStoreExt, PutPayload};
            let store: Arc<dyn ObjectStore> = if scheme == "s3" {
                Arc::new(
                    object_store::aws::AmazonS3Builder::from_env()
                        .with_bucket_name(bucket)
                        .build()
                        .expect("s3 client"),
                )
            } else {
                Arc::new(
                    object_store::azure::MicrosoftAzureBuilder::from_env()
                        .with_container_name(bucket)
                        .build()
                        .expect("azure client"),
                )
            };
            store
                .put(
                    &object_store::path::Path::from(key),
                    PutPayload::from(data.to_vec()),
                )
                .await
                .unwrap_or_else(|e| panic!("upload {key}: {e}"));
        }
        other => panic!("no upload for {other}"),
    }
}

/// Options that fail fast: tests must not wait out the default backoff.
pub fn fast_options() -> SourceOptions {
    SourceOptions::default()
        .chunk_size(4096)
        .readahead(3)
        .max_retries(3)
        .backoff(
            std::time::Duration::from_millis(5),
            std::time::Duration::from_millis(50),
        )
        .request_timeout(std::time::Duration::from_secs(5))
}

/// A port on 127.0.0.1 that nothing listens on (bound, then released).
pub fn closed_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    drop(listener);
    port
}

/// Whether this process runs `test` (its full name in this binary) alone.
/// If not, reruns this test binary with only `test`, asserts that it passed
/// and returns false: the caller returns, its work done in the child. For
/// tests that change process-wide state (the environment, the store cache).
pub fn run_alone(test: &str) -> bool {
    const ALONE: &str = "INFEED_TEST_ALONE";
    if std::env::var(ALONE).is_ok_and(|v| v == test) {
        return true;
    }
    let status = std::process::Command::new(std::env::current_exe().expect("test binary"))
        .args([test, "--exact", "--include-ignored"])
        .env(ALONE, test)
        .status()
        .expect("rerun the test binary");
    assert!(status.success(), "{test}, run alone: {status}");
    false
}
