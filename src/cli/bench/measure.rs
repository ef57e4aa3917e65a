//! The timed run: pull batches, count and hash them, and report the figures
//! as one JSON value (rendered by `report.rs` unless `--json`).

use std::ffi::OsString;
use std::io::Write;
use std::time::{Duration, Instant};

use infeed::pipeline::{Batches, PipelineStats, RecordAccount, StageFigures};
use serde_json::{Value, json};
use xxhash_rust::xxh3::Xxh3;

use super::measured::Measured;
use super::{BenchArgs, report};
use crate::cli::CliError;

pub(super) fn measure<T: Measured + Send + 'static>(
    mut batches: Batches<T>,
    args: &BenchArgs,
    epochs: Option<u64>,
) -> Result<Value, CliError> {
    let started = Instant::now();
    // CPU time counts from here, as the wall time does: not what the
    // process spent before (building the pipeline, or a parent that exec'd
    // it, as `cargo run` does).
    let cpu_at_start = cpu_ticks();
    let limit = args.seconds.map(Duration::from_secs_f64);
    let (mut records, mut count) = (0u64, 0u64);
    let mut all = Xxh3::new();
    let mut digests = Vec::new();
    let mut shapes = std::collections::BTreeSet::new();
    let mut shape_keys = std::collections::HashSet::new();
    let mut finished = false;
    let mut progress = report::Progress::new(!args.json);
    let mut output_bytes = Some(0u64);
    while args.batches.is_none_or(|n| count < n) && limit.is_none_or(|l| started.elapsed() < l) {
        let Some(batch) = batches.next_batch()? else {
            finished = true;
            break;
        };
        // Formatting a shape per batch cost the consumer ~1% of lm's
        // time pinned: once per distinct shape.
        match batch.shape_key() {
            Some(key) if !shape_keys.insert(key) => {}
            _ => {
                shapes.insert(batch.shape().to_string());
            }
        }
        if !args.no_digest {
            let mut h = Xxh3::new();
            batch.hash_into(&mut h);
            let digest = h.digest();
            all.update(&digest.to_le_bytes());
            if args.digests {
                digests.push(format!("{digest:016x}"));
            }
        }
        records += batch.records() as u64;
        output_bytes = output_bytes.zip(batch.output_bytes()).map(|(a, b)| a + b);
        count += 1;
        progress.tick(records, count);
        batches.recycle(batch);
    }
    progress.finish();
    let seconds = started.elapsed().as_secs_f64();
    let cpu_seconds = cpu_ticks()
        .zip(cpu_at_start)
        .map(|(end, start)| end.saturating_sub(start) as f64 / 100.0);
    let stats = batches.stats();
    if let Some(path) = &args.state_out {
        write_atomically(path, &batches.state())?;
    }
    let bytes = stats.batch.bytes;
    let mut report = json!({
        "records": records,
        "batches": count,
        "seconds": seconds,
        "records_per_sec": records as f64 / seconds,
        "bytes_per_sec": bytes as f64 / seconds,
        "first_batch_ms": stats.first_batch_ns.map(|ns| ns as f64 / 1e6),
        "peak_rss_bytes": peak_rss_bytes(),
        "stages": stages_json(&stats),
        "digest": (!args.no_digest).then(|| format!("{:016x}", all.digest())),
        "cpu_seconds": cpu_seconds,
        "workers": stats.workers,
        // Exact only for a whole run from the start.
        "records_per_epoch": epochs
            .filter(|&e| finished && e > 0 && args.state_in.is_none())
            .map(|e| stats.read.records / e),
        "output_bytes": output_bytes,
        "record_account": account_json(&stats.records),
        "shapes": shapes
            .iter()
            .filter_map(|s| serde_json::from_str::<Value>(s).ok())
            .collect::<Vec<_>>(),
    });
    if args.digests {
        report["digests"] = json!(digests);
    }
    let sources = batches.source_counts();
    if !sources.is_empty() {
        report["sources"] = json!(
            sources
                .iter()
                .map(|(name, n)| json!({"name": name, "records": n}))
                .collect::<Vec<_>>()
        );
    }
    Ok(report)
}

/// What became of the records this host took in (docs/many-hosts.md,
/// "Counting records").
fn account_json(a: &RecordAccount) -> Value {
    let l = &a.left_out;
    json!({
        "read": a.read,
        "delivered": a.delivered,
        "left_out": {
            "dropped": l.dropped,
            "sliced": l.sliced,
            "skipped_steps": l.skipped_steps,
            "filtered": l.filtered,
            "corrupt": l.corrupt,
            "empty": l.empty,
            "mixture_end": l.mixture_end,
        },
        "balanced": a.balanced(),
    })
}

fn stage_json(f: &StageFigures) -> Value {
    json!({
        "records": f.records,
        "bytes": f.bytes,
        "busy_ms": f.busy_ns as f64 / 1e6,
        "wait_ms": f.wait_ns as f64 / 1e6,
        "skipped_records": f.skipped_records,
        "skipped_bytes": f.skipped_bytes,
        "buffer_bytes": f.buffer_bytes,
        "buffer_payload_bytes": f.buffer_payload_bytes,
        "buffer_mapped_bytes": f.buffer_mapped_bytes,
        "retries": f.retries,
    })
}

fn stages_json(s: &PipelineStats) -> Value {
    json!({
        "read": stage_json(&s.read),
        "records": stage_json(&s.record_thread),
        "batch": stage_json(&s.batch),
        "consumer_wait_ms": s.consumer_wait_ns as f64 / 1e6,
    })
}

/// The process's peak resident memory (VmHWM), where Linux tells it.
fn peak_rss_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

/// User + system CPU time of the whole process so far (all threads, and
/// before an exec), in USER_HZ ticks (100 per second on every Linux ABI),
/// where Linux tells it (`/proc/self/stat`): exact to 10 ms.
fn cpu_ticks() -> Option<u64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // Fields after the command name (which may hold spaces) start at field 3.
    let rest = stat.get(stat.rfind(')')? + 1..)?;
    let mut fields = rest.split_whitespace().skip(11);
    let user: u64 = fields.next()?.parse().ok()?;
    let system: u64 = fields.next()?.parse().ok()?;
    Some(user + system)
}

/// Writes `bytes` to `path` through a temporary file in the same directory,
/// renamed over `path` once complete and synced: a crash or a full disk
/// leaves the old state whole, never a cut one.
fn write_atomically(path: &std::path::Path, bytes: &[u8]) -> Result<(), CliError> {
    let fail = |e: std::io::Error| CliError::Message(format!("{}: {e}", path.display()));
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => std::path::Path::new("."),
    };
    let name = path
        .file_name()
        .map_or_else(|| OsString::from("state"), std::ffi::OsStr::to_os_string);
    let mut tmp_name = OsString::from(".");
    tmp_name.push(&name);
    tmp_name.push(format!(".tmp-{}", std::process::id()));
    let tmp = dir.join(tmp_name);
    let written = (|| {
        let mut file = std::fs::File::create(&tmp)?;
        file.write_all(bytes)?;
        file.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        return Err(fail(e));
    }
    Ok(())
}
