//! A standalone fault-injecting HTTP proxy in front of a storage emulator
//! (the proxy of `tests/io/source/fault_proxy.rs`), for `scripts/soak.sh`:
//!
//! ```sh
//! cargo run --release --example fault_proxy -- --upstream 127.0.0.1:41443 [--port 0] [--every 50]
//! ```
//!
//! Every `--every`-th GET gets a fault, in turn: a 500, a reset before the
//! response, a reset in the middle of the body, a 503 with `Retry-After: 1`.
//! Prints `listening 127.0.0.1:PORT` once ready, then serves until killed.

#[allow(dead_code)]
#[path = "../tests/io/source/fault_proxy.rs"]
mod fault_proxy;

use fault_proxy::{Fault, Proxy, Schedule};

fn main() -> Result<(), String> {
    let mut upstream = None;
    let mut port = 0u16;
    let mut every = 50usize;
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        let mut value = |name: &str| it.next().ok_or_else(|| format!("{name} needs a value"));
        match a.as_str() {
            "--upstream" => upstream = Some(value("--upstream")?),
            "--port" => {
                port = value("--port")?
                    .parse()
                    .map_err(|e| format!("--port: {e}"))?
            }
            "--every" => {
                every = value("--every")?
                    .parse()
                    .map_err(|e| format!("--every: {e}"))?
            }
            _ => {
                return Err(
                    "usage: fault_proxy --upstream HOST:PORT [--port P] [--every N]".into(),
                );
            }
        }
    }
    let upstream: std::net::SocketAddr = upstream
        .ok_or("--upstream is required")?
        .parse()
        .map_err(|e| format!("--upstream: {e}"))?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    runtime.block_on(async move {
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", port))
            .await
            .map_err(|e| format!("bind 127.0.0.1:{port}: {e}"))?;
        let cycle = vec![
            Fault::Status500,
            Fault::ResetBeforeResponse,
            Fault::ResetMidBody,
            Fault::RetryAfter(503, 1),
        ];
        let proxy = Proxy::serve_on(listener, upstream, Schedule::Every { every, cycle }, false);
        println!("listening {}", proxy.addr);
        std::future::pending::<()>().await;
        Ok(())
    })
}
