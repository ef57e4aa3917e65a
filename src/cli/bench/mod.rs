//! `infeed bench`: run a pipeline described by flags or by a description
//! file (`--pipeline FILE`, JSON or TOML: `infeed::pipeline::Description`),
//! print a readable summary (`report.rs`) or, with `--json`, one JSON line;
//! `--print-pipeline` prints the description instead.
//!
//! `flags.rs` parses the flags' values, `measure.rs` times the run and
//! `measured.rs` says what it counts and hashes in each kind of batch;
//! `xla.rs` feeds a program instead (`--program`, feature `xla`).

use std::io::Write;
use std::path::PathBuf;
use std::str::FromStr;

use clap::Args;

use infeed::batch::{MaskType, Overflow, PackStrategy, TensorType, Truncation};
use infeed::pipeline::description::{BatchStep, MixSource, Output, RecordStep, Source};
use infeed::pipeline::{
    Description, EqualBatches, MixChoice, OnExhausted, ParsedPipeline, Pipeline,
};
use infeed::record::{CorruptPolicy, ReadOptions};
use infeed::spec::FeatureSpec;

use super::{CliError, CompressionArg, parse_compression};

mod flags;
mod measure;
mod measured;
mod report;
#[cfg(feature = "xla")]
mod xla;

use flags::{
    parse_chunk_size, parse_decode, parse_filter_length, parse_mask, parse_mix, parse_mix_point,
    parse_normalize, parse_shard, parse_step_range, parse_tokenize,
};
use measure::measure;

