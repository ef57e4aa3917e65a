//! `infeed convert`: JSONL, CSV, Parquet or text to TFRecord shards.

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use infeed::convert::{
    self, ConvertOptions, FeatureArg, Format, Naming, Progress, ProgressSnapshot, ShardLimit,
    TokenMode, TokenizeOptions,
};
use infeed::record::Compression;

use super::CliError;

#[derive(Args)]
pub struct ConvertArgs {
    /// Input files or glob patterns: .jsonl .csv .tsv .parquet .txt, each
    /// optionally compressed (.gz or .zst, detected from the first bytes).
    #[arg(required = true)]
    inputs: Vec<String>,
    /// Output folder (created if missing), or a bucket prefix: gs://, s3://, az://.
    #[arg(long, short)]
    output: String,
    /// Input format, instead of detecting it from each file name: jsonl, csv, tsv, parquet or text.
    #[arg(long)]
    format: Option<String>,
    /// Plain text: `lines` (one record per line) or `file` (one record per file).
    #[arg(long, default_value = "lines", value_parser = ["lines", "file"])]
    text_mode: String,
    /// The column holding text: the feature name for plain-text input, and
    /// the column the tokenizer reads.
    #[arg(long, default_value = "text")]
    text_column: String,
    /// A column's type instead of the inferred one: NAME:int64, NAME:float,
    /// NAME:bytes, a list NAME:int64[] or a fixed-length list NAME:float[3].
    /// Repeatable.
    #[arg(long = "feature", value_name = "NAME:TYPE")]
    features: Vec<FeatureArg>,
    /// Columns to keep, in order, with renames: `a,b=new_b`. Default: all.
    #[arg(long)]
    columns: Option<String>,
    /// Records read from the start of the input to infer the schema.
    #[arg(long, default_value_t = convert::DEFAULT_INFER_RECORDS)]
    infer_records: usize,
    /// Null or missing values: `error`, or `omit` the feature from that record.
    #[arg(long, default_value = "error", value_parser = ["error", "omit"])]
    nulls: String,
    /// Skip bad records (counted and listed at the end) instead of stopping at the first.
    #[arg(long)]
    skip_bad: bool,
    /// A Hugging Face tokenizer.json: tokenize the text column into input_ids and attention_mask.
    #[arg(long)]
    tokenizer: Option<PathBuf>,
    /// Truncate each record's tokens to at most LEN (special tokens kept).
    #[arg(
        long,
        value_name = "LEN",
        requires = "tokenizer",
        conflicts_with = "group_to"
    )]
    max_length: Option<usize>,
    /// Concatenate the tokens of each block of records and cut records of
    /// exactly LEN tokens, dropping each block's remainder (as Hugging Face's
    /// prepare_tfrecord_shards.py does).
    #[arg(long, value_name = "LEN", requires = "tokenizer")]
    group_to: Option<usize>,
    /// Input records per --group-to block.
    #[arg(long, default_value_t = convert::DEFAULT_GROUP_BLOCK)]
    group_block: u64,
    /// Do not add the tokenizer's special tokens.
    #[arg(long)]
    no_special_tokens: bool,
    /// Target shard size (framed, before compression): 100MB, 64MiB, 1GB, 500000.
    #[arg(long, default_value = "100MB", value_parser = parse_size)]
    shard_size: u64,
    /// Records per shard, instead of a size.
    #[arg(long, conflicts_with = "shard_size")]
    records_per_shard: Option<u64>,
    /// Output compression: none, gzip or zlib.
    #[arg(long, default_value = "none", value_parser = ["none", "gzip", "zlib"])]
    compression: String,
    /// Shard names: `tf` (train-00000-of-00016.tfrecord) or `hf` (dataset-3-5000.tfrecord:
    /// shard index and record count).
    #[arg(long, default_value = "tf", value_parser = ["tf", "hf"])]
    naming: String,
    /// Shard name prefix (default `train` for tf naming, `dataset` for hf).
    #[arg(long)]
    prefix: Option<String>,
    /// This task's index (0-based) when N tasks convert disjoint parts.
    #[arg(long, default_value_t = 0)]
    task_index: usize,
    /// Number of tasks.
    #[arg(long, default_value_t = 1)]
    num_tasks: usize,
    /// Write a TensorFlow Datasets directory: OUTPUT becomes the dataset's
    /// directory (dataset_info.json, features.json, shards named
    /// NAME-SPLIT.tfrecord-00000-of-00004), which tfds.builder_from_directory
    /// and Pipeline::from_tfds open. NAME is snake_case, VERSION MAJOR.MINOR.PATCH.
    #[arg(long, value_name = "NAME:VERSION", conflicts_with_all = ["naming", "prefix"])]
    tfds: Option<String>,
    /// The split --tfds writes (another run into the same directory adds another split).
    #[arg(long, default_value = "train", requires = "tfds")]
    split: String,
    /// Worker threads (default: one per available core).
    #[arg(long, default_value_t = 0)]
    threads: usize,
    /// Write no index of the shards (by default each shard's index is written
    /// to .infeed-index/SHARD.index beside the shards, where no shard glob
    /// reaches it: what random access and --global-shuffle read).
    #[arg(long)]
    no_index: bool,
    /// No progress bar or progress lines.
    #[arg(long, short)]
    quiet: bool,
}

