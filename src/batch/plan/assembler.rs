//! The checked plan: an [`Assembler`], the outputs and padding groups it
//! was checked into, and the shapes its batches can have.

use super::fill::Fill;
use super::policy::LengthPolicy;
use crate::batch::buffer::BufferPool;
use crate::batch::dtype::TensorType;
use crate::batch::shape::{BatchShape, TensorShape};

/// How one feature becomes tensors.
#[derive(Clone, Debug)]
pub(crate) enum OutKind {
    /// One row of `count` values per record, output `[B, ..shape]`; with a
    /// raw decode each bytes value becomes `decode` u8 (`decode_shape`).
    Dense {
        shape: Vec<usize>,
        count: usize,
        decode: Option<(Vec<usize>, usize)>,
    },
    /// Padded to the length of group `group`, output `[B, L, ..step]`, with
    /// a mask `[B, L]`; `step` is `[]` for a variable-length feature and the
    /// step shape for a feature list.
    Ragged {
        group: usize,
        pad: Fill,
        mask: Option<(String, TensorType)>,
        step: Vec<usize>,
    },
    /// A fixed-length bytes feature without a raw decode: `count` values per
    /// record, a bytes column `[B, ..shape]`.
    Bytes { shape: Vec<usize>, count: usize },
    /// A variable-length bytes feature (or feature list of bytes), padded
    /// with `b""` to the length of group `group`: a bytes column
    /// `[B, L, ..step]` and a mask tensor `[B, L]`.
    RaggedBytes {
        group: usize,
        mask: Option<(String, TensorType)>,
        step: Vec<usize>,
    },
}

/// One feature of the plan.
#[derive(Clone, Debug)]
pub(crate) struct OutFeature {
    pub(crate) name: String,
    pub(crate) dtype: TensorType,
    pub(crate) kind: OutKind,
}

impl OutFeature {
    /// Values per padded position: 1, or a feature list's step size.
    pub(crate) fn step_count(&self) -> usize {
        match &self.kind {
            OutKind::Ragged { step, .. } | OutKind::RaggedBytes { step, .. } => {
                step.iter().product()
            }
            OutKind::Dense { .. } | OutKind::Bytes { .. } => 1,
        }
    }

    /// The padding group of a variable-length feature.
    pub(crate) fn group(&self) -> Option<usize> {
        match self.kind {
            OutKind::Ragged { group, .. } | OutKind::RaggedBytes { group, .. } => Some(group),
            OutKind::Dense { .. } | OutKind::Bytes { .. } => None,
        }
    }

    /// The mask tensor's name and type, for a padded feature that has one.
    pub(crate) fn mask(&self) -> Option<&(String, TensorType)> {
        match &self.kind {
            OutKind::Ragged { mask, .. } | OutKind::RaggedBytes { mask, .. } => mask.as_ref(),
            OutKind::Dense { .. } | OutKind::Bytes { .. } => None,
        }
    }
}

/// Features padded to one common length per batch.
#[derive(Clone, Debug)]
pub(crate) struct Group {
    pub(crate) policy: LengthPolicy,
    /// Indices into `Assembler::outputs`.
    pub(crate) members: Vec<usize>,
    pub(crate) lengths: Vec<usize>,
    pub(crate) bound: usize,
}

/// A checked [`BatchPlan`](crate::batch::BatchPlan): turns [`ParsedBatch`](crate::example::ParsedBatch)es
/// into [`Batch`](crate::batch::Batch)es whose shapes are always among
/// [`shapes`](Self::shapes).
#[derive(Clone, Debug)]
pub struct Assembler {
    pub(crate) outputs: Vec<OutFeature>,
    pub(crate) groups: Vec<Group>,
    pub(crate) batch_size: usize,
    pub(crate) pool: BufferPool,
}

impl Assembler {
    /// Rows per batch.
    pub fn batch_size(&self) -> usize {
        self.batch_size
    }

    /// The pool tensor buffers come from.
    pub fn pool(&self) -> &BufferPool {
        &self.pool
    }

    /// Every shape [`assemble`](Self::assemble) can produce, sorted: one per
    /// combination of the padding groups' lengths.
    pub fn shapes(&self) -> Vec<BatchShape> {
        let active: Vec<usize> = (0..self.groups.len())
            .filter(|&g| !self.groups[g].members.is_empty())
            .collect();
        let mut out = Vec::new();
        let mut lengths = vec![0usize; self.groups.len()];
        self.combine(&active, 0, &mut lengths, &mut out);
        out.sort();
        out
    }

    fn combine(
        &self,
        active: &[usize],
        i: usize,
        lengths: &mut [usize],
        out: &mut Vec<BatchShape>,
    ) {
        match active.get(i) {
            None => out.push(self.shape_for(self.batch_size, lengths)),
            Some(&g) => {
                for &len in &self.groups[g].lengths {
                    lengths[g] = len;
                    self.combine(active, i + 1, lengths, out);
                }
            }
        }
    }

    /// The batch shape for `rows` rows and group `g` padded to `lengths[g]`.
    pub(crate) fn shape_for(&self, rows: usize, lengths: &[usize]) -> BatchShape {
        let mut tensors = Vec::new();
        for out in &self.outputs {
            match &out.kind {
                OutKind::Dense { shape, decode, .. } => {
                    let mut s = Vec::with_capacity(shape.len() + 4);
                    s.push(rows);
                    s.extend_from_slice(shape);
                    if let Some((d, _)) = decode {
                        s.extend_from_slice(d);
                    }
                    tensors.push(TensorShape {
                        name: out.name.clone(),
                        dtype: out.dtype,
                        shape: s,
                    });
                }
                OutKind::Ragged {
                    group, mask, step, ..
                } => {
                    let len = lengths.get(*group).copied().unwrap_or(0);
                    let mut shape = vec![rows, len];
                    shape.extend_from_slice(step);
                    tensors.push(TensorShape {
                        name: out.name.clone(),
                        dtype: out.dtype,
                        shape,
                    });
                    if let Some((m, t)) = mask {
                        tensors.push(TensorShape {
                            name: m.clone(),
                            dtype: *t,
                            shape: vec![rows, len],
                        });
                    }
                }
                // Bytes columns stay on the host; a padded one's mask is a tensor.
                OutKind::Bytes { .. } => {}
                OutKind::RaggedBytes { group, mask, .. } => {
                    let len = lengths.get(*group).copied().unwrap_or(0);
                    if let Some((m, t)) = mask {
                        tensors.push(TensorShape {
                            name: m.clone(),
                            dtype: *t,
                            shape: vec![rows, len],
                        });
                    }
                }
            }
        }
        BatchShape { tensors }
    }

    /// The names of the bytes columns of every batch, in order.
    pub fn bytes_names(&self) -> Vec<String> {
        self.outputs
            .iter()
            .filter(|o| matches!(o.kind, OutKind::Bytes { .. } | OutKind::RaggedBytes { .. }))
            .map(|o| o.name.clone())
            .collect()
    }

    /// The names of the tensors of every batch, in order.
    pub fn tensor_names(&self) -> Vec<String> {
        self.shape_for(self.batch_size, &[])
            .tensors
            .into_iter()
            .map(|t| t.name)
            .collect()
    }
}
