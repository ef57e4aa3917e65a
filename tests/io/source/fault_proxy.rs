//! A loopback HTTP proxy in front of a storage emulator that, by a schedule,
//! answers 500 (or 429/503 with `Retry-After`), resets connections (before
//! the response or in the middle of the body) and stalls mid-body; it records
//! every request it saw. Also the core of `examples/fault_proxy.rs`, the
//! standalone proxy of `scripts/soak.sh` (faults at a rate, forever).

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// Pass the request through.
    None,
    /// Answer `500 Internal Server Error` without asking the server.
    Status500,
    /// Answer this status (429 or 503) with `Retry-After: <seconds>`,
    /// without asking the server.
    RetryAfter(u16, u32),
    /// Reset the connection after reading the request, before any response.
    ResetBeforeResponse,
    /// Send the head and half the body, then reset the connection.
    ResetMidBody,
    /// Send the head and half the body, then go silent until the client gives up.
    StallMidBody,
}

/// One request the proxy saw.
#[derive(Clone, Debug)]
pub struct Seen {
    pub method: String,
    /// The `Range: bytes=a-b` asked for, as the half-open range a..b+1.
    pub range: Option<(u64, u64)>,
    pub fault: Fault,
    /// Body bytes sent to the client.
    pub body_sent: usize,
    /// When the request's head had arrived.
    pub at: std::time::Instant,
}

/// Which fault the n-th GET gets.
#[derive(Clone, Debug)]
pub enum Schedule {
    /// The n-th GET gets `list[n]`, and `Fault::None` past its end.
    List(Vec<Fault>),
    /// Every `every`-th GET (the `every`-th, the `2·every`-th, …) gets the
    /// next fault of `cycle`, in turn; the others pass. (Built by
    /// examples/fault_proxy.rs only.)
    #[allow(dead_code)]
    Every { every: usize, cycle: Vec<Fault> },
}

impl Schedule {
    fn fault(&self, n: usize) -> Fault {
        match self {
            Schedule::List(list) => list.get(n).copied().unwrap_or(Fault::None),
            Schedule::Every { every, cycle } => {
                let k = n + 1;
                if *every == 0 || cycle.is_empty() || !k.is_multiple_of(*every) {
                    Fault::None
                } else {
                    cycle[(k / every - 1) % cycle.len()]
                }
            }
        }
    }
}

pub struct Proxy {
    pub addr: SocketAddr,
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
    pub async fn start(upstream: SocketAddr, schedule: Vec<Fault>) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind proxy");
        Proxy::serve_on(listener, upstream, Schedule::List(schedule), true)
    }

    /// Serves on `listener` by `schedule`; with `log` false nothing is kept
    /// per request (a proxy that runs for hours).
    pub fn serve_on(
        listener: TcpListener,
        upstream: SocketAddr,
        schedule: Schedule,
        log: bool,
    ) -> Proxy {
        let addr = listener.local_addr().expect("proxy addr");
        let seen = Arc::new(Mutex::new(Vec::new()));
        let gets = Arc::new(Mutex::new(0usize));
        let seen2 = seen.clone();
        let schedule = Arc::new(schedule);
        let task = tokio::spawn(async move {
            loop {
                let Ok((client, _)) = listener.accept().await else {
                    return;
                };
                let (seen, gets, schedule) = (seen2.clone(), gets.clone(), schedule.clone());
                tokio::spawn(async move {
                    let log = if log { Some(&*seen) } else { None };
                    serve(client, upstream, &gets, &schedule, log).await
                });
            }
        });
        Proxy { addr, seen, task }
    }

    /// Points object_store's S3 or Azure client at this proxy: the endpoint
    /// URL for `AWS_ENDPOINT` / `AZURITE_BLOB_STORAGE_URL`.
    pub fn endpoint(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Writes a GCS service-account key file that sends object_store's
    /// requests through this proxy, without OAuth.
    pub fn write_gcs_key(&self, path: &std::path::Path) {
        std::fs::write(
            path,
            format!(
                r#"{{"private_key": "x", "private_key_id": "x", "client_email": "x@example.com", "gcs_base_url": "http://{}", "disable_oauth": true}}"#,
                self.addr
            ),
        )
        .expect("write key");
    }

    /// Requests seen so far, by fault (only for a logging proxy).
    pub fn seen(&self) -> Vec<Seen> {
        self.seen.lock().expect("lock").clone()
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// Serves one connection (one request: every response closes it), logging
/// the request in `log` before answering, so that the log is complete by the
/// time the client has its answer. A client or upstream that misbehaves
/// ends the connection, never the proxy.
async fn serve(
    mut client: TcpStream,
    upstream: SocketAddr,
    gets: &Mutex<usize>,
    schedule: &Schedule,
    log: Option<&Mutex<Vec<Seen>>>,
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
        if head.len() >= 65536 {
            return None;
        }
    };
    // GET and HEAD requests only: no request body to forward.
    let text = String::from_utf8_lossy(&head[..end]).into_owned();
    let mut lines = text.split("\r\n");
    let request_line = lines.next()?.to_owned();
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
            let (a, b) = spec.trim().split_once('-')?;
            range = Some((a.parse::<u64>().ok()?, b.parse::<u64>().ok()? + 1));
        }
        out_head.push_str(line);
        out_head.push_str("\r\n");
    }
    out_head.push_str(&format!("Host: {upstream}\r\nConnection: close\r\n\r\n"));

    let fault = if method == "GET" {
        let mut n = gets.lock().expect("lock");
        let fault = schedule.fault(*n);
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
        at: std::time::Instant::now(),
    };
    let record = |seen: &Seen| {
        if let Some(log) = log {
            log.lock().expect("lock").push(seen.clone())
        }
    };
    match fault {
        Fault::Status500 | Fault::RetryAfter(..) => {
            record(&seen);
            let body = "injected server error";
            let (status, extra) = match fault {
                Fault::RetryAfter(429, secs) => {
                    ("429 Too Many Requests", format!("Retry-After: {secs}\r\n"))
                }
                Fault::RetryAfter(code, secs) => {
                    (status_line(code), format!("Retry-After: {secs}\r\n"))
                }
                _ => ("500 Internal Server Error", String::new()),
            };
            let response = format!(
                "HTTP/1.1 {status}\r\nContent-Type: text/plain\r\n{extra}Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
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
    let mut server = TcpStream::connect(upstream).await.ok()?;
    server.write_all(out_head.as_bytes()).await.ok()?;
    let mut response = Vec::new();
    server.read_to_end(&mut response).await.ok()?;
    let body_at = find(&response, b"\r\n\r\n")? + 4;
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
        Fault::Status500 | Fault::RetryAfter(..) | Fault::ResetBeforeResponse => {}
    }
    Some(())
}

fn status_line(code: u16) -> &'static str {
    match code {
        429 => "429 Too Many Requests",
        503 => "503 Service Unavailable",
        _ => "500 Internal Server Error",
    }
}

