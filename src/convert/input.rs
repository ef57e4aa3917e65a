//! Inputs: glob expansion, format and compression detection, and cutting
//! each file into chunks of whole records for the worker threads.
//!
//! A *record* is one line (JSONL, plain text), one CSV record (quoted fields
//! may span lines; the header and blank lines are not records), one Parquet
//! row, or one whole file (`--text-mode file`). Records are numbered from 0
//! in each file; blank JSONL lines are numbered too (and produce nothing), so
//! a record's number is its line's. Chunks end on a multiple of the block
//! size (see [`super::split`]), so a worker sees whole blocks.
//!
//! Without the `convert` feature these readers serve `files.rs` alone, and
//! the conversion task's parts of them go unused.
#![cfg_attr(not(feature = "convert"), allow(dead_code))]

use std::fs::File;
use std::io::{self, BufReader, Read};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

#[cfg(feature = "convert")]
use arrow_array::RecordBatch;
#[cfg(feature = "convert")]
use bytes::Bytes;
#[cfg(feature = "convert")]
use parquet::arrow::ProjectionMask;
#[cfg(feature = "convert")]
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

use super::error::ConvertError;
use super::object_input;
use super::schema::Schema;
use super::split::FileRange;
use crate::source::SourceOptions;

/// The largest single record (line, CSV record or text file) accepted: a
/// bound on memory when a file has no line breaks.
pub(super) const MAX_RECORD_BYTES: usize = 256 << 20;

/// An input format.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// One JSON object per line.
    Jsonl,
    /// CSV with a header line; `delimiter` is `,` (or tab for `.tsv`).
    Csv {
        /// The field separator.
        delimiter: u8,
    },
    /// Apache Parquet.
    Parquet,
    /// Plain text, one record per line.
    TextLines,
    /// Plain text, one record per file.
    TextFile,
}

impl Format {
    /// Parses `--format`: jsonl, csv, tsv, parquet, text (lines or files
    /// according to `text_file`).
    pub fn parse(s: &str, text_file: bool) -> Option<Format> {
        Some(match s.to_ascii_lowercase().as_str() {
            "jsonl" | "json" | "ndjson" => Format::Jsonl,
            "csv" => Format::Csv { delimiter: b',' },
            "tsv" => Format::Csv { delimiter: b'\t' },
            "parquet" => Format::Parquet,
            "text" | "txt" if text_file => Format::TextFile,
            "text" | "txt" => Format::TextLines,
            _ => return None,
        })
    }

    /// The name used in messages and the manifest.
    pub fn name(self) -> &'static str {
        match self {
            Format::Jsonl => "jsonl",
            Format::Csv { delimiter: b'\t' } => "tsv",
            Format::Csv { .. } => "csv",
            Format::Parquet => "parquet",
            Format::TextLines => "text-lines",
            Format::TextFile => "text-file",
        }
    }
}

/// How an input file is compressed (from its first bytes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum InputCompression {
    /// Not compressed.
    None,
    /// GZIP (`1f 8b`); concatenated members are read as one stream.
    Gzip,
    /// Zstandard (`28 b5 2f fd`).
    Zstd,
}

/// One input file, after glob expansion.
#[derive(Clone, Debug)]
pub(super) struct InputFile {
    /// Its path.
    pub path: PathBuf,
    /// The path as messages show it.
    pub display: String,
    /// Its format.
    pub format: Format,
    /// Its compression.
    pub compression: InputCompression,
    /// Its size on disk.
    pub size: u64,
    /// True when `path` is a URL (gs://, s3://, az://, http(s)://) read
    /// through [`crate::source`] (`object_input.rs`) rather than a local
    /// file.
    pub remote: bool,
}

fn has_glob_chars(s: &str) -> bool {
    s.contains(['*', '?', '['])
}

/// The format a file name implies, ignoring a `.gz`/`.zst` suffix.
pub(super) fn format_from_name(name: &str, text_file: bool) -> Option<Format> {
    let lower = name.to_ascii_lowercase();
    let base = ["gz", "gzip", "zst", "zstd"]
        .iter()
        .find_map(|ext| lower.strip_suffix(&format!(".{ext}")))
        .unwrap_or(&lower);
    let ext = base.rsplit_once('.').map(|(_, e)| e)?;
    match ext {
        "jsonl" | "json" | "ndjson" => Some(Format::Jsonl),
        "csv" => Some(Format::Csv { delimiter: b',' }),
        "tsv" => Some(Format::Csv { delimiter: b'\t' }),
        "parquet" | "pq" => Some(Format::Parquet),
        "txt" | "text" => Some(if text_file {
            Format::TextFile
        } else {
            Format::TextLines
        }),
        _ => None,
    }
}

