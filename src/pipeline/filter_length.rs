//! `filter_length(feature, min, max)`: keeps the records whose variable-length
//! `feature` holds from `min` to `max` values (tokens, after a `tokenize`):
//! a filter on the parsed columns, like `filter_rows`, but data, not code —
//! it travels in the pipeline's description (to another face, or another
//! machine), and its bounds are in the checkpoint's fingerprint.

use std::sync::Arc;

use super::checkpoint::Identity;
use super::error::PipelineError;
use super::parsed::{ParsedStep, RowFilter, Stage, row_length};
use crate::batch::PlanError;
use crate::example::ParsedBatch;
use crate::spec::{FeatureKind, FeatureSpec};

pub(crate) struct FilterLength {
    feature: String,
    min: u64,
    max: u64,
    keep: RowFilter,
}

impl FilterLength {
    pub(crate) fn new(feature: &str, min: u64, max: u64) -> Self {
        let name = feature.to_owned();
        let keep: RowFilter = Arc::new(move |batch: &ParsedBatch, row: usize| {
            batch
                .get(&name)
                .and_then(|column| row_length(column, row))
                .is_some_and(|n| (min..=max).contains(&(n as u64)))
        });
        FilterLength {
            feature: feature.to_owned(),
            min,
            max,
            keep,
        }
    }
}

impl ParsedStep for FilterLength {
    fn stage(&self) -> Stage {
        Stage::Columns
    }

    /// The spec as it is; the feature must be in it, variable-length.
    fn out_spec(&self, spec: FeatureSpec) -> Result<FeatureSpec, PipelineError> {
        let def = spec
            .get(&self.feature)
            .ok_or_else(|| PlanError::UnknownFeature {
                feature: self.feature.clone(),
            })?;
        if !matches!(def.kind, FeatureKind::VarLen) {
            return Err(PipelineError::Config(format!(
                "filter_length({:?}): a fixed-length feature has one length",
                self.feature
            )));
        }
        Ok(spec)
    }

    fn identity(&self, id: &mut Identity) {
        id.step("filter_length")
            .str(&self.feature)
            .u64(self.min)
            .u64(self.max);
    }

    fn filter(&self) -> Option<&RowFilter> {
        Some(&self.keep)
    }

    fn length_bounds(&self) -> Option<(&str, u64, u64)> {
        Some((&self.feature, self.min, self.max))
    }
}
