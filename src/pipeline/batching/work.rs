//! The workers' job: a group of records parsed, mapped, padded and
//! assembled (or handed over as parsed columns); errors placed at the
//! record they name.

use std::sync::{Arc, Mutex};

use crate::batch::{Batch, BatchError, BatchErrorKind, BucketGroup, Packer, Remainder};
use crate::example::ParsedBatch;
use crate::pipeline::error::PipelineError;
use crate::pipeline::group::grouping::RecordWork;
use crate::pipeline::group::raw_batch::{BatchFn, GroupLayout, RawBatch};
use crate::pipeline::parsed::{self, ColumnPool, Stage, Step};
use crate::pipeline::stats::StageStats;

use super::errors::{batch_error, map_error, parse_error};
use super::parsers::{AnyParser, ParserPool};
use super::{GroupAssembly, GroupingWords, ParsedSettings};

impl ParsedSettings {
    /// The grouping and the workers' job for assembled batches. `skips`:
    /// under the skip policy, where the workers count the records they
    /// leave out (a corrupt image); `None`, such a record is an error.
    pub(crate) fn batches(
        &self,
        hosts: u64,
        seed: u64,
        skips: Option<Arc<StageStats>>,
    ) -> Result<(RecordWork, BatchFn<Batch>), PipelineError> {
        let assembly = self.assembly(hosts)?;
        self.assembly_shapes(&assembly)?;
        let record = self.record_work(Some(&assembly), hosts)?;
        let steps = self.worker_steps(seed, skips)?;
        let ops = parsed::of_stage(&steps, Stage::Columns);
        let decoded = parsed::of_stage(&steps, Stage::Decoded);
        let parsers = ParserPool::new(&self.spec, self.sequence.as_ref(), decoded.clone());
        // Straight from the records into the batch only when no step runs
        // between the parse and the assembly (and for Examples).
        let direct = self.sequence.is_none() && ops.is_empty() && decoded.is_empty();
        let spec = self.spec.clone();
        let work: BatchFn<Batch> = match assembly {
            GroupAssembly::Rows(assembler) if direct => {
                Arc::new(move |raw: RawBatch| {
                    // Fixed-length features (img): straight from the records.
                    if let Some(batch) = assembler.assemble_dense_direct(&spec, &raw.items) {
                        return Ok(batch);
                    }
                    // Straight into the padded tensors when the plan allows;
                    // anything else (and every error) takes the two-step path.
                    if let Some(batch) = parsers.with_parser(|parser| match parser {
                        AnyParser::Example(parser) => assembler.assemble_direct(parser, &raw.items),
                        AnyParser::Sequence(..) => None,
                    }) {
                        return Ok(batch);
                    }
                    parsers.with(&raw, |parsed| {
                        assembler
                            .assemble(parsed)
                            .map_err(|error| batch_error(&raw, error))
                    })
                })
            }
            GroupAssembly::Rows(assembler) => Arc::new(move |raw: RawBatch| {
                let parsed = parsers.parse_mapped(&raw, &ops)?;
                let out = assembler
                    .assemble(&parsed.1)
                    .map_err(|error| batch_error(&raw, error));
                parsers.put(parsed.0, parsed.1);
                out
            }),
            GroupAssembly::Bucket {
                assembler, buckets, ..
            } => Arc::new(move |raw: RawBatch| {
                let (rows, bucket) = match raw.layout {
                    GroupLayout::Bucket { rows, length } => (rows, length),
                    _ => (0, 0),
                };
                let batch_size = buckets.get(rows).map_or(1, |b| b.0);
                let pad_to = buckets.get(bucket).and_then(|b| b.1);
                // Straight into the padded tensors when the plan allows (as
                // for rows); anything else, and every error, takes two steps.
                if direct
                    && let Some(batch) = parsers.with_parser(|parser| match parser {
                        AnyParser::Example(parser) => {
                            assembler.assemble_direct_bucket(parser, &raw.items, batch_size, pad_to)
                        }
                        AnyParser::Sequence(..) => None,
                    })
                {
                    return Ok(batch);
                }
                let (parser, parsed) = parsers.parse_mapped(&raw, &ops)?;
                let group = BucketGroup {
                    bucket,
                    batch_size,
                    pad_to,
                    items: (0..parsed.num_records).map(|r| (&parsed, r)).collect(),
                };
                let out = assembler
                    .assemble_bucket(&group)
                    .map_err(|error| batch_error(&raw, error));
                drop(group);
                parsers.put(parser, parsed);
                out
            }),
            GroupAssembly::Pack { plan, .. } => {
                let packers = Arc::new(Mutex::new(Vec::<Packer>::new()));
                Arc::new(move |raw: RawBatch| {
                    let (parser, parsed) = parsers.parse_mapped(&raw, &ops)?;
                    let taken = packers.lock().unwrap_or_else(|e| e.into_inner()).pop();
                    let mut packer = match taken {
                        Some(p) => p,
                        None => plan.clone().build()?,
                    };
                    let out = pack_group(&mut packer, &raw, &parsed);
                    packers
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .push(packer);
                    parsers.put(parser, parsed);
                    out
                })
            }
        };
        let work = with_provenance(work, decoded);
        let after = parsed::of_stage(&steps, Stage::Assembled);
        if after.is_empty() {
            return Ok((record, work));
        }
        let pool = crate::batch::BufferPool::default();
        let assemble = work;
        let work: BatchFn<Batch> = Arc::new(move |raw: RawBatch| {
            let mut batch = assemble(raw)?;
            for step in &after {
                step.assembled(&mut batch, &pool);
            }
            Ok(batch)
        });
        Ok((record, work))
    }

