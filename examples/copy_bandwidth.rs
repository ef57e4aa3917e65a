//! This machine's copy bandwidth for buffers of one size: the floor that
//! `scripts/compare-tfdata.sh` sets beside every pipeline.
//!
//! ```sh
//! cargo run --release --example copy_bandwidth -- BYTES [THREADS] [SECONDS]
//! ```
//!
//! Each thread copies its own BYTES-long buffer into another of the same size
//! (`copy_from_slice`, i.e. memcpy) again and again for SECONDS (default 0.5).
//! Prints one JSON line: `copy_bytes_per_sec` counts bytes copied, and
//! `traffic_bytes_per_sec` counts bytes read plus bytes written (twice as
//! many), which is what a pipeline that reads R and writes W bytes per record
//! is measured against: its floor is `traffic / (R + W)` records per second.

use std::hint::black_box;
use std::process::ExitCode;
use std::time::{Duration, Instant};

fn copy_for(bytes: usize, seconds: f64) -> (u64, f64) {
    let src: Vec<u8> = (0..bytes).map(|i| i as u8).collect();
    let mut dst = vec![0u8; bytes];
    // Touch both once so page faults are not timed.
    dst.copy_from_slice(&src);
    let limit = Duration::from_secs_f64(seconds);
    let started = Instant::now();
    let mut copied = 0u64;
    while started.elapsed() < limit {
        // Enough rounds between clock reads that reading it costs nothing.
        for _ in 0..(1 + (1 << 24) / bytes.max(1)) {
            dst.copy_from_slice(black_box(&src));
            black_box(&mut dst);
            copied += bytes as u64;
        }
    }
    (copied, started.elapsed().as_secs_f64())
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let parsed = (
        args.first().and_then(|a| a.parse::<usize>().ok()),
        args.get(1).map_or(Some(1), |a| a.parse::<usize>().ok()),
        args.get(2).map_or(Some(0.5), |a| a.parse::<f64>().ok()),
    );
    let (Some(bytes), Some(threads), Some(seconds)) = parsed else {
        eprintln!("usage: copy_bandwidth BYTES [THREADS] [SECONDS]");
        return ExitCode::from(2);
    };
    if bytes == 0 || threads == 0 || seconds <= 0.0 {
        eprintln!("copy_bandwidth: BYTES, THREADS and SECONDS must be positive");
        return ExitCode::from(2);
    }
    let results: Vec<(u64, f64)> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|_| s.spawn(move || copy_for(bytes, seconds)))
            .collect();
        handles.into_iter().filter_map(|h| h.join().ok()).collect()
    });
    if results.len() != threads {
        eprintln!("copy_bandwidth: a copying thread failed");
        return ExitCode::FAILURE;
    }
    // Each thread's own rate, summed: the threads ran side by side.
    let rate: f64 = results.iter().map(|&(b, t)| b as f64 / t).sum();
    println!(
        "{{\"buffer_bytes\":{bytes},\"threads\":{threads},\"copy_bytes_per_sec\":{rate:.0},\"traffic_bytes_per_sec\":{:.0}}}",
        2.0 * rate
    );
    ExitCode::SUCCESS
}