/// The compression `stream`'s first bytes announce.
fn sniff_compression(
    stream: &mut dyn Read,
    display: &str,
) -> Result<InputCompression, ConvertError> {
    let mut magic = [0u8; 4];
    let mut have = 0;
    while have < 4 {
        match stream.read(&mut magic[have..]) {
            Ok(0) => break,
            Ok(n) => have += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(ConvertError::io(display, e)),
        }
    }
    Ok(if have >= 2 && magic[..2] == [0x1f, 0x8b] {
        InputCompression::Gzip
    } else if have == 4 && magic == [0x28, 0xb5, 0x2f, 0xfd] {
        InputCompression::Zstd
    } else {
        InputCompression::None
    })
}

/// Expands the input arguments: a pattern with `*`, `?` or `[` is a glob
/// (its matches sorted by path; no match is an error), anything else a path.
/// Argument order is kept; a file named twice is read twice.
pub(super) fn expand_inputs(
    args: &[String],
    format: Option<Format>,
    text_file: bool,
) -> Result<Vec<InputFile>, ConvertError> {
    let mut paths: Vec<PathBuf> = Vec::new();
    for arg in args {
        if has_glob_chars(arg) {
            let matches = glob::glob(arg)
                .map_err(|e| ConvertError::input(arg, format!("bad glob pattern: {e}")))?;
            let mut found = Vec::new();
            for m in matches {
                let p = m.map_err(|e| ConvertError::input(arg, e.to_string()))?;
                if p.is_file() {
                    found.push(p);
                }
            }
            if found.is_empty() {
                return Err(ConvertError::input(arg, "the pattern matches no file"));
            }
            found.sort();
            paths.extend(found);
        } else {
            paths.push(PathBuf::from(arg));
        }
    }
    if paths.is_empty() {
        return Err(ConvertError::Options("no input files".into()));
    }
    paths
        .into_iter()
        .map(|path| {
            let format = match format {
                Some(f) => f,
                None => format_from_name(&path.display().to_string(), text_file).ok_or_else(|| {
                    ConvertError::input(
                        path.display(),
                        "cannot tell the format from the name (.jsonl .csv .tsv .parquet .txt, optionally .gz/.zst): give ConvertOptions::format",
                    )
                })?,
            };
            input_file(path, format)
        })
        .collect()
}

/// One input file of a known format: its size and compression (never a glob).
pub(super) fn input_file(path: PathBuf, format: Format) -> Result<InputFile, ConvertError> {
    let display = path.display().to_string();
    let meta = std::fs::metadata(&path).map_err(|e| ConvertError::io(&display, e))?;
    if !meta.is_file() {
        return Err(ConvertError::input(&display, "not a file"));
    }
    let mut file = File::open(&path).map_err(|e| ConvertError::io(&display, e))?;
    let compression = sniff_compression(&mut file, &display)?;
    Ok(InputFile {
        path,
        display,
        format,
        compression,
        size: meta.len(),
        remote: false,
    })
}

/// [`input_file`] for a local path, a `file://` URL, or an object
/// (`gs://`, `s3://`, `az://`, `http(s)://`: its size from a HEAD, its
/// compression from its first bytes).
pub(super) fn input_at(name: &str, format: Format) -> Result<InputFile, ConvertError> {
    if !object_input::is_url(name) {
        return input_file(
            PathBuf::from(name.strip_prefix("file://").unwrap_or(name)),
            format,
        );
    }
    let shard = object_input::head(name)?;
    let mut first = object_input::open(&shard, 0, 4, &SourceOptions::default())?;
    let compression = sniff_compression(&mut first, name)?;
    Ok(InputFile {
        path: PathBuf::from(name),
        display: name.to_owned(),
        format,
        compression,
        size: shard.size,
        remote: true,
    })
}