#[derive(Args)]
#[command(group(clap::ArgGroup::new("words").multiple(true)))]
#[command(group(clap::ArgGroup::new("parsed").args(["spec", "pipeline"])))]
pub struct BenchArgs {
    /// Files to read: paths or globs (quoted, or comma-separated).
    #[arg(group = "words")]
    inputs: Vec<String>,
    /// Run the pipeline this file describes (JSON, or TOML for a name
    /// ending in .toml: the form --print-pipeline prints and the Python
    /// package's Pipeline.describe() gives), instead of one described by
    /// flags.
    #[arg(long, value_name = "FILE", conflicts_with = "words")]
    pipeline: Option<PathBuf>,
    /// Print the pipeline's description (JSON) and run nothing.
    #[arg(long)]
    print_pipeline: bool,
    /// Removed: --pipeline FILE takes a whole pipeline (write one with
    /// --print-pipeline).
    #[arg(long, hide = true)]
    config: Option<PathBuf>,
    /// Features to parse, e.g. `input_ids:var_len:int32,label:fixed_len[1]:int64`;
    /// without it records are batched unparsed.
    #[arg(group = "words", long)]
    spec: Option<FeatureSpec>,
    /// The one input is a prepared TFDS dataset directory; read this split
    /// of it (a TFDS split string: `train`, `train[:10%]`, `train[:50%]+test`).
    #[arg(group = "words", long, value_name = "SPLIT")]
    tfds_split: Option<String>,
    /// Pad variable-length features to a multiple of N (static shapes).
    #[arg(group = "words", long)]
    pad_to_multiple_of: Option<usize>,
    /// Cap padded lengths at N.
    #[arg(group = "words", long)]
    max_length: Option<usize>,
    /// Pad or cut variable-length features to exactly N.
    #[arg(group = "words", long)]
    fixed_length: Option<usize>,
    /// What to do with a row over the cap: error, keep-start or keep-end
    /// (or keep_start, keep_end).
    #[arg(group = "words", long, value_parser = Truncation::from_str)]
    truncation: Option<Truncation>,
    /// Cast integer features to this type: int64, int32, float32, uint8 or
    /// bfloat16 (or i64, i32, f32, u8, bf16).
    #[arg(group = "words", long, value_parser = TensorType::from_str)]
    cast: Option<TensorType>,
    /// Tokenize a text feature on the workers, as FEATURE:TOKENIZER (a
    /// tokenizer.json or a SentencePiece .model, a path or a gs://, s3://,
    /// az:// URL), e.g. text:tokenizer.json: it becomes variable-length
    /// int32 token ids (repeatable).
    #[arg(group = "words", long, value_parser = parse_tokenize)]
    tokenize: Vec<(String, String)>,
    /// With --tokenize: put the tokenizer's beginning-of-sequence id first.
    #[arg(group = "words", long, requires = "tokenize")]
    add_bos: bool,
    /// With --tokenize: no end-of-sequence id after each text (added by default).
    #[arg(group = "words", long, requires = "tokenize")]
    no_eos: bool,
    /// Keep the records whose variable-length feature holds MIN to MAX
    /// values (tokens, after --tokenize), as FEATURE:MIN:MAX, e.g.
    /// input_ids:16:2048 (a bound left empty: none).
    #[arg(group = "words", long, value_parser = parse_filter_length)]
    filter_length: Option<(String, u64, u64)>,
    /// Decode a fixed-length bytes feature as raw u8, e.g. image:32x32x3.
    #[arg(group = "words", long, value_parser = parse_decode)]
    decode_raw: Vec<(String, Vec<usize>)>,
    /// Emit a feature (an image, or fixed-length numbers) as float32
    /// `(x - MEAN) / STD`, as NAME:MEAN:STD; MEAN and STD are one number or
    /// one per channel (the last dimension), comma-separated, e.g.
    /// `image:123.675,116.28,103.53:58.395,57.12,57.375` (repeatable).
    #[arg(group = "words", long, value_parser = parse_normalize)]
    normalize: Vec<(String, Vec<f32>, Vec<f32>)>,
    /// Make next-token inputs and targets of this token feature after
    /// packing or padding (inputs shifted right within each segment, --bos
    /// first), with targets_mask, segment_ids and positions.
    #[arg(group = "words", long)]
    inputs_targets: Option<String>,
    /// Each segment's first input under --inputs-targets.
    #[arg(
        group = "words",
        long,
        default_value_t = 0,
        requires = "inputs_targets",
        allow_hyphen_values = true
    )]
    bos: i64,
    /// Type of every `<name>_mask`: auto (the feature's type), u8 (or
    /// bool), i32, i64, f32, or none (no masks: lm's attention_mask is one).
    #[arg(group = "words", long)]
    masks: Option<MaskType>,
    /// One feature's mask over --masks, e.g. input_ids:none (repeatable).
    #[arg(group = "words", long, value_parser = parse_mask)]
    mask: Vec<(String, MaskType)>,
    /// Records per batch (with --pack: rows per batch).
    #[arg(group = "words", long, default_value_t = 256)]
    batch: usize,
    /// Bucket records by the length of this variable-length feature; needs
    /// --boundaries, --bucket-batch-sizes and --max-length (the last
    /// bucket's length). --batch does not apply.
    #[arg(group = "words", long, requires_all = ["boundaries", "bucket_batch_sizes"], conflicts_with = "pack")]
    bucket_by: Option<String>,
    /// Longest length of each bucket but the last, increasing, e.g. 64,128,256.
    #[arg(group = "words", long, value_delimiter = ',', requires = "bucket_by")]
    boundaries: Vec<usize>,
    /// Rows per batch of each bucket: one more than --boundaries, e.g.
    /// 512,256,128,64.
    #[arg(group = "words", long, value_delimiter = ',', requires = "bucket_by")]
    bucket_batch_sizes: Vec<usize>,
    /// Pack the variable-length features into rows of N values, with
    /// segment_ids and positions (--batch rows per batch).
    #[arg(group = "words", long)]
    pack: Option<usize>,
    /// A record longer than a --pack row: error, keep-start, keep-end or split.
    #[arg(group = "words", long, value_parser = Overflow::from_str, requires = "pack")]
    pack_overflow: Option<Overflow>,
    /// How --pack chooses rows: first-fit (default), best-fit, or
    /// concat-split (records end to end, cut at row ends: no padding).
    #[arg(group = "words", long, value_parser = PackStrategy::from_str, requires = "pack")]
    pack_strategy: Option<PackStrategy>,
    /// At most N sequences (or pieces of one) in a --pack row.
    #[arg(group = "words", long, requires = "pack")]
    pack_max_segments: Option<usize>,
    /// Print the engine's spans to stderr as they close, with their busy
    /// and idle times: infeed.read (a shard block), infeed.group (the record
    /// thread cutting a group), infeed.chunk (a prefilter chunk),
    /// infeed.batch (a worker assembling a batch).
    #[arg(long)]
    trace: bool,
    /// Drop a last batch smaller than --batch.
    #[arg(group = "words", long)]
    drop_remainder: bool,
    /// Shuffle buffer size in records (0: no shuffle).
    #[arg(group = "words", long, default_value_t = 0)]
    shuffle: usize,
    /// Shuffle the file order each epoch.
    #[arg(group = "words", long)]
    shuffle_files: bool,
    /// Read each epoch's records in a permutation of all of them, through
    /// the shards' indexes (`infeed index`; built in memory where missing).
    #[arg(group = "words", long)]
    global_shuffle: bool,
    /// --global-shuffle by blocks of about this many bytes (large reads, for
    /// object stores).
    #[arg(group = "words", long, value_name = "BYTES")]
    global_shuffle_blocks: Option<u64>,
    /// Where the shards' indexes are (default: the folder .infeed-index
    /// beside the shards, else beside each shard).
    #[arg(group = "words", long, value_name = "DIR")]
    index_dir: Option<String>,
    /// Accepted and unshown: changes nothing (`Pipeline::worker_reads`; the
    /// workers read plain local shards by default, framed by the indexes
    /// found, else by their headers).
    #[arg(group = "words", long, hide = true)]
    worker_reads: bool,
    /// Files read at once (interleave cycle length).
    #[arg(group = "words", long, default_value_t = 1)]
    interleave: usize,
    /// Records taken from a file before moving to the next.
    #[arg(group = "words", long, default_value_t = 1)]
    block: usize,
    /// Epochs to read; 0 means forever (stop with --batches or --seconds).
    #[arg(group = "words", long, default_value_t = 1)]
    epochs: u64,
    /// This host's part, as INDEX/COUNT.
    #[arg(group = "words", long, value_parser = parse_shard)]
    shard: Option<(u64, u64)>,
    /// A source of a mixture, as NAME:WEIGHT:GLOB (repeat it; the inputs are
    /// then left out). Every source takes the record-level flags (read,
    /// shard, file shuffle, interleave, shuffle, epochs), seeded apart.
    #[arg(group = "words", long, value_parser = parse_mix)]
    mix: Vec<(String, f64, String)>,
    /// How a mixture picks each record's source: random or stratified.
    #[arg(
        group = "words",
        long,
        value_parser = MixChoice::from_str,
        default_value = "random",
        requires = "mix"
    )]
    mix_by: MixChoice,
    /// What a mixture does when a source runs out: stop, drop or fail.
    #[arg(
        group = "words",
        long,
        value_parser = OnExhausted::from_str,
        default_value = "stop",
        requires = "mix"
    )]
    on_exhausted: OnExhausted,
    /// The mixture's weights from a step on, as STEP:W1,W2,… (one weight per
    /// --mix source, in order; repeat it, steps increasing).
    #[arg(group = "words", long, value_parser = parse_mix_point, requires = "mix")]
    mix_schedule: Vec<(u64, Vec<f64>)>,
    /// Move the weights linearly between --mix-schedule points.
    #[arg(group = "words", long, requires = "mix_schedule")]
    mix_interpolate: bool,
    /// Records a host draws per step of --mix-schedule (default: --batch
    /// under plain batching; needed with --pack or --bucket-by).
    #[arg(group = "words", long, requires = "mix_schedule")]
    mix_records_per_step: Option<u64>,
    /// Mixture weights count tokens (the length --pack or --bucket-by
    /// measures), not records.
    #[arg(group = "words", long, requires = "mix")]
    mix_by_tokens: bool,
    /// Make every host emit the same number of batches: drop or pad.
    #[arg(group = "words", long, value_parser = EqualBatches::from_str)]
    equal_batches: Option<EqualBatches>,
    /// Leave out the batches of steps A to B - 1, as A:B (comma-separated
    /// ranges, e.g. 1200:1300,4000:4010), numbered as an uninterrupted run
    /// numbers them; kept in --state-out.
    #[arg(group = "words", long, value_delimiter = ',', value_parser = parse_step_range)]
    skip_steps: Vec<(u64, u64)>,
    /// Seed of every random choice.
    #[arg(group = "words", long, default_value_t = 0)]
    seed: u64,
    /// Worker threads (default: one per core, or per core of --cpu-affinity).
    #[arg(group = "words", long)]
    threads: Option<usize>,
    /// Keep the pipeline's threads on these cores (comma-separated, e.g.
    /// 0,1): a CPU budget beside a training step.
    #[arg(group = "words", long, value_delimiter = ',')]
    cpu_affinity: Vec<usize>,
    /// Deliver batches as workers finish them (the order then varies).
    #[arg(group = "words", long)]
    unordered: bool,
    /// Batches prepared ahead.
    #[arg(group = "words", long, default_value_t = 2)]
    prefetch: usize,
    /// Stop after this many batches.
    #[arg(long)]
    batches: Option<u64>,
    /// Stop after this many seconds.
    #[arg(long)]
    seconds: Option<f64>,
    /// Compression of the files: none, gzip, zlib or auto.
    #[arg(group = "words", long, default_value = "auto", value_parser = parse_compression)]
    compression: CompressionArg,
    /// Skip corrupt records (counted) instead of failing.
    #[arg(group = "words", long)]
    skip_corrupt: bool,
    /// Map local files into memory instead of reading them into buffers:
    /// faster; a file cut short while read is an error, as when read
    /// (`ReadOptions::mmap`).
    #[arg(group = "words", long)]
    mmap: bool,
    /// Bytes per read from a file (and per piece of inflated output); with
    /// --mmap, the size of each mapped window.
    #[arg(group = "words", long, default_value_t = infeed::record::DEFAULT_CHUNK_SIZE, value_parser = parse_chunk_size)]
    chunk_size: usize,
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
    #[arg(long, requires = "parsed")]
    program: Option<PathBuf>,
    /// With --program: the batch tensors it takes, in order (default all).
    #[cfg(feature = "xla")]
    #[arg(long, value_delimiter = ',', requires = "program")]
    program_inputs: Option<Vec<String>>,
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
    if args.global_shuffle {
        p = p.global_shuffle();
    }
    if let Some(bytes) = args.global_shuffle_blocks {
        p = p.global_shuffle_blocks(bytes);
    }
    if let Some(dir) = &args.index_dir {
        p = p.index_dir(dir);
    }
    if args.worker_reads {
        p = p.worker_reads();
    }
    p.shuffle(args.shuffle).repeat(if args.epochs == 0 {
        None
    } else {
        Some(args.epochs)
    })
}

