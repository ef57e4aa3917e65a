//! `tf.train.Example` records: [`ExampleParser`].

use super::buffers::{bytes_of, recycled};
use super::columns::ParsedBatch;
use super::error::{ParseError, malformed};
use super::feature_set::FeatureSet;
use crate::example::runs::PackedRuns;
use crate::example::wire::{Cursor, Span, TAG_1_LEN, TAG_3_LEN, WireError};
use crate::prefetch::{START_BYTES, prefetch_ahead};
use crate::spec::{DType, FeatureSpec};

/// Parses batches of serialized `tf.train.Example`s by a [`FeatureSpec`],
/// like `tf.io.parse_example`. Build it once per spec: it precomputes the
/// name lookup and keeps scratch space between batches.
pub struct ExampleParser {
    set: FeatureSet,
    /// Scratch of [`ExampleParser::locate_runs`], kept between batches.
    runs: PackedRuns,
}

impl ExampleParser {
    /// A parser for `spec`.
    pub fn new(spec: &FeatureSpec) -> Self {
        Self {
            set: FeatureSet::new(spec, true),
            runs: PackedRuns::default(),
        }
    }

    /// The spec's features (name and dtype, in order) when all are
    /// variable-length integers: the case [`locate_runs`](Self::locate_runs)
    /// handles.
    pub(crate) fn var_len_int_features(&self) -> Option<Vec<(&str, DType)>> {
        self.set
            .features
            .iter()
            .map(|f| {
                let int = matches!(f.dtype, DType::Int64 | DType::Int32);
                (f.fixed.is_none() && int).then_some((f.name.as_str(), f.dtype))
            })
            .collect()
    }

    /// Finds the values of every feature of every record without decoding
    /// them, for direct assembly (decoding straight into padded tensors).
    /// `None` when the spec is not all variable-length integers, or when
    /// some record needs the general parser: anything but at most one
    /// `Int64List` holding at most one packed run per feature, or bytes the
    /// parser would report (the general path then gives the exact error).
    pub(crate) fn locate_runs<R: AsRef<[u8]>>(&mut self, records: &[R]) -> Option<&PackedRuns> {
        let features = self.set.features.len();
        let ints = self
            .set
            .features
            .iter()
            .all(|f| f.fixed.is_none() && matches!(f.dtype, DType::Int64 | DType::Int32));
        if !ints {
            return None;
        }
        let mut runs = std::mem::take(&mut self.runs);
        runs.reset(features, records.len());
        let mut ok = true;
        'records: for (i, rec) in records.iter().enumerate() {
            let rec = rec.as_ref();
            prefetch_ahead(records, i, START_BYTES);
            self.set.clear_slots();
            if self.scan_example(rec).is_err() {
                ok = false;
                break;
            }
            for slot in &self.set.slots {
                let run = match *slot {
                    None => Some(Span::default()),
                    Some(feature) => packed_run(rec, feature),
                };
                let Some(run) = run else {
                    ok = false;
                    break 'records;
                };
                let data = bytes_of(rec, run);
                // A run must end its last varint (else: truncated, an error).
                if data.last().is_some_and(|&b| b >= 0x80) {
                    ok = false;
                    break 'records;
                }
                runs.push(run);
            }
        }
        self.runs = runs;
        ok.then_some(&self.runs)
    }

    /// Parses a batch of serialized `Example`s into one column per spec
    /// feature, in spec order. Stops at the first bad record.
    ///
    /// Each call allocates the columns afresh. On a stream of batches
    /// prefer [`ExampleParser::parse_into`]: touching new memory (page
    /// faults) can cost more than the parse itself.
    pub fn parse<R: AsRef<[u8]>>(&mut self, records: &[R]) -> Result<ParsedBatch, ParseError> {
        let mut out = ParsedBatch {
            num_records: 0,
            columns: Vec::new(),
        };
        self.parse_into(records, &mut out)?;
        Ok(out)
    }

    /// Like [`ExampleParser::parse`], but fills `out`, reusing the buffers
    /// of the batch it holds (one this parser returned earlier): a steady
    /// stream of batches then allocates nothing. On error `out` is left empty.
    pub fn parse_into<R: AsRef<[u8]>>(
        &mut self,
        records: &[R],
        out: &mut ParsedBatch,
    ) -> Result<(), ParseError> {
        let mut cols = self.set.begin(records.len(), recycled(out));
        out.num_records = 0;
        for (r, rec) in records.iter().enumerate() {
            let rec = rec.as_ref();
            self.set.clear_slots();
            self.scan_example(rec).map_err(|e| malformed(r, None, e))?;
            self.set.finish_record(rec, r, &mut cols)?;
        }
        *out = self.set.finish(cols, records.len());
        Ok(())
    }

    fn scan_example(&mut self, rec: &[u8]) -> Result<(), WireError> {
        let mut c = Cursor::new(rec);
        while !c.at_end() {
            let tag = c.tag()?;
            if tag == TAG_1_LEN {
                let features = c.len_delimited()?;
                self.set.scan_features(rec, features)?;
            } else {
                c.skip(tag)?;
            }
        }
        Ok(())
    }
}

/// The span of the packed run of a `Feature` (at `feature`) that holds one
/// `Int64List` of at most one packed run, or no list at all (an empty span:
/// zero values, as the general parser gives a variable-length feature).
/// `None` for any other form, valid or not.
fn packed_run(rec: &[u8], feature: Span) -> Option<Span> {
    if feature.is_empty() {
        return Some(Span::default());
    }
    let mut c = Cursor::over(rec, feature);
    if c.tag().ok()? != TAG_3_LEN {
        return None;
    }
    let list = c.len_delimited().ok()?;
    if !c.at_end() {
        return None;
    }
    if list.is_empty() {
        return Some(Span::default());
    }
    let mut l = Cursor::over(rec, list);
    if l.tag().ok()? != TAG_1_LEN {
        return None;
    }
    let run = l.len_delimited().ok()?;
    l.at_end().then_some(run)
}

/// Parses a batch of serialized `tf.train.Example`s by `spec`
/// (`tf.io.parse_example`). Build an [`ExampleParser`] to parse many batches.
pub fn parse_examples<R: AsRef<[u8]>>(
    spec: &FeatureSpec,
    records: &[R],
) -> Result<ParsedBatch, ParseError> {
    ExampleParser::new(spec).parse(records)
}
