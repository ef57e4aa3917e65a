//! Input files (JSONL, CSV, plain text; gzip or zstd), whole or by byte
//! ranges, read with `infeed convert`'s readers into a bundle's
//! [`RowWriter`]: the Beam transform `infeed.beam.ConvertFiles`, where the
//! runner hands out files (or ranges of a large file, [`split_file`]) and
//! Rust does the reading, checking, encoding and writing. A file is a local
//! path or a `gs://`, `s3://`, `az://`, `http(s)://` URL read through
//! [`crate::source`].
//!
//! Records are what `infeed convert` reads from the same file (the same
//! blank-line, header and quoting rules, the same values); a bad record
//! fails the file with its line (in a range that does not start the file,
//! its byte offset). With `group_to`, blocks are the file's records
//! `[k·B, (k+1)·B)` as in `infeed convert` (a blank JSONL line has a number
//! too), so a file's grouped records are the CLI's; grouped files are read
//! whole (the caller does not split them: a range does not know its
//! records' numbers).

use std::sync::Arc;
use std::sync::atomic::AtomicU64;

use super::bundle::{RowWriter, WriteError};
use super::byte_range;
use super::encode::ColBuf;
use super::error::{BadKind, BadRecord, ConvertError, Location};
use super::input::{self, ChunkData, ChunkReader, FileCtx, Format, InputCompression, InputFile};
use super::row::{Bad, RowParser};
use super::split::FileRange;

/// Where a piece of a file starts, for the locations of its records.
#[derive(Clone, Copy, Debug)]
enum Origin {
    /// At this line (1-based): the file is read from its start.
    Line(u64),
    /// At this byte offset, line unknown (a range of a split file).
    Byte(u64),
}

/// What one file gave.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileRead {
    /// The file as the manifest names it.
    pub display: String,
    /// Its format's name.
    pub format: &'static str,
    /// Its size on disk.
    pub bytes: u64,
    /// Records read (blank JSONL lines and the CSV header not counted).
    pub records: u64,
}

/// How [`split_file`] cuts a file.
#[derive(Clone, Copy, Debug)]
pub struct SplitOptions {
    /// Range size to aim for, in bytes (0: never split).
    pub bytes: u64,
    /// The user's word that no quoted CSV field holds a line break, so a
    /// CSV (TSV) file may be cut at line breaks like JSONL. Without it CSV
    /// files are read whole. Given wrongly, the range that owns the first
    /// line of a record spanning lines fails (never a wrong record).
    pub csv_one_line: bool,
}

/// The byte ranges `[start, end)` that several workers may read of the file
/// `name` (a path or URL), or `None` when it is read whole: compressed
/// (gzip and zstd streams cannot be entered in the middle), CSV without
/// [`SplitOptions::csv_one_line`], not larger than one range, or a format
/// that is not read line by line.
pub fn split_file(
    name: &str,
    format: Format,
    options: SplitOptions,
) -> Result<Option<Vec<(u64, u64)>>, ConvertError> {
    let splittable = match format {
        Format::Jsonl | Format::TextLines => true,
        Format::Csv { .. } => options.csv_one_line,
        Format::TextFile | Format::Parquet => false,
    };
    if !splittable || options.bytes == 0 {
        return Ok(None);
    }
    let file = input::input_at(name, format)?;
    if file.compression != InputCompression::None || file.size <= options.bytes {
        return Ok(None);
    }
    Ok(Some(byte_range::split(file.size, options.bytes)))
}

/// Per-file reading state.
struct FileState<'a> {
    parser: &'a RowParser,
    writer: &'a mut RowWriter,
    cols: Vec<ColBuf>,
    fields: Vec<u8>,
    ends: Vec<usize>,
    /// CSV: the field of each schema column in this file's header.
    csv_map: Option<Vec<usize>>,
    /// A CSV record must be one line (a byte range of a split file).
    one_line: bool,
    block: Option<u64>,
    current_block: Option<u64>,
    records: u64,
}

