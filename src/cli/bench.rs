//! `infeed bench`: run a pipeline described by flags, print one JSON line.

use std::io::Write;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use clap::Args;
use infeed::batch::{Batch, TensorType, Truncation};
use infeed::example::{Column, ParsedBatch, Values};
use infeed::pipeline::{Batches, EqualBatches, Pipeline, PipelineStats, RawBatch, StageFigures};
use infeed::record::{CorruptPolicy, ReadOptions};
use infeed::spec::FeatureSpec;
use serde_json::{Value, json};
use xxhash_rust::xxh3::{Xxh3, xxh3_64};

use super::{CliError, CompressionArg, parse_compression};

#[cfg(feature = "xla")]
#[path = "bench_xla.rs"]
mod xla;

#[derive(Args)]
pub struct BenchArgs {
    /// Files to read: paths or globs (quoted, or comma-separated).
    #[arg(required = true)]
    inputs: Vec<String>,
    /// Features to parse, e.g. `input_ids:var_len:int32,label:fixed_len[1]:int64`;
    /// without it records are batched unparsed.
    #[arg(long)]
    spec: Option<FeatureSpec>,
    /// Pad variable-length features to a multiple of N (static shapes).
    #[arg(long)]
    pad_to_multiple_of: Option<usize>,
    /// Cap padded lengths at N.
    #[arg(long)]
    max_length: Option<usize>,
    /// Pad or cut variable-length features to exactly N.
    #[arg(long)]
    fixed_length: Option<usize>,
    /// What to do with a row over the cap: error, keep-start or keep-end.
    #[arg(long, value_parser = parse_truncation)]
    truncation: Option<Truncation>,
    /// Cast integer features to this type: int32 or int64.
    #[arg(long, value_parser = parse_tensor_type)]
    cast: Option<TensorType>,
    /// Decode a fixed-length bytes feature as raw u8, e.g. image:32x32x3.
    #[arg(long, value_parser = parse_decode)]
    decode_raw: Vec<(String, Vec<usize>)>,
    /// Records per batch.
    #[arg(long, default_value_t = 256)]
    batch: usize,
    /// Drop a last batch smaller than --batch.
    #[arg(long)]
    drop_remainder: bool,
    /// Shuffle buffer size in records (0: no shuffle).
    #[arg(long, default_value_t = 0)]
    shuffle: usize,
    /// Shuffle the file order each epoch.
    #[arg(long)]
    shuffle_files: bool,
    /// Files read at once (interleave cycle length).
    #[arg(long, default_value_t = 1)]
    interleave: usize,
    /// Records taken from a file before moving to the next.
    #[arg(long, default_value_t = 1)]
    block: usize,
    /// Epochs to read; 0 means forever (stop with --batches or --seconds).
    #[arg(long, default_value_t = 1)]
    epochs: u64,
    /// This host's part, as INDEX/COUNT.
    #[arg(long, value_parser = parse_shard)]
    shard: Option<(u64, u64)>,
    /// Make every host emit the same number of batches: drop or pad.
    #[arg(long, value_parser = parse_equal)]
    equal_batches: Option<EqualBatches>,
    /// Seed of every random choice.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Worker threads (default: one per core).
    #[arg(long)]
    threads: Option<usize>,
    /// Deliver batches as workers finish them (the order then varies).
    #[arg(long)]
    unordered: bool,
    /// Batches prepared ahead.
    #[arg(long, default_value_t = 2)]
    prefetch: usize,
    /// Stop after this many batches.
    #[arg(long)]
    batches: Option<u64>,
    /// Stop after this many seconds.
    #[arg(long)]
    seconds: Option<f64>,
    /// Compression of the files: none, gzip, zlib or auto.
    #[arg(long, default_value = "auto", value_parser = parse_compression)]
    compression: CompressionArg,
    /// Skip corrupt records (counted) instead of failing.
    #[arg(long)]
    skip_corrupt: bool,
    /// Skip hashing the batches (`digest` is then null): hashing runs on the
    /// consumer thread and costs ~10% pinned to one core.
    #[arg(long, conflicts_with = "digests")]
    no_digest: bool,
    /// Also print the hash of every batch.
    #[arg(long)]
    digests: bool,
    /// Write the iterator state after the last batch to this file.
    #[arg(long)]
    state_out: Option<PathBuf>,
    /// Start from an iterator state written by --state-out.
    #[arg(long)]
    state_in: Option<PathBuf>,
    /// Feed the batches to this StableHLO step (MLIR text; `$B`, `$L` become
    /// each shape's batch size and length) on the PJRT plugin of
    /// PJRT_PLUGIN_PATH or .pjrt/, and report steps/s, steps/s with one
    /// batch reused and the input-wait fraction. `--batches` is the step count.
    #[cfg(feature = "xla")]
    #[arg(long, requires = "spec")]
    program: Option<PathBuf>,
    /// With --program: the batch tensors it takes, in order (default all).
    #[cfg(feature = "xla")]
    #[arg(long, value_delimiter = ',', requires = "program")]
    program_inputs: Option<Vec<String>>,
}

