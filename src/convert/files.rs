//! Whole input files (JSONL, CSV, plain text; gzip or zstd) read with
//! `infeed convert`'s readers into a bundle's [`RowWriter`]: the Beam
//! transform `infeed.beam.ConvertFiles`, where the runner hands out file
//! paths and Rust does the reading, checking, encoding and writing.
//!
//! Records are what `infeed convert` reads from the same file (the same
//! blank-line, header and quoting rules, the same values); a bad record
//! fails the file with its line. With `group_to`, blocks are the file's
//! records `[k·B, (k+1)·B)` as in `infeed convert` (a blank JSONL line has a
//! number too), so a file's grouped records are the CLI's.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;

use super::bundle::{RowWriter, WriteError};
use super::encode::ColBuf;
use super::error::{BadRecord, ConvertError, Location};
use super::input::{self, ChunkData, ChunkReader, FileCtx, Format, InputFile};
use super::row::{Bad, RowParser};
use super::split::FileRange;

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

/// Per-file reading state.
struct FileState<'a> {
    parser: &'a RowParser,
    writer: &'a mut RowWriter,
    cols: Vec<ColBuf>,
    fields: Vec<u8>,
    ends: Vec<usize>,
    /// CSV: the field of each schema column in this file's header.
    csv_map: Option<Vec<usize>>,
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

    /// The records of one chunk of whole lines (or CSV records).
    fn units(
        &mut self,
        file: &FileCtx,
        data: &[u8],
        first_line: u64,
        first_record: u64,
    ) -> Result<(), ConvertError> {
        let csv = match file.format {
            Format::Csv { delimiter } => {
                self.csv_map(file)?;
                Some(delimiter)
            }
            _ => None,
        };
        let (mut pos, mut line, mut record) = (0usize, first_line, first_record);
        while let Some(unit) = input::split_unit(data.get(pos..).unwrap_or_default(), true, csv) {
            let content = data.get(pos..pos + unit.content).unwrap_or_default();
            let location = Location::Line(line);
            pos += unit.len;
            line += unit.newlines;
            let read = match csv {
                Some(delim) => {
                    if input::csv_blank(content) {
                        continue;
                    }
                    match input::parse_csv_fields(content, delim, &mut self.fields, &mut self.ends)
                    {
                        Err(m) => Err((None, super::error::BadKind::Csv(m))),
                        Ok(()) => self.parser.csv(
                            &self.fields,
                            &self.ends,
                            file.header.len(),
                            self.csv_map.as_deref().unwrap_or_default(),
                            &mut self.cols,
                        ),
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
        Ok(())
    }
}

/// Reads the file at `path` (of `format`; gzip or zstd compressed files are
/// recognized by their first bytes) and writes its records through `writer`,
/// whose input schema is the features. Columns of the input outside the
/// schema are errors unless `ignore_unknown`; a missing or null value is an
/// error unless `null_omit`. Parquet is refused (`infeed convert` reads it).
pub fn write_file(
    path: PathBuf,
    format: Format,
    writer: &mut RowWriter,
    null_omit: bool,
    ignore_unknown: bool,
) -> Result<FileRead, ConvertError> {
    let file: InputFile = input::input_file(path, format)?;
    if format == Format::Parquet {
        return Err(ConvertError::input(
            &file.display,
            "Parquet is not read here: use infeed convert, or read it with Beam and WriteTFRecords",
        ));
    }
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
        block,
        current_block: None,
        records: 0,
    };
    let reader = ChunkReader {
        files: std::slice::from_ref(&file),
        block: block.unwrap_or(1),
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
            ChunkData::Bytes(data) => st.units(&ctx, data, chunk.first_line, chunk.first_record),
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
    Ok(FileRead {
        display: file.display.clone(),
        format: format.name(),
        bytes: file.size,
        records: st.records,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::convert::schema::{Schema, SchemaColumn, Shape, ValueType};
    use crate::convert::shard::ShardLimit;
    use crate::convert::sink::{LocalSink, ShardSink};
    use crate::record::Compression;

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

    #[test]
    fn jsonl_and_csv_records_are_counted_and_bad_lines_named() {
        let dir = tempfile::tempdir().unwrap();
        let sink: Arc<dyn ShardSink> = Arc::new(LocalSink::new(dir.path().join("out")).unwrap());
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
        let mut w = RowWriter::new(
            sink,
            "train",
            "t1",
            schema(),
            None,
            Compression::None,
            ShardLimit::Records(100),
        )
        .unwrap();
        let a = write_file(jsonl, Format::Jsonl, &mut w, false, false).unwrap();
        assert_eq!((a.records, a.format), (2, "jsonl"));
        let b = write_file(csv, Format::Csv { delimiter: b',' }, &mut w, false, false).unwrap();
        assert_eq!((b.records, b.format), (2, "csv"));
        let err = write_file(bad, Format::Jsonl, &mut w, false, false).unwrap_err();
        assert!(err.to_string().contains("line 2"), "{err}");
        let closed = w.finish().unwrap();
        assert_eq!(closed.iter().map(|c| c.records).sum::<u64>(), 5);
    }
}