/// A file's raw (possibly compressed) bytes from byte `start` on; for an
/// object, read in large range reads up to `end` and in small ones past it
/// (a byte range's last line).
pub(super) fn open_raw(
    file: &InputFile,
    start: u64,
    end: u64,
) -> Result<Box<dyn Read + Send>, ConvertError> {
    if file.remote {
        let shard = object_input::shard(&file.display, file.size);
        return object_input::open_range(&shard, start, end);
    }
    let mut raw = File::open(&file.path).map_err(|e| ConvertError::io(&file.display, e))?;
    if start > 0 {
        use std::io::{Seek, SeekFrom};
        raw.seek(SeekFrom::Start(start))
            .map_err(|e| ConvertError::io(&file.display, e))?;
    }
    Ok(Box::new(raw))
}

/// Counts the bytes read from the file on disk (for progress).
struct CountingRead<R> {
    inner: R,
    counter: Arc<AtomicU64>,
}

impl<R: Read> Read for CountingRead<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.counter.fetch_add(n as u64, Ordering::Relaxed);
        Ok(n)
    }
}

/// Opens a file for reading its uncompressed bytes.
fn open_stream(
    file: &InputFile,
    counter: Arc<AtomicU64>,
) -> Result<Box<dyn Read + Send>, ConvertError> {
    let counted = CountingRead {
        inner: open_raw(file, 0, u64::MAX)?,
        counter,
    };
    Ok(match file.compression {
        InputCompression::None => Box::new(counted),
        InputCompression::Gzip => Box::new(flate2::read::MultiGzDecoder::new(
            BufReader::with_capacity(1 << 20, counted),
        )),
        InputCompression::Zstd => Box::new(
            zstd::stream::read::Decoder::new(counted)
                .map_err(|e| ConvertError::io(&file.display, e))?,
        ),
    })
}

/// A file being read, shared by its chunks.
#[derive(Debug)]
pub(super) struct FileCtx {
    /// Index in the input list.
    pub index: usize,
    /// The path as messages show it.
    pub display: String,
    /// Its format.
    pub format: Format,
    /// CSV: the header's field names.
    pub header: Vec<String>,
}

impl FileCtx {
    /// Where each of `schema`'s columns is in this CSV file's header. A
    /// header column outside the schema is an error (`unknown` says it)
    /// unless `ignore_unknown`.
    pub fn csv_columns(
        &self,
        schema: &Schema,
        ignore_unknown: bool,
        unknown: impl Fn(&str) -> String,
    ) -> Result<Vec<usize>, ConvertError> {
        let map = schema
            .columns
            .iter()
            .map(|col| {
                self.header
                    .iter()
                    .position(|h| *h == col.source)
                    .ok_or_else(|| {
                        ConvertError::input(
                            &self.display,
                            format!("the CSV header has no column {:?}", col.source),
                        )
                    })
            })
            .collect::<Result<Vec<_>, _>>()?;
        if !ignore_unknown
            && let Some(extra) = self.header.iter().find(|h| schema.position(h).is_none())
        {
            return Err(ConvertError::input(&self.display, unknown(extra)));
        }
        Ok(map)
    }
}

/// The records of a chunk.
pub(super) enum ChunkData {
    /// Raw bytes of whole lines / CSV records (with their line breaks), or
    /// the whole text of a file (`--text-mode file`).
    Bytes(Vec<u8>),
    /// Parquet rows.
    #[cfg(feature = "convert")]
    Batch(RecordBatch),
}

/// A piece of one input file: whole records, ending on a block boundary or
/// at the end of the file's range.
pub(super) struct Chunk {
    /// The file.
    pub file: Arc<FileCtx>,
    /// Line number (1-based) where the chunk's bytes start; for Parquet, unused.
    pub first_line: u64,
    /// The number (in its file, from 0) of the chunk's first record.
    pub first_record: u64,
    /// Number of records.
    pub records: u64,
    /// The records.
    pub data: ChunkData,
    /// Input bytes (on disk) read when the chunk was cut, over all files.
    pub input_pos: u64,
}

/// One record unit found by [`split_unit`]: a line, or a CSV record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Unit {
    /// Bytes including the line break.
    pub len: usize,
    /// Bytes of content: without `\n` or `\r\n`.
    pub content: usize,
    /// Line breaks inside the unit (its own included).
    pub newlines: u64,
}