fn parse_truncation(s: &str) -> Result<Truncation, String> {
    match s {
        "error" => Ok(Truncation::Error),
        "keep-start" => Ok(Truncation::KeepStart),
        "keep-end" => Ok(Truncation::KeepEnd),
        _ => Err("expected error, keep-start or keep-end".into()),
    }
}

fn parse_tensor_type(s: &str) -> Result<TensorType, String> {
    match s {
        "int32" => Ok(TensorType::I32),
        "int64" => Ok(TensorType::I64),
        _ => Err("expected int32 or int64".into()),
    }
}

fn parse_decode(s: &str) -> Result<(String, Vec<usize>), String> {
    let (name, dims) = s
        .split_once(':')
        .ok_or("expected NAME:D1xD2x…, e.g. image:32x32x3")?;
    let shape = dims
        .split('x')
        .map(|d| {
            d.parse::<usize>()
                .map_err(|_| format!("{d:?} is not a whole number"))
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok((name.to_owned(), shape))
}

fn parse_equal(s: &str) -> Result<EqualBatches, String> {
    match s {
        "drop" => Ok(EqualBatches::Drop),
        "pad" => Ok(EqualBatches::Pad),
        _ => Err("expected drop or pad".into()),
    }
}

fn parse_shard(s: &str) -> Result<(u64, u64), String> {
    let (i, n) = s.split_once('/').ok_or("expected INDEX/COUNT, e.g. 0/4")?;
    let parse = |x: &str| {
        x.trim()
            .parse::<u64>()
            .map_err(|_| format!("{x:?} is not a whole number"))
    };
    Ok((parse(i)?, parse(n)?))
}

/// Something a bench can hash and count.
trait Measured {
    fn records(&self) -> usize;
    fn hash_into(&self, h: &mut Xxh3);
}

impl Measured for RawBatch {
    fn records(&self) -> usize {
        self.records.len()
    }
    fn hash_into(&self, h: &mut Xxh3) {
        for r in &self.records {
            h.update(&(r.len() as u64).to_le_bytes());
            h.update(r);
        }
    }
}

impl Measured for Batch {
    fn records(&self) -> usize {
        self.real_rows
    }
    fn hash_into(&self, h: &mut Xxh3) {
        h.update(&self.digest().to_le_bytes());
    }
}

impl Measured for ParsedBatch {
    fn records(&self) -> usize {
        self.num_records
    }
    fn hash_into(&self, h: &mut Xxh3) {
        // One-shot hashes of whole buffers, chained: xxh3's streaming update
        // copies its input through a small buffer and is several times slower.
        let mut update = |bytes: &[u8]| h.update(&xxh3_64(bytes).to_le_bytes());
        for (name, column) in &self.columns {
            update(name.as_bytes());
            let (values, splits): (&Values, Vec<&[usize]>) = match column {
                Column::Dense { values, .. } => (values, vec![]),
                Column::Ragged {
                    values, row_splits, ..
                } => (values, vec![row_splits]),
                Column::Ragged2 {
                    values,
                    outer_splits,
                    inner_splits,
                } => (values, vec![outer_splits, inner_splits]),
            };
            // Whole slices at once, in memory order (little-endian on every
            // platform we build for).
            for s in splits {
                update(bytemuck::cast_slice(s));
            }
            match values {
                Values::Int64(v) => update(bytemuck::cast_slice(v)),
                Values::Int32(v) => update(bytemuck::cast_slice(v)),
                Values::Float32(v) => update(bytemuck::cast_slice(v)),
                Values::Bytes(b) => {
                    update(bytemuck::cast_slice(&b.offsets));
                    update(&b.data);
                }
            }
        }
    }
}

pub fn run(args: &BenchArgs, out: &mut impl Write) -> Result<i32, CliError> {
    let read = ReadOptions {
        compression: args.compression.0,
        on_corrupt: if args.skip_corrupt {
            CorruptPolicy::Skip
        } else {
            CorruptPolicy::Fail
        },
        ..ReadOptions::default()
    };
    let mut p = Pipeline::from_glob(&args.inputs.join(","))?
        .read_options(read)
        .seed(args.seed)
        .interleave(args.interleave, args.block)
        .prefetch(args.prefetch);
    if let Some((index, count)) = args.shard {
        p = p.shard(index, count);
    }
    if args.shuffle_files {
        p = p.shuffle_files();
    }
    if let Some(how) = args.equal_batches {
        p = p.equal_batches(how);
    }
    if args.unordered {
        p = p.unordered();
    }
    p = p.shuffle(args.shuffle).repeat(if args.epochs == 0 {
        None
    } else {
        Some(args.epochs)
    });
    if let Some(threads) = args.threads {
        p = p.threads(threads);
    }
    if let Some(path) = &args.state_in {
        p = p.resume_from(
            &std::fs::read(path)
                .map_err(|e| CliError::Message(format!("{}: {e}", path.display())))?,
        );
    }
    if args.epochs == 0 && args.batches.is_none() && args.seconds.is_none() {
        return Err(CliError::Message(
            "--epochs 0 reads forever: give --batches or --seconds".into(),
        ));
    }
    let report = match &args.spec {
        None => measure(p.build_raw(args.batch, args.drop_remainder)?, args)?,
        Some(spec) => {
            let mut parsed = p.parse(spec.clone()).batch(args.batch, args.drop_remainder);
            let static_shapes = args.pad_to_multiple_of.is_some()
                || args.max_length.is_some()
                || args.fixed_length.is_some()
                || args.cast.is_some()
                || !args.decode_raw.is_empty();
            if let Some(n) = args.pad_to_multiple_of {
                parsed = parsed.pad_to_multiple_of(n);
            }
            if let Some(n) = args.max_length {
                parsed = parsed.max_length(n);
            }
            if let Some(n) = args.fixed_length {
                parsed = parsed.fixed_length(n);
            }
            if let Some(t) = args.truncation {
                parsed = parsed.truncation(t);
            }
            if let Some(t) = args.cast {
                parsed = parsed.cast(t);
            }
            for (name, shape) in &args.decode_raw {
                parsed = parsed.decode_raw(name, shape);
            }
            #[cfg(feature = "xla")]
            if let Some(program) = &args.program {
                let inputs = args.program_inputs.as_deref();
                return xla::run(parsed, program, inputs, args.batches, out);
            }
            if static_shapes {
                measure(parsed.build()?, args)?
            } else {
                measure(parsed.build_columns()?, args)?
            }
        }
    };
    serde_json::to_writer(&mut *out, &report).map_err(std::io::Error::from)?;
    out.write_all(b"\n")?;
    Ok(0)
}

fn measure<T: Measured + Send + 'static>(
    mut batches: Batches<T>,
    args: &BenchArgs,
) -> Result<Value, CliError> {
    let started = Instant::now();
    let limit = args.seconds.map(Duration::from_secs_f64);
    let (mut records, mut count) = (0u64, 0u64);
    let mut all = Xxh3::new();
    let mut digests = Vec::new();
    while args.batches.is_none_or(|n| count < n) && limit.is_none_or(|l| started.elapsed() < l) {
        let Some(batch) = batches.next_batch()? else {
            break;
        };
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
        count += 1;
    }
    let seconds = started.elapsed().as_secs_f64();
    let stats = batches.stats();
    if let Some(path) = &args.state_out {
        std::fs::write(path, batches.state())
            .map_err(|e| CliError::Message(format!("{}: {e}", path.display())))?;
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
    });
    if args.digests {
        report["digests"] = json!(digests);
    }
    Ok(report)
}

fn stage_json(f: &StageFigures) -> Value {
    json!({
        "records": f.records,
        "bytes": f.bytes,
        "busy_ms": f.busy_ns as f64 / 1e6,
        "wait_ms": f.wait_ns as f64 / 1e6,
        "skipped_records": f.skipped_records,
        "skipped_bytes": f.skipped_bytes,
    })
}

fn stages_json(s: &PipelineStats) -> Value {
    json!({
        "read": stage_json(&s.read),
        "shuffle": stage_json(&s.shuffle),
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
