//! Direct assembly: serialized records straight into padded tensors, in
//! one pass, when the spec is all variable-length integers (the lm
//! pipeline). The wire-level decoding is `example`'s kernel
//! (`example/runs.rs`: `PackedRuns::decode_rows`); this file plans the
//! rows and fills the padding and masks.

use super::assemble::{Dst, PadTo, RowsShape, push_padded};
use super::dtype::TensorType;
use super::plan::{Assembler, Fill, OutKind, Truncation};
use super::tensor::Batch;
use crate::example::{Cut, ExampleParser, Rows};
use crate::spec::DType;

impl Assembler {
    /// Parses `records` with `parser` and assembles them in one pass, each
    /// record's values decoded straight into its padded row (no parsed
    /// columns, no second copy). Gives exactly the batch of
    /// [`ExampleParser::parse`] then [`assemble`](Self::assemble) when it
    /// applies: every feature of the spec a variable-length integer padded
    /// by this plan (as in the lm pipeline), every list one packed run,
    /// nothing to report. `None` otherwise: the caller takes the two-step
    /// path, which also gives any error exactly.
    pub(crate) fn assemble_direct<R: AsRef<[u8]>>(
        &self,
        parser: &mut ExampleParser,
        records: &[R],
    ) -> Option<Batch> {
        self.direct(parser, records, self.batch_size, PadTo::Policy)
    }

    /// [`assemble_direct`](Self::assemble_direct) for a bucket's batch:
    /// `batch_size` rows, every padded feature to `pad_to` (`None`: to its
    /// bound), as [`assemble_bucket`](Self::assemble_bucket) gives it.
    pub(crate) fn assemble_direct_bucket<R: AsRef<[u8]>>(
        &self,
        parser: &mut ExampleParser,
        records: &[R],
        batch_size: usize,
        pad_to: Option<usize>,
    ) -> Option<Batch> {
        let pad = pad_to.map_or(PadTo::Bound, PadTo::Length);
        self.direct(parser, records, batch_size, pad)
    }

    fn direct<R: AsRef<[u8]>>(
        &self,
        parser: &mut ExampleParser,
        records: &[R],
        batch_size: usize,
        pad: PadTo,
    ) -> Option<Batch> {
        let rows = records.len();
        if rows > batch_size {
            return None;
        }
        // The plan's outputs must be the spec's features, in order, each
        // padded, with an integer output a plain decode gives exactly.
        let features = parser.var_len_int_features()?;
        if features.len() != self.outputs.len() {
            return None;
        }
        for (out, &(name, dtype)) in self.outputs.iter().zip(&features) {
            let supported = matches!(
                (dtype, out.dtype),
                (DType::Int64, TensorType::I64 | TensorType::I32) | (DType::Int32, TensorType::I32)
            );
            let padded = matches!(&out.kind, OutKind::Ragged { step, .. } if step.is_empty());
            if out.name != name || !supported || !padded {
                return None;
            }
        }
        let spec_i32: Vec<bool> = features.iter().map(|f| f.1 == DType::Int32).collect();
        let runs = parser.locate_runs(records)?;

        let mut longest = vec![0usize; self.groups.len()];
        for (oi, out) in self.outputs.iter().enumerate() {
            if let OutKind::Ragged { group, .. } = out.kind {
                for r in 0..rows {
                    longest[group] = longest[group].max(runs.count(r, oi));
                }
            }
        }
        let lengths: Vec<usize> = self
            .groups
            .iter()
            .zip(&longest)
            .map(|(g, &l)| match pad {
                PadTo::Policy => g.policy.target(l),
                PadTo::Length(len) => len,
                PadTo::Bound => g.bound,
            })
            .collect();
        // A boundary past a group's bound is the two-step path's error.
        if let PadTo::Length(len) = pad
            && self
                .groups
                .iter()
                .any(|g| !g.members.is_empty() && len > g.bound)
        {
            return None;
        }
        self.check_size(batch_size, pad).ok()?;

        let mut tensors = Vec::with_capacity(self.outputs.len() * 2);
        for (oi, out) in self.outputs.iter().enumerate() {
            let OutKind::Ragged {
                group, pad, mask, ..
            } = &out.kind
            else {
                return None;
            };
            let len = lengths[*group];
            let cut = match self.groups[*group].policy.truncation {
                Truncation::Error => Cut::Refuse,
                Truncation::KeepStart => Cut::KeepStart,
                Truncation::KeepEnd => Cut::KeepEnd,
            };
            let spec_i32 = spec_i32.get(oi).copied().unwrap_or(false);
            let mut buf = self.pool.take_stale(batch_size * len * out.dtype.size());
            let mut mask_buf = mask
                .as_ref()
                .map(|(_, t)| (self.pool.take_stale(batch_size * len * t.size()), *t));
            let rows_out = match out.dtype {
                TensorType::I32 => Rows::I32(buf.as_mut_slice()),
                TensorType::I64 => Rows::I64(buf.as_mut_slice()),
                _ => return None,
            };
            let ok = runs.decode_rows(records, oi, spec_i32, len, cut, rows_out);
            if !ok {
                return None;
            }
            let mut dst = Dst::new(&mut buf, out.dtype);
            let mut mdst = mask_buf.as_mut().map(|(b, t)| (Dst::new(b, *t), *t));
            for r in 0..rows {
                let n = runs.count(r, oi).min(len);
                let at = r * len;
                dst.fill(at + n, len - n, *pad);
                if let Some((m, t)) = &mut mdst {
                    m.fill(at, n, Fill::one_or_zero(*t, true));
                    m.fill(at + n, len - n, Fill::zero(*t));
                }
            }
            let shape = RowsShape {
                rows,
                batch_size,
                len,
            };
            push_padded(&mut tensors, out, mask, *pad, shape, buf, mask_buf);
        }
        Some(Batch::new(tensors, rows))
    }
}
