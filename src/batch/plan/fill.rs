//! Fill values: a [`Scalar`] as the user gives it, and a [`Fill`] in a
//! tensor's own type.

use crate::batch::dtype::TensorType;
use std::fmt;

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
    BF16(crate::batch::Bf16),
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
                Fill::BF16(crate::batch::Bf16::from_f32(if one { 1.0 } else { 0.0 }))
            }
        }
    }
}
