//! Element types: [`TensorType`] names a tensor's element type, [`Element`]
//! is the Rust type a buffer can be viewed as.

use std::fmt;

/// The element type of a batch tensor.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum TensorType {
    I64,
    I32,
    F32,
    U8,
    /// bfloat16 ([`Bf16`]): only [`normalize`](crate::pipeline::ParsedPipeline::normalize)
    /// writes it.
    BF16,
}

impl crate::words::Words for TensorType {
    const SETTING: &'static str = "dtype";
    const WORDS: &'static [crate::words::Word<Self>] = &[
        (&["int64", "i64"], TensorType::I64),
        (&["int32", "i32"], TensorType::I32),
        (&["float32", "f32", "float"], TensorType::F32),
        (&["uint8", "u8"], TensorType::U8),
        (&["bfloat16", "bf16"], TensorType::BF16),
    ];
}

impl std::str::FromStr for TensorType {
    type Err = crate::words::UnknownWord;

    /// numpy's names (`int64`, `int32`, `float32`, `uint8`, `bfloat16`) or
    /// the short ones (`i64`, `i32`, `f32`, `u8`, `bf16`).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        crate::words::read(s)
    }
}

impl TensorType {
    /// Bytes per element.
    pub fn size(self) -> usize {
        match self {
            TensorType::I64 => 8,
            TensorType::I32 | TensorType::F32 => 4,
            TensorType::U8 => 1,
            TensorType::BF16 => 2,
        }
    }

    /// The usual short name (`i64`, `i32`, `f32`, `u8`, `bf16`).
    pub fn name(self) -> &'static str {
        match self {
            TensorType::I64 => "i64",
            TensorType::I32 => "i32",
            TensorType::F32 => "f32",
            TensorType::U8 => "u8",
            TensorType::BF16 => "bf16",
        }
    }

    /// The code [`Batch::digest`](super::Batch::digest) hashes for this type.
    pub(super) fn code(self) -> u8 {
        match self {
            TensorType::I64 => 0,
            TensorType::I32 => 1,
            TensorType::F32 => 2,
            TensorType::U8 => 3,
            TensorType::BF16 => 4,
        }
    }
}

impl fmt::Display for TensorType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for i64 {}
    impl Sealed for i32 {}
    impl Sealed for f32 {}
    impl Sealed for u8 {}
    impl Sealed for super::Bf16 {}
}

/// An element type a buffer can be viewed as: `i64`, `i32`, `f32`, `u8` or
/// [`Bf16`].
///
/// Sealed: each is plain old data (every bit pattern is a valid value, no
/// padding, alignment ≤ 64), which is what makes the typed views sound.
pub trait Element:
    sealed::Sealed + Copy + Default + PartialEq + fmt::Debug + Send + Sync + 'static
{
    /// The tensor type with this element.
    const DTYPE: TensorType;
}

impl Element for i64 {
    const DTYPE: TensorType = TensorType::I64;
}
impl Element for i32 {
    const DTYPE: TensorType = TensorType::I32;
}
impl Element for f32 {
    const DTYPE: TensorType = TensorType::F32;
}
impl Element for u8 {
    const DTYPE: TensorType = TensorType::U8;
}
impl Element for Bf16 {
    const DTYPE: TensorType = TensorType::BF16;
}

/// A bfloat16 value: the upper 16 bits of an f32 (XLA's and JAX's
/// `bfloat16`), rounded to nearest, ties to even.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[repr(transparent)]
pub struct Bf16(pub u16);

impl Bf16 {
    /// `v` rounded to the nearest bfloat16 (ties to even); a NaN stays a
    /// (quiet) NaN, never rounds to infinity.
    pub fn from_f32(v: f32) -> Self {
        let bits = v.to_bits();
        if v.is_nan() {
            return Bf16((bits >> 16) as u16 | 0x40);
        }
        let round = 0x7fff + ((bits >> 16) & 1);
        Bf16((bits.wrapping_add(round) >> 16) as u16)
    }

    /// The f32 of the same value (exact).
    pub fn to_f32(self) -> f32 {
        f32::from_bits(u32::from(self.0) << 16)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bf16_rounds_to_nearest_even_and_keeps_nan() {
        assert_eq!(Bf16::from_f32(1.0).0, 0x3f80);
        assert_eq!(Bf16::from_f32(-2.5).to_f32(), -2.5);
        // 1 + 2^-8 is halfway between 1 and 1 + 2^-7: ties to even (1.0);
        // 1 + 3·2^-8 is halfway up from an odd mantissa: rounds up.
        assert_eq!(Bf16::from_f32(1.0 + 1.0 / 256.0).0, 0x3f80);
        assert_eq!(Bf16::from_f32(1.0 + 3.0 / 256.0).0, 0x3f82);
        assert_eq!(Bf16::from_f32(1.0 + 1.5 / 256.0).0, 0x3f81);
        assert!(Bf16::from_f32(f32::NAN).to_f32().is_nan());
        assert_eq!(Bf16::from_f32(f32::MAX).to_f32(), f32::INFINITY);
    }
}