/// Finds the first line (or CSV record, when `csv` gives the delimiter) of
/// `buf`. At the end of the input (`eof`), a last unit without a line break
/// counts; otherwise `None` means more bytes are needed.
pub(super) fn split_unit(buf: &[u8], eof: bool, csv: Option<u8>) -> Option<Unit> {
    if buf.is_empty() {
        return None;
    }
    let (end, newlines) = match csv {
        None => match memchr::memchr(b'\n', buf) {
            Some(i) => (Some(i), 1),
            None => (None, 0),
        },
        Some(delim) => csv_record_end(buf, delim),
    };
    let (len, content) = match end {
        Some(i) => (i + 1, i),
        None if eof => (buf.len(), buf.len()),
        None => return None,
    };
    let content = if content > 0 && buf[content - 1] == b'\r' {
        content - 1
    } else {
        content
    };
    Some(Unit {
        len,
        content,
        newlines,
    })
}

/// The index of the `\n` that ends the first CSV record (outside quotes),
/// and the number of line breaks up to and including it.
///
/// A quote opens a quoted field only at the start of a field (after the
/// delimiter or at the start of the record); inside one, `""` is a quote and
/// a lone `"` closes it. A quote anywhere else is an ordinary character.
fn csv_record_end(buf: &[u8], delim: u8) -> (Option<usize>, u64) {
    let count = |s: &[u8]| memchr::memchr_iter(b'\n', s).count() as u64;
    let mut newlines = 0;
    let mut i = 0;
    loop {
        let rest = buf.get(i..).unwrap_or_default();
        match memchr::memchr2(b'\n', b'"', rest) {
            None => return (None, newlines),
            Some(j) => {
                let p = i + j;
                if buf.get(p) == Some(&b'\n') {
                    return (Some(p), newlines + 1);
                }
                i = p + 1;
                let at_field_start = p == 0 || buf.get(p - 1) == Some(&delim);
                if !at_field_start {
                    continue;
                }
                // Inside a quoted field: up to the closing quote.
                loop {
                    let rest = buf.get(i..).unwrap_or_default();
                    match memchr::memchr(b'"', rest) {
                        None => return (None, newlines + count(rest)),
                        Some(j) => {
                            newlines += count(&rest[..j]);
                            i += j + 1;
                            if buf.get(i) == Some(&b'"') {
                                i += 1;
                            } else {
                                break;
                            }
                        }
                    }
                }
            }
        }
    }
}

/// True when a CSV unit's content is empty or only `\r` (a blank line, not a record).
pub(super) fn csv_blank(content: &[u8]) -> bool {
    content.iter().all(|&b| b == b'\r')
}

/// Splits one CSV record (its content, without the line break) into fields,
/// undoing quotes: the fields go to `out`, their ends to `ends`.
pub(super) fn parse_csv_fields(
    rec: &[u8],
    delim: u8,
    out: &mut Vec<u8>,
    ends: &mut Vec<usize>,
) -> Result<(), &'static str> {
    out.clear();
    ends.clear();
    let mut i = 0;
    loop {
        if rec.get(i) == Some(&b'"') {
            i += 1;
            loop {
                match memchr::memchr(b'"', &rec[i..]) {
                    None => return Err("a quoted field is not closed"),
                    Some(j) => {
                        out.extend_from_slice(&rec[i..i + j]);
                        i += j + 1;
                        if rec.get(i) == Some(&b'"') {
                            out.push(b'"');
                            i += 1;
                        } else {
                            break;
                        }
                    }
                }
            }
            ends.push(out.len());
            match rec.get(i) {
                None => return Ok(()),
                Some(&b) if b == delim => i += 1,
                Some(_) => return Err("text after the closing quote of a field"),
            }
        } else {
            let j = memchr::memchr(delim, &rec[i..]).map_or(rec.len(), |j| i + j);
            out.extend_from_slice(&rec[i..j]);
            ends.push(out.len());
            if j == rec.len() {
                return Ok(());
            }
            i = j + 1;
        }
    }
}

