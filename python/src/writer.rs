//! The writing half of `infeed convert` for `infeed.beam`: rows (Python
//! dicts) checked against a schema of `--feature` words, encoded as
//! `tf.train.Example` by the Rust encoder and written into shards of one
//! bundle attempt ([`RowWriter`]); [`finalize`] commits the attempts that
//! succeeded; [`resolve_feature`] turns what schema inference saw into a
//! `--feature` word with `infeed convert`'s rules.

use std::path::PathBuf;
use std::sync::Mutex;

use infeed::convert::bundle::{self, WriteError};
use infeed::convert::files;
use infeed::convert::schema::{Observed, Seen};
use infeed::convert::{
    BadKind, Closed, ColBuf, ConvertError, FeatureArg, Format, Naming, OutputLayout, Schema,
    SchemaColumn, Shape, ShardLimit, TfdsTarget, TokenMode, TokenizeOptions, ValueType,
};
use infeed::record::Compression;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyBytes, PyDict, PyFloat, PyInt, PyString};

use crate::errors;

/// A closed temporary shard as Python holds it: `(temp name, records, bytes, crc32c)`.
type ClosedTuple = (String, u64, u64, u32);

/// What `finalize` gives: the manifest's name and `(shard name, records, bytes)`.
type Finalized = (String, Vec<(String, u64, u64)>);

/// The input schema from `--feature` words (`name:int64`, `ids:int64[]`, …).
fn schema_of(py: Python<'_>, features: &[String]) -> PyResult<Schema> {
    let mut columns = Vec::new();
    for word in features {
        let f: FeatureArg = word
            .parse()
            .map_err(|e: String| errors::convert_message(py, e, None))?;
        if columns.iter().any(|c: &SchemaColumn| c.source == f.name) {
            return Err(errors::convert_message(
                py,
                format!("feature {:?} is given twice", f.name),
                Some(f.name),
            ));
        }
        columns.push(SchemaColumn {
            source: f.name.clone(),
            name: f.name,
            vtype: f.vtype,
            shape: f.shape,
        });
    }
    if columns.is_empty() {
        return Err(errors::convert_message(py, "no features".into(), None));
    }
    Ok(Schema { columns })
}

fn compression(py: Python<'_>, name: &str) -> PyResult<Compression> {
    match name.to_ascii_lowercase().as_str() {
        "" | "none" => Ok(Compression::None),
        "gzip" => Ok(Compression::Gzip),
        "zlib" => Ok(Compression::Zlib),
        other => Err(errors::convert_message(
            py,
            format!("unknown compression {other:?}: use none, gzip or zlib"),
            None,
        )),
    }
}

/// Tokenization settings from the transform's arguments.
fn tokenize_options(
    tokenizer: Option<String>,
    text_column: String,
    max_length: Option<usize>,
    group_to: Option<usize>,
    group_block: u64,
    add_special_tokens: bool,
) -> Option<TokenizeOptions> {
    tokenizer.map(|path| {
        TokenizeOptions::new(PathBuf::from(path))
            .text_column(text_column)
            .mode(match (max_length, group_to) {
                (Some(n), _) => TokenMode::Truncate(n),
                (None, Some(len)) => TokenMode::Group {
                    len,
                    block: group_block,
                },
                (None, None) => TokenMode::Full,
            })
            .add_special_tokens(add_special_tokens)
    })
}

/// Writes one bundle attempt's rows into shards under temporary names.
#[pyclass(module = "infeed._infeed")]
pub struct RowWriter {
    /// In a mutex for `Sync` only (a shard's writer is `Send`, not `Sync`):
    /// every method holds `&mut self`, so it is never contended.
    inner: Mutex<Option<bundle::RowWriter>>,
    /// Filled columns of rows waiting to be encoded (reused).
    rows: Vec<Vec<ColBuf>>,
    null_omit: bool,
    ignore_unknown: bool,
    /// Names the attempt in errors.
    label: String,
}

impl RowWriter {
    fn inner_mut(&mut self) -> &mut Option<bundle::RowWriter> {
        self.inner.get_mut().unwrap_or_else(|e| e.into_inner())
    }

