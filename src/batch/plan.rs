//! Batch plans: how each parsed feature becomes a batch tensor (length
//! policy, padding, mask, cast, raw decode), checked once before the first
//! batch, and the finite set of shapes the resulting batches can have.

use std::fmt;

use super::buffer::BufferPool;
use super::dtype::TensorType;
use super::tensor::{BatchShape, TensorShape};
use crate::spec::{DType, FeatureDef, FeatureKind, FeatureSpec, SequenceKind, SequenceSpec};

/// Most distinct batch shapes a plan may produce: each one is an XLA compile.
pub const MAX_SHAPES: usize = 4096;

/// What to do with a sequence longer than its length limit.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum Truncation {
    /// Fail the batch, naming the record, the feature and its length.
    #[default]
    Error,
    /// Keep the first `limit` values.
    KeepStart,
    /// Keep the last `limit` values.
    KeepEnd,
}

/// A scalar fill value, converted to each tensor's type when the plan is built.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Scalar {
    Int(i64),
    Float(f32),
}

impl From<i64> for Scalar {
    fn from(v: i64) -> Self {
        Scalar::Int(v)
    }
}

impl From<i32> for Scalar {
    fn from(v: i32) -> Self {
        Scalar::Int(v.into())
    }
}

impl From<f32> for Scalar {
    fn from(v: f32) -> Self {
        Scalar::Float(v)
    }
}

impl fmt::Display for Scalar {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Scalar::Int(v) => write!(f, "{v}"),
            Scalar::Float(v) => write!(f, "{v}"),
        }
    }
}

/// A fill value in a tensor's own type.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Fill {
    I64(i64),
    I32(i32),
    F32(f32),
    U8(u8),
    BF16(super::dtype::Bf16),
}

impl Fill {
    /// `value` as a `dtype` element, if it is exactly representable (ints
    /// in range; a float only for f32; an int for f32 when within ±2^24).
    pub(crate) fn new(value: Scalar, dtype: TensorType) -> Option<Self> {
        match (value, dtype) {
            (Scalar::Int(v), TensorType::I64) => Some(Fill::I64(v)),
            (Scalar::Int(v), TensorType::I32) => i32::try_from(v).ok().map(Fill::I32),
            (Scalar::Int(v), TensorType::U8) => u8::try_from(v).ok().map(Fill::U8),
            (Scalar::Int(v), TensorType::F32) => {
                (v.unsigned_abs() <= 1 << 24).then_some(Fill::F32(v as f32))
            }
            (Scalar::Float(v), TensorType::F32) => Some(Fill::F32(v)),
            (Scalar::Float(_), _) | (Scalar::Int(_), TensorType::BF16) => None,
        }
    }

    /// Zero of `dtype`.
    pub(crate) fn zero(dtype: TensorType) -> Self {
        Self::one_or_zero(dtype, false)
    }

    /// 1 (real) or 0 (padding) of `dtype`, for masks.
    pub(crate) fn one_or_zero(dtype: TensorType, one: bool) -> Self {
        match dtype {
            TensorType::I64 => Fill::I64(one.into()),
            TensorType::I32 => Fill::I32(one.into()),
            TensorType::F32 => Fill::F32(if one { 1.0 } else { 0.0 }),
            TensorType::U8 => Fill::U8(one.into()),
            TensorType::BF16 => {
                Fill::BF16(super::dtype::Bf16::from_f32(if one { 1.0 } else { 0.0 }))
            }
        }
    }
}

/// How a mask tensor is made for a padded feature: `<name>_mask`, the
/// shape of the feature's `[B, L]`, 1 on real values and 0 on padding.
///
/// For XLA: a mask is an input like any other, so what counts is its bytes.
/// [`Type(TensorType::U8)`](MaskType::Type) writes 1/8 of an i64 mask and
/// 1/4 of an i32 one, and a step turns it into what it needs on the device
/// (`mask.astype(bool)` or a multiply, fused by XLA). [`MaskType::None`]
/// suits features that carry their own mask: Hugging Face's
/// `attention_mask` *is* the mask of `input_ids` (padded with 0), so an lm
/// pipeline needs neither `input_ids_mask` nor `attention_mask_mask`.
/// The default, [`MaskType::Auto`], keeps the feature's own integer type.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum MaskType {
    /// The value tensor's type when it is an integer type (i64 or i32, so an
    /// `input_ids` mask matches the ids like Hugging Face's `attention_mask`);
    /// u8 for f32 and u8 values.
    #[default]
    Auto,
    /// This type (an f32 mask holds 1.0 and 0.0; a u8 mask is numpy's and
    /// JAX's `bool` layout, one byte 0 or 1).
    Type(TensorType),
    /// No mask tensor.
    None,
}