/// The field names of a CSV header line (`content`, without its line
/// break; a UTF-8 byte-order mark is not part of the first name).
pub(super) fn csv_header(
    content: &[u8],
    delim: u8,
    display: &str,
    line: u64,
) -> Result<Vec<String>, ConvertError> {
    let content = content.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(content);
    let (mut out, mut ends) = (Vec::new(), Vec::new());
    parse_csv_fields(content, delim, &mut out, &mut ends)
        .map_err(|m| ConvertError::input(display, format!("line {line}: header: {m}")))?;
    let mut names = Vec::new();
    let mut start = 0;
    for &end in &ends {
        names.push(String::from_utf8_lossy(&out[start..end]).into_owned());
        start = end;
    }
    Ok(names)
}

/// Reads files into chunks and hands them to `emit`, which returns false to
/// stop early. Tracks input bytes read (on disk) in `progress`.
pub(super) struct ChunkReader<'a> {
    /// The input files.
    pub files: &'a [InputFile],
    /// Records per block: chunks end on a multiple of this.
    pub block: u64,
    /// Chunk size to aim for, in bytes.
    pub target_bytes: usize,
    /// Parquet: the columns to read (all when `None`).
    pub schema: Option<&'a Schema>,
    /// Bytes read from disk over all files so far.
    pub progress: Arc<AtomicU64>,
}