    /// Checks `row` against the schema into `cols`.
    fn fill(
        &self,
        row: &Bound<'_, PyAny>,
        schema: &Schema,
        cols: &mut [ColBuf],
    ) -> Result<(), (Option<String>, BadKind)> {
        let dict = row.cast::<PyDict>().map_err(|_| {
            (
                None,
                BadKind::WrongType {
                    expected: "a dict of feature values".into(),
                    found: type_name(row),
                },
            )
        })?;
        for (col, buf) in schema.columns.iter().zip(cols.iter_mut()) {
            buf.clear();
            let at = || Some(col.source.clone());
            let value = dict
                .get_item(&col.source)
                .map_err(|_| (at(), BadKind::Missing))?;
            let value = match value {
                Some(v) if !v.is_none() => v,
                missing => {
                    if self.null_omit {
                        continue;
                    }
                    let kind = if missing.is_some() {
                        BadKind::Null
                    } else {
                        BadKind::Missing
                    };
                    return Err((at(), kind));
                }
            };
            buf.present = true;
            fill_column(&value, col, buf).map_err(|k| (at(), k))?;
        }
        if !self.ignore_unknown && dict.len() > schema.columns.len() {
            for key in dict.keys() {
                let key = key.str().map(|s| s.to_string()).unwrap_or_default();
                if schema.position(&key).is_none() {
                    return Err((Some(key), BadKind::UnknownColumn));
                }
            }
        }
        Ok(())
    }
}

fn type_name(v: &Bound<'_, PyAny>) -> String {
    v.get_type()
        .name()
        .map(|n| n.to_string())
        .unwrap_or_else(|_| "?".into())
}

/// One value of a column into `buf`.
fn push_value(v: &Bound<'_, PyAny>, col: &SchemaColumn, buf: &mut ColBuf) -> Result<(), BadKind> {
    let wrong = || BadKind::WrongType {
        expected: col.describe(),
        found: type_name(v),
    };
    match col.vtype {
        ValueType::Int64 => {
            if v.is_instance_of::<PyFloat>() || v.is_instance_of::<PyString>() {
                return Err(wrong());
            }
            if v.is_instance_of::<PyBool>() {
                buf.ints.push(i64::from(v.is_truthy().unwrap_or(false)));
                return Ok(());
            }
            match v.extract::<i64>() {
                Ok(i) => buf.ints.push(i),
                Err(_) if v.is_instance_of::<PyInt>() => {
                    return Err(BadKind::OutOfRange {
                        value: v.str().map(|s| s.to_string()).unwrap_or_default(),
                        dtype: "int64",
                    });
                }
                Err(_) => return Err(wrong()),
            }
        }
        ValueType::Float => {
            if v.is_instance_of::<PyString>() || v.is_instance_of::<PyBytes>() {
                return Err(wrong());
            }
            let out_of_range = || BadKind::OutOfRange {
                value: v.str().map(|s| s.to_string()).unwrap_or_default(),
                dtype: "float",
            };
            if v.is_instance_of::<PyInt>() && !v.is_instance_of::<PyBool>() {
                // An integer becomes float32 only when float32 holds it exactly.
                let i = v.extract::<i64>().map_err(|_| out_of_range())?;
                let f = i as f32;
                if f as i64 != i || f64::from(f) != i as f64 {
                    return Err(out_of_range());
                }
                buf.floats.push(f);
                return Ok(());
            }
            let f = v.extract::<f64>().map_err(|_| wrong())?;
            let g = f as f32;
            if f.is_finite() && !g.is_finite() {
                return Err(out_of_range());
            }
            buf.floats.push(g);
        }
        ValueType::Bytes => {
            if let Ok(s) = v.cast::<PyString>() {
                let s = s.to_str().map_err(|_| BadKind::Utf8)?;
                buf.push_bytes(s.as_bytes());
            } else if let Ok(b) = v.cast::<PyBytes>() {
                buf.push_bytes(b.as_bytes());
            } else {
                return Err(wrong());
            }
        }
    }
    Ok(())
}

/// A record's value of `col` (a scalar, or a list of the column's length).
fn fill_column(v: &Bound<'_, PyAny>, col: &SchemaColumn, buf: &mut ColBuf) -> Result<(), BadKind> {
    if col.shape == Shape::Scalar {
        return push_value(v, col, buf);
    }
    let is_text = v.is_instance_of::<PyString>() || v.is_instance_of::<PyBytes>();
    let items = match v.try_iter() {
        Ok(items) if !is_text && !v.is_instance_of::<PyDict>() => items,
        _ => {
            return Err(BadKind::WrongType {
                expected: col.describe(),
                found: type_name(v),
            });
        }
    };
    for item in items {
        let item = item.map_err(|e| BadKind::WrongType {
            expected: col.describe(),
            found: e.to_string(),
        })?;
        push_value(&item, col, buf)?;
    }
    if let Shape::Fixed(n) = col.shape {
        let found = buf.len(col.vtype);
        if found != n {
            return Err(BadKind::WrongLength { expected: n, found });
        }
    }
    Ok(())
}