impl MaskType {
    /// The mask's tensor type for a feature emitted as `dtype` (`None`: no
    /// mask).
    pub(crate) fn resolve(self, dtype: TensorType) -> Option<TensorType> {
        match self {
            MaskType::None => None,
            MaskType::Type(t) => Some(t),
            MaskType::Auto => Some(match dtype {
                TensorType::I64 | TensorType::I32 => dtype,
                TensorType::F32 | TensorType::U8 | TensorType::BF16 => TensorType::U8,
            }),
        }
    }
}

impl std::fmt::Display for MaskType {
    /// The word [`FromStr`](std::str::FromStr) reads: `auto`, `u8`, `i32`,
    /// `i64`, `f32` or `none`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            MaskType::Auto => f.write_str("auto"),
            MaskType::Type(t) => write!(f, "{t}"),
            MaskType::None => f.write_str("none"),
        }
    }
}

impl std::str::FromStr for MaskType {
    type Err = String;

    /// `auto` (the feature's type), `u8` (`uint8`, `bool`: one byte 0/1), `i32`,
    /// `i64`, `f32`, or `none`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(match s {
            "auto" => MaskType::Auto,
            "u8" | "uint8" | "bool" => MaskType::Type(TensorType::U8),
            "i32" | "int32" => MaskType::Type(TensorType::I32),
            "i64" | "int64" => MaskType::Type(TensorType::I64),
            "f32" | "float32" => MaskType::Type(TensorType::F32),
            "none" => MaskType::None,
            other => {
                return Err(format!(
                    "mask type {other:?}: expected auto, u8 (or bool), i32, i64, f32 or none"
                ));
            }
        })
    }
}

/// How a variable-length feature is padded to a static length.
///
/// The target length of a batch is, unless [`fixed_length`](Self::fixed_length):
/// the longest sequence of the batch (at least 1) rounded up to a multiple of
/// [`pad_to_multiple_of`](Self::pad_to_multiple_of), capped at
/// [`max_length`](Self::max_length). So `pad_to_multiple_of(64).max_length(512)`
/// gives lengths in {64, 128, …, 512}, and `max_length(500)` with multiple 64
/// gives {64, …, 448, 500}. Longer sequences follow [`Truncation`].
///
/// A policy must bound the length (`fixed_length` or `max_length`): an
/// unbounded length means unboundedly many shapes, which the plan rejects.
#[derive(Clone, Debug, PartialEq)]
pub struct LengthPolicy {
    pub(crate) multiple: usize,
    pub(crate) fixed: Option<usize>,
    pub(crate) max: Option<usize>,
    pub(crate) truncation: Truncation,
    pub(crate) pad_value: Scalar,
    pub(crate) mask: MaskType,
}

impl Default for LengthPolicy {
    fn default() -> Self {
        Self::new()
    }
}

impl LengthPolicy {
    /// Pad to the longest sequence of the batch, with no bound (add one),
    /// pad value 0, truncation [`Truncation::Error`], an automatic mask.
    pub fn new() -> Self {
        Self {
            multiple: 1,
            fixed: None,
            max: None,
            truncation: Truncation::Error,
            pad_value: Scalar::Int(0),
            mask: MaskType::Auto,
        }
    }

    /// Round the batch's length up to a multiple of `n`.
    pub fn pad_to_multiple_of(mut self, n: usize) -> Self {
        self.multiple = n;
        self
    }

    /// Always pad (and truncate) to exactly `len`.
    pub fn fixed_length(mut self, len: usize) -> Self {
        self.fixed = Some(len);
        self
    }

    /// Never longer than `len`.
    pub fn max_length(mut self, len: usize) -> Self {
        self.max = Some(len);
        self
    }

