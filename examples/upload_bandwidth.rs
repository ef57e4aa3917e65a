//! Host-to-device bandwidth of batch uploads through a PJRT plugin (the
//! device of `PJRT_PLUGIN_PATH`, or the CPU plugin of `.pjrt/`):
//!
//! ```sh
//! cargo run --release --features xla --example upload_bandwidth -- [--mib 64] [--rounds 15]
//! ```
//!
//! The same bytes three ways, alternating within each round:
//! - `pooled`: a pooled batch buffer, as the device feeder uploads it;
//!   mapped for DMA on its first upload where the plugin offers it
//!   (`ClientOptions::dma_map`, on by default off the CPU);
//! - `pageable`: an unpooled aligned buffer (never mapped: the runtime
//!   stages it through memory of its own, as any pageable memory);
//! - `copy`: `Client::upload_copy` from a `Vec` (copied during the call);
//! - `pooled_in_flight`: four pooled buffers uploaded one after another,
//!   then all waited for (whether transfers overlap or queue).
//!
//! Otherwise each upload is waited for (`DeviceBuffer::wait_ready`) before
//! the next.
//! Prints one JSON line: the median GB/s of each (1 GB = 1e9 bytes), the
//! platform, what came of DMA mapping, and whether uploads were read in
//! place (a CPU device: no copy at all, so its "bandwidth" is no link's).

use std::time::Instant;

use infeed::batch::{AlignedBuf, BufferPool, Tensor, TensorType};
use infeed::xla::{Client, ClientOptions, DeviceBuffer, Plugin, XlaError};

fn arg(name: &str, default: usize) -> usize {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .map(|v| v.parse().unwrap_or_else(|e| panic!("{name}: {e}")))
        .unwrap_or(default)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Uploads `tensor`, waits for it to be on the device; GB/s and whether
/// the device read the host memory in place.
fn timed(client: &Client, tensor: Tensor) -> Result<(f64, bool, bool), XlaError> {
    let bytes = tensor.data().len() as f64;
    let host = tensor.data().as_ptr() as usize;
    let start = Instant::now();
    let buffer: DeviceBuffer = client.upload("batch", tensor)?;
    buffer.wait_ready()?;
    let secs = start.elapsed().as_secs_f64();
    let in_place = buffer.device_address().ok() == Some(host);
    Ok((bytes / secs / 1e9, in_place, buffer.uploaded_pinned()))
}

/// `values` in a pooled buffer, as a one-dimensional u8 tensor.
fn pooled_tensor(pool: &BufferPool, values: &[u8]) -> Result<Tensor, infeed::batch::TensorError> {
    let mut buf = pool.take_zeroed(values.len());
    buf.as_bytes_mut().copy_from_slice(values);
    Tensor::new(TensorType::U8, vec![values.len()], buf)
}

/// Four pooled buffers of `values` uploaded back to back, then waited for:
/// GB/s over the four.
fn four_in_flight(
    client: &Client,
    pool: &BufferPool,
    values: &[u8],
) -> Result<f64, Box<dyn std::error::Error>> {
    let tensors = (0..4)
        .map(|_| pooled_tensor(pool, values))
        .collect::<Result<Vec<_>, _>>()?;
    let start = Instant::now();
    let buffers = tensors
        .into_iter()
        .map(|t| client.upload("batch", t))
        .collect::<Result<Vec<DeviceBuffer>, _>>()?;
    for b in &buffers {
        b.wait_ready()?;
    }
    let secs = start.elapsed().as_secs_f64();
    drop(buffers);
    client.release_host_buffers();
    Ok(4.0 * values.len() as f64 / secs / 1e9)
}

fn run() -> Result<serde_json::Value, Box<dyn std::error::Error>> {
    let mib = arg("--mib", 64);
    let rounds = arg("--rounds", 15).max(1);
    let bytes = mib << 20;
    let client = Client::new(Plugin::load_default()?, &ClientOptions::default())?;
    let pool = BufferPool::default();
    let values: Vec<u8> = (0..bytes).map(|i| (i * 31 % 251) as u8).collect();
    let shape = vec![bytes];
    let (mut pooled, mut pageable, mut copy) = (Vec::new(), Vec::new(), Vec::new());
    let mut in_flight = Vec::new();
    let (mut in_place, mut pinned) = (true, true);
    // Round 0 warms up (the first pooled upload maps the buffer).
    for round in 0..=rounds {
        let (gbps, here, pin) = timed(&client, pooled_tensor(&pool, &values)?)?;
        client.release_host_buffers();
        let unpooled = AlignedBuf::from_slice(&values);
        let (gbps2, here2, _) = timed(
            &client,
            Tensor::new(TensorType::U8, shape.clone(), unpooled)?,
        )?;
        let start = Instant::now();
        let b = client.upload_copy("batch", &[bytes], &values)?;
        b.wait_ready()?;
        let gbps3 = bytes as f64 / start.elapsed().as_secs_f64() / 1e9;
        let gbps4 = four_in_flight(&client, &pool, &values)?;
        if round > 0 {
            in_flight.push(gbps4);
            pooled.push(gbps);
            pageable.push(gbps2);
            copy.push(gbps3);
            in_place &= here && here2;
            pinned &= pin;
        }
    }
    Ok(serde_json::json!({
        "platform": client.platform(),
        "bytes": bytes,
        "rounds": rounds,
        "pooled_gb_per_sec": median(pooled),
        "pageable_gb_per_sec": median(pageable),
        "copy_gb_per_sec": median(copy),
        "pooled_in_flight_gb_per_sec": median(in_flight),
        "pooled_pinned": pinned,
        "read_in_place": in_place,
        "dma": format!("{:?}", client.dma_status()),
    }))
}

fn main() {
    match run() {
        Ok(line) => println!("{line}"),
        Err(e) => {
            eprintln!("upload_bandwidth: {e}");
            std::process::exit(1);
        }
    }
}