impl FileState<'_> {
    /// Writes the record numbered `record` whose columns `read` filled.
    fn record(
        &mut self,
        file: &FileCtx,
        record: u64,
        location: Location,
        read: Result<(), Bad>,
    ) -> Result<(), ConvertError> {
        let bad = |(column, kind)| -> ConvertError {
            BadRecord {
                file: file.display.clone(),
                location,
                column,
                kind,
            }
            .into()
        };
        read.map_err(bad)?;
        if let Some(block) = self.block {
            let b = record / block.max(1);
            if self.current_block.is_some_and(|c| c != b) {
                self.end_block(file)?;
            }
            self.current_block = Some(b);
        }
        self.records += 1;
        self.writer.write(&self.cols).map_err(|e| match e {
            WriteError::Bad(column, kind) => bad((Some(column), kind)),
            WriteError::Output(e) => e,
        })
    }

    fn end_block(&mut self, file: &FileCtx) -> Result<(), ConvertError> {
        self.current_block = None;
        self.writer.end_block().map_err(|e| match e {
            WriteError::Output(e) => e,
            WriteError::Bad(column, kind) => BadRecord {
                file: file.display.clone(),
                location: Location::File,
                column: Some(column),
                kind,
            }
            .into(),
        })
    }

    fn csv_map(&mut self, file: &FileCtx) -> Result<(), ConvertError> {
        if self.csv_map.is_some() {
            return Ok(());
        }
        let map = file.csv_columns(&self.parser.schema, self.parser.ignore_unknown, |extra| {
            format!("line 1: column {extra:?} is not among the features")
        })?;
        self.csv_map = Some(map);
        Ok(())
    }

    /// The records of one chunk of whole lines (or CSV records) that
    /// starts at `origin`; gives where the next chunk starts.
    fn units(
        &mut self,
        file: &FileCtx,
        data: &[u8],
        origin: Origin,
        first_record: u64,
    ) -> Result<Origin, ConvertError> {
        let csv = match file.format {
            Format::Csv { delimiter } => {
                self.csv_map(file)?;
                Some(delimiter)
            }
            _ => None,
        };
        let (mut pos, mut line, mut record) = (0usize, 0u64, first_record);
        while let Some(unit) = input::split_unit(data.get(pos..).unwrap_or_default(), true, csv) {
            let content = data.get(pos..pos + unit.content).unwrap_or_default();
            let location = match origin {
                Origin::Line(first) => Location::Line(first + line),
                Origin::Byte(at) => Location::Byte(at + pos as u64),
            };
            pos += unit.len;
            line += unit.newlines;
            let read = match csv {
                Some(delim) => {
                    if input::csv_blank(content) {
                        continue;
                    }
                    if self.one_line && memchr::memchr(b'\n', content).is_some() {
                        Err((None, BadKind::Csv(SPANS_LINES)))
                    } else {
                        match input::parse_csv_fields(
                            content,
                            delim,
                            &mut self.fields,
                            &mut self.ends,
                        ) {
                            Err(m) => Err((None, BadKind::Csv(m))),
                            Ok(()) => self.parser.csv(
                                &self.fields,
                                &self.ends,
                                file.header.len(),
                                self.csv_map.as_deref().unwrap_or_default(),
                                &mut self.cols,
                            ),
                        }
                    }
                }
                None if file.format == Format::Jsonl => {
                    if content.iter().all(u8::is_ascii_whitespace) {
                        record += 1;
                        continue;
                    }
                    self.parser.json(content, &mut self.cols)
                }
                None => {
                    self.parser.text(content, &mut self.cols);
                    Ok(())
                }
            };
            self.record(file, record, location, read)?;
            record += 1;
        }
        Ok(match origin {
            Origin::Line(first) => Origin::Line(first + line),
            Origin::Byte(at) => Origin::Byte(at + data.len() as u64),
        })
    }
}

/// A CSV record that spans lines in a file split at line breaks.
const SPANS_LINES: &str = "a quoted field holds a line break, so this file cannot be split at line breaks (ConvertFiles: leave csv_one_line False to read CSV files whole)";

/// Reads the file `name` (a path or URL of `format`; gzip or zstd
/// compressed files are recognized by their first bytes) and writes its
/// records through `writer`, whose input schema is the features: the whole
/// file, or with `range` the lines that start in those bytes of an
/// uncompressed file ([`split_file`]; CSV records must then be one line
/// each). Columns of the input outside the schema are errors unless
/// `ignore_unknown`; a missing or null value is an error unless
/// `null_omit`. Parquet is refused (`infeed convert` reads it).
pub fn write_file(
    name: &str,
    format: Format,
    range: Option<(u64, u64)>,
    writer: &mut RowWriter,
    null_omit: bool,
    ignore_unknown: bool,
) -> Result<FileRead, ConvertError> {
    if format == Format::Parquet {
        return Err(ConvertError::input(
            name,
            "Parquet is not read here: use infeed convert, or read it with Beam and WriteTFRecords",
        ));
    }
    let file: InputFile = input::input_at(name, format)?;
    let parser = RowParser::new(writer.input_schema().clone(), null_omit, ignore_unknown);
    let block = writer.group_block();
    let width = parser.schema.columns.len();
    let mut st = FileState {
        parser: &parser,
        writer,
        cols: vec![ColBuf::default(); width],
        fields: Vec::new(),
        ends: Vec::new(),
        csv_map: None,
        one_line: range.is_some(),
        block,
        current_block: None,
        records: 0,
    };
    match range {
        Some((start, end)) => write_range(&file, start, end, &mut st)?,
        None => write_whole(&file, &mut st)?,
    }
    Ok(FileRead {
        display: file.display.clone(),
        format: format.name(),
        bytes: file.size,
        records: st.records,
    })
}

