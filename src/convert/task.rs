//! One conversion task (`infeed convert`): the calling thread reads the
//! inputs and cuts them into chunks of whole records ([`input`]); worker
//! threads parse, check, tokenize and encode each chunk (`row`, [`encode`],
//! [`tokenize`]); one writer thread puts the encoded records back in input
//! order and cuts shards ([`shard`]) into a [`ShardSink`]; [`commit`] names
//! them and writes the manifest. Channels are bounded, so memory is a few
//! chunks per thread whatever the input size. The output is the same bytes
//! whatever the number of threads.
//!
//! [`input`]: super::input
//! [`encode`]: super::encode
//! [`tokenize`]: super::tokenize
//! [`shard`]: super::shard
//! [`commit`]: super::commit

use std::collections::BTreeMap;
use std::sync::atomic::AtomicU64;
use std::sync::mpsc::{Receiver, sync_channel};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::record::Compression;

use super::bundle::{OutSrc, output_layout};
use super::commit::{self, Committed, OutputLayout};
use super::encode::{ColBuf, encode_example};
use super::error::{BadKind, BadRecord, ConvertError, Location};
use super::input::{self, Chunk, ChunkData, ChunkReader, FileCtx, Format, InputFile};
use super::row::{self, Bad, RowParser};
use super::schema::{ColumnSelect, FeatureArg, Observed, Schema, SchemaColumn, Shape, ValueType};
use super::shard::{self, Closed, CommittedShard, Naming, ShardLimit, ShardWriter};
use super::sink::ShardSink;
use super::split::{self, FileRange};
use super::tfds_out::TfdsTarget;
use super::tokenize::{Tok, TokenMode, TokenizeOptions};
use super::{DEFAULT_INFER_RECORDS, DEFAULT_SHARD_BYTES, MAX_BAD_LISTED};

/// Everything `convert` needs to know.
///
/// Built from [`ConvertOptions::default`] and the setters, which keep
/// working as settings are added (the type is `#[non_exhaustive]`; its
/// fields stay public to read and to set):
///
/// ```
/// use infeed::convert::{ConvertOptions, ShardLimit};
///
/// let opts = ConvertOptions::default()
///     .inputs(vec!["data/*.jsonl".into()])
///     .shard_limit(ShardLimit::Records(10_000));
/// assert_eq!(opts.num_tasks, 1);
/// ```
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct ConvertOptions {
    /// Input paths or glob patterns, in order.
    pub inputs: Vec<String>,
    /// The input format; `None` detects it from each file name.
    pub format: Option<Format>,
    /// Plain text: one record per file instead of per line.
    pub text_file: bool,
    /// The column that holds plain text (and that the tokenizer reads).
    pub text_column: String,
    /// Explicit column types (override inference).
    pub features: Vec<FeatureArg>,
    /// Columns to keep, and renames; `None` keeps all.
    pub columns: Option<Vec<ColumnSelect>>,
    /// Records read to infer the schema.
    pub infer_records: usize,
    /// Null or missing values leave the feature out of the record instead of
    /// being errors.
    pub null_omit: bool,
    /// Skip (and count) bad records instead of failing on the first.
    pub skip_bad: bool,
    /// Tokenize the text column.
    pub tokenize: Option<TokenizeOptions>,
    /// When to start a new shard.
    pub shard_limit: ShardLimit,
    /// Output compression.
    pub compression: Compression,
    /// Shard naming.
    pub naming: Naming,
    /// Shard name prefix; `None` takes the naming's default.
    pub prefix: Option<String>,
    /// This task's index, from 0.
    pub task_index: usize,
    /// The number of tasks.
    pub num_tasks: usize,
    /// Worker threads; 0 means one per available core.
    pub threads: usize,
    /// Write a TensorFlow Datasets directory (this split of this dataset)
    /// instead of plain shards: TFDS names, `features.json`, `dataset_info.json`.
    pub tfds: Option<TfdsTarget>,
    /// Write each shard's index (`.infeed-index/SHARD.index` beside the
    /// shards, out of reach of their globs: what random access and
    /// `global_shuffle` read; default on).
    pub index: bool,
}

impl Default for ConvertOptions {
    fn default() -> Self {
        ConvertOptions {
            inputs: Vec::new(),
            format: None,
            text_file: false,
            text_column: "text".into(),
            features: Vec::new(),
            columns: None,
            infer_records: DEFAULT_INFER_RECORDS,
            null_omit: false,
            skip_bad: false,
            tokenize: None,
            shard_limit: ShardLimit::Bytes(DEFAULT_SHARD_BYTES),
            compression: Compression::None,
            naming: Naming::Tf,
            prefix: None,
            task_index: 0,
            num_tasks: 1,
            threads: 0,
            tfds: None,
            index: true,
        }
    }
}

