//! `normalize(feature, mean, std)`: a dense feature's tensor (an image's u8
//! pixels, or fixed-length numbers) becomes float32 `(x - mean) / std` on
//! the workers, per channel (the last dimension) or with scalars, as f32
//! or bfloat16. It runs on the assembled batch, so padding rows are
//! normalized zeros (`-mean / std`), masked by `real_rows`.

use crate::batch::{AlignedBuf, Batch, BatchShape, Bf16, BufferPool, Element, Tensor, TensorType};
use crate::spec::{DType, FeatureSpec};

use super::error::PipelineError;
use super::parsed::{ParsedStep, Stage};

/// One feature to normalize.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Normalize {
    pub feature: String,
    pub mean: Vec<f32>,
    pub std: Vec<f32>,
    /// F32 or BF16.
    pub dtype: TensorType,
}

impl Normalize {
    /// Checks the feature against the spec and the batch shape (its last
    /// dimension is the channel count a per-channel list must match).
    pub(crate) fn check(
        &self,
        spec: &FeatureSpec,
        shape: &BatchShape,
    ) -> Result<(), PipelineError> {
        let bad =
            |why: String| PipelineError::Config(format!("normalize({:?}): {why}", self.feature));
        let def = spec
            .get(&self.feature)
            .ok_or_else(|| bad("no such feature in the spec".into()))?;
        let image = spec.image_of(&self.feature).is_some();
        if def.fixed_count().is_none() || (def.dtype == DType::Bytes && !image) {
            return Err(bad(
                "only images and fixed-length numeric features can be normalized".into(),
            ));
        }
        if !matches!(self.dtype, TensorType::F32 | TensorType::BF16) {
            return Err(bad(format!(
                "the output is f32 or bf16, not {}",
                self.dtype
            )));
        }
        let t = shape
            .get(&self.feature)
            .ok_or_else(|| bad("the feature is not in the batch (skipped?)".into()))?;
        let channels = t
            .shape
            .last()
            .copied()
            .filter(|_| t.shape.len() > 1)
            .unwrap_or(1);
        for (what, list) in [("mean", &self.mean), ("std", &self.std)] {
            if list.len() != 1 && list.len() != channels {
                return Err(bad(format!(
                    "{what} has {} values: give 1, or one per channel ({channels})",
                    list.len()
                )));
            }
        }
        if let Some(s) = self.std.iter().find(|s| !s.is_finite() || **s == 0.0) {
            return Err(bad(format!("std {s} must be finite and non-zero")));
        }
        if self.mean.iter().any(|m| !m.is_finite()) {
            return Err(bad("mean must be finite".into()));
        }
        Ok(())
    }

    /// The shape after normalizing: the feature's type changes.
    pub(crate) fn reshape(&self, shape: &mut BatchShape) {
        for t in &mut shape.tensors {
            if t.name == self.feature {
                t.dtype = self.dtype;
            }
        }
    }

