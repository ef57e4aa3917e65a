//! The tokenize op: a text feature of each parsed batch becomes its token
//! ids, a variable-length int32 feature that every later op (padding,
//! buckets, packing, casts) takes as it takes any other.
//!
//! It runs on the workers with the parsed ops, in builder order. Its
//! identity (which feature, the tokenizer's bytes, bos and eos) is part of
//! the checkpoint's fingerprint, since token counts decide buckets and
//! packed rows; the tokenizer is read once, when the pipeline is built.

use std::sync::{Arc, OnceLock};

use crate::batch::PlanError;
use crate::example::{Column, ParsedBatch, Values};
use crate::pipeline::error::PipelineError;
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
}

impl TokenizeOp {
    pub(crate) fn new(feature: &str, tokenizer: &str, add_bos: bool, add_eos: bool) -> Self {
        TokenizeOp {
            feature: feature.to_owned(),
            tokenizer: tokenizer.to_owned(),
            add_bos,
            add_eos,
            loaded: OnceLock::new(),
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

    /// Its part of the fingerprint: the feature, the tokenizer's digest
    /// (its bytes, wherever they lie), bos and eos.
    pub(crate) fn key(&self) -> String {
        let digest = self.loaded.get().map_or(0, |t| t.digest());
        format!(
            "{}:{}:{digest:016x}:{}{};",
            self.feature.len(),
            self.feature,
            u8::from(self.add_bos),
            u8::from(self.add_eos)
        )
    }

    /// Replaces the feature's column of `batch` by each record's ids: the
    /// ids of its values in order, each value's with bos and eos as asked.
    pub(crate) fn apply(&self, mut batch: ParsedBatch) -> Result<ParsedBatch, String> {
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
        let mut ids = Vec::with_capacity(texts.data.len() / 3 + n);
        let mut row_splits = Vec::with_capacity(n + 1);
        row_splits.push(0);
        for r in 0..n {
            for i in splits[r]..splits[r + 1] {
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
            }
            row_splits.push(ids.len());
        }
        *column = Column::Ragged {
            values: Values::Int32(ids),
            row_splits,
            inner_shape: Vec::new(),
        };
        Ok(batch)
    }
}