    /// The grouping and the workers' job for parsed columns, and the pool
    /// the consumer gives batches back to for their columns to be reused.
    pub(crate) fn columns(
        &self,
        seed: u64,
        skips: Option<Arc<StageStats>>,
    ) -> Result<(RecordWork, BatchFn<ParsedBatch>, Arc<ColumnPool>), PipelineError> {
        if self.batching != GroupingWords::Rows {
            return Err(PipelineError::Config(
                "bucket_by_length and pack give assembled batches: use build()".into(),
            ));
        }
        if !self.steps_of(Stage::Assembled).is_empty() {
            return Err(PipelineError::Config(
                "normalize and inputs_targets apply to assembled batches: use build()".into(),
            ));
        }
        // Ragged columns have no padded shape for hosts to agree on.
        let record = self.record_work(None, 1)?;
        // The columns are handed over: they are parsed into the buffers of
        // a batch the consumer gave back, else new ones (a reused parser
        // sizes them from the last batch, so none regrows).
        let steps = self.worker_steps(seed, skips)?;
        let parsers = ParserPool::new(&self.spec, self.sequence.as_ref(), Vec::new());
        let pool = ColumnPool::new(COLUMN_SPARES);
        let spare = pool.clone();
        let ops = parsed::of_stage(&steps, Stage::Columns);
        let decoded = parsed::of_stage(&steps, Stage::Decoded);
        let work: BatchFn<ParsedBatch> = Arc::new(move |raw: RawBatch| {
            let mut parsed = spare.take();
            parsers
                .with_parser(|parser| parser.parse_into(&raw.items, &mut parsed))
                .map_err(|error| parse_error(&raw, error))?;
            let mut parsed = parsed::apply_maps(&ops, parsed).map_err(|e| map_error(&raw, e))?;
            for step in &decoded {
                step.decode(&raw, &mut parsed)?;
            }
            Ok(parsed)
        });
        Ok((record, work, pool))
    }
}

/// `work` with each batch's rows named: its records' files and offsets
/// (the packer says which rows hold which records; rows a `decoded` step
/// left out, an image that does not decode under the skip policy, are
/// taken out).
fn with_provenance(work: BatchFn<Batch>, decoded: Vec<Step>) -> BatchFn<Batch> {
    Arc::new(move |raw: RawBatch| {
        let (files, records) = (raw.files.clone(), raw.provenance());
        // Forgets what an earlier group that failed on this worker left out.
        for step in &decoded {
            step.take_left_out();
        }
        let mut batch = work(raw)?;
        batch.provenance.locate(files, records);
        for step in &decoded {
            batch.provenance.leave_out(&step.take_left_out());
        }
        Ok(batch)
    })
}

/// Packs the records of a planned group into one batch.
fn pack_group(
    packer: &mut Packer,
    raw: &RawBatch,
    parsed: &ParsedBatch,
) -> Result<Batch, PipelineError> {
    let (parts, rows, fences) = match &raw.layout {
        GroupLayout::Pack(p) => (p.parts.as_slice(), p.rows, p.fences.as_slice()),
        _ => (&[][..], 0, &[][..]),
    };
    let mut fences = fences.iter().peekable();
    // An empty group: a host padding to its batch count.
    if parsed.num_records == 0 {
        packer.finish(Remainder::Drop);
        return Ok(packer.empty_batch());
    }
    let mut out = Vec::new();
    for r in 0..parsed.num_records {
        // The next logical stream's records go into rows of their own.
        if let Some(&(_, row)) = fences.next_if(|&&(first, _)| first == r) {
            packer.fence(row);
        }
        let pushed = match parts.get(r) {
            Some(part) => packer.push_part(parsed, r, part.clone(), &mut out),
            None => packer.push(parsed, r, &mut out),
        };
        if let Err(error) = pushed {
            packer.finish(Remainder::Drop);
            return Err(batch_error(raw, error));
        }
    }
    let batch = packer.finish(Remainder::Pad);
    match batch {
        Some(batch) if out.is_empty() && batch.real_rows == rows => Ok(batch),
        _ => {
            let (path, offset) = raw.origin(0);
            Err(PipelineError::Batch {
                path: path.to_owned(),
                offset,
                at: None,
                error: BatchError {
                    record: None,
                    feature: None,
                    kind: BatchErrorKind::ColumnMismatch {
                        reason: "parsed lengths differ from the lengths the records were \
                                 planned by (packed features of unequal length?)",
                    },
                },
            })
        }
    }
}

/// Parsed batches given back that the pool keeps: enough for the workers
/// and the batches in flight to find one.
const COLUMN_SPARES: usize = 8;