    /// Replaces the feature's tensor in `batch` by its normalized values.
    pub(crate) fn apply(&self, batch: &mut Batch, pool: &BufferPool) {
        let Some((_, tensor)) = batch.tensors.iter_mut().find(|(n, _)| *n == self.feature) else {
            return;
        };
        let shape = tensor.shape().to_vec();
        let channels = match (self.mean.len(), self.std.len()) {
            (1, 1) => 1,
            _ => shape.last().copied().unwrap_or(1).max(1),
        };
        let at = |list: &[f32], c: usize| list.get(c).or(list.first()).copied().unwrap_or(0.0);
        let norm = |x: f32, c: usize| (x - at(&self.mean, c)) / at(&self.std, c);
        let bf16 = self.dtype == TensorType::BF16;
        // Written straight into a pooled buffer: no vector of the floats
        // first (an image batch's floats are tens of MB: allocating them
        // fresh cost a page fault per 4 KiB, and a copy).
        let data = match tensor.dtype() {
            TensorType::U8 => {
                // Per channel, 256 values at most: a table, computed exactly.
                let values = tensor.values::<u8>().unwrap_or_default();
                let f32s = (0..channels).flat_map(|c| (0..=255u8).map(move |x| (x, c)));
                if bf16 {
                    let table: Vec<Bf16> = f32s
                        .map(|(x, c)| Bf16::from_f32(norm(f32::from(x), c)))
                        .collect();
                    look_up(values, &table, channels, pool)
                } else {
                    let table: Vec<f32> = f32s.map(|(x, c)| norm(f32::from(x), c)).collect();
                    look_up(values, &table, channels, pool)
                }
            }
            TensorType::F32 => emit(tensor.values::<f32>(), channels, bf16, pool, norm),
            TensorType::I64 => emit(tensor.values::<i64>(), channels, bf16, pool, |x, c| {
                norm(x as f32, c)
            }),
            TensorType::I32 => emit(tensor.values::<i32>(), channels, bf16, pool, |x, c| {
                norm(x as f32, c)
            }),
            TensorType::BF16 => emit(tensor.values::<Bf16>(), channels, bf16, pool, |x, c| {
                norm(x.to_f32(), c)
            }),
        };
        if let Ok(t) = Tensor::new(self.dtype, shape, data) {
            *tensor = t;
        }
    }
}

/// `f(value, its channel)` of each of `values` (the last dimension holds
/// `channels`) into `out`.
fn per_channel<T: Copy, U>(
    values: &[T],
    out: &mut [U],
    channels: usize,
    f: impl Fn(T, usize) -> U,
) {
    let mut outs = out.chunks_exact_mut(channels);
    let mut ins = values.chunks_exact(channels);
    for (o, v) in (&mut outs).zip(&mut ins) {
        for (c, (o, &x)) in o.iter_mut().zip(v).enumerate() {
            *o = f(x, c);
        }
    }
    // Whole pixels always (the length is a multiple of the channels); a
    // rest would start at channel 0.
    for (c, (o, &x)) in outs
        .into_remainder()
        .iter_mut()
        .zip(ins.remainder())
        .enumerate()
    {
        *o = f(x, c);
    }
}

/// u8 values through `table` (256 entries per channel) into a pooled buffer.
fn look_up<U: Element>(
    values: &[u8],
    table: &[U],
    channels: usize,
    pool: &BufferPool,
) -> AlignedBuf {
    let mut buf = pool.take_stale(values.len() * size_of::<U>());
    let out = buf.as_mut_slice::<U>();
    match channels {
        1 => look_up_n::<1, U>(values, table, out),
        3 => look_up_n::<3, U>(values, table, out),
        4 => look_up_n::<4, U>(values, table, out),
        _ => per_channel(values, out, channels, |x, c| {
            table[c * 256 + usize::from(x)]
        }),
    }
    buf
}

/// [`look_up`] with the channel count known: one 256-entry table per
/// channel, indexed by a byte, so no index is checked.
fn look_up_n<const C: usize, U: Element>(values: &[u8], table: &[U], out: &mut [U]) {
    let tables: [&[U; 256]; C] =
        std::array::from_fn(|c| table[c * 256..][..256].try_into().expect("256 entries"));
    let mut outs = out.chunks_exact_mut(C);
    let mut ins = values.chunks_exact(C);
    for (o, v) in (&mut outs).zip(&mut ins) {
        for k in 0..C {
            o[k] = tables[k][usize::from(v[k])];
        }
    }
    for (c, (o, &x)) in outs
        .into_remainder()
        .iter_mut()
        .zip(ins.remainder())
        .enumerate()
    {
        *o = tables[c][usize::from(x)];
    }
}

/// `f(value, channel)` of each of `values` into a pooled buffer of f32, or
/// of bfloat16 when `bf16`.
fn emit<T: Copy>(
    values: Option<&[T]>,
    channels: usize,
    bf16: bool,
    pool: &BufferPool,
    f: impl Fn(T, usize) -> f32,
) -> AlignedBuf {
    let values = values.unwrap_or_default();
    if bf16 {
        let mut buf = pool.take_stale(values.len() * size_of::<Bf16>());
        per_channel(values, buf.as_mut_slice::<Bf16>(), channels, |x, c| {
            Bf16::from_f32(f(x, c))
        });
        buf
    } else {
        let mut buf = pool.take_stale(values.len() * size_of::<f32>());
        per_channel(values, buf.as_mut_slice::<f32>(), channels, f);
        buf
    }
}

