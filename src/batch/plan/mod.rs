//! Batch plans: how each parsed feature becomes a batch tensor (length
//! policy, padding, mask, cast, raw decode), checked once before the first
//! batch, and the finite set of shapes the resulting batches can have.
//!
//! [`BatchPlan`] (here) is what the user describes; `policy.rs` how a
//! variable-length feature is padded, `fill.rs` the pad values, `error.rs`
//! what a plan can get wrong, and `assembler.rs` the checked plan, an
//! [`Assembler`], with the shapes its batches can have.

mod assembler;
mod error;
mod fill;
mod policy;

pub use assembler::Assembler;
pub(crate) use assembler::{Group, OutFeature, OutKind};
pub use error::{MAX_SHAPES, PlanError};
pub(crate) use fill::Fill;
pub use fill::Scalar;
pub use policy::{LengthPolicy, MaskType, Truncation};

use crate::batch::buffer::BufferPool;
use crate::batch::dtype::TensorType;
use crate::spec::{DType, FeatureDef, FeatureKind, FeatureSpec, SequenceKind, SequenceSpec};

/// Describes how parsed columns become a [`Batch`](super::Batch); checked by
/// [`build`](Self::build) into an [`Assembler`].
///
/// Every feature of the spec becomes a tensor, in spec order, unless skipped:
/// - fixed-length numeric features pass through as `[B, ..shape]`;
/// - fixed-length bytes features become a bytes column `[B, ..shape]` of
///   the batch ([`Batch::bytes`](super::Batch::bytes)), or, with
///   [`decode_raw`](Self::decode_raw), a u8 tensor of each value's bytes;
/// - variable-length features need a [`LengthPolicy`] (through a padding
///   group, [`pad`](Self::pad), or [`pad_all`](Self::pad_all)) and become
///   `[B, L]` plus a mask `<name>_mask` `[B, L]` (1 real, 0 padding); a
///   bytes one a bytes column `[B, L]` padded with `b""`, its mask a tensor.
///
/// Features of one padding group share the length `L` of each batch (e.g.
/// `input_ids` and `attention_mask`), so they add one dimension of choice to
/// the shape set rather than one each.
///
/// A plan [`for_sequence`](Self::for_sequence) takes the context features as
/// above and each feature list of fixed-shape steps like a variable-length
/// feature over time: `[B, T, ..step]` plus `<name>_mask` `[B, T]`.
#[derive(Clone, Debug)]
pub struct BatchPlan {
    spec: FeatureSpec,
    /// Feature lists, after the context features (`SequenceExample`).
    lists: Vec<crate::spec::SequenceFeatureDef>,
    batch_size: usize,
    groups: Vec<(Vec<String>, LengthPolicy)>,
    pad_all: Option<LengthPolicy>,
    casts: Vec<(String, TensorType)>,
    cast_ints: Option<TensorType>,
    decodes: Vec<(String, Vec<usize>)>,
    masks: Vec<(String, MaskType)>,
    skips: Vec<String>,
    pool: Option<BufferPool>,
}

impl BatchPlan {
    /// A plan for batches of `batch_size` rows of the features of `spec`.
    /// An image feature is taken as decoded already (its values `H×W×C`
    /// bytes of pixels, as the pipeline's workers make them): it becomes
    /// `[B, H, W, C]` u8.
    pub fn new(spec: &FeatureSpec, batch_size: usize) -> Self {
        let decodes = spec
            .images()
            .iter()
            .map(|(name, image)| (name.clone(), image.shape().to_vec()))
            .collect();
        Self {
            spec: spec.clone(),
            lists: Vec::new(),
            batch_size,
            groups: Vec::new(),
            pad_all: None,
            casts: Vec::new(),
            cast_ints: None,
            decodes,
            masks: Vec::new(),
            skips: Vec::new(),
            pool: None,
        }
    }