/// Parses a size: a number with an optional unit B, KB, MB, GB, TB (powers
/// of 1000; K, M, G, T too) or KiB, MiB, GiB, TiB (powers of 1024).
pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let mult: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" => 1_000,
        "m" | "mb" => 1_000_000,
        "g" | "gb" => 1_000_000_000,
        "t" | "tb" => 1_000_000_000_000,
        "kib" => 1 << 10,
        "mib" => 1 << 20,
        "gib" => 1 << 30,
        "tib" => 1 << 40,
        other => {
            return Err(format!(
                "{s:?}: unknown unit {other:?} (use B, KB, MB, GB, KiB, MiB, GiB)"
            ));
        }
    };
    let value: f64 = num.parse().map_err(|_| format!("{s:?}: not a size"))?;
    let bytes = value * mult as f64;
    if !(1.0..1.8e19).contains(&bytes) {
        return Err(format!("{s:?}: out of range"));
    }
    Ok(bytes.round() as u64)
}

fn human(bytes: u64) -> String {
    let b = bytes as f64;
    if b >= 1e9 {
        format!("{:.2} GB", b / 1e9)
    } else if b >= 1e6 {
        format!("{:.1} MB", b / 1e6)
    } else if b >= 1e3 {
        format!("{:.1} kB", b / 1e3)
    } else {
        format!("{bytes} B")
    }
}

/// A progress bar on a terminal; a log line every 10 seconds otherwise.
struct CliProgress {
    bar: Option<ProgressBar>,
    log: Option<Mutex<Instant>>,
    start: Instant,
}

impl CliProgress {
    fn new(quiet: bool) -> Self {
        let start = Instant::now();
        if quiet {
            return CliProgress {
                bar: None,
                log: None,
                start,
            };
        }
        if std::io::stderr().is_terminal() {
            let bar = ProgressBar::new(0);
            let style = ProgressStyle::with_template(
                "[{bar:20}] {bytes}/{total_bytes} {bytes_per_sec} ETA {eta} {msg}",
            )
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> ");
            bar.set_style(style);
            bar.enable_steady_tick(Duration::from_millis(200));
            CliProgress {
                bar: Some(bar),
                log: None,
                start,
            }
        } else {
            CliProgress {
                bar: None,
                log: Some(Mutex::new(start)),
                start,
            }
        }
    }