/// Closes with a TCP RST instead of a FIN.
fn reset(stream: TcpStream) {
    let _ = stream.set_zero_linger();
    drop(stream);
}

pub fn gcs_upstream() -> SocketAddr {
    upstream("gs")
}

/// The emulator of `scheme` (`gs`, `s3`, `az`), from the variables of
/// `scripts/emulators.sh env`.
pub fn upstream(scheme: &str) -> SocketAddr {
    let var = match scheme {
        "gs" => "INFEED_GCS_ENDPOINT",
        "s3" => "AWS_ENDPOINT",
        _ => "AZURITE_BLOB_STORAGE_URL",
    };
    let endpoint = std::env::var(var).unwrap_or_else(|_| panic!("{var} is not set"));
    endpoint
        .trim_start_matches("http://")
        .trim_end_matches('/')
        .parse()
        .expect("host:port")
}

/// Azurite's well-known development account and key (public, documented by
/// Microsoft; scripts/emulators.sh uses them too).
pub const AZURITE_ACCOUNT: &str = "devstoreaccount1";
pub const AZURITE_KEY: &str =
    "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==";

/// A store for `url`'s bucket (gs://, s3:// or az://) whose requests all go
/// through `proxy`; `key_file` holds the GCS key while the store lives.
#[cfg(feature = "cloud")]
pub fn store_via(
    proxy: &Proxy,
    url: &str,
    key_file: &tempfile::NamedTempFile,
) -> infeed::source::Store {
    let endpoint = proxy.endpoint();
    let azure_endpoint = format!("{endpoint}/{AZURITE_ACCOUNT}");
    let key_path = key_file.path().to_str().expect("utf-8 path").to_owned();
    let config: Vec<(&str, &str)> = match &url[..2] {
        "gs" => {
            proxy.write_gcs_key(key_file.path());
            vec![("google_service_account", key_path.as_str())]
        }
        "s3" => vec![
            ("aws_endpoint", endpoint.as_str()),
            ("aws_allow_http", "true"),
        ],
        _ => vec![
            // Not the emulator switch: it takes its URL from the environment.
            ("azure_storage_use_emulator", "false"),
            ("azure_storage_account_name", AZURITE_ACCOUNT),
            ("azure_storage_account_key", AZURITE_KEY),
            ("azure_storage_endpoint", azure_endpoint.as_str()),
            ("azure_allow_http", "true"),
        ],
    };
    infeed::source::Store::with_config(url, &config).expect("store")
}