impl ConvertOptions {
    /// Sets [`index`](Self::index): write each shard's index.
    pub fn index(mut self, index: bool) -> Self {
        self.index = index;
        self
    }

    /// Sets [`inputs`](Self::inputs): input paths or glob patterns, in order.
    pub fn inputs(mut self, inputs: Vec<String>) -> Self {
        self.inputs = inputs;
        self
    }

    /// Sets [`format`](Self::format): the input format (`None`: from each file name).
    pub fn format(mut self, format: impl Into<Option<Format>>) -> Self {
        self.format = format.into();
        self
    }

    /// Sets [`text_file`](Self::text_file): plain text: one record per file.
    pub fn text_file(mut self, text_file: bool) -> Self {
        self.text_file = text_file;
        self
    }

    /// Sets [`text_column`](Self::text_column): the column that holds plain text.
    pub fn text_column(mut self, column: impl Into<String>) -> Self {
        self.text_column = column.into();
        self
    }

    /// Sets [`features`](Self::features): explicit column types.
    pub fn features(mut self, features: Vec<FeatureArg>) -> Self {
        self.features = features;
        self
    }

    /// Sets [`columns`](Self::columns): the columns to keep, and renames (`None`: all).
    pub fn columns(mut self, columns: impl Into<Option<Vec<ColumnSelect>>>) -> Self {
        self.columns = columns.into();
        self
    }

    /// Sets [`infer_records`](Self::infer_records): records read to infer the schema.
    pub fn infer_records(mut self, records: usize) -> Self {
        self.infer_records = records;
        self
    }

    /// Sets [`null_omit`](Self::null_omit): null or missing values leave the feature out.
    pub fn null_omit(mut self, omit: bool) -> Self {
        self.null_omit = omit;
        self
    }

    /// Sets [`skip_bad`](Self::skip_bad): skip (and count) bad records.
    pub fn skip_bad(mut self, skip: bool) -> Self {
        self.skip_bad = skip;
        self
    }

    /// Sets [`tokenize`](Self::tokenize): tokenize the text column.
    pub fn tokenize(mut self, tokenize: impl Into<Option<TokenizeOptions>>) -> Self {
        self.tokenize = tokenize.into();
        self
    }

    /// Sets [`shard_limit`](Self::shard_limit): when to start a new shard.
    pub fn shard_limit(mut self, limit: ShardLimit) -> Self {
        self.shard_limit = limit;
        self
    }

    /// Sets [`compression`](Self::compression): the output compression.
    pub fn compression(mut self, compression: Compression) -> Self {
        self.compression = compression;
        self
    }

    /// Sets [`naming`](Self::naming): the shard naming.
    pub fn naming(mut self, naming: Naming) -> Self {
        self.naming = naming;
        self
    }

    /// Sets [`prefix`](Self::prefix): the shard name prefix (`None`: the naming's default).
    pub fn prefix(mut self, prefix: impl Into<Option<String>>) -> Self {
        self.prefix = prefix.into();
        self
    }

    /// Sets [`task_index`](Self::task_index): this task's index, from 0.
    pub fn task_index(mut self, index: usize) -> Self {
        self.task_index = index;
        self
    }

    /// Sets [`num_tasks`](Self::num_tasks): the number of tasks.
    pub fn num_tasks(mut self, tasks: usize) -> Self {
        self.num_tasks = tasks;
        self
    }

    /// Sets [`threads`](Self::threads): worker threads (0: one per core).
    pub fn threads(mut self, threads: usize) -> Self {
        self.threads = threads;
        self
    }

    /// Sets [`tfds`](Self::tfds): write a TensorFlow Datasets directory.
    pub fn tfds(mut self, tfds: impl Into<Option<TfdsTarget>>) -> Self {
        self.tfds = tfds.into();
        self
    }
}

/// Counters of a running conversion.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ProgressSnapshot {
    /// Input bytes (on disk) read so far.
    pub input_bytes: u64,
    /// Input bytes this task will read in all (approximate).
    pub input_total: u64,
    /// Input records converted (or skipped) so far.
    pub records_in: u64,
    /// Records written so far.
    pub records_out: u64,
    /// Bad records skipped so far.
    pub skipped: u64,
}

/// Receives progress from the writer thread (after every chunk).
pub trait Progress: Send + Sync {
    /// Called after each chunk is written.
    fn update(&self, snapshot: &ProgressSnapshot);
}

/// A [`Progress`] that ignores everything.
pub struct NoProgress;

impl Progress for NoProgress {
    fn update(&self, _: &ProgressSnapshot) {}
}