    fn done(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}

impl Progress for CliProgress {
    fn update(&self, s: &ProgressSnapshot) {
        let secs = self.start.elapsed().as_secs_f64().max(1e-9);
        if let Some(bar) = &self.bar {
            bar.set_length(s.input_total.max(s.input_bytes));
            bar.set_position(s.input_bytes);
            bar.set_message(format!(
                "{} rec {:.0}/s",
                s.records_out,
                s.records_out as f64 / secs
            ));
        }
        if let Some(last) = &self.log
            && let Ok(mut last) = last.lock()
            && last.elapsed() >= Duration::from_secs(10)
        {
            *last = Instant::now();
            let rate = s.input_bytes as f64 / secs;
            let eta = if rate > 0.0 {
                format!(
                    "{:.0}s",
                    s.input_total.saturating_sub(s.input_bytes) as f64 / rate
                )
            } else {
                "?".into()
            };
            eprintln!(
                "infeed convert: {} of {} input ({:.1} MB/s), {} records written ({:.0}/s), {} skipped, ETA {eta}",
                human(s.input_bytes),
                human(s.input_total),
                rate / 1e6,
                s.records_out,
                s.records_out as f64 / secs,
                s.skipped
            );
        }
    }
}

fn options(args: &ConvertArgs) -> Result<ConvertOptions, CliError> {
    let text_file = args.text_mode == "file";
    let format = match &args.format {
        None => None,
        Some(f) => Some(Format::parse(f, text_file).ok_or_else(|| {
            CliError::Message(format!(
                "unknown --format {f:?}: use jsonl, csv, tsv, parquet or text"
            ))
        })?),
    };
    let columns = match &args.columns {
        None => None,
        Some(c) => Some(
            convert::schema::parse_columns(c)
                .map_err(|e| CliError::Message(format!("--columns {e}")))?,
        ),
    };
    let tokenize = args.tokenizer.as_ref().map(|path| {
        TokenizeOptions::new(path)
            .text_column(args.text_column.clone())
            .mode(match (args.max_length, args.group_to) {
                (Some(n), _) => TokenMode::Truncate(n),
                (None, Some(len)) => TokenMode::Group {
                    len,
                    block: args.group_block,
                },
                (None, None) => TokenMode::Full,
            })
            .add_special_tokens(!args.no_special_tokens)
    });
    let tfds = match &args.tfds {
        Some(t) => Some(
            convert::TfdsTarget::parse(t, &args.split)
                .map_err(|e| CliError::Message(e.to_string()))?,
        ),
        None => None,
    };
    Ok(ConvertOptions::default()
        .inputs(args.inputs.clone())
        .format(format)
        .text_file(text_file)
        .text_column(args.text_column.clone())
        .features(args.features.clone())
        .columns(columns)
        .infer_records(args.infer_records)
        .null_omit(args.nulls == "omit")
        .skip_bad(args.skip_bad)
        .tokenize(tokenize)
        .shard_limit(match args.records_per_shard {
            Some(n) => ShardLimit::Records(n),
            None => ShardLimit::Bytes(args.shard_size),
        })
        .compression(match args.compression.as_str() {
            "gzip" => Compression::Gzip,
            "zlib" => Compression::Zlib,
            _ => Compression::None,
        })
        .naming(if args.naming == "hf" {
            Naming::Hf
        } else {
            Naming::Tf
        })
        .prefix(args.prefix.clone())
        .task_index(args.task_index)
        .num_tasks(args.num_tasks)
        .threads(args.threads)
        .tfds(tfds)
        .index(!args.no_index))
}

/// Converts, then prints a summary: records, bytes, speed, shards, skipped records.
pub fn run(args: &ConvertArgs, out: &mut impl Write) -> Result<i32, CliError> {
    let opts = options(args)?;
    let sink = convert::output_sink(&args.output)?;
    let progress = CliProgress::new(args.quiet);
    let result = convert::convert(&opts, sink.clone(), &progress);
    progress.done();
    let s = result?;
    let secs = s.elapsed.as_secs_f64().max(1e-9);
    writeln!(
        out,
        "converted {} records into {} records in {} shards ({}) in {:.2} s: {:.1} MB/s of input ({}), {:.0} records/s",
        s.records_in,
        s.records_out,
        s.shards.len(),
        human(s.output_bytes),
        secs,
        s.input_bytes as f64 / secs / 1e6,
        human(s.input_bytes),
        s.records_out as f64 / secs
    )?;
    for shard in s.shards.iter().take(10) {
        writeln!(
            out,
            "  {} ({} records, {})",
            sink.location(&shard.name),
            shard.records,
            human(shard.bytes)
        )?;
    }
    if s.shards.len() > 10 {
        writeln!(out, "  … and {} more shards", s.shards.len() - 10)?;
    }
    writeln!(out, "manifest: {}", sink.location(&s.manifest))?;
    writeln!(out, "spec: {}", s.schema.spec())?;
    if !s.removed.is_empty() {
        writeln!(
            out,
            "removed {} shards of an earlier run: {}",
            s.removed.len(),
            s.removed.join(", ")
        )?;
    }
    if s.skipped > 0 {
        writeln!(out, "skipped {} bad records:", s.skipped)?;
        for bad in &s.bad {
            writeln!(out, "  {}", super::hints::flags(&bad.to_string()))?;
        }
        if s.skipped > s.bad.len() as u64 {
            writeln!(out, "  … and {} more", s.skipped - s.bad.len() as u64)?;
        }
    }
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::parse_size;

    #[test]
    fn sizes() {
        assert_eq!(parse_size("100MB"), Ok(100_000_000));
        assert_eq!(parse_size("64MiB"), Ok(64 << 20));
        assert_eq!(parse_size("1.5GB"), Ok(1_500_000_000));
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size("2 kib"), Ok(2048));
        assert!(parse_size("0").is_err());
        assert!(parse_size("12XB").is_err());
        assert!(parse_size("MB").is_err());
    }
}