    /// A plan for batches of `batch_size` `SequenceExample`s: the context
    /// features of `spec`, then its feature lists, padded along time like
    /// variable-length features (a list of steps of varying length is a
    /// [`PlanError::RaggedSteps`] at [`build`](Self::build)).
    pub fn for_sequence(spec: &SequenceSpec, batch_size: usize) -> Self {
        let mut plan = Self::new(spec.context(), batch_size);
        plan.lists = spec.sequence().to_vec();
        plan
    }

    /// Pads these variable-length features to one common length per batch.
    pub fn pad(mut self, features: &[&str], policy: LengthPolicy) -> Self {
        let names = features.iter().map(|s| s.to_string()).collect();
        self.groups.push((names, policy));
        self
    }

    /// Pads every variable-length feature not in a [`pad`](Self::pad) group,
    /// all together as one group.
    pub fn pad_all(mut self, policy: LengthPolicy) -> Self {
        self.pad_all = Some(policy);
        self
    }

    /// Emits `feature` as `dtype`: int64 and int32 features as i64 or i32
    /// (a value out of range is an error naming the record), float as f32.
    pub fn cast(mut self, feature: &str, dtype: TensorType) -> Self {
        self.casts.push((feature.to_string(), dtype));
        self
    }

    /// Emits every integer feature without its own [`cast`](Self::cast) as
    /// `dtype` (i32 or i64).
    pub fn cast_ints(mut self, dtype: TensorType) -> Self {
        self.cast_ints = Some(dtype);
        self
    }

    /// Decodes a fixed-length bytes feature as raw u8 of `shape` per value
    /// (e.g. an `image` of 3072 bytes as `[32, 32, 3]`, giving
    /// `[B, 32, 32, 3]`); a value of another size is an error naming the record.
    pub fn decode_raw(mut self, feature: &str, shape: &[usize]) -> Self {
        self.decodes.push((feature.to_string(), shape.to_vec()));
        self
    }

    /// The mask of the variable-length `feature`, over its padding group's
    /// [`LengthPolicy::mask`]: e.g. [`MaskType::None`] for `input_ids`
    /// and `attention_mask`, whose values already are the mask.
    pub fn mask(mut self, feature: &str, mask: MaskType) -> Self {
        self.masks.push((feature.to_string(), mask));
        self
    }

    /// Leaves `feature` out of the batch.
    pub fn skip(mut self, feature: &str) -> Self {
        self.skips.push(feature.to_string());
        self
    }

    /// Takes tensor buffers from `pool` (default: a pool of its own).
    pub fn pool(mut self, pool: BufferPool) -> Self {
        self.pool = Some(pool);
        self
    }