/// What a conversion did.
#[derive(Clone, Debug)]
pub struct ConvertSummary {
    /// The committed shards, in order.
    pub shards: Vec<CommittedShard>,
    /// The output features.
    pub schema: Schema,
    /// The manifest's name in the sink.
    pub manifest: String,
    /// Input records read (bad ones included; blank JSONL lines not).
    pub records_in: u64,
    /// Records written.
    pub records_out: u64,
    /// Bad records skipped (with `skip_bad`).
    pub skipped: u64,
    /// The first [`MAX_BAD_LISTED`] bad records skipped.
    pub bad: Vec<BadRecord>,
    /// Input bytes on disk of the files this task read.
    pub input_bytes: u64,
    /// Bytes written (all shards).
    pub output_bytes: u64,
    /// Shards of an earlier run of this task that were removed.
    pub removed: Vec<String>,
    /// Wall time.
    pub elapsed: Duration,
}

/// Everything the workers share.
struct Shared {
    parser: RowParser,
    tok: Option<Tok>,
    mode: Option<TokenMode>,
    text_idx: Option<usize>,
    out: Vec<(String, ValueType, OutSrc)>,
    skip_bad: bool,
}

/// Per-worker scratch space.
#[derive(Default)]
struct WorkerState {
    cols: Vec<ColBuf>,
    ids: ColBuf,
    mask: ColBuf,
    group_block: Option<u64>,
    group_ids: Vec<i64>,
    group_mask: Vec<i64>,
    fields: Vec<u8>,
    ends: Vec<usize>,
    csv_map: Option<(usize, Vec<usize>)>,
}

/// A chunk's encoded records (or the error that stopped it).
#[derive(Default)]
struct ChunkResult {
    payloads: Vec<u8>,
    lens: Vec<usize>,
    records_in: u64,
    skipped: u64,
    bad: Vec<BadRecord>,
    error: Option<ConvertError>,
    input_pos: u64,
}

impl Shared {
    fn encode(&self, st: &WorkerState, out: &mut ChunkResult) {
        let features = self.out.iter().map(|(name, vtype, src)| {
            let col = match src {
                OutSrc::Input(i) => st.cols.get(*i).unwrap_or(&st.ids),
                OutSrc::Ids => &st.ids,
                OutSrc::Mask => &st.mask,
            };
            (name.as_str(), *vtype, col)
        });
        let before = out.payloads.len();
        encode_example(&mut out.payloads, features);
        out.lens.push(out.payloads.len() - before);
    }

    fn flush_group(&self, st: &mut WorkerState, out: &mut ChunkResult) {
        if let Some(TokenMode::Group { len, .. }) = self.mode {
            let len = len.max(1);
            let ids = std::mem::take(&mut st.group_ids);
            let mask = std::mem::take(&mut st.group_mask);
            for (i, m) in ids.chunks_exact(len).zip(mask.chunks_exact(len)) {
                st.ids.clear();
                st.ids.present = true;
                st.ids.ints.extend_from_slice(i);
                st.mask.clear();
                st.mask.present = true;
                st.mask.ints.extend_from_slice(m);
                self.encode(st, out);
            }
            st.group_ids = ids;
            st.group_ids.clear();
            st.group_mask = mask;
            st.group_mask.clear();
        }
        st.group_block = None;
    }

    /// After a record was read into `st.cols` (or failed): tokenizes,
    /// encodes, or records the bad record. False stops the chunk.
    fn finish_record(
        &self,
        st: &mut WorkerState,
        out: &mut ChunkResult,
        file: &FileCtx,
        record: u64,
        location: Location,
        read: Result<(), Bad>,
    ) -> bool {
        out.records_in += 1;
        let result = read.and_then(|()| self.tokenize(st, record));
        match result {
            Ok(true) => self.encode(st, out),
            Ok(false) => {}
            Err((column, kind)) => {
                let bad = BadRecord {
                    file: file.display.clone(),
                    location,
                    column,
                    kind,
                };
                if !self.skip_bad {
                    out.error = Some(bad.into());
                    return false;
                }
                out.skipped += 1;
                if out.bad.len() < MAX_BAD_LISTED {
                    out.bad.push(bad);
                }
            }
        }
        true
    }

    /// Tokenizes the text column if asked to; true when the record is to be
    /// encoded now (false when its tokens went to a group).
    fn tokenize(&self, st: &mut WorkerState, record: u64) -> Result<bool, Bad> {
        let (Some(tok), Some(mode), Some(t)) = (&self.tok, self.mode, self.text_idx) else {
            return Ok(true);
        };
        let column = || {
            Some(
                self.parser
                    .schema
                    .columns
                    .get(t)
                    .map(|c| c.source.clone())
                    .unwrap_or_default(),
            )
        };
        let text = st
            .cols
            .get(t)
            .map(|c| c.bytes.as_slice())
            .unwrap_or_default();
        let text = std::str::from_utf8(text).map_err(|_| (column(), BadKind::Utf8))?;
        match mode {
            TokenMode::Group { block, .. } => {
                let b = record / block.max(1);
                if st.group_block != Some(b) {
                    // Blocks never span chunks, so this only flushes an empty group.
                    st.group_ids.clear();
                    st.group_mask.clear();
                    st.group_block = Some(b);
                }
                let (ids_before, mask_before) = (st.group_ids.len(), st.group_mask.len());
                if let Err(e) = tok.encode(text, &mut st.group_ids, &mut st.group_mask) {
                    st.group_ids.truncate(ids_before);
                    st.group_mask.truncate(mask_before);
                    return Err((column(), BadKind::Tokenize(e)));
                }
                Ok(false)
            }
            _ => {
                st.ids.clear();
                st.ids.present = true;
                st.mask.clear();
                st.mask.present = true;
                tok.encode(text, &mut st.ids.ints, &mut st.mask.ints)
                    .map_err(|e| (column(), BadKind::Tokenize(e)))?;
                Ok(true)
            }
        }
    }