    /// What to do with longer sequences (default [`Truncation::Error`]).
    pub fn truncation(mut self, truncation: Truncation) -> Self {
        self.truncation = truncation;
        self
    }

    /// The value padding positions hold (default 0).
    pub fn pad_value(mut self, value: impl Into<Scalar>) -> Self {
        self.pad_value = value.into();
        self
    }

    /// The mask's type, or no mask (default [`MaskType::Auto`]).
    pub fn mask(mut self, mask: MaskType) -> Self {
        self.mask = mask;
        self
    }

    /// The largest length the policy can give (`None`: unbounded).
    pub fn bound(&self) -> Option<usize> {
        self.fixed.or(self.max)
    }

    /// The length a batch whose longest sequence has `longest` values is
    /// padded to.
    pub fn target(&self, longest: usize) -> usize {
        if let Some(fixed) = self.fixed {
            return fixed;
        }
        let m = self.multiple.max(1);
        let rounded = longest.max(1).div_ceil(m).saturating_mul(m);
        match self.max {
            Some(max) => rounded.min(max),
            None => rounded,
        }
    }

    /// Every length [`target`](Self::target) can give, ascending (`None`:
    /// unbounded).
    pub fn lengths(&self) -> Option<Vec<usize>> {
        if let Some(fixed) = self.fixed {
            return Some(vec![fixed]);
        }
        let max = self.max?;
        let m = self.multiple.max(1);
        let mut out: Vec<usize> = (1..=max.div_ceil(m)).map(|k| (k * m).min(max)).collect();
        out.dedup();
        Some(out)
    }

    /// Checks the policy for `feature`.
    fn validate(&self, feature: &str) -> Result<(), PlanError> {
        let zero = |what: &'static str| PlanError::ZeroLength {
            feature: feature.to_string(),
            what,
        };
        if self.multiple == 0 {
            return Err(zero("pad_to_multiple_of"));
        }
        if self.fixed == Some(0) {
            return Err(zero("fixed_length"));
        }
        if self.max == Some(0) {
            return Err(zero("max_length"));
        }
        if self.fixed.is_some() && (self.max.is_some() || self.multiple != 1) {
            return Err(PlanError::ConflictingLengths {
                feature: feature.to_string(),
            });
        }
        if self.bound().is_none() {
            return Err(PlanError::Unbounded {
                feature: feature.to_string(),
            });
        }
        Ok(())
    }
}

/// A plan that cannot produce static-shape batches.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum PlanError {
    #[error("batch size must be at least 1")]
    ZeroBatchSize,
    #[error("feature {feature:?} is not in the spec")]
    UnknownFeature { feature: String },
    #[error(
        "feature {feature:?} has variable length but no length bound \
         (give it fixed_length or max_length): unbounded shape"
    )]
    Unbounded { feature: String },
    #[error("feature {feature:?} has a fixed length: it takes no length policy or mask")]
    NotVarLen { feature: String },
    #[error("feature {feature:?} is in two padding groups")]
    DuplicateGroup { feature: String },
    #[error("a padding group names no feature")]
    EmptyGroup,
    #[error(
        "feature {feature:?}: fixed_length cannot be combined with max_length or pad_to_multiple_of"
    )]
    ConflictingLengths { feature: String },
    #[error("feature {feature:?}: {what} must be at least 1")]
    ZeroLength { feature: String, what: &'static str },
    #[error("feature {feature:?} is {from}: it cannot be cast to {to}")]
    BadCast {
        feature: String,
        from: DType,
        to: TensorType,
    },
    #[error("feature {feature:?} holds bytes: give it a raw decode shape (decode_raw) or skip it")]
    NeedsDecode { feature: String },
    #[error("feature {feature:?} is {dtype}: only a fixed-length bytes feature can be decoded raw")]
    NotDecodable { feature: String, dtype: DType },
    #[error("image feature {feature:?}: {reason}")]
    BadImage { feature: String, reason: String },
    #[error("feature {feature:?}: pad value {value} is not a {dtype}")]
    PadValue {
        feature: String,
        value: Scalar,
        dtype: TensorType,
    },
    #[error("two output tensors are called {name:?}")]
    DuplicateName { name: String },
    #[error("the plan can produce {count} batch shapes, more than {max}", max = MAX_SHAPES)]
    TooManyShapes { count: usize },
    #[error("the batch of feature {feature:?} would be too large")]
    TooLarge { feature: String },
    #[error("bucket boundary {boundary} is above feature {feature:?}'s length bound {bound}")]
    BoundaryAboveBound {
        feature: String,
        boundary: usize,
        bound: usize,
    },
    #[error("feature {feature:?} was given to the packer twice")]
    DuplicateFeature { feature: String },
    #[error("the packer needs at least one feature")]
    NoFeatures,
    #[error(
        "feature list {feature:?} has steps of varying length: only feature lists of \
         fixed-shape steps can be padded to a static shape"
    )]
    RaggedSteps { feature: String },
}

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
            OutKind::Ragged { step, .. } => step.iter().product(),
            OutKind::Dense { .. } => 1,
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

