//! `infeed index`: DALI `tfrecord2idx` index files.
//!
//! One line per record, `OFFSET LENGTH\n` in decimal, where OFFSET is the
//! byte offset of the record's header in the file and LENGTH its whole framed
//! size (12-byte header + data + 4-byte footer), as NVIDIA DALI's
//! `fn.readers.tfrecord(index_path=...)` expects. Only plain (uncompressed)
//! files can be indexed: offsets into a compressed stream cannot be sought.

use std::io::{Read, Write};
use std::path::PathBuf;

use clap::Args;
use infeed::record::{Compression, DETECT_LEN, FOOTER_LEN, HEADER_LEN, ReadOptions, RecordReader};

use super::CliError;

#[derive(Args)]
pub struct IndexArgs {
    /// TFRecord files (uncompressed).
    #[arg(required = true)]
    files: Vec<PathBuf>,
    /// Folder for the index files (default: beside each file). Each index is
    /// named after its file with `.idx` appended.
    #[arg(long, short)]
    output: Option<PathBuf>,
}

/// Writes `FILE.idx` for each file and prints `FILE<TAB>INDEX<TAB>RECORDS`.
pub fn run(args: &IndexArgs, out: &mut impl Write) -> Result<i32, CliError> {
    if let Some(dir) = &args.output {
        std::fs::create_dir_all(dir)
            .map_err(|e| CliError::Message(format!("{}: {e}", dir.display())))?;
    }
    for path in &args.files {
        let name = path.display().to_string();
        let mut head = Vec::with_capacity(DETECT_LEN);
        std::fs::File::open(path)
            .and_then(|f| f.take(DETECT_LEN as u64).read_to_end(&mut head))
            .map_err(|e| CliError::Message(format!("{name}: {e}")))?;
        let compression = Compression::detect(&name, &head);
        if compression != Compression::None {
            return Err(CliError::Message(format!(
                "{name}: is {compression}-compressed; DALI indexes need uncompressed TFRecord files"
            )));
        }
        let options = ReadOptions::default().compression(Compression::None);
        let mut text = String::new();
        let mut records = 0u64;
        for record in RecordReader::open(path, &options)? {
            let record = record?;
            let framed = HEADER_LEN + record.data.len() + FOOTER_LEN;
            text.push_str(&format!("{} {framed}\n", record.offset));
            records += 1;
        }
        let file_name = path
            .file_name()
            .ok_or_else(|| CliError::Message(format!("{name}: not a file name")))?;
        let mut idx_name = file_name.to_os_string();
        idx_name.push(".idx");
        let idx = match &args.output {
            Some(dir) => dir.join(&idx_name),
            None => path.with_file_name(&idx_name),
        };
        let mut tmp_name = std::ffi::OsString::from(".");
        tmp_name.push(&idx_name);
        tmp_name.push(".tmp");
        let tmp = idx.with_file_name(tmp_name);
        std::fs::write(&tmp, text.as_bytes())
            .and_then(|()| std::fs::rename(&tmp, &idx))
            .map_err(|e| CliError::Message(format!("{}: {e}", idx.display())))?;
        writeln!(out, "{name}\t{}\t{records}", idx.display())?;
    }
    Ok(0)
}