    /// Group mode: flushes when the record starts a new block.
    fn before_record(&self, st: &mut WorkerState, out: &mut ChunkResult, record: u64) {
        if let Some(TokenMode::Group { block, .. }) = self.mode {
            let b = record / block.max(1);
            if st.group_block.is_some() && st.group_block != Some(b) {
                self.flush_group(st, out);
            }
        }
    }

    fn csv_map(&self, st: &mut WorkerState, file: &FileCtx) -> Result<(), ConvertError> {
        if st.csv_map.as_ref().is_some_and(|(i, _)| *i == file.index) {
            return Ok(());
        }
        let map = file.csv_columns(&self.parser.schema, self.parser.ignore_unknown, |extra| {
            format!(
                "line 1: column {extra:?} is not in the schema (inferred from the first file): add ConvertOptions::features {extra}:TYPE, or choose columns with ConvertOptions::columns"
            )
        })?;
        st.csv_map = Some((file.index, map));
        Ok(())
    }

    fn process(&self, chunk: Chunk, st: &mut WorkerState) -> ChunkResult {
        let mut out = ChunkResult {
            input_pos: chunk.input_pos,
            ..ChunkResult::default()
        };
        if st.cols.len() != self.parser.schema.columns.len() {
            st.cols = vec![ColBuf::default(); self.parser.schema.columns.len()];
        }
        st.group_block = None;
        st.group_ids.clear();
        st.group_mask.clear();
        let file = chunk.file.clone();
        match (&chunk.data, file.format) {
            (ChunkData::Batch(batch), _) => {
                let arrays = match self.parser.arrow_columns(batch) {
                    Ok(a) => a,
                    Err(message) => {
                        out.error = Some(ConvertError::input(&file.display, message));
                        return out;
                    }
                };
                for row in 0..batch.num_rows() {
                    let record = chunk.first_record + row as u64;
                    self.before_record(st, &mut out, record);
                    let read = self.parser.arrow_row(&arrays, row, &mut st.cols);
                    if !self.finish_record(
                        st,
                        &mut out,
                        &file,
                        record,
                        Location::Row(record + 1),
                        read,
                    ) {
                        return out;
                    }
                }
            }
            (ChunkData::Bytes(data), Format::TextFile) => {
                self.parser.text(data, &mut st.cols);
                if !self.finish_record(st, &mut out, &file, 0, Location::File, Ok(())) {
                    return out;
                }
            }
            (ChunkData::Bytes(data), format) => {
                let csv = match format {
                    Format::Csv { delimiter } => {
                        if let Err(e) = self.csv_map(st, &file) {
                            out.error = Some(e);
                            return out;
                        }
                        Some(delimiter)
                    }
                    _ => None,
                };
                let nfields = file.header.len();
                let (mut pos, mut line, mut record) =
                    (0usize, chunk.first_line, chunk.first_record);
                while let Some(unit) =
                    input::split_unit(data.get(pos..).unwrap_or_default(), true, csv)
                {
                    let content = data.get(pos..pos + unit.content).unwrap_or_default();
                    let unit_line = line;
                    pos += unit.len;
                    line += unit.newlines;
                    let location = Location::Line(unit_line);
                    let read = match (format, csv) {
                        (_, Some(delim)) => {
                            if input::csv_blank(content) {
                                continue;
                            }
                            match input::parse_csv_fields(
                                content,
                                delim,
                                &mut st.fields,
                                &mut st.ends,
                            ) {
                                Err(m) => Err((None, BadKind::Csv(m))),
                                Ok(()) => {
                                    let map = st
                                        .csv_map
                                        .as_ref()
                                        .map(|(_, m)| m.as_slice())
                                        .unwrap_or_default();
                                    self.parser.csv(
                                        &st.fields,
                                        &st.ends,
                                        nfields,
                                        map,
                                        &mut st.cols,
                                    )
                                }
                            }
                        }
                        (Format::Jsonl, _) => {
                            if content.iter().all(u8::is_ascii_whitespace) {
                                record += 1;
                                continue;
                            }
                            self.parser.json(content, &mut st.cols)
                        }
                        _ => {
                            self.parser.text(content, &mut st.cols);
                            Ok(())
                        }
                    };
                    self.before_record(st, &mut out, record);
                    if !self.finish_record(st, &mut out, &file, record, location, read) {
                        return out;
                    }
                    record += 1;
                }
            }
        }
        self.flush_group(st, &mut out);
        out
    }
}