/// The whole file, with the CLI's chunk reader.
fn write_whole(file: &InputFile, st: &mut FileState<'_>) -> Result<(), ConvertError> {
    let reader = ChunkReader {
        files: std::slice::from_ref(file),
        block: st.block.unwrap_or(1),
        target_bytes: 1 << 20,
        schema: None,
        progress: Arc::new(AtomicU64::new(0)),
    };
    let whole = FileRange {
        file: 0,
        start: 0,
        end: u64::MAX,
    };
    let mut failed = None;
    let mut last: Option<Arc<FileCtx>> = None;
    reader.read(&[whole], &mut |chunk| {
        let ctx = chunk.file.clone();
        let done = match &chunk.data {
            ChunkData::Bytes(data) if ctx.format == Format::TextFile => {
                st.parser.text(data, &mut st.cols);
                st.record(&ctx, 0, Location::File, Ok(()))
            }
            ChunkData::Bytes(data) => st
                .units(
                    &ctx,
                    data,
                    Origin::Line(chunk.first_line),
                    chunk.first_record,
                )
                .map(|_| ()),
            #[cfg(feature = "convert")]
            ChunkData::Batch(_) => Err(ConvertError::input(&ctx.display, "Parquet")),
        };
        last = Some(ctx);
        match done {
            Ok(()) => true,
            Err(e) => {
                failed = Some(e);
                false
            }
        }
    })?;
    if let Some(e) = failed {
        return Err(e);
    }
    // A file's last block ends with the file.
    if let Some(ctx) = last {
        st.end_block(&ctx)?;
    }
    Ok(())
}