impl ChunkReader<'_> {
    /// Reads the ranges in order. Returns false when `emit` asked to stop.
    pub(super) fn read(
        &self,
        plan: &[FileRange],
        emit: &mut dyn FnMut(Chunk) -> bool,
    ) -> Result<bool, ConvertError> {
        for range in plan {
            let Some(file) = self.files.get(range.file) else {
                continue;
            };
            let before = self.progress.load(Ordering::Relaxed);
            let go_on = match file.format {
                #[cfg(feature = "convert")]
                Format::Parquet => self.read_parquet(range, file, emit)?,
                #[cfg(not(feature = "convert"))]
                Format::Parquet => return Err(no_parquet(file)),
                Format::TextFile => self.read_text_file(range, file, emit)?,
                _ => self.read_units(range, file, emit)?,
            };
            // Progress counts whole files once done, whatever was skipped.
            self.progress.store(before + file.size, Ordering::Relaxed);
            if !go_on {
                return Ok(false);
            }
        }
        Ok(true)
    }

    fn ctx(&self, range: &FileRange, file: &InputFile, header: Vec<String>) -> Arc<FileCtx> {
        Arc::new(FileCtx {
            index: range.file,
            display: file.display.clone(),
            format: file.format,
            header,
        })
    }

    fn read_text_file(
        &self,
        range: &FileRange,
        file: &InputFile,
        emit: &mut dyn FnMut(Chunk) -> bool,
    ) -> Result<bool, ConvertError> {
        if range.start > 0 || range.end == 0 {
            return Ok(true);
        }
        let base = self.progress.load(Ordering::Relaxed);
        let counter = Arc::new(AtomicU64::new(0));
        let stream = open_stream(file, counter.clone())?;
        let mut data = Vec::new();
        stream
            .take(MAX_RECORD_BYTES as u64 + 1)
            .read_to_end(&mut data)
            .map_err(|e| ConvertError::io(&file.display, e))?;
        if data.len() > MAX_RECORD_BYTES {
            return Err(ConvertError::input(
                &file.display,
                format!(
                    "larger than {} MiB, the most one record may hold",
                    MAX_RECORD_BYTES >> 20
                ),
            ));
        }
        Ok(emit(Chunk {
            file: self.ctx(range, file, Vec::new()),
            first_line: 1,
            first_record: 0,
            records: 1,
            data: ChunkData::Bytes(data),
            input_pos: base + counter.load(Ordering::Relaxed),
        }))
    }

    fn read_units(
        &self,
        range: &FileRange,
        file: &InputFile,
        emit: &mut dyn FnMut(Chunk) -> bool,
    ) -> Result<bool, ConvertError> {
        let csv = match file.format {
            Format::Csv { delimiter } => Some(delimiter),
            _ => None,
        };
        let base = self.progress.load(Ordering::Relaxed);
        let counter = Arc::new(AtomicU64::new(0));
        let mut stream = open_stream(file, counter.clone())?;
        let mut buf = vec![0u8; (self.target_bytes * 2).max(1 << 16)];
        let (mut len, mut pos, mut chunk_start) = (0usize, 0usize, 0usize);
        let mut eof = false;
        let mut line = 1u64; // line number at `pos`
        let mut chunk_line = 1u64; // line number at `chunk_start`
        let mut record = 0u64; // number of the next record
        let mut chunk_first: Option<u64> = None;
        let mut header: Option<Arc<FileCtx>> = if csv.is_some() {
            None
        } else {
            Some(self.ctx(range, file, Vec::new()))
        };
        let block = self.block.max(1);
        loop {
            let Some(unit) = split_unit(&buf[pos..len], eof, csv) else {
                if eof {
                    break;
                }
                if chunk_start > 0 {
                    buf.copy_within(chunk_start..len, 0);
                    len -= chunk_start;
                    pos -= chunk_start;
                    chunk_start = 0;
                }
                if len == buf.len() {
                    if len - pos > MAX_RECORD_BYTES {
                        return Err(ConvertError::input(
                            &file.display,
                            format!(
                                "line {line}: a record longer than {} MiB (is the format right?)",
                                MAX_RECORD_BYTES >> 20
                            ),
                        ));
                    }
                    buf.resize(buf.len() * 2, 0);
                }
                match stream.read(&mut buf[len..]) {
                    Ok(0) => eof = true,
                    Ok(n) => len += n,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e) => return Err(ConvertError::io(&file.display, e)),
                }
                continue;
            };
            let content = &buf[pos..pos + unit.content];
            let unit_line = line;
            pos += unit.len;
            line += unit.newlines;
            if let Some(delim) = csv {
                if csv_blank(content) {
                    if chunk_first.is_none() {
                        chunk_start = pos;
                        chunk_line = line;
                    }
                    continue;
                }
                if header.is_none() {
                    let names = csv_header(content, delim, &file.display, unit_line)?;
                    header = Some(self.ctx(range, file, names));
                    chunk_start = pos;
                    chunk_line = line;
                    continue;
                }
            }
            let r = record;
            if r >= range.end {
                // Give back the unit: it is not ours.
                pos -= unit.len;
                break;
            }
            record += 1;
            if r < range.start {
                chunk_start = pos;
                chunk_line = line;
                continue;
            }
            chunk_first.get_or_insert(r);
            if record.is_multiple_of(block) && pos - chunk_start >= self.target_bytes {
                let Some(ctx) = header.clone() else { continue };
                let first = chunk_first.take().unwrap_or(r);
                let go_on = emit(Chunk {
                    file: ctx,
                    first_line: chunk_line,
                    first_record: first,
                    records: record - first,
                    data: ChunkData::Bytes(buf[chunk_start..pos].to_vec()),
                    input_pos: base + counter.load(Ordering::Relaxed),
                });
                chunk_start = pos;
                chunk_line = line;
                if !go_on {
                    return Ok(false);
                }
            }
        }
        if let (Some(first), Some(ctx)) = (chunk_first, header) {
            let records = record - first;
            return Ok(emit(Chunk {
                file: ctx,
                first_line: chunk_line,
                first_record: first,
                records,
                data: ChunkData::Bytes(buf[chunk_start..pos].to_vec()),
                input_pos: base + counter.load(Ordering::Relaxed),
            }));
        }
        Ok(true)
    }

    #[cfg(feature = "convert")]
    fn read_parquet(
        &self,
        range: &FileRange,
        file: &InputFile,
        emit: &mut dyn FnMut(Chunk) -> bool,
    ) -> Result<bool, ConvertError> {
        let base = self.progress.load(Ordering::Relaxed);
        let builder = parquet_builder(file)?;
        let total = builder.metadata().file_metadata().num_rows().max(0) as u64;
        let start = range.start.min(total);
        let end = range.end.min(total);
        if start >= end {
            return Ok(true);
        }
        let mut builder = builder;
        if let Some(schema) = self.schema {
            let arrow = builder.schema().clone();
            let roots: Vec<usize> = schema
                .columns
                .iter()
                .filter_map(|c| arrow.index_of(&c.source).ok())
                .collect();
            let mask = ProjectionMask::roots(builder.parquet_schema(), roots);
            builder = builder.with_projection(mask);
        }
        let block = self.block.max(1) as usize;
        let batch = block * (8192 / block).max(1);
        let reader = builder
            .with_batch_size(batch)
            .with_offset(start as usize)
            .with_limit((end - start) as usize)
            .build()
            .map_err(|e| ConvertError::input(&file.display, format!("Parquet: {e}")))?;
        let ctx = self.ctx(range, file, Vec::new());
        let mut first = start;
        for batch in reader {
            let batch = batch.map_err(|e| {
                ConvertError::input(&file.display, format!("row {}: Parquet: {e}", first + 1))
            })?;
            let rows = batch.num_rows() as u64;
            let done = (first + rows - start) as f64 / (end - start) as f64;
            let go_on = emit(Chunk {
                file: ctx.clone(),
                first_line: 0,
                first_record: first,
                records: rows,
                data: ChunkData::Batch(batch),
                input_pos: base + (done * file.size as f64) as u64,
            });
            first += rows;
            if !go_on {
                return Ok(false);
            }
        }
        Ok(true)
    }
}