/// What the writer thread hands back.
struct WriterOut {
    closed: Vec<Closed>,
    records_in: u64,
    records_out: u64,
    skipped: u64,
    bad: Vec<BadRecord>,
}

fn writer_loop(
    results: Receiver<(u64, ChunkResult)>,
    mut writer: ShardWriter,
    progress: &dyn Progress,
    input_total: u64,
) -> Result<WriterOut, ConvertError> {
    let mut pending: BTreeMap<u64, ChunkResult> = BTreeMap::new();
    let mut next = 0u64;
    let mut snap = ProgressSnapshot {
        input_total,
        ..ProgressSnapshot::default()
    };
    let mut bad = Vec::new();
    for (seq, result) in results {
        pending.insert(seq, result);
        while let Some(result) = pending.remove(&next) {
            next += 1;
            if let Some(e) = result.error {
                writer.abort();
                return Err(e);
            }
            let mut start = 0;
            for &len in &result.lens {
                let payload = result.payloads.get(start..start + len).unwrap_or_default();
                start += len;
                if let Err(e) = writer.write(payload) {
                    writer.abort();
                    return Err(e);
                }
            }
            snap.records_in += result.records_in;
            snap.records_out += result.lens.len() as u64;
            snap.skipped += result.skipped;
            snap.input_bytes = snap.input_bytes.max(result.input_pos);
            for b in result.bad {
                if bad.len() < MAX_BAD_LISTED {
                    bad.push(b);
                }
            }
            progress.update(&snap);
        }
    }
    let closed = writer.finish()?;
    Ok(WriterOut {
        closed,
        records_in: snap.records_in,
        records_out: snap.records_out,
        skipped: snap.skipped,
        bad,
    })
}

fn check_options(opts: &ConvertOptions) -> Result<(), ConvertError> {
    let fail = |m: &str| Err(ConvertError::Options(m.to_string()));
    if opts.num_tasks == 0 || opts.task_index >= opts.num_tasks {
        return fail(
            "ConvertOptions::task_index must be less than ConvertOptions::num_tasks (and \
             ConvertOptions::num_tasks at least 1)",
        );
    }
    match opts.shard_limit {
        ShardLimit::Bytes(0) | ShardLimit::Records(0) => {
            return fail("the shard size must be at least 1");
        }
        _ => {}
    }
    if let Some(t) = &opts.tokenize {
        match t.mode {
            TokenMode::Truncate(0) | TokenMode::Group { len: 0, .. } => {
                return fail(
                    "the lengths of TokenMode::Truncate and TokenMode::Group must be at least 1",
                );
            }
            TokenMode::Group { block: 0, .. } => {
                return fail("the block of TokenMode::Group must be at least 1");
            }
            _ => {}
        }
    }
    if opts.tfds.is_some() {
        if opts.compression != Compression::None {
            return fail(
                "TFDS reads uncompressed shards only: drop ConvertOptions::compression with ConvertOptions::tfds",
            );
        }
        if opts.num_tasks > 1 {
            return fail(
                "ConvertOptions::tfds writes one split's dataset_info.json: use one task (ConvertOptions::num_tasks 1)",
            );
        }
        if opts.null_omit {
            return fail(
                "TFDS needs every feature in every record: ConvertOptions::null_omit cannot go with ConvertOptions::tfds",
            );
        }
        if opts.prefix.is_some() {
            return fail(
                "ConvertOptions::tfds names the shards {name}-{split}.tfrecord-…: drop ConvertOptions::prefix",
            );
        }
    }
    if let Some(p) = &opts.prefix
        && (p.is_empty() || p.contains('/') || p.starts_with('.'))
    {
        return fail("ConvertOptions::prefix must be a plain, non-hidden file name prefix");
    }
    // A thread each, and two channel slots a thread: bounded as a
    // pipeline's workers are, so that no typo'd count aborts on an
    // allocation or overflows a capacity.
    let max = crate::pipeline::limits::MAX_THREADS;
    if opts.threads as u64 > max {
        return Err(ConvertError::Options(format!(
            "ConvertOptions::threads is {}: at most {max}",
            opts.threads
        )));
    }
    Ok(())
}

/// A column's type as found in the input, or why it cannot be used.
type ColumnType = Result<(ValueType, Shape), String>;