    /// Checks the plan: every feature known, every variable length bounded,
    /// casts possible, names unique, at most [`MAX_SHAPES`] shapes.
    pub fn build(self) -> Result<Assembler, PlanError> {
        if self.batch_size == 0 {
            return Err(PlanError::ZeroBatchSize);
        }
        let known = |name: &str| -> Result<(), PlanError> {
            match self.spec.get(name) {
                Some(_) => Ok(()),
                None if self.lists.iter().any(|l| l.name == name) => Ok(()),
                None => Err(PlanError::UnknownFeature {
                    feature: name.to_string(),
                }),
            }
        };
        for (names, _) in &self.groups {
            if names.is_empty() {
                return Err(PlanError::EmptyGroup);
            }
            names.iter().try_for_each(|n| known(n))?;
        }
        self.casts.iter().try_for_each(|(n, _)| known(n))?;
        self.decodes.iter().try_for_each(|(n, _)| known(n))?;
        self.masks.iter().try_for_each(|(n, _)| known(n))?;
        self.skips.iter().try_for_each(|n| known(n))?;
        for (name, image) in self.spec.images() {
            image.check().map_err(|reason| PlanError::BadImage {
                feature: name.clone(),
                reason,
            })?;
        }

        // Group index of each feature named in an explicit group.
        let mut group_of: Vec<(String, usize)> = Vec::new();
        for (g, (names, _)) in self.groups.iter().enumerate() {
            for n in names {
                if group_of.iter().any(|(m, _)| m == n) {
                    return Err(PlanError::DuplicateGroup { feature: n.clone() });
                }
                group_of.push((n.clone(), g));
            }
        }
        let mut groups: Vec<Group> = self
            .groups
            .iter()
            .map(|(_, policy)| Group {
                policy: policy.clone(),
                members: Vec::new(),
                lengths: Vec::new(),
                bound: 0,
            })
            .collect();
        let mut pad_all_group: Option<usize> = None;

        // Feature lists take the variable-length path with their step shape.
        let mut defs: Vec<(FeatureDef, Vec<usize>)> = self
            .spec
            .features()
            .iter()
            .map(|d| (d.clone(), Vec::new()))
            .collect();
        for l in &self.lists {
            let SequenceKind::FixedLen { shape } = &l.kind else {
                if self.skips.contains(&l.name) {
                    continue;
                }
                return Err(PlanError::RaggedSteps {
                    feature: l.name.clone(),
                });
            };
            let def = FeatureDef {
                name: l.name.clone(),
                dtype: l.dtype,
                kind: FeatureKind::VarLen,
            };
            defs.push((def, shape.clone()));
        }
        let mut outputs: Vec<OutFeature> = Vec::new();
        for (def, step) in &defs {
            let name = def.name.as_str();
            if self.skips.iter().any(|s| s == name) {
                continue;
            }
            let explicit_cast = self
                .casts
                .iter()
                .rev()
                .find(|(n, _)| n == name)
                .map(|c| c.1);
            let decode = self.decodes.iter().rev().find(|(n, _)| n == name);
            let bad_cast = |to| PlanError::BadCast {
                feature: name.to_string(),
                from: def.dtype,
                to,
            };
            let dtype = match def.dtype {
                DType::Int64 | DType::Int32 => {
                    let default = if def.dtype == DType::Int64 {
                        TensorType::I64
                    } else {
                        TensorType::I32
                    };
                    match explicit_cast.or(self.cast_ints) {
                        Some(t @ (TensorType::I64 | TensorType::I32)) => t,
                        Some(t) => return Err(bad_cast(t)),
                        None => default,
                    }
                }
                DType::Float32 => match explicit_cast {
                    None | Some(TensorType::F32) => TensorType::F32,
                    Some(t) => return Err(bad_cast(t)),
                },
                DType::Bytes => match explicit_cast {
                    None | Some(TensorType::U8) => TensorType::U8,
                    Some(t) => return Err(bad_cast(t)),
                },
            };
            if decode.is_some() && (def.dtype != DType::Bytes || def.fixed_count().is_none()) {
                return Err(PlanError::NotDecodable {
                    feature: name.to_string(),
                    dtype: def.dtype,
                });
            }
            let kind = match &def.kind {
                FeatureKind::FixedLen { shape, .. } => {
                    if group_of.iter().any(|(n, _)| n == name)
                        || self.masks.iter().any(|(n, _)| n == name)
                    {
                        return Err(PlanError::NotVarLen {
                            feature: name.to_string(),
                        });
                    }
                    let too_large = || PlanError::TooLarge {
                        feature: name.to_string(),
                        dims: [&[self.batch_size][..], shape].concat(),
                    };
                    let count = super::shape::checked_numel(shape).ok_or_else(too_large)?;
                    let decode = match (def.dtype, decode) {
                        (DType::Bytes, None) => {
                            count
                                .checked_mul(self.batch_size)
                                .filter(|&n| n <= isize::MAX as usize / 16)
                                .ok_or_else(too_large)?;
                            outputs.push(OutFeature {
                                name: name.to_string(),
                                dtype,
                                kind: OutKind::Bytes {
                                    shape: shape.clone(),
                                    count,
                                },
                            });
                            continue;
                        }
                        (_, Some((_, dshape))) => {
                            let n = super::shape::checked_numel(dshape).ok_or_else(too_large)?;
                            Some((dshape.clone(), n))
                        }
                        (_, None) => None,
                    };
                    let row = count
                        .checked_mul(decode.as_ref().map_or(1, |d| d.1))
                        .and_then(|n| n.checked_mul(dtype.size()));
                    row.and_then(|n| n.checked_mul(self.batch_size))
                        .filter(|&n| n <= isize::MAX as usize / 2)
                        .ok_or_else(too_large)?;
                    OutKind::Dense {
                        shape: shape.clone(),
                        count,
                        decode,
                    }
                }
                FeatureKind::VarLen => {
                    let group = match group_of.iter().find(|(n, _)| n == name) {
                        Some(&(_, g)) => g,
                        None => match (&self.pad_all, pad_all_group) {
                            (Some(_), Some(g)) => g,
                            (Some(policy), None) => {
                                groups.push(Group {
                                    policy: policy.clone(),
                                    members: Vec::new(),
                                    lengths: Vec::new(),
                                    bound: 0,
                                });
                                pad_all_group = Some(groups.len() - 1);
                                groups.len() - 1
                            }
                            (None, _) => {
                                return Err(PlanError::Unbounded {
                                    feature: name.to_string(),
                                });
                            }
                        },
                    };
                    let policy = &groups[group].policy;
                    policy.validate(name)?;
                    let mask_type = match self.masks.iter().rev().find(|(n, _)| n == name) {
                        Some(&(_, m)) => m,
                        None => policy.mask,
                    };
                    let mask = mask_type.resolve(dtype);
                    let bound = policy.bound().unwrap_or(0);
                    let too_large = || PlanError::TooLarge {
                        feature: name.to_string(),
                        dims: [&[self.batch_size, bound][..], step].concat(),
                    };
                    let step_count = super::shape::checked_numel(step).ok_or_else(too_large)?;
                    bound
                        .checked_mul(step_count.max(1))
                        .and_then(|n| n.checked_mul(self.batch_size))
                        .and_then(|n| n.checked_mul(8))
                        .filter(|&n| n <= isize::MAX as usize / 2)
                        .ok_or_else(too_large)?;
                    let mask = mask.map(|t| (format!("{name}_mask"), t));
                    let kind = if def.dtype == DType::Bytes {
                        // Padded with b"": the pad value is a number, for numbers.
                        OutKind::RaggedBytes {
                            group,
                            mask,
                            step: step.clone(),
                        }
                    } else {
                        let pad =
                            Fill::new(policy.pad_value, dtype).ok_or(PlanError::PadValue {
                                feature: name.to_string(),
                                value: policy.pad_value,
                                dtype,
                            })?;
                        OutKind::Ragged {
                            group,
                            pad,
                            mask,
                            step: step.clone(),
                        }
                    };
                    groups[group].members.push(outputs.len());
                    kind
                }
            };
            outputs.push(OutFeature {
                name: name.to_string(),
                dtype,
                kind,
            });
        }

        // Groups whose features were all skipped take no part. Counted
        // before the lengths are listed: a typo'd bound lists billions.
        let count = groups
            .iter()
            .filter(|g| !g.members.is_empty())
            .fold(1usize, |n, g| {
                n.saturating_mul(g.policy.length_count().unwrap_or(0))
            });
        if count > MAX_SHAPES {
            return Err(PlanError::TooManyShapes { count });
        }
        for g in &mut groups {
            if g.members.is_empty() {
                continue;
            }
            g.lengths = g.policy.lengths().unwrap_or_default();
            g.bound = g.policy.bound().unwrap_or(0);
        }

        let mut names: Vec<&str> = Vec::new();
        for out in &outputs {
            names.push(&out.name);
            names.extend(out.mask().map(|(m, _)| m.as_str()));
        }
        let mut sorted = names.clone();
        sorted.sort_unstable();
        if let Some(w) = sorted.windows(2).find(|w| w[0] == w[1]) {
            return Err(PlanError::DuplicateName {
                name: w[0].to_string(),
            });
        }

        Ok(Assembler {
            outputs,
            groups,
            batch_size: self.batch_size,
            pool: self.pool.unwrap_or_default(),
        })
    }
}
