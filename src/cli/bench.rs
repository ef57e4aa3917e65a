//! `infeed bench`: run a pipeline described by flags, print a readable
//! summary (bench_report.rs) or, with `--json`, one JSON line.

use std::ffi::OsString;
use std::io::Write;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use clap::{Args, CommandFactory};
use infeed::batch::{Batch, MaskType, Overflow, TensorType, Truncation};
use infeed::example::{Column, ParsedBatch, Values};
use infeed::pipeline::{
    Batches, EqualBatches, MixChoice, OnExhausted, Pipeline, PipelineStats, RawBatch, StageFigures,
};
use infeed::record::{CorruptPolicy, ReadOptions};
use infeed::spec::FeatureSpec;
use serde_json::{Value, json};
use xxhash_rust::xxh3::{Xxh3, xxh3_64};

use super::{CliError, CompressionArg, parse_compression};

#[cfg(feature = "xla")]
#[path = "bench_xla.rs"]
mod xla;

#[path = "bench_report.rs"]
mod report;

#[derive(Args)]
pub struct BenchArgs {
    /// Files to read: paths or globs (quoted, or comma-separated); or the
    /// `inputs` key of --config.
    inputs: Vec<String>,
    /// Read the pipeline from a TOML file whose keys are these flags' names
    /// (`pad-to-multiple-of = 64`, `bucket-by = "input_ids"`,
    /// `boundaries = [64, 128]`, `shuffle-files = true`, `inputs = [...]`);
    /// flags given on the command line override it.
    #[arg(long)]
    config: Option<PathBuf>,
    /// Features to parse, e.g. `input_ids:var_len:int32,label:fixed_len[1]:int64`;
    /// without it records are batched unparsed.
    #[arg(long)]
    spec: Option<FeatureSpec>,
    /// The one input is a prepared TFDS dataset directory; read this split
    /// of it (a TFDS split string: `train`, `train[:10%]`, `train[:50%]+test`).
    #[arg(long, value_name = "SPLIT")]
    tfds_split: Option<String>,
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
    /// Emit a feature (an image, or fixed-length numbers) as float32
    /// `(x - MEAN) / STD`, as NAME:MEAN:STD; MEAN and STD are one number or
    /// one per channel (the last dimension), comma-separated, e.g.
    /// `image:123.675,116.28,103.53:58.395,57.12,57.375` (repeatable).
    #[arg(long, value_parser = parse_normalize)]
    normalize: Vec<(String, Vec<f32>, Vec<f32>)>,
    /// Type of every `<name>_mask`: auto (the feature's type), u8 (or
    /// bool), i32, i64, f32, or none (no masks: lm's attention_mask is one).
    #[arg(long)]
    masks: Option<MaskType>,
    /// One feature's mask over --masks, e.g. input_ids:none (repeatable).
    #[arg(long, value_parser = parse_mask)]
    mask: Vec<(String, MaskType)>,
    /// Records per batch (with --pack: rows per batch).
    #[arg(long, default_value_t = 256)]
    batch: usize,
    /// Bucket records by the length of this variable-length feature; needs
    /// --boundaries, --bucket-batch-sizes and --max-length (the last
    /// bucket's length). --batch does not apply.
    #[arg(long, requires_all = ["boundaries", "bucket_batch_sizes"], conflicts_with = "pack")]
    bucket_by: Option<String>,
    /// Longest length of each bucket but the last, increasing, e.g. 64,128,256.
    #[arg(long, value_delimiter = ',', requires = "bucket_by")]
    boundaries: Vec<usize>,
    /// Rows per batch of each bucket: one more than --boundaries, e.g.
    /// 512,256,128,64.
    #[arg(long, value_delimiter = ',', requires = "bucket_by")]
    bucket_batch_sizes: Vec<usize>,
    /// Pack the variable-length features into rows of N values, with
    /// segment_ids and positions (--batch rows per batch).
    #[arg(long)]
    pack: Option<usize>,
    /// A record longer than a --pack row: error, keep-start, keep-end or split.
    #[arg(long, value_parser = parse_overflow, requires = "pack")]
    pack_overflow: Option<Overflow>,
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
    /// A source of a mixture, as NAME:WEIGHT:GLOB (repeat it; the inputs are
    /// then left out). Every source takes the record-level flags (read,
    /// shard, file shuffle, interleave, shuffle, epochs), seeded apart.
    #[arg(long, value_parser = parse_mix)]
    mix: Vec<(String, f64, String)>,
    /// How a mixture picks each record's source: random or stratified.
    #[arg(long, value_parser = parse_mix_by, default_value = "random")]
    mix_by: MixChoice,
    /// What a mixture does when a source runs out: stop, drop or fail.
    #[arg(long, value_parser = parse_on_exhausted, default_value = "stop")]
    on_exhausted: OnExhausted,
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
    /// Map local files into memory instead of reading them into buffers:
    /// faster, but a file truncated or rewritten in place while read stops
    /// the process with SIGBUS (`ReadOptions::mmap`).
    #[arg(long)]
    mmap: bool,
    /// Skip hashing the batches (`digest` is then null): hashing runs on the
    /// consumer thread and costs ~10% pinned to one core.
    #[arg(long, conflicts_with = "digests")]
    no_digest: bool,
    /// Also print the hash of every batch.
    #[arg(long)]
    digests: bool,
    /// Print the result as one JSON line (what scripts read).
    #[arg(long)]
    json: bool,
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

fn parse_overflow(s: &str) -> Result<Overflow, String> {
    match s {
        "error" => Ok(Overflow::Error),
        "keep-start" => Ok(Overflow::KeepStart),
        "keep-end" => Ok(Overflow::KeepEnd),
        "split" => Ok(Overflow::Split),
        _ => Err("expected error, keep-start, keep-end or split".into()),
    }
}

/// The arguments of `infeed bench` alone, to parse a command line again.
#[derive(clap::Parser)]
#[command(name = "bench")]
struct BenchOnly {
    #[command(flatten)]
    args: BenchArgs,
}

/// Expands `infeed bench … --config FILE …`: the file's keys become flags,
/// except those the command line gives itself, which override them (a list
/// flag given on the command line replaces the file's list; files on the
/// command line replace the file's `inputs`). Any other command line is
/// returned as it is.
pub fn expand_config(argv: Vec<OsString>) -> Result<Vec<OsString>, String> {
    if argv.get(1).and_then(|a| a.to_str()) != Some("bench") {
        return Ok(argv);
    }
    let rest = &argv[2..];
    let mut path = None;
    for (i, arg) in rest.iter().enumerate() {
        match arg.to_str() {
            Some("--config") => path = rest.get(i + 1).cloned(),
            Some(a) if a.starts_with("--config=") => path = Some(a["--config=".len()..].into()),
            Some("--") => break,
            _ => {}
        }
    }
    let Some(path) = path else {
        return Ok(argv);
    };
    let shown = PathBuf::from(&path).display().to_string();
    let text = std::fs::read_to_string(&path).map_err(|e| format!("{shown}: {e}"))?;
    let table: toml::Table = text.parse().map_err(|e| format!("{shown}: {e}"))?;
    // Whether the command line names inputs of its own (then the file's are
    // not used).
    let cli_inputs = BenchOnly::command()
        .ignore_errors(true)
        .try_get_matches_from(std::iter::once(OsString::from("bench")).chain(rest.iter().cloned()))
        .ok()
        .and_then(|m| m.get_many::<String>("inputs").map(|v| v.count() > 0))
        .unwrap_or(false);
    let command = BenchOnly::command();
    let mut tokens: Vec<OsString> = Vec::new();
    for (key, value) in &table {
        let flag = key.replace('_', "-");
        let bad = |what: &str| format!("{shown}: key {key:?}: {what}");
        if flag == "inputs" {
            if !cli_inputs {
                for v in scalars(value).map_err(|e| bad(&e))? {
                    tokens.push(v.into());
                }
            }
            continue;
        }
        let arg = command
            .get_arguments()
            .find(|a| a.get_long() == Some(flag.as_str()) && flag != "config")
            .ok_or_else(|| {
                bad("not a bench flag (keys are the flags' names, e.g. pad-to-multiple-of)")
            })?;
        let on_command_line = rest.iter().any(|a| {
            a.to_str().is_some_and(|a| {
                a.strip_prefix("--")
                    .and_then(|a| a.strip_prefix(flag.as_str()))
                    .is_some_and(|tail| tail.is_empty() || tail.starts_with('='))
            })
        });
        if on_command_line {
            continue;
        }
        let switch = matches!(arg.get_action(), clap::ArgAction::SetTrue);
        let repeated = matches!(arg.get_action(), clap::ArgAction::Append)
            && arg.get_value_delimiter().is_none();
        match value {
            toml::Value::Boolean(on) if switch => {
                if *on {
                    tokens.push(format!("--{flag}").into());
                }
            }
            _ if switch => return Err(bad("expected true or false")),
            toml::Value::Array(_) if repeated => {
                for v in scalars(value).map_err(|e| bad(&e))? {
                    tokens.push(format!("--{flag}").into());
                    tokens.push(v.into());
                }
            }
            _ => {
                tokens.push(format!("--{flag}").into());
                tokens.push(scalars(value).map_err(|e| bad(&e))?.join(",").into());
            }
        }
    }
    let mut out: Vec<OsString> = argv[..2].to_vec();
    out.extend(tokens);
    out.extend(rest.iter().cloned());
    Ok(out)
}

/// A TOML value as flag values: a scalar, or an array of scalars.
fn scalars(value: &toml::Value) -> Result<Vec<String>, String> {
    let one = |v: &toml::Value| match v {
        toml::Value::String(s) => Ok(s.clone()),
        toml::Value::Integer(i) => Ok(i.to_string()),
        toml::Value::Float(f) => Ok(f.to_string()),
        toml::Value::Boolean(b) => Ok(b.to_string()),
        _ => Err("expected a string, number or boolean, or an array of them".to_string()),
    };
    match value {
        toml::Value::Array(items) => items.iter().map(one).collect(),
        v => one(v).map(|s| vec![s]),
    }
}

fn parse_tensor_type(s: &str) -> Result<TensorType, String> {
    match s {
        "int32" => Ok(TensorType::I32),
        "int64" => Ok(TensorType::I64),
        _ => Err("expected int32 or int64".into()),
    }
}

fn parse_mask(s: &str) -> Result<(String, MaskType), String> {
    let (name, kind) = s
        .split_once(':')
        .ok_or("expected FEATURE:TYPE, e.g. input_ids:none")?;
    Ok((name.to_owned(), kind.parse()?))
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

fn parse_normalize(s: &str) -> Result<(String, Vec<f32>, Vec<f32>), String> {
    // From the right, so a feature's name may hold a colon.
    let mut parts = s.rsplitn(3, ':');
    let (Some(std), Some(mean), Some(name)) = (parts.next(), parts.next(), parts.next()) else {
        return Err("expected NAME:MEAN:STD, e.g. image:127.5:127.5 or \
             image:123.675,116.28,103.53:58.395,57.12,57.375"
            .into());
    };
    let numbers = |list: &str| {
        list.split(',')
            .map(|v| {
                v.trim()
                    .parse::<f32>()
                    .map_err(|_| format!("{v:?} is not a number"))
            })
            .collect::<Result<Vec<_>, _>>()
    };
    if name.is_empty() {
        return Err("expected NAME:MEAN:STD: the feature's name is empty".into());
    }
    Ok((name.to_owned(), numbers(mean)?, numbers(std)?))
}

fn parse_mix(s: &str) -> Result<(String, f64, String), String> {
    let mut parts = s.splitn(3, ':');
    let (Some(name), Some(weight), Some(glob)) = (parts.next(), parts.next(), parts.next()) else {
        return Err("expected NAME:WEIGHT:GLOB, e.g. web:3:data/web-*".into());
    };
    let weight: f64 = weight
        .parse()
        .map_err(|_| format!("weight {weight:?} is not a number"))?;
    Ok((name.to_owned(), weight, glob.to_owned()))
}

fn parse_mix_by(s: &str) -> Result<MixChoice, String> {
    match s {
        "random" => Ok(MixChoice::Random),
        "stratified" => Ok(MixChoice::Stratified),
        _ => Err("expected random or stratified".into()),
    }
}

fn parse_on_exhausted(s: &str) -> Result<OnExhausted, String> {
    match s {
        "stop" => Ok(OnExhausted::Stop),
        "drop" => Ok(OnExhausted::Drop),
        "fail" => Ok(OnExhausted::Fail),
        _ => Err("expected stop, drop or fail".into()),
    }
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
    /// `name → dims` of what the batch holds (`null` for a ragged dimension),
    /// so a comparison can check that two pipelines emit the same shapes.
    fn shape(&self) -> Value;
    /// Bytes of the output tensors as emitted (what a floor must count as written).
    fn output_bytes(&self) -> Option<u64> {
        None
    }
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
    fn shape(&self) -> Value {
        json!({ "records": [self.records.len()] })
    }
}

impl Measured for Batch {
    fn records(&self) -> usize {
        // A packed batch holds several sequences per row: count them (a
        // record split across rows counts once per piece).
        match self
            .get(infeed::batch::SEGMENT_IDS)
            .and_then(|t| Some((t.values::<i32>()?, *t.shape().get(1)?)))
        {
            Some((ids, width)) if width > 0 => ids
                .chunks(width)
                .map(|row| row.iter().copied().max().unwrap_or(0).max(0) as usize)
                .sum(),
            _ => self.real_rows,
        }
    }
    fn hash_into(&self, h: &mut Xxh3) {
        h.update(&self.digest().to_le_bytes());
    }
    fn output_bytes(&self) -> Option<u64> {
        Some(self.num_bytes() as u64)
    }
    fn shape(&self) -> Value {
        self.tensors
            .iter()
            .map(|(name, t)| (name.clone(), json!(t.shape())))
            .collect::<serde_json::Map<_, _>>()
            .into()
    }
}

impl Measured for ParsedBatch {
    fn records(&self) -> usize {
        self.num_records
    }
    fn output_bytes(&self) -> Option<u64> {
        let bytes = |values: &Values| match values {
            Values::Int64(v) => std::mem::size_of_val(v.as_slice()),
            Values::Int32(v) => std::mem::size_of_val(v.as_slice()),
            Values::Float32(v) => std::mem::size_of_val(v.as_slice()),
            Values::Bytes(b) => b.data.len() + std::mem::size_of_val(b.offsets.as_slice()),
        };
        let total: usize = self
            .columns
            .iter()
            .map(|(_, column)| match column {
                Column::Dense { values, .. } => bytes(values),
                Column::Ragged {
                    values, row_splits, ..
                } => bytes(values) + std::mem::size_of_val(row_splits.as_slice()),
                Column::Ragged2 {
                    values,
                    outer_splits,
                    inner_splits,
                } => {
                    bytes(values)
                        + std::mem::size_of_val(outer_splits.as_slice())
                        + std::mem::size_of_val(inner_splits.as_slice())
                }
            })
            .sum();
        Some(total as u64)
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
    fn shape(&self) -> Value {
        let rows = self.num_records;
        self.columns
            .iter()
            .map(|(name, column)| {
                let dims = match column {
                    Column::Dense { shape, .. } => json!(shape),
                    Column::Ragged { inner_shape, .. } => {
                        let mut dims = vec![json!(rows), Value::Null];
                        dims.extend(inner_shape.iter().map(|d| json!(d)));
                        json!(dims)
                    }
                    Column::Ragged2 { .. } => json!([rows, null, null]),
                };
                (name.clone(), dims)
            })
            .collect::<serde_json::Map<_, _>>()
            .into()
    }
}

/// The record-level flags on `p` (each source of a mixture, or the one
/// pipeline), seeded with `seed`.
fn record_level(p: Pipeline, args: &BenchArgs, read: &ReadOptions, seed: u64) -> Pipeline {
    let mut p = p
        .read_options(read.clone())
        .seed(seed)
        .interleave(args.interleave, args.block);
    if let Some((index, count)) = args.shard {
        p = p.shard(index, count);
    }
    if args.shuffle_files {
        p = p.shuffle_files();
    }
    p.shuffle(args.shuffle).repeat(if args.epochs == 0 {
        None
    } else {
        Some(args.epochs)
    })
}

pub fn run(args: &BenchArgs, out: &mut impl Write) -> Result<i32, CliError> {
    let read = ReadOptions {
        compression: args.compression.0,
        on_corrupt: if args.skip_corrupt {
            CorruptPolicy::Skip
        } else {
            CorruptPolicy::Fail
        },
        mmap: args.mmap,
        ..ReadOptions::default()
    };
    let mut p = if args.mix.is_empty() {
        if args.inputs.is_empty() {
            return Err(CliError::Message(
                "give the files to read (or an `inputs` key in --config)".into(),
            ));
        }
        let p = match &args.tfds_split {
            None => Pipeline::from_glob(&args.inputs.join(","))?,
            Some(split) => {
                let [dir] = &args.inputs[..] else {
                    return Err(CliError::Message(
                        "--tfds-split reads one TFDS dataset directory: give exactly one".into(),
                    ));
                };
                Pipeline::from_tfds(dir, split)?
            }
        };
        record_level(p, args, &read, args.seed)
    } else {
        if !args.inputs.is_empty() {
            return Err(CliError::Message(
                "with --mix the sources name their files: leave the inputs out".into(),
            ));
        }
        let mut sources = Vec::new();
        let mut weights = Vec::new();
        for (i, (name, weight, glob)) in args.mix.iter().enumerate() {
            let source = record_level(
                Pipeline::from_glob(glob)?,
                args,
                &read,
                args.seed + i as u64,
            );
            sources.push((name.clone(), source));
            weights.push(*weight);
        }
        Pipeline::mix(sources, &weights)?
            .seed(args.seed)
            .mix_by(args.mix_by)
            .on_exhausted(args.on_exhausted)
    };
    p = p.prefetch(args.prefetch);
    if let Some(how) = args.equal_batches {
        p = p.equal_batches(how);
    }
    if args.unordered {
        p = p.unordered();
    }
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
        None if args.bucket_by.is_some() || args.pack.is_some() => {
            return Err(CliError::Message(
                "--bucket-by and --pack need --spec (they parse the records)".into(),
            ));
        }
        None => measure(p.build_raw(args.batch, args.drop_remainder)?, args)?,
        Some(spec) => {
            let mut parsed = p.parse(spec.clone());
            parsed = match (&args.bucket_by, args.pack) {
                (Some(feature), _) => parsed
                    .bucket_by_length(feature, &args.boundaries, &args.bucket_batch_sizes)
                    .drop_remainder(args.drop_remainder),
                (None, Some(row_length)) => parsed
                    .pack(row_length)
                    .pack_overflow(args.pack_overflow.unwrap_or_default())
                    .batch(args.batch, args.drop_remainder),
                (None, None) => parsed.batch(args.batch, args.drop_remainder),
            };
            // Every feature fixed-length and the remainder dropped: the
            // batches are static as they are, so they come as the tensors a
            // training step takes (as the Python package yields them), not
            // as parsed columns.
            let fixed = spec.features().iter().all(|f| f.fixed_count().is_some());
            let static_shapes = (fixed && args.drop_remainder)
                || args.bucket_by.is_some()
                || args.pack.is_some()
                || args.pad_to_multiple_of.is_some()
                || args.max_length.is_some()
                || args.fixed_length.is_some()
                || args.cast.is_some()
                || !args.decode_raw.is_empty()
                || !args.normalize.is_empty();
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
            if let Some(m) = args.masks {
                parsed = parsed.masks(m);
            }
            for (name, m) in &args.mask {
                parsed = parsed.mask(name, *m);
            }
            for (name, mean, std) in &args.normalize {
                parsed = parsed.normalize(name, mean, std);
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
    if args.json {
        serde_json::to_writer(&mut *out, &report).map_err(std::io::Error::from)?;
        out.write_all(b"\n")?;
    } else {
        out.write_all(report::summary(&report).as_bytes())?;
    }
    Ok(0)
}

fn measure<T: Measured + Send + 'static>(
    mut batches: Batches<T>,
    args: &BenchArgs,
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
    let mut finished = false;
    let mut progress = report::Progress::new(!args.json);
    let mut output_bytes = Some(0u64);
    while args.batches.is_none_or(|n| count < n) && limit.is_none_or(|l| started.elapsed() < l) {
        let Some(batch) = batches.next_batch()? else {
            finished = true;
            break;
        };
        shapes.insert(batch.shape().to_string());
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
        // The pipeline's default: one worker per core this process may use.
        "workers": args.threads.unwrap_or_else(|| {
            std::thread::available_parallelism().map_or(2, std::num::NonZero::get)
        }).max(1),
        // Exact only for a whole run from the start.
        "records_per_epoch": (finished && args.epochs > 0 && args.state_in.is_none())
            .then(|| stats.read.records / args.epochs),
        "output_bytes": output_bytes,
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
