//! How a variable-length feature is padded: its [`LengthPolicy`], what to
//! do with longer sequences ([`Truncation`]) and its mask ([`MaskType`]).

use super::error::PlanError;
use super::fill::Scalar;
use crate::batch::dtype::TensorType;

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

impl crate::words::Words for Truncation {
    const SETTING: &'static str = "truncation";
    const WORDS: &'static [crate::words::Word<Self>] = &[
        (&["error"], Truncation::Error),
        (&["keep_start"], Truncation::KeepStart),
        (&["keep_end"], Truncation::KeepEnd),
    ];
}

impl std::str::FromStr for Truncation {
    type Err = crate::words::UnknownWord;

    /// `error`, `keep_start` or `keep_end`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        crate::words::read(s)
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

impl crate::words::Words for MaskType {
    const SETTING: &'static str = "mask type";
    const WORDS: &'static [crate::words::Word<Self>] = &[
        (&["auto"], MaskType::Auto),
        (&["u8", "uint8", "bool"], MaskType::Type(TensorType::U8)),
        (&["i32", "int32"], MaskType::Type(TensorType::I32)),
        (&["i64", "int64"], MaskType::Type(TensorType::I64)),
        (&["f32", "float32"], MaskType::Type(TensorType::F32)),
        (&["bf16", "bfloat16"], MaskType::Type(TensorType::BF16)),
        (&["none"], MaskType::None),
    ];
}

impl std::str::FromStr for MaskType {
    type Err = crate::words::UnknownWord;

    /// `auto` (the feature's type), `u8` (`uint8`, `bool`: one byte 0/1), `i32`,
    /// `i64`, `f32`, `bf16`, or `none`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        crate::words::read(s)
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

    /// How many lengths [`target`](Self::target) can give (`None`:
    /// unbounded), counted without listing them.
    pub fn length_count(&self) -> Option<usize> {
        if self.fixed.is_some() {
            return Some(1);
        }
        Some(self.max?.div_ceil(self.multiple.max(1)))
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
    pub(super) fn validate(&self, feature: &str) -> Result<(), PlanError> {
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
        // A multiple above the bound is no error: every batch pads to the
        // bound, as the cap says.
        if self.bound().is_none() {
            return Err(PlanError::Unbounded {
                feature: feature.to_string(),
            });
        }
        Ok(())
    }
}