fn write_error(py: Python<'_>, label: &str, index: usize, e: WriteError) -> PyErr {
    match e {
        WriteError::Bad(column, kind) => errors::bad_row(py, label, index, Some(column), &kind),
        WriteError::Output(e) => errors::convert(py, e),
    }
}

#[pymethods]
impl RowWriter {
    /// A writer of one attempt (`attempt`: unique per attempt) of shards of
    /// `stem` into `output` (a folder or gs://, s3://, az:// prefix).
    #[new]
    #[pyo3(signature = (output, stem, attempt, features, *, compression = "none",
        shard_bytes = None, records_per_shard = None, tokenizer = None,
        text_column = "text".to_string(), max_length = None, group_to = None,
        group_block = 1000, add_special_tokens = true, null_omit = false,
        ignore_unknown = false))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        output: &str,
        stem: &str,
        attempt: &str,
        features: Vec<String>,
        compression: &str,
        shard_bytes: Option<u64>,
        records_per_shard: Option<u64>,
        tokenizer: Option<String>,
        text_column: String,
        max_length: Option<usize>,
        group_to: Option<usize>,
        group_block: u64,
        add_special_tokens: bool,
        null_omit: bool,
        ignore_unknown: bool,
    ) -> PyResult<Self> {
        let schema = schema_of(py, &features)?;
        let compression = self::compression(py, compression)?;
        let limit = match records_per_shard {
            Some(n) => ShardLimit::Records(n),
            None => ShardLimit::Bytes(shard_bytes.unwrap_or(infeed::convert::DEFAULT_SHARD_BYTES)),
        };
        let tok = tokenize_options(
            tokenizer,
            text_column,
            max_length,
            group_to,
            group_block,
            add_special_tokens,
        );
        let inner = py
            .detach(|| {
                let sink = infeed::convert::output_sink(output)?;
                bundle::RowWriter::new(
                    sink,
                    stem,
                    attempt,
                    schema,
                    tok.as_ref(),
                    compression,
                    limit,
                )
            })
            .map_err(|e| errors::convert(py, e))?;
        Ok(RowWriter {
            inner: Mutex::new(Some(inner)),
            rows: Vec::new(),
            null_omit,
            ignore_unknown,
            label: format!("{output} (attempt {attempt})"),
        })
    }

    /// Checks, encodes and writes `rows` (dicts), in order. A bad row raises
    /// `infeed.ConvertError` naming its index in `rows` and its feature.
    fn write(&mut self, py: Python<'_>, rows: Vec<Bound<'_, PyAny>>) -> PyResult<()> {
        let Some(schema) = self.inner_mut().as_ref().map(|w| w.input_schema().clone()) else {
            return Err(errors::convert_message(
                py,
                "the writer is closed".into(),
                None,
            ));
        };
        let width = schema.columns.len();
        let mut filled = std::mem::take(&mut self.rows);
        if filled.len() < rows.len() {
            filled.resize_with(rows.len(), || vec![ColBuf::default(); width]);
        }
        for (i, (row, cols)) in rows.iter().zip(filled.iter_mut()).enumerate() {
            if let Err((column, kind)) = self.fill(row, &schema, cols) {
                self.rows = filled;
                return Err(errors::bad_row(py, &self.label, i, column, &kind));
            }
        }
        let n = rows.len();
        let label = self.label.clone();
        let result = match self.inner_mut().as_mut() {
            Some(inner) => py.detach(|| {
                for (i, cols) in filled.iter().take(n).enumerate() {
                    inner.write(cols).map_err(|e| (i, e))?;
                }
                Ok(())
            }),
            None => Ok(()),
        };
        self.rows = filled;
        result.map_err(|(i, e)| write_error(py, &label, i, e))
    }

    /// Reads the file `path` (a local path, or a `gs://`, `s3://`, `az://`,
    /// `http(s)://` URL; `format`: `jsonl`, `csv`, `tsv`, `text`; gzip or
    /// zstd recognized by its first bytes) with `infeed convert`'s readers
    /// and writes its records, without the GIL: the whole file, or with
    /// `start` and `end` the lines that start in those bytes (a range of
    /// `split_file`). Gives `(path, format, bytes of the file, records
    /// read)`. A bad record raises `infeed.ConvertError` naming the file and
    /// line (in a range that does not start the file, the byte offset).
    #[pyo3(signature = (path, format, start = None, end = None))]
    fn write_file(
        &mut self,
        py: Python<'_>,
        path: &str,
        format: &str,
        start: Option<u64>,
        end: Option<u64>,
    ) -> PyResult<(String, String, u64, u64)> {
        let format = input_format(py, format)?;
        let range = match (start, end) {
            (None, None) => None,
            (Some(s), Some(e)) if s <= e => Some((s, e)),
            _ => {
                return Err(errors::convert_message(
                    py,
                    format!("a byte range needs start <= end, both given: {start:?}, {end:?}"),
                    None,
                ));
            }
        };
        let (null_omit, ignore_unknown) = (self.null_omit, self.ignore_unknown);
        let Some(inner) = self.inner_mut().as_mut() else {
            return Err(errors::convert_message(
                py,
                "the writer is closed".into(),
                None,
            ));
        };
        let read = py
            .detach(|| files::write_file(path, format, range, inner, null_omit, ignore_unknown))
            .map_err(|e| errors::convert(py, e))?;
        Ok((
            read.display,
            read.format.to_owned(),
            read.bytes,
            read.records,
        ))
    }

    /// Closes the last shard: the attempt's shards as `(temp name, records,
    /// bytes, crc32c)`, for `finalize`.
    fn finish(&mut self, py: Python<'_>) -> PyResult<Vec<ClosedTuple>> {
        let Some(inner) = self.inner_mut().take() else {
            return Ok(Vec::new());
        };
        let closed = py
            .detach(|| inner.finish())
            .map_err(|e| errors::convert(py, e))?;
        Ok(closed
            .into_iter()
            .map(|c| (c.temp, c.records, c.bytes, c.crc32c))
            .collect())
    }

    /// Removes what the attempt wrote (a failed bundle).
    fn abort(&mut self, py: Python<'_>) {
        if let Some(inner) = self.inner_mut().take() {
            py.detach(|| inner.abort());
        }
    }

    /// The features written, as a spec string (`name:var_len:int64,…`).
    #[getter]
    fn output_spec(&mut self) -> String {
        self.inner_mut()
            .as_ref()
            .map(|w| w.output_schema().spec())
            .unwrap_or_default()
    }
}

