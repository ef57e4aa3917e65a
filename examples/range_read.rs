//! A plain parallel range-read client: what an object store (or its
//! emulator) serves with nothing but object_store in between, to set beside
//! infeed reading the same objects (`scripts/compare-tfdata.sh`).
//!
//! ```sh
//! cargo run --release --example range_read -- gs://BUCKET/PREFIX [CONCURRENCY] [RANGE_BYTES]
//! ```
//!
//! Lists the objects under PREFIX, cuts each into RANGE_BYTES pieces
//! (default 8 MiB, infeed's chunk size) and reads them all once with
//! CONCURRENCY (default 16: 4 shards × 4 reads ahead, as infeed reads them)
//! `get_range` requests in flight. The client is configured from the
//! environment as infeed's is. Prints one JSON line: bytes, seconds,
//! bytes_per_sec.

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

use futures::{StreamExt, TryStreamExt};
use object_store::gcp::GoogleCloudStorageBuilder;
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt};

async fn read_all(url: &str, concurrency: usize, range: u64) -> Result<(u64, f64), String> {
    let rest = url
        .strip_prefix("gs://")
        .ok_or_else(|| format!("{url}: only gs:// URLs"))?;
    let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
    let store: Arc<dyn ObjectStore> = Arc::new(
        GoogleCloudStorageBuilder::from_env()
            .with_bucket_name(bucket)
            .build()
            .map_err(|e| format!("{url}: {e}"))?,
    );
    let objects: Vec<_> = store
        .list(Some(&Path::from(prefix)))
        .try_collect()
        .await
        .map_err(|e| format!("listing {url}: {e}"))?;
    if objects.is_empty() {
        return Err(format!("{url}: no objects"));
    }
    let mut pieces = Vec::new();
    for o in &objects {
        let mut start = 0;
        while start < o.size {
            pieces.push((o.location.clone(), start..(start + range).min(o.size)));
            start += range;
        }
    }
    let started = Instant::now();
    let bytes = futures::stream::iter(pieces)
        .map(|(path, r)| {
            let store = store.clone();
            async move {
                store
                    .get_range(&path, r)
                    .await
                    .map(|b| b.len() as u64)
                    .map_err(|e| format!("{path}: {e}"))
            }
        })
        .buffer_unordered(concurrency)
        .try_fold(0u64, |sum, n| async move { Ok(sum + n) })
        .await?;
    Ok((bytes, started.elapsed().as_secs_f64()))
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let parsed = (
        args.first(),
        args.get(1).map_or(Some(16), |a| a.parse::<usize>().ok()),
        args.get(2).map_or(Some(8 << 20), |a| a.parse::<u64>().ok()),
    );
    let (Some(url), Some(concurrency), Some(range)) = parsed else {
        eprintln!("usage: range_read gs://BUCKET/PREFIX [CONCURRENCY] [RANGE_BYTES]");
        return ExitCode::from(2);
    };
    if concurrency == 0 || range == 0 {
        eprintln!("range_read: CONCURRENCY and RANGE_BYTES must be positive");
        return ExitCode::from(2);
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("range_read: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(read_all(url, concurrency, range)) {
        Ok((bytes, seconds)) => {
            println!(
                "{{\"bytes\":{bytes},\"seconds\":{seconds},\"bytes_per_sec\":{:.0},\"concurrency\":{concurrency},\"range_bytes\":{range}}}",
                bytes as f64 / seconds
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("range_read: {e}");
            ExitCode::FAILURE
        }
    }
}