/// Describes how parsed columns become a [`Batch`](super::Batch); checked by
/// [`build`](Self::build) into an [`Assembler`].
///
/// Every feature of the spec becomes a tensor, in spec order, unless skipped:
/// - fixed-length numeric features pass through as `[B, ..shape]`;
/// - fixed-length bytes features need [`decode_raw`](Self::decode_raw);
/// - variable-length features need a [`LengthPolicy`] (through a padding
///   group, [`pad`](Self::pad), or [`pad_all`](Self::pad_all)) and become
///   `[B, L]` plus a mask `<name>_mask` `[B, L]` (1 real, 0 padding).
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
                    };
                    let count = super::tensor::checked_numel(shape).ok_or_else(too_large)?;
                    let decode = match (def.dtype, decode) {
                        (DType::Bytes, None) => {
                            return Err(PlanError::NeedsDecode {
                                feature: name.to_string(),
                            });
                        }
                        (_, Some((_, dshape))) => {
                            let n = super::tensor::checked_numel(dshape).ok_or_else(too_large)?;
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
                    if def.dtype == DType::Bytes {
                        return Err(PlanError::NeedsDecode {
                            feature: name.to_string(),
                        });
                    }
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
                    let pad = Fill::new(policy.pad_value, dtype).ok_or(PlanError::PadValue {
                        feature: name.to_string(),
                        value: policy.pad_value,
                        dtype,
                    })?;
                    let mask_type = match self.masks.iter().rev().find(|(n, _)| n == name) {
                        Some(&(_, m)) => m,
                        None => policy.mask,
                    };
                    let mask = mask_type.resolve(dtype);
                    let step_count =
                        super::tensor::checked_numel(step).ok_or_else(|| PlanError::TooLarge {
                            feature: name.to_string(),
                        })?;
                    let bound = policy.bound().unwrap_or(0);
                    bound
                        .checked_mul(step_count.max(1))
                        .and_then(|n| n.checked_mul(self.batch_size))
                        .and_then(|n| n.checked_mul(8))
                        .filter(|&n| n <= isize::MAX as usize / 2)
                        .ok_or_else(|| PlanError::TooLarge {
                            feature: name.to_string(),
                        })?;
                    groups[group].members.push(outputs.len());
                    OutKind::Ragged {
                        group,
                        pad,
                        mask: mask.map(|t| (format!("{name}_mask"), t)),
                        step: step.clone(),
                    }
                }
            };
            outputs.push(OutFeature {
                name: name.to_string(),
                dtype,
                kind,
            });
        }

        // Groups whose features were all skipped take no part.
        let mut count = 1usize;
        for g in &mut groups {
            if g.members.is_empty() {
                continue;
            }
            g.lengths = g.policy.lengths().unwrap_or_default();
            g.bound = g.policy.bound().unwrap_or(0);
            count = count.saturating_mul(g.lengths.len());
        }
        if count > MAX_SHAPES {
            return Err(PlanError::TooManyShapes { count });
        }

        let mut names: Vec<&str> = Vec::new();
        for out in &outputs {
            names.push(&out.name);
            if let OutKind::Ragged {
                mask: Some((m, _)), ..
            } = &out.kind
            {
                names.push(m);
            }
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

/// A checked [`BatchPlan`]: turns [`ParsedBatch`](crate::example::ParsedBatch)es
/// into [`Batch`](super::Batch)es whose shapes are always among
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
            }
        }
        BatchShape { tensors }
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
