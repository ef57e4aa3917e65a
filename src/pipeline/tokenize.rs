//! The tokenize op: a text feature of each parsed batch becomes its token
//! ids, a variable-length int32 feature that every later op (padding,
//! buckets, packing, casts) takes as it takes any other.
//!
//! It runs on the workers with the parsed ops, in builder order. Its
//! identity (which feature, the tokenizer's bytes, bos and eos) is part of
//! the checkpoint's fingerprint, since token counts decide buckets and
//! packed rows; the tokenizer is read once, when the pipeline is built.
//!
//! Where records are measured before they are grouped (`pack`,
//! `bucket_by_length` on a tokenized feature), the prefilter threads
//! tokenize each text to measure it; they keep its ids ([`Remembered`])
//! for the worker that assembles the record, which takes them instead of
//! tokenizing the same text again.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, OnceLock};

use crate::batch::PlanError;
use crate::example::{Column, ParsedBatch, Values};
use crate::pipeline::checkpoint::Identity;
use crate::pipeline::error::PipelineError;
use crate::pipeline::parsed::{MapError, ParsedStep, Pass, Stage};
use crate::source::SourceOptions;
use crate::spec::{DType, FeatureSpec};
use crate::text::Tokenizer;

/// `tokenize(feature, tokenizer, add_bos, add_eos)` as the builder took it,
/// and the tokenizer once loaded.
pub(crate) struct TokenizeOp {
    pub(crate) feature: String,
    /// The tokenizer file: a path or a gs://, s3://, az:// URL.
    pub(crate) tokenizer: String,
    pub(crate) add_bos: bool,
    pub(crate) add_eos: bool,
    loaded: OnceLock<Arc<Tokenizer>>,
    remembered: Mutex<Remembered>,
}

/// Most bytes of texts and ids kept for the workers: far more than the
/// records between the prefilter and the workers (a few batches); past it
/// the oldest go, and a worker that misses one tokenizes it again.
const MAX_REMEMBERED_BYTES: usize = 64 << 20;

/// Ids the prefilter threads computed, by the text itself (so a hit is
/// exact, whatever record or epoch the text comes from), oldest first.
#[derive(Default)]
struct Remembered {
    ids: HashMap<Arc<[u8]>, Vec<i32>>,
    order: VecDeque<Arc<[u8]>>,
    bytes: usize,
}

impl Remembered {
    fn cost(text: &[u8], ids: &[i32]) -> usize {
        text.len() + 4 * ids.len() + 64
    }

    fn keep(&mut self, text: &[u8], ids: &[i32]) {
        if self.ids.contains_key(text) {
            return;
        }
        let key: Arc<[u8]> = Arc::from(text);
        self.bytes += Self::cost(text, ids);
        self.ids.insert(key.clone(), ids.to_vec());
        self.order.push_back(key);
        while self.bytes > MAX_REMEMBERED_BYTES {
            let Some(old) = self.order.pop_front() else {
                break;
            };
            if let Some(ids) = self.ids.remove(&old) {
                self.bytes -= Self::cost(&old, &ids);
            }
        }
    }

    fn take(&mut self, text: &[u8]) -> Option<Vec<i32>> {
        let ids = self.ids.remove(text)?;
        self.bytes -= Self::cost(text, &ids);
        // Its key stays in `order` until it comes up: removing it from the
        // middle would cost a scan.
        Some(ids)
    }
}

impl TokenizeOp {
    pub(crate) fn new(feature: &str, tokenizer: &str, add_bos: bool, add_eos: bool) -> Self {
        TokenizeOp {
            feature: feature.to_owned(),
            tokenizer: tokenizer.to_owned(),
            add_bos,
            add_eos,
            loaded: OnceLock::new(),
            remembered: Mutex::new(Remembered::default()),
        }
    }

    /// Reads and checks the tokenizer (once: clones of the pipeline share
    /// it).
    pub(crate) fn load(&self, source: &SourceOptions) -> Result<(), PipelineError> {
        if self.loaded.get().is_some() {
            return Ok(());
        }
        let tokenizer = Tokenizer::load(&self.tokenizer, source)?;
        tokenizer.check_special(self.add_bos, self.add_eos)?;
        let _ = self.loaded.set(Arc::new(tokenizer));
        Ok(())
    }

    fn tokenizer(&self) -> Result<&Tokenizer, String> {
        self.loaded
            .get()
            .map(|t| &**t)
            .ok_or_else(|| format!("tokenize {:?}: the tokenizer was not loaded", self.feature))
    }

    /// The spec after this op: `feature` (bytes, in `spec`) becomes a
    /// variable-length int32 feature in its place.
    pub(crate) fn out_spec(&self, spec: FeatureSpec) -> Result<FeatureSpec, PipelineError> {
        let def = spec
            .get(&self.feature)
            .ok_or_else(|| PlanError::UnknownFeature {
                feature: self.feature.clone(),
            })?;
        if def.dtype != DType::Bytes || spec.image_of(&self.feature).is_some() {
            let what = if def.dtype == DType::Bytes {
                "an image".to_owned()
            } else {
                def.dtype.to_string()
            };
            return Err(PipelineError::Config(format!(
                "tokenize: feature {:?} is {what}: it takes a text (bytes) feature",
                self.feature
            )));
        }
        Ok(spec.var_len(self.feature.clone(), DType::Int32))
    }

