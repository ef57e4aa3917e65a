//! The `infeed` command line: one file per subcommand.

mod bench;
mod cat;
mod convert;
mod count;
mod hints;
mod index;
mod inspect;
mod verify;

use std::io::{self, Write};

use clap::{Args, Parser, Subcommand};
use infeed::record::{Compression, ReadOptions, RecordReader};
use infeed::source::{ShardReader, SourceOptions, list_shards_blocking, open_blocking};

/// infeed: TFRecord tools and input pipelines that keep XLA accelerators fed.
#[derive(Parser)]
#[command(name = "infeed", version, about, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Print every record as one JSON object per line, values tagged by type.
    Cat(cat::CatArgs),
    /// Convert JSONL, CSV, Parquet or text into TFRecord shards of tf.train.Example.
    Convert(Box<convert::ConvertArgs>),
    /// Print the number of records in each file and the total.
    Count(count::CountArgs),
    /// Write each shard's index, for random access and global shuffle
    /// (`--dali`: DALI tfrecord2idx files instead).
    Index(index::IndexArgs),
    /// Infer the schema of TFRecord files: features, types, value counts, a spec.
    Inspect(inspect::InspectArgs),
    /// Check every record's CRCs; list each corrupt record; exit 1 if any.
    Verify(verify::VerifyArgs),
    /// Run a pipeline described by flags and print its speed: a summary, or one JSON line (--json).
    Bench(Box<bench::BenchArgs>),
    /// List the records of given global steps of a pipeline described by bench's flags: every
    /// host's rows (host 0's first), from --state-in or the start, one JSON line per step.
    Provenance(Box<bench::ProvenanceArgs>),
}

/// Input files and how to read them; shared by the reading subcommands.
#[derive(Args)]
struct InputArgs {
    /// TFRecord files to read: local paths or gs://, s3://, az://, file://
    /// URLs; globs (`*`, `?`, `[..]`, quoted) and comma-separated lists name
    /// every matching shard, in sorted order.
    #[arg(required = true, value_name = "FILE")]
    files: Vec<String>,
    /// Compression of the files: none, gzip, zlib or auto (from the
    /// extension and the first bytes).
    #[arg(long, default_value = "auto", value_parser = parse_compression)]
    compression: CompressionArg,
}

/// `--compression`: a fixed compression, or `None` to detect it per file.
#[derive(Clone, Copy)]
struct CompressionArg(Option<Compression>);

impl InputArgs {
    fn read_options(&self) -> ReadOptions {
        ReadOptions::default().compression(self.compression.0)
    }

    /// Every shard the arguments name, in order: a plain local path as given
    /// (a missing one fails when opened), a glob or URL through the listing.
    fn shards(&self) -> Result<Vec<String>, CliError> {
        let mut shards = Vec::new();
        for arg in &self.files {
            let plain_local = !arg.contains("://") && !arg.contains(['*', '?', '[', ',']);
            if plain_local {
                shards.push(arg.clone());
            } else {
                let listed = list_shards_blocking(arg, &SourceOptions::default())?;
                shards.extend(listed.into_iter().map(|s| s.url));
            }
        }
        Ok(shards)
    }
}

/// Opens one shard (local or cloud) as a record reader; the compression is
/// detected from the name and first bytes unless `--compression` says.
fn open_records(url: &str, options: &ReadOptions) -> Result<RecordReader<ShardReader>, CliError> {
    let reader = open_blocking(url, &SourceOptions::default())?;
    Ok(RecordReader::with_options(reader, url, options))
}

fn parse_compression(s: &str) -> Result<CompressionArg, String> {
    Compression::parse(s)
        .map(CompressionArg)
        .ok_or_else(|| format!("unknown compression {s:?}: use none, gzip, zlib or auto"))
}

/// What a subcommand can fail with.
#[derive(Debug, thiserror::Error)]
enum CliError {
    #[error(transparent)]
    Record(#[from] infeed::record::RecordError),
    #[error(transparent)]
    Pipeline(#[from] infeed::pipeline::PipelineError),
    #[error(transparent)]
    Convert(#[from] infeed::convert::ConvertError),
    #[error(transparent)]
    Source(#[from] infeed::source::SourceError),
    #[error(transparent)]
    Index(#[from] infeed::index::IndexError),
    #[error("{0}")]
    Io(#[from] io::Error),
    #[error("{0}")]
    Message(String),
}

/// Runs the command line and returns the process exit code.
pub fn main() -> i32 {
    let cli = Cli::parse();
    let stdout = io::stdout();
    let mut out = io::BufWriter::with_capacity(1 << 16, stdout.lock());
    let result = match &cli.command {
        Command::Cat(args) => cat::run(args, &mut out),
        Command::Convert(args) => convert::run(args, &mut out),
        Command::Count(args) => count::run(args, &mut out),
        Command::Index(args) => index::run(args, &mut out),
        Command::Inspect(args) => inspect::run(args, &mut out),
        Command::Verify(args) => verify::run(args, &mut out),
        Command::Bench(args) => bench::run(args, &mut out),
        Command::Provenance(args) => bench::provenance(args, &mut out),
    };
    let result = result.and_then(|code| out.flush().map(|()| code).map_err(CliError::from));
    match result {
        Ok(code) => code,
        // A closed pipe (`infeed cat … | head`) is a normal way to stop.
        Err(CliError::Io(e)) if e.kind() == io::ErrorKind::BrokenPipe => 0,
        Err(e) => {
            eprintln!("infeed: {}", hints::flags(&e.to_string()));
            1
        }
    }
}
