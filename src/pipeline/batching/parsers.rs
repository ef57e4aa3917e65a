//! Parsers with reusable column buffers, pooled for the workers.

use std::sync::Mutex;

use crate::example::{ExampleParser, ParseError, ParsedBatch, SequenceBatch, SequenceParser};
use crate::pipeline::error::PipelineError;
use crate::pipeline::group::raw_batch::RawBatch;
use crate::pipeline::parsed::{self, Step};
use crate::spec::{FeatureSpec, SequenceSpec};

use super::errors::{map_error, parse_error};

/// Parsers with reusable column buffers, one per worker at a time: writing
/// fresh memory costs more than parsing here (page faults on this VM), so
/// each batch reuses the buffers of an earlier one.
pub(super) struct ParserPool {
    spec: FeatureSpec,
    sequence: Option<SequenceSpec>,
    /// The decoding steps (the spec's images), run after the column steps
    /// (`parse_mapped`).
    decoded: Vec<Step>,
    idle: Mutex<Vec<(AnyParser, ParsedBatch)>>,
}

/// The parser of a pipeline's records: `Example`s, or `SequenceExample`s
/// whose context and feature-list columns go into one [`ParsedBatch`]
/// (context first, in spec order, then the lists).
pub(super) enum AnyParser {
    Example(ExampleParser),
    /// The parser and its number of context features.
    Sequence(SequenceParser, usize),
}

impl AnyParser {
    pub(super) fn parse_into<R: AsRef<[u8]>>(
        &mut self,
        records: &[R],
        out: &mut ParsedBatch,
    ) -> Result<(), ParseError> {
        match self {
            AnyParser::Example(parser) => parser.parse_into(records, out),
            AnyParser::Sequence(parser, context) => {
                // Hand the old columns back to the parser's halves for reuse.
                let mut columns = std::mem::take(&mut out.columns);
                let lists = columns.split_off((*context).min(columns.len()));
                let mut seq = SequenceBatch {
                    context: ParsedBatch {
                        num_records: 0,
                        columns,
                    },
                    sequence: ParsedBatch {
                        num_records: 0,
                        columns: lists,
                    },
                };
                out.num_records = 0;
                parser.parse_into(records, &mut seq)?;
                out.num_records = records.len();
                out.columns = seq.context.columns;
                out.columns.append(&mut seq.sequence.columns);
                Ok(())
            }
        }
    }
}

impl ParserPool {
    pub(super) fn new(
        spec: &FeatureSpec,
        sequence: Option<&SequenceSpec>,
        decoded: Vec<Step>,
    ) -> Self {
        ParserPool {
            spec: spec.clone(),
            sequence: sequence.cloned(),
            decoded,
            idle: Mutex::new(Vec::new()),
        }
    }

    pub(super) fn fresh(&self) -> (AnyParser, ParsedBatch) {
        let parser = match &self.sequence {
            Some(seq) => AnyParser::Sequence(SequenceParser::new(seq), seq.context().len()),
            None => AnyParser::Example(ExampleParser::new(&self.spec)),
        };
        let parsed = ParsedBatch {
            num_records: 0,
            columns: Vec::new(),
        };
        (parser, parsed)
    }

    /// Runs `f` with an idle parser (its parsed buffers stay unused).
    pub(super) fn with_parser<T>(&self, f: impl FnOnce(&mut AnyParser) -> T) -> T {
        let taken = self.idle.lock().unwrap_or_else(|e| e.into_inner()).pop();
        let (mut parser, parsed) = taken.unwrap_or_else(|| self.fresh());
        let result = f(&mut parser);
        self.put(parser, parsed);
        result
    }

    pub(super) fn with<T>(
        &self,
        raw: &RawBatch,
        f: impl FnOnce(&ParsedBatch) -> Result<T, PipelineError>,
    ) -> Result<T, PipelineError> {
        let (parser, parsed) = self.parse_mapped(raw, &[])?;
        let result = f(&parsed);
        self.put(parser, parsed);
        result
    }

    /// Parses `raw` into recycled buffers; give them back with
    /// [`put`](Self::put).
    pub(super) fn parse(&self, raw: &RawBatch) -> Result<(AnyParser, ParsedBatch), PipelineError> {
        let taken = self.idle.lock().unwrap_or_else(|e| e.into_inner()).pop();
        let (mut parser, mut parsed) = taken.unwrap_or_else(|| self.fresh());
        match parser.parse_into(&raw.items, &mut parsed) {
            Ok(()) => Ok((parser, parsed)),
            Err(error) => {
                self.put(parser, parsed);
                Err(parse_error(raw, error))
            }
        }
    }

    /// Parses `raw`, runs the maps of `ops` on it, then the decoding steps.
    pub(super) fn parse_mapped(
        &self,
        raw: &RawBatch,
        ops: &[Step],
    ) -> Result<(AnyParser, ParsedBatch), PipelineError> {
        let (parser, parsed) = self.parse(raw)?;
        let mut mapped = if ops.is_empty() {
            parsed
        } else {
            parsed::apply_maps(ops, parsed).map_err(|e| map_error(raw, e))?
        };
        for step in &self.decoded {
            if let Err(e) = step.decode(raw, &mut mapped) {
                self.put(parser, mapped);
                return Err(e);
            }
        }
        Ok((parser, mapped))
    }

    pub(super) fn put(&self, parser: AnyParser, parsed: ParsedBatch) {
        self.idle
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push((parser, parsed));
    }
}
