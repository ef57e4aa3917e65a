//! `infeed index`: each shard's index, for random access and global
//! shuffle (`infeed::index`): every record's offset and length, what
//! identifies the shard, and for GZIP/ZLIB shards inflate access points.
//! Written into the hidden folder beside the shards
//! (`.infeed-index/SHARD.index`, where other readers' shard globs do not
//! reach) or into `--output`, a local folder or a gs://, s3://, az://
//! prefix.
//!
//! `--dali` writes NVIDIA DALI's `tfrecord2idx` files instead: one line
//! per record, `OFFSET LENGTH\n` in decimal, where OFFSET is the byte
//! offset of the record's header in the file and LENGTH its whole framed
//! size (12-byte header + data + 4-byte footer), as
//! `fn.readers.tfrecord(index_path=...)` expects. Only plain files: DALI
//! cannot seek into a compressed stream.

use std::io::Write;

use clap::Args;
use infeed::index::{BuildOptions, INDEX_DIR, build, index_url, save};
use infeed::record::Compression;

use super::{CliError, InputArgs};

#[derive(Args)]
pub struct IndexArgs {
    #[command(flatten)]
    input: InputArgs,
    /// Folder or bucket prefix for the index files (default: the folder
    /// .infeed-index beside each shard). Each is named after its shard with
    /// `.index` appended (`.idx` with --dali).
    #[arg(long, short)]
    output: Option<String>,
    /// Output between access points of a GZIP or ZLIB shard, in bytes: any
    /// record is reached by inflating at most this much.
    #[arg(long, default_value_t = infeed::index::DEFAULT_SPAN)]
    span: u64,
    /// Write DALI tfrecord2idx files (`offset length` per record; plain
    /// shards only) instead of infeed's indexes.
    #[arg(long)]
    dali: bool,
}

/// Writes each shard's index and prints `SHARD<TAB>INDEX<TAB>RECORDS`, in
/// order. Shards are indexed a few at once (one per core): each is one
/// pass over its bytes on one thread.
pub fn run(args: &IndexArgs, out: &mut impl Write) -> Result<i32, CliError> {
    if args.span == 0 {
        return Err(CliError::Message("--span 0: at least 1 byte".into()));
    }
    let opts = BuildOptions {
        read: args.input.read_options(),
        span: args.span,
        ..BuildOptions::default()
    };
    let shards = args.input.shards()?;
    let at_once = std::thread::available_parallelism().map_or(2, |n| n.get());
    for group in shards.chunks(at_once) {
        let done: Vec<Result<(String, u64), CliError>> = std::thread::scope(|scope| {
            let handles: Vec<_> = group
                .iter()
                .map(|shard| scope.spawn(|| index_one(shard, args, &opts)))
                .collect();
            handles
                .into_iter()
                .map(|h| {
                    h.join().unwrap_or_else(|_| {
                        Err(CliError::Message("an index thread panicked".into()))
                    })
                })
                .collect()
        });
        for (shard, result) in group.iter().zip(done) {
            let (index, records) = result?;
            writeln!(out, "{shard}\t{index}\t{records}")?;
        }
    }
    Ok(0)
}

/// Builds and writes one shard's index: where it went, and its records.
fn index_one(
    shard: &str,
    args: &IndexArgs,
    opts: &BuildOptions,
) -> Result<(String, u64), CliError> {
    let idx = build(shard, opts)?;
    if args.dali {
        if idx.compression != Compression::None {
            return Err(CliError::Message(format!(
                "{shard}: is {}-compressed; DALI indexes need uncompressed TFRecord files \
                 (infeed's own index reads compressed ones: leave out --dali)",
                idx.compression
            )));
        }
        let mut text = String::new();
        for i in 0..idx.len() {
            let (offset, framed) = idx.record(i).unwrap_or_default();
            text.push_str(&format!("{offset} {framed}\n"));
        }
        let index = dali_path(shard, args.output.as_deref())?;
        write_local(&index, text.as_bytes())?;
        Ok((index, idx.len()))
    } else {
        let index = index_url(shard, args.output.as_deref());
        save(&idx, &index, &Default::default())?;
        Ok((index, idx.len()))
    }
}

/// Where a DALI index goes: in the folder `.infeed-index` beside the shard
/// (as infeed's own, out of reach of shard globs), or in `dir` (local).
fn dali_path(shard: &str, dir: Option<&str>) -> Result<String, CliError> {
    if shard.contains("://") && dir.is_none() {
        return Err(CliError::Message(format!(
            "{shard}: DALI indexes are written to a local folder: give --output"
        )));
    }
    let name = shard.rsplit('/').next().unwrap_or(shard);
    Ok(match dir {
        None => format!(
            "{}{INDEX_DIR}/{name}.idx",
            &shard[..shard.len() - name.len()]
        ),
        Some(dir) => format!("{}/{name}.idx", dir.trim_end_matches('/')),
    })
}

/// Writes `bytes` at the local path `path` (temporary file, then rename).
fn write_local(path: &str, bytes: &[u8]) -> Result<(), CliError> {
    let path = std::path::Path::new(path);
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)
            .map_err(|e| CliError::Message(format!("{}: {e}", dir.display())))?;
    }
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    let tmp = path.with_file_name(format!(".{name}.tmp"));
    std::fs::write(&tmp, bytes)
        .and_then(|()| std::fs::rename(&tmp, path))
        .map_err(|e| CliError::Message(format!("{}: {e}", path.display())))
}
