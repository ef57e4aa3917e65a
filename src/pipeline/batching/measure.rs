//! How the record thread measures records for buckets and packing: the
//! wire scan (on the shard readers too), or a prefilter pass that parses
//! and runs the parsed ops first.

use std::sync::Arc;

use crate::batch::{BatchError, BatchErrorKind};
use crate::example::{ExampleParser, longest_feature_length};
use crate::pipeline::error::PipelineError;
use crate::pipeline::group::grouping::{MeasureFn, PrefilterFn};
use crate::pipeline::group::raw_batch::RawBatch;
use crate::pipeline::item::{Item, LengthScan};
use crate::pipeline::parsed::{self};
use crate::spec::WireKind;

use super::ParsedSettings;
use super::errors::map_error;
use super::parsers::ParserPool;

impl ParsedSettings {
    /// Reads a record's length (the longest of `features`) with the wire
    /// scan; a record it cannot read is parsed to name what is wrong with it.
    pub(super) fn measure_fn(&self, features: Vec<(String, WireKind)>) -> MeasureFn {
        let spec = self.spec.clone();
        Arc::new(move |item| {
            longest_feature_length(&item.data, &features).map_err(|(i, error)| {
                match ExampleParser::new(&spec).parse(std::slice::from_ref(&item.data)) {
                    Err(error) => PipelineError::Parse {
                        path: String::new(),
                        offset: item.offset,
                        at: None,
                        error,
                    },
                    Ok(_) => PipelineError::Length {
                        path: String::new(),
                        offset: item.offset,
                        at: None,
                        feature: features[i].0.clone(),
                        error,
                    },
                }
            })
        })
    }

    /// Gives each record's fate: by the wire scan where the column steps
    /// are all length filters ([`scanned_prefilter`]), else by
    /// [`parsed_prefilter`](Self::parsed_prefilter).
    pub(super) fn prefilter_fn(&self, length: Option<Vec<(String, WireKind)>>) -> PrefilterFn {
        let parsed = self.parsed_prefilter(length.clone());
        let steps = self.steps_of(crate::pipeline::parsed::Stage::Columns);
        let bounds: Option<Vec<Bounds>> = steps
            .iter()
            .map(|step| {
                let (feature, min, max) = step.length_bounds()?;
                let kind = self.spec.get(feature)?.dtype.wire_kind();
                Some((vec![(feature.to_owned(), kind)], min, max))
            })
            .collect();
        match bounds {
            Some(bounds) if self.sequence.is_none() => scanned_prefilter(bounds, length, parsed),
            _ => parsed,
        }
    }

    /// Parses a chunk, runs the parsed ops, and gives each record's fate.
    fn parsed_prefilter(&self, length: Option<Vec<(String, WireKind)>>) -> PrefilterFn {
        let parsers = Arc::new(ParserPool::new(
            &self.spec,
            self.sequence.as_ref(),
            Vec::new(),
        ));
        let ops = self.steps_of(crate::pipeline::parsed::Stage::Columns);
        let features: Vec<String> = length.into_iter().flatten().map(|f| f.0).collect();
        Arc::new(move |raw: &RawBatch| {
            // Read first (`prefilter::judge`): a stand-in parsed would be
            // the zeros of a record's length.
            if let Some(item) = raw.items.iter().find(|i| i.unread) {
                return Err(PipelineError::Config(format!(
                    "the record at byte {} came to a parsed step unread (an infeed bug)",
                    item.offset
                )));
            }
            let (parser, batch) = parsers.parse(raw)?;
            let n = batch.num_records;
            let (kept, survivors) =
                parsed::apply_all(&ops, batch).map_err(|e| map_error(raw, e))?;
            let mut verdicts = vec![None; n];
            let columns = features
                .iter()
                .map(|f| {
                    kept.get(f).ok_or_else(|| PipelineError::Batch {
                        path: raw.origin(0).0.to_owned(),
                        offset: raw.origin(0).1,
                        at: None,
                        error: BatchError {
                            record: None,
                            feature: Some(f.clone()),
                            kind: BatchErrorKind::MissingColumn,
                        },
                    })
                })
                .collect::<Result<Vec<_>, _>>()?;
            for (i, row) in survivors {
                let len = columns
                    .iter()
                    .map(|c| parsed::row_length(c, row).unwrap_or(0))
                    .max()
                    .unwrap_or(0);
                if let Some(v) = verdicts.get_mut(i) {
                    *v = Some(len);
                }
            }
            parsers.put(parser, kept);
            Ok(verdicts)
        })
    }
}

/// A length filter as the wire scan reads it: its feature, and the
/// bounds of its count of values.
type Bounds = (Vec<(String, WireKind)>, u64, u64);

/// A prefilter of length filters alone (`filter_length`), decided by the
/// wire scan the walks measure with, with no parse (lm, 2 cores: +10–15%,
/// pinned +10–30%). The scan counts a feature's values as the parse does (0
/// where a record lacks it); a chunk with a record it cannot read goes to
/// `parsed`, which names what is wrong with it as before. It reads no
/// other feature, so a record it leaves out is parsed too (few are): one
/// the spec refuses is its error, never dropped unnoticed. One it keeps is
/// parsed by the worker that assembles its batch, as in any pipeline.
fn scanned_prefilter(
    bounds: Vec<Bounds>,
    length: Option<Vec<(String, WireKind)>>,
    parsed: PrefilterFn,
) -> PrefilterFn {
    Arc::new(move |raw: &RawBatch| {
        let verdict = |data: &[u8]| -> Option<Option<usize>> {
            for (feature, min, max) in &bounds {
                let n = longest_feature_length(data, feature).ok()? as u64;
                if !(*min..=*max).contains(&n) {
                    return Some(None);
                }
            }
            match &length {
                Some(features) => longest_feature_length(data, features).ok().map(Some),
                None => Some(Some(0)),
            }
        };
        let scanned: Option<Vec<Option<usize>>> = (raw.items.iter())
            .map(|item| (!item.unread).then(|| verdict(&item.data)).flatten())
            .collect();
        let Some(verdicts) = scanned else {
            return parsed(raw);
        };
        let left_out: Vec<Item> = (raw.items.iter().zip(&verdicts))
            .filter(|(_, verdict)| verdict.is_none())
            .map(|(item, _)| item.clone())
            .collect();
        if !left_out.is_empty() {
            parsed(&RawBatch::chunk(left_out, raw.files.clone()))?;
        }
        Ok(verdicts)
    })
}

/// The wire scan of [`ParsedSettings::measure_fn`] without its error
/// report, for the shard readers: a record it cannot read is measured
/// again on the record thread, which names it.
pub(super) fn scan_fn(features: Vec<(String, WireKind)>) -> LengthScan {
    Arc::new(move |data: &[u8]| longest_feature_length(data, &features).ok())
}