/// `infeed provenance`: the pipeline of `infeed bench`'s flags, and the
/// global steps whose records to list.
#[derive(Args)]
pub struct ProvenanceArgs {
    /// Global steps, comma-separated (counted from the start of the run,
    /// as --skip-steps counts them).
    #[arg(long, value_delimiter = ',', required = true)]
    steps: Vec<u64>,
    #[command(flatten)]
    pipeline: BenchArgs,
}

/// Lists the records of `args.steps`: one JSON line per step, `{"step":
/// S, "rows": [[[file, offset], ...], ...]}` (a row's records; `[]` for a
/// padding row).
pub fn provenance(args: &ProvenanceArgs, out: &mut impl Write) -> Result<i32, CliError> {
    run_with(&args.pipeline, Some(&args.steps), out)
}

pub fn run(args: &BenchArgs, out: &mut impl Write) -> Result<i32, CliError> {
    run_with(args, None, out)
}

/// A pipeline ready to run, as the flags or a description file give it.
enum Built {
    /// Batches of serialized records (no parse): `batch` rows, the last
    /// dropped when short with `drop_remainder`.
    Raw {
        pipeline: Box<Pipeline>,
        batch: usize,
        drop_remainder: bool,
    },
    Parsed(Box<ParsedPipeline>),
}