/// The schema of the input columns (before tokenization), and whether input
/// columns outside it are ignored.
fn input_schema(
    files: &[InputFile],
    opts: &ConvertOptions,
) -> Result<(Schema, bool), ConvertError> {
    let first = files
        .first()
        .ok_or_else(|| ConvertError::Options("no input files".into()))?;
    let family = |f: Format| match f {
        Format::Csv { .. } => "csv",
        other => other.name(),
    };
    if let Some(other) = files
        .iter()
        .find(|f| family(f.format) != family(first.format))
    {
        return Err(ConvertError::input(
            &other.display,
            format!(
                "is {} but {} is {}: convert one format at a time",
                other.format.name(),
                first.display,
                first.format.name()
            ),
        ));
    }
    let grouping = matches!(
        opts.tokenize.as_ref().map(|t| t.mode),
        Some(TokenMode::Group { .. })
    );
    let text_col = opts
        .tokenize
        .as_ref()
        .map_or(opts.text_column.as_str(), |t| t.text_column.as_str());
    let text_only = |source: &str| Schema {
        columns: vec![SchemaColumn {
            source: source.to_string(),
            name: source.to_string(),
            vtype: ValueType::Bytes,
            shape: Shape::Scalar,
        }],
    };
    if matches!(first.format, Format::TextLines | Format::TextFile) {
        return Ok((text_only(text_col), true));
    }
    if grouping && first.format != Format::Parquet {
        return Ok((text_only(text_col), true));
    }
    let explicit = |source: &str| opts.features.iter().find(|f| f.name == source);
    // Candidate columns, in order, with their observed type.
    let mut found: Vec<(String, ColumnType)> = Vec::new();
    match first.format {
        Format::Parquet => {
            let builder = input::parquet_builder(first)?;
            for field in builder.schema().fields() {
                found.push((
                    field.name().clone(),
                    row::arrow_column_type(field.data_type()),
                ));
            }
        }
        _ => {
            let mut observed: BTreeMap<String, Observed> = BTreeMap::new();
            let mut header: Vec<String> = Vec::new();
            let mut sampled = 0usize;
            sample(
                files,
                opts.infer_records,
                &mut |file, at, content| match file.format {
                    Format::Csv { delimiter } => {
                        sampled += 1;
                        header = file.header.clone();
                        let (mut out, mut ends) = (Vec::new(), Vec::new());
                        if input::parse_csv_fields(content, delimiter, &mut out, &mut ends).is_ok()
                        {
                            let mut start = 0;
                            for (name, &end) in file.header.iter().zip(&ends) {
                                row::observe_csv(
                                    out.get(start..end).unwrap_or_default(),
                                    observed.entry(name.clone()).or_default(),
                                    at,
                                );
                                start = end;
                            }
                        }
                    }
                    _ => {
                        sampled += 1;
                        // Raw values: an integer's digits tell it from a float.
                        let map = serde_json::from_slice::<
                            BTreeMap<String, &serde_json::value::RawValue>,
                        >(content);
                        if let Ok(map) = map {
                            for (k, v) in map {
                                row::observe_json(v, observed.entry(k).or_default(), at);
                            }
                        }
                    }
                },
            )?;
            if sampled == 0 {
                // No record in any input: 0 records to convert, as from an
                // empty text file. Only the columns given by --feature have
                // a type to put in the spec.
                let columns = opts
                    .features
                    .iter()
                    .map(|f| SchemaColumn {
                        source: f.name.clone(),
                        name: f.name.clone(),
                        vtype: f.vtype,
                        shape: f.shape,
                    })
                    .collect();
                return Ok((Schema { columns }, true));
            }
            let names: Vec<String> = if header.is_empty() {
                observed.keys().cloned().collect()
            } else {
                header
            };
            for name in names {
                let r = observed
                    .get(&name)
                    .cloned()
                    .unwrap_or_default()
                    .resolve(&name);
                found.push((name, r));
            }
        }
    }
    let selection: Vec<ColumnSelect> = match &opts.columns {
        Some(c) => c.clone(),
        // Grouped tokens keep no other column: read only the text.
        None if grouping => vec![ColumnSelect {
            source: text_col.to_string(),
            name: text_col.to_string(),
        }],
        None => {
            let mut all: Vec<ColumnSelect> = found
                .iter()
                .map(|(n, _)| ColumnSelect {
                    source: n.clone(),
                    name: n.clone(),
                })
                .collect();
            for f in &opts.features {
                if !all.iter().any(|c| c.source == f.name) {
                    all.push(ColumnSelect {
                        source: f.name.clone(),
                        name: f.name.clone(),
                    });
                }
            }
            all
        }
    };
    let mut columns = Vec::new();
    for sel in selection {
        let (vtype, shape) = match explicit(&sel.source) {
            Some(f) => (f.vtype, f.shape),
            None => match found.iter().find(|(n, _)| *n == sel.source) {
                Some((_, Ok(t))) => *t,
                Some((_, Err(e))) => return Err(ConvertError::Schema(e.clone())),
                None => {
                    return Err(ConvertError::Schema(format!(
                        "column {:?} is not in {} (nor in its first {} records): check ConvertOptions::columns, or give ConvertOptions::features {}:TYPE",
                        sel.source, first.display, opts.infer_records, sel.source
                    )));
                }
            },
        };
        columns.push(SchemaColumn {
            source: sel.source,
            name: sel.name,
            vtype,
            shape,
        });
    }
    if let Some(t) = &opts.tokenize {
        let text = columns
            .iter()
            .find(|c| c.source == t.text_column)
            .ok_or_else(|| {
                ConvertError::Schema(format!(
                    "the text column {:?} is not among the columns",
                    t.text_column
                ))
            })?;
        if text.vtype != ValueType::Bytes || text.shape != Shape::Scalar {
            return Err(ConvertError::Schema(format!(
                "the text column {:?} is {}, not text",
                t.text_column,
                text.describe()
            )));
        }
        if grouping {
            columns.retain(|c| c.source == t.text_column);
            return Ok((Schema { columns }, true));
        }
    }
    if columns.is_empty() {
        return Err(ConvertError::input(
            &first.display,
            "no columns to convert (check ConvertOptions::columns)",
        ));
    }
    Ok((Schema { columns }, opts.columns.is_some()))
}

