//! Writing rows that arrive one at a time from another engine (a bundle of
//! an Apache Beam pipeline: `infeed.beam` turns each Python dict into
//! columns) into shards, and finalizing the shards of all bundles once.
//!
//! A distributed runner may run a bundle more than once (a retry after a
//! failure, a speculative copy): each attempt writes its shards under
//! temporary names of its own (`.{stem}.attempt-{id}-00000.tmp`) and hands
//! their [`Closed`] descriptions downstream; the runner passes on those of
//! the attempt that succeeded only. [`finalize`] commits exactly those (in
//! the order given) and removes every other attempt's files, so the output
//! holds each record once, whatever was retried.
//!
//! Tokenization is per bundle: `--max-length` is the same as in `infeed
//! convert`; `group_to` concatenates the ids of each block of rows *of the
//! bundle* (in the order the runner hands them) and drops each block's
//! remainder, so a record never spans bundles and what is dropped depends on
//! how the runner cut the bundles.

use std::sync::Arc;

use serde_json::Value;

use crate::record::Compression;

use super::commit::{self, Committed, OutputLayout};
use super::encode::{ColBuf, encode_example};
use super::error::{BadKind, ConvertError};
use super::schema::{Schema, SchemaColumn, Shape, ValueType};
use super::shard::{Closed, ShardLimit, ShardWriter};
use super::sink::ShardSink;
use super::tokenize::{Tok, TokenMode, TokenizeOptions};

/// Where an output feature's values come from.
#[derive(Clone, Copy, Debug)]
pub(crate) enum OutSrc {
    Input(usize),
    Ids,
    Mask,
}

/// The output features: input columns, with the text column replaced by
/// `input_ids` and `attention_mask` when tokenizing.
pub(crate) fn output_layout(
    schema: &Schema,
    tokenize: Option<&TokenizeOptions>,
) -> (Vec<(String, ValueType, OutSrc)>, Schema, Option<usize>) {
    let mut layout = Vec::new();
    let mut out = Schema::default();
    let text_idx = tokenize.and_then(|t| schema.position(&t.text_column));
    for (i, c) in schema.columns.iter().enumerate() {
        if Some(i) == text_idx {
            continue;
        }
        layout.push((c.name.clone(), c.vtype, OutSrc::Input(i)));
        out.columns.push(c.clone());
    }
    if let Some(t) = tokenize {
        let shape = match t.mode {
            TokenMode::Group { len, .. } => Shape::Fixed(len),
            _ => Shape::List,
        };
        for (name, src) in [("input_ids", OutSrc::Ids), ("attention_mask", OutSrc::Mask)] {
            layout.push((name.to_string(), ValueType::Int64, src));
            out.columns.push(SchemaColumn {
                source: t.text_column.clone(),
                name: name.to_string(),
                vtype: ValueType::Int64,
                shape,
            });
        }
    }
    (layout, out, text_idx)
}

/// The features written for rows of `input` (the text column replaced by
/// `input_ids` and `attention_mask` when tokenizing).
pub fn output_schema(input: &Schema, tokenize: Option<&TokenizeOptions>) -> Schema {
    output_layout(input, tokenize).1
}

/// The temporary-name stem of one attempt's shards.
pub fn attempt_stem(stem: &str, attempt: &str) -> String {
    format!("{stem}.attempt-{attempt}")
}

/// True for a temporary file of any attempt of `stem`.
fn is_attempt_temp(stem: &str, name: &str) -> bool {
    name.starts_with(&format!(".{stem}.attempt-")) && name.ends_with(".tmp")
}

/// Encodes rows into shards under one attempt's temporary names.
pub struct RowWriter {
    writer: Option<ShardWriter>,
    layout: Vec<(String, ValueType, OutSrc)>,
    input: Schema,
    output: Schema,
    tok: Option<(Tok, TokenMode, usize)>,
    ids: ColBuf,
    mask: ColBuf,
    group_ids: Vec<i64>,
    group_mask: Vec<i64>,
    /// Rows of the current `group_to` block so far.
    group_rows: u64,
    payload: Vec<u8>,
    rows: u64,
}