/// `normalize(feature, mean, std)`: an assembled step, one per feature.
impl ParsedStep for Normalize {
    fn stage(&self) -> Stage {
        Stage::Assembled
    }
    fn slot(&self) -> Option<String> {
        Some(format!("normalize {}", self.feature))
    }
    fn shape(&self, spec: &FeatureSpec, shape: &mut BatchShape) -> Result<(), PipelineError> {
        self.check(spec, shape)?;
        self.reshape(shape);
        Ok(())
    }
    fn assembled(&self, batch: &mut Batch, pool: &BufferPool) {
        self.apply(batch, pool)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::ImageSpec;

    fn batch(t: Tensor) -> Batch {
        Batch::new(vec![("x".into(), t)], 1)
    }

    #[test]
    fn u8_pixels_per_channel_and_scalar() {
        let pool = BufferPool::default();
        let n = Normalize {
            feature: "x".into(),
            mean: vec![10.0, 20.0],
            std: vec![2.0, 4.0],
            dtype: TensorType::F32,
        };
        let mut b = batch(Tensor::from_slice(&[1, 2, 2], &[10u8, 20, 14, 0]).unwrap());
        n.apply(&mut b, &pool);
        assert_eq!(b["x"].values::<f32>().unwrap(), [0.0, 0.0, 2.0, -5.0]);
        let n = Normalize {
            mean: vec![127.5],
            std: vec![127.5],
            dtype: TensorType::BF16,
            ..n
        };
        let mut b = batch(Tensor::from_slice(&[1, 3], &[0u8, 255, 51]).unwrap());
        n.apply(&mut b, &pool);
        let got: Vec<f32> = b["x"]
            .values::<Bf16>()
            .unwrap()
            .iter()
            .map(|v| v.to_f32())
            .collect();
        // (51 - 127.5) / 127.5 = -0.6, to bf16: -0.6015625.
        assert_eq!(got, [-1.0, 1.0, -0.6015625]);
        assert_eq!(b["x"].shape(), [1, 3]);
    }

    #[test]
    fn numbers_are_normalized_and_bad_settings_refused() {
        let pool = BufferPool::default();
        let n = Normalize {
            feature: "x".into(),
            mean: vec![1.0],
            std: vec![0.5],
            dtype: TensorType::F32,
        };
        let mut b = batch(Tensor::from_slice(&[1, 2], &[3i64, -1]).unwrap());
        n.apply(&mut b, &pool);
        assert_eq!(b["x"].values::<f32>().unwrap(), [4.0, -4.0]);

        let spec = FeatureSpec::new()
            .image("x", ImageSpec::new(2, 2, 3))
            .var_len("ids", DType::Int64);
        let shape = BatchShape {
            tensors: vec![crate::batch::TensorShape {
                name: "x".into(),
                dtype: TensorType::U8,
                shape: vec![4, 2, 2, 3],
            }],
        };
        let err = |n: &Normalize| n.check(&spec, &shape).unwrap_err().to_string();
        let two = Normalize {
            mean: vec![1.0, 2.0],
            ..n.clone()
        };
        assert_eq!(
            err(&two),
            "invalid pipeline: normalize(\"x\"): mean has 2 values: give 1, or one per channel (3)"
        );
        let zero = Normalize {
            std: vec![0.0],
            ..n.clone()
        };
        assert_eq!(
            err(&zero),
            "invalid pipeline: normalize(\"x\"): std 0 must be finite and non-zero"
        );
        let ids = Normalize {
            feature: "ids".into(),
            ..n.clone()
        };
        assert_eq!(
            err(&ids),
            "invalid pipeline: normalize(\"ids\"): only images and fixed-length numeric \
             features can be normalized"
        );
        n.check(&spec, &shape).unwrap();
    }
}