/// Calls `see(file, "line N", content)` for each of the first `limit`
/// records of the inputs (all files, in order).
fn sample(
    files: &[InputFile],
    limit: usize,
    see: &mut dyn FnMut(&FileCtx, &str, &[u8]),
) -> Result<(), ConvertError> {
    let reader = ChunkReader {
        files,
        block: 1,
        target_bytes: 1 << 16,
        schema: None,
        progress: Arc::new(AtomicU64::new(0)),
    };
    let mut seen = 0usize;
    reader.read(&split::whole(files.len()), &mut |chunk| {
        let ChunkData::Bytes(data) = &chunk.data else {
            return false;
        };
        let csv = match chunk.file.format {
            Format::Csv { delimiter } => Some(delimiter),
            _ => None,
        };
        let (mut pos, mut line) = (0usize, chunk.first_line);
        while let Some(unit) = input::split_unit(data.get(pos..).unwrap_or_default(), true, csv) {
            let content = data.get(pos..pos + unit.content).unwrap_or_default();
            let at = format!("{} line {line}", chunk.file.display);
            pos += unit.len;
            line += unit.newlines;
            if content.iter().all(|b| b.is_ascii_whitespace()) {
                continue;
            }
            if seen >= limit {
                return false;
            }
            see(&chunk.file, &at, content);
            seen += 1;
        }
        seen < limit
    })?;
    Ok(())
}

/// The stem of this task's shard names: the prefix, plus `-taskIIIII` when
/// there is more than one task.
pub(super) fn task_stem(opts: &ConvertOptions) -> String {
    if let Some(t) = &opts.tfds {
        return t.stem();
    }
    let prefix = opts
        .prefix
        .clone()
        .unwrap_or_else(|| opts.naming.default_prefix().to_string());
    if opts.num_tasks > 1 {
        format!("{prefix}-task{:05}", opts.task_index)
    } else {
        prefix
    }
}

/// How this task's shards are named and committed.
fn output_layout_of(opts: &ConvertOptions, stem: String) -> OutputLayout {
    OutputLayout {
        stem,
        naming: if opts.tfds.is_some() {
            Naming::Tfds
        } else {
            opts.naming
        },
        compression: opts.compression,
        task_index: opts.task_index,
        num_tasks: opts.num_tasks,
        tfds: opts.tfds.clone(),
        index: opts.index,
    }
}

/// This task's part of the input (see [`split`]).
fn plan(
    files: &[InputFile],
    opts: &ConvertOptions,
    block: u64,
) -> Result<Vec<FileRange>, ConvertError> {
    if opts.num_tasks <= 1 {
        return Ok(split::whole(files.len()));
    }
    if files.len() >= opts.num_tasks {
        return Ok(split::by_files(
            files.len(),
            opts.task_index,
            opts.num_tasks,
        ));
    }
    let counts = files
        .iter()
        .map(input::count_records)
        .collect::<Result<Vec<_>, _>>()?;
    Ok(split::by_blocks(
        &counts,
        block,
        opts.task_index,
        opts.num_tasks,
    ))
}