impl RowWriter {
    /// A writer into `sink` whose shards are named after `attempt_stem(stem,
    /// attempt)`; rows come as columns of `input` (in its order).
    pub fn new(
        sink: Arc<dyn ShardSink>,
        stem: &str,
        attempt: &str,
        input: Schema,
        tokenize: Option<&TokenizeOptions>,
        compression: Compression,
        limit: ShardLimit,
    ) -> Result<Self, ConvertError> {
        if matches!(limit, ShardLimit::Bytes(0) | ShardLimit::Records(0)) {
            return Err(ConvertError::Options(
                "the shard size must be at least 1".into(),
            ));
        }
        let (layout, output, text_idx) = output_layout(&input, tokenize);
        let tok = match (tokenize, text_idx) {
            (None, _) => None,
            (Some(t), None) => {
                return Err(ConvertError::Schema(format!(
                    "the text column {:?} is not among the features",
                    t.text_column
                )));
            }
            (Some(t), Some(i)) => {
                let col = &input.columns[i];
                if col.vtype != ValueType::Bytes || col.shape != Shape::Scalar {
                    return Err(ConvertError::Schema(format!(
                        "the text column {:?} is {}, not text",
                        t.text_column,
                        col.describe()
                    )));
                }
                if matches!(
                    t.mode,
                    TokenMode::Truncate(0) | TokenMode::Group { len: 0, .. }
                ) || matches!(t.mode, TokenMode::Group { block: 0, .. })
                {
                    return Err(ConvertError::Options(
                        "max_length, group_to and group_block must be at least 1".into(),
                    ));
                }
                let tok = Tok::load(&t.tokenizer, t.mode, t.add_special_tokens)?;
                Some((tok, t.mode, i))
            }
        };
        // Each shard's index is written with it (what random access and
        // `global_shuffle` read), committed into `.infeed-index` beside it.
        let writer = ShardWriter::new(sink, attempt_stem(stem, attempt), compression, limit, true);
        Ok(RowWriter {
            writer: Some(writer),
            layout,
            input,
            output,
            tok,
            ids: ColBuf::default(),
            mask: ColBuf::default(),
            group_ids: Vec::new(),
            group_mask: Vec::new(),
            group_rows: 0,
            payload: Vec::new(),
            rows: 0,
        })
    }

    /// The columns rows come in.
    pub fn input_schema(&self) -> &Schema {
        &self.input
    }

    /// The features written (the text column replaced by `input_ids` and
    /// `attention_mask` when tokenizing).
    pub fn output_schema(&self) -> &Schema {
        &self.output
    }

    /// Rows written so far.
    pub fn rows(&self) -> u64 {
        self.rows
    }

    /// Tokenizes (if asked to) and writes one row, whose columns the caller
    /// filled and checked. A row that cannot be tokenized is a
    /// [`BadKind`] with its column; the writer stays usable.
    pub fn write(&mut self, cols: &[ColBuf]) -> Result<(), WriteError> {
        self.rows += 1;
        let Some((tok, mode, text)) = &self.tok else {
            return self.encode(cols);
        };
        let column = || self.input.columns[*text].source.clone();
        let bytes = cols
            .get(*text)
            .map(|c| c.bytes.as_slice())
            .unwrap_or_default();
        let text_str =
            std::str::from_utf8(bytes).map_err(|_| WriteError::Bad(column(), BadKind::Utf8))?;
        match *mode {
            TokenMode::Group { len, block } => {
                let (ids_before, mask_before) = (self.group_ids.len(), self.group_mask.len());
                if let Err(e) = tok.encode(text_str, &mut self.group_ids, &mut self.group_mask) {
                    self.group_ids.truncate(ids_before);
                    self.group_mask.truncate(mask_before);
                    return Err(WriteError::Bad(column(), BadKind::Tokenize(e)));
                }
                self.group_rows += 1;
                if self.group_rows >= block {
                    self.flush_group(cols, len)?;
                }
                Ok(())
            }
            _ => {
                self.ids.clear();
                self.mask.clear();
                self.ids.present = true;
                self.mask.present = true;
                tok.encode(text_str, &mut self.ids.ints, &mut self.mask.ints)
                    .map_err(|e| WriteError::Bad(column(), BadKind::Tokenize(e)))?;
                self.encode(cols)
            }
        }
    }