/// The records whose lines start in `[start, end)` of an uncompressed file
/// (see `byte_range`).
fn write_range(
    file: &InputFile,
    start: u64,
    end: u64,
    st: &mut FileState<'_>,
) -> Result<(), ConvertError> {
    if file.compression != InputCompression::None {
        return Err(ConvertError::input(
            &file.display,
            "a compressed file is read whole, not by byte ranges",
        ));
    }
    if st.block.is_some() {
        return Err(ConvertError::input(
            &file.display,
            "with group_to a file is read whole (its blocks count records from its start)",
        ));
    }
    // The first byte a record may start at, the line there, the header.
    let (first, first_line, header) = match file.format {
        Format::Csv { delimiter } => {
            // A header is short: small reads of an object, not 8 MiB ones.
            let mut src = input::open_raw(file, 0, 64 << 10)?;
            match byte_range::csv_header(&mut src, delimiter, &file.display)? {
                Some((names, after, line)) => (after, line, names),
                None => return Ok(()), // blank lines only
            }
        }
        Format::Jsonl | Format::TextLines => (0, 1, Vec::new()),
        Format::TextFile | Format::Parquet => {
            return Err(ConvertError::input(
                &file.display,
                format!("{} is not read by byte ranges", file.format.name()),
            ));
        }
    };
    let begin = start.max(first);
    if begin >= end {
        return Ok(());
    }
    let ctx = FileCtx {
        index: 0,
        display: file.display.clone(),
        format: file.format,
        header,
    };
    // Lines are counted from the file's first record on; a range that
    // starts later names its records' byte offsets.
    let mut origin = if begin == first {
        Origin::Line(first_line)
    } else {
        Origin::Byte(begin)
    };
    let mut src = input::open_raw(file, begin.saturating_sub(1), end)?;
    byte_range::read_lines(
        &mut *src,
        begin,
        end,
        1 << 20,
        &file.display,
        &mut |data, at| {
            if let Origin::Byte(_) = origin {
                origin = Origin::Byte(at);
            }
            origin = st.units(&ctx, data, origin, 0)?;
            Ok(true)
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::convert::schema::{Schema, SchemaColumn, Shape, ValueType};
    use crate::convert::shard::ShardLimit;
    use crate::convert::sink::{LocalSink, ShardSink};
    use crate::record::Compression;
    use std::path::Path;

    const CSV: Format = Format::Csv { delimiter: b',' };

    fn schema() -> Schema {
        let col = |name: &str, vtype| SchemaColumn {
            source: name.into(),
            name: name.into(),
            vtype,
            shape: Shape::Scalar,
        };
        Schema {
            columns: vec![col("id", ValueType::Int64), col("text", ValueType::Bytes)],
        }
    }

    fn path(p: &Path) -> String {
        p.to_str().expect("a UTF-8 path").to_owned()
    }

    fn writer(dir: &Path, schema: Schema) -> RowWriter {
        let sink: Arc<dyn ShardSink> = Arc::new(LocalSink::new(dir).unwrap());
        RowWriter::new(
            sink,
            "train",
            "t1",
            schema,
            None,
            Compression::None,
            ShardLimit::Records(1000),
        )
        .unwrap()
    }

    /// The payloads of the shards `w` wrote, sorted (a multiset).
    fn payloads(dir: &Path, w: RowWriter) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        for shard in w.finish().unwrap() {
            let data = std::fs::read(dir.join(&shard.temp)).unwrap();
            let mut pos = 0;
            while pos < data.len() {
                let len = u64::from_le_bytes(data[pos..pos + 8].try_into().unwrap()) as usize;
                out.push(data[pos + 12..pos + 12 + len].to_vec());
                pos += 12 + len + 4;
            }
        }
        out.sort();
        out
    }

    /// Reads `file` whole, then by ranges of `bytes`: the records, and the
    /// records counted, are the same.
    fn ranges_equal_whole(dir: &Path, file: &Path, format: Format, schema: &Schema, bytes: u64) {
        let name = path(file);
        let mut whole = writer(&dir.join("whole"), schema.clone());
        let want = write_file(&name, format, None, &mut whole, false, false).unwrap();
        let want_records = payloads(&dir.join("whole"), whole);
        let options = SplitOptions {
            bytes,
            csv_one_line: true,
        };
        let ranges = split_file(&name, format, options).unwrap().expect("split");
        let out = dir.join(format!("ranges-{bytes}"));
        let mut w = writer(&out, schema.clone());
        let mut counted = 0;
        for range in &ranges {
            let read = write_file(&name, format, Some(*range), &mut w, false, false).unwrap();
            assert_eq!(read.bytes, want.bytes);
            counted += read.records;
        }
        assert_eq!(counted, want.records, "ranges of {bytes}");
        assert_eq!(payloads(&out, w), want_records, "ranges of {bytes}");
    }

    #[test]
    fn jsonl_and_csv_records_are_counted_and_bad_lines_named() {
        let dir = tempfile::tempdir().unwrap();
        let jsonl = dir.path().join("a.jsonl");
        std::fs::write(
            &jsonl,
            "{\"id\": 1, \"text\": \"x\"}\n\n{\"id\": 2, \"text\": \"y\"}\n",
        )
        .unwrap();
        let csv = dir.path().join("b.csv");
        std::fs::write(&csv, "text,id\n\"a,b\",3\n\nc,4\n").unwrap();
        let bad = dir.path().join("c.jsonl");
        std::fs::write(
            &bad,
            "{\"id\": 1, \"text\": \"x\"}\n{\"id\": \"no\", \"text\": \"y\"}\n",
        )
        .unwrap();
        let mut w = writer(&dir.path().join("out"), schema());
        let a = write_file(&path(&jsonl), Format::Jsonl, None, &mut w, false, false).unwrap();
        assert_eq!((a.records, a.format), (2, "jsonl"));
        let b = write_file(&path(&csv), CSV, None, &mut w, false, false).unwrap();
        assert_eq!((b.records, b.format), (2, "csv"));
        let err = write_file(&path(&bad), Format::Jsonl, None, &mut w, false, false).unwrap_err();
        assert!(err.to_string().contains("line 2"), "{err}");
        let closed = w.finish().unwrap();
        assert_eq!(closed.iter().map(|c| c.records).sum::<u64>(), 5);
    }

    #[test]
    fn byte_ranges_read_the_records_of_the_whole_file() {
        let dir = tempfile::tempdir().unwrap();
        // Blank lines, CRLF, a line longer than many ranges, a last line
        // without its line break.
        let mut jsonl = String::new();
        let mut csv = String::from("\r\nid,text\r\n");
        let mut text = String::new();
        for i in 0..60 {
            let t = if i == 17 {
                "w".repeat(300)
            } else {
                format!("row {i} é")
            };
            jsonl.push_str(&format!("{{\"id\": {i}, \"text\": \"{t}\"}}"));
            jsonl.push_str(if i % 3 == 0 { "\r\n" } else { "\n" });
            if i % 7 == 0 {
                jsonl.push('\n');
                csv.push('\n');
                text.push('\n');
            }
            csv.push_str(&format!(
                "{i},\"{t}, \"\"q\"\"\"{}",
                if i % 2 == 0 { "\r\n" } else { "\n" }
            ));
            text.push_str(&format!("{t}\r\n"));
        }
        jsonl.push_str("{\"id\": 60, \"text\": \"last\"}");
        csv.push_str("60,last");
        text.push_str("last");
        let text_schema = Schema {
            columns: vec![SchemaColumn {
                source: "text".into(),
                name: "text".into(),
                vtype: ValueType::Bytes,
                shape: Shape::Scalar,
            }],
        };
        for (name, data, format, schema) in [
            ("a.jsonl", &jsonl, Format::Jsonl, schema()),
            ("b.csv", &csv, CSV, schema()),
            ("c.txt", &text, Format::TextLines, text_schema),
        ] {
            let file = dir.path().join(name);
            std::fs::write(&file, data).unwrap();
            for bytes in [1, 2, 7, 64, 500] {
                let out = dir.path().join(format!("{name}-out"));
                ranges_equal_whole(&out, &file, format, &schema, bytes);
            }
        }
    }

    #[test]
    fn what_is_read_whole() {
        let dir = tempfile::tempdir().unwrap();
        let split = |file: &Path, format, csv_one_line| {
            let options = SplitOptions {
                bytes: 10,
                csv_one_line,
            };
            split_file(&path(file), format, options).unwrap()
        };
        let jsonl = dir.path().join("a.jsonl");
        std::fs::write(&jsonl, "{\"id\": 1}\n".repeat(10)).unwrap();
        assert_eq!(
            split(&jsonl, Format::Jsonl, false).map(|r| r.len()),
            Some(10)
        );
        let csv = dir.path().join("b.csv");
        std::fs::write(&csv, "id\n1\n2\n3\n4\n5\n6\n").unwrap();
        assert_eq!(split(&csv, CSV, false), None, "CSV only when told so");
        assert_eq!(split(&csv, CSV, true).map(|r| r.len()), Some(2));
        let small = dir.path().join("c.jsonl");
        std::fs::write(&small, "{}\n").unwrap();
        assert_eq!(split(&small, Format::Jsonl, false), None, "one range");
        let gz = dir.path().join("d.jsonl.gz");
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        std::io::Write::write_all(&mut enc, "{\"id\": 1}\n".repeat(100).as_bytes()).unwrap();
        std::fs::write(&gz, enc.finish().unwrap()).unwrap();
        assert_eq!(split(&gz, Format::Jsonl, false), None, "gzip is read whole");
        let mut w = writer(&dir.path().join("out"), schema());
        let err = write_file(
            &path(&gz),
            Format::Jsonl,
            Some((0, 10)),
            &mut w,
            true,
            false,
        )
        .unwrap_err();
        assert!(err.to_string().contains("read whole"), "{err}");
        w.abort();
    }

    #[test]
    fn a_range_names_bad_records_by_line_or_byte_and_refuses_multiline_csv() {
        let dir = tempfile::tempdir().unwrap();
        let jsonl = dir.path().join("a.jsonl");
        std::fs::write(
            &jsonl,
            "{\"id\": 1, \"text\": \"x\"}\n{\"id\": \"no\", \"text\": \"y\"}\n",
        )
        .unwrap();
        let mut w = writer(&dir.path().join("out"), schema());
        let name = path(&jsonl);
        // The second line starts at byte 23: in a range from 0 it is line 2,
        // in a range from 20 byte 23.
        let err =
            write_file(&name, Format::Jsonl, Some((0, 30)), &mut w, false, false).unwrap_err();
        assert!(
            err.to_string()
                .ends_with("line 2: column \"id\": expected int64, found string \"no\""),
            "{err}"
        );
        let err =
            write_file(&name, Format::Jsonl, Some((20, 30)), &mut w, false, false).unwrap_err();
        assert!(
            err.to_string().contains("a.jsonl: byte 23: column \"id\""),
            "{err}"
        );
        // A quoted line break in a CSV read by ranges: the range that owns
        // the record's first line fails; read whole, the file is fine.
        let csv = dir.path().join("b.csv");
        std::fs::write(&csv, "id,text\n1,\"two\nlines\"\n2,b\n").unwrap();
        let name = path(&csv);
        let err = write_file(&name, CSV, Some((0, 10)), &mut w, false, false).unwrap_err();
        assert!(
            err.to_string()
                .contains("line 2: malformed CSV: a quoted field holds a line break"),
            "{err}"
        );
        let read = write_file(&name, CSV, None, &mut w, false, false).unwrap();
        assert_eq!(read.records, 2);
        w.abort();
    }
}