/// Opens a Parquet file (a compressed one is read into memory first).
#[cfg(feature = "convert")]
pub(super) fn parquet_builder(
    file: &InputFile,
) -> Result<ParquetRecordBatchReaderBuilder<ParquetSource>, ConvertError> {
    let source = match file.compression {
        InputCompression::None => ParquetSource::File(
            File::open(&file.path).map_err(|e| ConvertError::io(&file.display, e))?,
        ),
        _ => {
            let mut data = Vec::new();
            open_stream(file, Arc::new(AtomicU64::new(0)))?
                .read_to_end(&mut data)
                .map_err(|e| ConvertError::io(&file.display, e))?;
            ParquetSource::Memory(Bytes::from(data))
        }
    };
    ParquetRecordBatchReaderBuilder::try_new(source).map_err(|e| {
        ConvertError::input(&file.display, format!("not a readable Parquet file: {e}"))
    })
}

/// Where Parquet bytes come from: a file, or memory for a compressed file.
#[cfg(feature = "convert")]
pub(super) enum ParquetSource {
    /// A plain Parquet file.
    File(File),
    /// A decompressed Parquet file.
    Memory(Bytes),
}

#[cfg(feature = "convert")]
impl parquet::file::reader::Length for ParquetSource {
    fn len(&self) -> u64 {
        match self {
            ParquetSource::File(f) => f.len(),
            ParquetSource::Memory(b) => b.len() as u64,
        }
    }
}

#[cfg(feature = "convert")]
impl parquet::file::reader::ChunkReader for ParquetSource {
    type T = Box<dyn Read + Send>;

    fn get_read(&self, start: u64) -> parquet::errors::Result<Self::T> {
        Ok(match self {
            ParquetSource::File(f) => Box::new(f.get_read(start)?),
            ParquetSource::Memory(b) => Box::new(b.get_read(start)?),
        })
    }

    fn get_bytes(&self, start: u64, length: usize) -> parquet::errors::Result<Bytes> {
        match self {
            ParquetSource::File(f) => f.get_bytes(start, length),
            ParquetSource::Memory(b) => b.get_bytes(start, length),
        }
    }
}

/// Parquet without the `convert` feature (no parquet, arrow).
#[cfg(not(feature = "convert"))]
fn no_parquet(file: &InputFile) -> ConvertError {
    ConvertError::input(
        &file.display,
        "Parquet needs the `convert` feature (this build reads JSONL, CSV and text)",
    )
}