    /// Writes the whole `len`-id chunks of the block and drops its remainder.
    fn flush_group(&mut self, cols: &[ColBuf], len: usize) -> Result<(), WriteError> {
        let ids = std::mem::take(&mut self.group_ids);
        let mask = std::mem::take(&mut self.group_mask);
        for (i, m) in ids.chunks_exact(len).zip(mask.chunks_exact(len)) {
            self.ids.clear();
            self.ids.present = true;
            self.ids.ints.extend_from_slice(i);
            self.mask.clear();
            self.mask.present = true;
            self.mask.ints.extend_from_slice(m);
            self.encode(cols)?;
        }
        self.group_ids = ids;
        self.group_ids.clear();
        self.group_mask = mask;
        self.group_mask.clear();
        self.group_rows = 0;
        Ok(())
    }

    fn encode(&mut self, cols: &[ColBuf]) -> Result<(), WriteError> {
        let (ids, mask) = (&self.ids, &self.mask);
        let features = self.layout.iter().map(|(name, vtype, src)| {
            let col = match src {
                OutSrc::Input(i) => cols.get(*i).unwrap_or(ids),
                OutSrc::Ids => ids,
                OutSrc::Mask => mask,
            };
            (name.as_str(), *vtype, col)
        });
        self.payload.clear();
        encode_example(&mut self.payload, features);
        match &mut self.writer {
            Some(w) => w.write(&self.payload).map_err(WriteError::Output),
            None => Err(WriteError::Output(ConvertError::Options(
                "the writer is closed".into(),
            ))),
        }
    }

    /// The `group_to` block size (records per block), when grouping.
    pub fn group_block(&self) -> Option<u64> {
        match &self.tok {
            Some((_, TokenMode::Group { block, .. }, _)) => Some(*block),
            _ => None,
        }
    }

    /// Ends the current `group_to` block early (a block of a file's records
    /// that has blank lines, or the end of a file): writes its whole chunks
    /// and drops its remainder. Nothing happens when not grouping.
    pub fn end_block(&mut self) -> Result<(), WriteError> {
        if let Some((_, TokenMode::Group { len, .. }, _)) = &self.tok {
            let len = *len;
            let empty = vec![ColBuf::default(); self.input.columns.len()];
            self.flush_group(&empty, len)?;
        }
        Ok(())
    }

    /// Flushes the last `group_to` block and closes the last shard: the
    /// attempt's shards, to hand to [`finalize`].
    pub fn finish(mut self) -> Result<Vec<Closed>, ConvertError> {
        if let Some((_, TokenMode::Group { len, .. }, _)) = &self.tok {
            let len = *len;
            let empty = vec![ColBuf::default(); self.input.columns.len()];
            self.flush_group(&empty, len)
                .map_err(WriteError::into_convert)?;
        }
        match self.writer.take() {
            Some(w) => w.finish(),
            None => Ok(Vec::new()),
        }
    }

    /// Removes the shards written so far (a failed bundle cleaning up).
    pub fn abort(mut self) {
        if let Some(w) = self.writer.take() {
            w.abort();
        }
    }
}

/// Why a row was not written.
#[derive(Debug)]
pub enum WriteError {
    /// The row is bad in this column (e.g. its text does not tokenize).
    Bad(String, BadKind),
    /// Writing the shard failed.
    Output(ConvertError),
}

impl WriteError {
    fn into_convert(self) -> ConvertError {
        match self {
            WriteError::Output(e) => e,
            WriteError::Bad(column, kind) => {
                ConvertError::Options(format!("column {column:?}: {kind}"))
            }
        }
    }
}