/// An input format `write_file` and `split_file` read (not Parquet).
fn input_format(py: Python<'_>, format: &str) -> PyResult<Format> {
    Format::parse(format, false)
        .filter(|f| *f != Format::Parquet)
        .ok_or_else(|| {
            errors::convert_message(
                py,
                format!("unknown format {format:?}: use jsonl, csv, tsv or text"),
                None,
            )
        })
}

/// The byte ranges `[(start, end)]` of about `split_bytes` each that
/// `RowWriter.write_file` may read of the file `path` on different workers,
/// or `None` when it is read whole: compressed, CSV/TSV unless
/// `csv_one_line` (no quoted field holds a line break), or not larger than
/// one range. Looks at the file's size and first bytes (a HEAD and a small
/// read for a URL).
#[pyfunction]
#[pyo3(signature = (path, format, split_bytes, *, csv_one_line = false))]
pub fn split_file(
    py: Python<'_>,
    path: &str,
    format: &str,
    split_bytes: u64,
    csv_one_line: bool,
) -> PyResult<Option<Vec<(u64, u64)>>> {
    let format = input_format(py, format)?;
    let options = files::SplitOptions {
        bytes: split_bytes,
        csv_one_line,
    };
    py.detach(|| files::split_file(path, format, options))
        .map_err(|e| errors::convert(py, e))
}

/// Commits the shards of the attempts that succeeded (in the order given),
/// writes the manifest (and the TFDS files), and removes every other
/// attempt's temporary files. Gives `(manifest name, [(shard name, records,
/// bytes)])`. The manifest's `input` names the `writer` and the input
/// `files` as `(path, format, bytes)`.
#[pyfunction]
#[pyo3(signature = (output, stem, features, closed, *, compression = "none",
    tokenizer = None, text_column = "text".to_string(), max_length = None,
    group_to = None, group_block = 1000, tfds = None, records_read = 0,
    writer = "infeed.beam.WriteTFRecords", files = Vec::new()))]
