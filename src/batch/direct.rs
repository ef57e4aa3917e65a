//! Direct assembly: serialized records straight into padded tensors, in
//! one pass, when the spec is all variable-length integers (the lm
//! pipeline). The wire-level decoding is `example`'s kernel
//! (`example/runs.rs`: `PackedRuns::decode_rows`, which pads each row as
//! it decodes it); this file plans the rows, writes each row's mask right
//! after it, and closes the rows up when the batch needs them shorter.

use super::assemble::{Dst, PadTo, RowsShape, push_padded};
use super::buffer::AlignedBuf;
use super::dtype::TensorType;
use super::plan::{Assembler, Fill, OutKind, Truncation};
use super::tensor::Batch;
use crate::example::{Cut, ExampleParser, RowSpec, Rows};
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
        // A boundary past a group's bound is the two-step path's error.
        if let PadTo::Length(len) = pad
            && self
                .groups
                .iter()
                .any(|g| !g.members.is_empty() && len > g.bound)
        {
            return None;
        }
        // Rows are decoded at the longest length they may take (the
        // group's bound, or the length asked), so one pass over each run
        // both decodes it and counts it; rows close up afterwards when the
        // batch's longest record asks for less.
        let strides: Vec<usize> = self
            .groups
            .iter()
            .map(|g| match pad {
                PadTo::Length(len) => len,
                PadTo::Policy | PadTo::Bound => g.bound,
            })
            .collect();
        // An unbounded group (bound 0) has no row to decode into.
        if (self.groups.iter().zip(&strides)).any(|(g, &s)| !g.members.is_empty() && s == 0) {
            return None;
        }
        // Before any buffer is taken: rows are sized by their bound.
        self.check_size(batch_size, pad).ok()?;
        // Rows are written whole as they are decoded (padding and masks
        // included), so they are decoded only as long as the batch may
        // need: no record has more values than its run has bytes, so where
        // the padding of the widest run is shorter than the bound, rows
        // take that length, and every record still fits its row whole.
        let strides = match pad {
            PadTo::Policy => {
                let mut widest = vec![0usize; self.groups.len()];
                for (oi, out) in self.outputs.iter().enumerate() {
                    if let OutKind::Ragged { group, .. } = out.kind {
                        widest[group] = widest[group].max(runs.widest(oi));
                    }
                }
                (self.groups.iter().zip(strides).zip(widest))
                    .map(|((g, bound), widest)| {
                        let target = g.policy.target(widest);
                        if target >= widest && target > 0 && target < bound {
                            target
                        } else {
                            bound
                        }
                    })
                    .collect()
            }
            PadTo::Length(_) | PadTo::Bound => strides,
        };
        let mut decoded = Vec::with_capacity(self.outputs.len());
        let mut longest = vec![0usize; self.groups.len()];
        for (oi, out) in self.outputs.iter().enumerate() {
            let OutKind::Ragged {
                group, pad, mask, ..
            } = &out.kind
            else {
                return None;
            };
            let (group, stride) = (*group, strides[*group]);
            let cut = match self.groups[group].policy.truncation {
                Truncation::Error => Cut::Refuse,
                Truncation::KeepStart => Cut::KeepStart,
                Truncation::KeepEnd => Cut::KeepEnd,
            };
            let spec_i32 = spec_i32.get(oi).copied().unwrap_or(false);
            let bytes = batch_size
                .checked_mul(stride)?
                .checked_mul(out.dtype.size())?;
            let mut buf = self.pool.take_stale(bytes);
            let rows_out = match out.dtype {
                TensorType::I32 => Rows::I32(buf.as_mut_slice()),
                TensorType::I64 => Rows::I64(buf.as_mut_slice()),
                _ => return None,
            };
            let pad = match *pad {
                Fill::I64(v) => v,
                Fill::I32(v) => v.into(),
                _ => return None,
            };
            let mut mask_buf = mask
                .as_ref()
                .map(|(_, t)| (self.pool.take_stale(batch_size * stride * t.size()), *t));
            let mut mask_rows = mask_buf.as_mut().map(|(b, t)| (Dst::new(b, *t), *t));
            let mut write_mask = |r: usize, n: usize| {
                if let Some((m, t)) = &mut mask_rows {
                    m.fill(r * stride, n, Fill::one_or_zero(*t, true));
                    m.fill(r * stride + n, stride - n, Fill::zero(*t));
                }
            };
            let mut counts = Vec::with_capacity(rows);
            let spec = RowSpec {
                feature: oi,
                spec_i32,
                stride,
                cut,
            };
            if !runs.decode_rows(records, spec, rows_out, pad, &mut counts, &mut write_mask) {
                return None;
            }
            longest[group] = counts.iter().fold(longest[group], |l, &n| l.max(n));
            decoded.push((buf, mask_buf));
        }
        let lengths: Vec<usize> = self
            .groups
            .iter()
            .zip(&longest)
            .zip(&strides)
            .map(|((g, &l), &stride)| match pad {
                PadTo::Policy => g.policy.target(l).min(stride),
                PadTo::Length(_) | PadTo::Bound => stride,
            })
            .collect();

        let mut tensors = Vec::with_capacity(self.outputs.len() * 2);
        for (out, (mut buf, mut mask_buf)) in self.outputs.iter().zip(decoded) {
            let OutKind::Ragged {
                group, pad, mask, ..
            } = &out.kind
            else {
                return None;
            };
            let (len, stride) = (lengths[*group], strides[*group]);
            if len < stride {
                close_up(&mut buf, rows, stride, len, out.dtype.size());
                if let Some((m, t)) = &mut mask_buf {
                    close_up(m, rows, stride, len, t.size());
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

/// Moves each of the first `rows` rows of `stride` elements of `size`
/// bytes to a stride of `len`, keeping its first `len` elements (values,
/// then padding), and cuts the buffer to its rows of `len`.
/// Row r moves from r·stride to r·len, never past its own start, so in
/// order.
fn close_up(buf: &mut AlignedBuf, rows: usize, stride: usize, len: usize, size: usize) {
    let bytes = buf.as_bytes_mut();
    for r in 1..rows {
        bytes.copy_within(r * stride * size..(r * stride + len) * size, r * len * size);
    }
    buf.truncate(buf.len() / stride * len);
}