/// Converts the inputs of `opts` into shards in `sink`, then commits them and
/// writes the manifest. See the module documentation.
pub fn convert(
    opts: &ConvertOptions,
    sink: Arc<dyn ShardSink>,
    progress: &dyn Progress,
) -> Result<ConvertSummary, ConvertError> {
    let started = Instant::now();
    check_options(opts)?;
    let files = input::expand_inputs(&opts.inputs, opts.format, opts.text_file)?;
    let (schema, ignore_unknown) = input_schema(&files, opts)?;
    let tok = match &opts.tokenize {
        Some(t) => Some(Tok::load(&t.tokenizer, t.mode, t.add_special_tokens)?),
        None => None,
    };
    let (layout, out_schema, text_idx) = output_layout(&schema, opts.tokenize.as_ref());
    let block = match opts.tokenize.as_ref().map(|t| t.mode) {
        Some(TokenMode::Group { block, .. }) => block,
        _ => 1,
    };
    let plan = plan(&files, opts, block)?;
    let input_total: u64 = plan
        .iter()
        .filter_map(|r| files.get(r.file))
        .map(|f| f.size)
        .sum();

    let stem = task_stem(opts);
    // Temporary objects a crashed run of this task left behind.
    let leftovers = sink
        .list(&format!(".{stem}-"))
        .map_err(|e| ConvertError::output(sink.location(""), e))?;
    for name in leftovers.iter().filter(|n| shard::is_temp_of(&stem, n)) {
        sink.remove(name)
            .map_err(|e| ConvertError::output(sink.location(name), e))?;
    }

    let shared = Shared {
        parser: RowParser::new(schema, opts.null_omit, ignore_unknown),
        tok,
        mode: opts.tokenize.as_ref().map(|t| t.mode),
        text_idx,
        out: layout,
        skip_bad: opts.skip_bad,
    };
    let threads = if opts.threads == 0 {
        std::thread::available_parallelism().map_or(1, |n| n.get())
    } else {
        opts.threads
    };
    let writer = ShardWriter::new(
        sink.clone(),
        stem.clone(),
        opts.compression,
        opts.shard_limit,
        opts.index,
    );
    let reader = ChunkReader {
        files: &files,
        block,
        target_bytes: 1 << 20,
        schema: Some(&shared.parser.schema),
        progress: Arc::new(AtomicU64::new(0)),
    };

    let spawned = |what: &'static str| move |source| ConvertError::Thread { what, source };
    let (read_result, written) = std::thread::scope(|s| {
        let (work_tx, work_rx) = sync_channel::<(u64, Chunk)>(threads * 2);
        let work_rx = Arc::new(Mutex::new(work_rx));
        let (res_tx, res_rx) = sync_channel::<(u64, ChunkResult)>(threads * 2);
        for _ in 0..threads {
            let work_rx = work_rx.clone();
            let res_tx = res_tx.clone();
            let shared = &shared;
            // A refused thread returns at once: the workers started end
            // when `work_tx` goes.
            std::thread::Builder::new()
                .name("infeed-convert".into())
                .spawn_scoped(s, move || {
                    let mut st = WorkerState::default();
                    loop {
                        let msg = match work_rx.lock() {
                            Ok(rx) => rx.recv(),
                            Err(_) => return,
                        };
                        let Ok((seq, chunk)) = msg else { return };
                        let result = shared.process(chunk, &mut st);
                        if res_tx.send((seq, result)).is_err() {
                            return;
                        }
                    }
                })
                .map_err(spawned("worker"))?;
        }
        drop(work_rx);
        drop(res_tx);
        let writer_thread = std::thread::Builder::new()
            .name("infeed-convert-writer".into())
            .spawn_scoped(s, move || {
                writer_loop(res_rx, writer, progress, input_total)
            })
            .map_err(spawned("writer"))?;
        let mut seq = 0u64;
        let read_result = reader.read(&plan, &mut |chunk| {
            let ok = work_tx.send((seq, chunk)).is_ok();
            seq += 1;
            ok
        });
        drop(work_tx);
        let written = writer_thread
            .join()
            .unwrap_or_else(|_| Err(ConvertError::Options("the writer thread panicked".into())));
        Ok::<_, ConvertError>((read_result, written))
    })?;
    let written = written?;
    if let Err(e) = read_result {
        for c in &written.closed {
            let _ = sink.remove(&c.temp);
        }
        return Err(e);
    }

    let inputs: Vec<Value> = plan
        .iter()
        .filter_map(|r| {
            let f = files.get(r.file)?;
            let mut v = json!({"path": f.display, "format": f.format.name(), "bytes": f.size});
            if let Some(obj) = v.as_object_mut()
                && (r.start > 0 || r.end != u64::MAX)
            {
                obj.insert("records".into(), json!([r.start, r.end]));
            }
            Some(v)
        })
        .collect();
    let input = json!({
        "files": inputs,
        "records_read": written.records_in,
        "records_skipped": written.skipped,
    });
    let layout = output_layout_of(opts, stem);
    let committed = commit::commit(sink.as_ref(), &layout, &out_schema, &written.closed, input)?;
    let Committed {
        shards,
        manifest,
        removed,
    } = committed;
    Ok(ConvertSummary {
        output_bytes: shards.iter().map(|s| s.bytes).sum(),
        shards,
        schema: out_schema,
        manifest,
        records_in: written.records_in,
        records_out: written.records_out,
        skipped: written.skipped,
        bad: written.bad,
        input_bytes: input_total,
        removed,
        elapsed: started.elapsed(),
    })
}