#[allow(clippy::too_many_arguments)]
pub fn finalize(
    py: Python<'_>,
    output: &str,
    stem: &str,
    features: Vec<String>,
    closed: Vec<ClosedTuple>,
    compression: &str,
    tokenizer: Option<String>,
    text_column: String,
    max_length: Option<usize>,
    group_to: Option<usize>,
    group_block: u64,
    tfds: Option<(String, String)>,
    records_read: u64,
    writer: &str,
    files: Vec<(String, String, u64)>,
) -> PyResult<Finalized> {
    let input = schema_of(py, &features)?;
    let compression = self::compression(py, compression)?;
    let tok = tokenize_options(
        tokenizer,
        text_column,
        max_length,
        group_to,
        group_block,
        true,
    );
    let schema = bundle::output_schema(&input, tok.as_ref());
    let tfds = match tfds {
        Some((name_version, split)) => {
            Some(TfdsTarget::parse(&name_version, &split).map_err(|e| errors::convert(py, e))?)
        }
        None => None,
    };
    let layout = OutputLayout {
        stem: tfds
            .as_ref()
            .map_or_else(|| stem.to_owned(), TfdsTarget::stem),
        naming: if tfds.is_some() {
            Naming::Tfds
        } else {
            Naming::Tf
        },
        compression,
        task_index: 0,
        num_tasks: 1,
        tfds,
        // The shards' indexes, in `.infeed-index` beside them: what random
        // access and `global_shuffle` read (docs/random-access.md).
        index: true,
    };
    let closed: Vec<Closed> = closed
        .into_iter()
        .map(|(temp, records, bytes, crc32c)| Closed {
            temp,
            records,
            bytes,
            crc32c,
        })
        .collect();
    let files: Vec<serde_json::Value> = files
        .into_iter()
        .map(|(path, format, bytes)| {
            serde_json::json!({"path": path, "format": format, "bytes": bytes})
        })
        .collect();
    let input_doc = serde_json::json!({
        "files": files,
        "records_read": records_read,
        "records_skipped": 0,
        "writer": writer,
    });
    let done = py
        .detach(|| -> Result<_, ConvertError> {
            let sink = infeed::convert::output_sink(output)?;
            bundle::finalize(sink.as_ref(), &layout, &schema, &closed, input_doc)
        })
        .map_err(|e| errors::convert(py, e))?;
    Ok((
        done.manifest,
        done.shards
            .into_iter()
            .map(|s| (s.name, s.records, s.bytes))
            .collect(),
    ))
}

/// A `--feature` word for column `name` from what inference saw: a dict of
/// kind (`int`, `float`, `bytes`, `inexact_int`, `scalar`, `list`) to the
/// first place it was seen, and `unsupported` to `(place, what)`. The rules
/// and messages are `infeed convert`'s.
#[pyfunction]
pub fn resolve_feature(py: Python<'_>, name: &str, seen: &Bound<'_, PyDict>) -> PyResult<String> {
    let at = |key: &str| -> PyResult<Option<String>> {
        seen.get_item(key)?
            .filter(|v| !v.is_none())
            .map(|v| v.extract::<String>())
            .transpose()
    };
    let mut o = Observed::default();
    for (key, kind) in [
        ("int", Seen::Int),
        ("float", Seen::Float),
        ("bytes", Seen::Bytes),
    ] {
        if let Some(place) = at(key)? {
            o.see(kind, &place);
        }
    }
    if let Some(place) = at("inexact_int")? {
        o.see_inexact_int(&place);
    }
    for (key, list) in [("scalar", false), ("list", true)] {
        if let Some(place) = at(key)? {
            o.see_shape(list, &place);
        }
    }
    if let Some(v) = seen.get_item("unsupported")?.filter(|v| !v.is_none()) {
        o.unsupported = Some(v.extract::<(String, String)>()?);
    }
    let (vtype, shape) = o
        .resolve(name)
        .map_err(|e| errors::convert_message(py, e, Some(name.to_owned())))?;
    let dims = match shape {
        Shape::Scalar => String::new(),
        Shape::List => "[]".into(),
        Shape::Fixed(n) => format!("[{n}]"),
    };
    Ok(format!("{name}:{vtype}{dims}"))
}

/// Whether this build can tokenize (the `tokenize` feature).
#[pyfunction]
pub fn can_tokenize() -> bool {
    cfg!(feature = "tokenize")
}