    /// Its entry in the fingerprint: the feature, the tokenizer's digest
    /// (its bytes, wherever they lie), bos and eos.
    fn identity(&self, id: &mut Identity) {
        let digest = self.loaded.get().map_or(0, |t| t.digest());
        id.step("tokenize")
            .str(&self.feature)
            .u64(digest)
            .bool(self.add_bos)
            .bool(self.add_eos);
    }

    /// Replaces the feature's column of `batch` by each record's ids: the
    /// ids of its values in order, each value's with bos and eos as asked.
    pub(crate) fn apply(&self, mut batch: ParsedBatch, mode: Pass) -> Result<ParsedBatch, String> {
        let tokenizer = self.tokenizer()?;
        let n = batch.num_records;
        let Some((_, column)) = batch.columns.iter_mut().find(|(f, _)| *f == self.feature) else {
            return Err(format!(
                "tokenize: the batch has no feature {:?}",
                self.feature
            ));
        };
        let (texts, splits): (_, Vec<usize>) = match &*column {
            Column::Dense {
                values: Values::Bytes(v),
                shape,
            } => {
                let per = shape.get(1..).map_or(1, |s| s.iter().product());
                (v, (0..=n).map(|r| r * per).collect())
            }
            Column::Ragged {
                values: Values::Bytes(v),
                row_splits,
                ..
            } => (v, row_splits.clone()),
            _ => {
                return Err(format!(
                    "tokenize: feature {:?} does not hold text",
                    self.feature
                ));
            }
        };
        // The workers take what the prefilter threads kept, in one lock.
        let mut kept: Vec<Option<Vec<i32>>> = Vec::new();
        if mode == Pass::Workers {
            let mut remembered = self.remembered.lock().unwrap_or_else(|e| e.into_inner());
            if remembered.bytes > 0 {
                kept = (0..texts.len())
                    .map(|i| remembered.take(texts.get(i)))
                    .collect();
            }
        }
        let mut ids = Vec::with_capacity(texts.data.len() / 3 + n);
        let mut row_splits = Vec::with_capacity(n + 1);
        let mut made: Vec<(usize, usize, usize)> = Vec::new();
        row_splits.push(0);
        for r in 0..n {
            for i in splits[r]..splits[r + 1] {
                if let Some(Some(k)) = kept.get_mut(i) {
                    ids.append(k);
                    continue;
                }
                let start = ids.len();
                let text = std::str::from_utf8(texts.get(i)).map_err(|e| {
                    format!(
                        "tokenize: feature {:?} of record {r} of the batch is not UTF-8 text ({e})",
                        self.feature
                    )
                })?;
                tokenizer
                    .encode(text, self.add_bos, self.add_eos, &mut ids)
                    .map_err(|e| {
                        format!("tokenize: feature {:?} of record {r}: {e}", self.feature)
                    })?;
                made.push((i, start, ids.len()));
            }
            row_splits.push(ids.len());
        }
        if mode == Pass::Prefilter && !made.is_empty() {
            let mut remembered = self.remembered.lock().unwrap_or_else(|e| e.into_inner());
            for &(i, start, end) in &made {
                remembered.keep(texts.get(i), &ids[start..end]);
            }
        }
        *column = Column::Ragged {
            values: Values::Int32(ids),
            row_splits,
            inner_shape: Vec::new(),
        };
        Ok(batch)
    }
}

/// `tokenize(feature, tokenizer, add_bos, add_eos)`: a column step that
/// changes the spec, and whose tokenizer's bytes are in the fingerprint.
impl ParsedStep for TokenizeOp {
    fn stage(&self) -> Stage {
        Stage::Columns
    }
    fn load(&self, source: &SourceOptions) -> Result<(), PipelineError> {
        TokenizeOp::load(self, source)
    }
    fn out_spec(&self, spec: FeatureSpec) -> Result<FeatureSpec, PipelineError> {
        TokenizeOp::out_spec(self, spec)
    }
    fn identity(&self, id: &mut Identity) {
        TokenizeOp::identity(self, id)
    }
    fn maps(&self) -> bool {
        true
    }
    fn map(&self, batch: ParsedBatch, pass: Pass) -> Result<ParsedBatch, MapError> {
        Ok(self.apply(batch, pass)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remembered_ids_are_taken_once_and_the_oldest_go_past_the_budget() {
        let mut r = Remembered::default();
        r.keep(b"a b", &[1, 2]);
        r.keep(b"a b", &[9]); // the same text: kept once
        assert_eq!(r.take(b"a b"), Some(vec![1, 2]));
        assert_eq!(r.take(b"a b"), None);
        assert_eq!(r.bytes, 0);
        // Texts of 1 MiB: the budget holds 63 of them, the first go.
        let texts: Vec<Vec<u8>> = (0..70u8).map(|i| vec![i; 1 << 20]).collect();
        for t in &texts {
            r.keep(t, &[i32::from(t[0])]);
        }
        assert!(r.bytes <= MAX_REMEMBERED_BYTES);
        assert_eq!(r.take(&texts[0]), None);
        assert_eq!(r.take(&texts[69]), Some(vec![69]));
    }
}
