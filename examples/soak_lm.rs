//! The soak of `scripts/soak.sh`: the reference lm pipeline (shuffle files →
//! interleave 4 → shuffle 10 000 → repeat forever → parse → pad to a multiple
//! of 64, max 512 → int32 → batch 256, drop remainder) over `PATTERN`, for
//! `--seconds` (after the reference pass; or until its standard input
//! closes, with `--until-eof`), checking every epoch:
//!
//! ```sh
//! cargo run --release --example soak_lm -- 'gs://bucket/lm/*.tfrecord' --seconds 3600
//! ```
//!
//! First one plain pass (no shuffle, one epoch) gives the file's record
//! count and the multiset of its records (a wrapping sum of a hash per
//! record: the tokens under the mask). `shuffle` before `repeat` drains the
//! buffer at each epoch's end, so epoch k is rows k·N .. (k+1)·N of the
//! output; each must hold exactly the file's records. Prints one JSON line
//! per epoch (`"ok"`: count and multiset match), a last `"done"` line, and
//! exits 1 on a pipeline error or a wrong epoch.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use infeed::batch::{Batch, TensorType, Truncation};
use infeed::pipeline::{ParsedPipeline, Pipeline, PipelineError};
use infeed::spec::{DType, FeatureSpec};
use xxhash_rust::xxh3::xxh3_64;

fn lm(pattern: &str) -> Result<Pipeline, PipelineError> {
    Pipeline::from_glob(pattern)
}

fn finish(p: Pipeline) -> ParsedPipeline {
    let spec = FeatureSpec::new()
        .var_len("input_ids", DType::Int64)
        .var_len("attention_mask", DType::Int64);
    p.parse(spec)
        .pad_to_multiple_of(64)
        .max_length(512)
        .truncation(Truncation::KeepStart)
        .cast(TensorType::I32)
}

/// The hash of each real row of `batch`: its `input_ids` under the mask.
fn row_hashes(batch: &Batch) -> Result<Vec<u64>, String> {
    let ids = batch.get("input_ids").ok_or("no input_ids tensor")?;
    let mask = batch
        .get("input_ids_mask")
        .ok_or("no input_ids_mask tensor")?;
    let values = ids.values::<i32>().ok_or("input_ids is not int32")?;
    let (rows, width) = match ids.shape() {
        [r, w] => (*r, *w),
        s => return Err(format!("input_ids has shape {s:?}")),
    };
    let mask_bytes = mask.bytes();
    let elem = mask_bytes.len() / (rows * width).max(1);
    let mut out = Vec::with_capacity(batch.real_rows);
    for r in 0..batch.real_rows.min(rows) {
        let row_mask = &mask_bytes[r * width * elem..(r + 1) * width * elem];
        let len = row_mask
            .chunks(elem.max(1))
            .filter(|m| m.iter().any(|&b| b != 0))
            .count();
        let row = &values[r * width..r * width + len];
        let bytes: Vec<u8> = row.iter().flat_map(|v| v.to_le_bytes()).collect();
        out.push(xxh3_64(&bytes) ^ (len as u64).rotate_left(32));
    }
    Ok(out)
}

fn run(pattern: &str, seconds: f64, seed: u64, until_eof: bool) -> Result<bool, String> {
    let start = Instant::now();
    // The reference: one plain epoch.
    let mut reference = finish(lm(pattern).map_err(|e| e.to_string())?)
        .batch(256, false)
        .build()
        .map_err(|e| e.to_string())?;
    let (mut n, mut want) = (0u64, 0u64);
    while let Some(batch) = reference.next_batch().map_err(|e| e.to_string())? {
        for h in row_hashes(&batch)? {
            n += 1;
            want = want.wrapping_add(h);
        }
    }
    drop(reference);
    if n == 0 {
        return Err(format!("{pattern}: no records"));
    }
    println!(
        r#"{{"reference":true,"records":{n},"seconds":{:.1}}}"#,
        start.elapsed().as_secs_f64()
    );

    let pipeline = lm(pattern)
        .map_err(|e| e.to_string())?
        .seed(seed)
        .shuffle_files()
        .interleave(4, 1)
        .shuffle(10_000)
        .repeat(None);
    let mut batches = finish(pipeline)
        .batch(256, true)
        .build()
        .map_err(|e| e.to_string())?;
    // The soak's clock starts after the reference pass.
    let deadline = Instant::now() + Duration::from_secs_f64(seconds);
    // With --until-eof the soak also ends when its standard input closes
    // (scripts/soak.sh closes it after its last sample).
    let stop = Arc::new(AtomicBool::new(false));
    if until_eof {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let _ = std::io::copy(&mut std::io::stdin().lock(), &mut std::io::sink());
            stop.store(true, Ordering::Relaxed);
        });
    }
    let (mut epoch, mut rows, mut sum, mut all_ok) = (0u64, 0u64, 0u64, true);
    let mut epoch_start = Instant::now();
    while Instant::now() < deadline && !stop.load(Ordering::Relaxed) {
        let Some(batch) = batches.next_batch().map_err(|e| e.to_string())? else {
            return Err("the endless pipeline ended".into());
        };
        for h in row_hashes(&batch)? {
            rows += 1;
            sum = sum.wrapping_add(h);
            if rows == n {
                let ok = sum == want;
                all_ok &= ok;
                println!(
                    r#"{{"epoch":{epoch},"records":{rows},"ok":{ok},"seconds":{:.1},"retries":{}}}"#,
                    epoch_start.elapsed().as_secs_f64(),
                    batches.stats().read.retries
                );
                epoch += 1;
                (rows, sum) = (0, 0);
                epoch_start = Instant::now();
            }
        }
    }
    println!(
        r#"{{"done":true,"epochs":{epoch},"records_in_open_epoch":{rows},"ok":{all_ok},"retries":{}}}"#,
        batches.stats().read.retries
    );
    Ok(all_ok)
}

fn main() {
    let mut pattern = None;
    let mut seconds = 60.0;
    let mut seed = 1;
    let mut until_eof = false;
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        match a.as_str() {
            "--seconds" => seconds = it.next().and_then(|v| v.parse().ok()).unwrap_or(-1.0),
            "--seed" => seed = it.next().and_then(|v| v.parse().ok()).unwrap_or(1),
            "--until-eof" => until_eof = true,
            p if !p.starts_with("--") => pattern = Some(p.to_owned()),
            _ => seconds = -1.0,
        }
    }
    let Some(pattern) = pattern.filter(|_| seconds >= 0.0) else {
        eprintln!("usage: soak_lm PATTERN [--seconds S] [--seed N] [--until-eof]");
        std::process::exit(2);
    };
    match run(&pattern, seconds, seed, until_eof) {
        Ok(true) => {}
        Ok(false) => std::process::exit(1),
        Err(e) => {
            println!(
                r#"{{"error":{}}}"#,
                serde_json::Value::String(e.to_string())
            );
            std::process::exit(1);
        }
    }
}