/// Number of records in a file (the same numbering as the chunks use).
pub(super) fn count_records(file: &InputFile) -> Result<u64, ConvertError> {
    match file.format {
        #[cfg(not(feature = "convert"))]
        Format::Parquet => Err(no_parquet(file)),
        #[cfg(feature = "convert")]
        Format::Parquet => Ok(parquet_builder(file)?
            .metadata()
            .file_metadata()
            .num_rows()
            .max(0) as u64),
        Format::TextFile => Ok(1),
        _ => {
            let reader = ChunkReader {
                files: std::slice::from_ref(file),
                block: 1,
                target_bytes: 4 << 20,
                schema: None,
                progress: Arc::new(AtomicU64::new(0)),
            };
            let mut count = 0;
            reader.read(
                &[FileRange {
                    file: 0,
                    start: 0,
                    end: u64::MAX,
                }],
                &mut |chunk| {
                    count += chunk.records;
                    true
                },
            )?;
            Ok(count)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields(rec: &str) -> Result<Vec<String>, &'static str> {
        let (mut out, mut ends) = (Vec::new(), Vec::new());
        parse_csv_fields(rec.as_bytes(), b',', &mut out, &mut ends)?;
        let mut start = 0;
        Ok(ends
            .iter()
            .map(|&e| {
                let s = String::from_utf8(out[start..e].to_vec()).expect("utf8");
                start = e;
                s
            })
            .collect())
    }

    #[test]
    fn csv_fields() {
        assert_eq!(
            fields("a,b,c"),
            Ok(vec!["a".into(), "b".into(), "c".into()])
        );
        assert_eq!(fields("a,,"), Ok(vec!["a".into(), "".into(), "".into()]));
        assert_eq!(
            fields("\"x,\"\"y\"\"\",2"),
            Ok(vec!["x,\"y\"".into(), "2".into()])
        );
        assert_eq!(fields("\"multi\nline\""), Ok(vec!["multi\nline".into()]));
        assert_eq!(
            fields("12\" pipe,3"),
            Ok(vec!["12\" pipe".into(), "3".into()])
        );
        assert_eq!(fields("\"open"), Err("a quoted field is not closed"));
        assert_eq!(
            fields("\"a\"b,1"),
            Err("text after the closing quote of a field")
        );
    }

    #[test]
    fn units_lines_and_csv() {
        assert_eq!(
            split_unit(b"ab\r\ncd", false, None),
            Some(Unit {
                len: 4,
                content: 2,
                newlines: 1
            })
        );
        assert_eq!(split_unit(b"cd", false, None), None);
        assert_eq!(
            split_unit(b"cd", true, None),
            Some(Unit {
                len: 2,
                content: 2,
                newlines: 0
            })
        );
        let csv = b"\"a\nb\",1\nnext";
        assert_eq!(
            split_unit(csv, false, Some(b',')),
            Some(Unit {
                len: 8,
                content: 7,
                newlines: 2
            })
        );
        assert_eq!(split_unit(b"\"open\n", false, Some(b',')), None);
        assert_eq!(
            split_unit(b"12\" x\n", false, Some(b',')),
            Some(Unit {
                len: 6,
                content: 5,
                newlines: 1
            })
        );
    }

    /// A byte-at-a-time state machine: the reference for `csv_record_end`.
    fn reference_end(buf: &[u8], delim: u8) -> (Option<usize>, u64) {
        #[derive(PartialEq)]
        enum S {
            Start,
            Plain,
            Quoted,
            QuoteInQuoted,
        }
        let mut st = S::Start;
        let mut newlines = 0;
        for (i, &b) in buf.iter().enumerate() {
            if b == b'\n' {
                newlines += 1;
                if st != S::Quoted {
                    return (Some(i), newlines);
                }
                continue;
            }
            st = match st {
                S::Start if b == b'"' => S::Quoted,
                S::Start | S::Plain if b == delim => S::Start,
                S::Start | S::Plain => S::Plain,
                S::Quoted if b == b'"' => S::QuoteInQuoted,
                S::Quoted => S::Quoted,
                S::QuoteInQuoted if b == b'"' => S::Quoted,
                S::QuoteInQuoted if b == delim => S::Start,
                S::QuoteInQuoted => S::Plain,
            };
        }
        (None, newlines)
    }

    proptest::proptest! {
        #[test]
        fn csv_record_end_matches_the_state_machine(s in "[a,\"\n]{0,40}") {
            proptest::prop_assert_eq!(csv_record_end(s.as_bytes(), b','), reference_end(s.as_bytes(), b','));
        }
    }

    #[test]
    fn formats_from_names() {
        assert_eq!(format_from_name("a/b.jsonl.gz", false), Some(Format::Jsonl));
        assert_eq!(
            format_from_name("x.TSV", false),
            Some(Format::Csv { delimiter: b'\t' })
        );
        assert_eq!(format_from_name("x.txt.zst", true), Some(Format::TextFile));
        assert_eq!(format_from_name("x.parquet", false), Some(Format::Parquet));
        assert_eq!(format_from_name("x.bin", false), None);
        assert_eq!(format_from_name("noext", false), None);
    }
}