impl Built {
    /// The description of the whole run.
    fn describe(&self) -> Description {
        match self {
            Built::Raw {
                pipeline,
                batch,
                drop_remainder,
            } => {
                let mut d = pipeline.describe();
                d.batches.push(BatchStep::Batch {
                    size: *batch,
                    drop_remainder: *drop_remainder,
                });
                d
            }
            Built::Parsed(p) => p.describe(),
        }
    }

    fn resume_from(self, state: &[u8]) -> Self {
        match self {
            Built::Raw {
                pipeline,
                batch,
                drop_remainder,
            } => Built::Raw {
                pipeline: Box::new(pipeline.resume_from(state)),
                batch,
                drop_remainder,
            },
            Built::Parsed(p) => Built::Parsed(Box::new(p.resume_from(state))),
        }
    }
}

/// Builds the pipeline the flags or `--pipeline` describe, then measures
/// it, prints its description, or lists the records of `records_of`'s
/// steps.
fn run_with(
    args: &BenchArgs,
    records_of: Option<&[u64]>,
    out: &mut impl Write,
) -> Result<i32, CliError> {
    if args.config.is_some() {
        return Err(CliError::Message(
            "--config was removed: a pipeline file is now the pipeline's description, run \
             with --pipeline FILE (JSON or TOML); --print-pipeline writes the one your flags \
             describe"
                .into(),
        ));
    }
    if args.trace {
        use tracing_subscriber::fmt::format::FmtSpan;
        // Ignored if a subscriber is already set (a second run in-process).
        let _ = tracing_subscriber::fmt()
            .with_writer(std::io::stderr)
            .with_max_level(tracing::Level::TRACE)
            .with_span_events(FmtSpan::CLOSE)
            .try_init();
    }
    let mut built = match &args.pipeline {
        Some(path) => from_file(path)?,
        None => from_flags(args)?,
    };
    let description = built.describe();
    if args.print_pipeline {
        out.write_all(description.to_json().as_bytes())?;
        out.write_all(b"\n")?;
        return Ok(0);
    }
    let length = length_of(&description);
    let limited = args.batches.is_some() || args.seconds.is_some() || records_of.is_some();
    if length == Length::Forever && !limited {
        return Err(CliError::Message(
            "the pipeline repeats forever (--epochs 0): give --batches or --seconds".into(),
        ));
    }
    if let Some(path) = &args.state_in {
        built = built.resume_from(
            &std::fs::read(path)
                .map_err(|e| CliError::Message(format!("{}: {e}", path.display())))?,
        );
    }
    // Epochs of a whole run, for records per epoch.
    let epochs = match length {
        Length::Epochs(epochs) => Some(epochs),
        Length::Ends | Length::Forever => None,
    };
    let report = match built {
        Built::Raw { .. } if records_of.is_some() => {
            return Err(CliError::Message(
                "provenance needs --spec: it lists the rows of the batches the pipeline \
                 assembles"
                    .into(),
            ));
        }
        Built::Raw {
            pipeline,
            batch,
            drop_remainder,
        } => measure(pipeline.build_raw(batch, drop_remainder)?, args, epochs)?,
        Built::Parsed(parsed) => {
            if let Some(steps) = records_of {
                for (step, rows) in parsed.records_of(steps)? {
                    let line = serde_json::json!({ "step": step, "rows": rows });
                    serde_json::to_writer(&mut *out, &line).map_err(std::io::Error::from)?;
                    out.write_all(b"\n")?;
                }
                return Ok(0);
            }
            #[cfg(feature = "xla")]
            if let Some(program) = &args.program {
                let inputs = args.program_inputs.as_deref();
                return xla::run(*parsed, program, inputs, args.batches, out);
            }
            match description.output {
                Output::Tensors => measure(parsed.build()?, args, epochs)?,
                Output::Columns => measure(parsed.build_columns()?, args, epochs)?,
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

/// How long a run of a description reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Length {
    /// Its data this many times.
    Epochs(u64),
    /// A mixture that ends, after no whole number of epochs.
    Ends,
    Forever,
}

/// How long `d` reads: its last `repeat` (none: one epoch); a mixture ends
/// with its first source to end (`stop`, `fail`) or its last (`drop`).
fn length_of(d: &Description) -> Length {
    if let Source::Mix(mix) = &d.source {
        let ends = |s: &MixSource| length_of(&s.pipeline) != Length::Forever;
        let ends = match mix.on_exhausted {
            OnExhausted::Drop => mix.sources.iter().all(ends),
            OnExhausted::Stop | OnExhausted::Fail => mix.sources.iter().any(ends),
        };
        return if ends { Length::Ends } else { Length::Forever };
    }
    let repeat = d.records.iter().rev().find_map(|step| match step {
        RecordStep::Repeat { epochs } => Some(*epochs),
        _ => None,
    });
    match repeat {
        None => Length::Epochs(1),
        Some(Some(epochs)) => Length::Epochs(epochs),
        Some(None) => Length::Forever,
    }
}

/// The pipeline a description file describes: JSON, or TOML for a name
/// ending in `.toml`.
fn from_file(path: &std::path::Path) -> Result<Built, CliError> {
    let shown = path.display();
    let text =
        std::fs::read_to_string(path).map_err(|e| CliError::Message(format!("{shown}: {e}")))?;
    let mut d = if path.extension().is_some_and(|e| e == "toml") {
        let table = toml::de::Deserializer::parse(&text)
            .map_err(|e| CliError::Message(format!("{shown}: {e}")))?;
        let d: Description = serde_path_to_error::deserialize(table).map_err(|e| {
            CliError::Message(format!(
                "{shown}: pipeline description: {}",
                infeed::pipeline::description::placed(&e)
            ))
        })?;
        d.check_version()?;
        d
    } else {
        Description::from_json(&text).map_err(|e| CliError::Message(format!("{shown}: {e}")))?
    };
    if d.parse.is_some() {
        return Ok(Built::Parsed(Box::new(ParsedPipeline::from_description(
            &d,
        )?)));
    }
    let (batch, drop_remainder) = match d.batches.as_slice() {
        [
            BatchStep::Batch {
                size,
                drop_remainder,
            },
        ] => (*size, *drop_remainder),
        _ => {
            return Err(CliError::Message(format!(
                "{shown}: a pipeline without parse makes batches of records: its batches \
                 are one batch step"
            )));
        }
    };
    d.batches.clear();
    Ok(Built::Raw {
        pipeline: Box::new(Pipeline::from_description(&d)?),
        batch,
        drop_remainder,
    })
}

/// The pipeline the flags describe.
fn from_flags(args: &BenchArgs) -> Result<Built, CliError> {
    let read = ReadOptions::default()
        .compression(args.compression.0)
        .on_corrupt(if args.skip_corrupt {
            CorruptPolicy::Skip
        } else {
            CorruptPolicy::Fail
        })
        .mmap(args.mmap)
        .chunk_size(args.chunk_size);
    let mut p = if args.mix.is_empty() {
        if args.inputs.is_empty() {
            return Err(CliError::Message(
                "give the files to read (or a pipeline file: --pipeline FILE)".into(),
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
        let mut mixed = Pipeline::mix(sources, &weights)?
            .seed(args.seed)
            .mix_by(args.mix_by)
            .on_exhausted(args.on_exhausted);
        if !args.mix_schedule.is_empty() {
            mixed = mixed.mix_schedule(&args.mix_schedule, args.mix_interpolate);
        }
        if let Some(n) = args.mix_records_per_step {
            mixed = mixed.mix_records_per_step(n);
        }
        mixed.mix_by_tokens(args.mix_by_tokens)
    };
    p = p.prefetch(args.prefetch);
    if !args.skip_steps.is_empty() {
        p = p.skip_steps(&args.skip_steps);
    }
    if let Some(how) = args.equal_batches {
        p = p.equal_batches(how);
    }
    if args.unordered {
        p = p.unordered();
    }
    if !args.cpu_affinity.is_empty() {
        p = p.cpu_affinity(args.cpu_affinity.iter().copied());
    }
    if let Some(threads) = args.threads {
        p = p.threads(threads);
    }
    let Some(spec) = &args.spec else {
        if args.bucket_by.is_some()
            || args.pack.is_some()
            || !args.tokenize.is_empty()
            || args.filter_length.is_some()
        {
            return Err(CliError::Message(
                "--bucket-by, --pack, --tokenize and --filter-length need --spec (they parse \
                 the records)"
                    .into(),
            ));
        }
        return Ok(Built::Raw {
            pipeline: Box::new(p),
            batch: args.batch,
            drop_remainder: args.drop_remainder,
        });
    };
    let mut parsed = p.parse(spec.clone());
    parsed = match (&args.bucket_by, args.pack) {
        (Some(feature), _) => parsed
            .bucket_by_length(feature, &args.boundaries, &args.bucket_batch_sizes)
            .drop_remainder(args.drop_remainder),
        (None, Some(row_length)) => {
            let mut packed = parsed
                .pack(row_length)
                .pack_overflow(args.pack_overflow.unwrap_or_default())
                .pack_strategy(args.pack_strategy.unwrap_or_default());
            if let Some(segments) = args.pack_max_segments {
                packed = packed.pack_max_segments(segments);
            }
            packed.batch(args.batch, args.drop_remainder)
        }
        (None, None) => parsed.batch(args.batch, args.drop_remainder),
    };
    // Every feature fixed-length and the remainder dropped: the batches
    // are static as they are, so they come as the tensors a training step
    // takes (as the Python package yields them), not as parsed columns.
    let fixed = spec.features().iter().all(|f| f.fixed_count().is_some());
    let static_shapes = (fixed && args.drop_remainder)
        || args.bucket_by.is_some()
        || args.pack.is_some()
        || args.pad_to_multiple_of.is_some()
        || args.max_length.is_some()
        || args.fixed_length.is_some()
        || args.cast.is_some()
        || !args.decode_raw.is_empty()
        || !args.normalize.is_empty()
        || args.inputs_targets.is_some();
    for (feature, tokenizer) in &args.tokenize {
        parsed = parsed.tokenize(feature, tokenizer, args.add_bos, !args.no_eos);
    }
    if let Some((feature, min, max)) = &args.filter_length {
        parsed = parsed.filter_length(feature, *min, *max);
    }
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
    if let Some(feature) = &args.inputs_targets {
        parsed = parsed.inputs_targets(feature, args.bos);
    }
    if !static_shapes {
        parsed = parsed.output(Output::Columns);
    }
    Ok(Built::Parsed(Box::new(parsed)))
}