/// Commits the shards of the attempts that succeeded (in the order given)
/// under `layout`'s names, writes the manifest (`input`: its `input`
/// object) and the TFDS files, and removes the temporary files of every
/// other attempt of `layout.stem`.
pub fn finalize(
    sink: &dyn ShardSink,
    layout: &OutputLayout,
    schema: &Schema,
    closed: &[Closed],
    input: Value,
) -> Result<Committed, ConvertError> {
    let stray = |name: &str| is_attempt_temp(&layout.stem, name);
    if let Some(bad) = closed.iter().find(|c| !stray(&c.temp)) {
        return Err(ConvertError::Options(format!(
            "{} is not a temporary shard of {}",
            bad.temp, layout.stem
        )));
    }
    let committed = commit::commit(sink, layout, schema, closed, input)?;
    let left = sink
        .list(&format!(".{}.attempt-", layout.stem))
        .map_err(|e| ConvertError::output(sink.location(""), e))?;
    for name in left.iter().filter(|n| stray(n)) {
        sink.remove(name)
            .map_err(|e| ConvertError::output(sink.location(name), e))?;
    }
    Ok(committed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::convert::Naming;
    use crate::convert::commit::manifest_name;
    use crate::convert::sink::LocalSink;

    fn int_col(v: i64) -> ColBuf {
        ColBuf {
            present: true,
            ints: vec![v],
            ..ColBuf::default()
        }
    }

    #[test]
    fn retried_attempts_leave_each_record_once() {
        let dir = tempfile::tempdir().unwrap();
        let sink: Arc<dyn ShardSink> = Arc::new(LocalSink::new(dir.path()).unwrap());
        let schema = Schema {
            columns: vec![SchemaColumn {
                source: "x".into(),
                name: "x".into(),
                vtype: ValueType::Int64,
                shape: Shape::Scalar,
            }],
        };
        let writer = |attempt: &str| {
            RowWriter::new(
                sink.clone(),
                "train",
                attempt,
                schema.clone(),
                None,
                Compression::None,
                ShardLimit::Records(2),
            )
            .unwrap()
        };
        // Bundle A fails after writing; its retry A2 and bundle B succeed.
        let mut a = writer("a1");
        a.write(&[int_col(1)]).unwrap();
        a.write(&[int_col(2)]).unwrap();
        a.write(&[int_col(3)]).unwrap();
        drop(a); // the worker died: its files stay behind
        let mut a2 = writer("a2");
        let mut b = writer("b1");
        for v in 1..=3 {
            a2.write(&[int_col(v)]).unwrap();
        }
        b.write(&[int_col(4)]).unwrap();
        let mut closed = a2.finish().unwrap();
        closed.extend(b.finish().unwrap());
        let layout = OutputLayout {
            stem: "train".into(),
            naming: Naming::Tf,
            compression: Compression::None,
            task_index: 0,
            num_tasks: 1,
            tfds: None,
            index: true,
        };
        let done = finalize(sink.as_ref(), &layout, &schema, &closed, Value::Null).unwrap();
        let names: Vec<&str> = done.shards.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "train-00000-of-00003.tfrecord",
                "train-00001-of-00003.tfrecord",
                "train-00002-of-00003.tfrecord"
            ]
        );
        let records: Vec<u64> = done.shards.iter().map(|s| s.records).collect();
        assert_eq!(records, [2, 1, 1]);
        let mut files: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        files.sort();
        // The shards, their indexes' folder, and the manifest.
        let mut want: Vec<String> = names.iter().map(|n| n.to_string()).collect();
        want.push(crate::index::INDEX_DIR.to_string());
        want.push(manifest_name(&layout));
        want.sort();
        assert_eq!(files, want, "no temporary file of any attempt is left");
        // Each shard's index in the folder, and nothing else.
        let mut indexes: Vec<String> = std::fs::read_dir(dir.path().join(crate::index::INDEX_DIR))
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        indexes.sort();
        let want: Vec<String> = names.iter().map(|n| format!("{n}.index")).collect();
        assert_eq!(indexes, want);
        let manifest = std::fs::read(dir.path().join(manifest_name(&layout))).unwrap();

        // The runner runs the finalize again (it failed after the renames):
        // the same shards and manifest, nothing lost.
        let again = finalize(sink.as_ref(), &layout, &schema, &closed, Value::Null).unwrap();
        assert_eq!(again.shards, done.shards);
        assert_eq!(
            std::fs::read(dir.path().join(manifest_name(&layout))).unwrap(),
            manifest
        );
        // A shard that is not what the attempt wrote is not taken for it.
        std::fs::write(dir.path().join(names[1]), b"other bytes").unwrap();
        let err = finalize(sink.as_ref(), &layout, &schema, &closed, Value::Null).unwrap_err();
        assert!(err.to_string().contains(names[1]), "{err}");
    }
}
